// Package leasecli holds what the lease families (db-semaphore,
// consul-semaphore, redlock, priority-redlock) declare alike in their
// descriptors: check's --drift and --lease-ttl (the lease lens), the
// judging options they give, and prove's --ttl and --faults as they read
// them.
package leasecli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
)

// Flags are the flags check takes for lease locks: the lease
// families (db-semaphore, consul-semaphore, redlock, priority-redlock)
// each declare them, from here, with leaseCheck and leaseJudging beside.
var Flags = []family.Flag{
	{Name: "drift", Arg: family.Float, Verbs: family.Check, Default: strconv.FormatFloat(model.DefaultDrift, 'g', -1, 64), Usage: "lease locks: how far clocks may run fast or slow, as a fraction of the time measured (0.01 is 1%); > 0 and < 1"},
	{Name: "lease-ttl", Arg: family.Duration, Verbs: family.Check, Usage: "Jepsen histories: judge the lock as a lease lock whose holds last this long unless released (with --drift), not as Knossos's mutex\n; a lens for locks known to be lease-based, never the default"},
}

// Check is what check does with Flags: it refuses a bad
// --drift or --lease-ttl, and --lease-ttl switches on the lease lens.
var Check = &family.CheckFlags{Check: leaseCheckValues, Lens: leaseLens}

// Judging is what check judges lease locks (of any lease family)
// with: the drift bound --drift gives, and any clock (a history does not
// say which clocks timed its leases).
func Judging(flag func(string) string) any {
	drift, _ := strconv.ParseFloat(flag("drift"), 64) // check has refused one that is not > 0 and < 1
	return lease.Options{Drift: drift}
}

// leaseCheckValues says what is wrong with --drift and --lease-ttl.
func leaseCheckValues(flag func(string) string) []string {
	var bad []string
	if drift, err := strconv.ParseFloat(flag("drift"), 64); err != nil || !(drift > 0 && drift < 1) {
		bad = append(bad, fmt.Sprintf("--drift must be > 0 and < 1 (a fraction: 0.01 is 1%%), not %s", shown(flag("drift"), err, drift)))
	}
	if ttl, err := leaseTTL(flag); err != nil || ttl < 0 || ttl%time.Millisecond != 0 {
		bad = append(bad, fmt.Sprintf("--lease-ttl must be a whole number of milliseconds >= 0, not %s", shown(flag("lease-ttl"), err, ttl)))
	}
	return bad
}

// shown is a flag's value as a message says it: as parsed (v), or as
// given when it did not parse.
func shown(given string, err error, v any) string {
	if err != nil {
		return strconv.Quote(given)
	}
	return fmt.Sprintf("%v", v)
}

// leaseTTL is --lease-ttl's value: 0, the lens off, when not given.
func leaseTTL(flag func(string) string) (time.Duration, error) {
	if flag("lease-ttl") == "" {
		return 0, nil
	}
	return time.ParseDuration(flag("lease-ttl"))
}

// leaseLens is the lease lens, when --lease-ttl gives a ttl: each Jepsen
// history is judged as a lease lock's whose holds last that long unless
// released (lease.AsLease), with --drift.
func leaseLens(flag func(string) string) *family.Lens {
	ttl, _ := leaseTTL(flag) // leaseCheckValues took it
	if ttl <= 0 {
		return nil
	}
	drift, _ := strconv.ParseFloat(flag("drift"), 64)
	view := func(path string, h []histories.Event, imp *histories.Imported) ([]histories.Event, error) {
		if imp == nil {
			return nil, fmt.Errorf("%s: --lease-ttl judges Jepsen histories; this is lockprover's own JSON lines, whose lease locks say so (kind lease)", path)
		}
		imp.Notes = append(imp.Notes, fmt.Sprintf("judged through the lease lens (--lease-ttl %v): each acquire took a lease of ttl %v, max 1, that ends when released or when it can have run out, with drift %g; the lease checks, not Knossos's mutex model, judge it", ttl, ttl, drift))
		return lease.AsLease(h, int(ttl/time.Millisecond)), nil
	}
	return &family.Lens{Name: "the lease lens", View: view, Excuse: lensExcuses}
}

// lensExcuses lists, on lease-exclusive in r (a history judged through the
// lease lens), each double hold that Knossos's mutex model finds (knossos,
// the same history judged as imported) and the lens let through: it
// holds only if the lock's leases are what --lease-ttl says.
func lensExcuses(r, knossos *verdict.Report) {
	for _, k := range knossos.Verdicts {
		if k.Property != model.SlotExclusive || k.Status != verdict.Fail {
			continue
		}
		for i := range r.Verdicts {
			if v := &r.Verdicts[i]; v.Lock == k.Lock && v.Property == model.LeaseExclusive && v.Status == verdict.Pass {
				found, _, _ := strings.Cut(k.Detail, "; no release")
				v.Excuses = append(v.Excuses, verdict.Excuse{Ops: k.Ops, Why: "Knossos's mutex model finds that " + found + ", and no release freed it in between; the lease lens lets it through, since the first hold's lease can have run out by then (--lease-ttl)"})
			}
		}
	}
}

// TTL is prove's --ttl, which the lease families take alike.
var TTL = family.Flag{Name: "ttl", Arg: family.Duration, Verbs: family.Prove, Usage: "db-semaphore, redlock, consul-semaphore, pg-advisory: every plan's lease ttl, whole milliseconds, instead of one drawn\n (at least 1ms, 10ms for redlock, 1s to 1m in whole seconds on etcd for consul-semaphore, 10ms to 1m for pg-advisory; drawn from 100ms, 300ms and 1s, for consul-semaphore 1s and 2s, for pg-advisory 200ms and 500ms): for an implementation that grants leases in whole seconds, say"}
