//go:build !linux

package proc

import "syscall"

// sysProcAttr: outside Linux a private server outlives a test process that
// dies without calling Stop.
func sysProcAttr() *syscall.SysProcAttr { return nil }
