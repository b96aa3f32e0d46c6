package dbsemcli

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/runners/dbsemrun"
	"github.com/lockprover/lockprover/internal/family"
	"github.com/lockprover/lockprover/internal/prover/bench"
)

// settings are a command line's settings with the family flags in flags.
func settings(target string, flags map[string]string) family.Settings {
	return family.Settings{Kind: dbsemrun.Kind, Target: target, Faults: "all",
		Flag:   func(name string) string { return flags[name] },
		Given:  func(name string) bool { _, ok := flags[name]; return ok },
		Stdout: io.Discard, Stderr: io.Discard}
}

// --server-version is a private server's: with --private-server the
// setup says it (Server, Where) and a replay's flags keep it; without
// --private-server every verb refuses it, before starting anything,
// saying so; an unknown version is refused with the versions it takes.
func TestServerVersion(t *testing.T) {
	private := map[string]string{"private-server": "true", "server-version": "11.8"}
	st, err := dbSetup(settings("mariadb", private))
	if err != nil {
		t.Fatal(err)
	}
	if st.Server != "mariadb 11.8" || !strings.Contains(st.Where, "MariaDB 11.8") || !strings.Contains(st.Where, "trixie") {
		t.Errorf("Server %q, Where %q", st.Server, st.Where)
	}
	if i := slices.Index(st.Replay, "--server-version"); i < 0 || i+1 >= len(st.Replay) || st.Replay[i+1] != "11.8" || !slices.Contains(st.Replay, "--private-server") {
		t.Errorf("replay flags %v lack --private-server --server-version 11.8", st.Replay)
	}
	st, err = dbSetup(settings("mariadb", map[string]string{"private-server": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if st.Server != "mariadb 10.11" || st.Where != "a private MariaDB of the run's own" || slices.Contains(st.Replay, "--server-version") {
		t.Errorf("without the flag: Server %q, Where %q, replay %v", st.Server, st.Where, st.Replay)
	}

	shared := map[string]string{"server-version": "11.8"}
	usage := func(what string, err error, says string) {
		t.Helper()
		var ue *family.UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v, want a usage error saying %q", what, err, says)
		}
	}
	_, err = dbSetup(settings("mariadb", shared))
	usage("prove", err, "add --private-server")
	_, err = dbReplay(&dbsemrun.Plan{}, settings("mariadb", shared))
	usage("replay", err, "add --private-server")
	_, err = dbValidate(context.Background(), "true", settings("", shared), io.Discard)
	usage("validate-impl", err, "add --private-server")
	err = dbBench(context.Background(), settings("", shared), bench.Config{}, io.Discard)
	usage("bench", err, "add --private-server")
	_, err = dbConform(context.Background(), settings("", shared), family.ConformConfig{Sequences: 1}, io.Discard)
	usage("conform", err, "add --private-server")
	_, err = dbConform(context.Background(), settings("", map[string]string{"private-server": "true", "server-version": "11.7"}), family.ConformConfig{Sequences: 1}, io.Discard)
	usage("conform --server-version 11.7", err, "10.11, 11.8")
	if _, err := dbSetup(settings("sim", private)); err == nil {
		t.Error("--target sim took --private-server --server-version")
	}
	if !strings.Contains(serverVersionFlag.Usage, "10.11, 11.8") || !strings.Contains(serverVersionFlag.Usage, "--dsn") {
		t.Errorf("the flag's usage: %s", serverVersionFlag.Usage)
	}
}
