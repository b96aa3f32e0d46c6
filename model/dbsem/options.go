package dbsem

import (
	"fmt"
	"io"
	"regexp"
	"time"
)

// Options are the choices the database semaphore leaves open. The zero
// value is the recommended semaphore: master-row design, UUID tokens,
// tables prefixed "dbsem_", no defects.
type Options struct {
	// Prefix starts the name of every table the semaphore uses: Prefix +
	// "keys", "tokens" (master-row) or "slots" (row-per-slot). Clients that
	// share a semaphore must use the same prefix; a test or a prover run uses
	// its own, so that it starts empty and Drop removes only its tables.
	// Letters, digits and '_' only, at most 50 of them; "" means "dbsem_".
	Prefix string

	// Design is how the rows of a key are laid out and locked.
	Design Design

	// Fencing makes Acquire return a numeric fencing token: a per-key
	// counter incremented in the acquiring transaction, under a row lock
	// held until COMMIT, so that fences increase in the order in which
	// grants took effect. Without it the fence is 0 and the UUID token is
	// all a holder has, as upstream.
	Fencing bool

	// Random is where tokens' random bits come from; nil means
	// crypto/rand. A simulator passes a seeded source so that the same
	// run draws the same tokens.
	Random io.Reader

	// Defects are deliberate bugs, for the prover's mutants only: each
	// turns one of the checks above off. The zero value has none.
	Defects Defects
}

// Design is a layout of the semaphore's rows.
type Design int

const (
	// MasterRow is the seed README's design: one master row per key in the
	// keys table, locked FOR UPDATE by every acquire, which then deletes the
	// key's expired token rows, counts the live ones and inserts a token row
	// if fewer than max are live. It is the default: acquires of one key are
	// serialized by one row lock, so the count and the insert are one
	// atomic decision whatever the other transactions do; it needs no
	// pre-allocated rows and no SKIP LOCKED; an acquire that finds no slot
	// is never fooled by a row another transaction merely has locked; and
	// the fence counter lives in the row already locked. Its cost is that
	// concurrent acquires of one key wait for each other (for a few short
	// statements) instead of passing each other.
	MasterRow Design = iota

	// RowPerSlot is upstream's current design: rows 0..max-1 per key,
	// created with the key; an acquire under READ COMMITTED takes the first
	// free or expired row with SELECT ... FOR UPDATE SKIP LOCKED and writes
	// its token into it. Acquires of one key do not wait for each other (but
	// with Fencing they wait on the counter row), and a row that another
	// transaction has locked is skipped, so an acquire can answer ErrFull
	// while a concurrent operation holds the lock of a free row.
	RowPerSlot
)

// String names the design as the keys table records it.
func (d Design) String() string {
	switch d {
	case MasterRow:
		return "master-row"
	case RowPerSlot:
		return "row-per-slot"
	}
	return fmt.Sprintf("Design(%d)", int(d))
}

// Defects are deliberate bugs the prover's mutants switch on, one per
// field, to show that the prover finds each. Every one is a small branch
// off the correct code; Open refuses a defect the chosen design does not
// have. Never set them outside a mutant.
type Defects struct {
	// RefreshRevivesExpired drops "AND expires > now" from Refresh, as
	// upstream: refreshing an expired lease that nobody has taken over yet
	// succeeds and revives it.
	RefreshRevivesExpired bool

	// ReleaseAfterExpirySucceeds drops "AND expires > now" from Release, as
	// upstream: releasing an expired lease that nobody has taken over yet
	// reports success.
	ReleaseAfterExpirySucceeds bool

	// ClientClockExpiry judges expiry by the client's clock (Now, passed as
	// a parameter in place of every UTC_TIMESTAMP(6)) instead of the
	// database's, so that clients whose clocks disagree disagree on which
	// leases are live.
	ClientClockExpiry bool
	// Now is the client clock ClientClockExpiry reads; nil means time.Now.
	// A prover skews a mutant client's clock through it.
	Now func() time.Time

	// NoSkipLocked (RowPerSlot only) picks the free row with a plain SELECT,
	// without FOR UPDATE SKIP LOCKED, and then updates it by its number:
	// two acquirers that pick the same row both win, the later overwriting
	// the earlier's token.
	NoSkipLocked bool

	// CountWithoutLock (MasterRow only) reads the master row without FOR
	// UPDATE: two acquirers can both count fewer than max live tokens and
	// both insert one.
	CountWithoutLock bool

	// MixedMax drops the agreement on max, as upstream: every acquire
	// trusts its own max (RowPerSlot: creates rows 0..max-1 if fewer exist
	// and looks only at rows numbered below max; MasterRow: compares the
	// count with its own max), so callers passing different limits exceed
	// the smaller one.
	MixedMax bool

	// FenceFromUUID (with Fencing) derives the fence from the token's first
	// 60 bits instead of the counter: nonzero, but in no order.
	FenceFromUUID bool

	// AmbiguousCommitRetry makes an acquire whose COMMIT fails (the reply
	// was lost: the grant may well have committed) run its transaction once
	// more on a fresh connection instead of reporting the unknown outcome,
	// so that one acquire can take a second slot and leak the first.
	AmbiguousCommitRetry bool
}

// MaxSlots is the largest max an acquire may ask for.
const MaxSlots = 10000

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_]{0,50}$`)

func (o Options) prefix() string {
	if o.Prefix == "" {
		return "dbsem_"
	}
	return o.Prefix
}

// check refuses options that make no sense together.
func (o Options) check() error {
	if !prefixRE.MatchString(o.Prefix) {
		return fmt.Errorf("dbsem: prefix %q: letters, digits and '_' only, at most 50", o.Prefix)
	}
	if o.Design != MasterRow && o.Design != RowPerSlot {
		return fmt.Errorf("dbsem: unknown design %d", int(o.Design))
	}
	d := o.Defects
	if d.NoSkipLocked && o.Design != RowPerSlot {
		return fmt.Errorf("dbsem: defect NoSkipLocked needs design %v", RowPerSlot)
	}
	if d.CountWithoutLock && o.Design != MasterRow {
		return fmt.Errorf("dbsem: defect CountWithoutLock needs design %v", MasterRow)
	}
	if d.FenceFromUUID && !o.Fencing {
		return fmt.Errorf("dbsem: defect FenceFromUUID needs Fencing")
	}
	if d.Now != nil && !d.ClientClockExpiry {
		return fmt.Errorf("dbsem: Defects.Now is read only with ClientClockExpiry")
	}
	return nil
}
