package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// The lockprover binary links neither rabbitmqtest nor testcontainers-go
// (and Docker's client behind it): only tests find brokers in containers.
func TestBinaryDoesNotLinkTestcontainers(t *testing.T) {
	out, err := exec.Command("go", "list", "-pgo=off", "-deps", "../../../cmd/lockprover").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, d := range deps {
		if strings.Contains(d, "testcontainers") || strings.HasSuffix(d, "/rabbitmqtest") || strings.Contains(d, "docker/docker") {
			t.Errorf("the lockprover binary depends on %s", d)
		}
	}
}

// Dependencies point one way (docs/architecture.md): backends import no
// family; a family imports no generic machinery (adapters/: the process
// launcher, the differential harness), which its wiring above it does (its
// protocol package, and its descriptor, the family's top); only
// cmd/lockprover/all imports a descriptor, and no family's other packages import
// its wiring; the core (prover, model, histories, family) imports no family
// and no adapter; the CLI imports no family.
//
// (go list runs with -pgo=off: with cmd/lockprover's default.pgo, it lists
// the packages the binary links a second time, as variants named with a
// " [cmd/lockprover]" after their paths, compiled with the profile.)
func TestDependenciesPointOneWay(t *testing.T) {
	const mod = "github.com/lockprover/lockprover/"
	out, err := exec.Command("go", "list", "-pgo=off", "-deps", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", "../../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, ": ")
		if rel, ok := strings.CutPrefix(pkg, mod); ok {
			for _, d := range strings.Fields(deps) {
				if r, ok := strings.CutPrefix(d, mod); ok {
					imports[rel] = append(imports[rel], r)
				}
			}
		}
	}
	if len(imports) < 20 {
		t.Fatalf("go list gave only %d of the module's packages", len(imports))
	}
	under := func(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	isFamily := func(p string) bool { return under(p, "families") && !under(p, "families/all") }
	isDescriptor := func(p string) bool { return isFamily(p) && strings.HasSuffix(p, "/descriptor") }
	isWiring := func(p string) bool { return isDescriptor(p) || isFamily(p) && strings.HasSuffix(p, "protocol") }
	for pkg, deps := range imports {
		for _, d := range deps {
			var why string
			switch {
			case under(pkg, "backends") && isFamily(d):
				why = "a backend imports a family"
			case isFamily(pkg) && !isWiring(pkg) && under(d, "adapters"):
				why = "a family imports generic machinery"
			case isDescriptor(d) && pkg != "families/all":
				why = "only families/all imports a family's descriptor"
			case isFamily(pkg) && !isWiring(pkg) && isWiring(d):
				why = "a family's package imports the wiring above it"
			case (under(pkg, "prover") || pkg == "model" || pkg == "histories" || pkg == "family") && (isFamily(d) || under(d, "adapters")):
				why = "the core imports a family or an adapter"
			case pkg == "cmd/lockprover/cli" && isFamily(d):
				why = "the CLI imports a family"
			}
			if why != "" {
				t.Errorf("%s: %s imports %s", why, pkg, d)
			}
		}
	}
}
