package prover

import (
	"slices"
	"sync"
)

// What runs on real servers have made and will remove, until they do.
var leftovers struct {
	sync.Mutex
	next int
	m    map[int]string
}

// Leave notes what a run on a real server has made and will remove (a
// lock's queues, a run's tables) until release is called, so that a
// process that must exit before then (a second Ctrl-C) can say what it
// leaves behind (LeftBehind). Call release once the thing is gone.
func Leave(what string) (release func()) {
	leftovers.Lock()
	defer leftovers.Unlock()
	if leftovers.m == nil {
		leftovers.m = map[int]string{}
	}
	id := leftovers.next
	leftovers.next++
	leftovers.m[id] = what
	return func() {
		leftovers.Lock()
		defer leftovers.Unlock()
		delete(leftovers.m, id)
	}
}

// LeftBehind lists, sorted, what Leave noted and was not released yet.
func LeftBehind() []string {
	leftovers.Lock()
	defer leftovers.Unlock()
	var out []string
	for _, w := range leftovers.m {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}
