package bridge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k3/engine/chat"
)

// Conversations keeps one JSONL history file per conversation in a folder;
// the file name (without .jsonl) is the conversation's title.
type Conversations struct {
	Dir string
}

// Ext is the history file extension.
const Ext = ".jsonl"

// List returns the titles, most recently changed first.
func (c Conversations) List() ([]string, error) {
	ents, err := os.ReadDir(c.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	type item struct {
		name string
		mod  time.Time
	}
	var items []item
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), Ext) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		items = append(items, item{strings.TrimSuffix(e.Name(), Ext), info.ModTime()})
	}
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].mod.Equal(items[j].mod) {
			return items[i].mod.After(items[j].mod)
		}
		return items[i].name < items[j].name
	})
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.name
	}
	return out, nil
}

func (c Conversations) path(title string) string { return filepath.Join(c.Dir, title+Ext) }

// cleanTitle makes a title safe as a file name.
func cleanTitle(t string) (string, error) {
	t = strings.TrimSpace(t)
	t = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 || r == ':' {
			return '-'
		}
		return r
	}, t)
	if t == "" || t == "." || t == ".." || strings.HasPrefix(t, ".") {
		return "", fmt.Errorf("a conversation needs a name that does not start with a dot")
	}
	if len(t) > 120 {
		t = t[:120]
	}
	return t, nil
}

// New creates an empty conversation with a free title based on want.
func (c Conversations) New(want string) (string, error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", fmt.Errorf("cannot create the conversations folder %s: %w", c.Dir, err)
	}
	base, err := cleanTitle(want)
	if err != nil {
		base = "Conversation"
	}
	title := base
	for i := 2; ; i++ {
		if _, err := os.Stat(c.path(title)); errors.Is(err, os.ErrNotExist) {
			break
		}
		title = fmt.Sprintf("%s %d", base, i)
	}
	return title, chat.SaveHistory(c.path(title), nil)
}

// Load reads a conversation.
func (c Conversations) Load(title string) ([]chat.Message, error) {
	return chat.LoadHistory(c.path(title))
}

// Save writes a conversation atomically.
func (c Conversations) Save(title string, h []chat.Message) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return err
	}
	return chat.SaveHistory(c.path(title), h)
}

// Rename gives a conversation a new title; the new title must be free.
func (c Conversations) Rename(from, to string) (string, error) {
	to, err := cleanTitle(to)
	if err != nil {
		return "", err
	}
	if to == from {
		return to, nil
	}
	if _, err := os.Stat(c.path(to)); err == nil {
		return "", fmt.Errorf("there is already a conversation called %q; choose another name", to)
	}
	if err := os.Rename(c.path(from), c.path(to)); err != nil {
		return "", fmt.Errorf("renaming %q failed: %w", from, err)
	}
	return to, nil
}

// Delete removes a conversation's file.
func (c Conversations) Delete(title string) error {
	err := os.Remove(c.path(title))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
