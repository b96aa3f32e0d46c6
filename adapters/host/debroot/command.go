package debroot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RunOptions says how Command runs a program from a root.
type RunOptions struct {
	// Data is a host directory bound onto /lockprover inside the root:
	// the run's own data, config, logs and sockets belong there. Empty
	// binds nothing. It must exist; give it to User (see MkdirData).
	Data string
	// User is a user of the root (a name from ROOT/etc/passwd, such as
	// postgres, rabbitmq, mysql, redis, valkey, etcd) or a numeric uid.
	// Empty runs as root.
	User string
	// NetNS, when set, runs the program in that network namespace
	// (as `ip netns exec NS`).
	NetNS string
	// Env is added to the base environment (PATH, LANG=C.UTF-8, HOME,
	// USER, LOGNAME); a later entry wins.
	Env []string
	// Dir is the working directory inside the root: /lockprover when
	// Data is set, / otherwise.
	Dir string
	// Writable leaves the root writable. By default it is mounted
	// read-only for the run, so that no run changes the shared cache.
	Writable bool
	// StopTimeout is how long to wait after SIGTERM, when ctx ends,
	// before SIGKILL (default 20 s).
	StopTimeout time.Duration
	// resolve leaves the root's resolv.conf (debootstrap's copy of the
	// host's) in force: apt needs it while a root is built; a run of a
	// server must not have it (see initScript).
	resolve bool
}

// initScript is PID 1 of the run's own PID namespace, started by /bin/sh of
// the host inside the run's own (private) mount namespace. It mounts what
// the root needs, starts the program chrooted, forwards SIGTERM and SIGINT
// to it, reaps orphans, and exits with the program's status. When it exits,
// or is killed (Pdeathsig when the launcher dies), the kernel kills every
// other process of the namespace (daemons such as epmd included), and the
// mounts go with the mount namespace.
//
// The root's /etc/resolv.conf (the host's, copied by debootstrap) is
// covered by one that names no nameserver: a run's servers are addressed
// by IP, and a lookup one makes (RabbitMQ 4.x looks up the address of
// each client that connects) must fail at once, not wait 5 s for a
// nameserver off the machine, which a lab's namespaces must not reach.
//
// Arguments: ROOT DATA MODE(ro|rw) DNS(host|none) then the chroot command
// line; DNS host (a root's build, for apt) leaves the root's resolv.conf.
// A background job of a non-interactive shell gets /dev/null as stdin,
// unless redirected explicitly: hence fd 3.
//
// A wait that a trapped signal interrupts returns 128 plus the signal's
// number, not the program's status, and the shell may reap the program
// while the trap runs; so the program's status is the last wait's, once it
// has ended (the shell keeps a job's status after reaping it): an earlier
// loop exited 143 where the program, stopped by Stop, exited 3 (3 runs of
// TestStopTermsThenKills in 40).
const initScript = `set -eu
R=$1 D=$2 W=$3 N=$4
shift 4
if [ "$W" = ro ]; then mount --bind "$R" "$R"; mount -o remount,bind,ro "$R"; fi
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$R/dev/shm"
mount --rbind /sys "$R/sys"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$R/tmp"
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$R/run"
echo '# lockprover: a run from a root asks no DNS server' >"$R/run/lockprover-resolv.conf"
if [ "$N" = none ] && [ -f "$R/etc/resolv.conf" ]; then mount --bind "$R/run/lockprover-resolv.conf" "$R/etc/resolv.conf"; fi
if [ -n "$D" ]; then mount --bind "$D" "$R/lockprover"; fi
exec 3<&0
"$@" <&3 3<&- &
c=$!
exec 3<&-
trap 'kill -TERM $c 2>/dev/null || :' TERM INT
while kill -0 $c 2>/dev/null; do wait $c || :; done
if wait $c; then exit 0; else exit $?; fi
`

// Command returns a command that runs argv (a path inside the root, or a
// name found on the root's PATH) from the root, in a private mount namespace
// and a PID namespace of its own: /proc, /dev (with a private /dev/shm),
// /sys, a fresh /tmp and /run, and Data at /lockprover are mounted there,
// then the program runs chrooted as User. Nothing is mounted on the host.
//
// The command's process is the PID namespace's init and has Pdeathsig
// SIGKILL: if the launching process dies, even by SIGKILL, the kernel kills
// the whole run. (Pdeathsig follows the launching OS thread; Go keeps
// threads alive unless a goroutine exits while locked to one.) When ctx ends
// the run gets SIGTERM, then SIGKILL after StopTimeout. Run the program in
// the foreground (postgres rather than pg_ctl start, no --daemonize): the run
// ends when it exits.
//
// With NetNS set the command is `ip netns exec NS /bin/sh ...`; a caller that
// builds its own prefix may also put one before cmd.Args (and set cmd.Path):
// the namespaces are set on the process, not in argv.
func (r Root) Command(ctx context.Context, o RunOptions, argv ...string) (*exec.Cmd, error) {
	if r.Dir == "" {
		return nil, errors.New("debroot: Command on a zero Root (use Ensure)")
	}
	return command(ctx, r.Dir, o, argv...)
}

// command is Command for a root directory (also used while building one).
func command(ctx context.Context, root string, o RunOptions, argv ...string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("debroot: Command without a program")
	}
	if os.Geteuid() != 0 {
		return nil, &UnavailableError{What: "running from a Debian root as a non-root user",
			Fix: "mount and chroot need root: run as root"}
	}
	if o.Data != "" {
		if !filepath.IsAbs(o.Data) {
			return nil, fmt.Errorf("debroot: Data %q is not absolute", o.Data)
		}
		if st, err := os.Stat(o.Data); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("debroot: Data %q is not a directory", o.Data)
		}
	}
	u := User{Name: "root", Home: "/root"}
	if o.User != "" {
		var err error
		if u, err = LookupUser(root, o.User); err != nil {
			return nil, err
		}
	}
	dir := o.Dir
	if dir == "" {
		dir = "/"
		if o.Data != "" {
			dir = MountPoint
		}
	}
	home := u.Home
	if o.Data != "" {
		home = MountPoint
	}
	mode, dns := "ro", "none"
	if o.Writable {
		mode = "rw"
	}
	if o.resolve {
		dns = "host"
	}

	chroot := []string{"chroot"}
	if o.User != "" {
		groups := make([]string, len(u.Groups))
		for i, g := range u.Groups {
			groups[i] = strconv.Itoa(g)
		}
		chroot = append(chroot, fmt.Sprintf("--userspec=%d:%d", u.Uid, u.Gid), "--groups="+strings.Join(groups, ","))
	}
	chroot = append(chroot, root, "/usr/bin/env", "-C", dir, "--")
	args := append([]string{"/bin/sh", "-c", initScript, "debroot-init", root, o.Data, mode, dns}, append(chroot, argv...)...)
	if o.NetNS != "" {
		ip, err := exec.LookPath("ip")
		if err != nil {
			ip = "/usr/sbin/ip"
		}
		args = append([]string{ip, "netns", "exec", o.NetNS}, args...)
	}

	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append([]string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8",
		"HOME=" + home,
		"USER=" + u.Name,
		"LOGNAME=" + u.Name,
	}, o.Env...)
	cmd.SysProcAttr = isolation()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = o.StopTimeout
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 20 * time.Second
	}
	return cmd, nil
}

// isolation is a fresh PID namespace (its init's death kills the rest), a
// private mount namespace (nothing mounted there reaches the host; Go makes
// it MS_PRIVATE recursively) and SIGKILL when the parent dies.
func isolation() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:   syscall.CLONE_NEWPID,
		Unshareflags: syscall.CLONE_NEWNS,
		Pdeathsig:    syscall.SIGKILL,
	}
}

// hostCommand runs a host program (debootstrap, cp) with the same isolation.
func hostCommand(ctx context.Context, argv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = isolation()
	return cmd
}

// Stop sends SIGTERM to a started command, waits up to grace for it to end,
// then sends SIGKILL. It calls cmd.Wait, so call it instead of Wait, not
// after. The kernel removes the rest of the run with its init.
func Stop(cmd *exec.Cmd, grace time.Duration) error {
	if cmd.Process == nil {
		return errors.New("debroot: Stop of a command that was not started")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		cmd.Process.Kill()
		return <-done
	}
}

// User is a user of a root, from its /etc/passwd and /etc/group.
type User struct {
	Name     string
	Uid, Gid int
	Groups   []int // primary first, then supplementary
	Home     string
}

// LookupUser finds a user (name or numeric uid) in root/etc/passwd.
func LookupUser(root, name string) (User, error) {
	f, err := os.Open(filepath.Join(root, "etc/passwd"))
	if err != nil {
		return User{}, fmt.Errorf("debroot: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.Split(sc.Text(), ":")
		if len(p) < 7 || (p[0] != name && p[2] != name) {
			continue
		}
		u := User{Name: p[0], Home: p[5]}
		u.Uid, _ = strconv.Atoi(p[2])
		u.Gid, _ = strconv.Atoi(p[3])
		u.Groups = append([]int{u.Gid}, supplementary(root, u.Name, u.Gid)...)
		return u, nil
	}
	return User{}, fmt.Errorf("debroot: no user %q in %s/etc/passwd (is its package installed?)", name, root)
}

func supplementary(root, name string, primary int) []int {
	b, err := os.ReadFile(filepath.Join(root, "etc/group"))
	if err != nil {
		return nil
	}
	var out []int
	for _, line := range strings.Split(string(b), "\n") {
		p := strings.Split(line, ":")
		if len(p) < 4 {
			continue
		}
		for _, m := range strings.Split(p[3], ",") {
			if m == name {
				if g, err := strconv.Atoi(p[2]); err == nil && g != primary {
					out = append(out, g)
				}
			}
		}
	}
	return out
}

// LookupUser finds a user of the root (see the function LookupUser).
func (r Root) LookupUser(name string) (User, error) { return LookupUser(r.Dir, name) }

// MkdirData creates dir (and parents) for a run's data and gives it to a
// user of the root (mode 0700: PostgreSQL insists), so a server running as
// that user can write there. An empty user leaves it to root.
func (r Root) MkdirData(dir, user string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("debroot: %w", err)
	}
	if user == "" {
		return nil
	}
	u, err := r.LookupUser(user)
	if err != nil {
		return err
	}
	if err := os.Chown(dir, u.Uid, u.Gid); err != nil {
		return fmt.Errorf("debroot: %w", err)
	}
	return os.Chmod(dir, 0o700)
}
