package openai

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readAll(t *testing.T, s string) ([]Event, error) {
	t.Helper()
	var evs []Event
	err := ReadSSE(strings.NewReader(s), func(ev Event) error {
		evs = append(evs, ev)
		return nil
	})
	return evs, err
}

func TestReadSSE(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []Event
	}{
		{"plain", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []Event{{Data: []byte(`{"a":1}`)}, {Data: []byte("[DONE]")}}},
		{"bom", "\ufeffdata: x\n\n", []Event{{Data: []byte("x")}}},
		{"crlf", "data: x\r\n\r\ndata: y\r\n\r\n", []Event{{Data: []byte("x")}, {Data: []byte("y")}}},
		{"cr only", "data: x\r\rdata: y\r\r", []Event{{Data: []byte("x")}, {Data: []byte("y")}}},
		{"multi-line", "data: {\"a\":\ndata: 1}\n\n", []Event{{Data: []byte("{\"a\":\n1}")}}},
		{"no space", "data:x\n\n", []Event{{Data: []byte("x")}}},
		{"comment, event, id, retry", ": prefill 3/9\nevent: delta\nid: 7\nretry: 10\ndata: x\n\n",
			[]Event{{Comment: "prefill 3/9"}, {Data: []byte("x"), Type: "delta"}}},
		{"no data", "event: x\nid: 1\n{\"json\":1}\n\n", nil},
		{"left at the end", "data: x\ndata: y", []Event{{Data: []byte("x\ny")}}},
		{"empty data", "data\n\n", []Event{{Data: []byte{}}}},
	} {
		evs, err := readAll(t, c.in)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, evs, c.name)
	}
}

func TestReadSSELimits(t *testing.T) {
	_, err := readAll(t, "data: "+strings.Repeat("x", MaxLine+1)+"\n\n")
	assert.ErrorIs(t, err, ErrLineTooLong)
	_, err = readAll(t, strings.Repeat("x", MaxLine+10))
	assert.ErrorIs(t, err, ErrLineTooLong, "no newline at all")
	// many data lines, each short, joined past the cap
	_, err = readAll(t, strings.Repeat("data: "+strings.Repeat("y", 1<<20)+"\n", 5)+"\n")
	assert.ErrorIs(t, err, ErrLineTooLong)
	stop := errors.New("stop")
	n := 0
	err = ReadSSE(strings.NewReader("data: 1\n\ndata: 2\n\n"), func(Event) error { n++; return stop })
	assert.Equal(t, stop, err)
	assert.Equal(t, 1, n, "fn's error ends the reading")
}

// FuzzReadSSE: any bytes read without panic; events never carry a line
// end other than the newline that joins data lines, comments none, and
// nothing passes MaxLine.
func FuzzReadSSE(f *testing.F) {
	for _, s := range []string{"data: x\n\n", "\ufeffdata: x\r\n\r\n", ": c\rdata: a\rdata: b\r\r", "event: e\nid: 1\nretry: 5\n", "data", "\r", "\ufeff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		err := ReadSSE(bytes.NewReader(in), func(ev Event) error {
			assert.NotContains(t, string(ev.Data), "\r")
			assert.NotContains(t, ev.Comment, "\n")
			assert.NotContains(t, ev.Comment, "\r")
			assert.LessOrEqual(t, len(ev.Data), MaxLine)
			return nil
		})
		assert.NoError(t, err)
	})
}
