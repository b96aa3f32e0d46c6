package amqprun_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/amqprun/amqpprotocol"
	"github.com/lockprover/lockprover/histories/verdict"

	"github.com/lockprover/lockprover/adapters/runners/amqprun"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqpcheck"
)

// namedLikeUpstream is the Python example with its queues named as
// amqp-locks-python names them (N-A-1, N-B-1: "some equivalent of N-1-A",
// the spec allows), and, with leak, a destroy that forgets A[1].
func namedLikeUpstream(t *testing.T, leak bool) string {
	example, err := filepath.Abs(pythonExample)
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`import runpy, sys
sys.path.insert(0, %q)
import amqp_locks as al
al.slot_queue = lambda name, slot: f"{name}-A-{slot}"
al.holder_queue = lambda name, slot: f"{name}-B-{slot}"
if %s:
    def destroy(self):
        def d():
            before = self._count()
            self._delete_slots(2, before)  # forgets A[1]
            return before
        return self._locked(d)
    al.Admin.destroy = destroy
sys.argv[0] = %q
runpy.run_path(sys.argv[0], run_name="__main__")
`, example, map[bool]string{true: "True", false: "False"}[leak], filepath.Join(example, "lockprover_impl.py"))
	path := filepath.Join(t.TempDir(), "named.py")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return "/usr/bin/python3 " + path
}

// no-leak and the clean-up judge what is really on the broker under the
// run's lock name, whatever an implementation calls its queues (issue 27,
// problem 9): an implementation that names them N-A-1 and leaks one fails
// no-leak (it passed, vacuously, when only the reference's names were
// looked for); one that names them so and cleans up passes, and the run
// leaves nothing on the broker.
func TestNoLeakByWhatIsOnTheBroker(t *testing.T) {
	t.Parallel()
	needPika(t)
	url := rabbitmqtest.URL(t)
	for _, leak := range []bool{false, true} {
		t.Run(fmt.Sprintf("leak=%v", leak), func(t *testing.T) {
			t.Parallel()
			impl := amqpprotocol.NewProcesses(namedLikeUpstream(t, leak))
			defer impl.Stop()
			p, err := amqprun.ParsePlan("named.json", []byte(`{"version": 2, "kind": "semaphore", "lock": "lp", "slots": 2,
				"options": {"heartbeat_ms": 1000}, "clients": [[{"op": "acquire"}, {"op": "verify"}, {"op": "release"}]],
				"admins": [[]], "nemesis": [], "schedule": [], "schedule_seed": 1}`))
			if err != nil {
				t.Fatal(err)
			}
			var res *prover.Result
			var noLeak verdict.Verdict
			// The slot queues are judged only after the final destroy
			// succeeded; on a loaded machine it once did not (the verdict
			// then names them unjudged): up to three runs.
			for try := 1; try <= 3; try++ {
				var err error
				if res, err = (amqprun.RabbitMQ{URL: url}).Run(context.Background(), p, impl); err != nil {
					t.Fatal(err)
				}
				for _, v := range prover.Judge(res, model.Options{}).Verdicts {
					if v.Property == amqpcheck.NoLeak {
						noLeak = v
					}
				}
				// Nor can queues the implementation named itself be judged
				// when the broker's listing failed (once beside the suite
				// with two busy loops): the verdict says so, and it runs
				// again.
				ev, _ := res.Evidence.Family.(*amqpcheck.Evidence)
				if ev == nil || len(ev.Unjudged) == 0 && ev.Unlisted == "" {
					break
				}
				t.Logf("run %d: %s", try, noLeak.Detail)
			}
			lock := res.Evidence.Lock
			switch {
			case leak && (noLeak.Status != verdict.Fail || !strings.Contains(noLeak.Detail, lock+"-A-1")):
				var b strings.Builder
				histories.Write(&b, res.History)
				t.Errorf("no-leak %s (%s; excuses %+v), want a failure naming %s-A-1\n%s", noLeak.Status, noLeak.Detail, noLeak.Excuses, lock, b.String())
			case !leak && noLeak.Status != verdict.Pass:
				t.Errorf("no-leak %s: %s", noLeak.Status, noLeak.Detail)
			}
			ctl := rabbitmq.NewCtl(nil, rabbitmq.VhostOf(url), true)
			defer ctl.Close()
			left, err := ctl.QueueNames(context.Background(), lock)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 0 {
				t.Errorf("the run left %v on the broker", left)
			}
		})
	}
}
