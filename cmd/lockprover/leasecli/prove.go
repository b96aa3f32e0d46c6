package leasecli

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// TTLMs reads prove's --ttl (given, "" when not) as the lease families
// read it: a duration of whole milliseconds from least to most (0: no
// bound), in milliseconds, 0 when not given. What it cannot take is an
// error saying what it wants (want: "at least 10ms", "10ms to 1m").
func TTLMs(given string, least, most time.Duration, want string) (int, error) {
	if given == "" {
		return 0, nil
	}
	ttl, err := time.ParseDuration(given)
	if err != nil || ttl < least || most != 0 && ttl > most || ttl%time.Millisecond != 0 {
		return 0, fmt.Errorf("--ttl: want a duration of whole milliseconds, %s, got %q", want, given)
	}
	return int(ttl.Milliseconds()), nil
}

// Faults reads prove's --faults (given) for a lease family of kind whose
// faults are names: all is nil (the family's own choice), none an empty
// list, else the faults named, each one of names. An unknown one is an
// error listing names, then all (which all may explain: "all, which is
// kill, pause and partition"), then none.
func Faults(given, kind string, names []string, all string) ([]string, error) {
	switch given {
	case "all":
		return nil, nil
	case "none":
		return []string{}, nil
	}
	var out []string
	for _, name := range strings.Split(given, ",") {
		if !slices.Contains(names, name) {
			return nil, fmt.Errorf("--faults: unknown fault %q for --kind %s (want some of %s; %s; or none)", name, kind, strings.Join(names, ", "), all)
		}
		out = append(out, name)
	}
	return out, nil
}
