package proc

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// listens says whether the process pid, or one of its descendants, holds
// a socket that listens on TCP port port (in any of their network
// namespaces): whether a server that answers on the port is the one pid
// started. ok is false with an error where /proc cannot tell.
func listens(pid, port int) (ok bool, err error) {
	tree, err := descendants(pid)
	if err != nil {
		return false, err
	}
	held := map[string]bool{} // socket inodes the tree holds
	for _, p := range tree {
		links, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", p))
		for _, l := range links {
			if dest, err := os.Readlink(l); err == nil && strings.HasPrefix(dest, "socket:[") {
				held[strings.TrimSuffix(strings.TrimPrefix(dest, "socket:["), "]")] = true
			}
		}
	}
	for _, p := range tree {
		for _, table := range []string{"tcp", "tcp6"} {
			for _, inode := range listeners(fmt.Sprintf("/proc/%d/net/%s", p, table), port) {
				if held[inode] {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// listeners are the inodes of the sockets that a /proc/net/tcp table
// lists as listening (state 0A) on port.
func listeners(table string, port int) []string {
	f, err := os.Open(table)
	if err != nil {
		return nil
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	var inodes []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(sc.Text())
		if len(f) >= 10 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
			inodes = append(inodes, f[9])
		}
	}
	return inodes
}

// descendants is pid and every process below it, read from /proc.
func descendants(pid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return nil, fmt.Errorf("no /proc to read processes from")
	}
	children := map[int][]int{}
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue // gone since the glob
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := string(b)[strings.LastIndexByte(string(b), ')')+1:]
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		ppid, err1 := strconv.Atoi(f[1])
		p, err2 := strconv.Atoi(filepath.Base(filepath.Dir(s)))
		if err1 == nil && err2 == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree, nil
}

// reserve holds port for this process: an abstract Unix socket named
// after it (in this network namespace), which no other process, nor this
// one, can bind while it is held, and which the kernel frees when this
// process ends, however it ends: nothing is left on disk.
func reserve(port int) (io.Closer, bool) {
	ln, err := net.Listen("unix", "@lockprover-port-"+strconv.Itoa(port))
	if err != nil {
		return nil, false
	}
	return ln, true
}

// holders names the processes that hold a socket listening on TCP port
// port in this process's network namespace, "pid N (comm)" each, for an
// error that says who took a port: "" where none is found (the listener
// gone since, or in another namespace).
func holders(port int) string {
	want := map[string]bool{}
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		for _, inode := range listeners(table, port) {
			want[inode] = true
		}
	}
	if len(want) == 0 {
		return ""
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, d := range dirs {
		links, _ := filepath.Glob(d + "/fd/*")
		for _, l := range links {
			dest, err := os.Readlink(l)
			if err != nil || !want[strings.TrimSuffix(strings.TrimPrefix(dest, "socket:["), "]")] {
				continue
			}
			comm, _ := os.ReadFile(d + "/comm")
			out = append(out, fmt.Sprintf("pid %s (%s)", filepath.Base(d), strings.TrimSpace(string(comm))))
			break
		}
	}
	return strings.Join(out, ", ")
}
