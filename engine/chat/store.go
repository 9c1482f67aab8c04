package chat

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k3/storage/atomicfile"
)

// Store keeps one JSONL history file per conversation in a folder (the
// desktop app's conversations); the file name (without .jsonl) is the
// conversation's title. The files are history files as k3 chat --history
// writes them (SaveHistory, LockHistory): either can open the other's.
type Store struct {
	Dir string
}

// Ext is the history file extension.
const Ext = ".jsonl"

// List returns the titles, most recently changed first.
func (c Store) List() ([]string, error) {
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

func (c Store) path(title string) string { return filepath.Join(c.Dir, title+Ext) }

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
func (c Store) New(want string) (string, error) {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
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
	return title, SaveHistory(c.path(title), nil)
}

// Load reads a conversation.
func (c Store) Load(title string) ([]Message, error) {
	return LoadHistory(c.path(title))
}

// Save writes a conversation atomically.
func (c Store) Save(title string, h []Message) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	return SaveHistory(c.path(title), h)
}

// Rename gives a conversation a new title; the new title must be free.
// Characters a file name cannot hold are replaced, and the error says so
// when that happened (the rename is done).
func (c Store) Rename(from, to string) (string, error) {
	want := strings.TrimSpace(to)
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
	if err := RenameHistory(c.path(from), c.path(to)); err != nil {
		if errors.Is(err, ErrHistoryInUse) {
			return "", fmt.Errorf("%q is open in another k3 (a chat or another window): close it there, then rename it", from)
		}
		return "", fmt.Errorf("renaming %q failed: %w", from, err)
	}
	if err := os.Rename(c.optionsPath(from), c.optionsPath(to)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return to, fmt.Errorf("the conversation's settings could not follow the rename: %w", err)
	}
	if want != to && len(want) <= 120 {
		return to, &RenamedError{Title: to}
	}
	return to, nil
}

// RenamedError says that a title was changed to be a file name.
type RenamedError struct{ Title string }

func (e *RenamedError) Error() string {
	return fmt.Sprintf("renamed to %q: / \\ and : cannot be in a conversation's name", e.Title)
}

// Delete removes a conversation's file, its lock file and its settings;
// it is refused while another k3 has the conversation open.
func (c Store) Delete(title string) error {
	if err := RemoveHistory(c.path(title)); err != nil {
		if errors.Is(err, ErrHistoryInUse) {
			return fmt.Errorf("%q is open in another k3 (a chat or another window): close it there, then delete it", title)
		}
		return err
	}
	os.Remove(c.optionsPath(title))
	return nil
}

// Hold takes a conversation's lock for as long as it is open here, so
// another k3 (k3 chat, a second app) is refused it instead of the two
// writing over each other's turns. Release it when the conversation is
// closed. When another k3 holds it the error wraps ErrHistoryInUse.
func (c Store) Hold(title string) (*HistoryLock, error) {
	return LockHistory(c.path(title))
}

// SweepLocks removes the lock files that older versions left beside
// conversations renamed or deleted since.
func (c Store) SweepLocks() { RemoveStaleLocks(c.Dir) }

func (c Store) optionsPath(title string) string {
	return filepath.Join(c.Dir, title+".options.json")
}

// LoadOptions reads a conversation's own settings (a new conversation
// starts with the app's, Settings.ConvDefaults); ok is false when it has
// none of its own.
func (c Store) LoadOptions(title string) (o Options, ok bool, err error) {
	raw, err := os.ReadFile(c.optionsPath(title))
	if errors.Is(err, os.ErrNotExist) {
		return o, false, nil
	}
	if err != nil {
		return o, false, err
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return o, false, fmt.Errorf("%s: %w", c.optionsPath(title), err)
	}
	return o, true, nil
}

// SaveOptions writes a conversation's settings atomically.
func (c Store) SaveOptions(title string, o Options) error {
	raw, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WritePrivate(c.optionsPath(title), raw)
}

// AutoTitlePrefix starts the title a new conversation gets; a conversation
// still called so is titled from its first message.
const AutoTitlePrefix = "Conversation "

// TitleFrom makes a title of a first message: its first line, cut at a word
// before 48 characters.
func TitleFrom(msg string) string {
	line := strings.TrimSpace(strings.SplitN(strings.TrimSpace(msg), "\n", 2)[0])
	r := []rune(line)
	if len(r) <= 48 {
		return line
	}
	cut := string(r[:48])
	if i := strings.LastIndexByte(cut, ' '); i > 16 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,.;:") + "…"
}

// IsAutoTitle reports whether title is the one a conversation gets from
// its first message msg: TitleFrom(msg) as a file name, or that with the
// number that told it from another conversation's ("… 2"). A title the
// user gave is not.
func IsAutoTitle(title, msg string) bool {
	base, err := cleanTitle(TitleFrom(msg))
	if err != nil {
		return false
	}
	n, ok := strings.CutPrefix(title, base)
	if !ok {
		return false
	}
	if n == "" {
		return true
	}
	n, ok = strings.CutPrefix(n, " ")
	return ok && n != "" && n[0] != '0' && strings.Trim(n, "0123456789") == ""
}

// Search returns the titles (in List order) whose title or messages contain
// query, case-insensitively.
func (c Store) Search(query string) ([]string, error) {
	titles, err := c.List()
	q := strings.ToLower(strings.TrimSpace(query))
	if err != nil || q == "" {
		return titles, err
	}
	var out []string
	for _, t := range titles {
		if strings.Contains(strings.ToLower(t), q) {
			out = append(out, t)
			continue
		}
		h, err := c.Load(t)
		if err != nil {
			continue
		}
		for _, m := range h {
			if strings.Contains(strings.ToLower(m.Content), q) || strings.Contains(strings.ToLower(m.ReasoningContent), q) {
				out = append(out, t)
				break
			}
		}
	}
	return out, nil
}

// Markdown is a conversation as a Markdown document (for export).
func Markdown(title string, h []Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", title)
	for _, m := range h {
		who := map[string]string{"system": "System prompt", "user": "You", "assistant": "Kimi K3"}[m.Role]
		if who == "" {
			who = m.Role
		}
		fmt.Fprintf(&b, "\n## %s\n\n", who)
		for i, img := range m.Images {
			// embedded, so the file is the whole conversation
			fmt.Fprintf(&b, "![picture %d](data:%s;base64,%s)\n\n", i+1, http.DetectContentType(img), base64.StdEncoding.EncodeToString(img))
		}
		if m.ReasoningContent != "" {
			b.WriteString("<details><summary>Thinking</summary>\n\n")
			b.WriteString(strings.TrimSpace(m.ReasoningContent))
			b.WriteString("\n\n</details>\n\n")
		}
		b.WriteString(strings.TrimSpace(m.Content))
		b.WriteString("\n")
		switch m.Cut {
		case CutStopped:
			b.WriteString("\n*(stopped)*\n")
		case CutTurnCap:
			b.WriteString("\n*(reached the reply length limit)*\n")
		}
	}
	return b.String()
}
