package gui

import (
	"net"
	"strings"
	"testing"

	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/bridge"
)

// G25: after choosing "Use a server" the labels of the server's fields
// are in the text colour (they stayed grey until the dialog was opened
// again). N11: the advice shown in the dialog points at its fields, not at
// "k3 → Model location…." (four dots), the dialog the user is in.
func TestServerDialogLabelsAndAdvice(t *testing.T) {
	u, a := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	require.NoError(t, u.SaveSettings())
	ui(func() {
		u.showBackendSettings()
		top := u.Win.Canvas().Overlays().Top()
		require.NotNil(t, top)
		label := func(text string) *canvas.Text {
			return findVisible(top, func(x *canvas.Text) bool { return x.Text == text })
		}
		rg := findVisible(top, func(*widget.RadioGroup) bool { return true })
		require.NotNil(t, rg)
		rg.SetSelected(choiceServer)
		fg := theme.Current().Color(theme.ColorNameForeground, a.Settings().ThemeVariant())
		for _, l := range []string{"Server address", "API key", "Model"} {
			tx := label(l)
			require.NotNil(t, tx, l)
			assert.Equal(t, fg, tx.Color, "%s is greyed while its field works", l)
		}
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, dialErr := net.Dial("tcp", addr)
	require.Error(t, dialErr)
	url := "http://" + addr + "/v1"
	here := bridge.ExplainServerHere(url, dialErr)
	assert.True(t, strings.HasSuffix(here, "the server is not running or the port is wrong. Check the address above."), here)
	assert.NotContains(t, here, "Model location")
	menu := bridge.ExplainServer(url, dialErr)
	assert.True(t, strings.HasSuffix(menu, "Check the address in k3 → Model location…"), menu)
	assert.NotContains(t, menu, "….")
}
