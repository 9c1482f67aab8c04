package bridge

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
)

// netReason says in plain words why a connection to a server failed, and
// whether err is a connection failure at all. The words carry no "dial
// tcp", no system error text and no chain of wrapped errors: those stay in
// err (the app logs it).
func netReason(err error) (string, bool) {
	var dns *net.DNSError
	var ne net.Error
	switch {
	case err == nil:
		return "", false
	case errors.As(err, &dns):
		return fmt.Sprintf("the name %s is not known here (no network, or the address is misspelt)", dns.Name), true
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "it does not use a secure connection: write its address with http:// instead of https://", true
	case tlsFailure(err):
		return "its secure connection (https) cannot be trusted: its certificate is not one this machine trusts, or not for this name", true
	case errors.Is(err, syscall.EADDRINUSE):
		return "another program already uses that port: choose another port, or stop that program", true
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "this machine has no such address: use 127.0.0.1, or one of this machine's addresses", true
	case errors.Is(err, syscall.ECONNREFUSED):
		return "nothing answers there, so the server is not running or the port is wrong", true
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "it did not answer in time", true
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "the network cannot get there (no network, or the address is wrong)", true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "it closed the connection", true
	case errors.As(err, &ne):
		return "the connection failed", true
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return "the connection failed", true
	}
	return "", false
}

// tlsFailure reports whether err is a secure connection that failed its
// checks (an unknown authority, another name, an expired certificate, a
// server that does not speak TLS).
func tlsFailure(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var rh tls.RecordHeaderError
	var al tls.AlertError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) ||
		errors.As(err, &rh) || errors.As(err, &al)
}

// hostOf is the host (and port) of a server's address, as people read it:
// http://127.0.0.1:8080/v1 is 127.0.0.1:8080.
func hostOf(addr string) string {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		return u.Host
	}
	return addr
}

// serverSaid is a server's own error message, short enough for one line:
// its first line, at most 160 characters.
func serverSaid(msg string) string {
	msg = strings.TrimSpace(strings.SplitN(strings.TrimSpace(msg), "\n", 2)[0])
	if r := []rune(msg); len(r) > 160 {
		msg = string(r[:159]) + "…"
	}
	return strings.TrimSuffix(msg, ".")
}
