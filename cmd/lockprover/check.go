package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/results"
)

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", "check [--model standard|strict] [--timeout D] [--drift R] [--html DIR] [--json FILE] [--junit FILE] [--quiet] FILE...", `Checks recorded histories against every property: JSON lines, or Jepsen's
history.edn of a lock workload (a FILE ending in .edn, or starting like EDN),
judged as a true mutex. docs/histories.md describes both, docs/checking.md
what each operation establishes and what is left unjudged, docs/lease.md how
lease locks (kind lease) are judged.
Exit status: 0 all held, 1 a violation, 2 usage or bad input, 3 inconclusive.`, stderr)
	modelName := fs.String("model", "standard", "acquire-exact model: standard (quiescent acquires) or strict (every acquire, whole semaphore)")
	timeout := fs.Duration("timeout", time.Minute, "time budget of each linearizability check; 0 for none")
	html := fs.String("html", "", "write porcupine's visualisation of each check into this directory")
	drift := fs.Float64("drift", model.DefaultDrift, "lease locks: how far clocks may run fast or slow, as a fraction of the time measured (0.01 is 1%); > 0 and < 1")
	var outf outputFlags
	outf.register(fs, true)
	files, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	var bad checks
	bad.add(len(files) == 0, "no history files given (lockprover help check)")
	bad.oneOf("model", *modelName, "standard", "strict")
	bad.duration("timeout", *timeout, true)
	bad.add(!(*drift > 0 && *drift < 1), "--drift must be > 0 and < 1 (a fraction: 0.01 is 1%%), not %g", *drift)
	outf.check(&bad)
	if !bad.report("check", stderr) {
		return exitUsage
	}
	stdout = outf.tee(stdout)
	sum := &results.Summary{Timings: results.Timings{Started: time.Now()}}
	hists := make([][]histories.Event, len(files))
	imps := make([]*histories.Imported, len(files))
	for i, path := range files {
		h, imp, err := histories.ReadAnyFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "check: %v\n", err)
			return exitUsage
		}
		hists[i], imps[i] = h, imp
	}
	if *html != "" {
		if err := os.MkdirAll(*html, 0o755); err != nil {
			fmt.Fprintf(stderr, "check: %v\n", err)
			return exitUsage
		}
	}
	worst := model.Pass
	o := model.Options{Strict: *modelName == "strict", Timeout: *timeout, Visualize: *html != "", Drift: *drift}
	for i, path := range files {
		r := model.Check(hists[i], o)
		if !outf.quiet || r.Status() != model.Pass {
			printImportedReport(stdout, path, imps[i], r)
		}
		addHistory(sum, path, imps[i], r, stdout)
		if *html != "" {
			if err := writeHTML(*html, path, r, stdout); err != nil {
				fmt.Fprintf(stderr, "check: %v\n", err)
				return exitUsage
			}
		}
		worst = max(worst, r.Status())
	}
	if outf.quiet {
		fmt.Fprintf(stdout, "%d histories checked: %s\n", len(files), worst)
	}
	sum.Timings.ElapsedSeconds = time.Since(sum.Timings.Started).Seconds()
	return outf.write("check", sum, exitFor(worst), stderr)
}

func exitFor(s model.Status) int {
	switch s {
	case model.Fail:
		return exitViolation
	case model.Inconclusive:
		return exitInconclusive
	}
	return exitOK
}

// printReport prints one history's verdicts: a line per lock and property,
// with what went wrong under each failure.
func printReport(w io.Writer, path string, r *model.Report) {
	printImportedReport(w, path, nil, r)
}

// printImportedReport is printReport for a history that may have been
// imported from Jepsen's EDN (imp not nil): it says so, with the import's
// notes, and gives each operation with the EDN line it comes from.
func printImportedReport(w io.Writer, path string, imp *histories.Imported, r *model.Report) {
	if imp == nil {
		fmt.Fprintln(w, path)
	} else {
		fmt.Fprintf(w, "%s (Jepsen EDN, judged as a true mutex; #N is an event of the imported history)\n", path)
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
		if v.Status == model.Fail || v.Status == model.Inconclusive {
			fails++
			fmt.Fprintf(w, "      %s\n", v.Detail)
			if len(v.Ops) > 0 {
				fmt.Fprintf(w, "      operations: %s\n", indexes(v.Ops, imp))
			}
		} else if v.Status == model.Pass && v.Detail != "" {
			fmt.Fprintf(w, "      %s\n", v.Detail) // what excused it
		}
	}
	fmt.Fprintf(w, "  verdict: %s\n", r.Status())
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

// writeHTML writes the visualisation of each linearizability check of r.
func writeHTML(dir, path string, r *model.Report, stdout io.Writer) error {
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
