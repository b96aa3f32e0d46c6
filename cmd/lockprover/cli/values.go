package cli

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/internal/family"
)

// checkValues makes every flag of fs say, when a value given to it is
// refused, what was wrong in words a person can act on, naming the flag
// and the value: "--time 5: a duration needs a unit (5s, 500ms, 2m)". The
// flag package's own message ("invalid value "5" for flag -time: parse
// error") names neither a unit nor what a number must be. A family's flag
// whose Arg is a number or a duration (a string to the flag package) is
// checked here too, as it is parsed. The first refusal is left in *bad.
func checkValues(fs *flag.FlagSet, bad *error) {
	fs.VisitAll(func(f *flag.Flag) {
		if _, done := f.Value.(*checkedValue); !done {
			f.Value = &checkedValue{Value: f.Value, name: f.Name, want: wants(f), bad: bad}
		}
	})
}

// wants is what f's value must be: family.Int, family.Float or
// family.Duration, "bool", or "" for anything its Set takes.
func wants(f *flag.Flag) string {
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			return family.Duration
		case int, int64, uint, uint64:
			return family.Int
		case float64:
			return family.Float
		case bool:
			return "bool"
		case string:
			for _, ff := range family.Flags() {
				if ff.Name == f.Name && !ff.Bool {
					return ff.Arg
				}
			}
		}
	}
	return ""
}

// A checkedValue is a flag's value that refuses a bad one in words that
// say what is wrong.
type checkedValue struct {
	flag.Value
	name, want string
	bad        *error
}

func (c *checkedValue) Set(s string) error {
	err := c.typed(s)
	if err == nil {
		err = c.Value.Set(s)
	}
	if err == nil {
		return nil
	}
	why := refusal(c.want, s, err)
	shown := s
	if s == "" || strings.ContainsAny(s, " \t\n\"'") {
		shown = strconv.Quote(s)
	}
	sep := " "
	if c.want == "bool" { // a switch takes a value only so
		sep = "="
	}
	if *c.bad == nil {
		*c.bad = fmt.Errorf("%s%s%s: %s", dashes(c.name), sep, shown, why)
	}
	return errors.New(why)
}

// typed checks a value the flag package keeps as text (a family's flag)
// against its Arg; empty is the flag not given, and passes.
func (c *checkedValue) typed(s string) error {
	if s == "" {
		return nil
	}
	if g, ok := c.Value.(flag.Getter); !ok {
		return nil
	} else if _, text := g.Get().(string); !text {
		return nil
	}
	var err error
	switch c.want {
	case family.Int:
		_, err = strconv.Atoi(s)
	case family.Float:
		_, err = strconv.ParseFloat(s, 64)
	case family.Duration:
		_, err = time.ParseDuration(s)
	}
	return err
}

// refusal says why s is not a value of the kind want names; err is the
// parser's own, said for a kind of value help names no words for.
func refusal(want, s string, err error) string {
	_, notNumber := strconv.ParseFloat(s, 64)
	switch want {
	case family.Duration:
		if notNumber == nil {
			return "a duration needs a unit (5s, 500ms, 2m)"
		}
		return "want a duration with its unit (5s, 500ms, 2m)"
	case family.Int:
		switch {
		case notNumber != nil || strings.Trim(s, "+-0123456789") != "":
			return "want a whole number"
		case strings.HasPrefix(s, "-"):
			return "want a whole number, 0 or more"
		}
		return "out of range"
	case family.Float:
		return "want a number"
	case "bool":
		return "want true or false (or the flag alone, for true)"
	}
	return err.Error()
}

// IsBoolFlag says, as the flag package asks, whether the flag is a switch
// that takes no value.
func (c *checkedValue) IsBoolFlag() bool {
	b, ok := c.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Get is the value's own, for those that have one.
func (c *checkedValue) Get() any {
	if g, ok := c.Value.(flag.Getter); ok {
		return g.Get()
	}
	return c.Value.String()
}
