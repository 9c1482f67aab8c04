package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"k3/engine"
	"k3/storage/units"
)

// defaultRunOut is where k3 run writes its JSON report without --out: the
// C engine's k3_run.json in the working directory (tests point it into a
// temporary directory).
var defaultRunOut = "k3_run.json"

// flagGiven reports whether the command line set the flag.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// tfAgreement is teacher forcing's tally for the report: the positions
// checked (every id but the last), those whose argmax is the next id, and
// their share.
func tfAgreement(ids, pred []int) (positions, matches *int, agreement *float64) {
	n, m := len(ids)-1, 0
	for i := 0; i < n && i < len(pred); i++ {
		if pred[i] == ids[i+1] {
			m++
		}
	}
	a := 0.0
	if n > 0 {
		a = float64(m) / float64(n)
	}
	return &n, &m, &a
}

// cFields fills the report's fields that the C engine's --out has and k3's
// other fields do not say.
func (c *runConfig) cFields(rep *runReport, res *runResult) {
	m := res.m
	rep.LayersRequested = m.Cfg.Layers
	if *c.mf.layers > 0 {
		rep.LayersRequested = *c.mf.layers
	}
	rep.LayersCompleted = m.Bound
	if ee := (*engine.ExpertError)(nil); errors.As(res.err, &ee) {
		rep.LayersCompleted = ee.Layer // the layers before the one whose expert failed
	}
	rep.EmbeddingBytesRead, rep.LMHeadBytesRead = res.stats.EmbedBytesRead, res.stats.HeadBytesRead
	rep.UltraLowMemory = *c.mf.ultra
	rep.StoppedAt = -1
	if g := res.gen; g != nil && g.Stop == engine.StopToken && len(g.Generated) > 0 && (res.err == nil || errors.Is(res.err, context.Canceled)) {
		rep.StoppedAt = g.Generated[len(g.Generated)-1]
	}
}

// trunkReadLine prints the streamed layers' read rate over the time the
// reads took (device time, overlapped with compute or not): the rate the
// disk gave, comparable with its MB/s, where the line before divides by the
// whole run.
func trunkReadLine(w io.Writer, s engine.Stats) {
	layers := s.TrunkBytesRead - s.EmbedBytesRead - s.HeadBytesRead
	if layers <= 0 || s.TrunkReadSeconds <= 0 {
		return
	}
	fmt.Fprintf(w, "trunk reads: %s of layers in %.2f s of reading: %s (the disk's rate)\n",
		units.Bytes(layers), s.TrunkReadSeconds, units.PerSec(float64(layers)/s.TrunkReadSeconds))
}

// ioModeLine says how the weights were read: straight from the device
// (O_DIRECT, the page cache bypassed) or, for the files named in the notes
// that follow it, through the page cache.
func ioModeLine(notes []string) string {
	if len(notes) == 0 {
		return "I/O: O_DIRECT (page cache bypassed), pread"
	}
	return fmt.Sprintf("I/O: O_DIRECT where the filesystem allows it, buffered (through the page cache) for %d case(s) noted below", len(notes))
}

// draftReadLine reports a streamed draft model's reads (its --out fields
// too): they count in the bytes read per token like the trunk's.
func draftReadLine(w io.Writer, rep *runReport, m *engine.Model, s engine.Stats) {
	rep.DraftStreamed, rep.DraftBytesRead = m.Plan.DraftStreamed, s.DraftBytesRead
	if d := m.DraftModel(); d != nil && m.Plan.DraftStreamed {
		fmt.Fprintf(w, "draft model: streamed, %s read (%s per drafting cycle)\n", units.Bytes(s.DraftBytesRead), units.Bytes(d.ReadBytes))
	}
}
