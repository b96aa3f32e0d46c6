package sqlsim

import (
	"slices"
	"time"
)

// Row locks, as InnoDB takes them on clustered-index records: shared (S)
// and exclusive (X), granted in queue order, held until the transaction
// ends (READ COMMITTED also lets a statement drop the locks of rows it
// looked at but did not keep). A request waits if a lock another
// transaction holds, or one it is waiting for ahead in the queue,
// conflicts with it.
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

// A lockQueue is the locks on one record, or on the gap before it:
// granted ones, then waiting ones in the order they asked.
type lockQueue struct {
	id      lockID
	granted []grant
	waiting []*waiter
}

type grant struct {
	t        *trx
	mode     lockMode
	implicit bool // a new row's lock, without a struct yet (see trx.weight)
}

// A waiter is a statement waiting for a lock.
type waiter struct {
	q       *lockQueue
	t       *trx
	mode    lockMode
	r       *stmtRun
	granted bool
	timer   *timer
}

// held is the strongest mode t holds on q (0: none).
func (q *lockQueue) held(t *trx) lockMode {
	for _, g := range q.granted {
		if g.t == t {
			return g.mode
		}
	}
	return 0
}

// mustWait says whether t's request for mode has to wait for a lock
// another transaction holds or for one of the first ahead waiters.
func (q *lockQueue) mustWait(t *trx, mode lockMode, ahead int) bool {
	for _, g := range q.granted {
		if g.t != t && q.conflicts(g.mode, mode) {
			return true
		}
	}
	for _, wt := range q.waiting[:ahead] {
		if wt.t != t && q.conflicts(wt.mode, mode) {
			return true
		}
	}
	return false
}

// give grants mode on q to t, upgrading a lock it holds on a record (on
// a gap, its locks are each their own).
func (w *World) give(q *lockQueue, t *trx, mode lockMode) {
	for i, g := range q.granted {
		if g.t == t && !q.id.gap {
			if mode > g.mode {
				q.granted[i].mode = mode
			}
			return
		}
		if g.t == t && g.mode == mode {
			return
		}
	}
	q.granted = append(q.granted, grant{t: t, mode: mode})
	if !slices.Contains(t.locks, q) {
		t.locks = append(t.locks, q)
	}
}

// explicit gives the implicit lock of another transaction's new row a
// struct, as InnoDB does before any request for a lock on the row.
func (q *lockQueue) explicit(t *trx) {
	for i, g := range q.granted {
		if g.implicit && g.t != t {
			q.granted[i].implicit = false
			g.t.took(simLock{q.id.tb, g.mode, false, false}, false)
		}
	}
}

// rebuilt is an update of record k that changes the size of a field (a
// NULL becomes a value or a value NULL, a token another length), which
// InnoDB makes by deleting the record and inserting it again: the locks
// on it move to the page's infimum and back (lock_rec_store_on_page_infimum,
// lock_rec_restore_from_page_infimum), and a waiting lock is given a new
// struct at each move, while a granted one finds its transaction's
// struct of its kind. So each transaction waiting on the record, or on
// the gap before it, weighs two structs more (checked against MariaDB
// 10.11's SHOW ENGINE INNODB STATUS). An update that keeps every size is
// made in place and moves nothing.
func (w *World) rebuilt(tb *table, k pkey) {
	for _, gap := range []bool{false, true} {
		if q := w.locks[lockID{tb: tb, k: k, gap: gap}]; q != nil {
			for _, wt := range q.waiting {
				wt.t.structs += 2
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
	q.explicit(t)
	return q.mustWait(t, mode, len(q.waiting))
}

// lock takes mode on the record for r's transaction. It returns false when
// the statement must wait (it is queued, and runs again once granted or
// ends with error 1205 when the wait times out), or an error 1213 when
// its wait would close a cycle and its transaction is the victim.
func (r *stmtRun) lock(tb *table, k pkey, mode lockMode) (bool, error) {
	w, t := r.w, r.t
	q := w.queue(tb, k)
	had := q.held(t)
	if had >= mode {
		return true, nil
	}
	q.explicit(t)
	if !q.mustWait(t, mode, len(q.waiting)) {
		w.give(q, t, mode)
		t.took(simLock{tb, mode, false, false}, false)
		r.fresh = append(r.fresh, freshLock{q: q, had: had})
		return true, nil
	}
	// A lock granted after a wait is kept to the end of the transaction,
	// even under READ COMMITTED on a row the statement then does not keep:
	// InnoDB, running the statement on, finds the lock already held and
	// takes it for one the transaction held before (MariaDB 10.11).
	r.fresh = append(r.fresh, freshLock{q: q, had: had, kept: true})
	return r.enqueue(q, mode)
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
	if !q.mustWait(r.t, lockII, len(q.waiting)) {
		return true, nil
	}
	return r.enqueue(q, lockII)
}

// enqueue makes r's transaction wait for mode on q, unless the wait closes
// a cycle of which it is the victim (error 1213).
func (r *stmtRun) enqueue(q *lockQueue, mode lockMode) (bool, error) {
	w, t := r.w, r.t
	wt := &waiter{q: q, t: t, mode: mode, r: r}
	q.waiting = append(q.waiting, wt)
	t.wait = wt
	t.structs++
	r.wait = wt
	if w.trace != nil {
		w.tracef("%s %s waits for %s on %s%s held by %s", r.s.name, r.v.tpl.name, modeName(mode), q.id.tb.name, lockText(q.id), w.holders(q, t))
	}
	for {
		cycle := w.cycle(t)
		if cycle == nil {
			break
		}
		victim := lightest(cycle, t)
		if victim == t || w.recheck(victim, t) {
			w.abandon(wt)
			return false, errDeadlock()
		}
	}
	if !wt.granted {
		wt.timer = w.after(w.lockWait, func() { w.lockTimeout(wt) })
	}
	return false, nil
}

// lockNew is an insert's lock of a row that is not there: implicit
// unless it has to wait (for a lock left on its key).
func (r *stmtRun) lockNew(tb *table, k pkey) (bool, error) {
	w, t := r.w, r.t
	q := w.queue(tb, k)
	if q.held(t) > 0 || q.mustWait(t, lockX, len(q.waiting)) {
		return r.lock(tb, k, lockX)
	}
	w.give(q, t, lockX)
	q.granted[len(q.granted)-1].implicit = true
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

// release drops t's lock on q and grants what can now be granted.
func (w *World) release(t *trx, q *lockQueue) {
	for i, g := range q.granted {
		if g.t == t {
			q.granted = append(q.granted[:i], q.granted[i+1:]...)
			break
		}
	}
	for i, l := range t.locks {
		if l == q {
			t.locks = append(t.locks[:i], t.locks[i+1:]...)
			break
		}
	}
	w.grantWaiting(q)
}

// downgrade takes t's lock on q back to mode (0: releases it), and grants
// what can now be granted.
func (w *World) downgrade(t *trx, q *lockQueue, mode lockMode) {
	if mode == 0 {
		w.release(t, q)
		return
	}
	for i, g := range q.granted {
		if g.t == t && g.mode > mode {
			q.granted[i].mode = mode
			w.grantWaiting(q)
			return
		}
	}
}

// releaseAll drops every lock of t, in the order t took them.
func (w *World) releaseAll(t *trx) {
	locks := t.locks
	t.locks = nil
	for _, q := range locks {
		q.granted = slices.DeleteFunc(q.granted, func(g grant) bool { return g.t == t })
		w.grantWaiting(q)
	}
}

// grantWaiting grants, in queue order, every waiting request nothing is in
// the way of; their statements run again once the current event is done.
func (w *World) grantWaiting(q *lockQueue) {
	for i := 0; i < len(q.waiting); {
		wt := q.waiting[i]
		if q.mustWait(wt.t, wt.mode, i) {
			i++
			continue
		}
		q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
		w.give(q, wt.t, wt.mode)
		wt.t.took(simLock{q.id.tb, wt.mode, q.id.gap, false}, true)
		wt.granted = true
		wt.timer.cancel()
		wt.t.wait = nil
		wt.r.wait = nil
		w.wake = append(w.wake, wt.r)
	}
	if len(q.granted) == 0 && len(q.waiting) == 0 && w.locks[q.id] == q {
		delete(w.locks, q.id)
		if r := q.id.tb.find(q.id.k); r != nil && !q.id.gap {
			w.purge(r)
		}
	}
}

// inheritable says whether a lock on a record that goes becomes a gap
// lock before the next: not an insert intention, nor a READ COMMITTED
// transaction's X lock.
func inheritable(t *trx, mode lockMode) bool {
	return mode != lockII && (t.iso != readCommitted || mode == lockS)
}

// inherit gives the gap before record n of tb the gap locks that the
// locks of q become (q: of record k that goes, or of the gap before it).
func (w *World) inherit(q *lockQueue, tb *table, n pkey) {
	if q == nil {
		return
	}
	add := func(t *trx, mode lockMode) {
		if q.id.gap && mode != lockII || !q.id.gap && inheritable(t, mode) {
			w.give(w.queueOf(lockID{tb: tb, k: n, gap: true}), t, mode)
			t.took(simLock{tb, mode, true, false}, false)
		}
	}
	for _, g := range q.granted {
		add(g.t, g.mode)
	}
	for _, wt := range q.waiting {
		add(wt.t, wt.mode)
	}
}

// inserted gives a new record k of tb a copy of the gap locks before the
// next record (lock_update_insert).
func (w *World) inserted(tb *table, k pkey) {
	q := w.locks[lockID{tb: tb, k: tb.next(k), gap: true}]
	if q == nil {
		return
	}
	for _, g := range slices.Clone(q.granted) {
		if g.mode != lockII {
			w.give(w.queueOf(lockID{tb: tb, k: k, gap: true}), g.t, g.mode)
			g.t.took(simLock{tb, g.mode, true, true}, false)
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
// statement waiting for one runs on without it.
func (w *World) drop(q *lockQueue) {
	if q == nil {
		return
	}
	delete(w.locks, q.id)
	for _, g := range q.granted {
		if i := slices.Index(g.t.locks, q); i >= 0 {
			g.t.locks = slices.Delete(g.t.locks, i, i+1)
		}
	}
	waiting := q.waiting
	q.granted, q.waiting = nil, nil
	for _, wt := range waiting {
		wt.granted = true
		wt.timer.cancel()
		wt.t.wait = nil
		wt.t.took(simLock{q.id.tb, wt.mode, q.id.gap, false}, true)
		wt.r.wait = nil
		w.wake = append(w.wake, wt.r)
	}
}

// abandon takes a waiting request out of its queue (its statement ends).
func (w *World) abandon(wt *waiter) {
	q := wt.q
	for i, o := range q.waiting {
		if o == wt {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			break
		}
	}
	wt.timer.cancel()
	wt.t.wait = nil
	wt.t.structs-- // InnoDB takes a cancelled request's struct back
	wt.r.wait = nil
	w.grantWaiting(q)
}

// lockTimeout ends a wait that lasted innodb_lock_wait_timeout: error
// 1205, and only the statement is rolled back (innodb_rollback_on_timeout
// is off by default).
func (w *World) lockTimeout(wt *waiter) {
	if wt.granted || wt.t.wait != wt {
		return
	}
	w.abandon(wt)
	r := wt.r
	r.err = errLockWait()
	w.finish(r)
}

// deadlockVictim ends the statement a victim transaction is waiting in
// with error 1213; the whole transaction rolls back.
func (w *World) deadlockVictim(v *trx) {
	wt := v.wait
	w.abandon(wt)
	r := wt.r
	r.err = errDeadlock()
	w.finish(r)
}

// lightest is the deadlock victim of a cycle: the lightest transaction
// (trx.weight), of equal ones the transaction whose check found it.
func lightest(cycle []*trx, checker *trx) *trx {
	victim := checker
	for _, o := range cycle {
		if o != checker && o.weight() < victim.weight() {
			victim = o
		}
	}
	return victim
}

// recheck rolls victim back, the victim of a cycle t's wait closed, then
// resolves the cycles left among the others that waited in the victim's
// queue, each checked in turn, in the queue's order, as InnoDB's
// background check does (each from the waiter it takes up, which is the
// victim of a tie; InnoDB takes them in the order of their transactions'
// addresses, which follows the order they began in here). It reports
// whether t is such a victim too.
func (w *World) recheck(victim, t *trx) bool {
	q := victim.wait.q
	w.deadlockVictim(victim)
	for _, o := range slices.Clone(q.waiting) {
		u := o.t
		if u == t || u.wait != o {
			continue
		}
		cycle := w.cycle(u)
		if cycle == nil {
			continue
		}
		v := lightest(cycle, u)
		if v == t {
			return true
		}
		w.deadlockVictim(v)
	}
	return false
}

// cycle returns the transactions of a cycle in the waits-for graph that
// goes through t, or nil. A transaction waits for those whose granted
// locks, or requests ahead of its own, conflict with its request.
func (w *World) cycle(t *trx) []*trx {
	w.stamp++
	var path []*trx
	var visit func(u *trx) bool
	visit = func(u *trx) bool {
		if u.visited == w.stamp {
			return false
		}
		u.visited = w.stamp
		wt := u.wait
		if wt == nil {
			return false
		}
		q := wt.q
		ahead := len(q.waiting)
		for i, o := range q.waiting {
			if o == wt {
				ahead = i
				break
			}
		}
		for _, b := range w.blockers(q, wt, ahead) {
			if b == t || visit(b) {
				path = append(path, u)
				return true
			}
		}
		return false
	}
	if visit(t) {
		return path
	}
	return nil
}

func (w *World) blockers(q *lockQueue, wt *waiter, ahead int) []*trx {
	var out []*trx
	for _, g := range q.granted {
		if g.t != wt.t && q.conflicts(g.mode, wt.mode) {
			out = append(out, g.t)
		}
	}
	for _, o := range q.waiting[:ahead] {
		if o.t != wt.t && q.conflicts(o.mode, wt.mode) {
			out = append(out, o.t)
		}
	}
	return out
}

// holders names, for the trace, the connections in t's way on q.
func (w *World) holders(q *lockQueue, t *trx) string {
	s := ""
	for _, g := range q.granted {
		if g.t != t {
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
