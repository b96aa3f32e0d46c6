package redissim

import (
	"cmp"
	"slices"
	"strings"
)

// Sorted sets, as Redis 7.0 keeps them (t_zset.c): what npm
// redis-semaphore's Semaphore and RedlockSemaphore send (ZADD,
// ZREMRANGEBYSCORE, ZCARD and ZSCORE in their scripts, ZREM by itself),
// and beside them ZRANGE, ZRANGEBYSCORE, ZCOUNT and ZRANK. Members are
// ordered by score, then by their bytes; a set left with no member is no
// more.

// A zset is a sorted set's members and their scores. Its order is made
// when asked (sorted), never read from the map.
type zset struct {
	scores map[string]float64
	// big: Redis keeps it as a skip list (more than 128 members once, or
	// a member longer than 64 bytes), not a listpack. A listpack writes a
	// score as text, and reads -0 back as 0; a skip list keeps -0.
	big bool
}

// Redis 7.0's defaults: zset-max-listpack-entries, -value.
const (
	listpackEntries = 128
	listpackValue   = 64
)

// zsetCommand returns the sorted-set command of that name, nil if none.
func zsetCommand(name string) func(s *server, args []string) Result {
	switch name {
	case "ZADD":
		return cmdZadd
	case "ZCARD":
		return cmdZcard
	case "ZREM":
		return cmdZrem
	case "ZREMRANGEBYSCORE":
		return cmdZremrangebyscore
	case "ZSCORE":
		return cmdZscore
	case "ZCOUNT":
		return cmdZcount
	case "ZRANK":
		return cmdZrank
	case "ZRANGE":
		return cmdZrange
	case "ZRANGEBYSCORE":
		return cmdZrangebyscore
	}
	return nil
}

// A zmember is a member and its score.
type zmember struct {
	member string
	score  float64
}

// sorted is the set's members in Redis's order: by score, then by bytes.
func (z *zset) sorted() []zmember {
	out := make([]zmember, 0, len(z.scores))
	for m, sc := range z.scores {
		out = append(out, zmember{m, sc})
	}
	slices.SortFunc(out, func(a, b zmember) int {
		switch {
		case a.score < b.score:
			return -1
		case a.score > b.score:
			return 1
		}
		return cmp.Compare(a.member, b.member)
	})
	return out
}

// set gives member score, as zsetAdd stores it: a new member that would
// make a listpack too long, or too long a member, turns it into a skip
// list first.
func (z *zset) set(member string, score float64) {
	if _, ok := z.scores[member]; !ok && len(z.scores)+1 > listpackEntries || len(member) > listpackValue {
		z.big = true
	}
	if !z.big && score == 0 {
		score = 0 // -0 as a listpack reads it back
	}
	z.scores[member] = score
}

// show is the set as Keys shows it: <member:score ...> in its order.
func (z *zset) show() string {
	parts := []string{}
	for _, m := range z.sorted() {
		parts = append(parts, m.member+":"+formatScore(m.score))
	}
	return "<" + strings.Join(parts, " ") + ">"
}

// removed deletes the key of a set left empty, as Redis does.
func (s *server) removed(key string, e *entry) {
	if len(e.zset.scores) == 0 {
		delete(s.keys, key)
	}
}

// zaddFlags are ZADD's options.
type zaddFlags struct{ nx, xx, gt, lt, ch, incr bool }

// parseZadd reads ZADD's options, in any order before the first score,
// and checks them as Redis 7.0 does: the index of the first score, or
// the error.
func parseZadd(args []string) (f zaddFlags, first int, err error) {
	first = 2
	for ; first < len(args); first++ {
		switch strings.ToUpper(args[first]) {
		case "NX":
			f.nx = true
		case "XX":
			f.xx = true
		case "GT":
			f.gt = true
		case "LT":
			f.lt = true
		case "CH":
			f.ch = true
		case "INCR":
			f.incr = true
		default:
			goto pairs
		}
	}
pairs:
	n := len(args) - first
	switch {
	case n%2 != 0 || n == 0:
		return f, first, errSyntax
	case f.nx && f.xx:
		return f, first, Error("ERR XX and NX options at the same time are not compatible")
	case f.gt && f.nx || f.lt && f.nx || f.gt && f.lt:
		return f, first, Error("ERR GT, LT, and/or NX options at the same time are not compatible")
	case f.incr && n > 2:
		return f, first, Error("ERR INCR option supports a single increment-element pair")
	}
	return f, first, nil
}

// cmdZadd is ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member ...: the
// members added (with CH, added or changed); with INCR the member's new
// score, nil if the options left it alone. Every score is read before the
// key is looked at, so a bad one changes nothing.
func cmdZadd(s *server, args []string) Result {
	f, first, err := parseZadd(args)
	if err != nil {
		return Result{Err: err}
	}
	var pairs []zmember
	longest := 0
	for i := first; i < len(args); i += 2 {
		sc, err := parseScore(args[i])
		if err != nil {
			return Result{Err: err}
		}
		pairs = append(pairs, zmember{args[i+1], sc})
		longest = max(longest, len(args[i+1]))
	}
	e, err := s.typed(args[1], "zset")
	if err != nil {
		return Result{Err: err}
	}
	if e == nil {
		if f.xx {
			return zaddReply(f, 0, 0, nil)
		}
		e = &entry{zset: &zset{scores: map[string]float64{}, big: len(pairs) > listpackEntries || longest > listpackValue}}
		s.keys[args[1]] = e
	}
	added, changed := int64(0), int64(0)
	var last *float64
	for _, p := range pairs {
		sc, outcome := e.zset.add(p.member, p.score, f)
		switch outcome {
		case "nan":
			return Result{Err: Error("ERR resulting score is not a number (NaN)")}
		case "added":
			added++
		case "changed":
			changed++
		}
		if outcome != "nop" {
			last = &sc
		}
	}
	return zaddReply(f, added, changed, last)
}

// zaddReply is ZADD's answer: with INCR the score (nil if none was
// processed), else the count.
func zaddReply(f zaddFlags, added, changed int64, score *float64) Result {
	switch {
	case f.incr && score == nil:
		return Result{}
	case f.incr:
		return Result{Val: formatScore(*score)}
	case f.ch:
		return Result{Val: added + changed}
	}
	return Result{Val: added}
}

// add is zsetAdd: the member's score after, and what it did (added,
// changed, same, nop: the options left it alone; nan: INCR made NaN).
func (z *zset) add(member string, score float64, f zaddFlags) (float64, string) {
	cur, ok := z.scores[member]
	if !ok {
		if f.xx {
			return 0, "nop"
		}
		z.set(member, score)
		return score, "added"
	}
	if f.nx {
		return 0, "nop"
	}
	if f.incr {
		score += cur
		if score != score {
			return 0, "nan"
		}
	}
	if f.lt && score >= cur || f.gt && score <= cur {
		return 0, "nop"
	}
	if score == cur {
		return score, "same"
	}
	z.set(member, score)
	return score, "changed"
}

// zeroOr is an error's reply, or 0 if there is none (a missing key).
func zeroOr(err error) Result {
	if err != nil {
		return Result{Err: err}
	}
	return Result{Val: int64(0)}
}

// zsetOf is key's set: nil if there is none, WRONGTYPE if the key
// holds another type.
func (s *server) zsetOf(key string) (*entry, error) {
	return s.typed(key, "zset")
}

func cmdZcard(s *server, args []string) Result {
	e, err := s.zsetOf(args[1])
	if err != nil || e == nil {
		return zeroOr(err)
	}
	return Result{Val: int64(len(e.zset.scores))}
}

// cmdZscore is ZSCORE key member: its score as Redis formats it, nil if
// none.
func cmdZscore(s *server, args []string) Result {
	e, err := s.zsetOf(args[1])
	if err != nil || e == nil {
		return Result{Err: err}
	}
	if sc, ok := e.zset.scores[args[2]]; ok {
		return Result{Val: formatScore(sc)}
	}
	return Result{}
}

// cmdZrem is ZREM key member ...: how many of them were there.
func cmdZrem(s *server, args []string) Result {
	e, err := s.zsetOf(args[1])
	if err != nil || e == nil {
		return zeroOr(err)
	}
	n := int64(0)
	for _, m := range args[2:] {
		if _, ok := e.zset.scores[m]; ok {
			delete(e.zset.scores, m)
			n++
		}
	}
	s.removed(args[1], e)
	return Result{Val: n}
}

// cmdZremrangebyscore is ZREMRANGEBYSCORE key min max: how many members
// with a score in the range it removed. The range is read first.
func cmdZremrangebyscore(s *server, args []string) Result {
	r, err := parseRange(args[2], args[3])
	if err != nil {
		return Result{Err: err}
	}
	e, err := s.zsetOf(args[1])
	if err != nil || e == nil {
		return zeroOr(err)
	}
	n := int64(0)
	for _, m := range e.zset.sorted() {
		if r.holds(m.score) {
			delete(e.zset.scores, m.member)
			n++
		}
	}
	s.removed(args[1], e)
	return Result{Val: n}
}

// cmdZcount is ZCOUNT key min max: how many scores are in the range.
func cmdZcount(s *server, args []string) Result {
	r, err := parseRange(args[2], args[3])
	if err != nil {
		return Result{Err: err}
	}
	e, err := s.zsetOf(args[1])
	if err != nil || e == nil {
		return zeroOr(err)
	}
	n := int64(0)
	for _, sc := range e.zset.scores {
		if r.holds(sc) {
			n++
		}
	}
	return Result{Val: n}
}

// cmdZrank is ZRANK key member: its place from 0 in the set's order, nil
// if none.
func cmdZrank(s *server, args []string) Result {
	e, err := s.zsetOf(args[1])
	if err != nil || e == nil {
		return Result{Err: err}
	}
	for i, m := range e.zset.sorted() {
		if m.member == args[2] {
			return Result{Val: int64(i)}
		}
	}
	return Result{}
}
