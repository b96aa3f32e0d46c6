package histories

import "strconv"

// AsLease returns a history that ReadEDN or ReadAnyFile imported from
// Jepsen (true mutexes) as the history of lease locks: the lens for a lock
// known to be lease-based, under which a hold may end when its lease can
// have run out. Each acquire asks for a lease of max 1 and ttl ttlMs (the
// lock's, which a Jepsen history does not record); its ok grants the token
// "pN/k", its process's k-th acquire; each release names the token of its
// process's last acquire ("pN/0" if there was none). Faults and errors are
// kept; indexes, and so an Imported's lines, are unchanged. The events are
// new; h is not modified.
func AsLease(h []Event, ttlMs int) []Event {
	out := make([]Event, len(h))
	acquires := map[string]int{}
	for i, e := range h {
		if e.Kind != Mutex {
			out[i] = e
			continue
		}
		e.Kind = Lease
		token := e.Process + "/" + strconv.Itoa(acquires[e.Process])
		switch {
		case e.F == Acquire && e.Type == Invoke:
			acquires[e.Process]++
			e.Value = &Value{Max: Int(1), TTLMs: Int(ttlMs)}
		case e.F == Acquire && e.Type == Ok:
			e.Value = &Value{Token: token}
		case e.F == Release && e.Type == Invoke:
			e.Value = &Value{Token: token}
		default:
			e.Value = nil
		}
		out[i] = e
	}
	return out
}
