package gui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"k3/engine/chat"
)

// messageEnv is what a message view needs from the chat.
type messageEnv struct {
	copy func(string) // puts text on the clipboard
	// later runs a function on the UI goroutine after a while (nil: the
	// Copy button keeps saying "Copied")
	later laterFunc
	edit  func(*messageView)
	// version switches to the previous (-1) or next (+1) version
	version func(mv *messageView, delta int)
	// relayout lays the message out again after it changed shape
	relayout func(mv *messageView)
	// grew lays the conversation out again after a streamed message gained
	// a line (lighter than relayout: nothing is refreshed)
	grew func(mv *messageView)
	// scroller is the conversation's scroll area (a wheel over a code block
	// scrolls it)
	scroller func() *container.Scroll
}

// messageView shows one message: the role, for the assistant a collapsible
// thinking section set apart from the reply, and the reply rendered as
// Markdown with code blocks (language label, copy button) and tables.
// Streamed text is appended: finished blocks keep their widgets and only the
// block still growing is parsed again, so a long reply costs what its last
// paragraph costs.
type messageView struct {
	Role      string
	Reasoning string
	Answer    string
	Cut       chat.Cut

	Root      *fyne.Container
	header    *widget.Label
	copyBt    *widget.Button
	editBt    *widget.Button
	nav       *fyne.Container
	navLbl    *widget.Label
	think     *widget.Accordion
	thinkBox  *fyne.Container // the thinking text: finished pieces, then the one growing
	thinkDone int             // bytes of Reasoning in finished pieces
	final     bool            // SetFinal was called: the reply is written
	body      *fyne.Container
	done      int // bytes of Answer whose blocks are final (rendered for good)
	statsLbl  *widget.Label
	cutLbl    *widget.Label
	env       messageEnv

	// timing of a reply streamed here (for "Thought for N s")
	started, thinkEnd time.Time
	// laidHeight is the height the chat last laid this streamed message out
	// at (it is laid out again when it changes: G5)
	laidHeight float32
	// thinkHeight is the thinking text's height the accordion last knew
	thinkHeight float32
}

// newMessageView shows m.
func newMessageView(m chat.Message, env messageEnv) *messageView {
	v := &messageView{Role: m.Role, env: env}
	who := map[string]string{"user": "You", "assistant": "Kimi K3", "system": "System prompt (this conversation)"}[m.Role]
	if who == "" {
		who = m.Role
	}
	v.header = widget.NewLabelWithStyle(who, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	v.copyBt = widget.NewButtonWithIcon("", theme.ContentCopyIcon(), func() { v.copyText(v.copyBt, v.Answer) })
	v.copyBt.Importance = widget.LowImportance
	v.editBt = widget.NewButtonWithIcon("", theme.DocumentCreateIcon(), func() {
		if v.env.edit != nil {
			v.env.edit(v)
		}
	})
	v.editBt.Importance = widget.LowImportance
	if m.Role == "assistant" || env.edit == nil {
		v.editBt.Hide()
	}
	prev := widget.NewButton("‹", func() { v.switchVersion(-1) })
	next := widget.NewButton("›", func() { v.switchVersion(+1) })
	prev.Importance, next.Importance = widget.LowImportance, widget.LowImportance
	v.navLbl = widget.NewLabel("")
	v.nav = container.NewHBox(prev, v.navLbl, next)
	v.nav.Hide()
	v.body = container.NewVBox()
	v.statsLbl = widget.NewLabel("")
	v.statsLbl.SizeName = theme.SizeNameCaptionText // small, but in the text colour: the disabled grey is hard to read
	v.statsLbl.Hide()
	v.cutLbl = widget.NewLabel("")
	v.cutLbl.Wrapping = fyne.TextWrapWord
	v.cutLbl.Hide()
	v.thinkBox = container.NewVBox()
	item := widget.NewAccordionItem("Thinking", container.NewStack(newBackground(theme.ColorNameInputBackground), container.NewPadded(v.thinkBox)))
	v.think = widget.NewAccordion(item)
	v.think.Hide()
	top := container.NewBorder(nil, nil, nil, container.NewHBox(v.nav, v.editBt, v.copyBt), v.header)
	v.Root = container.NewVBox(top, pictureThumbs(m.Images, thumbSize), v.think, v.body, v.statsLbl, v.cutLbl)
	v.Append(m.ReasoningContent, m.Content)
	v.SetCut(m.Cut)
	if m.ReasoningContent != "" {
		v.think.Close(0) // finished thinking starts folded
	}
	v.SetStats(m.Stats)
	if m.Versions != nil {
		v.SetVersions(m.Versions.Shown, m.Versions.Count())
	}
	return v
}

// copyText copies and says so on the button for a moment.
func (v *messageView) copyText(b *widget.Button, text string) {
	if v.env.copy == nil {
		return
	}
	v.env.copy(text)
	if b.Text == "Copied" {
		return // a second click while it says so
	}
	label := b.Text
	b.SetIcon(theme.ConfirmIcon())
	b.SetText("Copied")
	if v.env.later == nil {
		return
	}
	v.env.later(copiedFor, func() {
		b.SetIcon(theme.ContentCopyIcon())
		b.SetText(label)
	})
}

// copiedFor is how long a Copy button says "Copied".
const copiedFor = 1500 * time.Millisecond

func (v *messageView) switchVersion(delta int) {
	if v.env.version != nil {
		v.env.version(v, delta)
	}
}

// SetVersions shows "‹ k/n ›" when the message has other versions.
func (v *messageView) SetVersions(k, n int) {
	if n < 2 {
		v.nav.Hide()
		return
	}
	v.navLbl.SetText(fmt.Sprintf("%d/%d", k+1, n))
	v.nav.Show()
}

// Append adds streamed text and renders what changed.
func (v *messageView) Append(reasoning, answer string) {
	if reasoning != "" {
		if v.Reasoning == "" {
			v.think.Show()
			v.think.Open(0)
		}
		v.Reasoning += reasoning
		v.renderThinking()
	}
	if answer != "" {
		if v.Answer == "" && v.Reasoning != "" {
			v.think.Close(0)
			if !v.started.IsZero() {
				v.thinkEnd = time.Now()
				v.setThought(v.thinkEnd.Sub(v.started))
			}
		}
		v.Answer += answer
	}
	if answer != "" || len(v.body.Objects) == 0 {
		v.render()
	}
	if !v.started.IsZero() {
		// streaming: a thinking box or a reply that gained a line is laid
		// out now, not on a frame that may not come (G5)
		// (twice: wrapped text knows its height once it has its width)
		for range 2 {
			h := v.Root.MinSize().Height
			if h == v.laidHeight || v.env.grew == nil {
				break
			}
			v.laidHeight = h
			v.env.grew(v)
			v.thinkGrew()
		}
	}
}

// thinkPiece is the length past which the growing piece of thinking text
// is cut (at a line, else a space) so each flush lays out a bounded piece.
const thinkPiece = 1500

// renderThinking shows Reasoning: while it streams, finished pieces keep
// their widgets and the last is set again; a finished reply's thinking is
// one text (a piece cut at a space read as a paragraph break in the middle
// of a sentence).
func (v *messageView) renderThinking() {
	piece := func(t string) *widget.RichText {
		rt := widget.NewRichText(&widget.TextSegment{Text: t,
			Style: widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, TextStyle: fyne.TextStyle{Italic: true}}})
		rt.Wrapping = fyne.TextWrapWord
		return rt
	}
	n := len(v.thinkBox.Objects)
	if n > 0 {
		v.thinkBox.Objects = v.thinkBox.Objects[:n-1] // the open piece
	}
	for {
		tail := v.Reasoning[v.thinkDone:]
		if len(tail) <= thinkPiece || !v.streaming() {
			v.thinkBox.Objects = append(v.thinkBox.Objects, piece(tail))
			break
		}
		cut := strings.LastIndexByte(tail[:thinkPiece], '\n') + 1
		if cut < thinkPiece/3 {
			cut = strings.LastIndexByte(tail[:thinkPiece], ' ') + 1
		}
		if cut <= 0 {
			cut = thinkPiece
			for cut > 0 && !utf8.RuneStart(tail[cut]) {
				cut--
			}
		}
		v.thinkBox.Objects = append(v.thinkBox.Objects, piece(tail[:cut]))
		v.thinkDone += cut
	}
	v.thinkBox.Refresh()
	v.thinkGrew()
}

// thinkGrew tells the thinking section its text changed height: the
// accordion keeps its minimum size until it is refreshed, so the thinking
// box stayed 2 lines high while it streamed (G5).
func (v *messageView) thinkGrew() bool {
	h := v.thinkBox.MinSize().Height
	if h == v.thinkHeight {
		return false
	}
	v.thinkHeight = h
	v.think.Refresh()
	return true
}

// StartStream marks the start of a reply streamed into this view.
func (v *messageView) StartStream(t time.Time) { v.started = t }

// streaming reports whether the message is a reply being written.
func (v *messageView) streaming() bool { return !v.started.IsZero() && !v.final }

func (v *messageView) setThought(d time.Duration) {
	v.think.Items[0].Title = fmt.Sprintf("Thought for %.1f s", d.Seconds())
	v.think.Refresh()
}

// SetStats shows tokens/s (s/token for slow models), the time to the first
// token and the tokens generated under the reply, and how long it thought
// on the thinking section.
func (v *messageView) SetStats(s *chat.ReplyStats) {
	if s == nil || s.Tokens == 0 {
		v.statsLbl.Hide()
		return
	}
	speed := ""
	switch {
	case s.SecondsPerToken <= 0:
	case s.SecondsPerToken < 1:
		speed = fmt.Sprintf("%.1f tokens/s · ", 1/s.SecondsPerToken)
	default:
		speed = fmt.Sprintf("%.1f s/token · ", s.SecondsPerToken)
	}
	tokens := fmt.Sprintf("%d tokens", s.Tokens)
	if s.Tokens == 1 {
		tokens = "1 token"
	}
	v.statsLbl.SetText(fmt.Sprintf("%s%s · first token after %.2f s", speed, tokens, s.FirstTokenSeconds))
	v.statsLbl.Show()
	if s.ThoughtSeconds > 0 && v.Reasoning != "" {
		v.setThought(time.Duration(s.ThoughtSeconds * float64(time.Second)))
	}
}

// relayout lays the message (and what follows it) out again.
func (v *messageView) relayout() {
	if v.env.relayout != nil {
		v.env.relayout(v)
	}
}

// SetFinal replaces the text with the final message, its cut and its
// numbers, and lays it out again.
func (v *messageView) SetFinal(m chat.Message) {
	defer v.relayout()
	v.final = true
	if v.thinkDone > 0 && m.ReasoningContent == v.Reasoning {
		v.thinkBox.Objects, v.thinkDone = nil, 0 // the pieces become one text
		v.renderThinking()
	}
	if m.ReasoningContent != v.Reasoning || m.Content != v.Answer {
		v.Reasoning, v.Answer, v.done, v.thinkDone = "", "", 0, 0
		v.thinkBox.Objects = nil
		v.body.Objects = nil
		v.Append(m.ReasoningContent, m.Content)
		if m.Content == "" {
			v.render()
		}
	}
	if t := strings.TrimSpace(v.Answer); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		v.render() // a JSON answer that does not parse after all is text
	}
	if m.ReasoningContent == "" {
		v.think.Hide()
	} else if m.Content == "" && !v.started.IsZero() && v.thinkEnd.IsZero() {
		v.setThought(time.Since(v.started)) // stopped while thinking
	}
	v.SetCut(m.Cut)
	v.SetStats(m.Stats)
}

// SetCut shows why a reply is incomplete.
func (v *messageView) SetCut(cut chat.Cut) {
	v.Cut = cut
	switch cut {
	case chat.CutStopped:
		if v.Answer == "" && v.Reasoning == "" {
			v.cutLbl.SetText("(stopped before anything was written)")
		} else {
			v.cutLbl.SetText("(stopped — the partial reply is kept)")
		}
		v.cutLbl.Show()
	case chat.CutTurnCap:
		v.cutLbl.SetText("(reached the reply length limit — raise it in Settings… and press Regenerate)")
		v.cutLbl.Show()
	default:
		v.cutLbl.Hide()
	}
}

// blockKind is what a piece of a reply is.
type blockKind int

const (
	textBlock blockKind = iota
	codeBlock
	tableBlock
)

// block is a piece of a reply: Markdown text, a fenced code block or a
// table. End is the byte offset just past it in the text split.
type block struct {
	Kind blockKind
	Lang string
	Text string
	End  int
}

var tableRule = regexp.MustCompile(`^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$`)

func isListOrIndent(line string) bool {
	t := strings.TrimLeft(line, " \t")
	if t == "" {
		return false
	}
	if len(line) != len(t) {
		return true // indented: a list item's continuation
	}
	if strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") || strings.HasPrefix(t, "+ ") {
		return true
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	return i > 0 && i < len(t) && (t[i] == '.' || t[i] == ')')
}

// splitBlocks cuts Markdown into text, fenced code (``` or ~~~) and tables.
// Text breaks at a blank line unless a list goes on after it (a list split
// in two would number from 1 again). An unclosed fence (a reply still
// streaming) runs to the end.
func splitBlocks(md string) []block {
	var out []block
	lines := strings.SplitAfter(md, "\n")
	pos := 0
	var cur strings.Builder
	kind, fence, lang := textBlock, "", ""
	open := false
	flush := func(end int) {
		t := cur.String()
		cur.Reset()
		if kind == codeBlock {
			t = strings.TrimSuffix(t, "\n")
		}
		if kind != textBlock || strings.TrimSpace(t) != "" {
			out = append(out, block{Kind: kind, Lang: lang, Text: t, End: end})
		} else if len(out) > 0 {
			out[len(out)-1].End = end // blank lines belong to the block before
		}
		kind, lang, open = textBlock, "", false
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		start := pos
		pos += len(line)
		trim := strings.TrimSpace(line)
		switch {
		case kind == codeBlock:
			if strings.HasPrefix(trim, fence) && strings.TrimSpace(strings.TrimLeft(trim, fence[:1])) == "" {
				flush(pos)
				continue
			}
			cur.WriteString(line)
		case strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~"):
			flush(start)
			kind, fence, lang, open = codeBlock, trim[:3], strings.TrimSpace(strings.Trim(trim, "`~")), true
		case kind == tableBlock:
			if trim == "" || !strings.Contains(trim, "|") {
				flush(start)
				i--
				pos = start
				continue
			}
			cur.WriteString(line)
		case strings.HasPrefix(trim, "|") && i+1 < len(lines) && tableRule.MatchString(lines[i+1]):
			flush(start)
			kind, open = tableBlock, true
			cur.WriteString(line)
		case trim == "" && cur.Len() == 0:
			if len(out) > 0 {
				out[len(out)-1].End = pos // blank lines belong to the block before
			}
		case trim == "":
			cur.WriteString(line)
			if open && !(i+1 < len(lines) && isListOrIndent(lines[i+1])) && cur.Len() > len(line) {
				flush(pos)
			}
		default:
			open = true
			cur.WriteString(line)
		}
	}
	if cur.Len() > 0 || kind == codeBlock {
		flush(pos)
	}
	return out
}

// render shows the blocks of Answer past done: all but the last are final
// and keep their widgets; the last may still grow and is redone next time.
func (v *messageView) render() {
	if v.Role != "assistant" {
		l := widget.NewLabel(v.Answer)
		l.Wrapping = fyne.TextWrapWord
		v.body.Objects = []fyne.CanvasObject{l}
		v.body.Refresh()
		return
	}
	if v.Answer == "" {
		v.body.Objects = []fyne.CanvasObject{placeholder()}
		v.body.Refresh()
		return
	}
	if code, ok := jsonAnswer(v.Answer, v.streaming()); ok {
		// N4: a JSON answer is code, pretty-printed once it is whole
		v.done = 0
		v.body.Objects = []fyne.CanvasObject{v.blockObject(block{Kind: codeBlock, Lang: "json", Text: code})}
		v.body.Refresh()
		return
	}
	final := len(v.body.Objects)
	if final > 0 {
		final-- // the open block (or the empty placeholder) is redone
	}
	v.body.Objects = v.body.Objects[:final]
	blocks := splitBlocks(v.Answer[v.done:])
	base := v.done
	for i, b := range blocks {
		v.body.Objects = append(v.body.Objects, v.blockObject(b))
		if i < len(blocks)-1 {
			v.done = base + b.End
		}
	}
	if len(blocks) == 0 {
		v.body.Objects = append(v.body.Objects, placeholder()) // keeps one open object
	}
	v.body.Refresh()
}

// jsonAnswer is an answer that is a JSON object or array (as Answers:
// JSON asks for), indented two spaces a level once it parses (while it
// streams, as written); ok is false for any other answer, and for a
// finished one that does not parse.
func jsonAnswer(answer string, streaming bool) (string, bool) {
	t := strings.TrimSpace(answer)
	if !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "[") {
		return "", false
	}
	if !json.Valid([]byte(t)) {
		if !streaming {
			return "", false
		}
		if strings.HasPrefix(t, "[") && !strings.HasPrefix(strings.TrimSpace(t[1:]), "{") && !strings.HasPrefix(strings.TrimSpace(t[1:]), "[") {
			return "", false // "[in brackets] …" is text, unless it opens a JSON array of objects or arrays
		}
		return t, true
	}
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(t), "", "  "); err != nil {
		return t, true
	}
	return b.String(), true
}

// placeholder stands for a block not written yet; it takes no room.
func placeholder() fyne.CanvasObject {
	l := widget.NewLabel("")
	l.Hide()
	return l
}

func (v *messageView) blockObject(b block) fyne.CanvasObject {
	switch b.Kind {
	case codeBlock:
		code := b.Text
		hl := Highlight(b.Lang, code)
		rt := widget.NewRichText(codeSegments(hl)...)
		var cp *widget.Button
		cp = widget.NewButtonWithIcon("Copy", theme.ContentCopyIcon(), func() { v.copyText(cp, code) })
		cp.Importance = widget.LowImportance
		head := container.NewBorder(nil, nil, widget.NewLabelWithStyle(hl.Label, fyne.TextAlignLeading, fyne.TextStyle{Italic: true}), cp)
		return container.NewStack(newBackground(theme.ColorNameInputBackground), container.NewVBox(head, newSideScroll(rt, v.env.scroller)))
	case tableBlock:
		return tableObject(b.Text)
	}
	rt := widget.NewRichText(markdownSegments(b.Text)...)
	rt.Wrapping = fyne.TextWrapWord
	return rt
}

// codeColours are the theme colours of the code kinds (a light or dark
// theme recolours them).
var codeColours = map[CodeKind]fyne.ThemeColorName{
	CodePlain:    theme.ColorNameForeground,
	CodeKeyword:  theme.ColorNamePrimary,
	CodeName:     theme.ColorNameHyperlink,
	CodeString:   theme.ColorNameSuccess,
	CodeNumber:   theme.ColorNameWarning,
	CodeComment:  theme.ColorNamePlaceHolder,
	CodeInserted: theme.ColorNameSuccess,
	CodeDeleted:  theme.ColorNameError,
	CodeHeading:  theme.ColorNamePrimary,
}

// codeSegments draws highlighted code: monospace spans in their kind's
// colour (themes have no bold or italic monospace font), each line ended
// by a segment that is not inline, so a line break is a new row.
func codeSegments(c Code) []widget.RichTextSegment {
	var segs []widget.RichTextSegment
	for _, line := range c.Lines {
		if len(line) == 0 {
			line = []CodeSpan{{}}
		}
		for i, sp := range line {
			st := widget.RichTextStyleCodeInline
			st.ColorName = codeColours[sp.Kind]
			st.Inline = i < len(line)-1
			segs = append(segs, &widget.TextSegment{Text: sp.Text, Style: st})
		}
	}
	return segs
}

// tableObject lays a Markdown table out as a grid, the header row bold.
func tableObject(md string) fyne.CanvasObject {
	var rows [][]string
	var align []fyne.TextAlign
	for _, line := range strings.Split(strings.TrimSpace(md), "\n") {
		t := strings.TrimSpace(line)
		t = strings.TrimSuffix(strings.TrimPrefix(t, "|"), "|")
		cells := strings.Split(t, "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if tableRule.MatchString(line) {
			// the rule row says each column's alignment: ---: right, :---: centre
			align = make([]fyne.TextAlign, len(cells))
			for i, c := range cells {
				switch {
				case strings.HasPrefix(c, ":") && strings.HasSuffix(c, ":"):
					align[i] = fyne.TextAlignCenter
				case strings.HasSuffix(c, ":"):
					align[i] = fyne.TextAlignTrailing
				}
			}
			continue
		}
		rows = append(rows, cells)
	}
	cols := 0
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	if cols == 0 {
		return widget.NewLabel("")
	}
	// one grid per row: a row is as tall as its own tallest cell, not the
	// table's (issue 27, G23)
	lines := container.NewVBox()
	for i, r := range rows {
		var cells []fyne.CanvasObject
		for j := 0; j < cols; j++ {
			text := ""
			if j < len(r) {
				text = r[j]
			}
			if i == 0 && text != "" {
				text = "**" + text + "**"
			}
			segs := markdownSegments(text)
			if j < len(align) && align[j] != fyne.TextAlignLeading {
				for _, sg := range segs {
					if ts, ok := sg.(*widget.TextSegment); ok {
						ts.Style.Alignment = align[j]
					}
				}
			}
			rt := widget.NewRichText(segs...)
			rt.Wrapping = fyne.TextWrapWord
			cells = append(cells, rt)
		}
		lines.Add(container.NewGridWithColumns(cols, cells...))
	}
	return container.NewStack(newBackground(theme.ColorNameInputBackground), lines)
}

// background is a rectangle in a theme colour that follows theme changes
// (a canvas.Rectangle keeps the colour it was given).
type background struct {
	widget.BaseWidget
	name fyne.ThemeColorName
}

func newBackground(name fyne.ThemeColorName) *background {
	b := &background{name: name}
	b.ExtendBaseWidget(b)
	return b
}

func (b *background) CreateRenderer() fyne.WidgetRenderer {
	r := canvas.NewRectangle(color.Transparent)
	br := &backgroundRenderer{b: b, r: r}
	br.Refresh()
	return br
}

type backgroundRenderer struct {
	b *background
	r *canvas.Rectangle
}

func (r *backgroundRenderer) Layout(s fyne.Size)           { r.r.Resize(s) }
func (r *backgroundRenderer) MinSize() fyne.Size           { return fyne.Size{} }
func (r *backgroundRenderer) Objects() []fyne.CanvasObject { return []fyne.CanvasObject{r.r} }
func (r *backgroundRenderer) Destroy()                     {}
func (r *backgroundRenderer) Refresh() {
	r.r.FillColor = theme.ColorForWidget(r.b.name, r.b)
	r.r.CornerRadius = theme.InputRadiusSize()
	r.r.Refresh()
}
