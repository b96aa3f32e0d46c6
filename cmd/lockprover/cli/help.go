package cli

// A verb's help, as `lockprover help VERB` prints it and docs/cli.md
// shows it: the usage line, naming every flag the verb takes; what the
// verb does; and its flags under headings: what every run takes, the real
// servers, each family's own, an exhaustive search's. A flag's help is
// the first line of its usage, wrapped so that no line is longer than
// helpWidth; the lines after the first are details that only docs/cli.md
// shows. The verb declares its own flags' headings (a usage), the
// families' flags are placed by the registry: those of real servers
// (family.Flag.Real) under the verb's heading of servers, the others
// under a heading of the families that declare them.

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/lockprover/lockprover/internal/family"
)

// helpWidth is the longest line help prints; flagColumn is where a flag's
// text starts, after the flag and its value.
const (
	helpWidth  = 100
	flagColumn = 28
)

// A verbHelp is what a verb's help says beside its flags' own usages.
type verbHelp struct {
	verb string
	// args are the positional arguments, after the flags in the usage
	// line: "FILE...", "PLAN".
	args string
	// about says what the verb does, wrapped by hand within helpWidth.
	about    string
	sections []section
}

// A section is a heading of a verb's help and the verb's own flags under
// it, written as the usage line shows them ("[--runs N | --time D]
// [--seed N]"): the usage line, the order of the help and each flag's
// value (N, D, FILE) all come from it.
type section struct {
	title, flags string
	// servers says the families' flags of real servers go under this
	// heading too (after the verb's own), and each family's own flags
	// under headings of their own right after it.
	servers bool
}

// A helpSection is a heading of a verb's help with its flags, placed.
type helpSection struct {
	title  string
	tokens []string // as the usage line shows them: "[--runs N | --time D]"
	flags  []helpFlag
}

// A helpFlag is one flag as help lists it.
type helpFlag struct {
	name, arg, def string
	// text is the usage's first line: for a family's flag, each
	// declaring family's where they differ.
	text []string
	// details are the usage's later lines (the verb's own flags; a
	// family's are in docs/cli.md's table of family flags).
	details string
	// families declare the flag; none for the verb's own.
	families []*family.Descriptor
}

// flagToken matches a flag in a usage line, with its value if it has one:
// "--runs N", "-v", "--ops N[,N...]".
var flagToken = regexp.MustCompile(`(?:^|[\s\[|])--?([a-z][a-z0-9-]*)(?: ([^\s\[\]|-][^\s]*))?`)

// flagsIn lists the flags of a section's usage, each with its value's
// name ("" for a switch), in order.
func flagsIn(s string) [][2]string {
	var out [][2]string
	for _, m := range flagToken.FindAllStringSubmatch(s, -1) {
		arg := m[2]
		for strings.Count(arg, "]") > strings.Count(arg, "[") {
			arg = arg[:strings.LastIndex(arg, "]")] // ("COMMAND]...": what follows goes too)
		}
		out = append(out, [2]string{m[1], arg})
	}
	return out
}

// groups splits a usage into its top-level bracketed groups, the units a
// usage line is wrapped between: "[--impl COMMAND [--init-timeout D]]"
// stays whole.
func groups(s string) []string {
	var out []string
	depth, start := 0, -1
	for i, r := range s {
		switch {
		case r == '[':
			if depth == 0 {
				start = i
			}
			depth++
		case r == ']':
			depth--
			if depth == 0 && start >= 0 {
				out = append(out, s[start:i+1])
				start = -1
			}
		case depth == 0 && r != ' ' && start < 0:
			start = i
		case depth == 0 && r == ' ' && start >= 0:
			out = append(out, s[start:i])
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out
}

// layout places fs's flags under u's headings and the families'.
func (u verbHelp) layout(fs *flag.FlagSet) []helpSection {
	placed := map[string]bool{}
	var out []helpSection
	at := -1 // where the families' own sections go
	for _, s := range u.sections {
		hs := helpSection{title: s.title, tokens: groups(s.flags)}
		for _, na := range flagsIn(s.flags) {
			if f := fs.Lookup(na[0]); f != nil && !placed[na[0]] {
				placed[na[0]] = true
				text, details, _ := strings.Cut(f.Usage, "\n")
				hs.flags = append(hs.flags, helpFlag{name: f.Name, arg: na[1], def: shownDefault(f), text: []string{text}, details: details})
			}
		}
		if s.servers {
			for _, hf := range familyFlagsOf(fs, placed, true) {
				hs.add(hf)
			}
			at = len(out) + 1
		}
		out = append(out, hs)
	}
	own := familySections(fs, placed)
	if at < 0 {
		at = len(out)
	}
	out = slices.Insert(out, at, own...)
	var rest helpSection // flags no heading names: a test refuses them
	fs.VisitAll(func(f *flag.Flag) {
		if !placed[f.Name] {
			rest.add(helpFlag{name: f.Name, def: shownDefault(f), text: []string{f.Usage}})
		}
	})
	if len(rest.flags) > 0 {
		rest.title = "Other flags"
		out = append(out, rest)
	}
	return out
}

// add lists hf under s, and in the usage line.
func (s *helpSection) add(hf helpFlag) {
	s.flags = append(s.flags, hf)
	s.tokens = append(s.tokens, "["+strings.TrimSpace(dashes(hf.name)+" "+hf.arg)+"]")
}

// familyFlagsOf lists the families' flags fs has that are not placed yet,
// those of real servers (real) or the others, family by family, marking
// them placed.
func familyFlagsOf(fs *flag.FlagSet, placed map[string]bool, real bool) []helpFlag {
	var out []helpFlag
	for _, d := range family.All() {
		for _, f := range d.Flags {
			if placed[f.Name] || f.Real != real || fs.Lookup(f.Name) == nil {
				continue
			}
			placed[f.Name] = true
			hf := helpFlag{name: f.Name, arg: f.Arg, def: shownDefault(fs.Lookup(f.Name)), families: family.Flagged(f.Name)}
			for _, o := range hf.families {
				for _, of := range o.Flags {
					if first, _, _ := strings.Cut(of.Usage, "\n"); of.Name == f.Name && !slices.Contains(hf.text, first) {
						hf.text = append(hf.text, first)
					}
				}
			}
			out = append(out, hf)
		}
	}
	return out
}

// familySections puts the families' flags not placed yet under headings
// of the families that declare them: one family's, or a few families'
// alike (redlock and priority-redlock's).
func familySections(fs *flag.FlagSet, placed map[string]bool) []helpSection {
	var out []helpSection
	flags := append(familyFlagsOf(fs, placed, true), familyFlagsOf(fs, placed, false)...)
	for _, hf := range flags {
		title := familiesTitle(hf.families)
		i := slices.IndexFunc(out, func(s helpSection) bool { return s.title == title })
		if i < 0 {
			out = append(out, helpSection{title: title})
			i = len(out) - 1
		}
		if len(hf.text) == 1 { // where the families' differ, each says whose it is
			hf.text[0] = strip(hf.text[0], hf.families)
		}
		out[i].add(hf)
	}
	return out
}

// familiesTitle is the heading of the flags these families declare:
// their names, with a family's kinds where they are not its name.
func familiesTitle(ds []*family.Descriptor) string {
	var names []string
	for _, d := range ds {
		name := d.Name
		if len(d.Kinds) > 1 || d.Kinds[0] != d.Name {
			name += " (--kind " + strings.Join(d.Kinds, ", ") + ")"
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// strip drops from a family flag's help the families it begins by naming
// ("redlock: N, ..."), which its heading names already; what follows them
// before the colon stays ("amqp-locks, --impl on the simulator: ...").
func strip(text string, ds []*family.Descriptor) string {
	head, rest, ok := strings.Cut(text, ": ")
	if !ok {
		return text
	}
	names := strings.Split(head, ", ")
	i := 0
	for i < len(names) && slices.ContainsFunc(ds, func(d *family.Descriptor) bool { return d.Name == names[i] }) {
		i++
	}
	switch i {
	case 0:
		return text
	case len(names):
		return rest
	}
	return strings.Join(names[i:], ", ") + ": " + rest
}

// shownDefault is a flag's default as help shows it: none for a zero
// value (a switch off, an empty text, 0), whose meaning the usage says.
func shownDefault(f *flag.Flag) string {
	switch f.DefValue {
	case "", "false", "0", "0s", "[]":
		return ""
	}
	return f.DefValue
}

// dashes is how help writes a flag: -v, --runs.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// writeHelp writes a verb's help: its usage line, what it does, and its
// flags under their headings.
func writeHelp(w io.Writer, u verbHelp, fs *flag.FlagSet) {
	secs := u.layout(fs)
	fmt.Fprintln(w, usageLine("Usage: lockprover "+u.verb, secs, u.args))
	if about := strings.TrimSpace(u.about); about != "" {
		fmt.Fprintf(w, "\n%s\n", about)
	}
	for _, s := range secs {
		if len(s.flags) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", s.title)
		for _, hf := range s.flags {
			fmt.Fprint(w, hf.lines())
		}
	}
}

// usageLine is a verb's usage: head, then every section's flags and the
// arguments, wrapped under the first flag.
func usageLine(head string, secs []helpSection, args string) string {
	var words []string
	for _, s := range secs {
		words = append(words, s.tokens...)
	}
	if args != "" {
		words = append(words, args)
	}
	lines := wrap(words, helpWidth-len(head)-1)
	return strings.TrimSpace(head + " " + strings.Join(lines, "\n"+strings.Repeat(" ", len(head)+1)))
}

// lines is a flag's entry in help: the flag and its value, then its help
// and default wrapped in the column at flagColumn.
func (hf helpFlag) lines() string {
	head := "  " + strings.TrimSpace(dashes(hf.name)+" "+hf.arg)
	text := strings.Join(hf.text, "; ")
	if hf.def != "" {
		text += " (default " + hf.def + ")"
	}
	body := wrap(strings.Fields(text), helpWidth-flagColumn)
	var b strings.Builder
	indent := strings.Repeat(" ", flagColumn)
	if len(head)+2 <= flagColumn {
		b.WriteString(head + strings.Repeat(" ", flagColumn-len(head)) + body[0] + "\n")
		body = body[1:]
	} else {
		b.WriteString(head + "\n")
	}
	for _, l := range body {
		b.WriteString(indent + l + "\n")
	}
	return b.String()
}

// wrap fills lines of at most width with words, a word longer than width
// on a line of its own.
func wrap(words []string, width int) []string {
	var lines []string
	cur := ""
	for _, w := range words {
		switch {
		case cur == "":
			cur = w
		case len(cur)+1+len(w) <= width:
			cur += " " + w
		default:
			lines = append(lines, cur)
			cur = w
		}
	}
	return append(lines, cur)
}
