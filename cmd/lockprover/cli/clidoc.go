package cli

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/lockprover/lockprover/internal/family"
)

// made, while CLIDoc runs, hears of every flag set a verb makes, with its
// usage, so that the reference is written from the flags the verbs parse
// and nothing else.
var made struct {
	sync.Mutex
	hear func(*flag.FlagSet, verbHelp)
}

// madeFlags tells CLIDoc of a verb's flag set (newFlags calls it).
func madeFlags(fs *flag.FlagSet, u verbHelp) {
	made.Lock()
	defer made.Unlock()
	if made.hear != nil {
		made.hear(fs, u)
	}
}

// CLIDoc writes the command line's reference, docs/cli.md, from the
// binary's own definitions: every verb, its usage line and description
// (as `lockprover help VERB` prints them) and a table of its flags under
// each heading of its help, with their defaults and whole meanings; then
// the families' flags, each family's meaning in full. `lockprover help
// --markdown` prints it; a test holds docs/cli.md to it.
func CLIDoc(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString(cliIntro)
	b.WriteString("\n| verb | what it does |\n| --- | --- |\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", c.name, c.name, cell(c.summary))
	}
	for _, c := range commands() {
		if err := verbDoc(&b, c); err != nil {
			return err
		}
	}
	familyFlagsDoc(&b)
	b.WriteString(cliOutro)
	_, err := w.Write(b.Bytes())
	return err
}

// verbDoc writes one verb's section: its usage line and description, then
// a table of its flags under each heading of its help.
func verbDoc(b *bytes.Buffer, c command) error {
	fs, u, err := madeBy(c)
	if err != nil {
		return err
	}
	secs := u.layout(fs)
	fmt.Fprintf(b, "\n## %s\n\n```\n%s\n```\n", c.name, usageLine("lockprover "+c.name, secs, u.args))
	if about := strings.TrimSpace(u.about); about != "" {
		fmt.Fprintf(b, "\n%s\n", paragraphs(about))
	}
	for _, s := range secs {
		if len(s.flags) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n**%s**\n\n| flag | default | meaning |\n| --- | --- | --- |\n", s.title)
		for _, hf := range s.flags {
			meaning := joinUsage(strings.Join(hf.text, "; "), hf.details)
			if hf.families != nil {
				meaning += " ([in full](#family-flags))"
			}
			def := ""
			if hf.def != "" {
				def = "`" + hf.def + "`"
			}
			fmt.Fprintf(b, "| %s | %s | %s |\n", flagCell(hf.name, hf.arg), def, cell(meaning))
		}
	}
	return nil
}

// madeBy is the flag set c makes, and its help, as c -h makes them.
func madeBy(c command) (*flag.FlagSet, verbHelp, error) {
	var fs *flag.FlagSet
	var u verbHelp
	made.Lock()
	made.hear = func(f *flag.FlagSet, v verbHelp) {
		if v.verb == c.name { // not another verb's, run meanwhile
			fs, u = f, v
		}
	}
	made.Unlock()
	code := c.run([]string{"-h"}, io.Discard, io.Discard)
	made.Lock()
	made.hear = nil
	f, v := fs, u
	made.Unlock()
	if code != exitOK || f == nil {
		return nil, v, fmt.Errorf("%s -h: exit %d, flag set made: %v", c.name, code, f != nil)
	}
	return f, v, nil
}

// familyFlagsDoc writes the table of every family's flags: each flag with
// the families that declare it alike, the verbs that take it, and its
// whole meaning (help shows its first line).
func familyFlagsDoc(b *bytes.Buffer) {
	b.WriteString("\n## Family flags\n\n" + familyFlagsIntro + "\n| flag | family | verbs | meaning |\n| --- | --- | --- | --- |\n")
	type row struct{ flag, families, verbs, meaning string }
	var rows []row
	for _, d := range family.All() {
		for _, f := range d.Flags {
			r := row{flag: flagCell(f.Name, f.Arg), verbs: verbNames(f.Verbs)}
			text, details, _ := strings.Cut(f.Usage, "\n")
			if shared(f) {
				text = "" // help's summary, the same for every family: the rest is each family's own
			}
			r.meaning = cell(strings.TrimLeft(joinUsage(text, details), ";, "))
			if f.Default != "" && f.Default != "0" {
				r.meaning += " (default `" + f.Default + "`)"
			}
			if i := slices.IndexFunc(rows, func(o row) bool { return o.flag == r.flag && o.verbs == r.verbs && o.meaning == r.meaning }); i >= 0 {
				rows[i].families += ", " + d.Name
				continue
			}
			r.families = d.Name
			rows = append(rows, r)
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int { return strings.Compare(a.flag, b.flag) })
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", r.flag, r.families, r.verbs, r.meaning)
	}
}

// shared says whether every family that declares f starts its usage
// with the same line, help's, and goes on with details of its own
// (--server-version).
func shared(f family.Flag) bool {
	first, details, _ := strings.Cut(f.Usage, "\n")
	others := 0
	for _, d := range family.Flagged(f.Name) {
		for _, o := range d.Flags {
			of, od, _ := strings.Cut(o.Usage, "\n")
			if o.Name != f.Name {
				continue
			}
			if of != first {
				return false
			}
			if od != details {
				others++
			}
		}
	}
	return others > 0
}

// flagCell is a flag and its value as a table's cell shows them.
func flagCell(name, arg string) string {
	return "`" + strings.ReplaceAll(strings.TrimSpace(dashes(name)+" "+arg), "|", `\|`) + "`"
}

// verbNames names the verbs in v, as the command line spells them.
func verbNames(v family.Verbs) string {
	var names []string
	for _, n := range []struct {
		v    family.Verbs
		name string
	}{{family.Prove, "prove"}, {family.Replay, "replay"}, {family.Validate, "validate-impl"}, {family.Bench, "bench"}, {family.Conform, "conform"}, {family.Check, "check"}} {
		if v&n.v != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ", ")
}

// joinUsage joins a flag's help (its usage's first line) and the details
// after it into one text: a detail that goes on with the sentence (",
// ...", "; ...", ": ...") follows it without a space.
func joinUsage(text, details string) string {
	for _, l := range strings.Split(details, "\n") {
		switch {
		case l == "":
		case strings.ContainsAny(l[:1], ",;:.)"):
			text += l
		default:
			text += " " + l
		}
	}
	return text
}

// paragraphs joins help's wrapped lines into Markdown paragraphs: a line
// that starts a sentence the help set apart ("With --cluster: ...",
// "Exit status: ...") starts a paragraph of its own.
func paragraphs(s string) string {
	var out []string
	for _, para := range strings.Split(s, "\n\n") {
		var cur []string
		flush := func() {
			if len(cur) > 0 {
				out = append(out, strings.Join(cur, " "))
				cur = nil
			}
		}
		for _, line := range strings.Split(para, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "With --") || strings.HasPrefix(line, "Exit status:") {
				flush()
			}
			cur = append(cur, line)
		}
		flush()
	}
	return strings.Join(out, "\n\n")
}

// cell makes text fit a Markdown table's cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

const cliIntro = `# The command line

<!-- Generated by ` + "`go run ./cmd/lockprover help --markdown > docs/cli.md`" + ` from the
binary's own flag definitions; TestCLIDocIsGenerated fails when it drifts. -->

One binary, ` + "`lockprover`" + `, one verb per job. From a clone, ` + "`go run\n./cmd/lockprover`" + ` runs it and ` + "`go build -o lockprover ./cmd/lockprover`" + `
builds it. Flags may come before or after a verb's arguments (` + "`replay\nplan.json --target rabbitmq`" + `); ` + "`lockprover help VERB`" + ` or ` + "`VERB -h`" + ` prints
the verb's part of this page, each flag's meaning cut to its first words.
A verb's flags are under headings: what every run takes, the real
servers, each family's own, an exhaustive search's. A flag that belongs
to a family is listed under its name (or, for a real server's, says it
first: "amqp-locks: ..."), and [Family flags](#family-flags) gives each
family's meaning in full; given with another family's ` + "`--kind`" + `, it is
refused by name.
`

// familyFlagsIntro opens the table of the families' flags.
const familyFlagsIntro = `The flags a lock family brings, each with the families that declare it
(alike), the verbs that take it and what it means there in full. A flag
whose value is N, R (a number) or D (a duration with its unit: ` + "`500ms`" + `,
` + "`5s`" + `, ` + "`2m`" + `) is refused as it is parsed when its value is none.
`

const cliOutro = `
## Exit status and bad input

Every verb exits 0 when every property held (or the verb did its job), 1
on a violation (prove and replay write the counterexample), 2 on a usage
error or bad input (a flag's value, a file, a server that cannot be used:
each named), 3 when a check was inconclusive (a linearizability check ran
out of time: no violation shown, never reported as one), and 130 when
interrupted (Ctrl-C or SIGTERM: the run stops within a couple of seconds,
deletes what it made and kills its processes; a second Ctrl-C quits at
once, naming what it leaves behind). Nonsense is refused before the first
plan runs: negative durations, zero counts, unknown faults, kinds or
properties, extra arguments, a family's flag given to another family, an
` + "`--out`" + ` that is a file or cannot be written. ` + "`--time D`" + ` is a deadline on
every target: no plan starts after it, and one in flight finishes. A
counterexample never overwrites anything: when ` + "`--out`" + ` is not empty it
goes to ` + "`--out/counterexample-N`" + `, and when it cannot be written the plan
is printed instead. A plan records the model and properties it was
proven under, and ` + "`replay`" + ` judges it the same way unless told otherwise.
`
