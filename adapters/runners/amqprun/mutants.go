package amqprun

import (
	"context"
	"errors"
	"strings"

	"github.com/lockprover/lockprover/model/amqpcheck"
	"github.com/lockprover/lockprover/model/amqplocks"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// A Mutant is a deliberately broken variant of the reference: a defect
// lockprover must catch, and the property that must catch it.
type Mutant struct {
	Name, Defect, Property string
	options                func(*Options)
	broker                 defects // faults in the AMQP calls the reference makes
	client                 defects // faults in what the client does
}

// defects are the ways a mutant departs from the reference.
type defects struct {
	skipBProbe, bNotExclusive, treat405, trustScan bool // acquire's calls
	verifyB, verifyGet                             bool // verify's calls
	cacheVerify, silentReconnect, verifyErrors     bool
	releaseDeletesA, releaseNoDelete               bool
	countFirstHeld, reconnectAcquire, cachedCount  bool
	throwawayChannel                               bool // acquire's exclusive declare
}

// Mutants is the catalogue, in the order `lockprover mutants` lists it.
var Mutants = []*Mutant{
	{Name: "skip-b-probe", Property: amqpcheck.AcquireExact, broker: defects{skipBProbe: true},
		Defect: "acquire skips the B probe and declares B[L] anyway, so a held slot costs it a RESOURCE_LOCKED and its retries; alone it fails contended"},
	{Name: "b-not-exclusive", Property: amqpcheck.SlotExclusive, broker: defects{bNotExclusive: true},
		Defect: "B queues are declared non-exclusive: two clients both 'win' the same slot"},
	{Name: "verify-probes-b", Property: amqpcheck.SlotExclusive, broker: defects{verifyB: true},
		Defect: "verify probes B[L] (its own queue, always there) instead of A[L], so it says held after the slot was removed"},
	{Name: "verify-from-cache", Property: amqpcheck.SlotExclusive, client: defects{cacheVerify: true},
		Defect: "verify answers from the client's memory without asking the broker"},
	{Name: "ascending-no-overshoot", Property: amqpcheck.NoLeak, options: func(o *Options) { o.DeleteOrder, o.Overshoot = "ascending", 0 },
		Defect: "admins delete A queues in ascending order with no overshoot: an admin that crashes midway leaves slots above a hole that nothing ever deletes"},
	{Name: "no-admin-mutex", Property: amqpcheck.CountExact, options: func(o *Options) { o.NoAdminMutex = true },
		Defect: "admins change the semaphore without the administration mutex, so concurrent changes interleave"},
	{Name: "transient-slots", Property: amqpcheck.Persistent, options: func(o *Options) { o.TransientSlots = true },
		Defect: "A queues are declared non-durable, so a broker restart deletes every slot"},
	{Name: "silent-reconnect", Property: amqpcheck.SlotExclusive, client: defects{silentReconnect: true},
		Defect: "after losing its connection the client silently reconnects and keeps believing it holds its slot: verify then only checks that A[L] exists"},
	{Name: "release-deletes-a", Property: amqpcheck.Persistent, client: defects{releaseDeletesA: true},
		Defect: "release deletes the slot's A queue as well as its B queue"},
	{Name: "treat-405-as-success", Property: amqpcheck.SlotExclusive, broker: defects{treat405: true},
		options: func(o *Options) { o.SkipVerifyAfterAcquire = true },
		Defect:  "a RESOURCE_LOCKED on declaring B[L] is taken as success, and acquire returns at once"},
	{Name: "trust-scan", Property: amqpcheck.SlotExclusive, broker: defects{trustScan: true},
		Defect: "acquire trusts the scan: it returns a slot whose B probe said free without declaring B[L]"},
	{Name: "count-first-held", Property: amqpcheck.CountExact, client: defects{countFirstHeld: true},
		Defect: "count stops at the first held slot instead of the first missing A queue"},
	{Name: "release-by-channel-close", Property: amqpcheck.AcquireExact, client: defects{releaseNoDelete: true},
		Defect: "release closes a channel instead of deleting B[L], as the spec suggests; RabbitMQ keeps an exclusive queue until its connection ends (broker-semantics 6.1)"},
	{Name: "verify-passive", Property: amqpcheck.CheapVerify, options: func(o *Options) { o.VerifyMethod = "passive" },
		Defect: "verify passively declares A[L] instead of publishing to it: a declare, and a broken channel when the slot is gone"},
	{Name: "reconnect-per-acquire", Property: amqpcheck.CheapAcquire, client: defects{reconnectAcquire: true},
		Defect: "acquire opens a new connection every time"},
	{Name: "throwaway-channel", Property: amqpcheck.CheapAcquire, broker: defects{throwawayChannel: true},
		Defect: "acquire declares B[L] on a channel of its own and closes it after, so that a RESOURCE_LOCKED breaks nothing: a channel opened and closed per acquire"},
	{Name: "verify-by-get", Property: amqpcheck.DriverMinimal, broker: defects{verifyGet: true},
		Defect: "verify also sends a basic.get, which the spec's drivers need not support"},
	{Name: "verify-errors", Property: amqpcheck.Available, client: defects{verifyErrors: true},
		Defect: "verify always fails with an error, so its outcome is never known"},
	{Name: "cached-count", Property: amqpcheck.CountExact, client: defects{cachedCount: true},
		Defect: "an admin answers count from its own cache, the count it last created or changed to, without asking the broker: right until another admin changes the semaphore"},
}

// MutantNamed returns the mutant called name, or nil.
func MutantNamed(name string) *Mutant {
	for _, m := range Mutants {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// ImplFor is what runs a plan on its own: the reference, or the plan's
// mutant of it.
func ImplFor(p *Plan) Impl { return implFor(p, Reference) }

// implFor is what runs a plan: base, or the plan's mutant of the reference.
func implFor(p *Plan, base Impl) Impl {
	if p.Mutant == "" || base != Reference {
		return base
	}
	return mutantImpl{MutantNamed(p.Mutant)}
}

type mutantImpl struct{ m *Mutant }

func (mi mutantImpl) Connect(ctx context.Context, b broker.Broker, p *Plan, process string) (Client, error) {
	q := *p
	if mi.m.options != nil {
		mi.m.options(&q.Options)
	}
	shared := &mutantState{d: mi.m.broker}
	c, err := Reference.Connect(ctx, &mutBroker{Broker: b, s: shared}, &q, process)
	if err != nil {
		return nil, err
	}
	return &mutClient{Client: c, d: mi.m.client, s: shared, b: b, p: &q, process: process}, nil
}

// mutantState is shared by a mutant client and the broker it talks to.
type mutantState struct {
	d         defects
	verifying bool
}

type mutBroker struct {
	broker.Broker
	s *mutantState
}

func (b *mutBroker) Dial(ctx context.Context, cfg broker.Config) (broker.Conn, error) {
	c, err := b.Broker.Dial(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &mutConn{Conn: c, s: b.s}, nil
}

type mutConn struct {
	broker.Conn
	s *mutantState
}

func (c *mutConn) Channel(ctx context.Context) (broker.Channel, error) {
	ch, err := c.Conn.Channel(ctx)
	if err != nil {
		return nil, err
	}
	return &mutChannel{Channel: ch, s: c.s, conn: c.Conn}, nil
}

type mutChannel struct {
	broker.Channel
	s    *mutantState
	conn broker.Conn
}

func isB(q string) bool { return strings.HasSuffix(q, "-B") }

func (c *mutChannel) Declare(ctx context.Context, name string, o broker.DeclareOptions) (broker.Queue, error) {
	d := c.s.d
	if isB(name) && o.Exclusive {
		switch {
		case d.trustScan:
			return broker.Queue{Name: name}, nil
		case d.bNotExclusive:
			o.Exclusive = false
		case d.throwawayChannel:
			ch, err := c.conn.Channel(ctx)
			if err != nil {
				return broker.Queue{}, err
			}
			defer ch.Close()
			return ch.Declare(ctx, name, o)
		}
	}
	q, err := c.Channel.Declare(ctx, name, o)
	if d.treat405 && isB(name) && broker.Code(err) == broker.ResourceLocked {
		return broker.Queue{Name: name}, nil
	}
	return q, err
}

func (c *mutChannel) Publish(ctx context.Context, p broker.Publishing) (broker.Confirmation, error) {
	d := c.s.d
	switch {
	case d.skipBProbe && isB(p.Key) && !c.s.verifying:
		return broker.Confirmation{Returned: true, Acked: true}, nil // "no such B queue"
	case c.s.verifying && d.verifyB:
		p.Key = strings.TrimSuffix(p.Key, "-A") + "-B"
	case c.s.verifying && d.verifyGet:
		if _, err := c.Channel.Get(ctx, p.Key); err != nil {
			return broker.Confirmation{}, err
		}
	}
	return c.Channel.Publish(ctx, p)
}

// mutClient departs from the reference in what the client does.
type mutClient struct {
	Client
	d       defects
	s       *mutantState
	b       broker.Broker
	p       *Plan
	process string
	held    int  // the slot the client believes it holds
	holding bool // it believes it holds one
	zombie  bool // it reconnected silently and still believes it holds it
	raw     broker.Channel
	rawConn broker.Conn
	count   int  // the count the admin last created or changed to (cached-count)
	counted bool // it has one
}

func (c *mutClient) Close() error {
	if c.rawConn != nil {
		c.rawConn.Close()
		c.raw, c.rawConn = nil, nil
	}
	return c.Client.Close()
}

func (c *mutClient) Acquire(ctx context.Context) (int, error) {
	if c.d.reconnectAcquire {
		c.Client.Close()
		fresh, err := Reference.Connect(ctx, &mutBroker{Broker: c.b, s: c.s}, c.p, c.process)
		if err != nil {
			return 0, err
		}
		c.Client = fresh
	}
	slot, err := c.Client.Acquire(ctx)
	if err == nil {
		c.held, c.holding, c.zombie = slot, true, false
	}
	return slot, err
}

func (c *mutClient) Verify(ctx context.Context, slot int) (bool, error) {
	switch {
	case c.d.verifyErrors:
		return false, errors.New("mutant: verify is broken")
	case c.d.cacheVerify:
		return c.holding && c.held == slot, nil
	case c.zombie && c.holding && c.held == slot:
		return c.probe(ctx, amqplocks.SlotQueue(c.p.Lock, slot))
	}
	c.s.verifying = true
	defer func() { c.s.verifying = false }()
	return c.Client.Verify(ctx, slot)
}

func (c *mutClient) Release(ctx context.Context, slot int) error {
	c.holding, c.zombie = false, false
	if c.d.releaseNoDelete {
		return nil
	}
	err := c.Client.Release(ctx, slot)
	if err == nil && c.d.releaseDeletesA {
		ch, cerr := c.channel(ctx)
		if cerr != nil {
			return cerr
		}
		_, err = ch.Delete(ctx, amqplocks.SlotQueue(c.p.Lock, slot), broker.DeleteOptions{})
	}
	return err
}

func (c *mutClient) Create(ctx context.Context, slots int) error {
	err := c.Client.Create(ctx, slots)
	if err == nil {
		c.count, c.counted = slots, true
	}
	return err
}

func (c *mutClient) Change(ctx context.Context, delta int) (int, int, error) {
	from, to, err := c.Client.Change(ctx, delta)
	if err == nil {
		c.count, c.counted = to, true
	}
	return from, to, err
}

func (c *mutClient) Destroy(ctx context.Context) (int, error) {
	from, err := c.Client.Destroy(ctx)
	if err == nil {
		c.count, c.counted = 0, true
	}
	return from, err
}

func (c *mutClient) Count(ctx context.Context) (int, error) {
	if c.d.cachedCount && c.counted {
		return c.count, nil
	}
	if !c.d.countFirstHeld {
		return c.Client.Count(ctx)
	}
	for l := 1; ; l++ {
		a, err := c.probe(ctx, amqplocks.SlotQueue(c.p.Lock, l))
		if err != nil || !a {
			return l - 1, err
		}
		if b, err := c.probe(ctx, amqplocks.HolderQueue(c.p.Lock, l)); err != nil || b {
			return l - 1, err
		}
	}
}

func (c *mutClient) Broken() bool {
	if !c.d.silentReconnect || !c.Client.Broken() {
		return c.Client.Broken()
	}
	// Reconnect behind the runner's back, keeping the belief in the slot.
	ctx := context.Background()
	fresh, err := Reference.Connect(ctx, c.b, c.p, c.process)
	if err != nil {
		return true
	}
	c.Client.Close()
	c.Client = fresh
	if c.rawConn != nil {
		c.rawConn.Close()
		c.raw, c.rawConn = nil, nil
	}
	if _, err := c.channel(ctx); err != nil {
		return true
	}
	c.zombie = true
	return false
}

// probe publishes to q on the mutant's own channel: true if q exists.
func (c *mutClient) probe(ctx context.Context, q string) (bool, error) {
	ch, err := c.channel(ctx)
	if err != nil {
		return false, err
	}
	conf, err := ch.Publish(ctx, broker.Publishing{Key: q, Mandatory: true})
	return err == nil && !conf.Returned, err
}

// channel is a channel of the mutant's own, for the calls the reference
// would never make.
func (c *mutClient) channel(ctx context.Context) (broker.Channel, error) {
	if c.raw != nil {
		return c.raw, nil
	}
	conn, err := c.b.Dial(ctx, broker.Config{Heartbeat: c.p.Options.Heartbeat()})
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel(ctx)
	if err == nil {
		err = ch.Confirm(ctx)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.raw, c.rawConn = ch, conn
	return ch, nil
}
