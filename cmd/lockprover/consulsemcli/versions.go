package consulsemcli

import (
	"cmp"
	"strings"

	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/cmd/lockprover/serverversion"
	"github.com/lockprover/lockprover/internal/family"
)

// serverVersionFlag is --server-version: the version of the private
// real servers (etcd, Consul) the family starts.
var serverVersionFlag = serverversion.Flag(family.Server,
	"consul-semaphore: on private real servers (--target etcd, etcd-cluster, consul, consul-cluster; validate-impl, bench and conform with --backend), the version they run: for etcd "+
		serverversion.Choices("etcd-server", consulsemrun.Etcd)+", for Consul "+
		strings.Join(versions.Names(consulsemrun.Consul), ", ")+
		" (default: "+serverversion.Default(consulsemrun.Consul).Name+"; each lockprover's build in its cache: .ci/consul VERSION)")

// serverVersion is the version --server-version names for backend's
// private servers, the zero Version when it is not given (the machine's
// etcd, the Consul adapters/servers/consul finds: as without the flag). An
// unknown one is a *family.UsageError listing the versions backend takes,
// or saying that it is the other backend's.
func serverVersion(s family.Settings, backend string) (versions.Version, error) {
	value := s.Flag("server-version")
	if value == "" {
		return versions.Version{}, nil
	}
	v, err := versions.Parse(value, backend)
	if err != nil {
		other := consulsemrun.Consul
		if backend == other {
			other = consulsemrun.Etcd
		}
		if _, e := versions.Parse(value, other); e == nil {
			return v, family.Usagef("--server-version %s: a version of %s, and the servers here are %s's (--target or --backend names the server)", value, other, backend)
		}
		return v, family.Usagef("--server-version: %v", err)
	}
	return v, nil
}

// consulVersion reads --server-version into c.Version, for c's real
// target: refused on the simulator and for a server the user runs.
func consulVersion(c *consulsemrun.Config, s family.Settings) error {
	if s.Flag("server-version") == "" {
		return nil
	}
	switch {
	case !consulReal(c.Target):
		return family.Usagef("--server-version: the version of private real servers; --kind %s runs on the simulated %s unless --target %s or %s (or their clusters)", consulsemrun.Kind, cmp.Or(c.Backend, consulsemrun.Consul), consulsemrun.Consul, consulsemrun.Etcd)
	case len(c.Addrs) > 0:
		return family.Usagef("--server-version: the %s you run at %s runs whatever version it runs; lockprover chooses only for a private one", c.Target, strings.Join(c.Addrs, ","))
	}
	v, err := serverVersion(s, c.Target)
	c.Version = v
	return err
}

// serverName is the server a run on backend's private servers of version
// v runs, as adapters/servers/versions names it ("etcd 3.5.30"): the default's
// when v is the zero Version (etcd's as $LOCKPROVER_ETCD_VERSION may say
// it).
func serverName(backend string, v versions.Version) string {
	switch {
	case v.Server != "":
	case backend == consulsemrun.Etcd:
		v, _ = etcd.DefaultVersion()
	default:
		v, _ = versions.Lookup(backend, "")
	}
	return v.String()
}

// named is " 3.5.30" when v was named, "" for the zero Version: for
// Setup.Where.
func named(v versions.Version) string {
	if v.Server == "" {
		return ""
	}
	return " " + v.Name
}

// versionReplay is what a replay of a plan of a run on servers of v
// adds to its command line.
func versionReplay(v versions.Version) []string {
	if v.Server == "" {
		return nil
	}
	return []string{"--server-version", v.Name}
}
