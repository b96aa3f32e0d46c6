package cli

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/report"
	"github.com/lockprover/lockprover/histories/results"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/model"
)

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(verbHelp{verb: "check", args: "FILE...", sections: []section{
		{title: "Every run", flags: "[--model " + strings.Join(family.ModelNames(), "|") + "] [--timeout D] [--html DIR] [--report DIR]"},
		{title: "Output", flags: "[--json FILE] [--junit FILE] [--quiet]"},
	}, about: `Checks recorded histories against every property: JSON lines, or Jepsen's
history of a lock workload, in EDN (a FILE ending in .edn, or starting like
EDN) or JSON (one array of op maps, or one per line), judged as Knossos's
mutex model judges it; with --lease-ttl, as a lease lock's instead.
docs/histories.md describes the formats, docs/checking.md what each
operation establishes and what is left unjudged, docs/lease.md how lease
locks (kind lease) are judged.
Exit status: 0 all held, 1 a violation, 2 usage or bad input, 3 inconclusive.`}, stderr)
	modelName := fs.String("model", "standard", "acquire-exact model: standard (quiescent acquires) or strict (every acquire, whole semaphore)")
	timeout := fs.Duration("timeout", time.Minute, "time budget of each linearizability check; 0 for none")
	html := fs.String("html", "", "write porcupine's visualisation of each check into this directory")
	pages := fs.String("report", "", "write each history's report page into this directory\n: its verdicts, what each let through, what an import did, a timeline")
	var ff familyFlags
	ff.register(fs, family.Check)
	var outf outputFlags
	outf.register(fs, true)
	files, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	var bad checks
	bad.add(len(files) == 0, "no history files given (lockprover help check)")
	bad.oneOf("model", *modelName, family.ModelNames()...)
	bad.duration("timeout", *timeout, true)
	value := flagValue(fs)
	for _, cf := range family.AllCheckFlags() {
		bad = append(bad, cf.Check(value)...)
	}
	outf.check(&bad)
	if !bad.report("check", stderr) {
		return exitUsage
	}
	stdout = outf.tee(stdout)
	sum := &results.Summary{Timings: results.Timings{Started: time.Now()}}
	var in []checked
	lens, err := familyLens(value)
	if err == nil {
		in, err = readChecked(files, lens)
	}
	if err != nil {
		fmt.Fprintf(stderr, "check: %v\n", err)
		return exitUsage
	}
	for _, dir := range []string{*html, *pages} {
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintf(stderr, "check: %v\n", err)
			return exitUsage
		}
	}
	o := model.Options{Timeout: *timeout, Visualize: *html != "", Family: familyJudging(value)}
	worst := verdict.Pass
	for _, c := range in {
		r, err := c.judge(o, sum, outf.quiet, *pages, *html, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "check: %v\n", err)
			return exitUsage
		}
		worst = max(worst, r.Status())
	}
	if outf.quiet {
		fmt.Fprintf(stdout, "%d histories checked: %s\n", len(files), worst)
	}
	sum.Timings.ElapsedSeconds = time.Since(sum.Timings.Started).Seconds()
	return outf.write("check", sum, exitFor(worst), stderr)
}

// A checked history: where it came from, its events as judged, what its
// import did (nil for lockprover's own JSON lines) and, seen through a
// family's lens, the lens and its events as imported.
type checked struct {
	path     string
	h        []histories.Event
	imp      *histories.Imported
	lens     *family.Lens
	imported []histories.Event
}

// readChecked reads every file, and with a lens (nil for none) turns each
// history into what the lens sees, keeping it as imported beside.
func readChecked(files []string, lens *family.Lens) ([]checked, error) {
	out := make([]checked, len(files))
	for i, path := range files {
		h, imp, err := histories.ReadAnyFile(path)
		if err != nil {
			return nil, err
		}
		c := checked{path: path, h: h, imp: imp}
		if lens != nil {
			if c.h, err = lens.View(path, h, imp); err != nil {
				return nil, err
			}
			c.lens, c.imported = lens, h
		}
		out[i] = c
	}
	return out, nil
}

// familyLens is the lens the families' flags for check switch on (their
// CheckFlags.Lens), nil for none; two at once are refused.
func familyLens(value func(string) string) (*family.Lens, error) {
	var on []*family.Lens
	for _, cf := range family.AllCheckFlags() {
		if cf.Lens != nil {
			if l := cf.Lens(value); l != nil {
				on = append(on, l)
			}
		}
	}
	if len(on) > 1 {
		return nil, fmt.Errorf("a history is judged through one lens at a time, not %s and %s", on[0].Name, on[1].Name)
	}
	if len(on) == 0 {
		return nil, nil
	}
	return on[0], nil
}

// judge checks the history, prints its report (unless quiet and it
// passed), adds it to sum, and writes its page and porcupine's view where
// asked.
func (c checked) judge(o model.Options, sum *results.Summary, quiet bool, pages, html string, stdout io.Writer) (*verdict.Report, error) {
	o.Jepsen = c.imp != nil
	r := model.Check(c.h, o)
	lens := ""
	if c.lens != nil {
		lens = c.lens.Name
		if c.lens.Excuse != nil {
			c.lens.Excuse(r, model.Check(c.imported, o))
		}
	}
	if !quiet || r.Status() != verdict.Pass {
		printImportedReport(stdout, c.path, c.imp, lens, r)
	}
	addHistory(sum, c.path, c.imp, r, stdout)
	addExcuses(&sum.Histories[len(sum.Histories)-1], c.imp, r)
	if pages != "" {
		if err := writePage(pages, c.path, c.h, c.imp, r, stdout); err != nil {
			return nil, err
		}
	}
	if html != "" {
		if err := writeHTML(html, c.path, r, stdout); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// flagValue gives the value of each of fs's flags by name ("" for none).
func flagValue(fs *flag.FlagSet) func(name string) string {
	return func(name string) string {
		if f := fs.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
}

// familyJudging is what each family's checker takes from check's flags
// by name (value): --model, and the families' own (the lease families'
// --drift), as the family says (family.Descriptor.Judging).
func familyJudging(value func(string) string) []any {
	var out []any
	for _, d := range family.All() {
		if d.Judging != nil {
			out = append(out, d.Judging(value))
		}
	}
	return out
}

func exitFor(s verdict.Status) int {
	switch s {
	case verdict.Fail:
		return exitViolation
	case verdict.Inconclusive:
		return exitInconclusive
	}
	return exitOK
}

// printReport prints one history's verdicts: a line per lock and property,
// with what went wrong under each failure.
func printReport(w io.Writer, path string, r *verdict.Report) {
	printImportedReport(w, path, nil, "", r)
}

// printImportedReport is printReport for a history that may have been
// imported from Jepsen's EDN (imp not nil): it says so, with the import's
// notes and the lens it was judged through (lens, its name, "" for none),
// and gives each operation with the EDN line it comes from.
func printImportedReport(w io.Writer, path string, imp *histories.Imported, lens string, r *verdict.Report) {
	if imp == nil {
		fmt.Fprintln(w, path)
	} else {
		how := "as Knossos's mutex model judges it"
		if lens != "" && len(r.Verdicts) > 0 {
			how = "through " + lens
		}
		fmt.Fprintf(w, "%s (%s, judged %s; #N is an event of the imported history)\n", path, imp.Format, how)
		for _, n := range imp.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	lock := ""
	fails := 0
	for _, v := range r.Verdicts {
		if v.Lock != lock {
			lock = v.Lock
			fmt.Fprintf(w, "  lock %s\n", lock)
		}
		judged := ""
		if v.Judged > 0 {
			judged = fmt.Sprintf("(%d judged)", v.Judged)
		}
		fmt.Fprintf(w, "    %-15s %-13s %s\n", v.Property, v.Status, judged)
		if v.Status == verdict.Fail || v.Status == verdict.Inconclusive {
			fails++
			fmt.Fprintf(w, "      %s\n", v.Detail)
			if len(v.Ops) > 0 {
				fmt.Fprintf(w, "      operations: %s\n", indexes(v.Ops, imp))
			}
		} else if v.Status == verdict.Pass && v.Detail != "" && len(v.Excuses) == 0 {
			fmt.Fprintf(w, "      %s\n", v.Detail) // what excused it, unless listed below
		}
		for _, e := range v.Excuses {
			fmt.Fprintf(w, "      excused: %s\n", e.Why)
			fmt.Fprintf(w, "        operations: %s\n", indexes(e.Ops, imp))
		}
	}
	fmt.Fprintf(w, "  result: %s\n", r.Status())
}

// addExcuses adds to h, a history's summary, the import's notes and each
// verdict's excuses, so that --json says what the import did and what
// each pass let through, as the text does.
func addExcuses(h *results.History, imp *histories.Imported, r *verdict.Report) {
	if imp != nil {
		h.Notes = append(h.Notes, imp.Notes...)
		h.Format = map[string]string{histories.FormatEDN: "jepsen-edn", histories.FormatJSON: "jepsen-json"}[imp.Format]
	}
	for _, v := range r.Verdicts {
		for _, e := range v.Excuses {
			x := results.Excuse{Lock: v.Lock, Property: v.Property, Ops: e.Ops, Why: e.Why}
			if imp != nil {
				for _, o := range e.Ops {
					if o >= 0 && o < len(imp.Lines) {
						x.Lines = append(x.Lines, imp.Lines[o])
					}
				}
			}
			h.Excuses = append(h.Excuses, x)
		}
	}
}

func indexes(ops []int, imp *histories.Imported) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = fmt.Sprintf("#%d", o)
		if imp != nil && o >= 0 && o < len(imp.Lines) {
			s[i] += fmt.Sprintf(" (line %d)", imp.Lines[o])
		}
	}
	return strings.Join(s, ", ")
}

// writePage writes the report page of the history h at path, judged r,
// about its first failed verdict (if any), into dir.
func writePage(dir, path string, h []histories.Event, imp *histories.Imported, r *verdict.Report, stdout io.Writer) error {
	cx := report.Counterexample{Verdicts: r.Verdicts, History: h, Summary: path}
	if imp != nil {
		cx.Notes = imp.Notes
	}
	for _, v := range r.Verdicts {
		if cx.Lock == "" {
			cx.Lock = v.Lock
		}
		if v.Status == verdict.Fail || v.Status == verdict.Inconclusive {
			cx.Property, cx.Lock = v.Property, v.Lock
			break
		}
	}
	var b bytes.Buffer
	if err := report.Write(&b, cx); err != nil {
		return err
	}
	name := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))+".html")
	if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "  wrote %s\n", name)
	return nil
}

// writeHTML writes the visualisation of each linearizability check of r.
func writeHTML(dir, path string, r *verdict.Report, stdout io.Writer) error {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	for i := range r.Verdicts {
		v := &r.Verdicts[i]
		name := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.html", base, safe(v.Lock), v.Property))
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		wrote, err := v.Visualize(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if !wrote {
			os.Remove(name)
			continue
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  wrote %s\n", name)
	}
	return nil
}

func safe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == os.PathSeparator {
			return '_'
		}
		return r
	}, s)
}
