package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// BF16C is a lossless compressed form of a bf16 matrix: every weight decodes
// to exactly the bf16 bits it was made from, so a BF16C matrix gives the
// same products, bit for bit, as the BF16 matrix it came from.
//
// # Layout
//
// Each row is cut into blocks of BF16CBlock (32) weights; a row of c
// columns has nb = ceil(c/32) blocks. A row is stored as
//
//	nb header bytes, one per block, then the blocks' bodies in order.
//
// A header below 255 is the block's base exponent b, and its body (48 bytes) is
//
//	16 offset bytes: byte j holds element j's exponent minus b in its low
//	                 nibble and element j+16's in its high nibble
//	32 bytes:        element j's sign and mantissa, sign<<7 | mantissa (7 bits)
//
// so element j is the bf16 word sign<<15 | (b+offset)<<7 | mantissa. A
// header of 255 marks a raw block: its body is the block's weights as
// little-endian bf16 words (64 bytes, or 2*(c mod 32) for a short last
// block, which is always raw). The encoder compresses a full block exactly
// when its exponents lie within 16 of each other, so no row is longer than
// its bf16 form plus one byte per block.
//
// A matrix keeps the rows back to back in Z, and ZOff[r] - ZOff[0] is where
// row r starts in Z (len(ZOff) == Rows+1). The serialised form (a packed
// trunk tensor) is the offsets as Rows+1 little-endian uint64 starting at 0,
// then the rows: BF16CBytes writes it and BF16CFromBytes reads it back.
const (
	BF16CBlock   = 32  // weights per block
	BF16CRaw     = 255 // header of a raw block
	bf16cPacked  = 48  // body bytes of a compressed block
	bf16cRawBody = 2 * BF16CBlock
)

// bf16cRowBytes is the stored size of a row of cols weights with raw full
// blocks.
func bf16cRowBytes(cols, raw int) int {
	nb := (cols + BF16CBlock - 1) / BF16CBlock
	full := cols / BF16CBlock
	n := nb + full*bf16cPacked + raw*(bf16cRawBody-bf16cPacked)
	if tail := cols % BF16CBlock; tail != 0 {
		n += 2 * tail
	}
	return n
}

// AppendBF16CRow appends the compressed form of one row of bf16 words.
func AppendBF16CRow(dst []byte, row []uint16) []byte {
	c := len(row)
	nb := (c + BF16CBlock - 1) / BF16CBlock
	h := len(dst)
	dst = append(dst, make([]byte, bf16cRowBytes(c, nb))...) // room for the longest form
	p := h + nb
	for b := 0; b < nb; b++ {
		blk := row[b*BF16CBlock : min((b+1)*BF16CBlock, c)]
		if len(blk) == BF16CBlock {
			if n := packBlock((*[BF16CBlock]uint16)(blk), dst[p:p+bf16cPacked:p+bf16cPacked]); n >= 0 {
				dst[h+b] = byte(n)
				p += bf16cPacked
				continue
			}
		}
		dst[h+b] = BF16CRaw
		for j, w := range blk {
			binary.LittleEndian.PutUint16(dst[p+2*j:], w)
		}
		p += 2 * len(blk)
	}
	return dst[:p]
}

// packBlock writes the 48-byte body of a compressible block and returns its
// base exponent, or -1 (writing nothing) when its exponents span more than 16.
func packBlock(w *[BF16CBlock]uint16, out []byte) int {
	lo, hi := uint16(255), uint16(0)
	for _, v := range w {
		e := v >> 7 & 0xff
		lo, hi = min(lo, e), max(hi, e)
	}
	if hi-lo > 15 {
		return -1
	}
	for j := 0; j < 16; j++ {
		out[j] = byte(w[j]>>7&0xff-lo) | byte(w[j+16]>>7&0xff-lo)<<4
	}
	sm := out[16:48:48]
	for j, v := range w {
		sm[j] = byte(v>>8)&0x80 | byte(v)&0x7f
	}
	return int(lo)
}

// CompressBF16 makes the BF16C form of a bf16 matrix (m.DType == BF16).
func CompressBF16(m *Mat) Mat {
	if m.DType != BF16 {
		panic(fmt.Sprintf("kernels: CompressBF16 of a %v matrix", m.DType))
	}
	z := make([]byte, 0, m.Rows*bf16cRowBytes(m.Cols, 0))
	off := make([]uint64, m.Rows+1)
	for r := 0; r < m.Rows; r++ {
		z = AppendBF16CRow(z, m.BF16[r*m.Cols:(r+1)*m.Cols])
		off[r+1] = uint64(len(z))
	}
	return Mat{DType: BF16C, Rows: m.Rows, Cols: m.Cols, Z: z, ZOff: off}
}

// bf16cRow is row r's bytes.
func (m *Mat) bf16cRow(r int) []byte {
	return m.Z[m.ZOff[r]-m.ZOff[0] : m.ZOff[r+1]-m.ZOff[0]]
}

// DecodeRowBF16 writes row r of a BF16 or BF16C matrix as bf16 words.
func (m *Mat) DecodeRowBF16(r int, dst []uint16) {
	c := m.Cols
	if m.DType == BF16 {
		copy(dst[:c], m.BF16[r*c:(r+1)*c])
		return
	}
	decodeBF16CRow(m.bf16cRow(r), c, dst[:c])
}

func decodeBF16CRow(z []byte, c int, dst []uint16) {
	nb := (c + BF16CBlock - 1) / BF16CBlock
	p := nb
	for b := 0; b < nb; b++ {
		out := dst[b*BF16CBlock : min((b+1)*BF16CBlock, c)]
		base := z[b]
		if base == BF16CRaw {
			for j := range out {
				out[j] = binary.LittleEndian.Uint16(z[p+2*j:])
			}
			p += 2 * len(out)
			continue
		}
		unpackBlock(base, (*[bf16cPacked]byte)(z[p:p+bf16cPacked]), (*[BF16CBlock]uint16)(out))
		p += bf16cPacked
	}
}

// unpackBlock rebuilds the bf16 words of a compressed block with base
// exponent base from its body.
func unpackBlock(base byte, body *[bf16cPacked]byte, out *[BF16CBlock]uint16) {
	sm := (*[BF16CBlock]byte)(body[16:])
	for j := 0; j < 16; j++ {
		o := body[j]
		lo, hi := sm[j], sm[j+16]
		out[j] = uint16(lo&0x80)<<8 | uint16(base+o&15)<<7 | uint16(lo&0x7f)
		out[j+16] = uint16(hi&0x80)<<8 | uint16(base+o>>4)<<7 | uint16(hi&0x7f)
	}
}

// DotBF16C is the contract dot product of one BF16C row (c == len(x)
// weights) with x: the same value as DotBF16 of the decoded row.
func DotBF16C(z []byte, x []float32) float32 {
	var a [Lanes]float64
	c := len(x)
	nb := (c + BF16CBlock - 1) / BF16CBlock
	p := nb
	for b := 0; b < nb; b++ {
		i0 := b * BF16CBlock
		base := z[b]
		if base == BF16CRaw {
			n := min(BF16CBlock, c-i0)
			for j := 0; j < n; j++ {
				w := binary.LittleEndian.Uint16(z[p+2*j:])
				a[j&7] += float64(math.Float32frombits(uint32(w)<<16)) * float64(x[i0+j])
			}
			p += 2 * n
			continue
		}
		off, sm := z[p:p+16:p+16], z[p+16:p+48:p+48]
		xs := x[i0 : i0+BF16CBlock : i0+BF16CBlock]
		for j := 0; j < BF16CBlock; j++ {
			e := off[j&15] >> (4 * (j >> 4)) & 15
			w := uint32(sm[j]&0x80)<<8 | uint32(base+e)<<7 | uint32(sm[j]&0x7f)
			a[j&7] += float64(math.Float32frombits(w<<16)) * float64(xs[j])
		}
		p += bf16cPacked
	}
	return float32(combine(&a))
}

// checkBF16C verifies the offsets and every row's headers against its
// length, so a kernel can walk any row without bounds checks.
func (m *Mat) checkBF16C() error {
	if len(m.ZOff) != m.Rows+1 {
		return fmt.Errorf("bf16c matrix %dx%d has %d row offsets", m.Rows, m.Cols, len(m.ZOff))
	}
	if got := m.ZOff[m.Rows] - m.ZOff[0]; got != uint64(len(m.Z)) {
		return fmt.Errorf("bf16c matrix %dx%d: offsets span %d bytes, data has %d", m.Rows, m.Cols, got, len(m.Z))
	}
	nb := (m.Cols + BF16CBlock - 1) / BF16CBlock
	full := m.Cols / BF16CBlock
	// every offset first: a row is sliced only once all of them are known
	// to rise within the data
	for r := 0; r < m.Rows; r++ {
		if m.ZOff[r+1] < m.ZOff[r] || m.ZOff[r+1]-m.ZOff[r] < uint64(nb) || m.ZOff[r+1] > m.ZOff[m.Rows] {
			return fmt.Errorf("bf16c matrix %dx%d: row %d has a bad offset", m.Rows, m.Cols, r)
		}
	}
	for r := 0; r < m.Rows; r++ {
		row := m.bf16cRow(r)
		raw := 0
		for b := 0; b < full; b++ {
			if row[b] == BF16CRaw {
				raw++
			}
		}
		if full < nb && row[full] != BF16CRaw {
			return fmt.Errorf("bf16c matrix %dx%d: row %d's short last block is not raw", m.Rows, m.Cols, r)
		}
		if want := bf16cRowBytes(m.Cols, raw); len(row) != want {
			return fmt.Errorf("bf16c matrix %dx%d: row %d has %d bytes, its headers say %d", m.Rows, m.Cols, r, len(row), want)
		}
	}
	return nil
}

// BF16CBytes is the serialised form of a BF16C matrix: the row offsets
// (from 0) as Rows+1 little-endian uint64, then the rows.
func BF16CBytes(m *Mat) []byte {
	out := make([]byte, 0, 8*len(m.ZOff)+len(m.Z))
	for _, o := range m.ZOff {
		out = binary.LittleEndian.AppendUint64(out, o-m.ZOff[0])
	}
	return append(out, m.Z...)
}

// BF16CSize is the serialised size of a BF16C matrix of rows rows with z
// row bytes in all.
func BF16CSize(rows int, z int64) int64 { return 8*int64(rows+1) + z }

// BF16CFromBytes binds a rows x cols BF16C matrix to its serialised form
// (aliasing b, which must stay alive and be 8-byte aligned) and checks it.
func BF16CFromBytes(b []byte, rows, cols int) (Mat, error) {
	m := Mat{DType: BF16C, Rows: rows, Cols: cols}
	head := 8 * (rows + 1)
	if rows < 0 || cols <= 0 || len(b) < head {
		return m, fmt.Errorf("bf16c matrix %dx%d: %d bytes cannot hold its %d row offsets", rows, cols, len(b), rows+1)
	}
	if uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
		return m, fmt.Errorf("bf16c matrix %dx%d: data not 8-byte aligned", rows, cols)
	}
	m.ZOff = unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), rows+1)
	if m.ZOff[0] != 0 {
		return m, fmt.Errorf("bf16c matrix %dx%d: first row offset is %d, not 0", rows, cols, m.ZOff[0])
	}
	m.Z = b[head:len(b):len(b)]
	return m, m.checkBF16C()
}
