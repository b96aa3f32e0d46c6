package lease

// A Step is one line of a lease client's script in a plan, as the lease
// families that need no more write it (redlock, consul-semaphore):
// acquire, refresh, verify or release (the lease the client believes it
// holds; skipped when that makes no sense), or sleep Ms milliseconds.
type Step struct {
	Op string `json:"op"`
	Ms int    `json:"ms,omitempty"`
}

// Sleep is a plan's word for a pause between operations.
const Sleep = "sleep"

// WithinOps is script up to its ops-th operation (sleeps aside), without
// the sleep that would follow it: a drawn script keeps to --ops.
func WithinOps(script []Step, ops int) []Step {
	n := 0
	for i, s := range script {
		if s.Op == Sleep {
			continue
		}
		if n++; n == ops {
			return script[:i+1]
		}
	}
	return script
}
