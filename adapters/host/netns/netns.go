// Package netns builds a small network lab on one Linux machine, for the
// cluster targets: each host (a RabbitMQ node, a Consul server or agent, an
// etcd member) in a network namespace of its own, every host joined to one
// router namespace, and the namespace lockprover runs in (Local) joined to
// the router too, so that lockprover and its fault proxies reach every host.
//
// A partition is made in the router, one direction at a time: a policy rule
// (`ip rule add from A to B blackhole`) drops A's packets to B there. The
// sender sees nothing (no error, no reset): its connection just stops
// answering, as in a real partition, and its failure detector has to notice.
// This is the only silent drop these machines offer: their kernel has no tc
// netem and no tc classifiers, and there is no iptables; a blackhole route
// or a link set down in the sender's own namespace fails its sends at once,
// which is not what a partition looks like.
//
// Addresses come only from 198.18.0.0/15, the range set aside for network
// test labs: a lab takes a block of sixteen /24s (a /20) of it, the first
// for the link from Local to the router and one a host; nothing is routed
// anywhere else. Two labs, of one run or of two runs side by side, never
// share a block: a lab holds its block's lock file (flock, under /run) for
// as long as it lives, and a block whose lock nobody holds any more is
// swept of a dead run's leftovers before it is used again. Every
// namespace's and veth's name carries the prefix "lp", the block and the
// lab's random id, so that `ip netns list` shows whose it is.
package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Local names the namespace lockprover runs in (the host machine's own,
// usually) where a host's name is asked for: Cut(Local, "n1") cuts
// lockprover and its proxies off from n1.
const Local = "local"

// MaxHosts is the most hosts a lab holds (a /20 of sixteen /24s, one of
// them for Local's link).
const MaxHosts = 15

// blocks is how many labs 198.18.0.0/15 holds at once: 512 /24s, 16 each,
// but the last block (198.19.240.0/20), whose last /24 is the bridge of
// the Docker engine .ci/docker starts (198.19.255.0/24).
const blocks = 31

// rulePriority is the priority of every partition rule in a router:
// before the main table's rule (32766), so that it drops before routing.
const rulePriority = 100

// LockDir holds the blocks' lock files. A variable for tests.
var LockDir = "/run/lockprover/netns"

// A Lab is a router namespace and its hosts' namespaces. Its methods are
// safe for concurrent use; Close it to remove everything it made.
type Lab struct {
	ID     string // "lp07c3a1": the prefix of every name the lab made
	block  int
	lock   *os.File
	router string
	link   string // Local's end of its veth to the router
	hosts  []Host

	mu   sync.Mutex
	cuts map[[2]string]bool // from, to: the directions cut
	done bool
}

// A Host is one namespace of a lab.
type Host struct {
	Name string     // as the caller named it: "n1"
	NS   string     // the namespace: "lp07c3a1-n1"
	Addr netip.Addr // its address: 198.18.x.2
}

// Preflight says what this machine lacks to build a lab, in words that
// say how to get it; nil if nothing. It creates nothing.
func Preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root: run lockprover as root (or under sudo)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("no `ip` command: install iproute2 (apt-get install iproute2)")
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("this kernel has no network namespaces (%v)", err)
	}
	return nil
}

// New builds a lab of the named hosts (at most MaxHosts, each name short,
// of letters and digits, and none of them Local). If anything fails, what
// was made is removed and the error says which step failed.
func New(ctx context.Context, names ...string) (*Lab, error) {
	if err := checkNames(names); err != nil {
		return nil, err
	}
	if err := Preflight(); err != nil {
		return nil, err
	}
	id := make([]byte, 2)
	rand.Read(id)
	block, lock, err := claimBlock()
	if err != nil {
		return nil, err
	}
	l := &Lab{ID: fmt.Sprintf("lp%02d%s", block, hex.EncodeToString(id)), block: block, lock: lock, cuts: map[[2]string]bool{}}
	l.router, l.link = l.ID+"-router", l.ID
	if err := l.build(ctx, names); err != nil {
		l.Close()
		return nil, fmt.Errorf("building the network lab %s: %w", l.ID, err)
	}
	return l, nil
}

func checkNames(names []string) error {
	if len(names) == 0 || len(names) > MaxHosts {
		return fmt.Errorf("a network lab holds 1 to %d hosts, not %d", MaxHosts, len(names))
	}
	for i, n := range names {
		switch {
		case n == Local || n == "router":
			return fmt.Errorf("host name %q is reserved", n)
		case n == "" || len(n) > 12 || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789") != "":
			return fmt.Errorf("host name %q: want 1 to 12 lower-case letters and digits", n)
		case slices.Contains(names[:i], n):
			return fmt.Errorf("host name %q given twice", n)
		}
	}
	return nil
}

// subnet returns the i-th /24 of the lab's block: 0 is Local's link, 1 to
// 15 its hosts'; x is the last byte of the address asked for.
func (l *Lab) subnet(i, x int) netip.Addr {
	n := l.block*16 + i // the /24's index in 198.18.0.0/15
	return netip.AddrFrom4([4]byte{198, byte(18 + n/256), byte(n % 256), byte(x)})
}

// Prefix is the lab's whole block, as Local routes it: 198.18.x.0/20.
func (l *Lab) Prefix() netip.Prefix { return netip.PrefixFrom(l.subnet(0, 0), 20) }

// LocalAddr is Local's address on its link to the router: where the
// lab's hosts see lockprover's connections come from.
func (l *Lab) LocalAddr() netip.Addr { return l.subnet(0, 2) }

func (l *Lab) build(ctx context.Context, names []string) error {
	r := l.router
	steps := [][]string{
		{"netns", "add", r},
		{"-n", r, "link", "set", "lo", "up"},
		{"link", "add", l.link, "type", "veth", "peer", "name", "local", "netns", r},
		{"addr", "add", l.subnet(0, 2).String() + "/24", "dev", l.link},
		{"link", "set", l.link, "up"},
		{"-n", r, "addr", "add", l.subnet(0, 1).String() + "/24", "dev", "local"},
		{"-n", r, "link", "set", "local", "up"},
		{"route", "add", l.Prefix().String(), "via", l.subnet(0, 1).String(), "dev", l.link},
	}
	for i, name := range names {
		h := Host{Name: name, NS: l.ID + "-" + name, Addr: l.subnet(i+1, 2)}
		l.hosts = append(l.hosts, h)
		dev := "h" + strconv.Itoa(i+1)
		steps = append(steps,
			[]string{"netns", "add", h.NS},
			[]string{"-n", h.NS, "link", "set", "lo", "up"},
			[]string{"-n", r, "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
			[]string{"-n", r, "addr", "add", l.subnet(i+1, 1).String() + "/24", "dev", dev},
			[]string{"-n", r, "link", "set", dev, "up"},
			[]string{"-n", h.NS, "addr", "add", h.Addr.String() + "/24", "dev", "eth0"},
			[]string{"-n", h.NS, "link", "set", "eth0", "up"},
			[]string{"-n", h.NS, "route", "add", "default", "via", l.subnet(i+1, 1).String()},
		)
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			return err
		}
	}
	// The router forwards; nothing else in the lab needs to.
	return sysctl(ctx, r, "net.ipv4.ip_forward", "1")
}

// Hosts lists the lab's hosts, in the order New was given them.
func (l *Lab) Hosts() []Host { return slices.Clone(l.hosts) }

// Host returns the host of that name.
func (l *Lab) Host(name string) (Host, error) {
	for _, h := range l.hosts {
		if h.Name == name {
			return h, nil
		}
	}
	return Host{}, fmt.Errorf("no host %q in the network lab %s", name, l.ID)
}

// addr is a host's address, or Local's.
func (l *Lab) addr(name string) (netip.Addr, error) {
	if name == Local {
		return l.LocalAddr(), nil
	}
	h, err := l.Host(name)
	return h.Addr, err
}

// Cut drops, silently, every packet from one host to another (either may
// be Local) from now on, until Restore or Heal: one direction only, so a
// partition both ways is two cuts, and a bridge (A and C cut off from each
// other, B seeing both) is four. Cutting a direction already cut does
// nothing.
func (l *Lab) Cut(ctx context.Context, from, to string) error {
	return l.rule(ctx, from, to, true)
}

// Restore lets packets from one host to another through again.
func (l *Lab) Restore(ctx context.Context, from, to string) error {
	return l.rule(ctx, from, to, false)
}

func (l *Lab) rule(ctx context.Context, from, to string, cut bool) error {
	a, err := l.addr(from)
	if err != nil {
		return err
	}
	b, err := l.addr(to)
	if err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("cannot cut %s off from itself", from)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return fmt.Errorf("the network lab %s is closed", l.ID)
	}
	k := [2]string{from, to}
	if l.cuts[k] == cut {
		return nil
	}
	verb := "add"
	if !cut {
		verb = "del"
	}
	if err := ip(ctx, "-n", l.router, "rule", verb, "from", a.String(), "to", b.String(), "blackhole", "priority", strconv.Itoa(rulePriority)); err != nil {
		return err
	}
	if cut {
		l.cuts[k] = true
	} else {
		delete(l.cuts, k)
	}
	return nil
}

// Isolate cuts one host off from every other host of the lab, both ways
// (Local, lockprover's own namespace, still reaches it).
func (l *Lab) Isolate(ctx context.Context, name string) error {
	if _, err := l.Host(name); err != nil {
		return err
	}
	for _, h := range l.hosts {
		if h.Name == name {
			continue
		}
		if err := l.Cut(ctx, name, h.Name); err != nil {
			return err
		}
		if err := l.Cut(ctx, h.Name, name); err != nil {
			return err
		}
	}
	return nil
}

// Cuts lists the directions cut, as from->to, sorted.
func (l *Lab) Cuts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k := range l.cuts {
		out = append(out, k[0]+"->"+k[1])
	}
	slices.Sort(out)
	return out
}

// Heal restores every direction cut.
func (l *Lab) Heal(ctx context.Context) error {
	l.mu.Lock()
	cuts := make([][2]string, 0, len(l.cuts))
	for k := range l.cuts {
		cuts = append(cuts, k)
	}
	l.mu.Unlock()
	var errs []error
	for _, k := range cuts {
		errs = append(errs, l.Restore(ctx, k[0], k[1]))
	}
	return errors.Join(errs...)
}

// Command returns a command that runs in a host's namespace (through `ip
// netns exec`, which execs it: the command's process is the server's
// own). Everything else about it (environment, outputs, process group) is
// the caller's to set, as for exec.Command.
func (l *Lab) Command(host, name string, args ...string) (*exec.Cmd, error) {
	h, err := l.Host(host)
	if err != nil {
		return nil, err
	}
	return exec.Command("ip", append([]string{"netns", "exec", h.NS, name}, args...)...), nil
}

// Exec is Command's argument list: what to run (the ip binary) and its
// arguments, for a supervisor that takes a binary and its arguments
// (adapters/host/proc).
func (l *Lab) Exec(host, name string, args ...string) (bin string, argv []string, err error) {
	c, err := l.Command(host, name, args...)
	if err != nil {
		return "", nil, err
	}
	return c.Path, c.Args[1:], nil
}

// Close kills every process left in the lab's namespaces and removes the
// namespaces and veths (the route and Local's veth go with the router),
// then gives the block back. It is safe to call twice; the error lists
// what could not be removed.
func (l *Lab) Close() error {
	l.mu.Lock()
	if l.done {
		l.mu.Unlock()
		return nil
	}
	l.done = true
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := removeNamespaces(ctx, l.ID)
	if l.lock != nil {
		l.lock.Close() // releases the flock
	}
	return err
}

// removeNamespaces kills the processes in every namespace of ours (see
// Ours) whose name begins with prefix (a lab's ID, or "lp" and a block's
// two digits), deletes those namespaces, and deletes Local's veths whose
// names begin with prefix if any is left (the router's deletion takes
// them along, unless it failed).
func removeNamespaces(ctx context.Context, prefix string) error {
	all, err := namespaces(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range all {
		if Ours(ns) && strings.HasPrefix(ns, prefix) {
			errs = append(errs, removeNamespace(ctx, ns))
		}
	}
	if links, err := exec.CommandContext(ctx, "ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(links), "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				dev, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
				// The router's deletion may be taking it along right now.
				if ourLink.MatchString(dev) && strings.HasPrefix(dev, prefix) {
					if err := ip(ctx, "link", "del", dev); err != nil && !linkGone(err) {
						errs = append(errs, err)
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// linkGone says a failed "ip link del" found no such link: gone before
// the lookup ("Cannot find device"), or between the lookup and the delete,
// with the router's namespace ("RTNETLINK answers: No such device", seen
// in CI).
func linkGone(err error) bool {
	return strings.Contains(err.Error(), "Cannot find device") || strings.Contains(err.Error(), "No such device")
}

// ours matches the names a lab gives: "lp", the block's two digits, the
// lab's four hex digits, then "-" and the host's name ("router" for the
// router).
var ours = regexp.MustCompile(`^lp[0-9]{2}[0-9a-f]{4}-[a-z0-9]+$`)

// ourLink matches the name of Local's end of a lab's veth: the lab's ID.
var ourLink = regexp.MustCompile(`^lp[0-9]{2}[0-9a-f]{4}$`)

// Ours says whether a namespace's name is one a lab gives: a check for
// leftovers ("ip netns list" shows none of ours once every run has ended).
func Ours(ns string) bool { return ours.MatchString(ns) }

// removeNamespace kills what runs in ns (SIGKILL: the caller has had its
// chance to stop its servers gracefully) and deletes it. A namespace whose
// processes do not die within a few seconds is deleted all the same: the
// name goes, and the kernel frees it with its last process.
func removeNamespace(ctx context.Context, ns string) error {
	for range 50 {
		out, err := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output()
		if err != nil || len(bytes.TrimSpace(out)) == 0 {
			break
		}
		killed := 0
		for _, f := range strings.Fields(string(out)) {
			// Never lockprover itself: a thread of its own may be in the
			// namespace for a moment (Lab.Do).
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
				killed++
			}
		}
		if killed == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ip(ctx, "netns", "del", ns)
}

// namespaces lists the names of the machine's network namespaces.
func namespaces(ctx context.Context) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %w", err)
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// claimBlock takes the first block whose lock nobody holds, starting at a
// random one, sweeps it of a dead run's leftovers, and returns it with its
// lock held.
func claimBlock() (int, *os.File, error) {
	if err := os.MkdirAll(LockDir, 0o755); err != nil {
		return 0, nil, fmt.Errorf("network lab locks: %w", err)
	}
	b := make([]byte, 1)
	rand.Read(b)
	for i := range blocks {
		block := (int(b[0]) + i) % blocks
		f, ok, err := tryLock(block)
		if err != nil {
			return 0, nil, err
		}
		if !ok {
			continue
		}
		if err := removeNamespaces(context.Background(), fmt.Sprintf("lp%02d", block)); err != nil {
			f.Close()
			return 0, nil, fmt.Errorf("sweeping a dead run's network lab of block %d: %w", block, err)
		}
		return block, f, nil
	}
	return 0, nil, fmt.Errorf("all %d network lab blocks of 198.18.0.0/15 are in use (by labs of runs still going; see ip netns list)", blocks)
}

// tryLock takes the block's lock if nobody holds it.
func tryLock(block int) (*os.File, bool, error) {
	f, err := os.OpenFile(filepath.Join(LockDir, fmt.Sprintf("block-%02d.lock", block)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("network lab locks: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("network lab locks: %w", err)
	}
	return f, true, nil
}

// Sweep removes the leftovers of every lab whose run has died (its block's
// lock free), and says how many namespaces it removed. A lab of a run
// still going is left alone.
func Sweep() (int, error) {
	if err := Preflight(); err != nil {
		return 0, err
	}
	all, err := namespaces(context.Background())
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(LockDir, 0o755); err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for block := range blocks {
		prefix := fmt.Sprintf("lp%02d", block)
		count := 0
		for _, ns := range all {
			if Ours(ns) && strings.HasPrefix(ns, prefix) {
				count++
			}
		}
		if count == 0 {
			continue
		}
		f, ok, err := tryLock(block)
		if err != nil || !ok {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, removeNamespaces(context.Background(), prefix))
		f.Close()
		n += count
	}
	return n, errors.Join(errs...)
}

func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func sysctl(ctx context.Context, ns, key, value string) error {
	return ip(ctx, "netns", "exec", ns, "sysctl", "-q", "-w", key+"="+value)
}
