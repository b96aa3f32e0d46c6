//go:build !linux

package proc

import (
	"errors"
	"io"
)

// listens cannot tell outside Linux: there is no /proc to read.
func listens(pid, port int) (bool, error) {
	return false, errors.New("which process listens on a port is read from /proc, on Linux only")
}

// reserve cannot reserve a port outside Linux (no abstract Unix sockets):
// it always succeeds, holding nothing.
func reserve(port int) (io.Closer, bool) { return io.NopCloser(nil), true }

// holders cannot tell outside Linux.
func holders(int) string { return "" }
