package hub

import "golang.org/x/sys/windows"

// Windows reports sockets' failures as WSA codes and a full disk as
// ERROR_DISK_FULL, none of which errors.Is matches with the POSIX errors of
// retryable's lists.
var (
	errConnRefused error = windows.WSAECONNREFUSED
	osLocal              = []error{windows.WSAECONNREFUSED, windows.ERROR_DISK_FULL, windows.ERROR_HANDLE_DISK_FULL}
	osTransient          = []error{windows.WSAECONNRESET, windows.WSAECONNABORTED, windows.WSAENETUNREACH,
		windows.WSAEHOSTUNREACH, windows.WSAENETDOWN, windows.WSAETIMEDOUT}
)
