package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/plan"
	"k3/internal/fixture"
	"k3/storage/trunk"
)

// TestSmallModelNotAtTheFloor: a model whose packed layers fit laptop's
// trunk budget streams nothing there, so it is not at the memory floor
// (it plans the rollback copy of the state, as above the floor); the same
// model at a budget below its layers is, and ultra always is.
func TestSmallModelNotAtTheFloor(t *testing.T) {
	dir := fixture.ModelDir("tiny-release")
	tr := filepath.Join(t.TempDir(), "trunk")
	_, err := trunk.Pack(context.Background(), dir, tr, trunk.Options{})
	require.NoError(t, err)
	layers := packedLayerBytes(tr, 0)
	require.Positive(t, layers)
	laptop, _ := plan.Lookup("laptop")
	at := func(budget int64) Options {
		return Options{TrunkDir: tr, Budget: Budget{TrunkBytes: budget, Ring: 2, CacheBytes: 1}}
	}
	fits, streams := at(int64(laptop.TrunkGB*plan.GB)), at(layers/2)
	assert.False(t, fits.Floor(), "the whole trunk fits laptop's budget")
	assert.True(t, streams.Floor(), "half the layers' bytes: streamed at a laptop-sized budget")
	ultra := fits
	ultra.Budget.Ultra = true
	assert.True(t, ultra.Floor())
	assert.False(t, Options{Budget: Budget{TrunkBytes: 1}}.Floor(), "no packed trunk: resident, not the floor")
	mf, err := Open(dir, fits)
	require.NoError(t, err)
	defer mf.Close()
	ms, err := Open(dir, streams)
	require.NoError(t, err)
	defer ms.Close()
	assert.False(t, mf.lean)
	assert.True(t, ms.lean)
	assert.Greater(t, mf.Plan.State, ms.Plan.State, "not at the floor: the rollback copy is planned")
}
