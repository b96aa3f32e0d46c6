package consulsem

import (
	"testing"
	"time"
)

// A Semaphore On a Backend (here the real ones, ConsulBackend and
// EtcdBackend) runs the recipe as the backend's own Semaphore does.
func TestOnBackend(t *testing.T) {
	both(t, func(t *testing.T, b backend) {
		var be Backend
		var err error
		switch b.name {
		case "consul":
			skipWithout(t, noConsul)
			be, err = ConsulBackend(consulAgent.Addr(), nil)
		case "etcd":
			skipWithout(t, noEtcd)
			be, err = EtcdBackend(etcdClient(t))
		}
		if err != nil {
			t.Fatal(err)
		}
		s, err := On(be, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.Timing() != b.open(t, Options{}).Timing() {
			t.Errorf("timing %+v", s.Timing())
		}
		p := uniquePrefix()
		l := acquire(t, s, p, 1, 10*time.Second)
		_, err = s.Acquire(ctx(t), p, 1, 10*time.Second)
		wantErr(t, "a second acquire", err, ErrFull)
		if !verify(t, s, p, l) {
			t.Fatal("not held")
		}
		wantErr(t, "release", s.Release(ctx(t), p, l.Token), nil)
		if verify(t, s, p, l) {
			t.Fatal("held after its release")
		}
	})
}
