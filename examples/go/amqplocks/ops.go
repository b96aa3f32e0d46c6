package main

import "time"

// The operations, each a request's answer. verify and release work on
// the current client even when its connection is gone: they then answer
// held:false and "not held" without connecting.

func (s *server) semaphore(c *Client) Semaphore {
	return Semaphore{C: c, Name: s.init.Name, Retries: 3, TrustScan: s.defect == "trust-scan"}
}

func (s *server) acquire(request) (reply, error) {
	c, err := s.connected()
	if err != nil {
		return nil, err
	}
	slot, err := s.semaphore(c).Acquire()
	if err != nil {
		return nil, err
	}
	return reply{"type": "acquire_ok", "slot": slot}, nil
}

func (s *server) verify(req request) (reply, error) {
	slot, err := req.intField("slot", 1)
	if err != nil {
		return nil, err
	}
	held := false
	if s.client != nil {
		if held, err = s.semaphore(s.client).Verify(slot); err != nil {
			return nil, err
		}
	}
	return reply{"type": "verify_ok", "held": held}, nil
}

func (s *server) release(req request) (reply, error) {
	slot, err := req.intField("slot", 1)
	if err != nil {
		return nil, err
	}
	c, err := s.holder()
	if err == nil {
		err = s.semaphore(c).Release(slot)
	}
	if err != nil {
		return nil, err
	}
	return reply{"type": "release_ok"}, nil
}

// admin runs op on an Admin of the lock.
func (s *server) admin(op func(Admin) (reply, error)) (reply, error) {
	c, err := s.connected()
	if err != nil {
		return nil, err
	}
	return op(Admin{C: c, Name: s.init.Name, Retries: 3, Poll: 100 * time.Millisecond})
}

func (s *server) create(req request) (reply, error) {
	slots, err := req.intField("slots", 0)
	if err != nil {
		return nil, err
	}
	return s.admin(func(a Admin) (reply, error) {
		if err := a.Create(slots); err != nil {
			return nil, err
		}
		return reply{"type": "create_ok"}, nil
	})
}

func (s *server) change(req request) (reply, error) {
	delta, err := req.intField("delta")
	if err != nil {
		return nil, err
	}
	return s.admin(func(a Admin) (reply, error) {
		from, to, err := a.Change(delta)
		if err != nil {
			return nil, err
		}
		return reply{"type": "change_ok", "from": from, "to": to}, nil
	})
}

func (s *server) count(request) (reply, error) {
	return s.admin(func(a Admin) (reply, error) {
		n, err := a.Count()
		if err != nil {
			return nil, err
		}
		return reply{"type": "count_ok", "slots": n}, nil
	})
}

func (s *server) wait(req request) (reply, error) {
	slot, err := req.intField("slot", 1)
	if err != nil {
		return nil, err
	}
	return s.admin(func(a Admin) (reply, error) {
		if err := a.Wait(slot); err != nil {
			return nil, err
		}
		return reply{"type": "wait_ok"}, nil
	})
}

func (s *server) destroy(request) (reply, error) {
	return s.admin(func(a Admin) (reply, error) {
		from, err := a.Destroy()
		if err != nil {
			return nil, err
		}
		return reply{"type": "destroy_ok", "from": from}, nil
	})
}

func (s *server) mutex(c *Client) Mutex { return Mutex{C: c, Name: s.init.Name} }

func (s *server) mutexAcquire(request) (reply, error) {
	c, err := s.connected()
	if err == nil {
		err = s.mutex(c).Acquire()
	}
	if err != nil {
		return nil, err
	}
	return reply{"type": "acquire_ok"}, nil
}

func (s *server) mutexVerify(request) (reply, error) {
	held := false
	if s.client != nil {
		var err error
		if held, err = s.mutex(s.client).Verify(); err != nil {
			return nil, err
		}
	}
	return reply{"type": "verify_ok", "held": held}, nil
}

func (s *server) mutexRelease(request) (reply, error) {
	c, err := s.holder()
	if err == nil {
		err = s.mutex(c).Release()
	}
	if err != nil {
		return nil, err
	}
	return reply{"type": "release_ok"}, nil
}
