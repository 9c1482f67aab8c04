package bridge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
)

func msg(role, content string) chat.Message { return chat.Message{Role: role, Content: content} }

func contents(h []chat.Message) []string {
	var out []string
	for _, m := range h {
		out = append(out, m.Content)
	}
	return out
}

// Regenerate twice, edit the question, switch back and forth: every
// version stays, the one shown is the transcript, and the history file
// keeps them all.
func TestVersionsRegenerateEditSwitch(t *testing.T) {
	h := []chat.Message{msg("user", "q"), msg("assistant", "a1")}

	// Regenerate: the reply goes aside until the new one is there
	before, f := newFork(h, 1)
	assert.Equal(t, []string{"q"}, contents(before))
	h = f.attach(append(before, msg("assistant", "a2")))
	assert.Equal(t, []string{"q", "a2"}, contents(h))
	shown, n := versionsAt(h, 1)
	assert.Equal(t, [2]int{1, 2}, [2]int{shown, n})

	before, f = newFork(h, 1)
	h = f.attach(append(before, msg("assistant", "a3")))
	shown, n = versionsAt(h, 1)
	assert.Equal(t, [2]int{2, 3}, [2]int{shown, n})

	// back to the first reply, and on to the second
	h = showVersion(h, 1, 0)
	assert.Equal(t, []string{"q", "a1"}, contents(h))
	shown, n = versionsAt(h, 1)
	assert.Equal(t, [2]int{0, 3}, [2]int{shown, n})
	h = showVersion(h, 1, 1)
	assert.Equal(t, []string{"q", "a2"}, contents(h))
	assert.Equal(t, h, showVersion(h, 1, 3), "no such version: unchanged")

	// edit the question: the whole branch (with its three replies) is a
	// version of the question
	before, f = newFork(h, 0)
	assert.Empty(t, before)
	h = f.attach(append(before, msg("user", "q edited")))
	h = append(h, msg("assistant", "b1"))
	shown, n = versionsAt(h, 0)
	assert.Equal(t, [2]int{1, 2}, [2]int{shown, n})
	_, n = versionsAt(h, 1)
	assert.Equal(t, 1, n, "the new branch's reply has one version")

	h = showVersion(h, 0, 0)
	assert.Equal(t, []string{"q", "a2"}, contents(h), "the old branch, at the reply it showed")
	shown, n = versionsAt(h, 1)
	assert.Equal(t, [2]int{1, 3}, [2]int{shown, n}, "with its replies")

	// it all survives the history file
	path := t.TempDir() + "/h.jsonl"
	require.NoError(t, chat.SaveHistory(path, h))
	got, err := chat.LoadHistory(path)
	require.NoError(t, err)
	assert.Equal(t, h, got)
	got = showVersion(got, 0, 1)
	assert.Equal(t, []string{"q edited", "b1"}, contents(got))
}

// An edit that is cancelled, and a Regenerate that failed before it wrote
// anything, bring back what was shown, versions and all.
func TestForkRestore(t *testing.T) {
	h := []chat.Message{msg("user", "q"), msg("assistant", "a1")}
	before, f := newFork(h, 1)
	h = f.attach(append(before, msg("assistant", "a2")))
	h = showVersion(h, 1, 0)
	saved := h

	before, f = newFork(h, 1)
	assert.Equal(t, before, f.attach(before), "nothing new yet: nothing attached")
	h = f.restore(before)
	assert.Equal(t, saved, h)

	before, f = newFork(h, 0)
	assert.Equal(t, saved, f.restore(before))
	assert.Equal(t, []string{"q", "a1"}, contents(saved), "the slices given are not changed")
}

func TestForkReplaced(t *testing.T) {
	h := []chat.Message{{Role: "user", Content: "first"}, {Role: "assistant", Content: "reply"}}
	_, f := newFork(h, 0)
	assert.Equal(t, h[0], f.replaced())
	h2 := f.attach([]chat.Message{{Role: "user", Content: "edited"}})
	h2 = showVersion(h2, 0, 0) // the first version shown again
	_, f = newFork(h2, 0)
	assert.Equal(t, "first", f.replaced().Content, "the version shown when the edit started")
	_, f = newFork(h, 2)
	assert.Equal(t, chat.Message{}, f.replaced(), "nothing at the end")
}
