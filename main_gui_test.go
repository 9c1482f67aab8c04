//go:build !headless && cgo

package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k3/ui/cli"
)

// TestNoDisplay: a bare k3 where no window can open says so in one line
// and exits 2 (it used to end in GLFW's panic and a Go stack trace).
func TestNoDisplay(t *testing.T) {
	t.Setenv("DISPLAY", "")
	t.Setenv("WAYLAND_DISPLAY", "")
	var errb bytes.Buffer
	assert.Equal(t, cli.ExitUsage, openApp(&errb))
	assert.Equal(t, "no display: run k3 --help for the commands\n", errb.String())

	// a Wayland display alone, which the X11 build cannot use: the same
	// one line (GLFW's "DISPLAY environment variable is missing" and a
	// recovered panic came first)
	if !waylandBuild {
		t.Setenv("WAYLAND_DISPLAY", "wayland-9")
		errb.Reset()
		assert.Equal(t, cli.ExitUsage, openApp(&errb))
		assert.Equal(t, "no display: run k3 --help for the commands\n", errb.String())
	}
}

// TestNoFyneLocaleLines: under LANG=C.UTF-8 (Debian's default in
// containers) a CLI command prints nothing from Fyne. This test binary links
// Fyne as k3 does, so it runs itself as the child: Fyne's locale lookup runs
// in its package init, before any test.
func TestNoFyneLocaleLines(t *testing.T) {
	if os.Getenv("K3_LOCALE_CHILD") == "1" {
		code := runCLI([]string{"version"})
		if os.Getenv("LANGUAGE") != "" {
			os.Exit(9) // the command's environment must be the one k3 was given
		}
		os.Exit(code)
	}
	for _, lang := range []string{"C.UTF-8", "C.utf8", "POSIX.UTF-8", "en_US.UTF-8", "C"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoFyneLocaleLines$")
		cmd.Env = append(cleanEnv(), "K3_LOCALE_CHILD=1", "LANG="+lang)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		require.NoError(t, cmd.Run(), "LANG=%s: %s", lang, errb.String())
		assert.Empty(t, errb.String(), "LANG=%s", lang)
		assert.Equal(t, "k3 "+cli.Version+"\n", out.String(), "LANG=%s", lang)
	}
}

// cleanEnv is the environment without the locale variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "LANG" && name != "LANGUAGE" && !strings.HasPrefix(name, "LC_") {
			env = append(env, kv)
		}
	}
	return env
}
