//go:build !redsync_v4_0_3

package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

// version is the redsync this file builds against (go.mod's).
const version = "v4.18.1"

const hasSetNXOnExtend = true

type current struct {
	rs      *redsync.Redsync
	clients []*goredislib.Client
	name    string
	setNX   bool
	// mutexes are the grants of this process, by value.
	mutexes map[string]*redsync.Mutex
}

func newLib(addrs []string, name string, setNX bool) lib {
	c := &current{name: name, setNX: setNX, mutexes: map[string]*redsync.Mutex{}}
	var pools []rsredis.Pool
	for _, a := range addrs {
		client := goredislib.NewClient(&goredislib.Options{Addr: a})
		c.clients = append(c.clients, client)
		pools = append(pools, goredis.NewPool(client))
	}
	c.rs = redsync.New(pools...)
	return c
}

func (c *current) options(ttl time.Duration) []redsync.Option {
	o := []redsync.Option{redsync.WithExpiry(ttl), redsync.WithTries(1)}
	if c.setNX {
		o = append(o, redsync.WithSetNXOnExtend())
	}
	return o
}

// refusedOnly says whether err says only that servers refused: ErrTaken,
// or a join of ErrNodeTaken and ErrLockAlreadyExpired alone (no
// RedisError, whose server may have done it).
func refusedOnly(err error) bool {
	var taken *redsync.ErrTaken
	if errors.As(err, &taken) {
		return true
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var node *redsync.ErrNodeTaken
		if !errors.As(e, &node) && !errors.Is(e, redsync.ErrLockAlreadyExpired) {
			return false
		}
	}
	return len(errs) > 0
}

func (c *current) acquire(ctx context.Context, ttl time.Duration, start, began func()) (string, time.Time, outcome, error) {
	// The value as redsync's own genValue makes it (16 random bytes,
	// base64), with the time noted as it is asked for: redsync reads its
	// clock right after.
	value := redsync.WithGenValueFunc(func() (string, error) {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		began()
		return base64.StdEncoding.EncodeToString(b[:]), nil
	})
	m := c.rs.NewMutex(c.name, append(c.options(ttl), value)...)
	start()
	err := m.LockContext(ctx)
	switch {
	case err == nil:
		c.mutexes[m.Value()] = m
		return m.Value(), m.Until(), ok, nil
	case !errors.Is(err, redsync.ErrFailed) && refusedOnly(err):
		return "", time.Time{}, refused, err
	}
	return "", time.Time{}, unknown, err
}

func (c *current) granted(token string) bool { return c.mutexes[token] != nil }

func (c *current) refresh(ctx context.Context, token string, ttl time.Duration, start func()) (time.Time, outcome, error) {
	m := c.mutexes[token]
	// A mutex's expiry is set by its options: a refresh for another ttl
	// applies WithExpiry again (Option.Apply is public).
	redsync.WithExpiry(ttl).Apply(m)
	start()
	extended, err := m.ExtendContext(ctx)
	switch {
	case extended:
		return m.Until(), ok, nil
	case errors.Is(err, redsync.ErrExtendFailed):
		return time.Time{}, unknown, err
	case err == nil || refusedOnly(err):
		return time.Time{}, refused, err
	}
	return time.Time{}, unknown, err
}

func (c *current) release(ctx context.Context, token string) (outcome, error) {
	released, err := c.mutexes[token].UnlockContext(ctx)
	switch {
	case released:
		return ok, nil
	case err == nil || refusedOnly(err):
		return refused, err
	}
	return unknown, err
}

func (c *current) close() {
	for _, cl := range c.clients {
		cl.Close()
	}
}
