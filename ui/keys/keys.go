// Package keys keeps the app's secrets (a server's API key): in the
// operating system's keychain (macOS Keychain, Windows Credential Manager,
// the Secret Service of GNOME or KDE) through github.com/zalando/go-keyring,
// and where no keychain answers (a Linux box without a Secret Service, a CI
// runner, Xvfb) in a file only its owner may read (mode 0600, in a folder of
// mode 0700). Never in the preferences file, which others may read.
package keys

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/zalando/go-keyring"

	"k3/storage/atomicfile"
)

// Service is the name the app's secrets have in the keychain.
const Service = "k3"

// Keyring is the part of the keychain the store uses (go-keyring's
// functions; tests give another).
type Keyring interface {
	Get(service, user string) (string, error)
	Set(service, user, secret string) error
	Delete(service, user string) error
}

// ErrNotFound is the keychain's "no such secret".
var ErrNotFound = keyring.ErrNotFound

// system is go-keyring.
type system struct{}

func (system) Get(s, u string) (string, error) { return keyring.Get(s, u) }
func (system) Set(s, u, p string) error        { return keyring.Set(s, u, p) }
func (system) Delete(s, u string) error        { return keyring.Delete(s, u) }

// SystemKeyring is the operating system's keychain, or nil where none can
// answer: on Linux and the BSDs without a D-Bus session (asking would start
// a D-Bus daemon, or wait for one).
func SystemKeyring() Keyring {
	switch runtime.GOOS {
	case "darwin", "windows":
		return system{}
	}
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		return nil
	}
	return system{}
}

// Store keeps named secrets: in Keyring when it has one and it answers,
// else in Dir/<name> (mode 0600).
type Store struct {
	Keyring Keyring // nil: the file only
	Dir     string  // the folder of the fallback files (made with mode 0700)
}

// Where says where a secret is kept, in words for the user.
func (s Store) Where(name string) string {
	if s.Keyring != nil {
		if _, err := s.Keyring.Get(Service, name); err == nil {
			return "the system keychain"
		}
	}
	return "a file only you can read (" + s.path(name) + ")"
}

func (s Store) path(name string) string { return filepath.Join(s.Dir, name) }

// Get returns the secret ("" when none is kept).
func (s Store) Get(name string) (string, error) {
	if s.Keyring != nil {
		v, err := s.Keyring.Get(Service, name)
		if err == nil {
			return v, nil
		}
	}
	b, err := os.ReadFile(s.path(name))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the saved key: %w", err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// Set keeps the secret ("" removes it): in the keychain when it takes it
// (any file copy is then removed), else in the file.
func (s Store) Set(name, secret string) error {
	if secret == "" {
		return s.Delete(name)
	}
	if s.Keyring != nil && s.Keyring.Set(Service, name, secret) == nil {
		if err := os.Remove(s.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("removing the old key file: %w", err)
		}
		return nil
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("saving the key: %w", err)
	}
	if err := os.Chmod(s.Dir, 0o700); err != nil {
		return fmt.Errorf("saving the key: %w", err)
	}
	if err := atomicfile.WritePrivate(s.path(name), []byte(secret)); err != nil {
		return fmt.Errorf("saving the key: %w", err)
	}
	return nil
}

// Delete removes the secret from the keychain and the file.
func (s Store) Delete(name string) error {
	if s.Keyring != nil {
		_ = s.Keyring.Delete(Service, name) // an error: not there, or no keychain; either way it is not kept there
	}
	if err := os.Remove(s.path(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the saved key: %w", err)
	}
	return nil
}
