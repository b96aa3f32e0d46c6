package proc

import "syscall"

// sysProcAttr makes the kernel kill a private server when the process that
// started it dies, so that a crashed test leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
