package bridge

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/keys"
	"k3/ui/remote"
)

// G4: a server error is explained as a server's, with its address.
func TestExplainServerErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, dialErr := net.Dial("tcp", addr)
	require.Error(t, dialErr)

	msg := ExplainServer("http://"+addr+"/v1", dialErr)
	assert.Equal(t, "Cannot reach the server at "+addr+": nothing answers there, so the server is not running or the port is wrong. "+
		"Check the address in k3 → Model location…", msg)
	assert.NotContains(t, msg, "Resume")

	// G26: expected conditions in plain words, no "Something went wrong:"
	assert.Equal(t, "The server at h does not accept this API key (HTTP 401). Enter its key in k3 → Model location…",
		ExplainServer("http://h/v1", &remote.ServerError{Status: 401, Message: "invalid key"}))
	assert.Equal(t, "The server at h stopped sending before the reply was complete: did it stop or restart? "+
		"What came is kept. Press Retry once the server runs again.",
		ExplainServer("http://h/v1", fmt.Errorf("reading the reply: %w", remote.ErrClosedEarly)))
	assert.Equal(t, `The server at h failed on this request (HTTP 500): it said "overloaded". Press Retry; if it fails again, the server's own log says why.`,
		ExplainServer("http://h/v1", &remote.ServerError{Status: 500, Message: "overloaded"}))
	assert.Equal(t, "Wait until the reply is finished (or press Stop) before deleting.",
		Explain(errors.New("wait until the reply is finished (or press Stop) before deleting")))
	// a network error outside a server or a download has no Resume either
	assert.NotContains(t, Explain(dialErr), "Resume")
}

// memPrefs is a preferences store in memory (fyne's, without an app).
type memPrefs map[string]any

func (m memPrefs) Bool(k string) bool { b, _ := m[k].(bool); return b }
func (m memPrefs) BoolWithFallback(k string, f bool) bool {
	if v, ok := m[k].(bool); ok {
		return v
	}
	return f
}
func (m memPrefs) SetBool(k string, v bool)     { m[k] = v }
func (m memPrefs) Float(k string) float64       { f, _ := m[k].(float64); return f }
func (m memPrefs) SetFloat(k string, v float64) { m[k] = v }
func (m memPrefs) FloatWithFallback(k string, f float64) float64 {
	if v, ok := m[k].(float64); ok {
		return v
	}
	return f
}
func (m memPrefs) Int(k string) int       { i, _ := m[k].(int); return i }
func (m memPrefs) SetInt(k string, v int) { m[k] = v }
func (m memPrefs) IntWithFallback(k string, f int) int {
	if v, ok := m[k].(int); ok {
		return v
	}
	return f
}
func (m memPrefs) String(k string) string       { s, _ := m[k].(string); return s }
func (m memPrefs) SetString(k string, v string) { m[k] = v }
func (m memPrefs) StringWithFallback(k, f string) string {
	if v, ok := m[k].(string); ok {
		return v
	}
	return f
}
func (m memPrefs) RemoveValue(k string) { delete(m, k) }

// G18: the server's API key is never written to the preferences; a key an
// older k3 wrote there is moved into the key store and removed.
func TestServerKeyKeptOutOfThePreferences(t *testing.T) {
	p := memPrefs{}
	ks := keys.Store{Dir: filepath.Join(t.TempDir(), "secrets")}
	s := DefaultSettings()
	s.Backend, s.ServerURL, s.ServerKey = BackendServer, "http://h/v1", "sk-secret"
	s.Save(p)
	require.NoError(t, SaveServerKey(ks, s.ServerURL, s.ServerKey))
	for k, v := range p {
		assert.NotEqual(t, "sk-secret", v, "the key is in the preferences under %s", k)
	}
	got, err := LoadServerKey(p, ks, s.ServerURL)
	require.NoError(t, err)
	assert.Equal(t, "sk-secret", got)
	assert.Equal(t, "", LoadSettings(p).ServerKey)

	// an older k3's plain-text key
	p2 := memPrefs{"server.key": "sk-old"}
	ks2 := keys.Store{Dir: filepath.Join(t.TempDir(), "secrets")}
	got, err = LoadServerKey(p2, ks2, "http://h/v1")
	require.NoError(t, err)
	assert.Equal(t, "sk-old", got)
	_, still := p2["server.key"]
	assert.False(t, still, "the plain-text key stays in the preferences")
	got, err = ks2.Get(ServerKeyFor("http://h/v1"))
	require.NoError(t, err)
	assert.Equal(t, "sk-old", got)
}
