package measure

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sort"
)

// Alternative lossless bf16 encodings, measured against kernels.BF16C by
// `k3 bench compress` on the same weights. They exist to choose a format by
// ratio and decode speed; the engine reads only BF16C.
//
// A bf16 word is sign (1 bit), exponent (8) and mantissa (7). Trained
// weights spend nearly all of their information in sign and mantissa; the
// exponent byte is what every format below codes in fewer bits, keeping
// the sign+mantissa byte (sign<<7 | mantissa) as it is.

// x3 is BF16C with 3-bit exponent offsets and exceptions: a row is nb
// header bytes (one per 32-weight block), then the block bodies. A header
// below 255 is the block's base exponent b, and its body is
//
//	12 bytes: 32 codes of 3 bits, little-endian (code j at bits 3j..3j+2);
//	          code c < 7 is exponent b+c, 7 marks an exception
//	32 bytes: sign<<7 | mantissa of each weight
//	n bytes:  the full exponent of each exception, in order
//
// so a block takes 45 bytes plus one per exception (BF16C: 49). A header
// of 255 is a raw block (little-endian bf16 words): every short last block,
// and a full block whose exceptions would make it 64 bytes or more.
const (
	x3Codes  = 12
	x3Body   = x3Codes + 32
	x3Except = 7
)

// AppendX3Row appends the x3 form of one row of bf16 words.
func AppendX3Row(dst []byte, row []uint16) []byte {
	c := len(row)
	nb := (c + 31) / 32
	h := len(dst)
	for range nb {
		dst = append(dst, 0)
	}
	for b := 0; b < nb; b++ {
		blk := row[b*32 : min((b+1)*32, c)]
		base, inside := -1, 0
		if len(blk) == 32 {
			base, inside = x3Base(blk)
		}
		if base < 0 || x3Body+32-inside >= 64 {
			dst[h+b] = 255
			for _, w := range blk {
				dst = binary.LittleEndian.AppendUint16(dst, w)
			}
			continue
		}
		dst[h+b] = byte(base)
		var codes [16]byte // 12 used; room for the 32-bit stores below
		for j, w := range blk {
			code := uint32(x3Except)
			if d := int(w>>7&0xff) - base; d >= 0 && d < x3Except {
				code = uint32(d)
			}
			bit := 3 * j
			v := binary.LittleEndian.Uint32(codes[bit/8:]) | code<<(bit%8)
			binary.LittleEndian.PutUint32(codes[bit/8:], v)
		}
		dst = append(dst, codes[:x3Codes]...)
		for _, w := range blk {
			dst = append(dst, byte(w>>8)&0x80|byte(w)&0x7f)
		}
		for _, w := range blk {
			if d := int(w>>7&0xff) - base; d < 0 || d >= x3Except {
				dst = append(dst, byte(w>>7))
			}
		}
	}
	return dst
}

// x3Base is the base exponent whose window of 7 holds the most of the
// block's exponents (the lowest such), and how many it holds. The base is
// at most 254 (255 marks a raw block).
func x3Base(blk []uint16) (base, inside int) {
	var hist [256]int
	for _, w := range blk {
		hist[w>>7&0xff]++
	}
	for b := 0; b < 255; b++ {
		if hist[b] == 0 && (b != 254 || hist[255] == 0) {
			continue
		}
		n := 0
		for e := b; e < min(b+x3Except, 256); e++ {
			n += hist[e]
		}
		if n > inside {
			base, inside = b, n
		}
	}
	return base, inside
}

// DecodeX3Row decodes one x3 row of len(dst) weights; it returns the bytes
// of z it used.
func DecodeX3Row(z []byte, dst []uint16) (int, error) {
	c := len(dst)
	nb := (c + 31) / 32
	if len(z) < nb {
		return 0, fmt.Errorf("x3 row of %d weights: %d bytes cannot hold its headers", c, len(z))
	}
	p := nb
	for b := 0; b < nb; b++ {
		out := dst[b*32 : min((b+1)*32, c)]
		base := z[b]
		if base == 255 {
			if len(z) < p+2*len(out) {
				return 0, fmt.Errorf("x3 row: raw block %d truncated", b)
			}
			for j := range out {
				out[j] = binary.LittleEndian.Uint16(z[p+2*j:])
			}
			p += 2 * len(out)
			continue
		}
		if len(out) != 32 || len(z) < p+x3Body {
			return 0, fmt.Errorf("x3 row: block %d truncated", b)
		}
		cb, sm := z[p:p+x3Codes], z[p+x3Codes:p+x3Body]
		q := p + x3Body
		// 3 code bytes hold 8 codes
		for g := 0; g < 4; g++ {
			v := uint32(cb[3*g]) | uint32(cb[3*g+1])<<8 | uint32(cb[3*g+2])<<16
			for k := 0; k < 8; k++ {
				j := 8*g + k
				code := uint16(v >> (3 * k) & 7)
				e := uint16(base) + code
				if code == x3Except {
					if q >= len(z) {
						return 0, fmt.Errorf("x3 row: block %d's exceptions truncated", b)
					}
					e = uint16(z[q])
					q++
				}
				out[j] = uint16(sm[j]&0x80)<<8 | e<<7 | uint16(sm[j]&0x7f)
			}
		}
		p = q
	}
	return p, nil
}

// huff is a byte-plane format with a Huffman-coded exponent plane: a row
// is its sign+mantissa bytes (one per weight), then its exponents as a
// bit stream (least significant bit first, padded to a byte) in a code the
// whole tensor shares. Exponents rarer than 1 in 256 share an escape code
// followed by the 8-bit exponent, which bounds every code at huffMaxLen
// bits, so one table look-up of huffMaxLen bits decodes a symbol; an
// exponent the code was not built from is escaped too.
const (
	huffMaxLen = 12
	huffEscape = 256
)

// HuffCode is a tensor's exponent code: a canonical Huffman code over the
// 256 exponents and the escape (length 0: the symbol has no code word).
type HuffCode struct {
	Len  [257]uint8
	code [257]uint16 // bit-reversed canonical code words (read LSB first)
	// table[peek] is symbol<<4 | length for the next huffMaxLen bits
	table []uint16
}

// TableBytes is what the code costs to store: one length byte per symbol.
func (h *HuffCode) TableBytes() int { return len(h.Len) }

// NewHuffCode builds the code for an exponent histogram.
func NewHuffCode(hist *[256]int64) *HuffCode {
	var total int64
	for _, n := range hist {
		total += n
	}
	for floor := max(total>>8, 1); ; floor *= 2 {
		var counts [257]int64
		for e, n := range hist {
			if n >= floor {
				counts[e] = n
			} else {
				counts[huffEscape] += n
			}
		}
		// the escape always has a code: any exponent can be written
		counts[huffEscape] = max(counts[huffEscape], floor)
		h := &HuffCode{}
		lengths(counts[:], h.Len[:])
		if slices.Max(h.Len[:]) <= huffMaxLen {
			h.assign()
			return h
		}
	}
}

// lengths sets the Huffman code length of every symbol with a count (a
// single symbol gets length 1).
func lengths(counts []int64, out []uint8) {
	type node struct {
		w    int64
		syms []int
	}
	var q []node
	for s, n := range counts {
		if n > 0 {
			q = append(q, node{n, []int{s}})
		}
	}
	if len(q) == 1 {
		out[q[0].syms[0]] = 1
		return
	}
	for len(q) > 1 {
		sort.SliceStable(q, func(i, j int) bool { return q[i].w < q[j].w })
		a, b := q[0], q[1]
		for _, s := range append(a.syms, b.syms...) {
			out[s]++
		}
		q = append(q[2:], node{a.w + b.w, append(slices.Clone(a.syms), b.syms...)})
	}
}

// assign gives canonical code words (shorter first, then by symbol) and
// fills the decode table.
func (h *HuffCode) assign() {
	var code uint32
	h.table = make([]uint16, 1<<huffMaxLen)
	for l := uint8(1); l <= huffMaxLen; l++ {
		for s := range h.Len {
			if h.Len[s] != l {
				continue
			}
			rev := bits.Reverse32(code) >> (32 - l)
			h.code[s] = uint16(rev)
			for i := rev; i < 1<<huffMaxLen; i += 1 << l {
				h.table[i] = uint16(s)<<4 | uint16(l)
			}
			code++
		}
		code <<= 1
	}
}

// AppendRow appends the huff form of one row.
func (h *HuffCode) AppendRow(dst []byte, row []uint16) []byte {
	for _, w := range row {
		dst = append(dst, byte(w>>8)&0x80|byte(w)&0x7f)
	}
	var acc uint64
	n := uint(0)
	put := func(v uint64, l uint) {
		acc |= v << n
		n += l
		for n >= 8 {
			dst = append(dst, byte(acc))
			acc >>= 8
			n -= 8
		}
	}
	for _, w := range row {
		e := w >> 7 & 0xff
		if l := h.Len[e]; l > 0 {
			put(uint64(h.code[e]), uint(l))
			continue
		}
		put(uint64(h.code[huffEscape]), uint(h.Len[huffEscape]))
		put(uint64(e), 8)
	}
	if n > 0 {
		dst = append(dst, byte(acc))
	}
	return dst
}

// DecodeRow decodes one huff row of len(dst) weights from z.
func (h *HuffCode) DecodeRow(z []byte, dst []uint16) error {
	c := len(dst)
	if len(z) < c {
		return fmt.Errorf("huff row of %d weights: only %d bytes", c, len(z))
	}
	sm, bs := z[:c], z[c:]
	var acc uint64
	n := uint(0)
	p := 0
	refill := func() {
		for n <= 56 {
			var b byte
			if p < len(bs) {
				b = bs[p]
			}
			p++
			acc |= uint64(b) << n
			n += 8
		}
	}
	for j := 0; j < c; j++ {
		if n < huffMaxLen+8 {
			refill()
		}
		t := h.table[acc&(1<<huffMaxLen-1)]
		l := uint(t & 15)
		if l == 0 {
			return fmt.Errorf("huff row: no code word at weight %d", j)
		}
		acc >>= l
		n -= l
		e := uint16(t >> 4)
		if e == huffEscape {
			e = uint16(acc & 0xff)
			acc >>= 8
			n -= 8
		}
		dst[j] = uint16(sm[j]&0x80)<<8 | e<<7 | uint16(sm[j]&0x7f)
	}
	if used := 8*p - int(n); used > 8*len(bs) {
		return fmt.Errorf("huff row: bit stream truncated (%d bits used of %d)", used, 8*len(bs))
	}
	return nil
}
