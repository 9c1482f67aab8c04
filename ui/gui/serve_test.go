package gui

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"k3/ui/bridge"
)

// G25: in server mode "Start serving" is off (the status says why).
func TestServeOffInServerMode(t *testing.T) {
	u, _ := newTestUI(t, nil)
	u.S.Backend, u.S.ServerURL = bridge.BackendServer, "http://h:1/v1"
	p := NewServePanel(u)
	assert.True(t, p.Toggle.Disabled(), "Start serving is on though serving cannot work")
	assert.Contains(t, p.Status.Text, "serving needs the model on this machine")
}
