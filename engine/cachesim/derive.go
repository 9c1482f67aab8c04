package cachesim

import "fmt"

// IncrementalFromRecompute turns a trace recorded under full-recompute
// decoding (every step re-runs the whole prefix, so each step's run for a
// layer repeats the previous step's requests for that layer and appends
// topK per new position) into the trace incremental decoding would make on
// the same tokens: step 0 whole (the prefill), then, per later step and
// layer, only the requests past the previous step's run for that layer.
//
// A step is a maximal sequence of layer runs with increasing layer index.
// It fails, naming the request index, if a run is not a multiple of topK or
// does not start with the previous step's run for that layer, which is what
// a trace not recorded under full recompute looks like.
func IncrementalFromRecompute(reqs []Request, topK int) ([]Request, error) {
	if topK < 1 {
		return nil, fmt.Errorf("topK %d < 1", topK)
	}
	type run struct{ start, end int }
	prev := map[int32]run{} // layer -> its run in the previous step
	cur := map[int32]run{}
	out := make([]Request, 0, len(reqs)/4)
	lastLayer := int32(-1)
	for i := 0; i < len(reqs); {
		l := reqs[i].Layer
		j := i
		for j < len(reqs) && reqs[j].Layer == l {
			j++
		}
		if l <= lastLayer { // a new step begins
			prev, cur = cur, map[int32]run{}
		}
		lastLayer = l
		if (j-i)%topK != 0 {
			return nil, fmt.Errorf("request %d: layer %d run of %d requests is not a multiple of top-%d", i, l, j-i, topK)
		}
		if _, dup := cur[l]; dup {
			return nil, fmt.Errorf("request %d: layer %d appears twice in one step", i, l)
		}
		cur[l] = run{i, j}
		keep := i
		if p, ok := prev[l]; ok {
			n := p.end - p.start
			if n > j-i {
				return nil, fmt.Errorf("request %d: layer %d run shrank from %d to %d requests", i, l, n, j-i)
			}
			for k := 0; k < n; k++ {
				if reqs[i+k] != reqs[p.start+k] {
					return nil, fmt.Errorf("request %d: layer %d does not repeat the previous step's routing (not a full-recompute trace)", i+k, l)
				}
			}
			keep = i + n
		}
		out = append(out, reqs[keep:j]...)
		i = j
	}
	return out, nil
}
