package idle_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ, 100
// on every Linux architecture Go supports.
const userHZ = 100

// memory is what /proc says about one process or a sum over several.
type memory struct {
	// RSS is VmRSS from /proc/<pid>/status: resident pages, shared ones
	// counted in full by every process that maps them.
	RSS int64
	// PSS is Pss from /proc/<pid>/smaps_rollup: resident pages, each shared
	// page divided among the processes that map it. PSS sums to what a
	// group of processes really occupies.
	PSS int64
	// Procs is how many processes were summed.
	Procs int
}

func (m memory) add(o memory) memory {
	return memory{RSS: m.RSS + o.RSS, PSS: m.PSS + o.PSS, Procs: m.Procs + o.Procs}
}

// processMemory reads one process's RSS and PSS, in bytes.
func processMemory(pid int) (memory, error) {
	rss, err := procField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
	if err != nil {
		return memory{}, err
	}
	pss, err := procField(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:")
	if err != nil {
		return memory{}, err
	}
	return memory{RSS: rss, PSS: pss, Procs: 1}, nil
}

// treeMemory sums processMemory over root and every live process below it
// (websockify's per-connection handlers).
func treeMemory(root int) (memory, error) {
	pids, err := tree(root)
	if err != nil {
		return memory{}, err
	}
	var sum memory
	for _, pid := range pids {
		m, err := processMemory(pid)
		if err != nil {
			if pid == root {
				return memory{}, err
			}
			continue // a handler exited meanwhile
		}
		sum = sum.add(m)
	}
	return sum, nil
}

// childMemory is the memory of each live process below root, without root.
func childMemory(root int) ([]memory, error) {
	pids, err := tree(root)
	if err != nil {
		return nil, err
	}
	var out []memory
	for _, pid := range pids {
		if pid == root {
			continue
		}
		if m, err := processMemory(pid); err == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// procField reads a "Name:   123 kB" line of a /proc file, in bytes.
func procField(file, name string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, name))
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s: malformed %q", file, line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", file, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("%s has no %s line", file, name)
}

// tree lists root and its live descendants.
func tree(root int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	parent := map[int]int{}
	for _, f := range stats {
		pid, ppid, _, err := readStat(f)
		if err != nil {
			continue // the process ended meanwhile
		}
		parent[pid] = ppid
	}
	if _, ok := parent[root]; !ok {
		return nil, fmt.Errorf("process %d is gone", root)
	}
	var out []int
	for pid := range parent {
		for p := pid; p > 1; p = parent[p] {
			if p == root {
				out = append(out, pid)
				break
			}
		}
	}
	return out, nil
}

// cpuTime is a process's user+system time so far.
func cpuTime(pid int) (time.Duration, error) {
	_, _, ticks, err := readStat(fmt.Sprintf("/proc/%d/stat", pid))
	return time.Duration(ticks) * time.Second / userHZ, err
}

// readStat returns a /proc/<pid>/stat's pid, ppid and utime+stime. The
// command name (field 2) may hold spaces, so fields count from its ')'.
func readStat(file string) (pid, ppid int, ticks int64, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, 0, err
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return 0, 0, 0, errors.New("malformed stat")
	}
	if pid, err = strconv.Atoi(strings.TrimSpace(s[:open])); err != nil {
		return 0, 0, 0, err
	}
	f := strings.Fields(s[closing+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, 0, 0, errors.New("short stat")
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, 0, err
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, 0, err
	}
	return pid, ppid, utime + stime, nil
}

// Descriptors an idle session holds, by process, and room for the rest.
const (
	// testFDsPerSession: the client's TCP connection to the bridge, the
	// stand-in virt-api's connection from the API server, and both ends of
	// its unix connection to the silent source.
	testFDsPerSession = 4
	// bridgeFDsPerSession: the client's connection and the upstream one to
	// the API server. The API server holds two as well (the bridge's and
	// its proxied connection to the stand-in virt-api).
	bridgeFDsPerSession = 2
	// peerFDsPerSession: the client's connection to websockify and the
	// silent TCP source's end.
	peerFDsPerSession = 2
	// fdSlack covers the control plane's clients, log files, listeners.
	fdSlack = 1024
)

// checkFDLimit fails with what to do when this process, or the bridge and
// the API server it starts (which inherit its limit; Go programs raise
// their soft limit to the hard one), could run out of descriptors.
func checkFDLimit(sessions, peerSessions int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	need := uint64(testFDsPerSession*sessions + peerFDsPerSession*peerSessions + fdSlack)
	if lim.Max < need {
		return fmt.Errorf("%d bridge sessions and %d websockify sessions need about %d file descriptors in the test process (%d per bridge session, %d per websockify session, %d spare), "+
			"and the bridge and the API server about %d each; the hard limit (ulimit -Hn) is %d: raise it (ulimit -n %d) or pass a smaller -sessions",
			sessions, peerSessions, need, testFDsPerSession, peerFDsPerSession, fdSlack, bridgeFDsPerSession*sessions+fdSlack, lim.Max, need)
	}
	return nil
}
