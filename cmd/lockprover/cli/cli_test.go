package cli

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
)

// Flags go before or after the positional arguments, for every verb.
func TestFlagsAfterArguments(t *testing.T) {
	plan := filepath.Join("..", "..", "..", "testdata", "plans", "zombie.json")
	before, outBefore, _ := lockprover("replay", "--model", "strict", "--timeout", "30s", plan)
	after, outAfter, errAfter := lockprover("replay", plan, "--model", "strict", "--timeout", "30s")
	if after == exitUsage || before != after || outBefore != outAfter {
		t.Errorf("replay PLAN --model strict: exit %d (before: %d), stderr %s", after, before, errAfter)
	}
	if !strings.Contains(outAfter, "judged with the strict model") {
		t.Errorf("--model after the plan was not taken:\n%s", outAfter)
	}
	// "--" ends the flags: what follows is an argument, even with a dash.
	code, _, errOut := lockprover("replay", "--", "--model")
	if code != exitUsage || !strings.Contains(errOut, "--model: no such file") {
		t.Errorf("replay -- --model: exit %d, %s", code, errOut)
	}
	hist := filepath.Join("..", "..", "..", "testdata", "histories", "13-concurrent-spurious-full.jsonl")
	code, out, errOut := lockprover("check", hist, "--model", "strict")
	if code != exitViolation || !strings.Contains(out, "(strict model)") {
		t.Errorf("check FILE --model strict: exit %d, stderr %s; want the strict model's violation", code, errOut)
	}
	code, _, errOut = lockprover("mutants", "foo", "-v")
	if code != exitUsage || !strings.Contains(errOut, `unexpected argument "foo"`) {
		t.Errorf("mutants foo -v: exit %d, %s", code, errOut)
	}
}

// help VERB and VERB -h print the verb's own usage on stdout and exit 0.
func TestHelpPerVerb(t *testing.T) {
	for _, c := range commands() {
		for _, args := range [][]string{{"help", c.name}, {c.name, "-h"}, {c.name, "--help"}} {
			code, out, errOut := lockprover(args...)
			if code != exitOK || !strings.HasPrefix(out, "Usage: lockprover "+c.name) || errOut != "" {
				t.Errorf("%v: exit %d, stdout %.80q, stderr %.80q; want its usage on stdout, exit 0", args, code, out, errOut)
			}
		}
	}
	code, out, _ := lockprover("help", "prove")
	for _, flag := range []string{"-runs", "-time", "-heartbeat", "-impl", "-shard", "-out", "-amqp-url"} {
		if code != exitOK || !strings.Contains(out, flag) {
			t.Errorf("help prove lacks %s", flag)
		}
	}
	// --backend has no one default: prove's is consul, conform's and
	// bench's both servers. The help says so and shows none.
	for _, verb := range []string{"bench", "conform", "prove"} {
		if _, out, _ := lockprover("help", verb); !strings.Contains(out, "consul (when not given)") || strings.Contains(out, `(default "consul")`) {
			t.Errorf("help %s: --backend's help shows a default of consul for every verb:\n%s", verb, out)
		}
	}
	if code, _, errOut := lockprover("help", "frobnicate"); code != exitUsage || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("help frobnicate: exit %d, %s", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := lockprover("version")
	if code != exitOK || !strings.HasPrefix(out, "lockprover ") || !strings.Contains(out, "revision") || !strings.Contains(out, "go1.") {
		t.Errorf("version: exit %d, %q", code, out)
	}
	if code, _, errOut := lockprover("version", "extra"); code != exitUsage || !strings.Contains(errOut, `unexpected argument "extra"`) {
		t.Errorf("version extra: exit %d, %s", code, errOut)
	}
}

// Nonsense is refused with exit 2 and a message naming the flag.
func TestNonsenseRefused(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o644)
	plan := filepath.Join("..", "..", "..", "testdata", "plans", "zombie.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"prove", "--time", "-1s"}, "--time must not be negative"},
		{[]string{"prove", "--heartbeat", "-1s"}, "--heartbeat must not be negative"},
		{[]string{"prove", "--heartbeat", "1ns"}, "--heartbeat must be at least 1ms"},
		{[]string{"prove", "--clients", "0"}, "--clients must be at least 1, not 0"},
		{[]string{"prove", "--ops", "-2"}, "prove: --ops -2: want a count of at least 1, or one per client, comma-separated"},
		{[]string{"prove", "--max-faults", "-1"}, "--max-faults must not be negative"},
		{[]string{"prove", "--runs", "0"}, "--runs must be at least 1"},
		{[]string{"prove", "--runs", "5", "--time", "1s"}, "--runs and --time exclude each other"},
		{[]string{"prove", "--timeout", "0s"}, "--timeout must be more than 0"},
		{[]string{"prove", "--shrink-time", "-1s"}, "--shrink-time must not be negative"},
		{[]string{"prove", "--model", "lenient"}, "--model must be standard or strict"},
		{[]string{"prove", "--kind", "redlock", "--model", "strict"}, "--model strict: --kind redlock is judged by standard"},
		{[]string{"prove", "--kind", "db-semaphore", "--model", "strict"}, "--model strict: --kind db-semaphore is judged by standard"},
		{[]string{"replay", filepath.Join("..", "..", "..", "testdata", "plans", "priority-redlock-release-keeps-note.json"), "--model", "strict"}, "--model strict: --kind priority-redlock is judged by standard"},
		{[]string{"prove", "--target", "mars"}, "--target must be sim or rabbitmq"},
		{[]string{"prove", "--kind", "pg-advisory", "--target", "sim", "--impl", "true"}, "--impl runs processes against a real PostgreSQL: use --target postgres"},
		{[]string{"prove", "--kind", "pg-advisory", "--target", "redis"}, `--kind pg-advisory runs on the simulated PostgreSQL (--target sim) or a private PostgreSQL (--target postgres), not "redis"`},
		{[]string{"prove", "--faults", "kill,meteor"}, `--faults: unknown fault "meteor"`},
		{[]string{"prove", "--faults", ""}, `--faults: unknown fault ""`},
		{[]string{"prove", "--properties", ""}, `--properties: unknown property ""`},
		{[]string{"prove", "--impl", ""}, "--impl needs a command"},
		{[]string{"prove", "--amqp-url", "amqp://h/"}, "--amqp-url is for a real broker"},
		{[]string{"prove", "--allow-restart"}, "--allow-restart is for a real broker"},
		{[]string{"prove", "--target", "rabbitmq", "--faults", "restart-broker"}, "needs --allow-restart"},
		{[]string{"prove", "--target", "rabbitmq", "--amqp-url", "notaurl"}, "broker URL notaurl"},
		{[]string{"prove", "--out", file}, "--out: " + file + " is a file"},
		{[]string{"prove", "--out", filepath.Join(file, "sub")}, "is a file"},
		{[]string{"prove", "--out", "/proc/lockprover-out"}, "--out: cannot write in /proc"},
		{[]string{"prove", "--runs", "10", "extra"}, `unexpected argument "extra"`},
		{[]string{"replay", plan, "--timeout", "-1s"}, "--timeout must not be negative"},
		{[]string{"replay", plan, "--amqp-url", "amqp://h/"}, "--amqp-url is for a real broker"},
		{[]string{"prove", "--server-version", "4.9"}, "--server-version 4.9: the simulator behaves as RabbitMQ 3.10.8, 4.0.5, 4.3.6"},
		{[]string{"replay", plan, "--server-version", "4.9"}, "--server-version 4.9: the simulator behaves as RabbitMQ 3.10.8, 4.0.5, 4.3.6"},
		{[]string{"replay", filepath.Join("..", "..", "..", "examples", "cluster", "isolated-holder.json"), "--target", "sim", "--server-version", "4.3.6"}, "--server-version 4.3.6: the simulated cluster's ignore is 3.10.8's; on 4.3.6 it has --partition-handling khepri only"},
		{[]string{"prove", "--target", "sim-cluster", "--server-version", "4.0.5"}, "--server-version 4.0.5: the simulated cluster's ignore is 3.10.8's; on 4.0.5 it has --partition-handling khepri only"},
		{[]string{"prove", "--target", "sim-cluster", "--server-version", "3.10.8", "--partition-handling", "khepri"}, "--server-version 3.10.8: the simulated cluster's khepri mode is 4.3.6's or 4.0.5's (khepri_db)"},
		{[]string{"replay", plan, "--properties", "fast"}, `--properties: unknown property "fast"`},
		{[]string{"replay", plan, "--mutant", "nope"}, `--mutant: no mutant named "nope"`},
		{[]string{"replay", plan, plan}, "want exactly one plan file, got 2"},
		{[]string{"mutants", "foo"}, `mutants: unexpected argument "foo"`},
		{[]string{"mutants", "--detect", "-1"}, "--detect must not be negative"},
		{[]string{"mutants", "--detect", "1", "--budget", "0"}, "--budget must be at least 1"},
		{[]string{"mutants", "--budget", "5"}, "--budget goes with --detect"},
		{[]string{"explore", "extra"}, `unexpected argument "extra"`},
		{[]string{"explore", "--shrink-time", "-1s"}, "--shrink-time must not be negative"},
		{[]string{"explore", "--out", file}, "--out: " + file + " is a file"},
		{[]string{"serve-reference", "extra"}, `unexpected argument "extra"`},
		{[]string{"serve-reference", "--mutant", "nope"}, `--mutant: no mutant named "nope"`},
		{[]string{"validate-impl"}, "--impl: give the command"},
		{[]string{"validate-impl", "--impl", "true", "extra"}, `unexpected argument "extra"`},
		{[]string{"bench", "--n", "0"}, "--n must be at least 1"},
		{[]string{"bench", "--warmup", "-1"}, "--warmup must not be negative"},
		{[]string{"bench", "--slots", "1"}, "--slots must be at least 2"},
		{[]string{"bench", "extra"}, `unexpected argument "extra"`},
		{[]string{"conform", "--retries", "-1"}, "--retries must not be negative"},
		{[]string{"conform", "--rabbitmqctl", " "}, "--rabbitmqctl must not be empty"},
		{[]string{"conform", "--cluster", "--first", "-1"}, `--first: a sequence's index, 0 or more, not "-1"`},
		{[]string{"conform", "--record", file}, "--record is for --cluster"},
		{[]string{"conform", "--cluster", "--recorded", file, "--first", "3"}, "--first is not for --recorded, whose file says what was run"},
		{[]string{"conform", "--cluster", "--recorded", file}, "--recorded: " + file + " holds no sequence"},
		{[]string{"conform", "--cluster", "--recorded", file + "-missing"}, "--recorded: open " + file + "-missing: no such file or directory"},
		{[]string{"conform", "--cluster", "--record", filepath.Join(file, "x")}, "--record: open " + filepath.Join(file, "x") + ": not a directory"},
		{[]string{"prove", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"prove", "--options", "lazy"}, `--options: no option "lazy"`},
		{[]string{"check", "--timeout", "-1s", plan}, "--timeout must not be negative"},
		{[]string{"check", "--model", "lenient", plan}, "--model must be standard or strict"},
		{[]string{"check"}, "no history files given"},
		{[]string{"prove", "--options", "channels=many"}, "--options: channels: want one or per-purpose"},
		{[]string{"prove", "--options", "lazy_connect", "--impl", "true"}, "--options sets the reference's options"},
		{[]string{"serve-reference", "--options", "reconnect=maybe"}, "--options: reconnect: want true or false"},
	} {
		start := time.Now()
		code, _, errOut := lockprover(tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%q took %v", tc.args, d)
		}
	}
}

// A broker that cannot be used is named before the first plan, with exit 2,
// within seconds, on every verb that uses one, and validate-impl does not
// blame the implementation for it. The cases run beside each other: each
// wrong password takes 3 s, RabbitMQ's wait before it closes a connection
// whose login failed.
func TestBrokerPreflight(t *testing.T) {
	t.Parallel()
	good, err := url.Parse(rabbitmqtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	// Port 1, where nobody listens: a free port closed again was taken
	// meanwhile once, by a private mariadbd another test started.
	closed := "amqp://guest:sekrit@127.0.0.1:1/"
	wrongPassword := *good
	wrongPassword.User = url.UserPassword(good.User.Username(), "sekrit")
	wrongVhost := *good
	wrongVhost.Path = "/lp-no-such-vhost"
	plan := filepath.Join("..", "..", "..", "testdata", "plans", "zombie.json")
	for _, tc := range []struct {
		url, want string
	}{
		{closed, "connection refused"},
		{wrongPassword.String(), "authentication failure"},
		{wrongVhost.String(), "vhost not found"},
	} {
		for _, verb := range [][]string{
			{"prove", "--target", "rabbitmq", "--runs", "1"},
			{"prove", "--impl", "lockprover serve-reference", "--runs", "1"},
			{"prove", "--target", "rabbitmq", "--mutant", "trust-scan", "--runs", "1"},
			{"replay", plan, "--target", "rabbitmq"},
			{"replay", plan, "--impl", "lockprover serve-reference"},
			{"validate-impl", "--impl", "lockprover serve-reference"},
		} {
			args := append(verb[:len(verb):len(verb)], "--amqp-url", tc.url)
			t.Run(tc.want+"/"+strings.ReplaceAll(strings.Join(verb, " "), plan, "PLAN"), func(t *testing.T) {
				t.Parallel()
				start := time.Now()
				code, out, errOut := lockprover(args...)
				took := time.Since(start)
				if code != exitUsage || !strings.Contains(errOut, tc.want) {
					t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", args, code, errOut, tc.want)
				}
				if strings.Contains(out+errOut, "sekrit") {
					t.Errorf("%q shows the password: %s%s", args, out, errOut)
				}
				if strings.Contains(out, "the implementation fails the checks") {
					t.Errorf("%q blames the implementation:\n%s", args, out)
				}
				if took > 5*time.Second {
					t.Errorf("%q took %v, want < 5 s", args, took)
				}
				t.Logf("%s: %v", args[0], took.Round(time.Millisecond))
			})
		}
	}
}

// docs/cli.md is what the binary's own flag definitions give
// (lockprover help --markdown): every verb, flag, default and meaning.
func TestCLIDocIsGenerated(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "cli.md")
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	code, want, errOut := lockprover("help", "--markdown")
	if code != exitOK {
		t.Fatalf("help --markdown: exit %d: %s", code, errOut)
	}
	if string(have) == want {
		return
	}
	h, w := strings.Split(string(have), "\n"), strings.Split(want, "\n")
	for i := range max(len(h), len(w)) {
		if i >= len(h) || i >= len(w) || h[i] != w[i] {
			t.Fatalf("docs/cli.md drifted from the flags at line %d:\n have %q\n want %q\nrun: go run ./cmd/lockprover help --markdown > docs/cli.md", i+1, at(h, i), at(w, i))
		}
	}
}

// A verb's flag, a family's among them, is in the reference with its
// default and meaning; and the reference names every family's kind.
func TestCLIDocSaysEachFlag(t *testing.T) {
	_, doc, _ := lockprover("help", "--markdown")
	for _, want := range []string{
		"| `--runs N` | `1000` | number of plans to draw (ignored with --time) |",
		"| `--dsn DSN` |",
		"## Family flags",
		"pg-advisory",
		"## serve-reference",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the reference lacks %q", want)
		}
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(the end)"
}
