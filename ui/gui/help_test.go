package gui

import (
	"testing"

	"fyne.io/fyne/v2/theme"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Help → About names the version and the data folder; View sets the theme
// (kept) and hides the Engine panel, the chat column taking its room.
func TestHelpThemeAndEnginePanel(t *testing.T) {
	u, a := newTestUI(t, &fakeChat{})
	u.S.ModelDir = t.TempDir()
	u.SaveSettings()
	u.N.WizardDone.Set(true)
	ui(u.Start)
	v := u.Chat
	require.NotNil(t, v)
	ui(func() {
		var menus []string
		for _, m := range u.menu().Items {
			menus = append(menus, m.Label)
		}
		assert.Equal(t, []string{"k3", "Conversation", "View", "Help"}, menus)
		assert.Contains(t, u.aboutText(), "k3 "+Version)
		assert.Contains(t, u.aboutText(), u.B.DataDir)

		u.SetTheme(themeLight)
		light := theme.DefaultTheme().Color(theme.ColorNameBackground, theme.VariantLight)
		assert.Equal(t, light, a.Settings().Theme().Color(theme.ColorNameBackground, theme.VariantDark))
		assert.Equal(t, themeLight, a.Preferences().String(kTheme))

		relayout(u.Win)
		before := v.scroller.Size().Width
		u.SetGaugesShown(false)
		relayout(u.Win)
		assert.False(t, v.GaugesPanel.Visible())
		assert.Greater(t, v.scroller.Size().Width, before+float32(gaugesWidth)-1, "the chat column did not take the room")
		assert.True(t, a.Preferences().Bool(kGauges), "the choice is not kept")
	})
}
