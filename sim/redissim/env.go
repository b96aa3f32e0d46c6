package redissim

import (
	"context"
	"time"

	"github.com/lockprover/lockprover/model/redlock"
)

// Env is the process's view of the World as the Redlock reference runs on
// it (redlock.NewOn): its clock is the virtual time, and a round sends one
// command to every server at once, each bounded by its timeout in virtual
// time, a script as go-redis's Script.Run sends it (EVALSHA, then EVAL if
// the server answers NOSCRIPT: the first time, and after a restart). Use
// it from the process only; the reference then starts no goroutine and
// reads no other clock, so that a run depends only on the World's
// decisions.
func (p *Process) Env() redlock.Env { return env{p} }

type env struct{ p *Process }

func (e env) Now() int64   { return e.p.w.now }
func (e env) Servers() int { return len(e.p.w.servers) }
func (e env) Close() error { return nil }

// Round sends cmds[i] to server i. A context already ended sends nothing;
// one that ends meanwhile is not looked at (its deadline is real time).
func (e env) Round(ctx context.Context, timeout time.Duration, cmds []redlock.Cmd) []redlock.Result {
	return roundOf(e.p, ctx, timeout, cmds, false)
}
