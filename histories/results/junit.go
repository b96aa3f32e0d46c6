package results

import (
	"encoding/xml"
	"fmt"
	"os"
	"sort"
	"strings"
)

// JUnit XML, as Jenkins, GitLab, GitHub's test reporters and most CI
// systems read it: a <testsuites> root with no attributes, each
// <testsuite> with name, timestamp (UTC, no zone), hostname, tests,
// failures, errors, skipped, time, package and id, then <properties>, the
// <testcase>s, <system-out> and <system-err> (all four present, as the
// strictest readers want). testdata/junit.xsd is that shape as a schema.

type xSuites struct {
	XMLName xml.Name `xml:"testsuites"`
	Suites  []xSuite `xml:"testsuite"`
}

type xSuite struct {
	Name       string      `xml:"name,attr"`
	Timestamp  string      `xml:"timestamp,attr"`
	Hostname   string      `xml:"hostname,attr"`
	Tests      int         `xml:"tests,attr"`
	Failures   int         `xml:"failures,attr"`
	Errors     int         `xml:"errors,attr"`
	Skipped    int         `xml:"skipped,attr"`
	Time       string      `xml:"time,attr"`
	Package    string      `xml:"package,attr"`
	ID         int         `xml:"id,attr"`
	Properties []xProperty `xml:"properties>property"`
	Cases      []xCase     `xml:"testcase"`
	SystemOut  xText       `xml:"system-out"`
	SystemErr  xText       `xml:"system-err"`
}

type xProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type xCase struct {
	Name      string    `xml:"name,attr"`
	Classname string    `xml:"classname,attr"`
	Time      string    `xml:"time,attr"`
	Failure   *xProblem `xml:"failure"`
	Error     *xProblem `xml:"error"`
	Skipped   *xSkipped `xml:"skipped"`
}

type xProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",cdata"`
}

// xText is an element's text, kept as CDATA so that it reads as printed.
type xText struct {
	Text string `xml:",cdata"`
}

type xSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes s as JUnit XML to path (created or replaced): one test
// case per property (per mutant for mutants --detect), a failure carrying
// the explanation, the counterexample's files and its replay command; one
// test suite per history for check. systemOut is what the run printed.
func (s *Summary) WriteJUnit(path, systemOut string) error {
	host, err := os.Hostname()
	if err != nil || strings.TrimSpace(host) == "" {
		host = "localhost"
	}
	stamp := s.Timings.Started.UTC().Format("2006-01-02T15:04:05")
	newSuite := func(name string) xSuite {
		return xSuite{Name: name, Timestamp: stamp, Hostname: host, Time: fmt.Sprintf("%.3f", s.Timings.ElapsedSeconds),
			Package: "lockprover", Properties: s.junitProperties(), SystemOut: xText{systemOut}}
	}
	var doc xSuites
	switch {
	case s.Verb == "check" && len(s.Histories) > 0:
		for _, h := range s.Histories {
			suite := newSuite("lockprover check " + h.File)
			suite.Properties = append(suite.Properties, xProperty{"format", h.Format})
			for _, p := range h.Properties {
				suite.add(propertyCase("lockprover.check", p, nil))
			}
			doc.Suites = append(doc.Suites, suite)
		}
	case s.Verb == "mutants":
		suite := newSuite("lockprover mutants --detect")
		for _, m := range s.Mutants {
			c := xCase{Name: fmt.Sprintf("%s caught by %s", m.Name, m.Property), Classname: "lockprover.mutants", Time: fmt.Sprintf("%.3f", m.MedianSeconds)}
			missed := m.Seeds - m.Caught
			switch {
			case missed > m.Inconclusive:
				c.Failure = &xProblem{Type: m.Property, Message: fmt.Sprintf("caught from %d of %d seeds", m.Caught, m.Seeds),
					Text: fmt.Sprintf("mutant %s was not caught by %s from %d of %d seeds", m.Name, m.Property, missed-m.Inconclusive, m.Seeds)}
			case missed > 0:
				c.Error = &xProblem{Type: Inconclusive, Message: fmt.Sprintf("%d of %d seeds inconclusive: a check ran out of time", m.Inconclusive, m.Seeds)}
			}
			suite.add(c)
		}
		doc.Suites = append(doc.Suites, suite)
	default:
		name := "lockprover " + s.Verb
		if s.Implementation != "" {
			name += ": " + s.Implementation
		}
		if s.Target != "" {
			name += " on " + s.Target
		}
		if s.Seed != "" {
			name += ", seed " + s.Seed
		}
		suite := newSuite(name)
		for _, p := range s.Properties {
			var cx *Counterexample
			if s.Counterexample != nil && s.Counterexample.Property == p.Name {
				cx = s.Counterexample
			}
			suite.add(propertyCase("lockprover."+s.Verb, p, cx))
		}
		doc.Suites = append(doc.Suites, suite)
	}
	// A run that could not finish says so in a test case of its own, so
	// that a reader of the XML alone does not take it for a pass.
	if s.Result == Failed || s.Result == Interrupted {
		msg := s.Error
		if s.Result == Interrupted {
			msg = fmt.Sprintf("interrupted after %d plans: the run is incomplete", s.Plans)
		}
		doc.Suites[len(doc.Suites)-1].add(xCase{Name: "run completes", Classname: "lockprover." + s.Verb, Time: "0",
			Error: &xProblem{Type: s.Result, Message: oneLine(msg), Text: msg}})
	}
	for i := range doc.Suites {
		doc.Suites[i].ID = i
	}
	out, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(xml.Header), append(out, '\n')...), 0o644)
}

func (x *xSuite) add(c xCase) {
	x.Cases = append(x.Cases, c)
	x.Tests++
	switch {
	case c.Failure != nil:
		x.Failures++
	case c.Error != nil:
		x.Errors++
	case c.Skipped != nil:
		x.Skipped++
	}
}

// propertyCase is a property's test case: failed if it failed and counts,
// an error if it could not be decided, skipped if not counted or not
// judged.
func propertyCase(class string, p Property, cx *Counterexample) xCase {
	c := xCase{Name: p.Name, Classname: class, Time: "0"}
	counts := fmt.Sprintf("%d pass, %d fail, %d inconclusive, %d not judged", p.Pass, p.Fail, p.Inconclusive, p.NotJudged)
	text := p.Explanation
	if p.Where != "" {
		text = p.Where + ": " + text
	}
	if cx != nil {
		text = cx.Explanation
		for _, f := range [][2]string{{"counterexample", cx.Dir}, {"plan", cx.Plan}, {"history", cx.History}, {"report", cx.Report}, {"replay", cx.Replay}} {
			if f[1] != "" {
				text += fmt.Sprintf("\n%s: %s", f[0], f[1])
			}
		}
	}
	text += "\nverdicts: " + counts
	switch {
	case !p.Counted && p.Status != Pass:
		c.Skipped = &xSkipped{Message: fmt.Sprintf("not counted (--properties): %s; %s", p.Status, counts)}
	case p.Status == Fail:
		c.Failure = &xProblem{Type: p.Name, Message: oneLine(p.Explanation), Text: text}
	case p.Status == Undecided:
		c.Error = &xProblem{Type: Inconclusive, Message: "a linearizability check ran out of time: nothing shown violated, nothing proven", Text: text}
	case p.Status == NotJudged:
		c.Skipped = &xSkipped{Message: "not judged: what it needs is not in the history"}
	}
	return c
}

// junitProperties are the run's settings as JUnit properties.
func (s *Summary) junitProperties() []xProperty {
	ps := []xProperty{{"verb", s.Verb}, {"result", s.Result}}
	add := func(name, v string) {
		if v != "" {
			ps = append(ps, xProperty{name, v})
		}
	}
	add("target", s.Target)
	add("implementation", s.Implementation)
	add("seed", s.Seed)
	if s.Shard != nil {
		add("shard", s.Shard.String())
	}
	if s.Verb == "prove" || s.Verb == "merge" || s.Verb == "replay" {
		add("plans", fmt.Sprint(s.Plans))
		add("operations", fmt.Sprint(s.Operations))
	}
	keys := make([]string, 0, len(s.Config))
	for k := range s.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add("config."+k, s.Config[k])
	}
	return ps
}
