package amqplocks

import "context"

// A Mutex is a true mutex (spec/True-Mutex.md): the exclusive queue named
// Name. It exists only while held and needs no administration.
type Mutex struct {
	c    *Client
	name string
}

// Mutex returns a handle on the true mutex named name.
func (c *Client) Mutex(name string) *Mutex { return &Mutex{c: c, name: name} }

// Acquire declares the mutex queue exclusively; it returns ErrHeld when
// another connection holds it (which costs the client a channel).
func (m *Mutex) Acquire(ctx context.Context) error {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.afresh()
	won, err := c.declareExclusive(ctx, m.name)
	if err == nil && !won {
		return ErrHeld
	}
	return err
}

// Verify checks that the client still holds the mutex by probing its queue
// on the client's connection. It returns nil when held and ErrLost when not.
func (m *Mutex) Verify(ctx context.Context) error {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verifyHeld(ctx, m.name, m.name)
}

// Release deletes the mutex queue. It returns ErrLost if the client does
// not hold the mutex.
func (m *Mutex) Release(ctx context.Context) error {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.release(ctx, m.name)
}
