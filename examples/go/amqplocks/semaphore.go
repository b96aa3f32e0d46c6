package main

import (
	"fmt"
	"log"
	"time"
)

// A Semaphore is a client's handle on the persistent semaphore Name.
// Retries bounds how many times acquire restarts its scan after losing a
// race for a B queue. TrustScan is the seeded defect trust-scan: acquire
// takes a slot whose B probe said free without declaring B[L].
type Semaphore struct {
	C         *Client
	Name      string
	Retries   int
	TrustScan bool
}

// Acquire takes a free slot and returns its number. It follows the spec:
// for L from 1, if A[L] does not exist fail; if B[L] exists try L+1;
// otherwise declare B[L] exclusively. Losing that declare to another
// client (RESOURCE_LOCKED) restarts the scan from 1, at most Retries
// times. A slot taken is verified (A[L] still exists) before it is
// returned.
func (s Semaphore) Acquire() (int, error) {
	for attempt := 0; ; attempt++ {
		slot, err := s.scan()
		if err != nil || slot > 0 {
			return slot, err
		}
		if attempt >= s.Retries {
			return 0, &Failed{"contended", fmt.Sprintf("lost %d races for a slot of %s", attempt+1, s.Name)}
		}
		log.Printf("lost a race for a slot of %s, scanning again", s.Name)
	}
}

// scan is one pass over the slots from 1: the slot taken, or 0 after a
// lost race.
func (s Semaphore) scan() (int, error) {
	c := s.C
	for slot := 1; ; slot++ {
		if ok, err := c.exists(slotQueue(s.Name, slot)); err != nil || !ok {
			return 0, s.missing(slot, err)
		}
		holder := holderQueue(s.Name, slot)
		taken, err := c.exists(holder)
		if err != nil {
			return 0, err
		}
		if taken {
			continue
		}
		if s.TrustScan {
			c.held[holder] = true // the defect: B[L] is never declared
			delete(c.relinquished, holder)
		} else if won, err := c.declareExclusive(holder); err != nil || !won {
			return 0, err
		}
		ok, err := c.exists(slotQueue(s.Name, slot))
		if err != nil {
			return 0, err
		}
		if ok {
			return slot, nil
		}
		// An admin removed the slot while we took it: give it back.
		if err := c.release(holder); err != nil {
			return 0, err
		}
		return 0, s.missing(slot, nil)
	}
}

// missing is the failure of a scan that found no slot at slot (err, if
// the probe failed): the semaphore has no slots (absent), or every slot
// was held (full).
func (s Semaphore) missing(slot int, err error) error {
	switch {
	case err != nil:
		return err
	case slot == 1:
		return &Failed{"absent", s.Name + " has no slots"}
	}
	return &Failed{"full", "every slot of " + s.Name + " is held"}
}

// Verify says whether the client still holds slot: one mandatory publish
// to A[slot].
func (s Semaphore) Verify(slot int) (bool, error) {
	return s.C.verifyHeld(holderQueue(s.Name, slot), slotQueue(s.Name, slot))
}

// Release gives slot back by deleting B[slot].
func (s Semaphore) Release(slot int) error { return s.C.release(holderQueue(s.Name, slot)) }

// An Admin is an administrator's handle on the persistent semaphore Name.
// Every operation but Wait runs under the administration mutex, the
// exclusive queue Name; an admin that finds it held retries Retries times,
// Poll apart, then fails contended.
type Admin struct {
	C       *Client
	Name    string
	Retries int
	Poll    time.Duration
}

// Create creates A[1]..A[slots]; it fails exists if the semaphore has slots.
func (a Admin) Create(slots int) error {
	return a.locked(func() error {
		have, err := a.count()
		if err != nil {
			return err
		}
		if have > 0 {
			return &Failed{"exists", fmt.Sprintf("the semaphore already has %d slots", have)}
		}
		return a.declareSlots(1, slots)
	})
}

// Change adds delta slots above the highest, or removes -delta from the
// top down (never below zero); it returns the counts before and after.
func (a Admin) Change(delta int) (before, after int, err error) {
	err = a.locked(func() error {
		var err error
		if before, err = a.count(); err != nil {
			return err
		}
		after = max(0, before+delta)
		if err := a.declareSlots(before+1, after); err != nil {
			return err
		}
		return a.deleteSlots(after+1, before)
	})
	return before, after, err
}

// Count is the number of slots: the highest L such that A[1]..A[L] exist.
func (a Admin) Count() (n int, err error) {
	err = a.locked(func() error {
		n, err = a.count()
		return err
	})
	return n, err
}

// Destroy deletes every slot, from the top down; it returns how many there were.
func (a Admin) Destroy() (before int, err error) {
	err = a.locked(func() error {
		if before, err = a.count(); err != nil {
			return err
		}
		return a.deleteSlots(1, before)
	})
	return before, err
}

// Wait returns once slot's holder has let go (B[slot] no longer exists).
func (a Admin) Wait(slot int) error {
	for {
		held, err := a.C.exists(holderQueue(a.Name, slot))
		if err != nil || !held {
			return err
		}
		if err := a.C.sleep(a.Poll); err != nil {
			return err
		}
	}
}

func (a Admin) count() (int, error) {
	for slot := 1; ; slot++ {
		ok, err := a.C.exists(slotQueue(a.Name, slot))
		if err != nil || !ok {
			return slot - 1, err
		}
	}
}

func (a Admin) declareSlots(low, high int) error {
	for slot := low; slot <= high; slot++ {
		if err := a.C.declareDurable(slotQueue(a.Name, slot)); err != nil {
			return err
		}
	}
	return nil
}

// deleteSlots deletes A[high] down to A[low], each delete confirmed before
// the next, so that the slots stay 1..C even if the admin dies midway.
func (a Admin) deleteSlots(low, high int) error {
	for slot := high; slot >= low; slot-- {
		if err := a.C.remove(slotQueue(a.Name, slot)); err != nil {
			return err
		}
	}
	return nil
}

// locked runs op under the administration mutex.
func (a Admin) locked(op func() error) error {
	c := a.C
	for attempt := 0; ; attempt++ {
		won, err := c.declareExclusive(a.Name)
		if err != nil {
			return err
		}
		if won {
			break
		}
		if attempt >= a.Retries {
			return &Failed{"contended", "the administration mutex " + a.Name + " is held"}
		}
		if err := c.sleep(a.Poll); err != nil {
			return err
		}
	}
	if err := op(); err != nil {
		// Keep the operation's error; the mutex goes with the connection
		// if it cannot be deleted.
		if c.open() {
			if derr := c.remove(a.Name); derr != nil {
				log.Printf("releasing the administration mutex: %v", derr)
			}
		}
		return err
	}
	return c.remove(a.Name)
}

// A Mutex is a true mutex: the exclusive queue Name. It exists only while
// held and needs no administration.
type Mutex struct {
	C    *Client
	Name string
}

// Acquire declares the mutex queue exclusively; it fails held when another
// connection holds it.
func (m Mutex) Acquire() error {
	won, err := m.C.declareExclusive(m.Name)
	if err == nil && !won {
		return &Failed{"held", m.Name + " is held by another client"}
	}
	return err
}

// Verify says whether the client still holds the mutex.
func (m Mutex) Verify() (bool, error) { return m.C.verifyHeld(m.Name, m.Name) }

// Release deletes the mutex queue.
func (m Mutex) Release() error { return m.C.release(m.Name) }
