package mariadbsim

import (
	"cmp"
	"slices"
	"time"
)

// Row locks, as InnoDB takes them on clustered-index records: shared (S)
// and exclusive (X), held until the transaction ends (READ COMMITTED also
// lets a statement drop the locks of rows it looked at but did not keep).
//
// InnoDB keeps a record's locks in one list, in the order their structs
// were made (a struct is a transaction's locks of one kind on a page; see
// trx.weight): a new request joins the end, a lock granted after a wait
// keeps its place, and a lock granted at once goes into its transaction's
// first struct of its kind, and so takes that struct's place, older than
// the request perhaps. Here each lock carries its struct's place (seq). A
// request waits if a lock of another transaction anywhere in the list
// conflicts with it (lock_rec_other_has_conflicting); a waiting one is
// granted once no lock ahead of it does (lock_rec_has_to_wait_in_queue).
//
// Deadlocks, as MariaDB 10.6 and later find them (lock0lock.cc's
// namespace Deadlock): a waiting transaction waits for one transaction
// only, the owner of the first lock in its way (trx->lock.wait_trx, here
// waiter.blocker), set when it asks and each time its request is looked
// at again, and the check follows that one chain (see findCycle). So a
// wait that closes a cycle through a lock further down the list is not
// seen then; it is when a release makes the waiter's first lock in the
// way one of a waiting transaction, which the release hands to a check
// (see recheckPage and deadlockCheck).
//
// Gap locks, on the gap before a record (or after the last, the
// supremum), come only from a record that goes (an insert rolled back):
// the locks on it of REPEATABLE READ transactions, and the S locks of
// READ COMMITTED ones (a duplicate's check), and the gap locks before it,
// become gap locks before the next record (lock_rec_inherit_to_gap); a
// new record takes a copy of the gap locks before the next one. They
// conflict only with an insert's intention to insert into their gap,
// which waits for them. Next-key locks, which statements of REPEATABLE
// READ take, are not modelled.

type lockMode uint8

const (
	lockS  lockMode = 1
	lockX  lockMode = 2
	lockII lockMode = 3 // an insert's intention, in a gap's queue only
)

// conflicts says whether a lock in mode a and one in mode b, of two
// transactions, conflict in q: on a record unless both are S, on a gap an
// insert intention and a gap lock.
func (q *lockQueue) conflicts(a, b lockMode) bool {
	if q.id.gap {
		return (a == lockII) != (b == lockII)
	}
	return a == lockX || b == lockX
}

type lockID struct {
	tb  *table
	k   pkey
	gap bool // the gap before record k
}

// A lockQueue is the locks on one record, or on the gap before it (InnoDB
// keeps both in the record's list; they never conflict with each other):
// granted ones and waiting ones, which together, in seq order, are
// InnoDB's list.
type lockQueue struct {
	id      lockID
	granted []grant
	waiting []*waiter // in seq order
}

// A grant is a lock held: one per transaction and mode (a transaction
// that holds S and takes X has both, in two structs, as in InnoDB).
type grant struct {
	t        *trx
	mode     lockMode
	kind     simLock // the kind of struct it is in
	seq      uint64  // that struct's place; 0 while implicit
	implicit bool    // a new row's lock, without a struct yet (see trx.weight)
}

// A waiter is a statement waiting for a lock.
type waiter struct {
	q       *lockQueue
	t       *trx
	mode    lockMode
	r       *stmtRun
	seq     uint64 // its struct's place
	blocker *trx   // whom it waits for (InnoDB's trx->lock.wait_trx)
	granted bool
	timer   *timer
}

// held is the strongest mode t holds on q (0: none).
func (q *lockQueue) held(t *trx) lockMode {
	var m lockMode
	for _, g := range q.granted {
		if g.t == t && g.mode > m {
			m = g.mode
		}
	}
	return m
}

// conflict returns the transaction of the first lock in q's list, ahead of
// place before, that is another transaction's and that a request of t for
// mode would wait for: for a new request (before ^0) InnoDB's
// lock_rec_other_has_conflicting, for a waiting one (before its place)
// lock_rec_has_to_wait_in_queue; nil if there is none.
func (q *lockQueue) conflict(t *trx, mode lockMode, before uint64) *trx {
	var first *trx
	var at uint64
	for _, g := range q.granted {
		if g.t != t && g.seq < before && q.conflicts(g.mode, mode) && (first == nil || g.seq < at) {
			first, at = g.t, g.seq
		}
	}
	for _, o := range q.waiting {
		if o.seq >= before {
			break
		}
		if o.t != t && q.conflicts(o.mode, mode) && (first == nil || o.seq < at) {
			first, at = o.t, o.seq
		}
	}
	return first
}

const anywhere = ^uint64(0) // conflict's before for a new request

// conflictNew is conflict for a new request of t for mode on a record
// (lock_rec_other_has_conflicting). With the lock bypass (MariaDB 11.8,
// MDEV-34877, which ports MySQL's Bug #11745929: "the transaction
// holding an S lock gets the X lock first"), a transaction that holds S
// or X on the record passes over the waiting X requests of transactions
// that wait for it: they would wait for it anyway, and waiting behind
// them would close a cycle (10.11 reports a deadlock there; SKIP LOCKED
// passes over the row). Its lock is then granted as any lock granted at
// once is (the model keeps no other place for it in the list: nothing a
// differential run has shown depends on it).
func (w *World) conflictNew(q *lockQueue, t *trx, mode lockMode) *trx {
	if !w.bypass || q.id.gap || q.held(t) < lockS {
		return q.conflict(t, mode, anywhere)
	}
	var first *trx
	var at uint64
	for _, g := range q.granted {
		if g.t != t && q.conflicts(g.mode, mode) && (first == nil || g.seq < at) {
			first, at = g.t, g.seq
		}
	}
	for _, o := range q.waiting {
		bypassed := o.mode == lockX && o.blocker == t
		if o.t != t && !bypassed && q.conflicts(o.mode, mode) && (first == nil || o.seq < at) {
			first, at = o.t, o.seq
		}
	}
	return first
}

// newStruct gives t a new record lock struct on tb, at the end of the
// lists, and returns its place.
func (w *World) newStruct(t *trx, tb *table) uint64 {
	w.lockSeq++
	t.structs = append(t.structs, lockStruct{seq: w.lockSeq, tb: tb})
	return w.lockSeq
}

// structFor is the place of the struct a lock of t of kind, granted
// without a wait, goes into (lock_rec_add_to_queue): t's first struct of
// that kind, unless a request waits on the record (or on the gap before
// it), when, as when t has none, a new one at the end of the list.
func (w *World) structFor(t *trx, id lockID, kind simLock) uint64 {
	if !w.waitedOn(id.tb, id.k) {
		if seq, ok := t.similarSeq(kind); ok {
			return seq
		}
	}
	seq := w.newStruct(t, id.tb)
	t.took(kind, seq)
	return seq
}

// waitedOn says whether a request waits on record k of tb or on the gap
// before it.
func (w *World) waitedOn(tb *table, k pkey) bool {
	for _, gap := range []bool{false, true} {
		if q := w.locks[lockID{tb: tb, k: k, gap: gap}]; q != nil && len(q.waiting) > 0 {
			return true
		}
	}
	return false
}

// grantNow gives t mode on q without a wait, unless it holds it already.
func (w *World) grantNow(q *lockQueue, t *trx, mode lockMode, kind simLock) {
	for _, g := range q.granted {
		if g.t == t && g.mode == mode {
			return
		}
	}
	q.granted = append(q.granted, grant{t: t, mode: mode, kind: kind, seq: w.structFor(t, q.id, kind)})
	t.hold(q)
}

// explicit gives the implicit lock of another transaction's new row a
// struct, as InnoDB does before any request for a lock on the row
// (lock_rec_convert_impl_to_expl).
func (w *World) explicit(q *lockQueue, t *trx) {
	for i, g := range q.granted {
		if g.implicit && g.t != t {
			q.granted[i].implicit = false
			q.granted[i].seq = w.structFor(g.t, q.id, g.kind)
		}
	}
}

// rebuilt is an update of record k that changes the size of a field (a
// NULL becomes a value or a value NULL, a token another length), which
// InnoDB makes by deleting the record and inserting it again: the locks
// on it, and on the gap before it, move to the page's infimum and back
// (lock_rec_store_on_page_infimum, lock_rec_restore_from_page_infimum).
// So each transaction waiting on the record, or on the gap before it,
// weighs two structs more (checked against MariaDB 10.11's SHOW ENGINE
// INNODB STATUS). An update that keeps every size is made in place and
// moves nothing.
func (w *World) rebuilt(tb *table, k pkey) {
	w.move(tb, k)
	w.move(tb, k)
}

// move is one move of record k's locks (lock_rec_move), in list order: a
// waiting lock gets a new struct at the end of the list, and so its
// place; a granted one goes into its transaction's first struct of its
// kind, or, behind a waiting lock moved already, into a new struct.
// Implicit locks have no struct and do not move.
func (w *World) move(tb *table, k pkey) {
	type entry struct {
		g  *grant
		wt *waiter
	}
	var list []entry
	seqOf := func(e entry) uint64 {
		if e.wt != nil {
			return e.wt.seq
		}
		return e.g.seq
	}
	for _, gap := range []bool{false, true} {
		if q := w.locks[lockID{tb: tb, k: k, gap: gap}]; q != nil {
			for i := range q.granted {
				if !q.granted[i].implicit {
					list = append(list, entry{g: &q.granted[i]})
				}
			}
			for _, wt := range q.waiting {
				list = append(list, entry{wt: wt})
			}
		}
	}
	slices.SortStableFunc(list, func(a, b entry) int { return cmp.Compare(seqOf(a), seqOf(b)) })
	waited := false
	for _, e := range list {
		switch {
		case e.wt != nil:
			waited = true
			e.wt.seq = w.newStruct(e.wt.t, tb)
			w.waiters = append(deleteWaiter(w.waiters, e.wt), e.wt)
		case waited:
			e.g.seq = w.newStruct(e.g.t, tb)
		default:
			if seq, ok := e.g.t.similarSeq(e.g.kind); ok {
				e.g.seq = seq
			}
		}
	}
}

// queue returns the lock queue of a record, creating it.
func (w *World) queue(tb *table, k pkey) *lockQueue {
	return w.queueOf(lockID{tb: tb, k: k})
}

// queueOf returns the lock queue id, creating it.
func (w *World) queueOf(id lockID) *lockQueue {
	q := w.locks[id]
	if q == nil {
		q = &lockQueue{id: id}
		w.locks[id] = q
	}
	return q
}

// wouldWait says whether t would have to wait for mode on the record.
func (w *World) wouldWait(t *trx, tb *table, k pkey, mode lockMode) bool {
	q := w.locks[lockID{tb: tb, k: k}]
	if q == nil || q.held(t) >= mode {
		return false
	}
	w.explicit(q, t)
	return w.conflictNew(q, t, mode) != nil
}

// lock takes mode on the record for r's transaction. It returns false when
// the statement must wait (it is queued, and runs again once granted or
// ends with error 1205 when the wait times out), or an error 1213 when
// its wait closes a cycle and its transaction is the victim.
func (r *stmtRun) lock(tb *table, k pkey, mode lockMode) (bool, error) {
	w, t := r.w, r.t
	q := w.queue(tb, k)
	had := q.held(t)
	if had >= mode {
		return true, nil
	}
	w.explicit(q, t)
	b := w.conflictNew(q, t, mode)
	if b == nil {
		w.grantNow(q, t, mode, simLock{tb, mode, false, false})
		r.fresh = append(r.fresh, freshLock{q: q, had: had})
		return true, nil
	}
	// A lock granted after a wait is kept to the end of the transaction,
	// even under READ COMMITTED on a row the statement then does not keep:
	// InnoDB, running the statement on, finds the lock already held and
	// takes it for one the transaction held before (MariaDB 10.11).
	r.fresh = append(r.fresh, freshLock{q: q, had: had, kept: true})
	return r.enqueue(q, mode, b)
}

// insertIntention is a fresh insert's check of the gap it inserts into,
// the one before the next record: it waits while another transaction
// holds a gap lock there (a request that does not wait leaves no lock).
func (r *stmtRun) insertIntention(tb *table, k pkey) (bool, error) {
	q := r.w.locks[lockID{tb: tb, k: tb.next(k), gap: true}]
	if q == nil {
		return true, nil
	}
	for _, g := range q.granted {
		if g.t == r.t && g.mode == lockII {
			return true, nil // granted after a wait
		}
	}
	b := q.conflict(r.t, lockII, anywhere)
	if b == nil {
		return true, nil
	}
	return r.enqueue(q, lockII, b)
}

// enqueue makes r's transaction wait for mode on q, behind blocker's lock,
// and checks for a deadlock as InnoDB's lock_wait does
// (Deadlock::check_and_resolve): a cycle its chain of waits reaches is
// broken by rolling a victim back, and if that is r's transaction, r ends
// with error 1213.
func (r *stmtRun) enqueue(q *lockQueue, mode lockMode, blocker *trx) (bool, error) {
	w, t := r.w, r.t
	wt := &waiter{q: q, t: t, mode: mode, r: r, seq: w.newStruct(t, q.id.tb), blocker: blocker}
	q.waiting = append(q.waiting, wt)
	w.waiters = append(w.waiters, wt)
	t.wait = wt
	r.wait = wt
	if w.trace != nil {
		w.tracef("%s %s waits for %s on %s%s held by %s (behind %s)", r.s.name, r.v.tpl.name, modeName(mode), q.id.tb.name, lockText(q.id), w.holders(q, t), blocker.s.name)
	}
	victim := w.report(t)
	if victim == r {
		return false, errDeadlock()
	}
	if !wt.granted && t.wait == wt {
		wt.timer = w.after(w.lockWait, func() { w.lockTimeout(wt) })
	}
	if victim != nil {
		w.deadlockVictim(victim)
	}
	return false, nil
}

// lockNew is an insert's lock of a row that is not there: implicit
// unless it has to wait (for a lock left on its key).
func (r *stmtRun) lockNew(tb *table, k pkey) (bool, error) {
	w, t := r.w, r.t
	q := w.queue(tb, k)
	if q.held(t) > 0 || w.conflictNew(q, t, lockX) != nil {
		return r.lock(tb, k, lockX)
	}
	q.granted = append(q.granted, grant{t: t, mode: lockX, kind: simLock{tb, lockX, false, false}, implicit: true})
	t.hold(q)
	r.fresh = append(r.fresh, freshLock{q: q})
	return true, nil
}

// tryLock is SKIP LOCKED's lock: take mode if no one is in the way,
// never wait.
func (r *stmtRun) tryLock(tb *table, k pkey, mode lockMode) bool {
	if r.w.wouldWait(r.t, tb, k, mode) {
		return false
	}
	ok, _ := r.lock(tb, k, mode)
	return ok
}

// downgrade takes t's locks on q back to mode (0: releases them), as a
// READ COMMITTED statement gives up a row it did not keep
// (lock_rec_unlock): the requests waiting on the record are looked at
// again (lock_rec_rebuild_waiting_queue, which hands no blocker to a
// deadlock check).
func (w *World) downgrade(t *trx, q *lockQueue, mode lockMode) {
	q.granted = slices.DeleteFunc(q.granted, func(g grant) bool { return g.t == t && g.mode > mode })
	if q.held(t) == 0 {
		t.unhold(q)
	}
	for i := 0; i < len(q.waiting); {
		if !w.recheck(q.waiting[i], false) {
			i++
		}
	}
	w.tidy(q)
}

// releaseAll drops every lock of t, at its COMMIT or ROLLBACK, as InnoDB's
// lock_release does: struct by struct, the last made first, each time
// looking again at the requests waiting on the struct's page (even a
// struct whose locks are all given up: see recheckPage); then the
// deadlock check, from the transactions the release left waiting for one
// that waits.
func (w *World) releaseAll(t *trx) {
	locks := t.locks
	t.locks = nil
	for i := len(t.structs) - 1; i >= 0; i-- {
		st := t.structs[i]
		for _, q := range locks {
			if q.id.tb == st.tb {
				q.granted = slices.DeleteFunc(q.granted, func(g grant) bool { return g.t == t && g.seq == st.seq && !g.implicit })
			}
		}
		w.recheckPage(st.tb)
	}
	for _, q := range locks {
		q.granted = slices.DeleteFunc(q.granted, func(g grant) bool { return g.t == t }) // implicit ones
		w.tidy(q)
	}
	w.deadlockCheck()
}

// recheckPage looks again, in list order, at the requests waiting on tb's
// records, as InnoDB does on the page of a struct it removes
// (lock_rec_dequeue_from_page): each is granted if no lock ahead of it is
// in its way, or else waits for the first that is; and a transaction it
// then waits for that waits itself is handed to the next deadlock check.
func (w *World) recheckPage(tb *table) {
	for i := 0; i < len(w.waiters); {
		if wt := w.waiters[i]; wt.q.id.tb != tb || !w.recheck(wt, true) {
			i++
		}
	}
}

// recheck grants wt if no lock ahead of it is in its way, and says so;
// else wt now waits for the owner of the first lock that is, and with
// check that owner, if it waits itself, is handed to the deadlock check.
func (w *World) recheck(wt *waiter, check bool) bool {
	b := wt.q.conflict(wt.t, wt.mode, wt.seq)
	if b == nil {
		w.grant(wt)
		return true
	}
	wt.blocker = b
	if check && b.wait != nil {
		w.watch(b)
	}
	return false
}

// grant gives wt its lock, in its struct, where it stands in the list
// (lock_grant); its statement runs again once the current event is done.
func (w *World) grant(wt *waiter) {
	q, t := wt.q, wt.t
	q.waiting = deleteWaiter(q.waiting, wt)
	w.waiters = deleteWaiter(w.waiters, wt)
	kind := simLock{q.id.tb, wt.mode, q.id.gap, false}
	q.granted = append(q.granted, grant{t: t, mode: wt.mode, kind: kind, seq: wt.seq})
	t.hold(q)
	t.took(kind, wt.seq)
	wt.granted = true
	wt.timer.cancel()
	w.unwatch(wt.blocker) // lock_reset_lock_and_trx_wait
	t.wait = nil
	wt.r.wait = nil
	w.wake = append(w.wake, wt.r)
}

// tidy forgets q once it holds no lock, and purges its record if that
// was a ghost only its locks kept.
func (w *World) tidy(q *lockQueue) {
	if len(q.granted) == 0 && len(q.waiting) == 0 && w.locks[q.id] == q {
		delete(w.locks, q.id)
		if r := q.id.tb.find(q.id.k); r != nil && !q.id.gap {
			w.purge(r)
		}
	}
}

// deleteWaiter removes wt from ws, keeping the order.
func deleteWaiter(ws []*waiter, wt *waiter) []*waiter {
	if i := slices.Index(ws, wt); i >= 0 {
		return slices.Delete(ws, i, i+1)
	}
	return ws
}

// inheritable says whether a lock on a record that goes becomes a gap
// lock before the next: not an insert intention, nor a READ COMMITTED
// transaction's X lock.
func inheritable(t *trx, mode lockMode) bool {
	return mode != lockII && (t.iso != readCommitted || mode == lockS)
}

// inherit gives the gap before record n of tb the gap locks that the
// locks of q become (q: of record k that goes, or of the gap before it),
// in q's list order.
func (w *World) inherit(q *lockQueue, tb *table, n pkey) {
	if q == nil {
		return
	}
	heir := lockID{tb: tb, k: n, gap: true}
	for _, l := range q.list() {
		if q.id.gap && l.mode != lockII || !q.id.gap && inheritable(l.t, l.mode) {
			w.grantNow(w.queueOf(heir), l.t, l.mode, simLock{tb, l.mode, true, false})
		}
	}
}

// A listed is a lock of a queue's list: its transaction and mode.
type listed struct {
	t    *trx
	mode lockMode
	seq  uint64
}

// list is q's locks, granted and waiting, in list order.
func (q *lockQueue) list() []listed {
	out := make([]listed, 0, len(q.granted)+len(q.waiting))
	for _, g := range q.granted {
		out = append(out, listed{g.t, g.mode, g.seq})
	}
	for _, wt := range q.waiting {
		out = append(out, listed{wt.t, wt.mode, wt.seq})
	}
	slices.SortStableFunc(out, func(a, b listed) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// inserted gives a new record k of tb a copy of the gap locks before the
// next record (lock_update_insert).
func (w *World) inserted(tb *table, k pkey) {
	q := w.locks[lockID{tb: tb, k: tb.next(k), gap: true}]
	if q == nil {
		return
	}
	for _, l := range q.list() {
		if l.mode != lockII {
			w.grantNow(w.queueOf(lockID{tb: tb, k: k, gap: true}), l.t, l.mode, simLock{tb, l.mode, true, true})
		}
	}
}

// vanish ends the locks on a record InnoDB removed (an insert rolled
// back): granted ones go (a READ COMMITTED transaction's S lock would
// live on as a gap lock on the next record, which is not modelled), and
// a statement waiting for one runs on without it, its request's struct
// kept (lock_rec_reset_and_release_wait).
func (w *World) vanish(tb *table, k pkey) {
	n := tb.next(k)
	for _, gap := range []bool{false, true} {
		q := w.locks[lockID{tb: tb, k: k, gap: gap}]
		w.inherit(q, tb, n)
		w.drop(q)
	}
}

// drop ends the locks of q, whose record is gone: granted ones go, and a
// statement waiting for one runs on without it (lock_rec_cancel).
func (w *World) drop(q *lockQueue) {
	if q == nil {
		return
	}
	delete(w.locks, q.id)
	for _, g := range q.granted {
		g.t.unhold(q)
	}
	waiting := q.waiting
	q.granted, q.waiting = nil, nil
	for _, wt := range waiting {
		w.waiters = deleteWaiter(w.waiters, wt)
		wt.granted = true
		wt.timer.cancel()
		w.unwatch(wt.blocker)
		wt.t.wait = nil
		wt.t.took(simLock{q.id.tb, wt.mode, q.id.gap, false}, wt.seq)
		wt.r.wait = nil
		w.wake = append(w.wake, wt.r)
	}
}

// abandon takes a waiting request out of its queue, as InnoDB cancels one
// (lock_cancel_waiting_and_release: a timeout, a kill, a deadlock's
// victim): its struct goes (InnoDB takes it back), the requests waiting on
// its page are looked at again (see recheckPage; the transaction counts as
// waiting meanwhile), and then the transaction it waited for is no longer
// to be checked for a deadlock (lock_reset_lock_and_trx_wait). Its
// statement ends, with the caller's error.
func (w *World) abandon(wt *waiter) {
	q, t := wt.q, wt.t
	q.waiting = deleteWaiter(q.waiting, wt)
	w.waiters = deleteWaiter(w.waiters, wt)
	wt.timer.cancel()
	t.dropStruct(wt.seq)
	w.recheckPage(q.id.tb)
	w.unwatch(wt.blocker)
	t.wait = nil
	wt.r.wait = nil
	w.tidy(q)
}

// lockTimeout ends a wait that lasted innodb_lock_wait_timeout: error
// 1205, and only the statement is rolled back (innodb_rollback_on_timeout
// is off by default). As lock_wait does, the cancelled wait is followed
// by a deadlock check.
func (w *World) lockTimeout(wt *waiter) {
	if wt.granted || wt.t.wait != wt {
		return
	}
	w.abandon(wt)
	w.deadlockCheck()
	r := wt.r
	r.err = errLockWait()
	w.finish(r)
}

// deadlockVictim ends r, the statement a deadlock's victim was waiting in
// (its wait cancelled already), with error 1213: the whole transaction
// rolls back.
func (w *World) deadlockVictim(r *stmtRun) {
	r.err = errDeadlock()
	w.finish(r)
}

// findCycle follows the chain of waits from t, one blocker a transaction
// (trx.waitsFor), as InnoDB's Deadlock::find_cycle does, with Brent's
// algorithm; it returns the transaction where it found the chain loops
// (one of the cycle's, not necessarily t: the chain may reach a cycle t is
// not in), or nil.
func findCycle(t *trx) *trx {
	tortoise, hare := t, t
	for power, l := 1, 1; ; l++ {
		if hare = hare.waitsFor(); hare == nil {
			return nil
		}
		if tortoise == hare {
			return hare
		}
		if l == power {
			power <<= 1
			l = 0
			tortoise = hare
		}
	}
}

// victimWeight is how Deadlock::report compares its candidates
// (calc_victim_weight): the lower the likelier the victim; the weight
// (trx.weight) first, then, on a tie, the transaction whose check found
// the cycle.
func victimWeight(t, checker *trx) uint64 {
	v := uint64(t.weight()) << 1
	if t != checker {
		v |= 1
	}
	return v
}

// report resolves the cycle, if any, that t's chain of waits reaches, as
// InnoDB's Deadlock::report does: of the cycle's transactions, starting
// from the one findCycle returned and following the chain, the first of
// the lowest victimWeight is the victim. Its wait is cancelled (abandon),
// and its statement returned, to be ended with error 1213 (nil: no
// cycle).
func (w *World) report(t *trx) *stmtRun {
	cycle := findCycle(t)
	if cycle == nil {
		return nil
	}
	victim, weight := cycle, victimWeight(cycle, t)
	names := ""
	for next := cycle.waitsFor(); ; next = next.waitsFor() {
		names += " " + next.s.name
		if v := victimWeight(next, t); v < weight {
			victim, weight = next, v
		}
		if next == cycle {
			break
		}
	}
	if w.trace != nil {
		w.tracef("deadlock, found from %s:%s; %s rolls back", t.s.name, names, victim.s.name)
	}
	wt := victim.wait
	w.abandon(wt)
	return wt.r
}

// watch hands t, which waits, to the next deadlock check (Deadlock::
// to_check, a set); unwatch takes it back.
func (w *World) watch(t *trx) {
	c := toCheck{t: t, slot: t.s.slot}
	if i, found := slices.BinarySearchFunc(w.toCheck, c, toCheck.cmp); !found {
		w.toCheck = slices.Insert(w.toCheck, i, c)
	}
}

func (w *World) unwatch(t *trx) {
	if t == nil {
		return
	}
	if i := slices.IndexFunc(w.toCheck, func(c toCheck) bool { return c.t == t }); i >= 0 {
		w.toCheck = slices.Delete(w.toCheck, i, i+1)
	}
}

// A toCheck is a transaction handed to the deadlock check, with its
// session's slot when it was (see World.attach): Deadlock::to_check is
// ordered by the address of the transactions' trx_t.
type toCheck struct {
	t    *trx
	slot int
}

func (c toCheck) cmp(o toCheck) int {
	if d := cmp.Compare(c.slot, o.slot); d != 0 {
		return d
	}
	return cmp.Compare(c.t.id, o.t.id)
}

// deadlockCheck is InnoDB's lock_sys_t::deadlock_check, which a release
// and a cancelled wait run: each transaction handed to it, in trx_t
// address order, is checked for a cycle its chain of waits reaches, and
// each cycle found is resolved (see report). The victims roll back once
// the check is over (in InnoDB, their threads wait for the lock system's
// latch, which the check holds). A server shutting down resolves nothing.
func (w *World) deadlockCheck() {
	if w.down {
		w.toCheck = w.toCheck[:0]
		return
	}
	var victims []*stmtRun
	for len(w.toCheck) > 0 {
		t := w.toCheck[0].t
		w.toCheck = slices.Delete(w.toCheck, 0, 1)
		if r := w.report(t); r != nil {
			victims = append(victims, r)
		}
	}
	for _, r := range victims {
		w.deadlockVictim(r)
	}
}

// holders names, for the trace, the connections in t's way on q.
func (w *World) holders(q *lockQueue, t *trx) string {
	s := ""
	var seen []*trx
	for _, g := range q.granted {
		if g.t != t && !slices.Contains(seen, g.t) {
			seen = append(seen, g.t)
			if s != "" {
				s += ","
			}
			s += g.t.s.name
		}
	}
	if s == "" {
		s = "waiters ahead"
	}
	return s
}

func modeName(m lockMode) string {
	switch m {
	case lockX:
		return "X"
	case lockII:
		return "insert intention"
	}
	return "S"
}

// lockText is a queue's record or gap, for the trace.
func lockText(id lockID) string {
	if id.gap {
		return " the gap before " + keyText(id.tb, id.k)
	}
	return keyText(id.tb, id.k)
}

// defaultLockWait is innodb_lock_wait_timeout's default.
const defaultLockWait = 50 * time.Second
