package gui

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/chat"
)

// segText is what the segments show, rows separated by "\n" (a list
// item's paragraph is one row).
func segText(segs []widget.RichTextSegment) string {
	var b strings.Builder
	var walk func(segs []widget.RichTextSegment)
	walk = func(segs []widget.RichTextSegment) {
		for _, s := range segs {
			switch t := s.(type) {
			case *widget.ParagraphSegment:
				walk(t.Texts)
				b.WriteString("\n")
			case *widget.TextSegment:
				b.WriteString(t.Text)
				if !t.Inline() {
					b.WriteString("\n")
				}
			case *widget.HyperlinkSegment:
				b.WriteString(t.Text)
			}
		}
	}
	walk(segs)
	return b.String()
}

// G2: identifiers, brackets and arithmetic in a reply's prose read as
// written; emphasis still works where CommonMark puts it.
func TestMarkdownKeepsIdentifiersAndArithmetic(t *testing.T) {
	for md, want := range map[string]string{
		"Call my_long_name and a_b_c now.":             "Call my_long_name and a_b_c now.\n",
		"It is 2*3*4 = 24, and x*y too.":               "It is 2*3*4 = 24, and x*y too.\n",
		"Keep [in brackets] and get_weather(city).":    "Keep [in brackets] and get_weather(city).\n",
		"A List<int> & more\nnext line":                "A List<int> & more next line\n",
		"Use `snake_case` for a__b__c files.":          "Use snake_case for a__b__c files.\n",
		"- first_item\n- second *one*\n  1. inner_x\n": "• first_item\n• second one\n    1. inner_x\n",
		"Escaped \\*star\\* stays.":                    "Escaped *star* stays.\n",
	} {
		assert.Equal(t, want, segText(markdownSegments(md)), "%q", md)
	}

	segs := markdownSegments("a **bold** and *it* and _em_ word")
	var styles []string
	for _, s := range segs {
		if ts, ok := s.(*widget.TextSegment); ok && ts.Text != "" {
			st := ""
			if ts.Style.TextStyle.Bold {
				st = "b:"
			}
			if ts.Style.TextStyle.Italic {
				st = "i:"
			}
			styles = append(styles, st+ts.Text)
		}
	}
	assert.Equal(t, []string{"a ", "b:bold", " and ", "i:it", " and ", "i:em", " word"}, styles)
}

// G2 in the message view: the reply's text block shows the identifiers
// as written (Fyne's Markdown renderer put spaces after every piece).
func TestReplyShowsIdentifiersAsWritten(t *testing.T) {
	var copied string
	v := newMV(chat.Message{Role: "assistant", Content: "Set my_long_name to 2*3*4 and call get_weather."}, &copied)
	require.Len(t, v.body.Objects, 1)
	rt, ok := v.body.Objects[0].(*widget.RichText)
	require.True(t, ok)
	assert.Equal(t, "Set my_long_name to 2*3*4 and call get_weather.", strings.TrimSpace(rt.String()))
}

// G23: a Markdown table's rows are as tall as their own cells, and a
// right-aligned column is drawn right-aligned.
func TestTableRowsAndAlignment(t *testing.T) {
	tbl := tableObject("| name | n |\n|:--|--:|\n| a | 1 |\n| " + strings.Repeat("a long cell that wraps ", 12) + "| 22 |\n| b | 3 |")
	w := test.NewWindow(tbl)
	defer w.Close()
	w.Resize(fyne.NewSize(400, 600))
	rows := tbl.(*fyne.Container).Objects[1].(*fyne.Container).Objects
	require.Len(t, rows, 4)
	short, long := rows[1].Size().Height, rows[2].Size().Height
	assert.Greater(t, long, 2*short, "the long row wraps")
	assert.InDelta(t, short, rows[3].Size().Height, 0.5, "a short row after it stays short")
	cell := func(r, c int) *widget.RichText { return rows[r].(*fyne.Container).Objects[c].(*widget.RichText) }
	for r := range 4 {
		ts := cell(r, 1).Segments[0].(*widget.TextSegment)
		assert.Equal(t, fyne.TextAlignTrailing, ts.Style.Alignment, "row %d", r)
		assert.Equal(t, fyne.TextAlignLeading, cell(r, 0).Segments[0].(*widget.TextSegment).Style.Alignment)
	}
	assert.Equal(t, "22", cell(2, 1).String())
}
