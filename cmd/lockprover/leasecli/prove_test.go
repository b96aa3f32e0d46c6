package leasecli

import (
	"slices"
	"testing"
	"time"
)

// TTLMs takes whole milliseconds within its bounds, nothing when not
// given, and says what it wants otherwise.
func TestTTLMs(t *testing.T) {
	for _, tc := range []struct {
		given     string
		most      time.Duration
		want      int
		wantErr   string
		wantWords string
	}{
		{given: "", want: 0},
		{given: "250ms", want: 250},
		{given: "2m", most: time.Minute, wantErr: `--ttl: want a duration of whole milliseconds, 10ms to 1m, got "2m"`, wantWords: "10ms to 1m"},
		{given: "5ms", wantErr: `--ttl: want a duration of whole milliseconds, at least 10ms, got "5ms"`, wantWords: "at least 10ms"},
		{given: "10.5ms", wantErr: `--ttl: want a duration of whole milliseconds, at least 10ms, got "10.5ms"`, wantWords: "at least 10ms"},
		{given: "x", wantErr: `--ttl: want a duration of whole milliseconds, at least 10ms, got "x"`, wantWords: "at least 10ms"},
	} {
		got, err := TTLMs(tc.given, 10*time.Millisecond, tc.most, tc.wantWords)
		switch {
		case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
			t.Errorf("%q: %v, want %s", tc.given, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %d, %v; want %d", tc.given, got, err, tc.want)
		}
	}
}

// Faults reads all as the family's own (nil), none as an empty list, and
// names one by one, refusing an unknown one with the list.
func TestFaults(t *testing.T) {
	names := []string{"kill", "pause"}
	if got, err := Faults("all", "k", names, "all"); got != nil || err != nil {
		t.Errorf("all: %v, %v", got, err)
	}
	if got, err := Faults("none", "k", names, "all"); got == nil || len(got) != 0 || err != nil {
		t.Errorf("none: %#v, %v", got, err)
	}
	if got, err := Faults("pause,kill", "k", names, "all"); !slices.Equal(got, []string{"pause", "kill"}) || err != nil {
		t.Errorf("pause,kill: %v, %v", got, err)
	}
	_, err := Faults("kill,clock", "k", names, "all, which is both")
	if want := `--faults: unknown fault "clock" for --kind k (want some of kill, pause; all, which is both; or none)`; err == nil || err.Error() != want {
		t.Errorf("kill,clock: %v, want %s", err, want)
	}
}
