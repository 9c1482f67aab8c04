package expertcache

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRegistry(t *testing.T) {
	names := Names()
	require.Equal(t, []string{"layer+r", "layer", "lru", "s3fifo"}, names)
	assert.Equal(t, Default, names[0], "Default comes first")
	names[0] = "changed"
	assert.Equal(t, Default, Names()[0], "Names returns a copy")

	// Every name builds a working policy of that name and capacity, by
	// Lookup (any case) and by New.
	for _, name := range Names() {
		for _, spelled := range []string{name, strings.ToUpper(name)} {
			c, ok := Lookup(spelled)
			require.True(t, ok, spelled)
			p := c(5, 3, 7)
			assert.Equal(t, name, p.Name())
			assert.Equal(t, 5, p.Capacity())
			assert.Equal(t, "M H ", run(p, Key(2, 6, 7), Key(2, 6, 7)), name)
		}
		p, err := New(name, 5, 3, 7)
		require.NoError(t, err)
		assert.Equal(t, name, p.Name())
	}
	p, err := New("", 5, 3, 7)
	require.NoError(t, err)
	assert.Equal(t, Default, p.Name(), `"" is the default`)

	// An unknown name is refused, naming every known one.
	_, ok := Lookup("bogus")
	assert.False(t, ok)
	_, ok = Lookup("")
	assert.False(t, ok, `"" is New's default, not a name`)
	_, err = New("bogus", 5, 3, 7)
	require.EqualError(t, err, `unknown expert cache policy "bogus" (known: layer+r, layer, lru, s3fifo)`)
}
