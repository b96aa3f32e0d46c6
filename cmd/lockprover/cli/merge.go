package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockprover/lockprover/histories/results"
)

func runMerge(args []string, stdout, stderr io.Writer) int {
	fs := newFlags(verbHelp{verb: "merge", args: "DIR...", sections: []section{{title: "Output", flags: "[--json FILE] [--junit FILE] [--quiet]"}}, about: `Combines the JSON summaries of prove's shards (prove --shard i/n --json FILE)
into one result: the plans, operations and verdicts added up, and of the
shards' counterexamples the one drawn first, which is the one a single run of
all the plans stops at. Each DIR is searched for summaries (*.json files whose
"schema" is lockprover's; plans and other JSON are passed over), or is one.
A shard missing, given twice, or run with another seed or other flags is an
error that names it; on the simulator the shards must also have run the
seed's plans exactly once each (none twice, none missing).
Exit status: 0 every property held, 1 a violation, 2 usage, bad input or
shards that do not make one search, 3 inconclusive, 130 a shard was
interrupted (not every plan ran).`}, stderr)
	var outf outputFlags
	outf.register(fs, true)
	dirs, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	var bad checks
	bad.add(len(dirs) == 0, "give the directories (or files) holding the shards' summaries (lockprover help merge)")
	outf.check(&bad)
	if !bad.report("merge", stderr) {
		return exitUsage
	}
	stdout = outf.tee(stdout)
	in, err := readSummaries(dirs, []string{outf.json})
	if err != nil {
		fmt.Fprintf(stderr, "merge: %v\n", err)
		return exitUsage
	}
	m, err := results.Merge(in)
	if err != nil {
		fmt.Fprintf(stderr, "merge: %v (summaries read from %s)\n", err, strings.Join(dirs, ", "))
		return exitUsage
	}
	rebase(m, in)
	fmt.Fprintf(stdout, "merged %d shards of seed %s (%s on %s): %d plans, %d operations, %d verdicts\n", len(m.Shards), m.Seed, m.Implementation, m.Target, m.Plans, m.Operations, m.Verdicts)
	if !outf.quiet {
		for _, s := range m.Shards {
			fmt.Fprintf(stdout, "  shard %s  %-12s %6d plans  %6.1fs  %s\n", s.Shard.String(), s.Result, s.Plans, s.Seconds, s.File)
		}
	}
	printExcused(stdout, m.Properties, m.Plans, outf.quiet)
	switch m.Result {
	case results.Held:
		printHeld(stdout, m.Properties)
	case results.Violated, results.Inconclusive:
		cx := m.Counterexample
		if m.Result == results.Inconclusive {
			fmt.Fprintf(stdout, "no violation, but %d of %d plans were inconclusive: a linearizability check ran out of time (raise --timeout)\n", m.InconclusivePlans, m.Plans)
		}
		if cx != nil {
			what := "violated"
			if cx.Inconclusive {
				what = "inconclusive"
			}
			fmt.Fprintf(stdout, "\n%s %s (shard %s, batch %d, plan %d of it)\n%s\n", cx.Property, what, cx.Shard, cx.Batch, cx.Index, cx.Explanation)
			if cx.Dir != "" {
				fmt.Fprintf(stdout, "counterexample: %s\nreplay: %s\n", cx.Dir, cx.Replay)
				annotate(stdout, cx.Plan, 0, cx.Property+" "+what, cx.Explanation+"\nreplay: "+cx.Replay)
			}
		}
	case results.Interrupted:
		for _, s := range m.Shards {
			if s.Result == results.Interrupted {
				fmt.Fprintf(stdout, "shard %s (%s) was interrupted: not every plan ran\n", s.Shard.String(), s.File)
			}
		}
	}
	return outf.write("merge", m, m.ExitCode, stderr)
}

// readSummaries reads every summary under the paths: each a summary file,
// or a directory searched for them. JSON that is not a summary (a plan) is
// passed over; a summary that cannot be read is an error naming it. The
// files in skip (merge's own output) are not read.
func readSummaries(paths, skip []string) ([]results.Named, error) {
	skipped := map[string]bool{}
	for _, s := range skip {
		if a, err := filepath.Abs(s); s != "" && err == nil {
			skipped[a] = true
		}
	}
	var in []results.Named
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			s, err := results.ReadJSON(p)
			if err != nil {
				return nil, err
			}
			in = append(in, results.Named{File: p, Summary: s})
			continue
		}
		found := 0
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".json") {
				return nil
			}
			if a, err := filepath.Abs(path); err == nil && skipped[a] {
				return nil
			}
			s, err := results.ReadJSON(path)
			if errors.Is(err, results.ErrNotSummary) {
				return nil
			}
			if err != nil {
				return err
			}
			found++
			in = append(in, results.Named{File: path, Summary: s})
			return nil
		})
		if err != nil {
			return nil, err
		}
		if found == 0 {
			return nil, fmt.Errorf("%s holds no lockprover summary (a *.json file with \"schema\": %q, as prove --json writes)", p, results.Schema)
		}
	}
	return in, nil
}

// rebase makes the merged counterexample's paths point where the files are
// now: a shard's paths are relative to where it ran, and its files are
// usually found beside its summary (as a CI artifact keeps them).
func rebase(m *results.Summary, in []results.Named) {
	cx := m.Counterexample
	if cx == nil || cx.Dir == "" || filepath.IsAbs(cx.Dir) {
		return
	}
	for _, n := range in {
		s := n.Summary
		if s.Shard == nil || cx.Shard == nil || *s.Shard != *cx.Shard {
			continue
		}
		base := filepath.Dir(n.File)
		if _, err := os.Stat(filepath.Join(base, cx.Plan)); err != nil {
			return // not beside it: leave the paths as the shard printed them
		}
		old := cx.Plan
		for _, p := range []*string{&cx.Dir, &cx.Plan, &cx.History, &cx.Report, &cx.Summary} {
			if *p != "" {
				*p = filepath.Join(base, *p)
			}
		}
		cx.Replay = strings.Replace(cx.Replay, shellWord(old), shellWord(cx.Plan), 1)
		return
	}
}
