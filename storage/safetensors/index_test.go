package safetensors

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseIndexRefusals(t *testing.T) {
	for in, want := range map[string]string{
		``:                  "JSON is truncated",
		`[]`:                "'{' opening the index",
		`{}`:                "no weight_map",
		`{"weight_map":{}}`: "weight_map is empty",
		`{"weight_map":{"a":"../x.safetensors"}}`:                                      `tensor "a": weight_map names "../x.safetensors", which is not a plain file name ending in .safetensors`,
		`{"weight_map":{"a":"x.bin"}}`:                                                 `weight_map names "x.bin"`,
		`{"weight_map":{"a":"x\u0000.safetensors"}}`:                                   "not a plain file name",
		`{"weight_map":{"":"x.safetensors"}}`:                                          "empty tensor name",
		`{"weight_map":{"a":1}}`:                                                       "not a string",
		`{"weight_map":{"a":"x.safetensors","b":"x.safetensors","a":"y.safetensors"}}`: `model.safetensors.index.json: tensor "a": listed twice in weight_map`,
		`{"weight_map":{"a":"x.safetensors"},"weight_map":{}}`:                         "duplicate weight_map",
	} {
		_, err := ParseIndex([]byte(in))
		var fe *FormatError
		if assert.ErrorAs(t, err, &fe, "ParseIndex(%q)", in) {
			assert.Contains(t, err.Error(), want, "ParseIndex(%q)", in)
		}
	}
}

func TestReadIndex(t *testing.T) {
	dir := t.TempDir()
	_, err := ReadIndex(dir)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "missing index: %v", err)

	weightMap := map[string]string{"b": ShardName(2, 2), "a": ShardName(1, 2), "c": ShardName(1, 2)}
	require.NoError(t, WriteIndex(dir, weightMap, 42))
	ix, err := ReadIndex(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{ShardName(1, 2), ShardName(2, 2)}, ix.Files())
	got := map[string]string{}
	var order []string
	for name, file := range ix.All() {
		got[name] = file
		order = append(order, name)
	}
	assert.Equal(t, weightMap, got)
	assert.True(t, slices.IsSorted(order), "WriteIndex sorts the names: %v", order)

	// a duplicate is refused with the file's path and the tensor
	require.NoError(t, os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"weight_map":{"a":"x.safetensors","a":"x.safetensors"}}`), 0o644))
	_, err = ReadIndex(dir)
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, FormatError{Path: filepath.Join(dir, IndexFile), Tensor: "a", Msg: "listed twice in weight_map"}, *fe)
}
