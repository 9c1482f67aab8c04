package engine

import "fmt"

// NonFiniteError is a forward pass that produced NaN or Inf: the weights
// of the part named hold non-finite values, or a file is damaged. The run
// fails instead of sampling from NaN logits (which gives token 0 forever).
type NonFiniteError struct {
	Layer int    // 0-based layer whose output first held one; -1 outside the layers
	Where string // the part, in words
	Pos   int    // the first position (of the whole sequence) holding one
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("non-finite values (NaN or Inf) first appeared in %s at position %d: the checkpoint's weights there hold NaN or Inf, or a file is damaged (check it with k3 verify --sha256 or download it again)", e.Where, e.Pos)
}

func layerNonFinite(li, pos0 int, x []float32, width int) *NonFiniteError {
	return &NonFiniteError{Layer: li, Where: fmt.Sprintf("the output of layer %d (model.layers.%d.*)", li, li), Pos: pos0 + firstNonFinite(x)/width}
}

// allFinite reports whether x holds no NaN or Inf: v*0 is 0 for every
// finite v and NaN otherwise, and four independent sums keep the loop at
// about one element a cycle (a check of a layer's output costs well under
// a thousandth of computing it).
func allFinite(x []float32) bool {
	var a, b, c, d float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a += x[i] * 0
		b += x[i+1] * 0
		c += x[i+2] * 0
		d += x[i+3] * 0
	}
	for ; i < len(x); i++ {
		a += x[i] * 0
	}
	return a == 0 && b == 0 && c == 0 && d == 0
}

func firstNonFinite(x []float32) int {
	for i, v := range x {
		if v*0 != 0 {
			return i
		}
	}
	return -1
}
