package redisserve

import "testing"

// A replay's command matches its logged step where it differs only in
// words drawn anew (as long as the log's, at least minDrawn bytes), each
// paired with one word of the log's for the whole run, both ways.
func TestDrawnWords(t *testing.T) {
	var d drawnWords
	for _, c := range []struct {
		want, got string
		match     bool
	}{
		{"s0 GET lp", "s0 GET lp", true},
		{"s0 SET lp aaaaaaaaaaaaaaaa NX PX 2000", "s0 SET lp bbbbbbbbbbbbbbbb NX PX 2000", true},
		{"s0 SET lp aaaaaaaaaaaaaaaa NX PX 2000", "s0 SET lp bbbbbbbbbbbbbbbb NX PX 3000", false},                     // a short word differs
		{"s0 SET lp aaaaaaaaaaaaaaaa NX PX 2000", "s0 SET lp bbbbbbbb NX PX 2000", false},                             // not as long
		{"s0 SET lp aaaaaaaaaaaaaaaa NX PX 2000", "s0 SET lp cccccccccccccccc NX PX 2000", false},                     // the log's word is b's
		{"s0 SET lp dddddddddddddddd NX PX 2000", "s0 SET lp bbbbbbbbbbbbbbbb NX PX 2000", false},                     // b is the log's a
		{"s0 EVALSHA x 1 lp aaaaaaaaaaaaaaaa", "s0 EVALSHA x 1 lp bbbbbbbbbbbbbbbb", true},                            // the pairing holds on
		{"s0 SET lp dddddddddddddddd NX PX 2000", "s0 SET lp eeeeeeeeeeeeeeee NX", false},                             // not as many words
		{"s0 MSET k1 ffffffffffffffff k2 ffffffffffffffff", "s0 MSET k1 gggggggggggggggg k2 hhhhhhhhhhhhhhhh", false}, // one word, two
	} {
		if got := d.matches(c.want, c.got); got != c.match {
			t.Errorf("matches(%q, %q) = %v, want %v", c.want, c.got, got, c.match)
		}
	}
}
