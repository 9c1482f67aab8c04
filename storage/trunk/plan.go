package trunk

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k3/storage/layout"
	"k3/storage/safetensors"
)

// ReleasePrefix is the tensor name prefix of the released checkpoint.
const ReleasePrefix = layout.ReleasePrefix

// plan is a manifest together with where each tensor comes from.
type plan struct {
	m   *Manifest
	src [][]*safetensors.Tensor // per run, parallel to m.Runs[i].Tensors
	// fileIdx maps a shard path to its index in the set's file order.
	fileIdx map[string]int
	paths   []string
}

// sourceOf returns the identity of an opened set and its tensor prefix.
func sourceOf(set *safetensors.Set) (Source, error) {
	var src Source
	var err error
	if src.Prefix, err = layout.DetectPrefix(func(n string) bool { return has(set, n) }); err != nil {
		return src, err
	}
	for _, f := range set.Files() {
		src.Files = append(src.Files, SourceFile{Name: filepath.Base(f.Path), Size: f.Size,
			ModTime: f.ModTime.UnixNano(), HeaderSHA256: hex.EncodeToString(f.HeaderSHA256[:])})
	}
	return src, nil
}

func has(set *safetensors.Set, name string) bool {
	_, ok := set.Get(name)
	return ok
}

// makePlan lays out the trunk of an opened checkpoint (see the package
// documentation for the rules). With layers > 0 only the first `layers`
// layers are packed (a partial shard set; see CheckPartial).
func makePlan(set *safetensors.Set, layers int) (*plan, error) {
	src, err := sourceOf(set)
	if err != nil {
		return nil, err
	}
	p := &plan{
		m:       &Manifest{Format: Format, Version: Version, Source: src},
		fileIdx: map[string]int{},
	}
	for i, f := range set.Files() {
		p.fileIdx[f.Path] = i
		p.paths = append(p.paths, f.Path)
	}
	groups, err := globalGroups(set, src.Prefix)
	if err != nil {
		return nil, err
	}
	lgroups, err := layerGroups(set, src.Prefix, layers)
	if err != nil {
		return nil, err
	}
	var off int64
	for _, g := range append(groups, lgroups...) {
		r, ts, err := p.layOut(g, off)
		if err != nil {
			return nil, err
		}
		off += r.Length
		p.m.Runs = append(p.m.Runs, r)
		p.src = append(p.src, ts)
	}
	p.m.TotalBytes = off
	var names []string
	for _, ts := range p.src {
		for _, t := range ts {
			names = append(names, t.Name)
		}
	}
	sum, err := set.SampleDigest(names)
	if err != nil {
		return nil, fmt.Errorf("fingerprint the weights: %w", err)
	}
	p.m.Source.WeightsSHA256 = hex.EncodeToString(sum[:])
	if err := p.m.validate(nil); err != nil {
		return nil, fmt.Errorf("internal error: planned manifest is invalid: %w", err)
	}
	return p, nil
}

// runGroup is the tensors of one run before they are laid out (layer -1:
// not a layer's run).
type runGroup struct {
	name  string
	layer int
	ts    []*safetensors.Tensor
}

// globalGroups is the runs outside the layers (embedding, head, final
// norms), each of whose tensors must be present.
func globalGroups(set *safetensors.Set, pre string) ([]runGroup, error) {
	globals := []struct {
		run   string
		names []string
	}{
		{RunEmbed, []string{"model.embed_tokens.weight"}},
		{RunHead, []string{"lm_head.weight"}},
		{RunFinal, []string{"model.norm.weight", "model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight"}},
	}
	var groups []runGroup
	for _, g := range globals {
		var ts []*safetensors.Tensor
		for _, n := range g.names {
			t, ok := set.Get(pre + n)
			if !ok {
				return nil, fmt.Errorf("not a complete Kimi K3 checkpoint: tensor %s%s is missing", pre, n)
			}
			ts = append(ts, t)
		}
		groups = append(groups, runGroup{g.run, -1, ts})
	}
	return groups, nil
}

// layerGroups is one run per layer (the first layers only, when layers >
// 0) of its trunk tensors: every layer tensor but the routed experts. The
// layers must run from 0 without a gap.
func layerGroups(set *safetensors.Set, pre string, layers int) ([]runGroup, error) {
	byLayer := map[int][]*safetensors.Tensor{}
	maxLayer := -1
	lp := pre + layout.LayerPrefix
	for _, name := range set.Names() {
		if !strings.HasPrefix(name, lp) {
			continue
		}
		i, tail, ok := layout.LayerOf(strings.TrimPrefix(name, pre))
		if !ok || tail == "" {
			return nil, fmt.Errorf("unexpected tensor name %q (want %s<layer>.<name>, a layer index of at most six digits)", name, lp)
		}
		if layout.IsRoutedExpert(name) || (layers > 0 && i >= layers) {
			continue
		}
		t, _ := set.Get(name)
		byLayer[i] = append(byLayer[i], t)
		maxLayer = max(maxLayer, i)
	}
	if maxLayer < 0 {
		return nil, fmt.Errorf("not a Kimi K3 checkpoint: no %s* tensors", lp)
	}
	var groups []runGroup
	for i := 0; i <= maxLayer; i++ {
		ts, ok := byLayer[i]
		if !ok {
			return nil, fmt.Errorf("layer %d has no trunk tensors but layer %d has (incomplete checkpoint?)", i, maxLayer)
		}
		groups = append(groups, runGroup{LayerRunName(i), i, ts})
	}
	return groups, nil
}

// layOut makes g's run at offset off: its tensors in source order (file,
// then offset, then name), each aligned to TensorAlign, the run padded to
// RunAlign. ts is the tensors in that order.
func (p *plan) layOut(g runGroup, off int64) (r Run, ts []*safetensors.Tensor, err error) {
	ts = slices.Clone(g.ts)
	slices.SortFunc(ts, func(a, b *safetensors.Tensor) int {
		if fa, fb := p.fileIdx[a.Path], p.fileIdx[b.Path]; fa != fb {
			return fa - fb
		}
		switch {
		case a.Offset < b.Offset:
			return -1
		case a.Offset > b.Offset:
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	r = Run{Name: g.name, Layer: g.layer, Offset: off}
	var pos int64
	for _, t := range ts {
		pos = alignUp(pos, TensorAlign)
		shape := append([]int64{}, t.Shape...)
		r.Tensors = append(r.Tensors, Tensor{Name: t.Name, DType: string(t.DType), Shape: shape, Offset: pos, Size: t.Size})
		pos += t.Size
	}
	if pos == 0 {
		return r, nil, fmt.Errorf("run %s holds no data (only empty tensors)", g.name)
	}
	r.DataBytes = pos
	r.Length = alignUp(pos, RunAlign)
	return r, ts, nil
}

func alignUp(x, a int64) int64 { return (x + a - 1) &^ (a - 1) }

// runsFrom marks the runs holding a tensor from one of the given files
// (indices into the source files).
func (p *plan) runsFrom(files []int) []bool {
	out := make([]bool, len(p.m.Runs))
	for i := range p.m.Runs {
		for _, fi := range p.filesOf(i) {
			if slices.Contains(files, fi) {
				out[i] = true
			}
		}
	}
	return out
}

// filesOf lists the source files run i's tensors come from.
func (p *plan) filesOf(i int) []int {
	var out []int
	for _, t := range p.src[i] {
		if fi := p.fileIdx[t.Path]; !slices.Contains(out, fi) {
			out = append(out, fi)
		}
	}
	return out
}
