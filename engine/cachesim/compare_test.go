package cachesim

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// comparison is the side-by-side hit-rate table the engine's policy choice
// rests on, as printed %.2f values per policy and capacity.
type comparison map[string]map[float64]string

func compare(t *testing.T, tr *Trace, gbs []float64) comparison {
	t.Helper()
	out := comparison{}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-8s %6s", "CACHE", "SLOTS")
	for _, p := range Policies {
		fmt.Fprintf(&sb, " %10s", p)
		out[p] = map[float64]string{}
	}
	sb.WriteByte('\n')
	for _, gb := range gbs {
		c := SlotsForGB(gb, K3.ExpertBytes)
		fmt.Fprintf(&sb, "%-8s %6d", fmt.Sprintf("%v GB", gb), c)
		for _, p := range Policies {
			st, err := Simulate(tr, K3, p, c)
			if err != nil {
				t.Fatal(err)
			}
			out[p][gb] = pct(st)
			fmt.Fprintf(&sb, " %9s%%", pct(st))
		}
		sb.WriteByte('\n')
	}
	t.Log("\n" + sb.String())
	return out
}

func checkComparison(t *testing.T, got comparison, want map[string][]string, gbs []float64) {
	t.Helper()
	for p, vals := range want {
		for i, gb := range gbs {
			if got[p][gb] != vals[i] {
				t.Errorf("%s at %v GB: %s%%, want %s%%", p, gb, got[p][gb], vals[i])
			}
		}
	}
}

var compareGB = []float64{4, 8, 16, 32, 64, 128, 192}

// TestPolicyComparison replays the real (full-recompute) trace under every
// policy at the published capacities.
func TestPolicyComparison(t *testing.T) {
	got := compare(t, loadReal(t), compareGB)
	checkComparison(t, got, map[string][]string{
		"lru":       {"36.24", "36.24", "36.24", "36.24", "36.24", "49.19", "90.00"},
		"s3fifo":    {"32.92", "35.32", "36.11", "42.68", "49.97", "73.65", "90.00"},
		"s3fifo-ws": {"36.21", "36.24", "36.24", "42.68", "49.97", "73.65", "90.00"},
		"lfu":       {"9.00", "15.30", "24.69", "36.62", "46.50", "79.56", "90.00"},
		"layer":     {"37.18", "39.00", "42.33", "48.70", "61.46", "84.51", "90.00"},
		"layer+r":   {"37.18", "39.00", "42.33", "48.70", "61.46", "84.51", "90.00"},
		"belady":    {"37.82", "39.42", "42.61", "48.99", "61.74", "84.59", "90.00"},
		"pin+lru":   {"36.99", "37.82", "39.42", "42.57", "48.66", "62.86", "90.00"},
	}, compareGB)
	// No online policy may beat the optimum.
	for _, p := range Policies {
		for _, gb := range compareGB {
			g, _ := strconv.ParseFloat(got[p][gb], 64)
			b, _ := strconv.ParseFloat(got[PolicyBelady][gb], 64)
			if g > b {
				t.Errorf("%s beats Belady at %v GB", p, gb)
			}
		}
	}
}

// TestPolicyComparisonIncremental replays the incremental-decode trace
// derived from the real one (prefill of 5 positions, then 7 one-token
// steps: 12 tokens, 17,664 requests, the same 10,010 experts).
func TestPolicyComparisonIncremental(t *testing.T) {
	reqs, err := ReadTrace(realTrace)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := IncrementalFromRecompute(reqs, K3.TopK)
	if err != nil {
		t.Fatal(err)
	}
	if len(inc) != 12*K3.TokenRequests() {
		t.Fatalf("derived %d requests, want %d", len(inc), 12*K3.TokenRequests())
	}
	got := compare(t, NewTrace(inc), compareGB)
	checkComparison(t, got, map[string][]string{
		"lru":       {"9.50", "9.50", "9.50", "30.16", "36.19", "42.32", "43.33"},
		"s3fifo":    {"10.08", "12.42", "16.06", "26.60", "37.00", "42.40", "43.33"},
		"s3fifo-ws": {"10.33", "11.17", "12.68", "26.60", "37.00", "42.40", "43.33"},
		"lfu":       {"6.11", "11.66", "17.73", "28.29", "37.00", "42.40", "43.33"},
		"layer":     {"10.48", "11.36", "13.10", "17.52", "29.19", "42.56", "43.33"},
		"layer+r":   {"11.43", "14.17", "20.99", "30.80", "37.05", "42.32", "43.33"},
		"belady":    {"18.45", "26.62", "35.81", "42.36", "43.33", "43.33", "43.33"},
		"pin+lru":   {"13.45", "16.64", "21.33", "29.42", "40.30", "43.33", "43.33"},
	}, compareGB)
}
