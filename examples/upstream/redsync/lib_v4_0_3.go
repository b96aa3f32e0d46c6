//go:build redsync_v4_0_3

package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"

	goredislib "github.com/go-redis/redis/v8"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v8"
)

// version is the redsync this file builds against (go.v4.0.3.mod's).
// v4.0.3 has no goredis/v9 driver, no Value(), Until(), ErrTaken nor
// WithSetNXOnExtend: the mutex's value is made here by
// WithGenValueFunc, as redsync's own genValue makes it (16 random bytes,
// base64), and no validity is claimed.
const version = "v4.0.3"

const hasSetNXOnExtend = false

type old struct {
	rs      *redsync.Redsync
	clients []*goredislib.Client
	name    string
	mutexes map[string]*redsync.Mutex
}

func newLib(addrs []string, name string, _ bool) lib {
	c := &old{name: name, mutexes: map[string]*redsync.Mutex{}}
	var pools []rsredis.Pool
	for _, a := range addrs {
		client := goredislib.NewClient(&goredislib.Options{Addr: a})
		c.clients = append(c.clients, client)
		pools = append(pools, goredis.NewPool(client))
	}
	c.rs = redsync.New(pools...)
	return c
}

func genValue() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

func (c *old) acquire(ctx context.Context, ttl time.Duration, start, _ func()) (string, time.Time, outcome, error) {
	value, err := genValue()
	if err != nil {
		return "", time.Time{}, unknown, err
	}
	m := c.rs.NewMutex(c.name, redsync.WithExpiry(ttl), redsync.WithTries(1),
		redsync.WithGenValueFunc(func() (string, error) { return value, nil }))
	start()
	err = m.LockContext(ctx)
	switch {
	case err == nil:
		c.mutexes[value] = m
		return value, time.Time{}, ok, nil
	case errors.Is(err, redsync.ErrFailed):
		// v4.0.3's one failure: fewer than a majority set the key, or
		// too late (it cannot tell taken from errors when some server
		// set it).
		return "", time.Time{}, refused, err
	}
	return "", time.Time{}, unknown, err
}

func (c *old) granted(token string) bool { return c.mutexes[token] != nil }

func (c *old) refresh(ctx context.Context, token string, ttl time.Duration, start func()) (time.Time, outcome, error) {
	m := c.mutexes[token]
	redsync.WithExpiry(ttl).Apply(m)
	start()
	extended, err := m.ExtendContext(ctx)
	switch {
	case extended:
		return time.Time{}, ok, nil
	case err == nil:
		return time.Time{}, refused, err
	}
	return time.Time{}, unknown, err
}

func (c *old) release(ctx context.Context, token string) (outcome, error) {
	released, err := c.mutexes[token].UnlockContext(ctx)
	switch {
	case released:
		return ok, nil
	case err == nil:
		return refused, err
	}
	return unknown, err
}

func (c *old) close() {
	for _, cl := range c.clients {
		cl.Close()
	}
}
