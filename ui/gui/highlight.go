package gui

import (
	"strings"
	"sync"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
)

// CodeKind is what a piece of code is, for its colour: the views map each
// kind to a theme colour, so a light or dark theme recolours the code.
type CodeKind int

// Code kinds.
const (
	CodePlain    CodeKind = iota
	CodeKeyword           // keywords, preprocessor lines, markup tags
	CodeName              // the names of functions, types and builtins being defined or called
	CodeString            // string and character literals
	CodeNumber            // number literals
	CodeComment           // comments
	CodeInserted          // a diff's added line
	CodeDeleted           // a diff's removed line
	CodeHeading           // a diff's or a document's heading
)

// CodeSpan is a run of code of one kind, within one line.
type CodeSpan struct {
	Text string
	Kind CodeKind
}

// Code is a fenced code block ready to draw.
type Code struct {
	// Label names the language: chroma's name for it ("Go", "Bash"), the
	// fence's word when chroma does not know it, "code" when the fence names
	// none.
	Label string
	// Lines are the block's lines (without their line breaks), each a run of
	// spans; the spans' text joined with "\n" between lines is the code.
	Lines [][]CodeSpan
}

// maxHighlight is the longest code block coloured; a longer one (pasted
// data, a log) is shown plain, so a flush never tokenises megabytes.
const maxHighlight = 64 << 10

// Highlight cuts code into coloured spans with chroma's lexer for the
// language a fence names (```go, ```python, ```sh). A block whose language
// chroma does not know, or that names none, is shown plain: a guess from
// the text alone would colour a shell session as something else.
func Highlight(fence, code string) Code {
	lang, _, _ := strings.Cut(strings.TrimSpace(fence), " ")
	lang = strings.TrimPrefix(strings.TrimSuffix(strings.TrimPrefix(lang, "{"), "}"), ".")
	c := Code{Label: lang}
	if lang == "" {
		c.Label = "code"
	}
	lx := lexerFor(lang)
	if lx != nil {
		c.Label = lx.Config().Name
		if len(code) <= maxHighlight {
			if lines, ok := tokenLines(lx, code); ok {
				c.Lines = lines
				return c
			}
		}
	}
	for _, l := range strings.Split(code, "\n") {
		c.Lines = append(c.Lines, []CodeSpan{{Text: l}})
	}
	return c
}

var lexerCache sync.Map // language -> chroma.Lexer or nil

// lexerFor finds the lexer for a fence's language by name or alias (once
// per language: chroma's lookup walks every lexer's file patterns when
// the name is not an exact one, and a block being written is coloured
// again at every flush).
func lexerFor(lang string) chroma.Lexer {
	if lang == "" {
		return nil
	}
	key := strings.ToLower(lang)
	if v, ok := lexerCache.Load(key); ok {
		lx, _ := v.(chroma.Lexer)
		return lx
	}
	lx := lexers.Get(key)
	if lx != nil {
		lx = chroma.Coalesce(lx)
	}
	lexerCache.Store(key, lx)
	return lx
}

// tokenLines tokenises code and splits the tokens at line breaks; ok is
// false when the tokens do not spell the code exactly (then it is shown
// plain rather than changed).
func tokenLines(lx chroma.Lexer, code string) ([][]CodeSpan, bool) {
	it, err := lx.Tokenise(nil, code)
	if err != nil {
		return nil, false
	}
	lines := [][]CodeSpan{nil}
	var spelled strings.Builder
	for _, tok := range it.Tokens() {
		spelled.WriteString(tok.Value)
		kind := kindOf(tok.Type)
		for i, part := range strings.Split(tok.Value, "\n") {
			if i > 0 {
				lines = append(lines, nil)
			}
			if part == "" {
				continue
			}
			last := &lines[len(lines)-1]
			if n := len(*last); n > 0 && (*last)[n-1].Kind == kind {
				(*last)[n-1].Text += part
				continue
			}
			*last = append(*last, CodeSpan{Text: part, Kind: kind})
		}
	}
	// lexers end the text with a line break when it has none
	switch s := spelled.String(); {
	case s == code:
	case s == code+"\n":
		lines = lines[:len(lines)-1]
	default:
		return nil, false
	}
	return lines, true
}

// kindOf maps chroma's token types to the few kinds the view colours.
func kindOf(t chroma.TokenType) CodeKind {
	switch t {
	case chroma.CommentPreproc, chroma.CommentPreprocFile, chroma.NameTag, chroma.NameDecorator:
		return CodeKeyword
	case chroma.NameFunction, chroma.NameClass, chroma.NameBuiltin, chroma.NameBuiltinPseudo, chroma.NameException,
		chroma.NameAttribute, chroma.KeywordType, chroma.NameFunctionMagic:
		return CodeName
	case chroma.GenericInserted:
		return CodeInserted
	case chroma.GenericDeleted:
		return CodeDeleted
	case chroma.GenericHeading, chroma.GenericSubheading:
		return CodeHeading
	}
	switch {
	case t.InCategory(chroma.Keyword):
		return CodeKeyword
	case t.InCategory(chroma.Comment):
		return CodeComment
	case t.InSubCategory(chroma.LiteralString):
		return CodeString
	case t.InSubCategory(chroma.LiteralNumber):
		return CodeNumber
	}
	return CodePlain
}
