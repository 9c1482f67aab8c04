//go:build linux || darwin

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"k3/engine"
	"k3/engine/chat"
	"k3/storage/safetensors"
	"k3/tokenizer"
)

// tensorAt returns where a tensor's data lies.
func tensorAt(dir, name string) (path string, off, size int64, dtype safetensors.DType, err error) {
	set, err := safetensors.Open(dir)
	if err != nil {
		return "", 0, 0, "", err
	}
	defer set.Close()
	t, ok := set.Get(name)
	if !ok {
		return "", 0, 0, "", fmt.Errorf("no tensor %s in %s", name, dir)
	}
	return t.Path, t.Offset, t.Size, t.DType, nil
}

// patchTensor overwrites bytes of a tensor's data at off.
func patchTensor(dir, name string, off int64, b []byte) error {
	return mapTensor(dir, name, func(d []byte) { copy(d[off:], b) })
}

// mapTensor rewrites a tensor's data through fn.
func mapTensor(dir, name string, fn func([]byte)) error {
	path, at, size, _, err := tensorAt(dir, name)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, size)
	if _, err := f.ReadAt(b, at); err != nil {
		return err
	}
	fn(b)
	_, err = f.WriteAt(b, at)
	return err
}

func bf16(v float32) [2]byte {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], uint16(math.Float32bits(v)>>16))
	return b
}

// craftOpenSep turns a demo copy into a model whose greedy chat reply
// holds <|open|> directly followed by <|sep|> (audit row 4.32): lm_head is
// zero but for the open row, +8·W, and the sep row, -8·W, so the sign of
// W·h picks between the two. W is the original lm_head row that makes the
// first chat turn emit the pair (found by trying them in order).
func craftOpenSep(dir string) (row int, err error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return 0, err
	}
	open, _ := tok.SpecialID(tokenizer.Open)
	sep, _ := tok.SpecialID(tokenizer.Sep)
	name := "language_model.lm_head.weight"
	path, at, size, dt, err := tensorAt(dir, name)
	if err != nil {
		return 0, err
	}
	if dt != safetensors.BF16 {
		return 0, fmt.Errorf("%s is %s, want BF16", name, dt)
	}
	orig := make([]byte, size)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.ReadAt(orig, at); err != nil {
		return 0, err
	}
	vocab := tok.VocabSize()
	width := int(size) / 2 / vocab
	for r := 0; r < vocab; r++ {
		head := make([]byte, size)
		for j := 0; j < width; j++ {
			w := math.Float32frombits(uint32(binary.LittleEndian.Uint16(orig[2*(r*width+j):])) << 16)
			p, n := bf16(8*w), bf16(-8*w)
			copy(head[2*(open*width+j):], p[:])
			copy(head[2*(sep*width+j):], n[:])
		}
		if _, err := f.WriteAt(head, at); err != nil {
			return 0, err
		}
		if ok, err := emitsOpenSep(dir, tok, open, sep); err != nil {
			return 0, err
		} else if ok {
			return r, nil
		}
	}
	return 0, fmt.Errorf("no lm_head row makes the demo emit <|open|><|sep|>")
}

// emitsOpenSep runs one greedy chat turn in process and reports whether the
// reply holds open directly followed by sep (a panic in the reply parser
// counts: that is the case).
func emitsOpenSep(dir string, tok *tokenizer.Tokenizer, open, sep int) (found bool, err error) {
	m, err := engine.Open(dir, engine.Options{Budget: engine.Budget{CacheBytes: 1 << 30}, Positions: 8192})
	if err != nil {
		return false, err
	}
	defer m.Close()
	e := m.NewEngine(1)
	defer e.Close()
	s := chat.NewSession(e, tok)
	var ids []int
	defer func() {
		if recover() != nil {
			found, err = true, nil
		}
	}()
	_, err = s.Turn(context.Background(), "hello", chat.Options{Thinking: true, MaxTokens: 64, Sampling: engine.Sampling{Greedy: true}}, func(ev engine.Event) {
		if ev.Kind == engine.EventToken {
			ids = append(ids, ev.Token)
		}
	})
	for i := 0; i+1 < len(ids); i++ {
		if ids[i] == open && ids[i+1] == sep {
			return true, nil
		}
	}
	return false, err
}
