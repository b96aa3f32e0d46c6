package consulconform

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// The differential: is the simulator telling the truth about Consul and
// etcd? rapid draws sequences of every call consulsem's recipe makes of
// its backend (create, renew and destroy a session, on Consul with a
// lock-delay or not; put a contender key, bound or not; list a prefix,
// stale or not; write the lock key with or without the check on its index
// and on a contender's session; delete a key; wait for a change after a
// listing's index, as the recipe waits),
// with sleeps; each runs on a private real server through consulsem's own
// ConsulBackend or EtcdBackend (the very HTTP and gRPC calls of the
// recipe) and on a simulated server, which must give the same answers
// step by step. Each sequence runs on a prefix of its own, which first
// gets a history (a key put and deleted), so that its listings' indexes
// are its own and not those of the whole store, which the sequences
// running beside it move on.
//
// What is compared: an answer's kind (an error's text aside); a session's
// granted TTL; a listing's keys, owners, values and LockIndexes; and the
// indexes (ModifyIndex, ModRevision, a grant's index) by their order: each
// is replaced by its rank among the indexes the run saw, since the real
// server's numbers also count writes the recipe cannot see (Consul's own
// Raft entries, other sequences' writes) and only their order and
// equality mean anything to it. A listing's own index is judged through
// the wait for a change after it (at once, or after its max). Tokens are
// replaced by s1, s2, ... in the order their sessions were created.
//
// Expiry is judged by keeping every session's fate far from its deadline,
// as Redis's differential (redisconform) does: a short TTL outlives the
// calls between two sleeps (at most maxBusy apart) and is gone after a
// sleep (Consul: after two, since it invalidates at twice the TTL: so one
// sleep between one and two TTLs also tells 2 x TTL from 1 x TTL). The
// sequence runs on the real server first, and each of its sleeps lasts
// as long on the simulator as it took in real time. A run whose calls
// between two sleeps took more than maxBusy cannot be judged; it runs
// again, and a sequence too slow on every try is inconclusive. A wait
// says "changed" if, on Consul, the prefix's index had already moved past
// the wait's when it began (a listing just before it reads that), or if
// it returned within nine tenths of its max (one that times out takes its
// max at least): its max is 200 ms on Consul, 400 ms
// on etcd, whose watch from a passed revision waits up to 100 ms for the
// server's sync of its unsynced watchers, longer under load.
//
// A diverging sequence is shrunk by dropping steps and sleeps while it
// still diverges (rapid's own shrinking, a bit at a time, takes too many
// runs of a second each on a real server).

// A profile is how the differential exercises one kind of server.
type profile struct {
	short, long, tiny time.Duration // TTLs: outlives no sleep; outlives the run; below the floor
	// delay is the lock-delay of a session drawn with one (Consul): it
	// outlasts the calls between two sleeps and is over after a sleep
	// (from a destroy), or by the first call after the sleep that ends a
	// short session (invalidated at 2 x TTL, 2 s, the call at 3 s at
	// the earliest).
	delay   time.Duration
	nap     time.Duration // a sleep
	maxBusy time.Duration // the most real time between two sleeps that can be judged
	wait    time.Duration // a wait for a change's max
}

// profileOf is the differential's profile on a server of kind k whose
// session_ttl_min (Consul) or lease floor (etcd) is min.
func profileOf(k consulsim.Kind, min time.Duration) profile {
	if k == consulsim.Consul {
		// invalidated 2 s after its last renewal: alive after one nap
		// (at most 1.9 s later), gone after two (3 s)
		return profile{short: time.Second, long: time.Minute, tiny: min / 2, delay: 500 * time.Millisecond,
			nap: 1500 * time.Millisecond, maxBusy: 400 * time.Millisecond, wait: 200 * time.Millisecond}
	}
	// a watch from a revision passed waits up to 100 ms for the server's
	// sync (longer under load): a wait of 400 ms
	return profile{short: min, long: time.Minute, tiny: 300 * time.Millisecond,
		nap: min + consulsim.EtcdSweep + 300*time.Millisecond, maxBusy: 600 * time.Millisecond, wait: 400 * time.Millisecond}
}

// A step is one call of a sequence, after a sleep if sleep is set.
type step struct {
	sleep bool
	kind  string // create, renew, destroy, contender, list, write, delete, wait
	// ttl (create): short, long or tiny; release: Consul's Behavior;
	// delay: a lock-delay (the profile's; etcd has none, and ignores it).
	ttl            string
	release, delay bool
	// ses names a session: the ses-th the run created (from 1); 0, or
	// one not yet created, a token no session has.
	ses int
	// key (contender, delete): own (prefix/<token>), lock (prefix/.lock)
	// or other (prefix/x).
	key   string
	bound bool // contender: bound to the session
	stale bool // list
	// cas (write): none (no check on the index), zero (the lock key must
	// not exist), last or prev (its ModIndex in the last listing, or the
	// one before); live: check that the session holds its own contender
	// key.
	cas  string
	live bool
}

func (s step) String() string {
	var b strings.Builder
	if s.sleep {
		b.WriteString("sleep; ")
	}
	b.WriteString(s.kind)
	switch s.kind {
	case "create":
		fmt.Fprintf(&b, " ttl %s release %v", s.ttl, s.release)
		if s.delay {
			b.WriteString(" lock-delay")
		}
	case "renew", "destroy":
		fmt.Fprintf(&b, " s%d", s.ses)
	case "contender":
		fmt.Fprintf(&b, " %s s%d bound %v", s.key, s.ses, s.bound)
	case "list":
		fmt.Fprintf(&b, " stale %v", s.stale)
	case "write":
		fmt.Fprintf(&b, " holder s%d cas %s live %v", s.ses, s.cas, s.live)
	case "delete":
		fmt.Fprintf(&b, " %s s%d", s.key, s.ses)
	}
	return b.String()
}

// drawSequence draws 1 to 20 steps.
func drawSequence(t *rapid.T) []step {
	var steps []step
	for i := range rapid.IntRange(1, 20).Draw(t, "steps") {
		steps = append(steps, drawStep(t, i))
	}
	return steps
}

func drawStep(t *rapid.T, i int) step {
	label := func(what string) string { return fmt.Sprintf("%s%d", what, i) }
	s := step{
		sleep: rapid.IntRange(0, 5).Draw(t, label("sleep")) == 0,
		kind: rapid.SampledFrom([]string{"create", "create", "create", "renew", "destroy", "contender", "contender",
			"list", "list", "write", "write", "delete", "wait"}).Draw(t, label("kind")),
		ses: rapid.SampledFrom([]int{1, 1, 1, 2, 2, 3, 0}).Draw(t, label("ses")),
	}
	switch s.kind {
	case "create":
		s.ttl = rapid.SampledFrom([]string{"short", "short", "long", "tiny"}).Draw(t, label("ttl"))
		s.release = rapid.IntRange(0, 3).Draw(t, label("release")) == 0
		s.delay = rapid.IntRange(0, 2).Draw(t, label("delay")) == 0
	case "contender", "delete":
		s.key = rapid.SampledFrom([]string{"own", "own", "own", "lock", "other"}).Draw(t, label("key"))
		s.bound = rapid.IntRange(0, 4).Draw(t, label("bound")) > 0
	case "list":
		s.stale = rapid.Bool().Draw(t, label("stale"))
	case "write":
		s.cas = rapid.SampledFrom([]string{"last", "last", "last", "zero", "prev", "none"}).Draw(t, label("cas"))
		s.live = rapid.IntRange(0, 4).Draw(t, label("live")) > 0
	}
	return s
}

// bogus is a token no session has, as each kind writes them.
func bogus(k consulsim.Kind) string {
	if k == consulsim.Etcd {
		return "000000000000dead"
	}
	return "00000000-0000-4000-8000-00000000dead"
}

// A run is a sequence's run on one backend: each step's answer, raw
// (tokens as they are, indexes marked ⟦n⟧: canonical makes them
// comparable), the tokens created, and (on the real server) how long each
// sleep took.
type run struct {
	answers []string
	toks    []string
	slept   []time.Duration
	// notes says, for a cluster sequence, how each step's call went on
	// the real cluster (its time, and the error behind an "error"), for
	// the report of a divergence; never compared.
	notes []string
}

// runner runs steps on a backend.
type runner struct {
	b      consulsem.Backend
	kind   consulsim.Kind
	pr     profile
	prefix string
	// nap sleeps for the j-th sleep and returns how long it took, or an
	// error that ends the run (ctx's, or errTooSlow).
	nap func(j int) (time.Duration, error)
	// failed, if set, is told the error behind each "error" answer.
	failed func(err error)
	// indexed: a wait on Consul is "changed" by the prefix's index read
	// just before it (the single server's differential, on both sides;
	// not the cluster's, whose agents may be cut off).
	indexed bool
}

// fail is the answer to a call that failed with err: "error", and
// r.failed told why.
func (r runner) fail(err error) string {
	if r.failed != nil {
		r.failed(err)
	}
	return "error"
}

var errTooSlow = errors.New("the calls between two sleeps took too long to judge")

// run runs steps, after giving the prefix a history of its own (a key
// put and deleted): so that a listing's index is the prefix's, never the
// index of the whole KV store (what Consul answers for a prefix that never
// had a key), which the other sequences running beside it move on. The
// error is nap's, or ctx's.
func (r runner) run(ctx context.Context, steps []step) (run, error) {
	var out run
	var lists []consulsem.Listing
	if _, err := r.b.PutContender(ctx, r.prefix+"/setup", "", false); err != nil {
		return out, fmt.Errorf("setup: %w", err)
	}
	if err := r.b.DeleteKey(ctx, r.prefix+"/setup"); err != nil {
		return out, fmt.Errorf("setup: %w", err)
	}
	for _, s := range steps {
		if s.sleep {
			d, err := r.nap(len(out.slept))
			if err != nil {
				return out, err
			}
			out.slept = append(out.slept, d)
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		out.answers = append(out.answers, r.step(ctx, s, &out.toks, &lists))
	}
	return out, nil
}

// step makes one call and says what it answered.
func (r runner) step(ctx context.Context, s step, toks *[]string, lists *[]consulsem.Listing) string {
	tok := bogus(r.kind)
	if s.ses >= 1 && s.ses <= len(*toks) {
		tok = (*toks)[s.ses-1]
	}
	key := map[string]string{"own": r.prefix + "/" + tok, "lock": r.prefix + "/.lock", "other": r.prefix + "/x"}[s.key]
	switch s.kind {
	case "create":
		ttl := map[string]time.Duration{"short": r.pr.short, "long": r.pr.long, "tiny": r.pr.tiny}[s.ttl]
		var delay time.Duration
		if s.delay {
			delay = r.pr.delay
		}
		t, granted, err := r.b.CreateSession(ctx, ttl, s.release, delay)
		if err != nil {
			return r.fail(err)
		}
		*toks = append(*toks, t)
		return fmt.Sprintf("%s TTL %v", t, granted)
	case "renew":
		return r.errWord(r.b.RenewSession(ctx, tok))
	case "destroy":
		return r.errWord(r.b.DestroySession(ctx, tok))
	case "contender":
		ok, err := r.b.PutContender(ctx, key, tok, s.bound)
		if err != nil {
			return r.fail(err)
		}
		return strconv.FormatBool(ok)
	case "list":
		l, err := r.b.List(ctx, r.prefix, s.stale)
		if err != nil {
			return r.fail(err)
		}
		*lists = append(*lists, l)
		return showListing(l, r.prefix)
	case "write":
		return r.write(ctx, s, tok, *lists)
	case "delete":
		return r.errWord(r.b.DeleteKey(ctx, key))
	case "wait":
		n := len(*lists)
		if n == 0 {
			// The recipe waits after a listing only. (A watch from an
			// early revision on etcd waits for the server to read its
			// history, which takes longer the more revisions it has.)
			return "not run: no listing yet"
		}
		index := (*lists)[n-1].Index
		// On Consul a change made before the wait is in the prefix's own
		// index, which a listing reads: the blocking query then answers at
		// once, and the wait is "changed" by that index, however late a
		// loaded machine brings the answer (a sequence of the suite's once
		// read one 180 ms late as "timed out"). Only a change made while
		// the wait runs (a session invalidated by its timer) is told by
		// the answer's time. (etcd's revision is the whole store's, which
		// other sequences move on: there the time alone tells.)
		before := false
		if r.indexed && r.kind == consulsim.Consul {
			l, err := r.b.List(ctx, r.prefix, false)
			if err != nil {
				return r.fail(err)
			}
			before = l.Index > index
		}
		start := r.b.Now()
		if err := r.b.WaitChange(ctx, r.prefix, index, r.pr.wait); err != nil {
			return r.fail(err)
		}
		if before || r.b.Now().Sub(start) < r.pr.wait-r.pr.wait/10 {
			return "changed"
		}
		return "timed out"
	}
	panic("consulsim: step " + s.kind)
}

// write writes the lock key with tok its only holder.
func (r runner) write(ctx context.Context, s step, tok string, lists []consulsem.Listing) string {
	lk := r.prefix + "/.lock"
	w := consulsem.LockWrite{Key: lk, Value: fmt.Appendf(nil, `{"Limit":1,"Holders":{%q:true}}`, tok), CAS: s.cas != "none"}
	back := map[string]int{"last": 1, "prev": 2}[s.cas]
	if back > 0 && len(lists) >= back {
		w.Index = lists[len(lists)-back].Entries[lk].ModIndex
	}
	if s.live {
		w.Live, w.Session = r.prefix+"/"+tok, tok
	}
	n, err := r.b.WriteLock(ctx, w)
	switch {
	case err == nil:
		return fmt.Sprintf("granted at ⟦%d⟧", n)
	case errors.Is(err, consulsem.ErrCASLost):
		return "CAS lost"
	case errors.Is(err, consulsem.ErrNotLive):
		return "not live"
	}
	return r.fail(err)
}

func (r runner) errWord(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, consulsem.ErrSessionGone):
		return "gone"
	}
	return r.fail(err)
}

// showListing shows a listing's keys (canonical sorts them), without
// its own index.
func showListing(l consulsem.Listing, prefix string) string {
	var parts []string
	for _, e := range l.Entries {
		parts = append(parts, fmt.Sprintf("%s owner %q at ⟦%d⟧ lock %d: %s",
			strings.TrimPrefix(e.Key, prefix+"/"), e.Owner, e.ModIndex, e.LockIndex, e.Value))
	}
	slices.Sort(parts)
	return "[" + strings.Join(parts, "; ") + "]"
}

var indexRE = regexp.MustCompile(`⟦(\d+)⟧`)

// canonical is r's answers with the tokens named s1, s2, ... (in the
// order created; a token of no session: bogus) and the indexes replaced
// by their rank among those the run saw (#1 the lowest).
func (r run) canonical(k consulsim.Kind) []string {
	var seen []uint64
	for _, a := range r.answers {
		for _, m := range indexRE.FindAllStringSubmatch(a, -1) {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			seen = append(seen, n)
		}
	}
	slices.Sort(seen)
	seen = slices.Compact(seen)
	var pairs []string
	for i, t := range r.toks {
		pairs = append(pairs, t, fmt.Sprintf("s%d", i+1))
	}
	pairs = append(pairs, bogus(k), "bogus")
	rep := strings.NewReplacer(pairs...)
	out := make([]string, len(r.answers))
	for i, a := range r.answers {
		a = indexRE.ReplaceAllStringFunc(a, func(m string) string {
			n, _ := strconv.ParseUint(m[len("⟦"):len(m)-len("⟧")], 10, 64)
			i, _ := slices.BinarySearch(seen, n)
			return fmt.Sprintf("#%d", i+1)
		})
		out[i] = sortListing(rep.Replace(a))
	}
	return out
}

// sortListing sorts a listing's keys by their canonical names (the
// tokens' order is the server's: Consul's are random).
func sortListing(a string) string {
	inner, ok := strings.CutPrefix(a, "[")
	if inner, ok2 := strings.CutSuffix(inner, "]"); ok && ok2 && inner != "" {
		parts := strings.Split(inner, "; ")
		slices.Sort(parts)
		return "[" + strings.Join(parts, "; ") + "]"
	}
	return a
}

// onSimulator runs steps on a simulated server of kind k (floor min), the
// j-th sleep lasting slept[j] (the profile's nap beyond slept).
func onSimulator(k consulsim.Kind, min time.Duration, steps []step, slept []time.Duration) (run, error) {
	o := consulsim.Options{Kind: k, SessionTTLMin: min, MinTTL: min}
	if k == consulsim.Consul {
		o.MinTTL = 0
	} else {
		o.SessionTTLMin = 0
	}
	w, err := consulsim.New(o)
	if err != nil {
		return run{}, err
	}
	pr := profileOf(k, min)
	var out run
	var runErr error
	w.Go("d", func(p *consulsim.Process) {
		r := runner{b: p.Backend(), kind: k, pr: pr, prefix: "seq", indexed: true, nap: func(j int) (time.Duration, error) {
			d := pr.nap
			if j < len(slept) {
				d = slept[j]
			}
			p.Sleep(d)
			return d, nil
		}}
		out, runErr = r.run(context.Background(), steps)
	})
	if err := w.Run(); err != nil {
		return out, err
	}
	return out, runErr
}
