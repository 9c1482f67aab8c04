package chat

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Audit D5 (rows 4.24, 4.25): what encoding/json would silently change is
// refused with its line number, and the file is left as it was.
func TestHistoryRefusesWhatARewriteWouldChange(t *testing.T) {
	ok := `{"role":"user","content":"hi"}` + "\n"
	for body, want := range map[string]string{
		ok + "{\"role\":\"assistant\",\"content\":\"\xff\xfe\"}\n":                 "line 2: invalid UTF-8",
		ok + `{"role":"assistant","content":"first","content":"second"}` + "\n":    `line 2: duplicate key "content"`,
		ok + ok + `{"role":"user","role":"user","content":"x"}` + "\n":             `line 3: duplicate key "role"`,
		`{"role":"user","content":"\udc00"}`:                                       "line 1: a lone UTF-16 surrogate",
		ok + "\n" + `{"role":"assistant","content":"a","cut":"stopped","cut":"x"}`: `line 3: duplicate key "cut"`,
	} {
		path := filepath.Join(t.TempDir(), "h.jsonl")
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
		_, err := LoadHistory(path)
		require.Error(t, err, "%q", body)
		assert.Contains(t, err.Error(), want)
		assert.Contains(t, err.Error(), "the file was not changed")
		raw, _ := os.ReadFile(path)
		assert.Equal(t, body, string(raw))
	}
}

// Audit D1 (row 7.5): a second writer is refused while the first holds the
// history, and a save never overwrites turns it did not read.
func TestHistoryLockRefusesASecondWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	a, err := LockHistory(path)
	require.NoError(t, err)
	_, err = LockHistory(path)
	require.ErrorIs(t, err, ErrHistoryInUse)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "in use by another k3 (process")
	// the holder writes as usual
	h := []Message{{Role: "user", Content: "from A"}}
	require.NoError(t, SaveHistory(path, h))
	a.Release()
	b, err := LockHistory(path)
	require.NoError(t, err, "free after Release")
	b.Release()
}

func TestHistorySaveNeverOverwritesAnotherWritersTurns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.jsonl")
	one := []Message{{Role: "user", Content: "one"}, {Role: "assistant", Content: "1"}}
	require.NoError(t, SaveHistory(path, one))
	mine, err := LoadHistory(path)
	require.NoError(t, err)

	// another program appends a turn after we read the file
	other := append(append([]Message{}, one...), Message{Role: "user", Content: "theirs"}, Message{Role: "assistant", Content: "t"})
	theirs, err := EncodeHistory(other)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, theirs, 0o644))

	mine = append(mine, Message{Role: "user", Content: "mine"}, Message{Role: "assistant", Content: "m"})
	err = SaveHistory(path, mine)
	var ce *ConflictError
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Equal(t, filepath.Join(dir, "h.conflict-1.jsonl"), ce.SavedAs)
	assert.Contains(t, err.Error(), "another program changed it")
	// both conversations are on disk, whole
	raw, _ := os.ReadFile(path)
	assert.Equal(t, string(theirs), string(raw))
	got, err := LoadHistory(ce.SavedAs)
	require.NoError(t, err)
	assert.Equal(t, mine, got)
	// the aside file is then ours to continue
	require.NoError(t, SaveHistory(ce.SavedAs, append(got, Message{Role: "user", Content: "more"})))

	// a writer holding the lock: saving from elsewhere goes aside too
	l, err := LockHistory(path)
	require.NoError(t, err)
	files.mu.Lock()
	delete(files.held, fileKey(path)) // as if held by another process
	files.mu.Unlock()
	_, err = LoadHistory(path)
	require.NoError(t, err)
	err = SaveHistory(path, one)
	require.True(t, errors.As(err, &ce), "%v", err)
	assert.Contains(t, err.Error(), "open in another k3")
	raw, _ = os.ReadFile(path)
	assert.Equal(t, string(theirs), string(raw), "the holder's file is untouched")
	l.l.Unlock()
}
