package vision

// Cost is what one image costs the tower and projector.
type Cost struct {
	Patches, Tokens int
	// Flops counts multiply-adds as two operations: the matrix products
	// and the attention (scores and weighted sums); the element-wise work
	// is left out (under 1%).
	Flops float64
	// WorkBytes is the largest working memory Embed holds at once (the
	// per-block buffers and the attention's key and value copies).
	WorkBytes int64
}

// CostOf is the cost of an image with patch grid g.
func (c *Config) CostOf(g Grid) Cost {
	N, T := float64(g.Patches()), float64(c.Tokens(g))
	D, Q, I, M := float64(c.Hidden), float64(c.QKV), float64(c.Inter), float64(c.MergedDim())
	perLayer := 2*N*D*3*Q + 4*N*N*Q + 2*N*Q*D + 4*N*D*I
	f := 2*N*float64(c.PatchDim())*D + float64(c.Layers)*perLayer + 2*T*M*M + 2*T*M*float64(c.TextHidden)
	n := int64(g.Patches())
	floats := n*int64(c.PatchDim()) + n*int64(3*c.Hidden+5*c.QKV+c.Inter)
	return Cost{Patches: g.Patches(), Tokens: c.Tokens(g), Flops: f, WorkBytes: 4 * floats}
}

// WeightBytes is the size of the tower and projector as Bind holds them:
// the matrices as stored (bf16) and the vectors as float32.
func (c *Config) WeightBytes() int64 {
	D, Q, I, M := int64(c.Hidden), int64(c.QKV), int64(c.Inter), int64(c.MergedDim())
	mats := D*int64(c.PatchDim()) + int64(c.Layers)*(3*Q*D+D*Q+2*I*D) + M*M + int64(c.TextHidden)*M
	vecs := int64(c.PosH*c.PosW)*D + int64(c.Layers)*2*D + D + int64(c.TextHidden)
	return 2*mats + 4*vecs
}

// BlockBytes is one encoder layer's weights as Bind holds them.
func (c *Config) BlockBytes() int64 {
	D, Q, I := int64(c.Hidden), int64(c.QKV), int64(c.Inter)
	return 2*(3*Q*D+D*Q+2*I*D) + 4*2*D
}

// StreamedBytes is what a streamed tower (BindStreamed) holds: everything
// but the encoder layers, and one layer's buffers.
func (c *Config) StreamedBytes() int64 {
	return c.WeightBytes() - int64(c.Layers-1)*c.BlockBytes()
}

// WorkPerPos is a picture's working memory per prompt position it takes:
// its MergeH x MergeW patches' share of CostOf's WorkBytes, and its
// projected row (TextHidden floats), held until the prompt reads it.
func (c *Config) WorkPerPos() int64 {
	n := int64(c.MergeH * c.MergeW)
	return 4*n*int64(c.PatchDim()+3*c.Hidden+5*c.QKV+c.Inter) + 4*int64(c.TextHidden)
}
