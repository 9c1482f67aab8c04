package gui

import (
	"image/color"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/engine/chat"
)

// MessageView shows one message: the role, for the assistant a collapsible
// thinking section set apart from the reply, and the reply rendered as
// Markdown with code blocks in monospace and a copy button on each.
type MessageView struct {
	Role      string
	Reasoning string
	Answer    string
	Cut       string

	Root      *fyne.Container
	header    *widget.Label
	think     *widget.Accordion
	thinkText *widget.RichText
	body      *fyne.Container
	cutLbl    *widget.Label
	copy      func(string)
}

// NewMessageView shows m; copy puts text on the clipboard.
func NewMessageView(m chat.Message, copy func(string)) *MessageView {
	v := &MessageView{Role: m.Role, copy: copy}
	who := map[string]string{"user": "You", "assistant": "Kimi K3", "system": "System prompt"}[m.Role]
	if who == "" {
		who = m.Role
	}
	v.header = widget.NewLabelWithStyle(who, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	copyAll := widget.NewButtonWithIcon("", theme.ContentCopyIcon(), func() {
		if v.copy != nil {
			v.copy(v.Answer)
		}
	})
	copyAll.Importance = widget.LowImportance
	v.body = container.NewVBox()
	v.cutLbl = widget.NewLabel("")
	v.cutLbl.Hide()
	v.thinkText = widget.NewRichText()
	v.thinkText.Wrapping = fyne.TextWrapWord
	bg := canvas.NewRectangle(theme.Color(theme.ColorNameInputBackground))
	bg.CornerRadius = theme.InputRadiusSize()
	item := widget.NewAccordionItem("Thinking", container.NewStack(bg, container.NewPadded(v.thinkText)))
	v.think = widget.NewAccordion(item)
	v.think.Hide()
	top := container.NewBorder(nil, nil, nil, copyAll, v.header)
	v.Root = container.NewVBox(top, v.think, v.body, v.cutLbl)
	v.Append(m.ReasoningContent, m.Content)
	v.SetCut(string(m.Cut))
	if m.ReasoningContent != "" {
		v.think.Close(0) // finished thinking starts folded
	}
	return v
}

// Append adds streamed text and re-renders.
func (v *MessageView) Append(reasoning, answer string) {
	if reasoning != "" {
		if v.Reasoning == "" {
			v.think.Show()
			v.think.Open(0)
		}
		v.Reasoning += reasoning
		v.thinkText.Segments = []widget.RichTextSegment{&widget.TextSegment{Text: v.Reasoning,
			Style: widget.RichTextStyle{Inline: false, ColorName: theme.ColorNamePlaceHolder, TextStyle: fyne.TextStyle{Italic: true}}}}
		v.thinkText.Refresh()
	}
	if answer != "" {
		if v.Answer == "" && v.Reasoning != "" {
			v.think.Close(0)
		}
		v.Answer += answer
	}
	if answer != "" || len(v.body.Objects) == 0 {
		v.render()
	}
}

// SetFinal replaces the text with the final message.
func (v *MessageView) SetFinal(m chat.Message) {
	v.Reasoning, v.Answer = "", ""
	v.thinkText.Segments = nil
	v.Append(m.ReasoningContent, m.Content)
	if m.Content == "" {
		v.render()
	}
	v.SetCut(string(m.Cut))
}

// SetCut shows why a reply is incomplete.
func (v *MessageView) SetCut(cut string) {
	v.Cut = cut
	switch cut {
	case "stopped":
		v.cutLbl.SetText("(stopped — the partial reply is kept)")
		v.cutLbl.Show()
	case "turn cap":
		v.cutLbl.SetText("(reached the token limit — raise it in Sampling… and press Regenerate)")
		v.cutLbl.Show()
	default:
		v.cutLbl.Hide()
	}
}

// Block is a piece of a reply: Markdown text or a fenced code block.
type Block struct {
	Code bool
	Lang string
	Text string
}

// SplitBlocks cuts Markdown into text and fenced code blocks (``` or ~~~).
// An unclosed fence (a reply still streaming) runs to the end.
func SplitBlocks(md string) []Block {
	var out []Block
	var cur strings.Builder
	inCode, fence, lang := false, "", ""
	flush := func(code bool) {
		t := cur.String()
		if code {
			t = strings.TrimSuffix(t, "\n")
		}
		if code || strings.TrimSpace(t) != "" {
			out = append(out, Block{Code: code, Lang: lang, Text: t})
		}
		cur.Reset()
	}
	lines := strings.SplitAfter(md, "\n")
	for _, line := range lines {
		trim := strings.TrimSpace(line)
		switch {
		case !inCode && (strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~")):
			flush(false)
			inCode, fence, lang = true, trim[:3], strings.TrimSpace(trim[3:])
		case inCode && strings.HasPrefix(trim, fence) && strings.TrimSpace(strings.TrimLeft(trim, fence[:1])) == "":
			flush(true)
			inCode, lang = false, ""
		default:
			cur.WriteString(line)
		}
	}
	flush(inCode)
	return out
}

func (v *MessageView) render() {
	var objs []fyne.CanvasObject
	if v.Role != "assistant" {
		l := widget.NewLabel(v.Answer)
		l.Wrapping = fyne.TextWrapWord
		objs = append(objs, l)
	} else {
		for _, b := range SplitBlocks(v.Answer) {
			if !b.Code {
				rt := widget.NewRichTextFromMarkdown(b.Text)
				rt.Wrapping = fyne.TextWrapWord
				objs = append(objs, rt)
				continue
			}
			code := b.Text
			rt := widget.NewRichText(&widget.TextSegment{Text: code, Style: widget.RichTextStyleCodeBlock})
			bg := canvas.NewRectangle(color.Transparent)
			bg.FillColor = theme.Color(theme.ColorNameInputBackground)
			cp := widget.NewButtonWithIcon("Copy", theme.ContentCopyIcon(), func() {
				if v.copy != nil {
					v.copy(code)
				}
			})
			cp.Importance = widget.LowImportance
			label := b.Lang
			if label == "" {
				label = "code"
			}
			head := container.NewBorder(nil, nil, widget.NewLabelWithStyle(label, fyne.TextAlignLeading, fyne.TextStyle{Italic: true}), cp)
			objs = append(objs, container.NewStack(bg, container.NewVBox(head, container.NewHScroll(rt))))
		}
	}
	v.body.Objects = objs
	v.body.Refresh()
}
