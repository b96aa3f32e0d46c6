package prover

// A Scope is what every family's Config says of the plans it draws: the
// mutant proven instead of the reference, how many clients and operations
// a plan may have, which faults it may hold and how many. A family's
// Config embeds it, and its defaults (Defaults) are every family's.
type Scope struct {
	Mutant    string   // a mutant of the reference to prove instead
	Clients   int      // at most this many clients; 0 means 3
	Ops       int      // at most this many steps per client (the family says whether a sleep is one); 0 means 8
	Faults    []string // the faults plans may hold; nil means every fault, empty means none
	MaxFaults int      // at most this many faults per plan; 0 means 3
}

// Defaults is s with every field left zero given its default: 3 clients,
// 8 operations each, at most 3 faults a plan, and faults, the family's
// own default for the faults plans may hold (where s says none, nil).
func (s Scope) Defaults(faults []string) Scope {
	if s.Clients == 0 {
		s.Clients = 3
	}
	if s.Ops == 0 {
		s.Ops = 8
	}
	if s.Faults == nil {
		s.Faults = faults
	}
	if s.MaxFaults == 0 {
		s.MaxFaults = 3
	}
	return s
}
