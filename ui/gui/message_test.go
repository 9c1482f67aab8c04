package gui

import (
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
	"k3/ui/bridge"
)

func TestSplitBlocks(t *testing.T) {
	md := "Intro *text*.\n\n```go\nfmt.Println(1)\n\nx := 2\n```\nAfter.\n~~~\nraw\n"
	b := splitBlocks(md)
	require.Len(t, b, 4, "%+v", b)
	assert.Equal(t, block{Kind: textBlock, Text: "Intro *text*.\n\n", End: 15}, b[0])
	assert.Equal(t, block{Kind: codeBlock, Lang: "go", Text: "fmt.Println(1)\n\nx := 2", End: len("Intro *text*.\n\n```go\nfmt.Println(1)\n\nx := 2\n```\n")}, b[1])
	assert.Equal(t, "After.\n", b[2].Text)
	assert.Equal(t, block{Kind: codeBlock, Text: "raw", End: len(md)}, b[3])

	// a table is its own block; a list split by blank lines stays one
	b = splitBlocks("Look:\n| a | b |\n|---|---|\n| 1 | 2 |\n\n1. one\n\n2. two\n\nEnd.")
	require.Len(t, b, 4, "%+v", b)
	assert.Equal(t, textBlock, b[0].Kind)
	assert.Equal(t, tableBlock, b[1].Kind)
	assert.Equal(t, "| a | b |\n|---|---|\n| 1 | 2 |\n", b[1].Text)
	assert.Equal(t, "1. one\n\n2. two\n\n", b[2].Text)
	assert.Equal(t, "End.", b[3].Text)
}

func newMV(m chat.Message, copied *string) *messageView {
	return newMessageView(m, messageEnv{copy: func(s string) { *copied = s }})
}

func TestMessageViewCopyAndThinking(t *testing.T) {
	var copied string
	v := newMV(chat.Message{Role: "assistant", Content: "See:\n```sh\nmake test\n```\n", ReasoningContent: "plan"}, &copied)
	assert.False(t, v.think.Hidden)
	assert.False(t, v.think.Items[0].Open, "a finished thinking section shows folded")
	require.Len(t, v.body.Objects, 2)
	test.Tap(v.copyBt)
	assert.Equal(t, "See:\n```sh\nmake test\n```\n", copied)
	test.Tap(findButton(v.body.Objects[1], "Copy"))
	assert.Equal(t, "make test", copied)
	assert.NotNil(t, findButton(v.body.Objects[1], "Copied"), "copying is confirmed on the button")
}

// Streamed text is appended: the blocks already finished keep their
// widgets; only the block still growing is built again.
func TestMessageViewAppendsToTheLastBlock(t *testing.T) {
	var copied string
	v := newMV(chat.Message{Role: "assistant"}, &copied)
	v.Append("", "First paragraph.\n\n")
	v.Append("", "Second ")
	first := v.body.Objects[0]
	require.Len(t, v.body.Objects, 2)
	v.Append("", "paragraph, longer.\n\n```go\nx := 1\n")
	require.Len(t, v.body.Objects, 3)
	assert.Same(t, first, v.body.Objects[0], "a finished block is not rebuilt")
	second := v.body.Objects[1]
	v.Append("", "y := 2\n```\nDone.")
	require.Len(t, v.body.Objects, 4)
	assert.Same(t, second, v.body.Objects[1])
	assert.Equal(t, "First paragraph.\n\nSecond paragraph, longer.\n\n```go\nx := 1\ny := 2\n```\nDone.", v.Answer)
	// the same as rendering the whole text at once
	w := newMV(chat.Message{Role: "assistant", Content: v.Answer}, &copied)
	require.Len(t, w.body.Objects, len(v.body.Objects))
}

// Walk-through 21: a Markdown table is a grid, not one line of pipes.
func TestMessageViewTable(t *testing.T) {
	var copied string
	v := newMV(chat.Message{Role: "assistant", Content: "| a | b |\n|---|---|\n| 1 | 2 |\n"}, &copied)
	require.Len(t, v.body.Objects, 1)
	rows := v.body.Objects[0].(*fyne.Container).Objects[1].(*fyne.Container) // one grid per row (G23)
	require.Len(t, rows.Objects, 2)
	var cells []fyne.CanvasObject
	for _, r := range rows.Objects {
		cells = append(cells, r.(*fyne.Container).Objects...)
	}
	require.Len(t, cells, 4)
	var texts []string
	for _, o := range cells {
		texts = append(texts, strings.TrimSpace(o.(*widget.RichText).String()))
	}
	assert.Equal(t, []string{"a", "b", "1", "2"}, texts)
	assert.True(t, cells[0].(*widget.RichText).Segments[0].(*widget.TextSegment).Style.TextStyle.Bold, "the header is bold")
}

// Long thinking is shown in pieces while it streams: the finished ones keep
// their widgets. Once the reply is written its thinking is one text (a
// piece cut at a space showed a paragraph break mid-sentence in the real
// window, 12-chat-stopped-thinking).
func TestMessageViewThinkingInPieces(t *testing.T) {
	var copied string
	v := newMV(chat.Message{Role: "assistant"}, &copied)
	v.StartStream(time.Now())
	line := strings.Repeat("word ", 19) + "end\n" // 100 bytes
	for range 40 {
		v.Append(line, "")
	}
	require.Greater(t, len(v.thinkBox.Objects), 2)
	first := v.thinkBox.Objects[0]
	v.Append(line, "")
	assert.Same(t, first, v.thinkBox.Objects[0])
	var all strings.Builder
	for _, o := range v.thinkBox.Objects {
		all.WriteString(o.(*widget.RichText).String())
	}
	assert.Equal(t, strings.Repeat(line, 41), all.String(), "no text lost or doubled")

	v.SetFinal(chat.Message{Role: "assistant", ReasoningContent: v.Reasoning, Cut: chat.CutStopped})
	require.Len(t, v.thinkBox.Objects, 1, "a written reply's thinking is one text")
	assert.Equal(t, strings.Repeat(line, 41), v.thinkBox.Objects[0].(*widget.RichText).String())
	saved := newMV(chat.Message{Role: "assistant", ReasoningContent: strings.Repeat(line, 41), Content: "ok"}, &copied)
	assert.Len(t, saved.thinkBox.Objects, 1, "a saved reply's thinking is one text")
}

// Walk-through 16 and 17: memory above the plan is flagged; the plots
// write their scale and break at gaps.
func TestGaugesOverPlanAndPlotScale(t *testing.T) {
	test.NewTempApp(t)
	g := newGaugesView()
	g.Set(bridge.Gauges{RSS: 688e6, Budget: 590e6, Available: 16e9})
	assert.False(t, g.OverPlan.Hidden)
	assert.Equal(t, "In use is 98.00 MB above the plan (17% more): the plan does not count everything this process holds.", g.OverPlan.Text)
	g.Set(bridge.Gauges{RSS: 500e6, Budget: 590e6, Available: 16e9})
	assert.True(t, g.OverPlan.Hidden)

	now := time.Now()
	sp := newSparkline(theme.ColorNamePrimary, func(x float64) string { return trimFloat(x) + " s" })
	w := test.NewTempWindow(t, sp)
	w.Resize(fyne.NewSize(300, 100))
	sp.SetPoints([]bridge.Point{{T: now.Add(-3 * time.Second), V: 2}, {T: now.Add(-2 * time.Second), V: 1}, {},
		{T: now.Add(-time.Second), V: 0.5}, {T: now, V: 0.25}}, now)
	r := test.WidgetRenderer(sp).(*sparkRenderer)
	assert.Equal(t, "2.0 s", r.top.Text)
	assert.Equal(t, "0.00 s", r.bottom.Text)
	shown := 0
	for _, l := range r.lines {
		if l.Visible() {
			shown++
		}
	}
	assert.Equal(t, 2, shown, "no line across the gap")
}

// findCode returns the first monospace RichText under o (a code block).
func findCode(o fyne.CanvasObject) *widget.RichText {
	switch x := o.(type) {
	case *widget.RichText:
		if len(x.Segments) > 0 {
			if ts, ok := x.Segments[0].(*widget.TextSegment); ok && ts.Style.TextStyle.Monospace {
				return x
			}
		}
	case *fyne.Container:
		for _, k := range x.Objects {
			if r := findCode(k); r != nil {
				return r
			}
		}
	case *container.Scroll:
		return findCode(x.Content)
	case *sideScroll:
		return findCode(x.Content)
	}
	return nil
}

// A code block names its language and colours its code with the theme's
// colours (chroma's lexer in the bridge); the copy button copies the code
// as written and says "Copied".
func TestMessageViewCodeColours(t *testing.T) {
	test.NewTempApp(t)
	var copied string
	code := "func f() int {\n\n\treturn 42 // the answer\n}"
	clock := &manualClock{}
	v := newMessageView(chat.Message{Role: "assistant", Content: "```go\n" + code + "\n```\n"},
		messageEnv{copy: func(s string) { copied = s }, later: clock.After})
	require.Len(t, v.body.Objects, 1)
	box := v.body.Objects[0]
	assert.NotNil(t, findLabel(box, "Go"), "the language label")
	rt := findCode(box)
	require.NotNil(t, rt)
	style := map[string]widget.RichTextStyle{}
	var lines []string
	line := ""
	for _, s := range rt.Segments {
		ts := s.(*widget.TextSegment)
		assert.True(t, ts.Style.TextStyle.Monospace, "%q", ts.Text)
		style[strings.TrimSpace(ts.Text)] = ts.Style
		line += ts.Text
		if !ts.Inline() {
			lines, line = append(lines, line), ""
		}
	}
	assert.Equal(t, code, strings.Join(lines, "\n"), "one row per line, the text as written")
	assert.Equal(t, theme.ColorNamePrimary, style["func"].ColorName)
	assert.Equal(t, theme.ColorNamePrimary, style["return"].ColorName)
	assert.Equal(t, theme.ColorNameWarning, style["42"].ColorName)
	assert.Equal(t, theme.ColorNamePlaceHolder, style["// the answer"].ColorName)
	assert.Equal(t, theme.ColorNameHyperlink, style["f"].ColorName, "the function's name")

	cp := findButton(box, "Copy")
	require.NotNil(t, cp)
	test.Tap(cp)
	assert.Equal(t, code, copied)
	assert.Equal(t, "Copied", cp.Text)
	test.Tap(v.copyBt) // the whole message's copy says so too
	assert.Equal(t, "Copied", v.copyBt.Text)
	assert.Equal(t, "```go\n"+code+"\n```\n", copied)
	test.Tap(cp) // a second click while it says so changes nothing
	assert.Equal(t, 2, clock.Pending())

	// after a moment both buttons read as before (on the test's goroutine:
	// the feedback's timers ran on their own before, beside the next test)
	clock.Advance(copiedFor - time.Millisecond)
	assert.Equal(t, "Copied", cp.Text)
	clock.Advance(time.Millisecond)
	assert.Equal(t, "Copy", cp.Text)
	assert.Equal(t, "", v.copyBt.Text, "the message's copy button is an icon")
	assert.Zero(t, clock.Pending())
}

// findLabel returns the visible label under o that reads text.
func findLabel(o fyne.CanvasObject, text string) *widget.Label {
	if o == nil || !o.Visible() {
		return nil
	}
	switch x := o.(type) {
	case *widget.Label:
		if x.Text == text {
			return x
		}
	case *fyne.Container:
		for _, k := range x.Objects {
			if l := findLabel(k, text); l != nil {
				return l
			}
		}
	case *container.Scroll:
		return findLabel(x.Content, text)
	}
	return nil
}

// "1 token", not "1 tokens", under a one-token reply.
func TestStatsSayOneToken(t *testing.T) {
	mv := newMessageView(chat.Message{Role: "assistant", Content: "x", Stats: &chat.ReplyStats{Tokens: 1, FirstTokenSeconds: 0.5}}, messageEnv{})
	assert.Equal(t, "1 token · first token after 0.50 s", mv.statsLbl.Text)
}
