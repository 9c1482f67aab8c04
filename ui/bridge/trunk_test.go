package bridge

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/engine/synth"
	"k3/storage/trunk"
)

// Two models never share a default trunk folder, even with the same name.
func TestDefaultTrunkDirPerModel(t *testing.T) {
	a := DefaultTrunkDir("/fast", "/models/one/Kimi-K3")
	b := DefaultTrunkDir("/fast", "/models/two/Kimi-K3")
	assert.NotEqual(t, a, b)
	assert.Equal(t, "/fast/k3-trunk", filepath.Dir(a))
	assert.Regexp(t, `^Kimi-K3-[0-9a-f]{6}$`, filepath.Base(a))
	assert.Equal(t, a, DefaultTrunkDir("/fast", "/models/one/Kimi-K3/"), "the same folder gives the same trunk folder")
}

// A trunk packed for one model is reported as another model's for a
// different checkpoint, as the engine would refuse it; an interrupted
// pack is recognised as this model's.
func TestCheckTrunk(t *testing.T) {
	a := writeModel(t, synth.Small())
	other := synth.Small()
	other.F32Trunk = true // different shard sizes
	b := writeModel(t, other)
	dir := filepath.Join(t.TempDir(), "trunk")
	assert.Equal(t, TrunkNone, CheckTrunk(a, dir).Status)

	// an interrupted pack
	ctx, cancel := context.WithCancel(t.Context())
	_, err := trunk.Pack(ctx, a, dir, trunk.Options{Progress: func(p trunk.Progress) {
		if p.RunsDone >= 2 {
			cancel()
		}
	}})
	require.ErrorIs(t, err, context.Canceled)
	c := CheckTrunk(a, dir)
	assert.Equal(t, TrunkPartial, c.Status)
	assert.GreaterOrEqual(t, c.Done, 2)
	assert.Greater(t, c.Total, c.Done)
	assert.Equal(t, TrunkOther, CheckTrunk(b, dir).Status)

	_, err = trunk.Pack(t.Context(), a, dir, trunk.Options{})
	require.NoError(t, err)
	assert.Equal(t, TrunkCheck{Status: TrunkPacked}, CheckTrunk(a, dir))
	c = CheckTrunk(b, dir)
	assert.Equal(t, TrunkOther, c.Status)
	assert.Contains(t, c.Why, "bytes")

	// "pack again here" replaces it
	var p trunkPacker
	require.NoError(t, p.Pack(t.Context(), b, dir, 0, PackOptions{Force: true}, nil))
	assert.Equal(t, TrunkPacked, p.Check(b, dir).Status)
	assert.Equal(t, TrunkOther, p.Check(a, dir).Status)
}

// The check tells a compressed trunk (and an interrupted compressed pack)
// from a plain one; packing the other kind over it is refused, as by k3
// pack, with plain words, until it is forced.
func TestCheckTrunkKinds(t *testing.T) {
	model := writeModel(t, synth.Small())
	dir := filepath.Join(t.TempDir(), "trunk")
	var p trunkPacker

	ctx, cancel := context.WithCancel(t.Context())
	err := p.Pack(ctx, model, dir, 0, PackOptions{Compress: true}, func(pp PackProgress) {
		if pp.Parts >= 2 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	c := p.Check(model, dir)
	assert.Equal(t, TrunkPartial, c.Status)
	assert.True(t, c.Compressed, "an interrupted compressed pack")
	err = p.Pack(t.Context(), model, dir, 0, PackOptions{}, nil)
	require.ErrorIs(t, err, trunk.ErrRefused, "a plain pack does not continue a compressed one")
	assert.NotContains(t, Explain(err), "--")
	assert.Contains(t, Explain(err), "Pack again here")

	require.NoError(t, p.Pack(t.Context(), model, dir, 0, PackOptions{Compress: true}, nil))
	assert.Equal(t, TrunkCheck{Status: TrunkPacked, Compressed: true}, p.Check(model, dir))
	tr, err := trunk.Open(dir)
	require.NoError(t, err)
	compressed := tr.Manifest().Compressed()
	require.NoError(t, tr.Close())
	assert.True(t, compressed, "trunk.json says compressed")

	err = p.Pack(t.Context(), model, dir, 0, PackOptions{}, nil)
	require.ErrorIs(t, err, trunk.ErrRefused, "a plain pack does not replace a compressed trunk unasked")
	assert.Equal(t, TrunkCheck{Status: TrunkPacked, Compressed: true}, p.Check(model, dir), "the refused pack left it as it was")

	require.NoError(t, p.Pack(t.Context(), model, dir, 0, PackOptions{Force: true}, nil))
	assert.Equal(t, TrunkCheck{Status: TrunkPacked}, p.Check(model, dir))
}

// A same-layout checkpoint with other weights whose files carry the
// packed checkpoint's times is another model's trunk, said in plain words
// (no command line).
func TestCheckTrunkTellsOtherWeights(t *testing.T) {
	s := synth.Small()
	a := writeModel(t, s)
	s.Seed++
	b := writeModel(t, s)
	ents, err := os.ReadDir(a)
	require.NoError(t, err)
	for _, e := range ents {
		fi, err := os.Stat(filepath.Join(a, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.Chtimes(filepath.Join(b, e.Name()), fi.ModTime(), fi.ModTime()))
	}
	dir := filepath.Join(t.TempDir(), "trunk")
	_, err = trunk.Pack(t.Context(), a, dir, trunk.Options{})
	require.NoError(t, err)
	assert.Equal(t, TrunkPacked, CheckTrunk(a, dir).Status)
	c := CheckTrunk(b, dir)
	assert.Equal(t, TrunkOther, c.Status)
	assert.Contains(t, c.Why, "packed from different weights")
	assert.NotContains(t, c.Why, "k3 pack")
}
