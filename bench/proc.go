package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of utime/stime in /proc/<pid>/stat; it is
// 100 on every Linux architecture Go supports.
const clockTick = 100

// vmRSS reads VmRSS of pid ("self" for this process) in bytes.
func vmRSS(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// statFields are the fields of a /proc/<pid>/stat file after the command
// name (which may contain spaces): state, ppid, …; nil if unreadable.
func statFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// procCPU is the user+system CPU time of pid so far.
func procCPU(pid int) time.Duration {
	f := statFields("/proc/" + strconv.Itoa(pid) + "/stat")
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTick
}

// childrenOf lists pid and its direct children (nginx master and workers).
func childrenOf(pid int) []int {
	out := []int{pid}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		if f := statFields(d); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			p, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			out = append(out, p)
		}
	}
	return out
}

func groupCPU(pids []int) time.Duration {
	var t time.Duration
	for _, p := range pids {
		t += procCPU(p)
	}
	return t
}

func groupRSS(pids []int) int64 {
	var n int64
	for _, p := range pids {
		n += vmRSS(strconv.Itoa(p))
	}
	return n
}

// selfCPU is this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// raiseNoFile lifts RLIMIT_NOFILE as far as allowed: 10,000 proxied
// sockets are 20,000 descriptors in the gateway.
func raiseNoFile(want uint64) uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	if r.Cur >= want {
		return r.Cur
	}
	n := syscall.Rlimit{Cur: want, Max: max(want, r.Max)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &n); err != nil {
		n = syscall.Rlimit{Cur: r.Max, Max: r.Max}
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &n)
	}
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r)
	return r.Cur
}
