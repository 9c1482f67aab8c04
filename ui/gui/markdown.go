package gui

import (
	"html"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// markdownSegments renders the Markdown of a reply's text block as rich
// text segments. It parses with goldmark (CommonMark) but draws the text
// itself: Fyne's own renderer puts a space after every text piece the
// parser splits off, so "my_long_name" read "my_ long_ name" and
// "[in brackets]" read "[ in brackets]". Here the text is written exactly
// as the reply has it: adjacent pieces in the same style are joined, a soft
// line break is one space, and raw HTML (e.g. "List<int>") is kept as text.
//
// CommonMark never emphasises with "_" inside a word; it does with "*"
// (2*3*4 would be 2, 3 in italics, 4). A "*" between two letters or digits
// is kept as written here, so arithmetic and globs read as written.
func markdownSegments(md string) []widget.RichTextSegment {
	src := []byte(literalIntrawordStars(md))
	doc := goldmark.New().Parser().Parse(text.NewReader(src))
	r := &mdRenderer{src: src}
	r.blocks(doc, 0, false)
	return r.out
}

// literalIntrawordStars escapes each "*" that has a letter or digit on both
// sides, outside code spans.
func literalIntrawordStars(md string) string {
	if !strings.Contains(md, "*") {
		return md
	}
	var b strings.Builder
	tick := 0 // the length of the backtick run that opened a code span
	for i := 0; i < len(md); i++ {
		c := md[i]
		if c == '`' {
			j := i
			for j < len(md) && md[j] == '`' {
				j++
			}
			switch n := j - i; {
			case tick == 0:
				tick = n
			case tick == n:
				tick = 0
			}
			b.WriteString(md[i:j])
			i = j - 1
			continue
		}
		if c == '*' && tick == 0 && i > 0 && i+1 < len(md) {
			before, _ := utf8.DecodeLastRuneInString(md[:i])
			after, _ := utf8.DecodeRuneInString(md[i+1:])
			if isWordRune(before) && isWordRune(after) {
				b.WriteString(`\*`)
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// mdRenderer collects segments; text of one style is gathered in cur until
// the style changes or a row ends.
type mdRenderer struct {
	src   []byte
	out   []widget.RichTextSegment
	para  *[]widget.RichTextSegment // where inline segments go (a list item's paragraph, or out)
	cur   strings.Builder
	style widget.RichTextStyle
}

func (r *mdRenderer) sink() *[]widget.RichTextSegment {
	if r.para != nil {
		return r.para
	}
	return &r.out
}

// text adds s in style st, joined to the text before it when the style is
// the same.
func (r *mdRenderer) text(s string, st widget.RichTextStyle) {
	if s == "" {
		return
	}
	if r.cur.Len() > 0 && r.style != st {
		r.flush()
	}
	r.style = st
	r.cur.WriteString(s)
}

func (r *mdRenderer) flush() {
	if r.cur.Len() == 0 {
		return
	}
	st := r.style
	st.Inline = true
	t := r.cur.String()
	if st != widget.RichTextStyleCodeInline {
		// goldmark keeps backslash escapes and entities in the text
		t = html.UnescapeString(string(util.UnescapePunctuations([]byte(t))))
	}
	*r.sink() = append(*r.sink(), &widget.TextSegment{Text: t, Style: st})
	r.cur.Reset()
}

// endRow ends the current row with a segment that is not inline (in the
// paragraph style, which adds the space between paragraphs, or not).
func (r *mdRenderer) endRow(st widget.RichTextStyle) {
	r.flush()
	st.Inline = false
	*r.sink() = append(*r.sink(), &widget.TextSegment{Style: st})
}

// blocks renders the block children of n; depth is the list nesting.
func (r *mdRenderer) blocks(n ast.Node, depth int, quote bool) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.block(c, depth, quote)
	}
}

func (r *mdRenderer) block(n ast.Node, depth int, quote bool) {
	base := widget.RichTextStyleInline
	if quote {
		base = widget.RichTextStyleBlockquote
	}
	switch t := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.inlines(n, base)
		if r.para != nil {
			r.flush()
			return
		}
		if quote {
			r.endRow(widget.RichTextStyleBlockquote)
			return
		}
		r.endRow(widget.RichTextStyleParagraph)
	case *ast.Heading:
		st := widget.RichTextStyleParagraph
		st.TextStyle.Bold = true
		switch t.Level {
		case 1:
			st = widget.RichTextStyleHeading
		case 2:
			st = widget.RichTextStyleSubHeading
		}
		st.Inline = true
		r.inlines(n, st)
		r.endRow(widget.RichTextStyleParagraph)
	case *ast.ThematicBreak:
		r.flush()
		r.out = append(r.out, &widget.SeparatorSegment{})
	case *ast.Blockquote:
		r.blocks(n, depth, true)
	case *ast.List:
		num := t.Start
		for item := n.FirstChild(); item != nil; item = item.NextSibling() {
			bullet := "• "
			if t.IsOrdered() {
				bullet = strconv.Itoa(num) + ". "
				num++
			}
			r.listItem(item, depth, bullet, quote)
		}
	case *ast.CodeBlock, *ast.FencedCodeBlock:
		var b strings.Builder
		lines := n.Lines()
		for i := 0; i < lines.Len(); i++ {
			seg := lines.At(i)
			b.Write(seg.Value(r.src))
		}
		r.flush()
		r.out = append(r.out, &widget.TextSegment{Style: widget.RichTextStyleCodeBlock, Text: strings.TrimSuffix(b.String(), "\n")})
	case *ast.HTMLBlock:
		var b strings.Builder
		lines := n.Lines()
		for i := 0; i < lines.Len(); i++ {
			seg := lines.At(i)
			b.Write(seg.Value(r.src))
		}
		r.text(strings.TrimSuffix(b.String(), "\n"), base)
		r.endRow(widget.RichTextStyleParagraph)
	default:
		r.blocks(n, depth, quote)
	}
}

// listItem draws one item as a paragraph that starts with its bullet
// (indented by the nesting depth); a nested list follows as rows of its own.
func (r *mdRenderer) listItem(item ast.Node, depth int, bullet string, quote bool) {
	r.flush()
	var texts []widget.RichTextSegment
	texts = append(texts, &widget.TextSegment{Text: strings.Repeat("    ", depth) + bullet, Style: widget.RichTextStyleStrong})
	outer := r.para
	r.para = &texts
	first := true
	var nested []ast.Node
	for c := item.FirstChild(); c != nil; c = c.NextSibling() {
		if _, ok := c.(*ast.List); ok {
			nested = append(nested, c)
			continue
		}
		if !first {
			r.text(" ", widget.RichTextStyleInline)
		}
		first = false
		r.block(c, depth+1, quote)
	}
	r.flush()
	r.para = outer
	*r.sink() = append(*r.sink(), &widget.ParagraphSegment{Texts: texts})
	for _, l := range nested {
		r.block(l, depth+1, quote)
	}
}

// inlines renders the inline children of n in style st.
func (r *mdRenderer) inlines(n ast.Node, st widget.RichTextStyle) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch t := c.(type) {
		case *ast.Text:
			r.text(string(t.Segment.Value(r.src)), st)
			switch {
			case t.HardLineBreak():
				r.endRow(widget.RichTextStyleInline)
			case t.SoftLineBreak():
				r.text(" ", st)
			}
		case *ast.String:
			r.text(string(t.Value), st)
		case *ast.CodeSpan:
			var b strings.Builder
			for g := t.FirstChild(); g != nil; g = g.NextSibling() {
				if tx, ok := g.(*ast.Text); ok {
					b.Write(tx.Segment.Value(r.src))
				}
			}
			r.text(b.String(), widget.RichTextStyleCodeInline)
		case *ast.Emphasis:
			e := st
			if t.Level >= 2 {
				e.TextStyle.Bold = true
			} else {
				e.TextStyle.Italic = true
			}
			r.inlines(t, e)
		case *ast.Link:
			r.link(string(t.Destination), r.plain(t))
		case *ast.AutoLink:
			r.link(string(t.URL(r.src)), string(t.Label(r.src)))
		case *ast.RawHTML:
			var b strings.Builder
			for i := 0; i < t.Segments.Len(); i++ {
				seg := t.Segments.At(i)
				b.Write(seg.Value(r.src))
			}
			r.text(b.String(), st)
		case *ast.Image:
			r.text(r.plain(t), st)
		default:
			r.inlines(c, st)
		}
	}
}

// plain is the text of n's inline children, without styles.
func (r *mdRenderer) plain(n ast.Node) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := c.(*ast.Text); ok && entering {
			b.Write(t.Segment.Value(r.src))
			if t.SoftLineBreak() {
				b.WriteByte(' ')
			}
		}
		return ast.WalkContinue, nil
	})
	return html.UnescapeString(string(util.UnescapePunctuations([]byte(b.String()))))
}

func (r *mdRenderer) link(dest, label string) {
	r.flush()
	u, err := url.Parse(dest)
	if err != nil || label == "" {
		r.text(label, widget.RichTextStyleInline)
		return
	}
	*r.sink() = append(*r.sink(), &widget.HyperlinkSegment{Alignment: fyne.TextAlignLeading, Text: label, URL: u})
}
