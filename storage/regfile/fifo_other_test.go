//go:build !unix

package regfile

import "errors"

func mkfifo(string) error { return errors.New("no mkfifo") }
