package plan

// PlaceDraft decides where a draft model lives (Plan.DraftStreamed):
// resident when the plan with it resident, at in's prefill chunk, needs at
// most limit bytes (or limit is unknown: 0), else streamed. The chunk is
// chosen first, with the draft model streamed: a longer chunk saves whole
// passes over the streamed trunk, a resident draft model only its own
// reads.
func PlaceDraft(in Inputs, limit int64) Inputs {
	in.DraftStreamed = false
	if in.DraftBytes <= 0 || in.DraftStream <= 0 || limit <= 0 || Make(in).Total <= limit {
		return in
	}
	in.DraftStreamed = true
	return in
}
