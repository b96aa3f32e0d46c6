package leaserun

import "github.com/lockprover/lockprover/internal/prover"

// Limits are the choices of the clients' own limits in an exhaustive
// search of a semaphore: with two clients or more, every choice of each
// client's, 1 or 2 (clients that disagree on the limit are what an
// agreement on it is for); one client has the plan's (a nil choice).
func Limits(clients int) [][]int {
	if clients < 2 {
		return [][]int{nil}
	}
	return prover.Product([]int{1, 2}, clients)
}
