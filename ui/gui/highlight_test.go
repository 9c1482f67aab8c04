package gui

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// text joins the spans back into the code.
func (c Code) text() string {
	lines := make([]string, len(c.Lines))
	for i, l := range c.Lines {
		for _, s := range l {
			lines[i] += s.Text
		}
	}
	return strings.Join(lines, "\n")
}

// kinds lists the kind of each span that holds want.
func (c Code) kindOf(want string) []CodeKind {
	var out []CodeKind
	for _, l := range c.Lines {
		for _, s := range l {
			if strings.Contains(s.Text, want) {
				out = append(out, s.Kind)
			}
		}
	}
	return out
}

func TestHighlightGo(t *testing.T) {
	code := "package main\n\n// Hello says hello.\nfunc Hello(n int) string {\n\treturn \"hi\" + strconv.Itoa(42)\n}"
	c := Highlight("go", code)
	assert.Equal(t, "Go", c.Label)
	require.Len(t, c.Lines, 6)
	assert.Equal(t, code, c.text(), "the spans spell the code exactly")
	assert.Empty(t, c.Lines[1], "an empty line has no spans")
	assert.Equal(t, []CodeKind{CodeKeyword}, c.kindOf("package"))
	assert.Equal(t, []CodeKind{CodeComment}, c.kindOf("// Hello says hello."))
	assert.Equal(t, []CodeKind{CodeKeyword}, c.kindOf("func"))
	assert.Contains(t, c.kindOf("Hello"), CodeName, "the function being defined")
	assert.Equal(t, []CodeKind{CodeName}, c.kindOf("string"), "a builtin type")
	assert.Equal(t, []CodeKind{CodeString}, c.kindOf(`"hi"`))
	assert.Equal(t, []CodeKind{CodeNumber}, c.kindOf("42"))
}

func TestHighlightLabelsAndFallbacks(t *testing.T) {
	// the fence's word, an alias, extra words after it
	assert.Equal(t, "Bash", Highlight("sh", "ls -l").Label)
	assert.Equal(t, "Python", Highlight("python {linenos=true}", "x = 1").Label)
	assert.Equal(t, "Python", Highlight("PY", "x = 1").Label)

	// a diff: added and removed lines
	d := Highlight("diff", "--- a\n+++ b\n-old\n+new\n same")
	assert.Equal(t, "Diff", d.Label)
	assert.Equal(t, []CodeKind{CodeDeleted}, d.kindOf("-old"))
	assert.Equal(t, []CodeKind{CodeInserted}, d.kindOf("+new"))

	// no language, or one chroma does not know: plain, line by line,
	// labelled with what the fence said
	for fence, label := range map[string]string{"": "code", "nosuchlanguage": "nosuchlanguage"} {
		c := Highlight(fence, "a = 1\n\nb")
		assert.Equal(t, label, c.Label)
		assert.Equal(t, [][]CodeSpan{{{Text: "a = 1"}}, {{Text: ""}}, {{Text: "b"}}}, c.Lines)
	}

	// a block too long to colour at every flush is shown plain
	long := strings.Repeat("x = 1\n", maxHighlight/6+1)
	c := Highlight("python", long)
	assert.Equal(t, "Python", c.Label)
	assert.Equal(t, long, c.text())
	for _, l := range c.Lines {
		for _, s := range l {
			assert.Equal(t, CodePlain, s.Kind)
		}
	}

	// text ending in a line break, and a half-written block (a reply still
	// streaming), are spelled exactly
	for _, code := range []string{"x = 1\n", "def f(:\n  \"unclosed", "\n\n"} {
		assert.Equal(t, code, Highlight("python", code).text(), "%q", code)
	}
}
