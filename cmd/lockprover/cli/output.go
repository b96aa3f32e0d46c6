package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/results"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
)

// outputFlags are the flags for CI that prove, check, replay, mutants and
// merge share: a JSON summary, JUnit XML, and quiet logs.
type outputFlags struct {
	json, junit string
	quiet       bool
	log         bytes.Buffer // what the run printed, for JUnit's system-out
}

func (o *outputFlags) register(fs *flag.FlagSet, quiet bool) {
	fs.StringVar(&o.json, "json", "", "also write a JSON summary of the run to this file (schema "+results.Schema+": docs/ci.md#json-and-junit)")
	fs.StringVar(&o.junit, "junit", "", "also write JUnit XML to this file: a test case per property, failures with the explanation")
	if quiet {
		fs.BoolVar(&o.quiet, "quiet", false, "print only the result: no banner, no progress, nothing that passed (for CI logs)")
	}
}

// check refuses, before anything runs, an output file that could not be
// written: a directory, or in a directory that cannot be made or written.
func (o *outputFlags) check(bad *checks) {
	for _, f := range []struct{ name, path string }{{"json", o.json}, {"junit", o.junit}} {
		if f.path == "" {
			continue
		}
		if fi, err := os.Stat(f.path); err == nil && fi.IsDir() {
			bad.add(true, "--%s: %s is a directory; name a file", f.name, f.path)
			continue
		}
		if err := checkOut(filepath.Dir(f.path)); err != nil {
			bad.add(true, "--%s: %v", f.name, err)
		}
	}
	bad.add(o.json != "" && o.json == o.junit, "--json and --junit name the same file %s", o.json)
}

// tee returns stdout, copied into the log if JUnit is wanted.
func (o *outputFlags) tee(stdout io.Writer) io.Writer {
	if o.junit == "" {
		return stdout
	}
	return io.MultiWriter(stdout, &o.log)
}

// write writes s as asked and returns code, or exit 2 if a file could not
// be written (the result is on stdout all the same).
func (o *outputFlags) write(verb string, s *results.Summary, code int, stderr io.Writer) int {
	s.Schema, s.Verb = results.Schema, verb
	if s.Result == "" {
		s.Result = resultFor(code)
	}
	s.ExitCode = results.ExitCode(s.Result)
	for _, path := range []string{o.json, o.junit} {
		if path != "" {
			os.MkdirAll(filepath.Dir(path), 0o755) // checkOut made sure it can be
		}
	}
	if o.json != "" {
		if err := s.WriteJSON(o.json); err != nil {
			fmt.Fprintf(stderr, "%s: --json: %v\n", verb, err)
			return exitUsage
		}
	}
	if o.junit != "" {
		if err := s.WriteJUnit(o.junit, o.log.String()); err != nil {
			fmt.Fprintf(stderr, "%s: --junit: %v\n", verb, err)
			return exitUsage
		}
	}
	return code
}

func resultFor(code int) string {
	switch code {
	case exitOK:
		return results.Held
	case exitViolation:
		return results.Violated
	case exitInconclusive:
		return results.Inconclusive
	case exitInterrupted:
		return results.Interrupted
	}
	return results.Failed
}

// tally turns a search's verdict counts into the summary's properties, in
// the checker's order; explanations come from the counterexample's report.
func tally(counts map[string]map[verdict.Status]int, names, counted []string, cx *prover.Counterexample) []results.Property {
	var ps []results.Property
	for _, name := range names {
		c := counts[name]
		p := results.Property{Name: name, Counted: counted == nil || known(name, counted),
			Pass: c[verdict.Pass], Fail: c[verdict.Fail], Inconclusive: c[verdict.Inconclusive], NotJudged: c[verdict.NotJudged]}
		p.SetStatus()
		if cx != nil {
			for _, v := range cx.Report.Verdicts {
				if v.Property == name && (v.Status == verdict.Fail || v.Status == verdict.Inconclusive) && p.Explanation == "" {
					p.Explanation = v.Detail
				}
			}
		}
		ps = append(ps, p)
	}
	return ps
}

// reportProperties are one history's verdicts as the summary's
// properties: counted once per lock; explanations of the first failure,
// with the lock.
func reportProperties(r *verdict.Report, where string, counted []string) []results.Property {
	idx := map[string]int{}
	var ps []results.Property
	for _, v := range r.Verdicts {
		i, ok := idx[v.Property]
		if !ok {
			i = len(ps)
			idx[v.Property] = i
			ps = append(ps, results.Property{Name: v.Property, Counted: counted == nil || known(v.Property, counted)})
		}
		p := &ps[i]
		switch v.Status {
		case verdict.Pass:
			p.Pass++
		case verdict.Fail:
			p.Fail++
		case verdict.Inconclusive:
			p.Inconclusive++
		default:
			p.NotJudged++
		}
		if (v.Status == verdict.Fail || v.Status == verdict.Inconclusive) && p.Explanation == "" {
			p.Explanation = v.Detail
			p.Where = strings.TrimSpace(where + " lock " + v.Lock)
		}
	}
	for i := range ps {
		ps[i].SetStatus()
	}
	return ps
}

// configOf is every flag of fs that decides which plans are drawn and how
// they are judged, by name, as given or by default: shards of one search
// must agree on it. Where files go, the shard, the shrinking time and
// where the broker is (--amqp-url, --docker, --docker-image) are left out.
func configOf(fs *flag.FlagSet) map[string]string {
	skip := map[string]bool{"out": true, "shard": true, "json": true, "junit": true, "quiet": true, "shrink-time": true, "amqp-url": true, "docker": true, "docker-image": true, "seed": true}
	m := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if !skip[f.Name] {
			m[f.Name] = f.Value.String()
		}
	})
	return m
}

// githubActions says whether lockprover runs in a GitHub Actions job,
// where ::error lines become annotations on the files they name.
func githubActions() bool { return os.Getenv("GITHUB_ACTIONS") == "true" }

// annotate prints a GitHub Actions error annotation on file (line 0: the
// file as a whole), if running under GitHub Actions.
func annotate(w io.Writer, file string, line int, title, msg string) {
	if !githubActions() {
		return
	}
	props := "file=" + escapeProperty(filepath.ToSlash(file))
	if line > 0 {
		props += ",line=" + strconv.Itoa(line)
	}
	if title != "" {
		props += ",title=" + escapeProperty(title)
	}
	fmt.Fprintf(w, "::error %s::%s\n", props, escapeData(msg))
}

// escapeData and escapeProperty escape as GitHub's workflow commands want.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// shardFromEnv is --shard auto: the shard from the environment of the
// engine running it, index from 0 and count. It reads, in order,
// LOCKPROVER_SHARD_INDEX and LOCKPROVER_SHARD_COUNT (index from 0; set
// them from a CI's matrix, e.g. GitHub's strategy.job-index and
// strategy.job-total); a Kubernetes Indexed Job's JOB_COMPLETION_INDEX
// with the count in JOB_COMPLETIONS (the Job's spec.completions, which the
// Job must pass in); GitLab's CI_NODE_INDEX (from 1) and CI_NODE_TOTAL.
func shardFromEnv() (int, int, error) {
	for _, v := range []struct {
		index, count string
		base         int
	}{
		{"LOCKPROVER_SHARD_INDEX", "LOCKPROVER_SHARD_COUNT", 0},
		{"JOB_COMPLETION_INDEX", "JOB_COMPLETIONS", 0},
		{"CI_NODE_INDEX", "CI_NODE_TOTAL", 1},
	} {
		is, hasIndex := os.LookupEnv(v.index)
		ns, hasCount := os.LookupEnv(v.count)
		if !hasIndex && !hasCount {
			continue
		}
		if !hasIndex || !hasCount {
			set, missing := v.index, v.count
			if !hasIndex {
				set, missing = v.count, v.index
			}
			return 0, 0, fmt.Errorf("auto: %s is set but %s is not", set, missing)
		}
		i, err1 := strconv.Atoi(strings.TrimSpace(is))
		n, err2 := strconv.Atoi(strings.TrimSpace(ns))
		i -= v.base
		if err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
			return 0, 0, fmt.Errorf("auto: %s=%q and %s=%q do not make a shard (want an index from %d and a count above it)", v.index, is, v.count, ns, v.base)
		}
		return i, n, nil
	}
	return 0, 0, errors.New("auto: no shard in the environment: set LOCKPROVER_SHARD_INDEX (from 0) and LOCKPROVER_SHARD_COUNT, or run as a Kubernetes Indexed Job (JOB_COMPLETION_INDEX, with JOB_COMPLETIONS set), or a GitLab parallel job (CI_NODE_INDEX, CI_NODE_TOTAL)")
}

// addHistory adds one file check judged to its summary (and its verdicts
// to the summary's properties), and annotates each failed verdict on the
// file, at the line of the first operation it names, under GitHub Actions.
func addHistory(sum *results.Summary, path string, imp *histories.Imported, r *verdict.Report, stdout io.Writer) {
	h := results.History{File: path, Format: "jsonl", Result: resultFor(exitFor(r.Status())), Properties: reportProperties(r, path, nil)}
	if imp != nil {
		h.Format = "jepsen-edn"
	}
	sum.Histories = append(sum.Histories, h)
	for _, p := range h.Properties {
		i := 0
		for i < len(sum.Properties) && sum.Properties[i].Name != p.Name {
			i++
		}
		if i == len(sum.Properties) {
			sum.Properties = append(sum.Properties, results.Property{Name: p.Name, Counted: true})
		}
		q := &sum.Properties[i]
		q.Pass, q.Fail, q.Inconclusive, q.NotJudged = q.Pass+p.Pass, q.Fail+p.Fail, q.Inconclusive+p.Inconclusive, q.NotJudged+p.NotJudged
		if q.Explanation == "" {
			q.Explanation, q.Where = p.Explanation, p.Where
		}
		q.SetStatus()
	}
	for _, v := range r.Verdicts {
		if v.Status != verdict.Fail && v.Status != verdict.Inconclusive {
			continue
		}
		line := 0
		if len(v.Ops) > 0 {
			switch {
			case imp == nil:
				line = v.Ops[0] + 1 // JSON lines: event #N is line N+1
			case v.Ops[0] >= 0 && v.Ops[0] < len(imp.Lines):
				line = imp.Lines[v.Ops[0]]
			}
		}
		annotate(stdout, path, line, fmt.Sprintf("%s %s (lock %s)", v.Property, v.Status, v.Lock), v.Detail)
	}
}
