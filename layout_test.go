package lockprover_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The top level is the design card's (docs/architecture.md): its five
// folders, testdata, and what Go projects add by convention.
func TestTopLevelIsTheCards(t *testing.T) {
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a checkout)", err)
	}
	folders := []string{"model", "sim", "adapters", "histories", "cmd", "testdata",
		"internal", "docs", "examples", "scripts"}
	files := []string{"go.mod", "go.sum", "Makefile", "README.md", "CHANGELOG.md", "LICENSE"}
	seen := map[string]bool{}
	for _, f := range strings.Fields(string(out)) {
		top, rest, inFolder := strings.Cut(f, "/")
		switch {
		case strings.HasPrefix(top, "."):
		case inFolder && slices.Contains(folders, top):
		case !inFolder && (slices.Contains(files, top) || strings.HasSuffix(top, ".go")):
		case !seen[top]:
			t.Errorf("%s at the top level (%s): not one of the card's folders %v, nor a file %v or the root package's", top, f, folders, files)
		default:
			_ = rest
		}
		seen[top] = true
	}
	for _, f := range folders[:5] {
		if !seen[f] {
			t.Errorf("the card's folder %s/ is missing", f)
		}
	}
}

// Dependencies point one way, floor by floor (docs/architecture.md):
//
//	examples, scripts  what only tests hold
//	cmd                the binary, the CLI, each family's descriptor (<f>cli) and their list (all)
//	the root package   lockprover.Check, over internal/prover
//	adapters           servers, the process protocol, conform, each family's runner (<f>run)
//	sim                the deterministic servers
//	internal           the core (prover, family) and its helpers
//	model              what correct means: references, checkers, the checker registry
//	histories          what a run records and leaves: the history, verdicts, report, results
//
// A floor imports only floors below it (and itself). Inside adapters, a
// server's adapter imports no family and no generic machinery; the
// process launcher and conform import no family's runner; a family's
// runner imports no generic machinery, no wiring above it (its side of
// the process protocol), and no other family's runner but the lease
// families' shared one (leaserun). Inside cmd, the CLI imports no
// family; only the list imports a family's descriptor (leasecli, what
// the lease families' descriptors share, is not one).
//
// (go list runs with -pgo=off: with cmd/lockprover's default.pgo, it lists
// the packages the binary links a second time, as variants named with a
// " [cmd/lockprover]" after their paths, compiled with the profile.)
func TestDependenciesPointOneWay(t *testing.T) {
	const mod = "github.com/lockprover/lockprover"
	out, err := exec.Command("go", "list", "-pgo=off", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	rel := func(p string) (string, bool) {
		if p == mod {
			return ".", true
		}
		return strings.CutPrefix(p, mod+"/")
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, ": ")
		if r, ok := rel(pkg); ok {
			imports[r] = nil
			for _, d := range strings.Fields(deps) {
				if dr, ok := rel(d); ok {
					imports[r] = append(imports[r], dr)
				}
			}
		}
	}
	if len(imports) < 40 {
		t.Fatalf("go list gave only %d of the module's packages", len(imports))
	}
	for pkg, deps := range imports {
		for _, d := range deps {
			if why := forbidden(pkg, d); why != "" {
				t.Errorf("%s imports %s: %s", pkg, d, why)
			}
		}
	}
	// The rules can fail: each kind of import they refuse.
	for _, c := range [][2]string{
		{"model/lease", "internal/prover/run"},
		{"histories/report", "model"},
		{"sim/redissim", "adapters/redis"},
		{"adapters/redis", "adapters/redlockrun"},
		{"adapters/process", "adapters/amqprun"},
		{"adapters/amqprun", "adapters/process"},
		{"adapters/amqprun", "adapters/amqprun/amqpprotocol"},
		{"adapters/redlockrun", "adapters/dbsemrun"},
		{"cmd/lockprover/cli", "adapters/amqprun"},
		{"cmd/lockprover/cli", "cmd/lockprover/amqpcli"},
		{".", "adapters/amqprun"},
		{"internal/prover", "sim/rabbitmqsim"},
	} {
		if forbidden(c[0], c[1]) == "" {
			t.Errorf("the rules let %s import %s", c[0], c[1])
		}
	}
}

// floors are the layers, bottom first, by the top-level folder (the root
// package is "."); examples and scripts, which only tests hold, stand on
// top.
var floors = []string{"histories", "model", "internal", "sim", "adapters", ".", "cmd", "examples", "scripts"}

func floorOf(p string) int {
	top, _, _ := strings.Cut(p, "/")
	return slices.Index(floors, top)
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// runnerOf is the family runner folder p is in (adapters/<f>run), or "".
func runnerOf(p string) string {
	parts := strings.Split(p, "/")
	if len(parts) >= 2 && parts[0] == "adapters" && strings.HasSuffix(parts[1], "run") {
		return parts[0] + "/" + parts[1]
	}
	return ""
}

// forbidden says why pkg may not import dep, or "".
func forbidden(pkg, dep string) string {
	fp, fd := floorOf(pkg), floorOf(dep)
	switch {
	case fp < 0 || fd < 0:
		return "a package outside the card's floors"
	case fd > fp:
		return floors[fp] + " is below " + floors[fd]
	case pkg == "." && dep != "internal/prover":
		return "the root package is a face over internal/prover alone"
	}
	if floors[fp] == "adapters" && floors[fd] == "adapters" {
		rp, rd := runnerOf(pkg), runnerOf(dep)
		isProtocol := rp != "" && strings.HasSuffix(pkg, "protocol")
		switch {
		case rp == "" && rd != "" && !under(pkg, "adapters/process") && !under(pkg, "adapters/conform"):
			return "a server's adapter imports no family"
		case (under(pkg, "adapters/process") || under(pkg, "adapters/conform")) && rd != "":
			return "the process launcher and conform import no family's runner"
		case rp != "" && !isProtocol && (under(dep, "adapters/process") || under(dep, "adapters/conform")):
			return "a family's runner imports no generic machinery (its protocol package does)"
		case rp != "" && !isProtocol && rd == rp && strings.HasSuffix(dep, "protocol"):
			return "a family's runner imports no wiring above it (its side of the process protocol)"
		case rp != "" && rd != "" && rd != rp && rd != "adapters/leaserun":
			return "a family's runner imports no other family's (but the lease families' leaserun)"
		}
	}
	if floors[fp] == "cmd" {
		isCLI := func(p string) bool {
			return strings.HasPrefix(p, "cmd/lockprover/") && strings.HasSuffix(p, "cli") &&
				p != "cmd/lockprover/cli" && p != "cmd/lockprover/leasecli"
		}
		switch {
		case under(pkg, "cmd/lockprover/cli") && (runnerOf(dep) != "" || isCLI(dep)):
			return "the CLI imports no family"
		case isCLI(dep) && pkg != "cmd/lockprover/all":
			return "only cmd/lockprover/all imports a family's descriptor"
		}
	}
	return ""
}
