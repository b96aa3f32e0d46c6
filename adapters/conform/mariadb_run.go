package conform

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Running a DBSeq: what both sides share. A seqRun sends the steps one at
// a time through a runDriver (mariadbsim's or MariaDB's), which reports each
// statement's outcome through complete when the statement ends, and
// settles after each step until every connection is idle or waits for a
// row lock.

// A DBStep is one step as run: its label ("1", "2", ... for the
// sequence's ops, "end1", "end2", ... for the rounds of closing
// ROLLBACKs, "probe" for the reads after them), the op, and what came of
// it.
type DBStep struct {
	Label   string
	Op      DBOp
	Outcome string
}

func (s DBStep) String() string { return s.Label + " " + s.Op.String() + " -> " + s.Outcome }

// dbLockWait is innodb_lock_wait_timeout on both sides: far longer than
// any wait of a sequence, so that none times out.
const dbLockWait = 30 * time.Second

// A runDriver runs the steps of a seqRun on one side.
type runDriver interface {
	// start sends step i on its connection; its outcome comes back
	// through seqRun.complete, now or later.
	start(i int)
	// settle returns once every connection is idle or waits for a row
	// lock.
	settle() error
}

// seqRun is the side-independent state of one run of a sequence.
type seqRun struct {
	seq     DBSeq
	prefix  string
	steps   []DBStep
	busy    []int      // the step each connection runs, or -1
	inTx    []bool     // whether each connection is in a transaction
	backlog [][]DBStep // each connection's steps not sent yet
	cur     int        // the step being sent and settled
}

// check refuses a sequence the runners cannot run.
func (s DBSeq) check() error {
	if s.Conns < 1 {
		return fmt.Errorf("conform: a sequence of %d connections", s.Conns)
	}
	for i, o := range s.Ops {
		if o.Conn < 0 || o.Conn >= s.Conns {
			return fmt.Errorf("conform: step %d: connection %d of %d", i+1, o.Conn, s.Conns)
		}
		if _, ok := dbStatements[o.Stmt]; !ok && o.Stmt != opBegin {
			return fmt.Errorf("conform: step %d: no statement %q", i+1, o.Stmt)
		}
	}
	return nil
}

func newSeqRun(seq DBSeq, prefix string) *seqRun {
	r := &seqRun{seq: seq, prefix: prefix, busy: make([]int, seq.Conns), inTx: make([]bool, seq.Conns), backlog: make([][]DBStep, seq.Conns)}
	for c := range r.busy {
		r.busy[c] = -1
	}
	return r
}

// complete records step i's outcome: as it is if the statement ended
// while its own step settled, after "waits; ended at <step>: " if it
// waited and ended later. It keeps track of transactions as the server
// does: begin opens one, COMMIT, ROLLBACK and DDL (its implicit COMMIT)
// close it, and so does a deadlock (the victim's transaction rolls back).
func (r *seqRun) complete(i int, out string) {
	st := &r.steps[i]
	if i == r.cur {
		st.Outcome = out
	} else {
		st.Outcome = "waits; ended at " + r.steps[r.cur].Label + ": " + out
	}
	c := st.Op.Conn
	r.busy[c] = -1
	switch st.Op.Stmt {
	case opBegin:
		r.inTx[c] = out == "ok"
	case "COMMIT", "ROLLBACK", "createKeys", "createTokens", "createSlots":
		r.inTx[c] = false
	}
	if strings.HasPrefix(out, "error 1213 ") {
		r.inTx[c] = false
	}
}

// skip says why op is not sent, or "".
func (r *seqRun) skip(op DBOp) string {
	switch {
	case op.Stmt == opBegin && r.inTx[op.Conn]:
		return "skipped: in a transaction"
	case txOnly[op.Stmt] && !r.inTx[op.Conn]:
		return "skipped: not in a transaction"
	}
	return ""
}

// step is the next step of the sequence: op, labelled label. A
// connection sends its steps in order, each once the one before has
// ended: a step for a connection whose statement waits joins its
// backlog, and is sent as soon as that statement ends (in the order of
// the connections, after the step in which it ended).
func (r *seqRun) step(d runDriver, label string, op DBOp) error {
	r.backlog[op.Conn] = append(r.backlog[op.Conn], DBStep{Label: label, Op: op})
	for {
		sent := false
		for c := range r.seq.Conns {
			if r.busy[c] >= 0 || len(r.backlog[c]) == 0 {
				continue
			}
			next := r.backlog[c][0]
			r.backlog[c] = r.backlog[c][1:]
			if err := r.send(d, next); err != nil {
				return err
			}
			sent = true
		}
		if !sent {
			return nil
		}
	}
}

// send sends st and settles.
func (r *seqRun) send(d runDriver, st DBStep) error {
	r.steps = append(r.steps, st)
	i := len(r.steps) - 1
	if why := r.skip(st.Op); why != "" {
		r.steps[i].Outcome = why
		return nil
	}
	r.cur = i
	r.busy[st.Op.Conn] = i
	d.start(i)
	if err := d.settle(); err != nil {
		return err
	}
	if r.busy[st.Op.Conn] == i {
		r.steps[i].Outcome = "waits"
	}
	return nil
}

// waiting says whether a statement still waits.
func (r *seqRun) waiting() bool {
	for _, i := range r.busy {
		if i >= 0 {
			return true
		}
	}
	return false
}

// drive runs the sequence, then ends every transaction, then probes.
func (r *seqRun) drive(d runDriver) error {
	for i, op := range r.seq.Ops {
		if err := r.step(d, strconv.Itoa(i+1), op); err != nil {
			return err
		}
	}
	// The end: ROLLBACK every idle connection in a transaction, in rounds,
	// until no statement waits and no step is left. A waiting statement
	// waits for a transaction that is open, and the holders at the ends
	// of the waits-for chains are idle (there are no cycles: deadlocks are
	// detected), so each round ends some waits; after a round that ends
	// none, the next rolls back every idle connection, and if that ends
	// none either, the run gives up (the outcomes stay "waits").
	for round, all := 1, false; ; round++ {
		before := slices.Clone(r.busy)
		for c := range r.seq.Conns {
			if r.busy[c] < 0 && (r.inTx[c] || all) {
				if err := r.step(d, "end"+strconv.Itoa(round), DBOp{Conn: c, Stmt: "ROLLBACK"}); err != nil {
					return err
				}
			}
		}
		if !r.waiting() {
			if !slices.ContainsFunc(r.inTx, func(b bool) bool { return b }) {
				break
			}
			continue // the backlogs opened transactions
		}
		if slices.Equal(before, r.busy) {
			if all {
				break
			}
			all = true
		} else {
			all = false
		}
	}
	// What every key was left with, read on connection 0.
	times := []string{""}
	if r.seq.ClientClock {
		times = []string{clientTime(time.Second), clientTime(2 * time.Second), clientTime(3 * time.Second)}
	}
	for _, key := range dbKeys {
		probes := []DBOp{{Stmt: "selectKey", Args: []any{key}}}
		if r.seq.Design == "row-per-slot" {
			probes = append(probes, DBOp{Stmt: "countSlots", Args: []any{key}})
		}
		for _, t := range times {
			name := "countLive"
			if r.seq.Design == "row-per-slot" {
				name = "peekSlot"
			}
			args := []any{key}
			if t != "" {
				args = append(args, t)
			}
			probes = append(probes, DBOp{Stmt: name, Args: args})
		}
		for _, p := range probes {
			if err := r.step(d, "probe", p); err != nil {
				return err
			}
		}
	}
	return nil
}

// execStep runs op on c and returns its outcome: the rows of a query
// ("[[2 master-row]]", "[]"), rows affected and LAST_INSERT_ID of any other
// statement ("n=1 id=0"; "ok" for begin), or the error ("error 1062
// (23000): Duplicate entry ...").
func execStep(ctx context.Context, c *sql.Conn, op DBOp, prefix string, clientClock bool) string {
	q, err := op.text(prefix, clientClock)
	if err != nil {
		return "error: " + err.Error()
	}
	if op.Stmt == opBegin {
		if _, err := c.ExecContext(ctx, q); err != nil {
			return errorOutcome(err)
		}
		if _, err := c.ExecContext(ctx, "START TRANSACTION"); err != nil {
			return errorOutcome(err)
		}
		return "ok"
	}
	if st, ok := dbStatements[op.Stmt]; ok && st.Query {
		return query(ctx, c, q, op.Args)
	}
	res, err := c.ExecContext(ctx, q, op.Args...)
	if err != nil {
		return errorOutcome(err)
	}
	n, _ := res.RowsAffected()
	id, _ := res.LastInsertId()
	return fmt.Sprintf("n=%d id=%d", n, id)
}

func query(ctx context.Context, c *sql.Conn, q string, args []any) string {
	rs, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		return errorOutcome(err)
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return errorOutcome(err)
	}
	out := [][]string{}
	for rs.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return errorOutcome(err)
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = string(v)
			if v == nil {
				row[i] = "NULL"
			}
		}
		out = append(out, row)
	}
	if err := rs.Err(); err != nil {
		return errorOutcome(err)
	}
	return fmt.Sprint(out)
}

func errorOutcome(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("error %d (%s): %s", me.Number, me.SQLState, me.Message)
	}
	return "error: " + err.Error()
}
