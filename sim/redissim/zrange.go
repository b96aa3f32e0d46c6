package redissim

import (
	"fmt"
	"slices"
	"strings"
)

// ZRANGE and ZRANGEBYSCORE, as Redis 7.0's zrangeGenericCommand reads and
// answers them: by rank or by score, forward or reversed, with LIMIT and
// WITHSCORES. BYLEX is not modelled.

var (
	errLimitRank   = Error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
	errBylexScores = Error("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
)

// zrangeOpts are a range's options; limit -1 is none.
type zrangeOpts struct {
	byScore, byLex, rev, withScores bool
	offset, limit                   int64
}

// cmdZrange is ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset
// count] [WITHSCORES].
func cmdZrange(s *server, args []string) Result { return zrange(s, args, false) }

// cmdZrangebyscore is ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT
// offset count].
func cmdZrangebyscore(s *server, args []string) Result { return zrange(s, args, true) }

// parseZrange reads a range's options, as Redis does, in any order after
// the key and the two ends; then refuses those that do not go together.
func parseZrange(args []string, byScore bool) (zrangeOpts, error) {
	o := zrangeOpts{byScore: byScore, limit: -1}
	auto := !byScore // ZRANGE's direction and kind are its options' to say
	for j := 4; j < len(args); j++ {
		w := strings.ToUpper(args[j])
		switch {
		case w == "WITHSCORES":
			o.withScores = true
		case w == "LIMIT" && len(args)-j-1 >= 2:
			var ok bool
			if o.offset, ok = integer(args[j+1]); !ok {
				return o, errNotInteger
			}
			if o.limit, ok = integer(args[j+2]); !ok {
				return o, errNotInteger
			}
			j += 2
		case auto && !o.rev && w == "REV":
			o.rev = true
		case auto && !o.byScore && !o.byLex && w == "BYSCORE":
			o.byScore = true
		case auto && !o.byScore && !o.byLex && w == "BYLEX":
			o.byLex = true
		default:
			return o, errSyntax
		}
	}
	switch {
	case o.limit != -1 && !o.byScore && !o.byLex:
		return o, errLimitRank
	case o.withScores && o.byLex:
		return o, errBylexScores
	}
	return o, nil
}

// zrange answers ZRANGE (byScore false) or ZRANGEBYSCORE: the members in
// the range, in order (reversed with REV), each followed by its score
// with WITHSCORES. The options and the range are read before the key is
// looked at.
func zrange(s *server, args []string, byScore bool) Result {
	o, err := parseZrange(args, byScore)
	if err != nil {
		return Result{Err: err}
	}
	if o.byLex {
		s.unmodelled("ZRANGE BYLEX", fmt.Errorf("redissim: %s: ZRANGE BYLEX is not modelled: %s", s.name, Describe(args)))
		return Result{Err: errSyntax}
	}
	var r scoreRange
	var start, end int64
	if o.byScore {
		lo, hi := args[2], args[3]
		if o.rev {
			lo, hi = hi, lo
		}
		if r, err = parseRange(lo, hi); err != nil {
			return Result{Err: err}
		}
	} else {
		var ok1, ok2 bool
		start, ok1 = integer(args[2])
		end, ok2 = integer(args[3])
		if !ok1 || !ok2 {
			return Result{Err: errNotInteger}
		}
	}
	e, err := s.zsetOf(args[1])
	if err != nil {
		return Result{Err: err}
	}
	if e == nil {
		return Result{Val: []any{}}
	}
	ms := e.zset.sorted()
	if o.rev {
		slices.Reverse(ms)
	}
	if o.byScore {
		ms = byScores(ms, r, o.offset, o.limit)
	} else {
		ms = byRank(ms, start, end)
	}
	out := []any{}
	for _, m := range ms {
		out = append(out, m.member)
		if o.withScores {
			out = append(out, formatScore(m.score))
		}
	}
	return Result{Val: out}
}

// byRank is ms from start to end, both included, negative counting from
// the end, as genericZrangebyrankCommand clamps them.
func byRank(ms []zmember, start, end int64) []zmember {
	n := int64(len(ms))
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start = max(start, 0)
	if start > end || start >= n {
		return nil
	}
	return ms[start : min(end, n-1)+1]
}

// byScores is those of ms in r, after the first offset of them (a
// negative offset leaves none), at most limit of them (negative: all).
func byScores(ms []zmember, r scoreRange, offset, limit int64) []zmember {
	var in []zmember
	for _, m := range ms {
		if r.holds(m.score) {
			in = append(in, m)
		}
	}
	if offset < 0 || offset >= int64(len(in)) {
		return nil
	}
	in = in[offset:]
	if limit >= 0 && limit < int64(len(in)) {
		in = in[:limit]
	}
	return in
}
