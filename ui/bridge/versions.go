package bridge

import (
	"slices"

	"k3/engine/chat"
)

// A conversation's versions live in its messages (chat.Message.Versions):
// h[i].Versions holds the other versions of the conversation from message
// i on, so the history file keeps them and the transcript is the version
// shown. These functions never change the slices they are given.

// versionsAt is the version shown at message i and how many there are.
func versionsAt(h []chat.Message, i int) (shown, count int) {
	if i < 0 || i >= len(h) || h[i].Versions == nil {
		return 0, 1
	}
	return h[i].Versions.Shown, h[i].Versions.Count()
}

// allVersions lists every version from message i on, in order, the shown
// one (h[i:]) in its place, and the shown one's index.
func allVersions(h []chat.Message, i int) ([][]chat.Message, int) {
	if i >= len(h) {
		return nil, 0
	}
	cur := slices.Clone(h[i:])
	v := cur[0].Versions
	cur[0].Versions = nil
	if v == nil {
		return [][]chat.Message{cur}, 0
	}
	all := make([][]chat.Message, 0, v.Count())
	all = append(all, v.Others[:v.Shown]...)
	all = append(all, cur)
	all = append(all, v.Others[v.Shown:]...)
	return all, v.Shown
}

// withVersion is h[:i] and then version k of all, the others kept on its
// first message.
func withVersion(h []chat.Message, i int, all [][]chat.Message, k int) []chat.Message {
	out := slices.Clone(h[:i])
	if k < 0 || k >= len(all) {
		return out
	}
	tail := slices.Clone(all[k])
	if len(all) > 1 {
		others := make([][]chat.Message, 0, len(all)-1)
		others = append(others, all[:k]...)
		others = append(others, all[k+1:]...)
		tail[0].Versions = &chat.Versions{Shown: k, Others: others}
	}
	return append(out, tail...)
}

// showVersion returns the conversation showing version k at message i
// (h itself when there is no such version).
func showVersion(h []chat.Message, i, k int) []chat.Message {
	all, _ := allVersions(h, i)
	if k < 0 || k >= len(all) {
		return h
	}
	return withVersion(h, i, all, k)
}

// versionFork is a new version of a conversation being made from message At on
// (Regenerate, or an edited message): the versions there so far, kept
// aside until the new one has its first message.
type versionFork struct {
	At    int
	old   [][]chat.Message
	shown int
}

// newFork starts a new version at message i: it returns the conversation
// before i and the fork holding what came from i on.
func newFork(h []chat.Message, i int) ([]chat.Message, *versionFork) {
	all, shown := allVersions(h, i)
	return slices.Clone(h[:min(i, len(h))]), &versionFork{At: i, old: all, shown: shown}
}

// attach makes h[At:] the newest version at At, with the versions that
// were there as its others (h is returned as it is while it does not reach
// At).
func (f *versionFork) attach(h []chat.Message) []chat.Message {
	if len(h) <= f.At {
		return h
	}
	all := append(slices.Clone(f.old), slices.Clone(h[f.At:]))
	return withVersion(h, f.At, all, len(all)-1)
}

// replaced is the message at At the fork is making a new version of (the
// one shown when it started).
func (f *versionFork) replaced() chat.Message {
	if f.shown < len(f.old) && len(f.old[f.shown]) > 0 {
		return f.old[f.shown][0]
	}
	return chat.Message{}
}

// restore is the conversation as it was when the fork started.
func (f *versionFork) restore(h []chat.Message) []chat.Message {
	return withVersion(h[:min(f.At, len(h))], f.At, f.old, f.shown)
}
