package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"
)

// A Checker runs the checks of a validation (validate-impl), for any
// family, and prints one line per check on Out, with what to fix under a
// failure's. Once Ctx is done nothing passes, and nothing is printed.
type Checker struct {
	Ctx context.Context
	Out io.Writer
	OK  bool // every check so far passed
}

// NewChecker is a Checker with no check run yet.
func NewChecker(ctx context.Context, out io.Writer) Checker {
	return Checker{Ctx: ctx, Out: out, OK: true}
}

// Check prints check name's outcome, err nil for a pass, and says whether
// it passed.
func (v *Checker) Check(name string, err error) bool {
	if v.Ctx.Err() != nil {
		v.OK = false
		return false
	}
	if err == nil {
		fmt.Fprintf(v.Out, "ok    %s\n", name)
		return true
	}
	v.OK = false
	fmt.Fprintf(v.Out, "FAIL  %s\n      %v\n", name, err)
	return false
}

// Expect is the check of an operation: it fails with err, or with fix
// when the operation answered (err nil) but not what the protocol says
// (not ok).
func (v *Checker) Expect(name string, err error, ok bool, fix string) {
	if err == nil && !ok {
		err = errors.New(fix)
	}
	v.Check(name, err)
}

// ExitGrace is how long the protocol gives a process to exit once its
// stdin closes.
const ExitGrace = 5 * time.Second

// Ends checks that c's process exits within ExitGrace of its stdin
// closing, or within the init timeout its launcher was given
// (Launcher.InitTimeout, --init-timeout) if that is longer: a machine too
// slow to start a process in the protocol's time is too slow to stop it
// in that time too (in CI, beside the whole suite, a Python process that
// had 30 s for init took over 5 s to exit). It also checks that the
// process kept to the protocol until then.
func (v *Checker) Ends(c *Client) {
	if v.Ctx.Err() != nil {
		return // the validation's cleanup kills it
	}
	c.stdin.Close()
	grace := max(ExitGrace, c.exitGrace)
	var err error
	// Through its waiter, if it has one: on a served simulator its close
	// of its connection is taken as it waits.
	if c.await(c.exited, time.After(grace), nil) != Ready {
		err = fmt.Errorf("when its stdin closes, a process must close its connection and exit within %v", grace)
		c.Signal(syscall.SIGKILL)
	}
	v.Check(c.name+" exits when its stdin closes", err)
	c.mu.Lock()
	crashed := c.crashed
	c.mu.Unlock()
	if crashed != "" && !strings.HasPrefix(crashed, "exited") {
		v.Check(c.name+" kept to the protocol", errors.New(c.Why()))
	}
}
