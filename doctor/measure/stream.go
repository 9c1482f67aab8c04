package measure

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k3/engine"
	"k3/engine/synth"
	"k3/storage/direct"
	"k3/storage/trunk"
)

// StreamSpec is the checkpoint `k3 bench stream` reads: real-size routed
// experts (3072 x 3584 MXFP4, 17.5 MB each) and trunk layers of about
// 110 MB, ~2 GB in all (quick: ~0.8 GB).
func StreamSpec(quick bool) synth.Spec {
	s := synth.Spec{Vocab: 8192, Hidden: 2048, Layers: 6, KDAHeads: 16, KDAHeadDim: 128, ConvK: 4,
		Heads: 16, QLora: 768, KVLora: 512, Nope: 128, Rope: 64, VHead: 128, Inter: 4096, FirstDense: 1,
		Experts: 16, TopK: 8, Shared: 2, MoEInter: 3072, Latent: 3584, Block: 4, FullAttn: []int{4, 6}, Seed: 11}
	if quick {
		s.Layers, s.Experts, s.FullAttn = 3, 10, []int{3}
	}
	return s
}

// StreamLine is one line of `k3 bench stream`.
type StreamLine struct {
	Kind    string  `json:"kind"` // raw, trunk, experts, decode
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	GBps    float64 `json:"gbps"`
	RawGBps float64 `json:"raw_gbps"`
	Ratio   float64 `json:"ratio"`
	Note    string  `json:"note,omitempty"`
}

// PrepareStream generates (once, reused) the benchmark checkpoint and its
// packed trunk under dir.
func PrepareStream(ctx context.Context, dir string, quick bool, logf func(string, ...any)) (model, tr string, err error) {
	name := "stream-full"
	if quick {
		name = "stream-quick"
	}
	return prepare(ctx, filepath.Join(dir, name), StreamSpec(quick), logf)
}

// Stream measures, in one run: the raw O_DIRECT sequential read speed of
// the checkpoint's disk (LimitRuns over its shards, before and after the
// rest), reading every trunk layer run through the trunk reader, reading
// every routed expert through the expert cache (top-k at a time), and a
// streamed decode at the smallest budgets (bytes read per second of wall
// time, compute included). Every line's ratio is to the best raw read.
func Stream(ctx context.Context, model, tr string, tokens int, logf func(string, ...any)) ([]StreamLine, error) {
	shards, err := shardPaths(model)
	if err != nil {
		return nil, err
	}
	note := ""
	if !dropPaths(append(shards, filepath.Join(tr, trunk.BinFile))).Global {
		note = "page cache not dropped (not root); reads are O_DIRECT"
	}
	var out []StreamLine
	add := func(kind string, bytes int64, sec float64) {
		out = append(out, StreamLine{Kind: kind, Bytes: bytes, Seconds: sec, GBps: float64(bytes) / sec / 1e9, Note: note})
	}

	var raws []DiskRun
	rawRuns := func(when string) error {
		runs, err := LimitRuns(ctx, shards, 0, when)
		for _, r := range runs {
			logf("raw O_DIRECT read, %s: %.2f GB/s", r, r.GBps)
		}
		raws = append(raws, runs...)
		return err
	}
	if err := rawRuns("before"); err != nil {
		return nil, err
	}

	sec, tb, err := readTrunk(tr)
	if err != nil {
		return nil, err
	}
	add("trunk", tb, sec)

	opt := engine.Options{TrunkDir: tr, Budget: engine.Budget{TrunkBytes: 1, Ring: 1, CacheBytes: 1}, Positions: 64, Chunk: 64}
	m, err := engine.Open(model, opt)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	eb, sec, err := readAllExperts(m)
	if err != nil {
		return nil, err
	}
	add("experts", eb, sec)
	db, sec, err := streamDecode(ctx, m, tokens)
	if err != nil {
		return nil, err
	}
	add("decode", db, sec)
	out[len(out)-1].Note = fmt.Sprintf("%d tokens at the smallest budgets; includes compute", tokens)
	if err := rawRuns("after"); err != nil {
		return nil, err
	}
	return withRawLimit(raws, out), nil
}

// readAllExperts reads every expert of every MoE layer through the cache,
// top-k at a time (or as many as the cache holds), and returns the bytes read and the seconds taken.
func readAllExperts(m *engine.Model) (int64, float64, error) {
	c := m.Cfg
	ids := make([]int, c.Experts)
	for e := range ids {
		ids[e] = e
	}
	step := min(c.TopK, m.Experts().MaxPinned()) // a cache may hold fewer than top-k at once (plan.MinExpertSlots)
	t0 := time.Now()
	before := m.Experts().Stats()
	for li := c.FirstKDense; li < c.Layers; li++ {
		for i := 0; i < len(ids); i += step {
			part := ids[i:min(i+step, len(ids))]
			if _, err := m.Experts().Acquire(li, part); err != nil {
				return 0, 0, err
			}
			m.Experts().Release(li, part)
		}
	}
	return m.Experts().Stats().Sub(before).BytesRead, time.Since(t0).Seconds(), nil
}

// streamDecode decodes tokens at the smallest budgets, where every step
// streams its layers and experts, and returns the bytes read (trunk and
// experts) and the seconds taken.
func streamDecode(ctx context.Context, m *engine.Model, tokens int) (int64, float64, error) {
	e := m.NewEngine(0)
	defer e.Close()
	s0 := e.Snapshot()
	t0 := time.Now()
	if _, err := e.Generate(ctx, nil, []int{1, 2, 3, 4}, engine.GenOptions{MaxTokens: tokens}); err != nil {
		return 0, 0, err
	}
	d := e.Snapshot().Sub(s0)
	return d.TrunkBytesRead + d.Expert.BytesRead, time.Since(t0).Seconds(), nil
}

// withRawLimit puts one "raw" line per raw measurement first, then out; the
// limit every line is compared with is the best raw run.
func withRawLimit(raws []DiskRun, out []StreamLine) []StreamLine {
	var raw float64
	var lines []StreamLine
	for _, r := range raws {
		raw = max(raw, r.GBps)
		lines = append(lines, StreamLine{Kind: "raw", Bytes: r.Bytes, Seconds: r.Seconds, GBps: r.GBps, Note: r.String()})
	}
	for i := range lines {
		lines[i].RawGBps, lines[i].Ratio = raw, lines[i].GBps/raw
	}
	for _, l := range out {
		l.RawGBps, l.Ratio = raw, l.GBps/raw
		lines = append(lines, l)
	}
	return lines
}

// readTrunk reads every layer run of the packed trunk in tr through the
// trunk reader into one huge-page buffer, and returns the seconds and bytes.
func readTrunk(tr string) (float64, int64, error) {
	trk, err := trunk.Open(tr)
	if err != nil {
		return 0, 0, err
	}
	defer trk.Close()
	var largest int64
	for i := 0; i < trk.Layers(); i++ {
		r, _ := trk.LayerRun(i)
		largest = max(largest, r.Length)
	}
	rb, err := direct.AllocHuge(int(largest))
	if err != nil {
		return 0, 0, err
	}
	defer rb.Free()
	// fault the buffer in first: the engine reuses its ring slots, so only
	// its first token pays for page zeroing; the timed reads measure the disk
	clear(rb.Bytes())
	var n int64
	t0 := time.Now()
	for i := 0; i < trk.Layers(); i++ {
		r, _ := trk.LayerRun(i)
		if err := trk.ReadRun(r, rb.Bytes()); err != nil {
			return 0, 0, err
		}
		n += r.Length
	}
	return time.Since(t0).Seconds(), n, nil
}
