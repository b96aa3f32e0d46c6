package consulsem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockprover/lockprover/model/consulsem"
)

// A holder of one of three slots of "jobs/nightly" on a Consul agent:
// acquire, refresh within the TTL (Consul invalidates the session only
// after two), check before acting, release.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := consulsem.Consul("127.0.0.1:8500", nil, consulsem.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	lease, err := s.Acquire(ctx, "jobs/nightly", 3, 10*time.Second)
	if errors.Is(err, consulsem.ErrFull) {
		fmt.Println("every slot is taken")
		return
	}
	if err != nil {
		panic(err)
	}
	defer s.Release(ctx, "jobs/nightly", lease.Token)
	if err := s.Refresh(ctx, "jobs/nightly", lease.Token); err != nil {
		panic(err) // ErrExpired: the slot is lost
	}
	if held, err := s.Verify(ctx, "jobs/nightly", lease.Token); err == nil && held {
		fmt.Println("working under fence", lease.Fence)
	}
}

// The same recipe on etcd: the lease's TTL is the one etcd granted (whole
// seconds, at least its floor), and it expires after one TTL.
func ExampleEtcd() {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:2379"}, DialTimeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	s, err := consulsem.Etcd(c, consulsem.Options{})
	if err != nil {
		panic(err)
	}
	lease, err := s.Acquire(context.Background(), "jobs/nightly", 1, 1500*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println(lease.TTL, "refresh before", s.Timing().Factor, "x TTL")
}
