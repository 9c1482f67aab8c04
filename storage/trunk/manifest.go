package trunk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"k3/storage/safetensors"
)

// File names inside a trunk directory.
const (
	BinFile      = "trunk.bin"
	ManifestFile = "trunk.json"
	PartialFile  = "trunk.partial.json"
)

// Format and Version identify trunk.json. Version 4 added the weights'
// fingerprint (Source.WeightsSHA256); a version 2 or 3 trunk is read, but
// binding it is refused until k3 pack has checked its runs against the
// checkpoint and recorded the fingerprint. Version 3 added compression
// (Manifest.Compression, tensors of dtype BF16C); version 2 is the same
// without it and is read as it is. Version 1 (source files by name and size
// only) is still read, so that Pack can check such a trunk against its
// checkpoint and record the rest; Open refuses it.
const (
	Format        = "k3-trunk"
	Version       = 4
	v3            = 3
	v2            = 2
	legacyVersion = 1
)

// Compression values of Manifest.Compression, and the dtype of a tensor
// stored compressed.
const (
	// BF16C: the matrices the engine can read compressed are stored in the
	// kernels' lossless BF16C form (see BF16C).
	BF16C = "BF16C"
)

// RunAlign is the alignment of every run's offset and length in trunk.bin
// (O_DIRECT); TensorAlign the alignment of every tensor inside its run.
const (
	RunAlign    = 4096
	TensorAlign = 64
)

// The names of the global runs; layer runs are called LayerRunName(i).
const (
	RunEmbed = "embed"
	RunHead  = "head"
	RunFinal = "final"
)

// LayerRunName returns the name of layer i's run: "layer.<i>".
func LayerRunName(i int) string { return "layer." + strconv.Itoa(i) }

// maxManifestBytes bounds the size of a trunk.json this package reads (the
// released model's is well under 1 MB).
const maxManifestBytes = 64 << 20

// Manifest is the content of trunk.json.
type Manifest struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	// Compression is "" (every tensor as in the checkpoint) or BF16C
	// (packed with compression: the matrices Compressible names are BF16C
	// tensors, the rest as in the checkpoint).
	Compression string `json:"compression,omitempty"`
	Source      Source `json:"source"`
	Runs        []Run  `json:"runs"`
	TotalBytes  int64  `json:"total_bytes"`
}

// Source identifies the checkpoint a trunk was packed from.
type Source struct {
	Files  []SourceFile `json:"files"`
	Prefix string       `json:"prefix"`
	// WeightsSHA256 fingerprints the weights the trunk was packed from:
	// safetensors.Set.SampleDigest over every tensor of the runs, in
	// order (sampled 4 KiB blocks, lowercase hex). A fine-tune with the
	// same layout, names, sizes and even modification times differs in
	// it. Absent before version 4.
	WeightsSHA256 string `json:"weights_sha256,omitempty"`
}

// SourceFile is one safetensors file of the source checkpoint. The packed
// content itself is identified by the runs' CRC-32C (over exactly the
// bytes gathered from these files): Pack re-gathers and compares them when a
// file's modification time changed.
type SourceFile struct {
	Name string `json:"name"` // base name
	Size int64  `json:"size"` // bytes
	// ModTime is the file's modification time when it was packed (Unix
	// nanoseconds); HeaderSHA256 the SHA-256 of its first 8+N bytes (the
	// header length and the header), lowercase hex. Both are absent in
	// version 1.
	ModTime      int64  `json:"mtime_ns,omitempty"`
	HeaderSHA256 string `json:"header_sha256,omitempty"`
}

// Run is one aligned byte run of trunk.bin.
type Run struct {
	Name      string   `json:"name"`
	Layer     int      `json:"layer"`      // -1 for embed, head and final
	Offset    int64    `json:"offset"`     // in trunk.bin, multiple of RunAlign
	Length    int64    `json:"length"`     // AlignUp(DataBytes), multiple of RunAlign
	DataBytes int64    `json:"data_bytes"` // end of the last tensor
	CRC32C    uint32   `json:"crc32c"`     // over all Length bytes, padding included
	Tensors   []Tensor `json:"tensors"`
}

// Tensor is one tensor inside a run.
type Tensor struct {
	Name string `json:"name"` // full checkpoint name
	// DType is the checkpoint's dtype, or BF16C for a BF16 matrix stored
	// compressed (Shape is then its logical [rows, cols] and Size the
	// stored bytes: kernels.BF16CBytes, row offsets then rows).
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	Offset int64   `json:"offset"` // relative to the run start, multiple of TensorAlign
	Size   int64   `json:"size"`   // stored bytes
}

// Compressed reports whether t is stored in BF16C form.
func (t *Tensor) Compressed() bool { return t.DType == BF16C }

// SourceDType is the dtype the tensor has in the checkpoint (BF16 for a
// BF16C tensor).
func (t *Tensor) SourceDType() safetensors.DType {
	if t.Compressed() {
		return safetensors.BF16
	}
	return safetensors.DType(t.DType)
}

// LogicalSize is the tensor's size in the checkpoint (its bf16 size for a
// BF16C tensor).
func (t *Tensor) LogicalSize() int64 {
	if !t.Compressed() {
		return t.Size
	}
	return 2 * t.Shape[0] * t.Shape[1]
}

// Compressed reports whether the trunk was packed with compression.
func (m *Manifest) Compressed() bool { return m.Compression != "" }

// UncompressedBytes is the size trunk.bin has when the same trunk is
// packed without compression: every tensor at its checkpoint size, laid
// out by the same rules. It is TotalBytes for an uncompressed trunk.
func (m *Manifest) UncompressedBytes() int64 {
	var total int64
	for i := range m.Runs {
		total += m.Runs[i].Expanded().Length
	}
	return total
}

// Expanded is the run as an uncompressed pack of the same checkpoint lays
// it out: every BF16C tensor BF16 at its logical size, each tensor at the
// next multiple of TensorAlign, Length its data rounded up to RunAlign.
// The engine decodes a pinned compressed layer into this layout (see the
// package doc). Those bytes exist only in memory, so Offset and CRC32C
// are 0. An uncompressed run's tensors are unchanged.
func (r *Run) Expanded() Run {
	e := *r
	e.Offset, e.CRC32C = 0, 0
	e.Tensors = slices.Clone(r.Tensors)
	var pos int64
	for j := range e.Tensors {
		t := &e.Tensors[j]
		t.Size = t.LogicalSize()
		t.DType = string(t.SourceDType())
		pos = alignUp(pos, TensorAlign)
		t.Offset = pos
		pos += t.Size
	}
	e.DataBytes, e.Length = pos, alignUp(pos, RunAlign)
	return e
}

// partial is the content of trunk.partial.json.
type partial struct {
	Manifest
	Done []string `json:"done"`
}

// Tensor returns the run's tensor called name.
func (r *Run) Tensor(name string) (*Tensor, bool) {
	for i := range r.Tensors {
		if r.Tensors[i].Name == name {
			return &r.Tensors[i], true
		}
	}
	return nil, false
}

// Bytes returns the slice of a buffer holding the whole run (as filled by
// ReadRun) that holds tensor t.
func (t *Tensor) Bytes(run []byte) []byte { return run[t.Offset : t.Offset+t.Size : t.Offset+t.Size] }

// Layers returns the number of layer runs.
func (m *Manifest) Layers() int {
	n := 0
	for i := range m.Runs {
		if m.Runs[i].Layer >= 0 {
			n++
		}
	}
	return n
}

// Marshal renders the manifest as indented JSON (deterministic).
func (m *Manifest) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func (p *partial) marshal() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ManifestError is a trunk.json (or trunk.partial.json) that breaks the
// format's rules.
type ManifestError struct {
	Path string // file, "" when parsing bytes
	Msg  string
}

func (e *ManifestError) Error() string {
	if e.Path == "" {
		return "trunk manifest: " + e.Msg
	}
	return e.Path + ": " + e.Msg
}

func merr(format string, args ...any) error { return &ManifestError{Msg: fmt.Sprintf(format, args...)} }

// ParseManifest decodes and validates a trunk.json. Unknown fields,
// trailing data and every broken rule of the format (see the package
// documentation) are refused with a *ManifestError naming the problem. It
// does not check trunk.bin (Open does).
func ParseManifest(data []byte) (*Manifest, error) {
	if madeByC(data) {
		return nil, ErrCTrunk
	}
	var m Manifest
	if err := decodeStrict(data, &m); err != nil {
		return nil, err
	}
	if err := m.validate(nil); err != nil {
		return nil, err
	}
	return &m, nil
}

// parsePartial decodes and validates a trunk.partial.json: the manifest
// rules, plus "done" naming distinct existing runs. CRCs of runs not done
// are not meaningful.
func parsePartial(data []byte) (*partial, error) {
	var p partial
	if err := decodeStrict(data, &p); err != nil {
		return nil, err
	}
	if err := p.validate(p.Done); err != nil {
		return nil, err
	}
	return &p, nil
}

func decodeStrict(data []byte, v any) error {
	if len(data) > maxManifestBytes {
		return merr("%d bytes is too large for a trunk manifest", len(data))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return merr("empty file")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return merr("truncated JSON")
		}
		return merr("invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return merr("trailing data after the JSON object")
	}
	return nil
}

// validate checks every rule of the format. done, if non-nil, lists runs
// that must exist (a partial file's finished runs).
func (m *Manifest) validate(done []string) error {
	if err := m.validateHeader(); err != nil {
		return err
	}
	names, err := m.validateRuns()
	if err != nil {
		return err
	}
	if err := m.validatePlaces(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, d := range done {
		if _, ok := names[d]; !ok {
			return merr("done lists %q, which is not a run", d)
		}
		if seen[d] {
			return merr("done lists %q twice", d)
		}
		seen[d] = true
	}
	return nil
}

// validateHeader checks the format, version, compression, source and total
// size.
func (m *Manifest) validateHeader() error {
	if m.Format != Format {
		return merr("format is %q, want %q", m.Format, Format)
	}
	if m.Version != Version && m.Version != v3 && m.Version != v2 && m.Version != legacyVersion {
		return merr("version %d is not supported (this build reads versions 1 to %d; repack with this k3)", m.Version, Version)
	}
	switch {
	case m.Compression == "":
	case m.Compression != BF16C:
		return merr("compression %q is not supported (this build knows %q)", m.Compression, BF16C)
	case m.Version < v3:
		return merr("compression is not part of version %d", m.Version)
	}
	if err := m.Source.validate(m.Version); err != nil {
		return err
	}
	if len(m.Runs) == 0 {
		return merr("no runs")
	}
	if m.TotalBytes < 0 || m.TotalBytes%RunAlign != 0 {
		return merr("total_bytes %d is not a non-negative multiple of %d", m.TotalBytes, RunAlign)
	}
	return nil
}

// validateRuns checks each run, that run and tensor names are unique, and
// that the global runs and every layer's run from 0 are there. names maps
// each run's name to its index.
func (m *Manifest) validateRuns() (names map[string]int, err error) {
	names = make(map[string]int, len(m.Runs))
	tnames := map[string]string{}
	layers := 0
	for i := range m.Runs {
		r := &m.Runs[i]
		if err := r.validate(m.Source.Prefix, m.Compressed()); err != nil {
			return nil, err
		}
		if j, dup := names[r.Name]; dup {
			return nil, merr("runs %d and %d are both called %q", j, i, r.Name)
		}
		names[r.Name] = i
		if r.Layer >= 0 {
			layers++
		}
		for _, t := range r.Tensors {
			if prev, dup := tnames[t.Name]; dup {
				return nil, merr("tensor %q is in run %q and in run %q", t.Name, prev, r.Name)
			}
			tnames[t.Name] = r.Name
		}
		if r.Offset+r.Length > m.TotalBytes {
			return nil, merr("run %q [%d, %d) ends past total_bytes %d", r.Name, r.Offset, r.Offset+r.Length, m.TotalBytes)
		}
	}
	for _, g := range []string{RunEmbed, RunHead, RunFinal} {
		if _, ok := names[g]; !ok {
			return nil, merr("run %q is missing", g)
		}
	}
	for i := 0; i < layers; i++ {
		if _, ok := names[LayerRunName(i)]; !ok {
			return nil, merr("%d layer runs but %q is missing", layers, LayerRunName(i))
		}
	}
	return names, nil
}

// validatePlaces checks that the runs do not overlap (in offset order) and
// that the last one ends at total_bytes.
func (m *Manifest) validatePlaces() error {
	order := make([]int, len(m.Runs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case m.Runs[a].Offset < m.Runs[b].Offset:
			return -1
		case m.Runs[a].Offset > m.Runs[b].Offset:
			return 1
		}
		return 0
	})
	for k := 1; k < len(order); k++ {
		a, b := &m.Runs[order[k-1]], &m.Runs[order[k]]
		if b.Offset < a.Offset+a.Length {
			return merr("runs %q [%d, %d) and %q [%d, %d) overlap", a.Name, a.Offset, a.Offset+a.Length, b.Name, b.Offset, b.Offset+b.Length)
		}
	}
	last := &m.Runs[order[len(order)-1]]
	if end := last.Offset + last.Length; end != m.TotalBytes {
		return merr("total_bytes is %d but the last run %q ends at %d", m.TotalBytes, last.Name, end)
	}
	return nil
}

func (s *Source) validate(version int) error {
	if len(s.Files) == 0 {
		return merr("source.files is empty")
	}
	seen := map[string]bool{}
	for i, f := range s.Files {
		if f.Name == "" || strings.ContainsAny(f.Name, `/\`) || f.Name == "." || f.Name == ".." {
			return merr("source.files[%d]: bad file name %q", i, f.Name)
		}
		if f.Size < 0 {
			return merr("source.files[%d] %q: negative size %d", i, f.Name, f.Size)
		}
		if version == legacyVersion {
			if f.ModTime != 0 || f.HeaderSHA256 != "" {
				return merr("source.files[%d] %q: mtime_ns and header_sha256 are not part of version 1", i, f.Name)
			}
		} else if !isSHA256(f.HeaderSHA256) {
			return merr("source.files[%d] %q: header_sha256 %q is not 64 lowercase hex digits", i, f.Name, f.HeaderSHA256)
		}
		if seen[f.Name] {
			return merr("source.files lists %q twice", f.Name)
		}
		seen[f.Name] = true
	}
	switch {
	case version < Version && s.WeightsSHA256 != "":
		return merr("source.weights_sha256 is not part of version %d", version)
	case version >= Version && !isSHA256(s.WeightsSHA256):
		return merr("source.weights_sha256 %q is not 64 lowercase hex digits", s.WeightsSHA256)
	}
	if s.Prefix != "" && s.Prefix != "language_model." {
		return merr("source.prefix is %q, want \"language_model.\" or \"\"", s.Prefix)
	}
	return nil
}

func (r *Run) validate(prefix string, compressed bool) error {
	if err := r.validateName(); err != nil {
		return err
	}
	if r.Offset < 0 || r.Offset%RunAlign != 0 {
		return merr("run %q: offset %d is not a non-negative multiple of %d", r.Name, r.Offset, RunAlign)
	}
	if r.Length <= 0 || r.Length%RunAlign != 0 || r.Length > math.MaxInt64-r.Offset {
		return merr("run %q: length %d is not a positive multiple of %d", r.Name, r.Length, RunAlign)
	}
	if r.DataBytes <= 0 || r.DataBytes > r.Length || r.Length-r.DataBytes >= RunAlign {
		return merr("run %q: data_bytes %d does not round up to length %d", r.Name, r.DataBytes, r.Length)
	}
	if len(r.Tensors) == 0 {
		return merr("run %q has no tensors", r.Name)
	}
	end := int64(0)
	for i := range r.Tensors {
		t := &r.Tensors[i]
		if t.Name == "" {
			return merr("run %q: tensor %d has no name", r.Name, i)
		}
		if !strings.HasPrefix(t.Name, prefix) {
			return merr("run %q: tensor %q lacks the source prefix %q", r.Name, t.Name, prefix)
		}
		if err := t.validateSize(r.Name, compressed); err != nil {
			return err
		}
		if t.Offset < 0 || t.Offset%TensorAlign != 0 {
			return merr("run %q: tensor %q: offset %d is not a non-negative multiple of %d", r.Name, t.Name, t.Offset, TensorAlign)
		}
		if t.Offset < end {
			return merr("run %q: tensor %q at %d overlaps the previous tensor (ending at %d) or is out of order", r.Name, t.Name, t.Offset, end)
		}
		if t.Size > r.DataBytes || t.Offset > r.DataBytes-t.Size {
			return merr("run %q: tensor %q [%d, %d) lies outside the run's %d data bytes", r.Name, t.Name, t.Offset, t.Offset+t.Size, r.DataBytes)
		}
		end = t.Offset + t.Size
	}
	if end != r.DataBytes {
		return merr("run %q: data_bytes is %d but the last tensor ends at %d", r.Name, r.DataBytes, end)
	}
	return nil
}

// validateName checks that the run is embed, head or final with layer -1,
// or layer.<n> with layer n.
func (r *Run) validateName() error {
	switch r.Name {
	case RunEmbed, RunHead, RunFinal:
		if r.Layer != -1 {
			return merr("run %q has layer %d, want -1", r.Name, r.Layer)
		}
	default:
		s, ok := strings.CutPrefix(r.Name, "layer.")
		n, err := strconv.Atoi(s)
		if !ok || err != nil || n < 0 || strconv.Itoa(n) != s {
			return merr("run name %q is not embed, head, final or layer.<n>", r.Name)
		}
		if r.Layer != n {
			return merr("run %q has layer %d", r.Name, r.Layer)
		}
	}
	return nil
}

// validateSize checks that a tensor of the run named run has a known dtype
// (BF16C only in a compressed trunk) and a size that its dtype and shape
// give.
func (t *Tensor) validateSize(run string, compressed bool) error {
	if t.Compressed() {
		if !compressed {
			return merr("run %q: tensor %q is %s but the trunk does not say it is compressed", run, t.Name, BF16C)
		}
		if err := checkBF16CSize(t); err != nil {
			return merr("run %q: tensor %q: %v", run, t.Name, err)
		}
		return nil
	}
	dt := safetensors.DType(t.DType)
	if !dt.Valid() {
		return merr("run %q: tensor %q has unsupported dtype %q", run, t.Name, t.DType)
	}
	if len(t.Shape) > 8 {
		return merr("run %q: tensor %q has rank %d", run, t.Name, len(t.Shape))
	}
	n := uint64(dt.Size())
	for _, d := range t.Shape {
		if d < 0 {
			return merr("run %q: tensor %q has a negative dimension in %v", run, t.Name, t.Shape)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return merr("run %q: tensor %q: shape %v is too large", run, t.Name, t.Shape)
		}
		n = lo
	}
	if t.Size < 0 || uint64(t.Size) != n {
		return merr("run %q: tensor %q: size %d does not match %s%v (%d bytes)", run, t.Name, t.Size, t.DType, t.Shape, n)
	}
	return nil
}

// sameSource reports whether have (a manifest's source) describes the
// checkpoint want (as sourceOf gives it): the same tensor prefix, file
// names, sizes and, unless have is version 1, header hashes. Modification
// times are compared by changedFiles.
func sameSource(have, want *Source) (bool, string) {
	if have.Prefix != want.Prefix {
		return false, fmt.Sprintf("tensor prefix %q, the checkpoint's is %q", have.Prefix, want.Prefix)
	}
	if len(have.Files) != len(want.Files) {
		return false, fmt.Sprintf("%d source files, the checkpoint has %d", len(have.Files), len(want.Files))
	}
	for i := range have.Files {
		h, w := have.Files[i], want.Files[i]
		if h.Name != w.Name {
			return false, fmt.Sprintf("source file %d is %s, the checkpoint's is %s", i+1, h.Name, w.Name)
		}
		if h.Size != w.Size {
			return false, fmt.Sprintf("%s was %d bytes, it is now %d", h.Name, h.Size, w.Size)
		}
		if h.HeaderSHA256 != "" && h.HeaderSHA256 != w.HeaderSHA256 {
			return false, fmt.Sprintf("%s has another header (a tensor's name, dtype, shape or place changed)", h.Name)
		}
	}
	return true, ""
}

// changedFiles lists the files of have whose content may differ from
// want's: every file when the weights fingerprints differ (or have has
// none: before version 4), else those whose modification time differs.
func changedFiles(have, want *Source) []int {
	if have.WeightsSHA256 != want.WeightsSHA256 {
		out := make([]int, len(have.Files))
		for i := range out {
			out[i] = i
		}
		return out
	}
	return modifiedFiles(have, want)
}

// modifiedFiles lists the files of have whose modification time differs
// from want's (every file for a version 1 source, which has none).
func modifiedFiles(have, want *Source) []int {
	var out []int
	for i := range have.Files {
		if i < len(want.Files) && (have.Files[i].ModTime == 0 || have.Files[i].ModTime != want.Files[i].ModTime) {
			out = append(out, i)
		}
	}
	return out
}

// sameLayout reports whether two manifests describe the same trunk.bin
// layout (everything but the CRCs and the source files' times).
func sameLayout(a, b *Manifest) bool { return layoutDiff(a, b, true) == "" }

// planDiff says how have (a trunk.json or partial file) differs from want
// (the uncompressed layout the checkpoint gives, makePlan), "" when it
// does not. An uncompressed have must match want exactly; a compressed
// one must hold the same tensors in the same runs and order with the same
// shapes and dtypes (BF16C for a BF16 one), at places that depend on the
// compressed sizes and so are not compared.
func planDiff(have, want *Manifest) string { return layoutDiff(have, want, !have.Compressed()) }

// layoutDiff says how the layout of have differs from want, "" when it
// does not; exact also compares the compression, offsets and sizes.
func layoutDiff(have, want *Manifest, exact bool) string {
	if ok, why := sameSource(&have.Source, &want.Source); !ok {
		return why
	}
	if exact && have.Compression != want.Compression {
		return fmt.Sprintf("compression %q, the other has %q", have.Compression, want.Compression)
	}
	if exact && have.TotalBytes != want.TotalBytes {
		return fmt.Sprintf("total_bytes is %d, the checkpoint's trunk has %d", have.TotalBytes, want.TotalBytes)
	}
	if len(have.Runs) != len(want.Runs) {
		return fmt.Sprintf("%d runs, the checkpoint's trunk has %d", len(have.Runs), len(want.Runs))
	}
	for i := range have.Runs {
		x, y := &have.Runs[i], &want.Runs[i]
		if x.Name != y.Name || x.Layer != y.Layer || exact && (x.Offset != y.Offset || x.Length != y.Length || x.DataBytes != y.DataBytes) {
			return fmt.Sprintf("run %d is %s [%d, +%d), the checkpoint's is %s [%d, +%d)", i, x.Name, x.Offset, x.Length, y.Name, y.Offset, y.Length)
		}
		if len(x.Tensors) != len(y.Tensors) {
			return fmt.Sprintf("run %s has %d tensors, the checkpoint's has %d", x.Name, len(x.Tensors), len(y.Tensors))
		}
		for j := range x.Tensors {
			s, t := &x.Tensors[j], &y.Tensors[j]
			sameType := s.DType == t.DType
			if !exact {
				sameType = s.SourceDType() == t.SourceDType()
			}
			switch {
			case s.Name != t.Name:
				return fmt.Sprintf("run %s holds %s where the checkpoint's has %s", x.Name, s.Name, t.Name)
			case !sameType || !slices.Equal(s.Shape, t.Shape):
				return fmt.Sprintf("tensor %s is %s%v in trunk.json, %s%v in the checkpoint", s.Name, s.DType, s.Shape, t.DType, t.Shape)
			case exact && (s.Offset != t.Offset || s.Size != t.Size):
				return fmt.Sprintf("tensor %s lies at %d (+%d) of run %s, the checkpoint's layout puts it at %d (+%d)", s.Name, s.Offset, s.Size, x.Name, t.Offset, t.Size)
			}
		}
	}
	return ""
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ErrCTrunk is a trunk.json written by the C engine (kimi-k3-in-c's
// pack_trunk.py): another format, which k3 does not read.
var ErrCTrunk = errors.New("made by the C engine (kimi-k3-in-c): its trunks are another format; pack again with k3 pack MODEL_DIR TRUNK_DIR")

// madeByC reports whether a trunk.json is the C engine's: a JSON object
// with its top-level "n_layers" member (k3's manifests have none).
func madeByC(data []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(data, &probe) != nil {
		return false
	}
	_, ok := probe["n_layers"]
	return ok
}
