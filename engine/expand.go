package engine

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"k3/kernels"
	"k3/storage/trunk"
)

// expandRows is the most rows of one matrix a decode task takes: small
// enough that the tasks of a layer spread over every processor, large
// enough that handing them out costs nothing next to decoding them.
const expandRows = 256

// expandRun decodes a compressed run read into mem (and CRC-checked) into
// the run an uncompressed pack of the checkpoint has (trunk.Run.Expanded):
// every BF16C tensor becomes its bf16 rows, decoded in parallel across
// rows by kernels.Mat.DecodeRowBF16, and the other tensors are copied.
// The expanded bytes are in memory of their own (release frees it), so
// mem can be released as soon as this returns. A BF16C tensor whose row
// offsets or headers are wrong is refused before anything is decoded,
// with the binder's message (corruptBF16C).
func expandRun(r *trunk.Run, mem []byte) (ex *trunk.Run, img []byte, release func(), err error) {
	e := r.Expanded()
	type task struct {
		m        *kernels.Mat
		dst      []uint16
		from, to int
	}
	var tasks []task
	var errs []string
	var mats []kernels.Mat
	for j := range r.Tensors {
		t := &r.Tensors[j]
		if !t.Compressed() {
			continue
		}
		rows, cols := int(t.Shape[0]), int(t.Shape[1])
		m, err := kernels.BF16CFromBytes(t.Bytes(mem), rows, cols) // checks the offsets and every row's headers
		if err != nil {
			errs = append(errs, corruptBF16C(t.Name, t.DType, t.Size, err))
			continue
		}
		mats = append(mats, m)
	}
	if len(errs) > 0 {
		return nil, nil, nil, &BindError{errs}
	}
	img, release = runBuffer(e.Length)
	k := 0
	for j := range r.Tensors {
		t, d := &r.Tensors[j], &e.Tensors[j]
		out := d.Bytes(img)
		if !t.Compressed() {
			copy(out, t.Bytes(mem))
			continue
		}
		m := &mats[k]
		k++
		if m.Rows == 0 {
			continue
		}
		dst := unsafe.Slice((*uint16)(unsafe.Pointer(&out[0])), m.Rows*m.Cols)
		for from := 0; from < m.Rows; from += expandRows {
			tasks = append(tasks, task{m, dst, from, min(from+expandRows, m.Rows)})
		}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(tasks)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(tasks) {
					return
				}
				tk := tasks[i]
				c := tk.m.Cols
				for row := tk.from; row < tk.to; row++ {
					tk.m.DecodeRowBF16(row, tk.dst[row*c:(row+1)*c])
				}
			}
		})
	}
	wg.Wait()
	return &e, img, release, nil
}

// corruptBF16C is the message refusing a BF16C tensor that does not
// check (kernels.BF16CFromBytes's err).
func corruptBF16C(name, dtype string, size int64, err error) string {
	return fmt.Sprintf("tensor %s (%s, %d bytes) is corrupt: %v; repack the trunk (k3 pack MODEL_DIR TRUNK_DIR --compress --force)", name, dtype, size, err)
}
