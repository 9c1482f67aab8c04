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
	// a file removed (or renamed away) since holds nothing to lose
	require.NoError(t, os.Remove(ce.SavedAs))
	require.NoError(t, SaveHistory(ce.SavedAs, got))

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

// Audit D15 (row 4.26): a tool result without its call is refused at load
// with its line number, not at the next turn with a message index.
func TestHistoryRefusesAToolResultWithoutItsCall(t *testing.T) {
	body := `{"role":"user","content":"a"}` + "\n" + `{"role":"assistant","content":"b"}` + "\n\n" +
		`{"role":"user","content":"c"}` + "\n" + `{"role":"tool","content":"42"}` + "\n"
	_, err := ParseHistory([]byte(body))
	require.Error(t, err)
	assert.Equal(t, "line 5: tool result without a tool name or a matching tool call", err.Error())
}

// A history file written before replies had stats and versions loads as it
// did, and saving it again writes the same bytes.
func TestHistoryOldFilesLoadAndRewriteTheSame(t *testing.T) {
	old := `{"role":"system","content":"Be brief."}` + "\n" +
		`{"role":"user","content":"hi"}` + "\n" +
		`{"role":"assistant","content":"yo","reasoning_content":"hmm","cut":"turn cap"}` + "\n"
	h, err := ParseHistory([]byte(old))
	require.NoError(t, err)
	assert.Equal(t, []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "hi"},
		{Role: "assistant", Content: "yo", ReasoningContent: "hmm", Cut: CutTurnCap}}, h)
	raw, err := EncodeHistory(h)
	require.NoError(t, err)
	assert.Equal(t, old, string(raw))
}

// A reply's stats and the versions of a regenerated reply or an edited
// message are kept in the file and come back as they were.
func TestHistoryKeepsStatsAndVersions(t *testing.T) {
	first := Message{Role: "assistant", Content: "first reply", Stats: &ReplyStats{Tokens: 12, FirstTokenSeconds: 1.25, SecondsPerToken: 0.5}}
	h := []Message{
		{Role: "user", Content: "edited question", Versions: &Versions{Shown: 1, Others: [][]Message{
			{{Role: "user", Content: "question"}, first},
		}}},
		{Role: "assistant", Content: "third reply", ReasoningContent: "think", Cut: CutStopped,
			Stats: &ReplyStats{Tokens: 40, FirstTokenSeconds: 2, SecondsPerToken: 3.5, ThoughtSeconds: 9.5},
			Versions: &Versions{Shown: 2, Others: [][]Message{
				{{Role: "assistant", Content: "second reply"}},
				{{Role: "assistant", Content: "another"}},
			}}},
	}
	path := filepath.Join(t.TempDir(), "h.jsonl")
	require.NoError(t, SaveHistory(path, h))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"stats":{"tokens":40,"first_token_s":2,"s_per_token":3.5,"thought_s":9.5}`)
	assert.Contains(t, string(raw), `"versions":{"shown":2,"others":[[{"role":"assistant","content":"second reply"}]`)
	got, err := LoadHistory(path)
	require.NoError(t, err)
	assert.Equal(t, h, got)
	assert.Equal(t, 2, got[0].Versions.Count())
	assert.Equal(t, 3, got[1].Versions.Count())
	assert.Equal(t, 1, got[1].Versions.Others[0][0].Versions.Count(), "no versions: one")

	// the transcript is the shown version only
	tok := byteTok(t)
	plain := &Session{Tok: tok, history: []Message{{Role: "user", Content: "edited question"},
		{Role: "assistant", Content: "third reply", ReasoningContent: "think", Cut: CutStopped}}}
	with := &Session{Tok: tok, history: got}
	a, err := plain.Prompt("next", Options{Thinking: true})
	require.NoError(t, err)
	b, err := with.Prompt("next", Options{Thinking: true})
	require.NoError(t, err)
	assert.Equal(t, a, b)
}

func TestHistoryRefusesBadStatsAndVersions(t *testing.T) {
	user := `{"role":"user","content":"q"}` + "\n"
	for body, want := range map[string]string{
		`{"role":"user","content":"q","stats":{"tokens":1}}`:                                                                          "line 1: stats on a user message",
		user + `{"role":"assistant","content":"a","stats":{"tokens":-1}}`:                                                             "line 2: stats cannot be negative",
		user + `{"role":"assistant","content":"a","stats":{"tokens":1,"speed":2}}`:                                                    `line 2: json: unknown field "speed"`,
		user + `{"role":"assistant","content":"a","versions":{"shown":0,"others":[]}}`:                                                `line 2: versions: need "others"`,
		user + `{"role":"assistant","content":"a","versions":{"shown":2,"others":[[]]}}`:                                              `line 2: versions: need "others"`,
		user + `{"role":"assistant","content":"a","versions":{"others":[[]]}}`:                                                        `line 2: versions: need "others"`,
		user + `{"role":"assistant","content":"a","versions":{"shown":0,"others":[[]]}}`:                                              "line 2: versions: version 1 is empty",
		user + `{"role":"assistant","content":"a","versions":{"shown":0,"others":[[{"role":"user","content":"x","cut":"stopped"}]]}}`: "line 2: versions: version 1: cut must be",
		// a version the chat format cannot render would fail when shown
		user + `{"role":"assistant","content":"a","versions":{"shown":0,"others":[[{"role":"tool","content":"42"}]]}}`: "line 2: version 1, message 1: tool result without",
	} {
		_, err := ParseHistory([]byte(body))
		require.Error(t, err, "%s", body)
		assert.Contains(t, err.Error(), want, "%s", body)
	}
	// versions nested deeper than maxVersionDepth
	deep := `{"role":"assistant","content":"x"}`
	for range maxVersionDepth + 1 {
		deep = `{"role":"assistant","content":"x","versions":{"shown":0,"others":[[` + deep + `]]}}`
	}
	_, err := ParseHistory([]byte(user + deep))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than 64 levels of versions")
}

func lockFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".lock" {
			out = append(out, e.Name())
		}
	}
	return out
}

// Renaming or removing a history takes its lock file along (none is left
// under the old name); both are refused while another k3 holds the history;
// a lock this process holds moves with the rename.
func TestRenameAndRemoveHistoryTakeTheLockFile(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl"), filepath.Join(dir, "c.jsonl")
	h := []Message{{Role: "user", Content: "hi"}}
	require.NoError(t, SaveHistory(a, h))
	assert.Equal(t, []string{".a.jsonl.lock"}, lockFiles(t, dir), "a save leaves its lock file")

	// not held: renamed with its lock file
	require.NoError(t, RenameHistory(a, b))
	assert.Equal(t, []string{".b.jsonl.lock"}, lockFiles(t, dir))
	got, err := LoadHistory(b)
	require.NoError(t, err)
	assert.Equal(t, h, got)

	// held here: the lock moves with the file and is still ours
	l, err := LockHistory(b)
	require.NoError(t, err)
	require.NoError(t, RenameHistory(b, c))
	assert.Equal(t, []string{".c.jsonl.lock"}, lockFiles(t, dir))
	_, err = LockHistory(c)
	require.ErrorIs(t, err, ErrHistoryInUse, "the same lock holds the new name")
	require.NoError(t, SaveHistory(c, append(h, Message{Role: "assistant", Content: "yo"})), "the holder writes as usual")
	l.Release()
	l2, err := LockHistory(c)
	require.NoError(t, err, "free after Release")

	// held by another k3 (here: a lock this process does not know it has)
	files.mu.Lock()
	delete(files.held, fileKey(c))
	files.mu.Unlock()
	err = RenameHistory(c, a)
	require.ErrorIs(t, err, ErrHistoryInUse)
	err = RemoveHistory(c)
	require.ErrorIs(t, err, ErrHistoryInUse)
	_, err = os.Stat(c)
	require.NoError(t, err, "nothing was touched")
	l2.l.Unlock()

	// removed with its lock file; a lock held here is dropped
	l3, err := LockHistory(c)
	require.NoError(t, err)
	require.NoError(t, RemoveHistory(c))
	assert.Empty(t, lockFiles(t, dir))
	_, err = os.Stat(c)
	assert.ErrorIs(t, err, os.ErrNotExist)
	l3.Release() // harmless after the removal
	require.NoError(t, RemoveHistory(c), "a missing file is not an error")
	assert.Empty(t, lockFiles(t, dir))
}

// Lock files that older versions left beside renamed or deleted histories
// are swept, except a held one and those of histories that exist.
func TestRemoveStaleLocks(t *testing.T) {
	dir := t.TempDir()
	live, gone, held := filepath.Join(dir, "live.jsonl"), filepath.Join(dir, "gone.jsonl"), filepath.Join(dir, "held.jsonl")
	for _, p := range []string{live, gone, held} {
		require.NoError(t, SaveHistory(p, nil))
	}
	l, err := LockHistory(held)
	require.NoError(t, err)
	defer l.Release()
	require.NoError(t, os.Remove(gone)) // as an old version deleted it
	require.NoError(t, os.Remove(held))
	RemoveStaleLocks(dir)
	assert.Equal(t, []string{".held.jsonl.lock", ".live.jsonl.lock"}, lockFiles(t, dir))
}
