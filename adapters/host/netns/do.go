package netns

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread of its own switched into a host's namespace
// (or Local's, for Local): a socket fn opens belongs to that namespace for
// its whole life, wherever it is used afterwards. So a test or a
// measurement can listen and dial as a host does without a process in the
// namespace. fn must not start goroutines that open sockets (they run on
// other threads, in Local's namespace).
func (l *Lab) Do(host string, fn func() error) error {
	if host == Local {
		return fn() // every thread but one in Do is in Local's namespace
	}
	h, err := l.Host(host)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread goes back to where it was before it is unlocked. If
		// it cannot, it stays locked: the goroutine's end then ends the
		// thread (or, for the main thread, retires it), so that no other
		// goroutine ever runs in the namespace by mistake.
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- fmt.Errorf("network namespace of this thread: %w", err)
			return
		}
		defer home.Close()
		if err := enter("/run/netns/" + h.NS); err != nil {
			errc <- err
			return
		}
		err = fn()
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// enter moves the calling thread into the network namespace at path.
func enter(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("entering network namespace %s: %w", path, err)
	}
	return nil
}
