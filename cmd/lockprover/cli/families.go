package cli

// The lock families the CLI proves and judges: every one registered in
// package family (cmd/lockprover links them all in with cmd/lockprover/all).
// The CLI knows none of them by name: it asks the registry.
import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/internal/family"
)

// familyFlags are the flags of every family's targets (--amqp-url, --dsn,
// ...), registered once each on a verb's flag set.
// and --init-timeout, which every family's processes take.
type familyFlags struct {
	str         map[string]*string
	bool        map[string]*bool
	initTimeout *time.Duration
	verb        family.Verbs // the verb they are registered for
}

// register registers on fs the flags that go with verb.
func (ff *familyFlags) register(fs *flag.FlagSet, verb family.Verbs) {
	ff.str, ff.bool, ff.verb = map[string]*string{}, map[string]*bool{}, verb
	if verb&(family.Prove|family.Replay|family.Validate) != 0 {
		ff.initTimeout = fs.Duration("init-timeout", process.HandshakeTimeout, "with --impl: how long each of the implementation's processes may take to answer init\n (the protocol's 10s by default; more for a runtime slow to start, or a loaded machine)")
	}
	for _, f := range family.Flags() {
		if f.Verbs&verb == 0 {
			continue
		}
		if f.Bool {
			ff.bool[f.Name] = fs.Bool(f.Name, false, f.Usage)
		} else {
			ff.str[f.Name] = fs.String(f.Name, f.Default, f.Usage)
		}
	}
}

// settings are the family's settings with its flags' values, as given.
func (ff *familyFlags) settings(fs *flag.FlagSet, kind, mutant string) family.Settings {
	return family.Settings{
		Kind:   kind,
		Mutant: mutant,
		Flag: func(name string) string {
			switch {
			case ff.str[name] != nil:
				return *ff.str[name]
			case ff.bool[name] != nil && *ff.bool[name]:
				return "true"
			}
			return ""
		},
		Given:       func(name string) bool { return given(fs, name) },
		InitTimeout: ff.initTimeoutGiven(),
	}
}

// initTimeoutGiven is --init-timeout's value, 0 on a verb without it.
func (ff *familyFlags) initTimeoutGiven() time.Duration {
	if ff.initTimeout == nil {
		return 0
	}
	return *ff.initTimeout
}

// check reports a bad --init-timeout.
func (ff *familyFlags) check(bad *checks) {
	if ff.initTimeout != nil {
		bad.duration("init-timeout", *ff.initTimeout, false)
	}
}

// otherFamilies refuses the flags given that belong to other families
// than d (or that d takes with other verbs only), naming those whose they
// are.
func (ff *familyFlags) otherFamilies(fs *flag.FlagSet, d *family.Descriptor, kind string) error {
	for _, f := range family.Flags() {
		registered := ff.str[f.Name] != nil || ff.bool[f.Name] != nil
		if !registered || !given(fs, f.Name) || ff.takes(d, f.Name) {
			continue
		}
		var names []string
		for _, o := range family.Flagged(f.Name) {
			if ff.takes(o, f.Name) {
				names = append(names, o.Name)
			}
		}
		return fmt.Errorf("--%s is for %s, not --kind %s", f.Name, strings.Join(names, " and "), kind)
	}
	return nil
}

// takes says whether d declares the flag for the verb ff is registered
// for.
func (ff *familyFlags) takes(d *family.Descriptor, name string) bool {
	return slices.ContainsFunc(d.Flags, func(f family.Flag) bool { return f.Name == name && f.Verbs&ff.verb != 0 })
}

// targetList says the registered families' real targets, for usage lines.
func targetList() string {
	var ts []string
	for _, t := range family.TargetNames() {
		if t != "sim" {
			ts = append(ts, t)
		}
	}
	return strings.Join(ts, ", ")
}

// kindsWith lists the first (default) kind of each family that has what
// a verb needs (explore, bench, conform).
func kindsWith(has func(*family.Descriptor) bool) []string {
	var ks []string
	for _, d := range family.All() {
		if has(d) {
			ks = append(ks, d.Kinds[0])
		}
	}
	return ks
}
