package mariadbsim

import (
	"fmt"
	"strings"
)

// The server's statements, for tools that send the same statements to a
// real server too (package adapters/conform compares the answers): one
// definition, the templates of statements.go, which TestStatementsAreDbsems
// holds to dbsem's sql.go word for word.

// A Statement is one of the statements the server knows.
type Statement struct {
	// Name is dbsem's name for it in model/dbsem/sql.go ("lockMaster", ...), or
	// the text of a transaction statement ("START TRANSACTION", "COMMIT",
	// "ROLLBACK", "SET TRANSACTION ISOLATION LEVEL READ COMMITTED").
	Name string
	// Params names its parameters in order: key, token, design, max, us,
	// fence, num, and now for each {now} (a parameter only with a client
	// clock; see StatementText). A multi-row INSERT has none here: it takes
	// one key per row.
	Params []string
	// Query says whether it returns rows (a SELECT).
	Query bool
	// MultiRow marks the INSERTs of rows "(?, 0), (?, 1), ...".
	MultiRow bool
	// Clock says whether its text has a {now}.
	Clock bool
}

// Statements lists every statement the server knows, in the order of
// dbsem's sql.go, the transaction statements last.
func Statements() []Statement {
	out := make([]Statement, 0, len(templates))
	for _, t := range templates {
		out = append(out, Statement{
			Name:     t.name,
			Params:   append([]string(nil), t.names...),
			Query:    t.cols != nil,
			MultiRow: t.multi,
			Clock:    strings.Contains(t.text, "{now}"),
		})
	}
	return out
}

// StatementText is the text of statement name for the tables prefixed
// prefix (written `<prefix>keys`, ...), its {now} written as
// UTC_TIMESTAMP(6) (the database's clock, as dbsem sends it) or, with
// clientClock, as a ? parameter (as Defects.ClientClockExpiry sends it:
// a "2006-01-02 15:04:05.000000" string). A multi-row INSERT lists rows
// rows, "(?, 0), ..., (?, rows-1)"; rows is ignored otherwise.
func StatementText(name, prefix string, clientClock bool, rows int) (string, error) {
	if !validPrefix(prefix) {
		return "", fmt.Errorf("sqlsim: table prefix %q: letters, digits and '_' only, at most 50", prefix)
	}
	for _, t := range templates {
		if t.name != name {
			continue
		}
		s := t.text
		if t.multi {
			if rows < 1 {
				return "", fmt.Errorf("sqlsim: %s of %d rows", name, rows)
			}
			var b strings.Builder
			b.WriteString(s)
			for i := range rows {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "(?, %d)", i)
			}
			s = b.String()
		}
		for _, suffix := range shapeSuffix {
			s = strings.ReplaceAll(s, "{"+suffix+"}", "`"+prefix+suffix+"`")
		}
		clock := "UTC_TIMESTAMP(6)"
		if clientClock {
			clock = "?"
		}
		return strings.ReplaceAll(s, "{now}", clock), nil
	}
	return "", fmt.Errorf("sqlsim: no statement %q", name)
}
