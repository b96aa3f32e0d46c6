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
//	adapters           runners, served, process, conform, servers, host (its rooms, top first)
//	sim                the deterministic servers
//	internal           the core (prover, family) and its helpers
//	model              what correct means: references, checkers, the checker registry
//	histories          what a run records and leaves: the history, verdicts, report, results
//
// A floor imports only floors below it (and itself). Inside adapters the
// rooms are floors too (adapterRooms): the host's machinery imports no
// other room, a real server only the host, the process protocol and the
// differentials (conform) only servers and the host, the simulators served
// on the wire (served) the process protocol's waiting too, and a family's
// runner what is below it; a family's runner imports no generic machinery
// (the process protocol, conform, served), which its wiring packages
// do (its side of the process protocol, <f>protocol, and its face for a
// lock written in Go, <f>go), no wiring above it, and no other family's
// runner but the lease families' shared one (leaserun). Inside cmd, the
// CLI imports no family; only the list imports a family's descriptor
// (leasecli, what the lease families' descriptors share, is not one). A
// simulator imports no real server's client (serverClients): its
// differential, which speaks to the real server, is in adapters/conform.
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
	clients := map[string][]string{} // each package's imports of other modules
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
				} else if otherModule(d) {
					clients[r] = append(clients[r], d)
				}
			}
		}
	}
	if len(imports) < 40 {
		t.Fatalf("go list gave only %d of the module's packages", len(imports))
	}
	for _, m := range []map[string][]string{imports, clients} {
		for pkg, deps := range m {
			for _, d := range deps {
				if why := forbidden(pkg, d); why != "" {
					t.Errorf("%s imports %s: %s", pkg, d, why)
				}
			}
		}
	}
	// The rules can fail: each kind of import they refuse.
	for _, c := range [][2]string{
		{"model/lease", "internal/prover/run"},
		{"histories/report", "model"},
		{"sim/redissim", "adapters/servers/redis"},
		{"sim/redissim", "github.com/redis/go-redis/v9"},
		{"sim/consulsim", "go.etcd.io/etcd/client/v3"},
		{"sim/mariadbsim", "github.com/jackc/pgx/v5"},
		{"adapters/servers/redis", "adapters/runners/redlockrun"},
		{"adapters/host/proc", "adapters/servers/redis"},
		{"adapters/servers/rabbitmq", "adapters/conform"},
		{"adapters/process", "adapters/runners/amqprun"},
		{"adapters/conform", "adapters/process"},
		{"adapters/conform/consulconform", "adapters/runners/consulsemrun"},
		{"adapters/conform/redisconform", "adapters/process"},
		{"adapters/process", "adapters/conform"},
		{"adapters/runners/amqprun", "adapters/process"},
		{"adapters/runners/amqprun", "adapters/conform"},
		{"adapters/runners/amqprun", "adapters/served/amqpserve"},
		{"adapters/served/amqpserve", "adapters/conform"},
		{"adapters/process", "adapters/served/amqpserve"},
		{"adapters/runners/consulsemrun", "adapters/conform/consulconform"},
		{"adapters/runners/amqprun", "adapters/runners/amqprun/amqpprotocol"},
		{"adapters/runners/amqprun", "adapters/runners/amqprun/amqpgo"},
		{"adapters/runners/amqprun/amqpgoo", "adapters/process"},
		{"adapters/runners/redlockrun", "adapters/runners/dbsemrun"},
		{"cmd/lockprover/cli", "adapters/runners/amqprun"},
		{"cmd/lockprover/cli", "cmd/lockprover/amqpcli"},
		{".", "adapters/runners/amqprun"},
		{"internal/prover", "sim/rabbitmqsim"},
		{"adapters/somewhere", "adapters/host/proc"},
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

// adapterRooms are the rooms of adapters/, bottom first: each imports
// only rooms below it and itself (docs/architecture.md says each).
var adapterRooms = []string{"host", "servers", "conform", "process", "served", "runners"}

// roomOf is the room of adapters/ p is in (its index in adapterRooms), or
// -1. conform and process stand side by side: neither imports the other.
func roomOf(p string) int {
	parts := strings.Split(p, "/")
	if len(parts) < 2 || parts[0] != "adapters" {
		return -1
	}
	return slices.Index(adapterRooms, parts[1])
}

// runnerOf is the family runner folder p is in (adapters/runners/<f>run), or "".
func runnerOf(p string) string {
	parts := strings.Split(p, "/")
	if len(parts) >= 3 && parts[0] == "adapters" && parts[1] == "runners" {
		return strings.Join(parts[:3], "/")
	}
	return ""
}

// serverClients are the modules of the real servers' clients. No
// simulator imports one: each simulator is held to its real server by a
// differential in adapters/conform, which speaks the client, so that the
// simulator stays the deterministic model alone.
var serverClients = []string{"github.com/redis/go-redis", "go.etcd.io/etcd", "github.com/jackc/pgx",
	"github.com/rabbitmq/amqp091-go", "github.com/hashicorp/consul/api", "github.com/go-sql-driver/mysql"}

// clientsAllowed are the simulators' imports of a server's client that
// the rule lets through, by package and import, with why.
var clientsAllowed = map[[2]string]string{
	// model/dbsem classifies the errors of database/sql by the MySQL
	// driver's values (mysql.MySQLError, ErrInvalidConn), so the simulator
	// answers with those values; it opens no connection.
	{"sim/mariadbsim", "github.com/go-sql-driver/mysql"}: "the driver's error values",
}

// otherModule says whether p is a package of another module (its first
// element a domain): not the standard library's.
func otherModule(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return strings.Contains(first, ".")
}

// forbidden says why pkg may not import dep, or "". dep is a package of
// the module, by its path in it, or one of another module, by its import
// path.
func forbidden(pkg, dep string) string {
	if otherModule(dep) {
		return forbiddenClient(pkg, dep)
	}
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
		if why := forbiddenInAdapters(pkg, dep); why != "" {
			return why
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

// forbiddenClient says why pkg may not import dep, a package of another
// module, or "": a simulator imports no real server's client
// (serverClients), but what clientsAllowed lets through.
func forbiddenClient(pkg, dep string) string {
	if floorOf(pkg) < 0 || floors[floorOf(pkg)] != "sim" {
		return ""
	}
	for _, c := range serverClients {
		if (dep == c || strings.HasPrefix(dep, c+"/")) && clientsAllowed[[2]string{pkg, dep}] == "" {
			return "a simulator imports no real server's client (its differential, in adapters/conform, does)"
		}
	}
	return ""
}

// wiring says whether p is a family runner's wiring: its side of the
// process protocol (<f>run/<f>protocol) or its face for a lock written in
// Go, proven in the test's process (<f>run/<f>go).
func wiring(p string) bool {
	run := runnerOf(p)
	if run == "" || p == run {
		return false
	}
	f := strings.TrimSuffix(strings.TrimPrefix(run, "adapters/runners/"), "run")
	return strings.HasSuffix(p, "protocol") || p == run+"/"+f+"go"
}

// forbiddenInAdapters says why pkg may not import dep, both in adapters/,
// or "".
func forbiddenInAdapters(pkg, dep string) string {
	rp, rd := roomOf(pkg), roomOf(dep)
	runP, runD := runnerOf(pkg), runnerOf(dep)
	isProtocol := wiring(pkg)
	generic := under(dep, "adapters/process") || under(dep, "adapters/conform") || under(dep, "adapters/served")
	switch {
	case rp < 0 || rd < 0:
		return "a package of adapters/ outside its rooms " + strings.Join(adapterRooms, ", ")
	case rd > rp:
		return "adapters/" + adapterRooms[rp] + " is below adapters/" + adapterRooms[rd]
	case rp != rd && adapterRooms[rp] == "process" && adapterRooms[rd] == "conform",
		rp != rd && adapterRooms[rp] == "served" && adapterRooms[rd] == "conform":
		return "the process protocol (and the served simulators above it) and the differentials stand side by side"
	case runP != "" && !isProtocol && generic:
		return "a family's runner imports no generic machinery (its protocol package does)"
	case runP != "" && !isProtocol && runD == runP && wiring(dep):
		return "a family's runner imports no wiring above it (its side of the process protocol)"
	case runP != "" && runD != "" && runD != runP && runD != "adapters/runners/leaserun":
		return "a family's runner imports no other family's (but the lease families' leaserun)"
	}
	return ""
}
