package gui

import (
	"time"

	"fyne.io/fyne/v2"
)

// laterFunc runs f on the UI goroutine after d (the Copy button's
// "Copied" going back, for one). Tests swap in a clock they advance
// themselves, so no timer of theirs outlives them.
type laterFunc func(d time.Duration, f func())

// fyneLater is the app's laterFunc: a timer whose function runs through
// fyne.Do.
func fyneLater(d time.Duration, f func()) {
	time.AfterFunc(d, func() { fyne.Do(f) })
}
