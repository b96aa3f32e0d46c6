package amqplocks

import (
	"context"
	"fmt"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// An Admin changes the number of slots of the persistent semaphore named
// Name. Every operation but Wait runs under the semaphore's administration
// mutex (the exclusive queue Name) unless Options.NoAdminMutex is set, so
// that two admins never interleave their changes.
type Admin struct {
	c    *Client
	name string
}

// Admin returns an administrator's handle on the semaphore named name.
func (c *Client) Admin(name string) *Admin { return &Admin{c: c, name: name} }

// Create makes a semaphore with slots A[1]..A[n]. It returns ErrExists if
// the semaphore already has slots.
func (a *Admin) Create(ctx context.Context, n int) error {
	return a.locked(ctx, func() error {
		c, err := a.count(ctx)
		if err != nil {
			return err
		}
		if c > 0 {
			return fmt.Errorf("%w with %d slots", ErrExists, c)
		}
		for l := 1; l <= n; l++ {
			if err := a.declareSlot(ctx, l); err != nil {
				return err
			}
		}
		return a.overshoot(ctx, n)
	})
}

// Change adds delta slots (or removes -delta, never below zero) and
// returns the number of slots before and after. Slots are added above the
// maximum and removed from the top down (Options.DeleteOrder); removing a
// held slot does not affect its holder until it verifies.
func (a *Admin) Change(ctx context.Context, delta int) (from, to int, err error) {
	err = a.locked(ctx, func() error {
		if from, err = a.count(ctx); err != nil {
			return err
		}
		to = max(0, from+delta)
		for l := from + 1; l <= to; l++ {
			if err := a.declareSlot(ctx, l); err != nil {
				return err
			}
		}
		if err := a.deleteSlots(ctx, to+1, from); err != nil {
			return err
		}
		return a.overshoot(ctx, max(from, to))
	})
	return from, to, err
}

// Destroy deletes every slot and returns how many there were.
func (a *Admin) Destroy(ctx context.Context) (from int, err error) {
	err = a.locked(ctx, func() error {
		if from, err = a.count(ctx); err != nil {
			return err
		}
		if err := a.deleteSlots(ctx, 1, from); err != nil {
			return err
		}
		return a.overshoot(ctx, from)
	})
	return from, err
}

// Count returns the number of slots: the highest L such that A[1]..A[L]
// all exist, probed in order.
func (a *Admin) Count(ctx context.Context) (n int, err error) {
	err = a.locked(ctx, func() error {
		n, err = a.count(ctx)
		return err
	})
	return n, err
}

// Wait returns once slot's holder has let go (B[slot] no longer exists),
// polling every Options.PollInterval. It is meaningful after slot was
// removed: otherwise the slot may be taken again between two polls.
func (a *Admin) Wait(ctx context.Context, slot int) error {
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.admin = true
	defer func() { c.admin = false }()
	c.afresh()
	for {
		held, err := c.exists(ctx, HolderQueue(a.name, slot))
		if err != nil || !held {
			return err
		}
		if err := c.sleep(ctx, c.o.poll()); err != nil {
			return err
		}
	}
}

// locked runs f under the administration mutex.
func (a *Admin) locked(ctx context.Context, f func() error) error {
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.admin = true
	defer func() { c.admin = false }()
	c.afresh()
	if c.o.NoAdminMutex {
		return f()
	}
	for attempt := 0; ; attempt++ {
		won, err := c.declareExclusive(ctx, a.name)
		if err != nil {
			return err
		}
		if won {
			break
		}
		if attempt >= c.o.retries() {
			return fmt.Errorf("%w: the administration mutex %s is held", ErrContended, a.name)
		}
		if err := c.sleep(ctx, c.o.poll()); err != nil {
			return err
		}
	}
	err := f()
	if rerr := c.remove(ctx, a.name); err == nil {
		err = rerr
	}
	return err
}

func (a *Admin) count(ctx context.Context) (int, error) {
	for l := 1; ; l++ {
		ok, err := a.c.exists(ctx, SlotQueue(a.name, l))
		if err != nil {
			return 0, err
		}
		if !ok {
			return l - 1, nil
		}
	}
}

func (a *Admin) declareSlot(ctx context.Context, l int) error {
	c := a.c
	ch, err := c.channel(ctx, forQueues)
	if err != nil {
		return err
	}
	q := SlotQueue(a.name, l)
	if _, err := ch.Declare(ctx, q, broker.DeclareOptions{Durable: !c.o.TransientSlots, Args: c.o.queueArgs()}); err != nil {
		c.failed(ctx, err, forQueues)
		return fmt.Errorf("amqplocks: declare %s: %w", q, err)
	}
	return nil
}

// deleteSlots deletes A[lo]..A[hi] in Options.DeleteOrder, each delete
// confirmed before the next.
func (a *Admin) deleteSlots(ctx context.Context, lo, hi int) error {
	for i := 0; i <= hi-lo; i++ {
		l := hi - i
		if a.c.o.DeleteOrder == Ascending {
			l = lo + i
		}
		if err := a.c.remove(ctx, SlotQueue(a.name, l)); err != nil {
			return err
		}
	}
	return nil
}

// overshoot deletes stray A queues above top, up to Options.Overshoot of
// them; deleting a missing queue succeeds, so this is idempotent.
func (a *Admin) overshoot(ctx context.Context, top int) error {
	for l := top + 1; l <= top+a.c.o.Overshoot; l++ {
		if err := a.c.remove(ctx, SlotQueue(a.name, l)); err != nil {
			return err
		}
	}
	return nil
}
