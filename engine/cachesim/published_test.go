package cachesim

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"k3/engine/expertcache"
	"k3/internal/fixture"
)

var (
	realTrace     = fixture.Path("seed-v1/expert_trace.bin")
	publishedFile = fixture.Path("seed-v1/published-data/expert-cache-capacity.txt")
)

func loadReal(t testing.TB) *Trace {
	t.Helper()
	reqs, err := ReadTrace(realTrace)
	if err != nil {
		t.Fatal(err)
	}
	return NewTrace(reqs)
}

// publishedRow is one row of expert-cache-capacity.txt.
type publishedRow struct {
	gb, slots                    int
	lru, belady, pin, gbTok, sec string
}

func readPublished(t *testing.T) (text string, rows []publishedRow) {
	t.Helper()
	b, err := os.ReadFile(publishedFile)
	if err != nil {
		t.Fatal(err)
	}
	text = string(b)
	re := regexp.MustCompile(`(?m)^(\d+) GB +(\d+) +([\d.]+)% +([\d.]+)% +([\d.]+)% +([\d.]+) +([\d.]+)$`)
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		gb, _ := strconv.Atoi(m[1])
		slots, _ := strconv.Atoi(m[2])
		rows = append(rows, publishedRow{gb, slots, m[3], m[4], m[5], m[6], m[7]})
	}
	if len(rows) != 12 {
		t.Fatalf("parsed %d rows of the published table, want 12", len(rows))
	}
	return text, rows
}

func pct(s Stats) string { return fmt.Sprintf("%.2f", 100*s.HitRate()) }

// TestPublishedTable reproduces every number of the published capacity table
// from the real trace, to the printed precision.
func TestPublishedTable(t *testing.T) {
	tr := loadReal(t)
	text, rows := readPublished(t)
	m := K3
	for _, r := range rows {
		slots := SlotsForGB(float64(r.gb), m.ExpertBytes)
		if slots != r.slots {
			t.Errorf("%d GB: %d slots, published %d", r.gb, slots, r.slots)
		}
		lru, _ := Simulate(tr, K3, expertcache.NameLRU, slots)
		bel, _ := Simulate(tr, K3, PolicyBelady, slots)
		pin, _ := Simulate(tr, K3, PolicyPinnedLRU, slots)
		gbTok := m.GBPerToken(lru.Misses, lru.Requests)
		got := []string{pct(lru), pct(bel), pct(pin), fmt.Sprintf("%.2f", gbTok), fmt.Sprintf("%.2f", m.SecPerToken(gbTok))}
		want := []string{r.lru, r.belady, r.pin, r.gbTok, r.sec}
		for i, col := range []string{"LRU", "BELADY", "PIN+LRU", "GB READ/TOK", "SEC/TOK"} {
			if got[i] != want[i] {
				t.Errorf("%d GB %s: got %s, published %s", r.gb, col, got[i], want[i])
			}
		}
		// The exact published line, in the C tool's layout.
		line := fmt.Sprintf("%-9s %8d %8.2f%% %8.2f%% %8.2f%% %12.2f %11.2f", fmt.Sprintf("%d GB", r.gb), slots,
			100*lru.HitRate(), 100*bel.HitRate(), 100*pin.HitRate(), gbTok, m.SecPerToken(gbTok))
		if !strings.Contains(text, line+"\n") {
			t.Errorf("line not in the published table:\n%s", line)
		}
	}

	// Everything around the table.
	s := Summarize(tr.Reqs, m, 6)
	var hot []string
	for _, h := range s.Hottest {
		hot = append(hot, fmt.Sprintf("L%d/e%d x%d", h.Layer, h.Expert, h.Count))
	}
	lru64, _ := Simulate(tr, K3, expertcache.NameLRU, SlotsForGB(64, m.ExpertBytes))
	bel64, _ := Simulate(tr, K3, PolicyBelady, SlotsForGB(64, m.ExpertBytes))
	for _, line := range []string{
		fmt.Sprintf("input   : tests/fixtures/expert_trace.bin (800,768 bytes, %s expert requests)", commas(s.Requests)),
		fmt.Sprintf("trace: %d requests, %d distinct experts, about %d token(s)", s.Requests, s.Distinct, s.Tokens),
		fmt.Sprintf("distinct experts touched: %d of %d (%.2f%% of the pool)", s.Distinct, s.Pool, 100*float64(s.Distinct)/float64(s.Pool)),
		fmt.Sprintf("if nothing were cached: %.2f GB per token", float64(m.TokenRequests())*float64(m.ExpertBytes)/1e9),
		"hottest experts: " + strings.Join(hot, ", "),
		fmt.Sprintf("total reuse: %d of %d requests are repeats (%.1f%%)", s.Repeats, s.Requests, 100*float64(s.Repeats)/float64(s.Requests)),
		fmt.Sprintf("SEC/TOK is expert I/O only, at the measured %.0f MB/s random-cold rate.", m.DiskMBps),
		fmt.Sprintf("compulsory misses: %d (every expert must be read at least once), a ceiling of", s.Distinct),
		fmt.Sprintf("%.2f%% hit rate for ANY policy at ANY size on this trace.", 100*float64(s.Repeats)/float64(s.Requests)),
		fmt.Sprintf("holding every expert this trace touched needs %.2f GB.", float64(s.Distinct)*float64(m.ExpertBytes)/1e9),
		fmt.Sprintf("holding the whole pool needs %.2f GB.", float64(s.Pool)*float64(m.ExpertBytes)/1e9),
		fmt.Sprintf("At 64 GB, Belady reaches %.2f%% where LRU manages", 100*bel64.HitRate()),
		fmt.Sprintf("   %.2f%%. That %.1f-point gap", 100*lru64.HitRate(), 100*(bel64.HitRate()-lru64.HitRate())),
		fmt.Sprintf("The trace touches %s distinct experts", commas(s.Distinct)),
	} {
		if !strings.Contains(text, line) {
			t.Errorf("not in the published file: %q", line)
		}
	}
	if fi, err := os.Stat(realTrace); err != nil || fi.Size() != 800768 {
		t.Errorf("trace size %v, %v; published 800,768 bytes", fi.Size(), err)
	}
}

func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
