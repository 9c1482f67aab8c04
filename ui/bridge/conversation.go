package bridge

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k3/engine/chat"
)

// Conversation is the conversation open in the app, without a window: its
// title, its messages (the version shown), its own settings, the new
// version an edit or a Regenerate is making (the fork), its history lock,
// and saving. The chat view shows it and calls it on the UI goroutine;
// Store is where the conversations are (List, Search, New, Rename, Delete
// of any of them).
type Conversation struct {
	Store chat.Store
	// Title is the open conversation's title ("" when none is open).
	Title string
	// History is its messages: the version shown.
	History []chat.Message
	// Opts are its own settings.
	Opts chat.Options

	// fork holds the versions at the message an edit or a Regenerate is
	// replacing, until the new version has its first message
	fork *versionFork
	// editing: a message is back in the message box to be changed (fork
	// holds its versions)
	editing bool
	// lock is Title's history lock, held while it is open here (nil when
	// another k3 has it: what is written then goes beside it)
	lock *chat.HistoryLock
	// Pictures wait for the next user message (AttachPicture)
	Pictures [][]byte
}

// NewConversation opens none yet; its conversations are the history files
// in dir.
func NewConversation(dir string) *Conversation {
	return &Conversation{Store: chat.Store{Dir: dir}}
}

// Open makes title the open conversation: its history, and its own
// settings (defaults when it has none). A history that cannot be read
// changes nothing, and err says why. notice says when another k3 has it
// open too.
func (c *Conversation) Open(title string, defaults chat.Options) (notice string, err error) {
	h, err := c.Store.Load(title)
	if err != nil {
		return "", err
	}
	opts, ok, err := c.Store.LoadOptions(title)
	if err != nil || !ok {
		opts = defaults
	}
	notice = c.hold(title)
	c.Title, c.History, c.Opts = title, h, opts
	c.EndEdit()
	return notice, nil
}

// hold takes title's history lock (dropping the one held before), so no
// other k3 writes it while it is open here; it returns the notice to show
// when another k3 has it.
func (c *Conversation) hold(title string) string {
	c.Release()
	l, err := c.Store.Hold(title)
	if err != nil {
		if errors.Is(err, chat.ErrHistoryInUse) {
			return "This conversation is open in another k3 too: what you write here is saved beside it, as a copy, so nothing is lost."
		}
		return Explain(err)
	}
	c.lock = l
	return ""
}

// Release drops the history lock held.
func (c *Conversation) Release() {
	c.lock.Release()
	c.lock = nil
}

// New creates an empty conversation with a free title based on want, and
// the system prompt sys when it is not empty; it is not opened. A title
// with an error says that the system prompt could not be saved.
func (c *Conversation) New(want, sys string) (string, error) {
	t, err := c.Store.New(want)
	if err != nil {
		return "", err
	}
	if sys = strings.TrimSpace(sys); sys != "" {
		return t, c.Store.Save(t, []chat.Message{{Role: "system", Content: sys}})
	}
	return t, nil
}

// Rename gives a conversation a new title (the open one keeps being the
// open one). A *chat.RenamedError says the title was changed to be a file
// name; the rename is done then.
func (c *Conversation) Rename(from, to string) (string, error) {
	t, err := c.Store.Rename(from, to)
	if err != nil && !errors.As(err, new(*chat.RenamedError)) {
		return "", err
	}
	if c.Title == from {
		c.Title = t
	}
	return t, err
}

// Delete removes a conversation; when it is the open one, none is open
// after (its lock went with the file).
func (c *Conversation) Delete(title string) error {
	if err := c.Store.Delete(title); err != nil {
		return err
	}
	if c.Title == title {
		c.Release() // dropped with the file
		c.Title, c.History = "", nil
	}
	return nil
}

// Save writes the history. When another k3 changed or holds the file, the
// conversation was written beside it (a *chat.ConflictError): it continues
// there, under the new Title, and moved is true.
func (c *Conversation) Save() (moved bool, err error) {
	err = c.Store.Save(c.Title, c.History)
	var ce *chat.ConflictError
	if errors.As(err, &ce) {
		c.Title = strings.TrimSuffix(filepath.Base(ce.SavedAs), chat.Ext)
		c.hold(c.Title)
		return true, err
	}
	return false, err
}

// SaveOptions writes the conversation's own settings (none open: nothing).
func (c *Conversation) SaveOptions() error {
	if c.Title == "" {
		return nil
	}
	return c.Store.SaveOptions(c.Title, c.Opts)
}

// SystemPrompt is the conversation's system prompt ("" for none).
func (c *Conversation) SystemPrompt() string {
	if len(c.History) > 0 && c.History[0].Role == "system" {
		return c.History[0].Content
	}
	return ""
}

// SetSystemPrompt puts sys at the head of the conversation (or removes the
// system prompt when empty); it reports whether that changed anything.
func (c *Conversation) SetSystemPrompt(sys string) bool {
	sys = strings.TrimSpace(sys)
	has := len(c.History) > 0 && c.History[0].Role == "system"
	switch {
	case has && sys == "":
		c.History = c.History[1:]
	case has:
		c.History[0].Content = sys
	case sys != "":
		c.History = append([]chat.Message{{Role: "system", Content: sys}}, c.History...)
	default:
		return false
	}
	return true
}

// TitleFrom renames a conversation still called by its date after text,
// its first message; so too one whose first message is being edited while
// its title is still the one made from that message (a title the user
// gave stays). It reports whether the title changed.
func (c *Conversation) TitleFrom(text string) bool {
	if slices.ContainsFunc(c.History, func(m chat.Message) bool { return m.Role == "user" }) {
		return false
	}
	auto := strings.HasPrefix(c.Title, chat.AutoTitlePrefix) ||
		c.editing && chat.IsAutoTitle(c.Title, c.fork.replaced().Content)
	if !auto || chat.IsAutoTitle(c.Title, text) {
		return false
	}
	t, err := c.Store.Rename(c.Title, c.freeTitle(chat.TitleFrom(text)))
	if err != nil && !errors.As(err, new(*chat.RenamedError)) {
		return false
	}
	c.Title = t
	return true
}

// freeTitle is want, or want 2, 3, ... when a conversation has that title.
func (c *Conversation) freeTitle(want string) string {
	titles, _ := c.Store.List()
	t := want
	for i := 2; slices.Contains(titles, t); i++ {
		t = fmt.Sprintf("%s %d", want, i)
	}
	return t
}

// AddUser adds the user's message. An edit in progress ends with it: the
// edited message is a new version where the edit started.
func (c *Conversation) AddUser(text string) {
	c.History = append(c.History, chat.Message{Role: "user", Content: text, Images: c.Pictures})
	c.Pictures = nil
	if c.editing {
		c.History = c.fork.attach(c.History)
		c.fork = nil
		c.EndEdit()
	}
}

// Fork starts a new version at message i (Regenerate): the messages from
// i on are kept aside as versions until the new one has its first message
// (AddReply), or come back (DropReply).
func (c *Conversation) Fork(i int) { c.History, c.fork = newFork(c.History, i) }

// AddReply adds the assistant's reply; with a fork it is the newest
// version there. It returns the message the versions are at (-1: none).
func (c *Conversation) AddReply(msg chat.Message) (versionsAt int) {
	c.History = append(c.History, msg)
	if c.fork == nil {
		return -1
	}
	at := c.fork.At
	c.History = c.fork.attach(c.History)
	c.fork = nil
	return at
}

// DropReply is a turn that wrote nothing to keep: a fork brings back the
// conversation as it was. It returns the message from which the history
// changed (-1: it did not).
func (c *Conversation) DropReply() (at int) {
	if c.fork == nil {
		return -1
	}
	at = c.fork.At
	c.History = c.fork.restore(c.History)
	c.fork = nil
	return at
}

// Edit takes message i back to be changed and sent again: the conversation
// from there on is kept as a version, and CancelEdit brings it back. It
// returns the message's text.
func (c *Conversation) Edit(i int) string {
	text := c.History[i].Content
	c.Fork(i)
	c.editing = true
	return text
}

// Editing reports whether a message is being edited.
func (c *Conversation) Editing() bool { return c.editing }

// CancelEdit brings back the conversation as it was before Edit and
// returns the message from which it changed (-1: no edit).
func (c *Conversation) CancelEdit() int {
	if !c.editing {
		return -1
	}
	i := c.fork.At
	c.History = c.fork.restore(c.History)
	c.EndEdit()
	return i
}

// EndEdit leaves editing, keeping the conversation as it is.
func (c *Conversation) EndEdit() {
	if c.editing {
		c.fork = nil
	}
	c.editing = false
}

// Versions is the version shown at message i and how many there are.
func (c *Conversation) Versions(i int) (shown, count int) { return versionsAt(c.History, i) }

// SwitchVersion shows the version delta away from the one shown at
// message i; it reports whether there was one.
func (c *Conversation) SwitchVersion(i, delta int) bool {
	shown, n := versionsAt(c.History, i)
	if k := shown + delta; k >= 0 && k < n {
		c.History = showVersion(c.History, i, k)
		return true
	}
	return false
}
