package bench

import "testing"

// Beyond names what a series sent beyond its floor's, per operation, and
// says none when they sent the same.
func TestBeyond(t *testing.T) {
	ref := &Series{Sent: []map[string]int{{"GET": 2, "PUT": 1}, {"GET": 2, "PUT": 1}}}
	for _, c := range []struct {
		floor *Series
		want  string
	}{
		{&Series{Sent: []map[string]int{{"GET": 2, "PUT": 1}}}, "none"},
		{&Series{Sent: []map[string]int{{"GET": 1, "PUT": 1}}}, "+1 GET"},
		{&Series{Sent: []map[string]int{{"GET": 2, "PUT": 1, "DELETE": 1}, {"GET": 2, "PUT": 2}}}, "-0.50 DELETE, -0.50 PUT"},
		{nil, "+2 GET, +1 PUT"},
		{&Series{Sent: []map[string]int{{"GET": 1}, {"GET": 1}, {"GET": 1}, {"GET": 1}, {"GET": 1}, {"GET": 1}, {"GET": 1}, {"GET": 1}, {"GET": 1}, {"GET": 1}, {"PUT": 10}}}, "+1.09 GET, +0.09 PUT"},
	} {
		if got := Beyond(ref, c.floor); got != c.want {
			t.Errorf("Beyond(%v) = %q, want %q", c.floor, got, c.want)
		}
	}
}
