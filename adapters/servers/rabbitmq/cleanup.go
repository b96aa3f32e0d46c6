package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// Cleanup deletes every queue whose name starts with prefix on the broker
// at rawURL and returns those it could not delete (nil when none is left),
// as a Cleaner with no rounds limit does until ctx ends.
//
// With names, only those of them that start with prefix are looked for,
// over AMQP alone (Probe): no rabbitmqctl, no management access. Without
// names, plain rabbitmqctl commands for the URL's vhost list the queues
// and close the connections under prefix that hold one exclusively.
func Cleanup(ctx context.Context, rawURL, prefix string, names ...string) ([]string, error) {
	c := &Cleaner{URL: rawURL}
	if len(names) == 0 {
		c.Ctl = NewCtl(nil, VhostOf(rawURL), true)
	}
	defer c.Close()
	return c.Cleanup(ctx, prefix, names...)
}

// A Cleaner deletes the queues runs leave on a broker, on a connection of
// its own that it keeps from one Cleanup to the next (and dials again if
// it breaks). Close it when done.
type Cleaner struct {
	// URL is the broker's.
	URL string
	// Name is the Cleaner's connection_name; "" means "lockprover-cleanup".
	Name string
	// Ctl, if set, lists the queues under a prefix when Cleanup is given no
	// names, and closes the connections under that prefix (but the
	// Cleaner's own) when one holds a queue exclusively.
	Ctl *Ctl
	// Reason is what the connections it closes are told; "" means
	// "lockprover cleanup".
	Reason string
	// Rounds, if positive, is how many rounds of deletes Cleanup makes at
	// most; otherwise it goes on until ctx ends.
	Rounds int

	mu   sync.Mutex
	conn broker.Conn
	ch   broker.Channel
}

// Cleanup deletes every queue whose name starts with prefix: those of
// names that do (looked for with passive declares, Probe), or, without
// names, those the Ctl lists. It returns the queues it could not delete,
// nil when none is left.
//
// It works in rounds: find the queues, delete each. A queue held
// exclusively by a connection that is still open (405 RESOURCE_LOCKED) is
// deleted again 50 ms later, once the Ctl, if any, has closed the
// connections under prefix; so is one whose delete failed because the
// connection broke. It stops when nothing is left, after Rounds rounds,
// or when ctx ends; err is then why the last round left queues (nil if
// they were only held exclusively). It stops at once, with err, if the
// queues cannot be listed, the connections not either, or the broker
// refuses a delete or a probe for another reason (403, say).
func (c *Cleaner) Cleanup(ctx context.Context, prefix string, names ...string) (left []string, err error) {
	var last error // why the last round left queues
	for round := 0; ; round++ {
		found, err := c.find(ctx, prefix, names)
		switch {
		case err != nil && (len(names) == 0 || refused(err)):
			return nil, fmt.Errorf("listing queues to clean up: %w", err)
		case err != nil && ctx.Err() != nil:
			return left, last
		case err != nil:
			last = err // the connection broke: again, on a new one
		case len(found) == 0:
			return nil, nil
		default:
			left = found
		}
		if c.Rounds > 0 && round == c.Rounds || ctx.Err() != nil {
			return left, last
		}
		if err == nil {
			again, fail, err := c.deleteAll(ctx, prefix, left)
			if err != nil {
				return left, err
			}
			if last = fail; !again {
				continue // all deleted: look again
			}
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// refused reports whether the broker refused something on a channel for
// another reason than an exclusive queue: another round would not mend it.
func refused(err error) bool {
	var e *broker.Error
	return errors.As(err, &e) && e.Server && !e.Connection && e.Code != broker.ResourceLocked
}

// find lists the queues under prefix: those of names that exist, or those
// the Ctl lists.
func (c *Cleaner) find(ctx context.Context, prefix string, names []string) ([]string, error) {
	if len(names) == 0 {
		if c.Ctl == nil {
			return nil, errors.New("no queue names, and no rabbitmqctl to list them")
		}
		return c.Ctl.QueueNames(ctx, prefix)
	}
	var under []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			under = append(under, n)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	qs, err := Probe(ctx, c.conn, under)
	found := make([]string, len(qs))
	for i, q := range qs {
		found[i] = q.Name
	}
	return found, err
}

// deleteAll deletes names. again says whether some are to be deleted again
// (held exclusively, or the connection broke: fail is then that error);
// err is a refusal, or a failure to close the connections that hold them.
func (c *Cleaner) deleteAll(ctx context.Context, prefix string, names []string) (again bool, fail, err error) {
	locked := false
	for _, n := range names {
		err := c.delete(ctx, n)
		switch {
		case err == nil:
		case broker.Code(err) == broker.ResourceLocked:
			locked = true
		case refused(err):
			return false, nil, fmt.Errorf("delete %s: %w", n, err)
		default:
			fail = fmt.Errorf("delete %s: %w", n, err)
		}
	}
	if locked && c.Ctl != nil {
		// A connection of the run that outlived it still holds an
		// exclusive queue: close it from the broker.
		conns, err := c.Ctl.Connections(ctx, prefix)
		if err != nil {
			return false, nil, fmt.Errorf("listing connections to close: %w", err)
		}
		for pid, name := range conns {
			if name != c.name() {
				c.Ctl.CloseConnection(ctx, pid, c.reason())
			}
		}
	}
	return locked || fail != nil, fail, nil
}

// delete deletes a queue on the Cleaner's connection, dialling it and
// opening its channel as needed.
func (c *Cleaner) delete(ctx context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.connect(ctx); err != nil {
		return err
	}
	if c.ch == nil {
		ch, err := c.conn.Channel(ctx)
		if err != nil {
			return err
		}
		c.ch = ch
	}
	_, err := c.ch.Delete(ctx, name, broker.DeleteOptions{})
	if err != nil {
		c.ch = nil // a channel error closed it
	}
	return err
}

// Connect dials the Cleaner's connection now, if it has none that works:
// a way to learn at once that the broker does not answer.
func (c *Cleaner) Connect(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connect(ctx)
}

func (c *Cleaner) connect(ctx context.Context) error {
	if c.conn != nil && c.conn.Err() == nil {
		return nil
	}
	if c.conn != nil {
		c.conn.Close()
	}
	c.conn, c.ch = nil, nil
	conn, err := New(c.URL).Dial(ctx, broker.Config{Name: c.name()})
	if err != nil {
		return err
	}
	c.conn = conn
	return nil
}

func (c *Cleaner) name() string {
	if c.Name == "" {
		return "lockprover-cleanup"
	}
	return c.Name
}

func (c *Cleaner) reason() string {
	if c.Reason == "" {
		return "lockprover cleanup"
	}
	return c.Reason
}

// Close closes the Cleaner's connection (not its Ctl).
func (c *Cleaner) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close()
		c.conn, c.ch = nil, nil
	}
}

// A Found is a queue that Probe found.
type Found struct {
	Name string
	// Exclusive is true when another connection holds it exclusively (a
	// passive declare answers 405 RESOURCE_LOCKED); its owner is not known.
	Exclusive bool
}

// Probe says which of names exist, in their order, with a passive declare
// of each on conn: it works on any broker, with no rabbitmqctl or
// management access.
func Probe(ctx context.Context, conn broker.Conn, names []string) ([]Found, error) {
	var out []Found
	var ch broker.Channel
	for _, n := range names {
		if ch == nil {
			var err error
			if ch, err = conn.Channel(ctx); err != nil {
				return nil, err
			}
		}
		_, err := ch.Declare(ctx, n, broker.DeclareOptions{Passive: true})
		switch broker.Code(err) {
		case 0:
			if err != nil {
				return nil, fmt.Errorf("passive declare of %s: %w", n, err)
			}
			out = append(out, Found{Name: n})
		case broker.ResourceLocked:
			out = append(out, Found{Name: n, Exclusive: true})
			ch = nil
		case broker.NotFound:
			ch = nil
		default:
			return nil, fmt.Errorf("passive declare of %s: %w", n, err)
		}
	}
	if ch != nil {
		ch.Close()
	}
	return out, nil
}
