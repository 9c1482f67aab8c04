package cli

import "golang.org/x/sys/windows"

// interruptSelf is a Ctrl-Break to every process of this console (Go
// delivers Ctrl-C and Ctrl-Break alike as os.Interrupt). It fails where the
// process has no console (Wine without one: "Invalid access").
func interruptSelf() error { return windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, 0) }
