package strictjson

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{
		`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`,
		`{"role":"user","content":"h\u00e9 \ud83d\ude00 \\u0041"}`,
		`[1,2,"x"]`, ``, `{"a":{}} {"a":[]}`,
	} {
		assert.NoError(t, Check([]byte(ok)), ok)
	}
	for _, c := range []struct{ in, want string }{
		{`{"role":"user","content":"a","content":"b"}`, `duplicate key "content"`},
		{`{"text_config":{"hidden_size":64,"x":[1],"hidden_size":128}}`, `duplicate key "text_config.hidden_size"`},
		{`{"a":[{"k":1,"k":2}]}`, `duplicate key "a.k"`},
		{"{\"content\":\"\xff\xfe\"}", "invalid UTF-8 at byte 12"},
		{`{"content":"\ud800x"}`, "lone UTF-16 surrogate escape at byte 12"},
		{`{"content":"\udc00"}`, "lone UTF-16 surrogate"},
		{`{"content":"\ud83d\u0041"}`, "lone UTF-16 surrogate"},
	} {
		err := Check([]byte(c.in))
		require.Error(t, err, c.in)
		assert.Contains(t, err.Error(), c.want, c.in)
	}
}
