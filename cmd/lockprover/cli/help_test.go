package cli

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// No line of any verb's help, nor of lockprover help, is longer than 100
// columns (a terminal's width, with room to spare), and no flag's entry
// takes more than three lines: what does not fit goes to docs/cli.md.
func TestHelpLinesFit(t *testing.T) {
	verbs := []string{""}
	for _, c := range commands() {
		verbs = append(verbs, c.name)
	}
	for _, verb := range verbs {
		args := []string{"help"}
		if verb != "" {
			args = append(args, verb)
		}
		code, out, errOut := lockprover(args...)
		if code != exitOK || errOut != "" {
			t.Fatalf("%q: exit %d, %s", args, code, errOut)
		}
		entry, lines := "", 0
		for i, l := range strings.Split(out, "\n") {
			if len(l) > helpWidth {
				t.Errorf("lockprover %s, line %d is %d columns, over %d:\n%s", strings.Join(args, " "), i+1, len(l), helpWidth, l)
			}
			switch {
			case strings.HasPrefix(l, "  -"):
				entry, lines = l, 1
			case entry != "" && strings.HasPrefix(l, strings.Repeat(" ", flagColumn)):
				if lines++; lines == 4 {
					t.Errorf("lockprover %s: the entry of %s takes more than three lines", strings.Join(args, " "), strings.Fields(entry)[0])
				}
			default:
				entry = ""
			}
		}
	}
}

// usageLineFlag matches a flag in a usage line.
var usageLineFlag = regexp.MustCompile(`(?:^|[\s\[|])(--?[a-z][a-z0-9-]*)`)

// Every verb's usage line names every flag the verb takes, and no other;
// its help lists each flag once, under a heading (no flag is left to
// "Other flags"), with what its value is: a number flag as N, a list as
// N[,N...], a duration as D.
func TestUsageNamesEveryFlag(t *testing.T) {
	for _, c := range commands() {
		fs, _, err := madeBy(c)
		if err != nil {
			t.Fatal(err)
		}
		_, help, _ := lockprover("help", c.name)
		usage, body, _ := strings.Cut(help, "\n\n")
		named := map[string]bool{}
		for _, m := range usageLineFlag.FindAllStringSubmatch(usage, -1) {
			name := strings.TrimLeft(m[1], "-")
			named[name] = true
			if fs.Lookup(name) == nil {
				t.Errorf("%s's usage line names %s, a flag it does not take", c.name, m[1])
			}
		}
		fs.VisitAll(func(f *flag.Flag) {
			if !named[f.Name] {
				t.Errorf("%s's usage line leaves out --%s:\n%s", c.name, f.Name, usage)
			}
			if n := strings.Count(body, "\n  "+dashes(f.Name)+" ") + strings.Count(body, "\n  "+dashes(f.Name)+"\n"); n != 1 {
				t.Errorf("%s's help lists --%s %d times, want once", c.name, f.Name, n)
			}
		})
		if strings.Contains(body, "\nOther flags:") {
			t.Errorf("%s's help has flags under no heading of its own:\n%s", c.name, body[strings.Index(body, "\nOther flags:"):])
		}
	}
	_, help, _ := lockprover("help", "prove")
	for _, want := range []string{"--servers N ", "--limit N ", "--runs N ", "--ops N[,N...] ", "--admin-ops N[,N...] ", "--ttl D ", "--time D ", "--speedup R ", "--max-schedules N "} {
		if !strings.Contains(help, "\n  "+want) {
			t.Errorf("help prove does not list %q", want)
		}
	}
	for _, heading := range []string{"\nEvery run:\n", "\nReal servers (--target other than sim):\n", "\namqp-locks (--kind semaphore, mutex):\n", "\npriority-redlock, redlock:\n", "\nExhaustive search (--exhaustive):\n"} {
		if !strings.Contains(help, heading) {
			t.Errorf("help prove lacks the heading %q", heading)
		}
	}
}

// --parallel's help points to the page that explains it.
func TestParallelHelpPointsToItsPage(t *testing.T) {
	_, help, _ := lockprover("help", "prove")
	_, entry, _ := strings.Cut(help, "\n  --parallel N")
	entry, _, _ = strings.Cut(entry, "\n  --")
	page, anchor, ok := strings.Cut(regexp.MustCompile(`docs/[a-z-]+\.md#[a-z-]+`).FindString(entry), "#")
	if !ok {
		t.Fatalf("--parallel's help names no page:%s", entry)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", page))
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile(`(?m)^#+ (.*)$`)
	for _, m := range heading.FindAllStringSubmatch(string(doc), -1) {
		if strings.ReplaceAll(strings.ToLower(m[1]), " ", "-") == anchor {
			if !strings.Contains(string(doc), "`prove --parallel N`") {
				t.Errorf("%s#%s does not explain --parallel", page, anchor)
			}
			return
		}
	}
	t.Errorf("%s has no heading #%s", page, anchor)
}

// help validate-impl says which server each of the six families'
// implementations is checked on.
func TestValidateImplHelpCoversEveryFamily(t *testing.T) {
	_, help, _ := lockprover("help", "validate-impl")
	for _, kind := range []string{"semaphore or mutex (amqp-locks", "--kind consul-semaphore:", "--kind db-semaphore:", "--kind pg-advisory:", "--kind redlock or priority-redlock:"} {
		if !strings.Contains(help, kind) {
			t.Errorf("help validate-impl does not say %q", kind)
		}
	}
}

// A usage's flag whose value is followed by more than its brackets
// ("[--impl COMMAND]...", a flag given again) is read, its value without
// them, not looped on.
func TestFlagsInARepeatedFlag(t *testing.T) {
	got := flagsIn("[--out DIR] [--impl COMMAND]... [--x]")
	want := [][2]string{{"out", "DIR"}, {"impl", "COMMAND"}, {"x", ""}}
	if len(got) != len(want) {
		t.Fatalf("%q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("flag %d: %q, want %q", i, got[i], want[i])
		}
	}
}
