package mariadb

import "strings"

// Statement kinds, the keys of Counts.Statements. Kind maps a statement's
// text to one of them.
const (
	KindSelect   = "select"
	KindInsert   = "insert"
	KindUpdate   = "update"
	KindDelete   = "delete"
	KindBegin    = "begin"
	KindCommit   = "commit"
	KindRollback = "rollback"
	KindSet      = "set"
	KindCreate   = "create"
	KindDrop     = "drop"
	KindOther    = "other"
)

// Kinds lists every kind Kind returns.
var Kinds = []string{KindSelect, KindInsert, KindUpdate, KindDelete, KindBegin, KindCommit,
	KindRollback, KindSet, KindCreate, KindDrop, KindOther}

// Kind is the kind of a statement, from its first keyword after blanks,
// comments and opening parentheses (the code inside a MySQL executable
// comment, /*! ... */ or /*M! ... */, counts as text): SELECT, WITH,
// VALUES and TABLE are KindSelect; INSERT and REPLACE are KindInsert;
// UPDATE, DELETE, COMMIT, ROLLBACK (ROLLBACK TO SAVEPOINT too), SET
// (SET TRANSACTION, SET NAMES, SET @@timestamp ... too), CREATE and DROP
// are their own kinds; BEGIN (but not BEGIN NOT ATOMIC, a compound
// statement) and START TRANSACTION are KindBegin; anything else is
// KindOther. Only the first statement of a multi-statement text counts.
//
// The proxy counts the statements it sees with Kind; a simulator that
// counts its statements with Kind too counts them the same way.
func Kind(sql string) string {
	w, rest := firstWord(sql)
	switch w {
	case "SELECT", "WITH", "VALUES", "TABLE":
		return KindSelect
	case "INSERT", "REPLACE":
		return KindInsert
	case "UPDATE":
		return KindUpdate
	case "DELETE":
		return KindDelete
	case "COMMIT":
		return KindCommit
	case "ROLLBACK":
		return KindRollback
	case "SET":
		return KindSet
	case "CREATE":
		return KindCreate
	case "DROP":
		return KindDrop
	case "BEGIN":
		if w2, _ := firstWord(rest); w2 == "NOT" {
			return KindOther
		}
		return KindBegin
	case "START":
		if w2, _ := firstWord(rest); w2 == "TRANSACTION" {
			return KindBegin
		}
	}
	return KindOther
}

// firstWord is the first keyword of s, upper-cased, and what follows it.
func firstWord(s string) (string, string) {
	s = skipNoise(s)
	i := 0
	for i < len(s) && (isLetter(s[i]) || i > 0 && (s[i] == '_' || s[i] >= '0' && s[i] <= '9')) {
		i++
	}
	return strings.ToUpper(s[:i]), s[i:]
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// skipNoise drops leading blanks, comments and opening parentheses; an
// executable comment's opening (and version number) is dropped and its
// code kept.
func skipNoise(s string) string {
	for {
		t := strings.TrimLeft(s, " \t\r\n\f\v(")
		switch {
		case strings.HasPrefix(t, "/*!"), strings.HasPrefix(t, "/*M!"):
			t = t[strings.IndexByte(t, '!')+1:]
			t = strings.TrimLeft(t, "0123456789")
		case strings.HasPrefix(t, "/*"):
			end := strings.Index(t[2:], "*/")
			if end < 0 {
				return ""
			}
			t = t[2+end+2:]
		case strings.HasPrefix(t, "--") && (len(t) == 2 || t[2] <= ' '), strings.HasPrefix(t, "#"):
			end := strings.IndexByte(t, '\n')
			if end < 0 {
				return ""
			}
			t = t[end+1:]
		}
		if t == s {
			return s
		}
		s = t
	}
}
