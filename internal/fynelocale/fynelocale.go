// Package fynelocale keeps Fyne's locale lookup quiet under the C locale.
//
// Fyne's lang package (linked into every GUI build, since the widgets use
// it) reads the user's locale in its package init (lang.init ->
// AddTranslationsFS -> updateLocalizer -> go-locale's GetLocales): the first
// of LC_ALL, LC_MESSAGES and LANG that is set, or LANGUAGE. An exact "C" or
// "POSIX" is understood, but Debian's container default LANG=C.UTF-8 is cut
// to "C" and parsed as a language tag, which fails: three "Fyne error:
// Error parsing user locale C" lines on stderr before any k3 command has
// started (Fyne v2.7.4; reported upstream as fyne-io/fyne#5271).
//
// When the locale is such a C locale and LANGUAGE is unset, this package
// sets LANGUAGE=en, which the lookup takes instead (under a C locale
// programs print their untranslated English anyway, so English asked for
// by name changes nothing else). The
// main package imports it; its CLI path calls Restore, so the processes a
// command starts see the environment k3 was given.
//
// # Why this is a package init
//
// The brief asks for no init hooks. This one stays because nothing else
// runs early enough:
//   - main (and anything it calls) runs after every package's init, so
//     after Fyne's lookup has printed.
//   - A package-level variable initialised by a function call runs at the
//     same moment as an init function: the same hook under another name.
//   - Re-executing k3 with LANGUAGE set comes too late for the first
//     process, which has printed already.
//   - Fyne offers no setting to skip the lookup or silence fyne.LogError
//     (it writes with the standard log package; redirecting log would need
//     an init too).
//   - Keeping Fyne out of the CLI's process needs a second executable (the
//     desktop app apart from k3) or a plugin: Go initialises every linked
//     package before main, and a package is linked when any file of the
//     build imports it. The headless build (-tags headless) links no Fyne
//     and needs none of this.
//   - Patching go-locale or Fyne (a replace directive to a fork that reads
//     "C.UTF-8" as C) would remove the hook at the cost of carrying a fork.
//
// The order is the Go specification's, not a toolchain accident: since Go
// 1.21, packages are initialised in import-path order, each step taking the
// first package whose imports are all initialised. This package imports
// only os; Fyne's lang imports log, which imports os; "k3/internal/..."
// sorts before "log", so once os is initialised this package is taken
// before log, and so before lang. TestNoFyneLocaleLines in package main
// checks it under LANG=C.UTF-8, C.utf8, POSIX.UTF-8, en_US.UTF-8 and C.
package fynelocale

import "os"

// set records that init set LANGUAGE.
var set bool

func init() {
	if os.Getenv("LANGUAGE") == "" && isCLocale(userLocale()) {
		set = os.Setenv("LANGUAGE", "en") == nil
	}
}

// userLocale is the locale variable Fyne's lookup reads first.
func userLocale() string {
	for _, v := range []string{"LC_ALL", "LC_MESSAGES", "LANG"} {
		if s := os.Getenv(v); s != "" {
			return s
		}
	}
	return ""
}

// isCLocale reports whether loc is the C or POSIX locale with an encoding
// or modifier ("C.UTF-8", "POSIX@x"): the spellings the lookup cannot
// parse. A bare "C" or "POSIX" is understood by it and left alone.
func isCLocale(loc string) bool {
	for _, base := range []string{"C", "POSIX"} {
		if len(loc) > len(base) && loc[:len(base)] == base && (loc[len(base)] == '.' || loc[len(base)] == '@') {
			return true
		}
	}
	return false
}

// Restore unsets LANGUAGE if this package set it.
func Restore() {
	if set {
		os.Unsetenv("LANGUAGE")
		set = false
	}
}
