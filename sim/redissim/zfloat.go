package redissim

import (
	"errors"
	"math"
	"strconv"
)

// Scores of sorted sets, read and written as Redis 7.0 reads and writes
// them: read by C's strtod (util.c, object.c, t_zset.c), written by
// "%.17g" (addReplyDouble).

var (
	errNotFloat      = Error("ERR value is not a valid float")
	errRangeNotFloat = Error("ERR min or max is not a float")
)

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c >= '\t' && c <= '\r'
}

// prefixFold says whether s begins with the lower-case ASCII word w, in
// any case.
func prefixFold(s, w string) bool {
	if len(s) < len(w) {
		return false
	}
	for i := 0; i < len(w); i++ {
		if s[i]|0x20 != w[i] {
			return false
		}
	}
	return true
}

// digits is how many bytes from s[i] on are digits (hex digits if hex).
func digits(s string, i int, hex bool) int {
	n := 0
	for ; i+n < len(s); n++ {
		c := s[i+n]
		if !('0' <= c && c <= '9' || hex && ('a' <= c|0x20 && c|0x20 <= 'f')) {
			break
		}
	}
	return n
}

// strtod is C's (glibc's) strtod on s: the number the longest prefix of
// s that reads as one stands for (white space before it skipped), how
// many bytes it took (0 if none: the number is then 0), and whether the
// number overflowed to an infinity or underflowed to zero (errno ERANGE
// with such a value, which Redis refuses where a score is given).
func strtod(s string) (f float64, n int, outOfRange bool) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	sign := i
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	inf := 1
	if i > sign && s[sign] == '-' {
		inf = -1
	}
	switch {
	case prefixFold(s[i:], "infinity"):
		return math.Inf(inf), i + 8, false
	case prefixFold(s[i:], "inf"):
		return math.Inf(inf), i + 3, false
	case prefixFold(s[i:], "nan"):
		return math.NaN(), i + 3, false
	}
	hex := prefixFold(s[i:], "0x") && (digits(s, i+2, true) > 0 || i+3 < len(s) && s[i+2] == '.' && digits(s, i+3, true) > 0)
	j := i
	if hex {
		j += 2
	}
	intPart := digits(s, j, hex)
	j += intPart
	frac := 0
	if j < len(s) && s[j] == '.' {
		frac = digits(s, j+1, hex)
		if intPart+frac > 0 {
			j += 1 + frac
		}
	}
	if intPart+frac == 0 {
		return 0, 0, false
	}
	mant := s[i:j]
	k := expEnd(s, j, hex)
	text := s[sign:k]
	if hex && k == j {
		text += "p0" // Go reads a hexadecimal number only with its exponent
	}
	j = k
	f, err := strconv.ParseFloat(text, 64)
	if errors.Is(err, strconv.ErrRange) {
		return f, j, true
	}
	return f, j, f == 0 && nonzero(mant)
}

// expEnd is where the exponent that begins at s[j] ends (e or p, a sign,
// digits), j if there is none.
func expEnd(s string, j int, hex bool) int {
	mark := byte('e')
	if hex {
		mark = 'p'
	}
	if j >= len(s) || s[j]|0x20 != mark {
		return j
	}
	k := j + 1
	if k < len(s) && (s[k] == '+' || s[k] == '-') {
		k++
	}
	if n := digits(s, k, false); n > 0 {
		return k + n
	}
	return j
}

// nonzero says whether a mantissa has a digit other than 0 (its 0x
// aside).
func nonzero(mant string) bool {
	if prefixFold(mant, "0x") {
		mant = mant[2:]
	}
	for i := 0; i < len(mant); i++ {
		if c := mant[i]; c != '0' && c != '.' {
			return true
		}
	}
	return false
}

// parseScore reads a score as ZADD does (getDoubleFromObject): the whole
// argument a number, no white space before it, neither out of range nor
// NaN.
func parseScore(s string) (float64, error) {
	if s == "" || isSpace(s[0]) {
		return 0, errNotFloat
	}
	f, n, oor := strtod(s)
	if n != len(s) || oor || math.IsNaN(f) {
		return 0, errNotFloat
	}
	return f, nil
}

// A scoreRange is a range of scores (zrangespec), each end inclusive
// unless ex.
type scoreRange struct {
	min, max     float64
	minEx, maxEx bool
}

// parseBound reads one end of a range as zslParseRange does: "(" first
// makes it exclusive; strtod must read up to the end (the argument's
// first NUL byte, C's end of string), so white space before the number
// is allowed, the empty string is 0 and an overflow is an infinity; NaN
// is not a number.
func parseBound(s string) (f float64, ex bool, ok bool) {
	if s != "" && s[0] == '(' {
		s, ex = s[1:], true
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			s = s[:i]
			break
		}
	}
	f, n, _ := strtod(s)
	return f, ex, n == len(s) && !math.IsNaN(f)
}

// parseRange reads min and max as ZREMRANGEBYSCORE and ZCOUNT do.
func parseRange(min, max string) (scoreRange, error) {
	var r scoreRange
	var ok1, ok2 bool
	r.min, r.minEx, ok1 = parseBound(min)
	r.max, r.maxEx, ok2 = parseBound(max)
	if !ok1 || !ok2 {
		return r, errRangeNotFloat
	}
	return r, nil
}

// holds says whether the range holds score.
func (r scoreRange) holds(score float64) bool {
	aboveMin := score > r.min || !r.minEx && score >= r.min
	belowMax := score < r.max || !r.maxEx && score <= r.max
	return aboveMin && belowMax
}

// formatScore is a score as Redis 7.0 replies it: "inf", "-inf", or
// "%.17g" ("1.5", "1", "1e+20", "0.10000000000000001").
func formatScore(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}
