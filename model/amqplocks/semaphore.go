package amqplocks

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// A Semaphore is a client's handle on the persistent semaphore named Name.
type Semaphore struct {
	c     *Client
	name  string
	limit int // highest slot to try; 0 means no limit (1 for a persistent mutex)
	last  int // the slot last held or reached, for FromLastKnown
	seen  int // the largest slot seen to exist, for FromRandom
}

// Semaphore returns a handle on the persistent semaphore named name.
func (c *Client) Semaphore(name string) *Semaphore { return &Semaphore{c: c, name: name} }

// PersistentMutex returns a handle on the persistent mutex named name: a
// persistent semaphore with one slot, which acquire never looks beyond.
// Admins enable it with Create(1) and disable it with Destroy.
func (c *Client) PersistentMutex(name string) *Semaphore {
	return &Semaphore{c: c, name: name, limit: 1}
}

// SlotQueue and HolderQueue name the A and B queues of slot l of the
// semaphore named name.
// (Concatenated, not fmt.Sprintf'd: an acquire names several of them, and
// Sprintf costs an allocation more for each.)
func SlotQueue(name string, l int) string   { return name + "-" + strconv.Itoa(l) + "-A" }
func HolderQueue(name string, l int) string { return name + "-" + strconv.Itoa(l) + "-B" }

// Acquire takes a free slot and returns its number, following the spec:
// for L from the scan start, if A[L] does not exist fail; if B[L] exists try
// L+1; otherwise declare B[L] exclusively. Losing that declare to another
// client (RESOURCE_LOCKED) costs a channel; the scan then restarts, at most
// Options.ContentionRetries times. It returns ErrFull when every slot is
// held, ErrAbsent when the semaphore has no slots, ErrContended when the
// retries run out; any other error leaves the outcome unknown.
func (s *Semaphore) Acquire(ctx context.Context) (int, error) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.afresh()
	for attempt := 0; ; attempt++ {
		slot, err := s.scan(ctx)
		if (err == ErrFull || err == ErrAbsent) && c.o.PlainFailure {
			return 0, ErrUnavailable
		}
		if err != errRace {
			return slot, err
		}
		if attempt >= c.o.retries() {
			return 0, ErrContended
		}
		if c.o.Jitter > 0 {
			if err := c.sleep(ctx, time.Duration(c.rnd.Int64N(int64(c.o.Jitter)))); err != nil {
				return 0, err
			}
		}
	}
}

var errRace = fmt.Errorf("lost a race for a B queue")

// scan makes one pass over the slots: from the scan start up to the first
// missing A queue, then (for a start above 1) from slot 1 up to the start.
func (s *Semaphore) scan(ctx context.Context) (int, error) {
	start := s.start()
	for _, r := range [2][2]int{{start, 0}, {1, start - 1}} {
		for l := r[0]; r[1] == 0 || l <= r[1]; l++ {
			if s.limit > 0 && l > s.limit {
				break
			}
			slot, next, err := s.try(ctx, l)
			if err != nil || slot > 0 {
				return slot, err
			}
			if !next {
				if l == 1 {
					return 0, ErrAbsent
				}
				break
			}
		}
	}
	return 0, ErrFull
}

// try attempts slot l. It returns l once the slot is taken, or next=true
// when the scan should go on to l+1 (A[l] exists but B[l] is held).
func (s *Semaphore) try(ctx context.Context, l int) (slot int, next bool, err error) {
	c := s.c
	if ok, err := c.exists(ctx, SlotQueue(s.name, l)); err != nil || !ok {
		return 0, false, err
	}
	s.seen = max(s.seen, l)
	b := HolderQueue(s.name, l)
	if held, err := c.exists(ctx, b); err != nil || held {
		return 0, held, err
	}
	won, err := c.declareExclusive(ctx, b)
	if err != nil {
		return 0, false, err
	}
	s.last = l
	if !won {
		return 0, false, errRace
	}
	if c.o.SkipVerifyAfterAcquire {
		return l, false, nil
	}
	if ok, err := c.exists(ctx, SlotQueue(s.name, l)); err != nil {
		return 0, false, err
	} else if !ok {
		// The slot was removed while we took it: give it back.
		return 0, false, c.remove(ctx, b)
	}
	return l, false, nil
}

func (s *Semaphore) start() int {
	switch s.c.o.ScanStart {
	case FromLastKnown:
		if s.last > 0 {
			return s.last
		}
	case FromRandom:
		// Up to one past the largest slot seen, so that a client learns of
		// slots above the ones it has taken.
		return 1 + s.c.rnd.IntN(s.seen+1)
	}
	return 1
}

// Verify checks that the client still holds slot: its connection is alive
// (so its B queue is) and A[slot] still exists, probed by
// Options.VerifyMethod on the client's connection. It returns nil when the
// slot is held and ErrLost when it is not; any other error means it could
// not tell.
func (s *Semaphore) Verify(ctx context.Context, slot int) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verifyHeld(ctx, HolderQueue(s.name, slot), SlotQueue(s.name, slot))
}

// Release gives slot back by deleting its B queue. It returns ErrLost if
// the client does not hold slot.
func (s *Semaphore) Release(ctx context.Context, slot int) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.release(ctx, HolderQueue(s.name, slot))
}
