package safetensors

import "fmt"

// DType is a safetensors element type, spelled as in the file header.
type DType string

// The element types this package accepts. Every other dtype is refused when a
// header is parsed.
const (
	F32  DType = "F32"
	BF16 DType = "BF16"
	F16  DType = "F16"
	U8   DType = "U8"
)

// Size returns the size in bytes of one element, or 0 for an unsupported
// dtype.
func (d DType) Size() int64 {
	switch d {
	case F32:
		return 4
	case BF16, F16:
		return 2
	case U8:
		return 1
	}
	return 0
}

// Valid reports whether d is one of the supported dtypes.
func (d DType) Valid() bool { return d.Size() != 0 }

// dtypeFromString maps a header dtype string to a DType.
func dtypeFromString(b string) (DType, bool) {
	switch b {
	case "F32":
		return F32, true
	case "BF16":
		return BF16, true
	case "F16":
		return F16, true
	case "U8":
		return U8, true
	}
	return "", false
}

// unsupportedDType formats the refusal message for a dtype string.
func unsupportedDType(s string) string {
	plain := len(s) > 0 && len(s) <= 16
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	if !plain {
		s = fmt.Sprintf("%q", s)
	}
	return "dtype " + s + " is not supported (supported: F32, BF16, F16, U8)"
}

// MaxRank is the largest tensor rank accepted.
const MaxRank = 4

// Tensor describes one tensor of an opened set. Values returned by a Set
// must not be modified.
type Tensor struct {
	Name   string
	DType  DType
	Shape  []int64
	Path   string // shard file holding the data
	Offset int64  // absolute byte offset of the data in Path
	Size   int64  // data length in bytes (Numel * DType.Size)
}

// Numel returns the number of elements (1 for a rank-0 tensor).
func (t *Tensor) Numel() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// String renders the tensor as name dtype[shape] @path+offset.
func (t *Tensor) String() string {
	return fmt.Sprintf("%s %s%v @%s+%d", t.Name, t.DType, t.Shape, t.Path, t.Offset)
}

// FormatError reports a malformed or inconsistent file, header, index or
// shard set. Path names the file (or directory) at fault and Tensor the
// tensor concerned, when there is one.
type FormatError struct {
	Path   string
	Tensor string
	Msg    string
}

func (e *FormatError) Error() string {
	s := "safetensors: " + e.Path
	if e.Tensor != "" {
		s += fmt.Sprintf(": tensor %q", e.Tensor)
	}
	return s + ": " + e.Msg
}
