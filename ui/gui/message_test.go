package gui

import (
	"testing"

	"k3/engine/chat"
)

func TestSplitBlocks(t *testing.T) {
	md := "Intro *text*.\n\n```go\nfmt.Println(1)\n\nx := 2\n```\nAfter.\n~~~\nraw\n"
	b := SplitBlocks(md)
	if len(b) != 4 || b[0].Code || !b[1].Code || b[1].Lang != "go" || b[1].Text != "fmt.Println(1)\n\nx := 2" ||
		b[2].Text != "After.\n" || !b[3].Code || b[3].Text != "raw" {
		t.Errorf("%+v", b)
	}
}

func TestMessageViewCopyAndThinking(t *testing.T) {
	var copied string
	v := NewMessageView(chatMsg("assistant", "See:\n```sh\nmake test\n```\n", "plan"), func(s string) { copied = s })
	if v.think.Hidden || v.think.Items[0].Open {
		t.Error("a finished thinking section shows folded")
	}
	if len(v.body.Objects) != 2 {
		t.Fatalf("%d blocks", len(v.body.Objects))
	}
	v.copy(v.Answer)
	if copied != "See:\n```sh\nmake test\n```\n" {
		t.Errorf("copy all %q", copied)
	}
}

func chatMsg(role, content, reasoning string) chatMessage {
	return chatMessage{Role: role, Content: content, ReasoningContent: reasoning}
}

type chatMessage = chat.Message
