//go:build unix

package safetensors

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Audit D10 (row 1.99): a named pipe where a shard should be is refused at
// once instead of blocking in open(2) forever.
func TestOpenRefusesANamedPipeShard(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	all := sampleTensors()
	require.NoError(t, WriteSharded(dir, [][]WriteTensor{all[:3], all[3:]}))
	shard := filepath.Join(dir, ShardName(2, 2))
	require.NoError(t, os.Remove(shard))
	require.NoError(t, syscall.Mkfifo(shard, 0o644))

	done := make(chan error, 1)
	go func() {
		s, err := Open(dir)
		if s != nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.Contains(t, err.Error(), shard)
		assert.Contains(t, err.Error(), "not a regular file (a named pipe)")
	case <-time.After(20 * time.Second):
		t.Fatal("Open blocked on the named pipe")
	}
}
