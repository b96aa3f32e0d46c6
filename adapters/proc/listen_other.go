//go:build !linux

package proc

import "errors"

// listens cannot tell outside Linux: there is no /proc to read.
func listens(pid, port int) (bool, error) {
	return false, errors.New("which process listens on a port is read from /proc, on Linux only")
}
