// Package results is what a lockprover run found, in the forms CI systems
// read: a versioned JSON summary (Summary, WriteJSON, ReadJSON), JUnit XML
// (WriteJUnit) and the combination of shards' summaries into one result
// (Merge). It holds data only, so that a summary written by one lockprover
// can be read and merged by another without running anything.
package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Schema names this version of the summary's format. A reader refuses any
// other: a summary from a lockprover with another format is named, not
// misread.
const Schema = "lockprover-results/2"

// Results of a run, as Summary.Result gives them, and their exit codes.
const (
	Held         = "held"         // exit 0: every counted property held
	Violated     = "violated"     // exit 1: a counted property failed
	Failed       = "error"        // exit 2: the run could not be done (Summary.Error says why)
	Inconclusive = "inconclusive" // exit 3: nothing failed, but a check ran out of time
	Interrupted  = "interrupted"  // exit 130: stopped by SIGINT or SIGTERM
)

// Statuses of a property (Property.Status).
const (
	Pass      = "pass"
	Fail      = "fail"
	Undecided = "inconclusive"
	NotJudged = "not-judged"
)

// A Summary is one run of prove, check, replay or mutants --detect, or the
// merge of prove's shards. Fields that do not apply to a verb are left out
// of its JSON.
type Summary struct {
	Schema string `json:"schema"` // always Schema
	Verb   string `json:"verb"`   // prove, check, replay, mutants or merge
	// Target is where plans ran: sim or rabbitmq; Implementation is what
	// was proven, in words ("the reference", "mutant trust-scan", a
	// command).
	Target         string `json:"target,omitempty"`
	Implementation string `json:"implementation,omitempty"`
	// Server is the real server plans ran on, with its version
	// ("rabbitmq 4.3.6"); empty on a simulator.
	Server string `json:"server,omitempty"`
	// Seed is the seed of the plans drawn, as a string: it is a 64-bit
	// number, which JSON readers that hold numbers as doubles would round.
	Seed  string `json:"seed,omitempty"`
	Shard *Shard `json:"shard,omitempty"`
	// Config is every flag that decides which plans are drawn and how they
	// are judged (not where files go), by name: shards of one search must
	// agree on it.
	Config map[string]string `json:"config,omitempty"`

	Result   string `json:"result"`          // Held, Violated, Failed, Inconclusive or Interrupted
	ExitCode int    `json:"exit_code"`       // the exit status the result gives
	Error    string `json:"error,omitempty"` // with Failed: what went wrong

	// RequestedPlans is --runs (0 for --time); Plans the plans run (up to
	// and including a violation), Operations the operations their
	// histories hold, Verdicts the property verdicts given on them,
	// InconclusivePlans those whose checks ran out of time.
	RequestedPlans    int `json:"requested_plans,omitempty"`
	Plans             int `json:"plans"`
	Operations        int `json:"operations"`
	Verdicts          int `json:"verdicts"`
	InconclusivePlans int `json:"inconclusive_plans,omitempty"`
	// BatchSize and Batches say which of the seed's plans ran: batch
	// Number's first Plans, with the SHA-256 of their JSON. On the
	// simulator every full batch has BatchSize plans, so that Merge can
	// tell a seed's plans all ran, once each; elsewhere BatchSize is 0.
	BatchSize int     `json:"batch_size,omitempty"`
	Batches   []Batch `json:"batches,omitempty"`

	// Properties are the verdicts per property, in the checker's order,
	// counted over every plan or lock judged.
	Properties []Property `json:"properties,omitempty"`
	// Interleavings are the meetings of two operations (or of a fault and
	// an operation) the plans reached ("count after another's change
	// (admin/admin)": an admin's count begun after another admin's change
	// ended), each with how many plans showed it, most often first; and
	// the family's steering goals no plan reached, with 0 plans.
	// SteeredPlans are the plans drawn toward a goal.
	Interleavings []Interleaving `json:"interleavings,omitempty"`
	SteeredPlans  int            `json:"steered_plans,omitempty"`
	// Counterexample is the first violation (or, with Inconclusive, the
	// first plan that could not be decided), as written to disk.
	Counterexample *Counterexample `json:"counterexample,omitempty"`
	// Histories are check's files, one by one.
	Histories []History `json:"histories,omitempty"`
	// Mutants are mutants --detect's rows.
	Mutants []Mutant `json:"mutants,omitempty"`
	// Shards are the summaries a merge combined.
	Shards []ShardRun `json:"shards,omitempty"`

	Timings Timings `json:"timings"`
}

// A Shard is i of n (i from 1), as --shard i/n gives it.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

func (s *Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// An Interleaving is a meeting of two operations, or of a fault and an
// operation, and the plans that reached it; Goal says it is one of the
// family's steering goals, Aimed how many plans were drawn toward it.
type Interleaving struct {
	Order string `json:"order"`
	Plans int    `json:"plans"`
	Goal  bool   `json:"goal,omitempty"`
	Aimed int    `json:"aimed,omitempty"`
}

// A Batch is one of the seed's batches that a run drew plans from.
type Batch struct {
	Number int    `json:"batch"`
	Plans  int    `json:"plans"`
	Digest string `json:"digest,omitempty"`
}

// A Property is one property's status over a run and how many of its
// verdicts had each status.
type Property struct {
	Name   string `json:"name"`
	Status string `json:"status"` // Pass, Fail, Undecided or NotJudged
	// Counted is false for a property left out by --properties: its
	// failures do not fail the run.
	Counted      bool `json:"counted"`
	Pass         int  `json:"pass"`
	Fail         int  `json:"fail"`
	Inconclusive int  `json:"inconclusive"`
	NotJudged    int  `json:"not_judged"`
	// Excused counts the passes that rested on excuses (a fault that
	// explains what would fail); FirstExcuse is the first of them.
	Excused     int    `json:"excused,omitempty"`
	FirstExcuse string `json:"first_excuse,omitempty"`
	// Explanation says what went wrong (the first failure's), in words.
	Explanation string `json:"explanation,omitempty"`
	// Where is what the explanation is about: "FILE lock L", say.
	Where string `json:"where,omitempty"`
}

// A Counterexample is where a violation was written and how to replay it.
// Its paths are as the run printed them (relative to where it ran).
type Counterexample struct {
	Property     string `json:"property"`
	Inconclusive bool   `json:"inconclusive,omitempty"`
	Explanation  string `json:"explanation"`
	Dir          string `json:"dir,omitempty"`
	Plan         string `json:"plan,omitempty"`
	History      string `json:"history,omitempty"`
	Report       string `json:"report,omitempty"`
	Summary      string `json:"summary,omitempty"`
	Replay       string `json:"replay,omitempty"`
	// Batch and Index say where the plan was drawn (prove): the one with
	// the lowest is what a single run of all the shards' plans finds first.
	Batch int    `json:"batch"`
	Index int    `json:"index"`
	Shard *Shard `json:"shard,omitempty"`
}

// A History is one file check judged.
type History struct {
	File       string     `json:"file"`
	Format     string     `json:"format"` // jsonl, jepsen-edn or jepsen-json
	Result     string     `json:"result"`
	Properties []Property `json:"properties"`
	// Notes say what an import did that a reader of the verdicts should
	// know: operations left out, times put in the file's order, faults it
	// did not know, operations in flight at the end.
	Notes []string `json:"notes,omitempty"`
	// Excuses are what the verdicts let through because a fault, a clock
	// fault, an unknown outcome or a missing event may explain it.
	Excuses []Excuse `json:"excuses,omitempty"`
}

// An Excuse is one thing a verdict let through because something may
// explain it: a pass with excuses holds only if they are true.
type Excuse struct {
	Lock     string `json:"lock"`
	Property string `json:"property"`
	// Ops are the history's event indexes: what was excused, then what
	// excused it; Lines their lines in an imported file.
	Ops   []int  `json:"ops"`
	Lines []int  `json:"lines,omitempty"`
	Why   string `json:"why"`
}

// A Mutant is one row of mutants --detect.
type Mutant struct {
	Name          string  `json:"name"`
	Property      string  `json:"property"`
	Seeds         int     `json:"seeds"`
	Caught        int     `json:"caught"`
	Inconclusive  int     `json:"inconclusive"`
	MedianPlans   int     `json:"median_plans"`
	MedianSeconds float64 `json:"median_seconds"`
}

// A ShardRun is one shard's summary as a merge saw it.
type ShardRun struct {
	Shard   Shard   `json:"shard"`
	File    string  `json:"file"`
	Result  string  `json:"result"`
	Plans   int     `json:"plans"`
	Seconds float64 `json:"seconds"`
}

// Timings say when the run started and how long it took.
type Timings struct {
	Started        time.Time `json:"started"`
	ElapsedSeconds float64   `json:"elapsed_seconds"`
	PlansPerSecond float64   `json:"plans_per_second,omitempty"`
}

// ExitCode is the exit status of a verdict.
func ExitCode(result string) int {
	switch result {
	case Held:
		return 0
	case Violated:
		return 1
	case Inconclusive:
		return 3
	case Interrupted:
		return 130
	}
	return 2
}

// WriteJSON writes s, indented, to path (created or replaced).
func (s *Summary) WriteJSON(path string) error {
	s.Schema = Schema
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// ErrNotSummary is returned by ReadJSON for a JSON file that is not a
// lockprover summary at all (a plan, say): it has no "schema" field.
var ErrNotSummary = errors.New("not a lockprover results summary (no \"schema\" field)")

// ReadJSON reads a summary that WriteJSON wrote. A file of another
// format, with unknown fields, or without a field every summary has is
// refused with the file and the field.
func ReadJSON(path string) (*Summary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var head map[string]json.RawMessage
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("%s: not JSON: %v", path, err)
	}
	raw, ok := head["schema"]
	if !ok {
		return nil, fmt.Errorf("%s: %w", path, ErrNotSummary)
	}
	var schema string
	if json.Unmarshal(raw, &schema) != nil || schema != Schema {
		return nil, fmt.Errorf("%s: field schema is %s, want %q (a summary from another version of lockprover)", path, raw, Schema)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Summary
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for _, f := range []struct {
		name string
		bad  bool
	}{
		{"verb", s.Verb == ""},
		{"result", s.Result == ""},
		{"exit_code", s.ExitCode != ExitCode(s.Result)},
		{"shard", s.Shard != nil && (s.Shard.Count < 1 || s.Shard.Index < 1 || s.Shard.Index > s.Shard.Count)},
	} {
		if f.bad {
			return nil, fmt.Errorf("%s: field %s is missing or wrong", path, f.name)
		}
	}
	return &s, nil
}

// oneLine is the first line of s, for a message attribute.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
