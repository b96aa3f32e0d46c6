package lockprover_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// mdLink is a Markdown link or image: [text](target) or ![alt](target).
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// Every link of every Markdown page of the project resolves: a file or
// folder that exists, and, after a '#', a heading of that page.
func TestDocLinksResolve(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "*.md").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a checkout)", err)
	}
	pages := strings.Fields(string(out))
	if len(pages) < 10 {
		t.Fatalf("git ls-files found only %d pages", len(pages))
	}
	anchors := map[string]map[string]bool{}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(stripCode(string(b)), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				switch {
				case strings.HasPrefix(path, "/"): // from the repository's root
					file = strings.TrimPrefix(path, "/")
				case path != "":
					file = filepath.Join(filepath.Dir(page), path)
				}
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link to %s: no such file", page, n+1, target)
					continue
				}
				if anchor == "" || !strings.HasSuffix(file, ".md") {
					continue
				}
				if anchors[file] == nil {
					anchors[file] = headings(t, file)
				}
				if !anchors[file][anchor] {
					t.Errorf("%s:%d: link to %s: %s has no heading #%s", page, n+1, target, file, anchor)
				}
			}
		}
	}
}

// stripCode blanks fenced code blocks and inline code, which hold no links.
func stripCode(s string) string { return strip(s, true) }

// strip blanks fenced code blocks, and inline code if inline.
func strip(s string, inline bool) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			b.WriteString("\n")
			continue
		}
		if in {
			b.WriteString("\n")
			continue
		}
		if inline {
			line = regexp.MustCompile("`[^`]*`").ReplaceAllString(line, "``")
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// headings are the anchors GitHub gives a page's headings.
func headings(t *testing.T, file string) map[string]bool {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	count := map[string]int{}
	for _, line := range strings.Split(strip(string(b), false), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := slugOf(text)
		if n := count[slug]; n > 0 {
			seen[slug+"-"+itoa(n)] = true
		} else {
			seen[slug] = true
		}
		count[slug]++
	}
	// HTML anchors written by hand.
	for _, m := range regexp.MustCompile(`<a (?:name|id)="([^"]+)"`).FindAllStringSubmatch(string(b), -1) {
		seen[m[1]] = true
	}
	return seen
}

// slugOf is GitHub's anchor of a heading: lower case, punctuation dropped
// but '-' and '_', spaces to '-'.
func slugOf(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

// dated matches what belongs in docs/measurements, not on a page that
// describes lockprover as it is: a date, or a machine's load figure.
var dated = regexp.MustCompile(`20[0-9][0-9]-[01][0-9]-[0-3][0-9]|load average|load (of |about |around )?[0-9]`)

// The pages stay readable by construction: README.md and every page of
// docs/ but the measurements (dated runs, which the pages cite) and the
// amqp-locks spec (Zac Bentley's) is at most 600 lines, and says no date
// and no load figure outside a code block.
func TestDocPagesStayReadable(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "README.md", "docs/*.md").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a checkout)", err)
	}
	pages := 0
	for _, page := range strings.Fields(string(out)) {
		if strings.HasPrefix(page, "docs/measurements/") || strings.HasPrefix(page, "docs/spec/") {
			continue
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if n := strings.Count(string(b), "\n"); page == "README.md" && n >= 250 {
			t.Errorf("README.md: %d lines, 250 or more: what a page of docs/ can say belongs there, one link each", n)
		}
		if msg := pageShape(string(b)); msg != "" {
			t.Errorf("%s: %s", page, msg)
		}
	}
	if pages < 10 {
		t.Fatalf("only %d pages checked", pages)
	}
	// The rule can fail: a page too long, a date, a load figure; a date
	// in a code block is a transcript's, and passes.
	for _, c := range []struct {
		page string
		ok   bool
	}{
		{strings.Repeat("line\n", 601), false},
		{"measured on 2026-11-28\n", false},
		{"beside the suite (load 15)\n", false},
		{"```\n$ date\n2026-11-28\n```\n", true},
		{strings.Repeat("line\n", 600), true},
	} {
		if got := pageShape(c.page) == ""; got != c.ok {
			t.Errorf("pageShape(%.30q...) passes: %v, want %v", c.page, got, c.ok)
		}
	}
}

// pageShape says what is wrong with a page's shape, or "".
func pageShape(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) > 600 {
		return fmt.Sprintf("%d lines, over 600: split it by question, or move run logs to docs/measurements", len(lines))
	}
	for n, line := range strings.Split(strip(s, false), "\n") {
		if m := dated.FindString(line); m != "" {
			return fmt.Sprintf("line %d says %q outside a code block: dates and loads belong in docs/measurements, which the page can cite", n+1, m)
		}
	}
	return ""
}
