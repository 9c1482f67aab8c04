// Package fynelocale keeps Fyne's locale lookup quiet under the C locale.
//
// Fyne's lang package (linked into every GUI build, since the widgets use
// it) reads the user's locale in its package init: the first of LC_ALL,
// LC_MESSAGES and LANG that is set. An exact "C" or "POSIX" is understood,
// but Debian's container default LANG=C.UTF-8 is cut to "C" and parsed as a
// language tag, which fails: three "Fyne error: Error parsing user locale C"
// lines on stderr before any k3 command has started.
//
// When the locale is such a C locale and LANGUAGE is unset, this package
// sets LANGUAGE=en, which the lookup takes instead (gettext ignores
// LANGUAGE under the C locale, so nothing else reads it differently). It
// must run before Fyne's init: Go initialises packages in import-path order,
// each as soon as its imports are initialised; this package imports only
// os, which log needs too, and "k3/internal/..." sorts before "log", which
// Fyne's lang needs, so this package's init comes first (TestNoFyneLocaleLines
// in package main checks it does). The main package imports it; its CLI path
// calls Restore, so the processes a command starts see the environment k3
// was given.
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
