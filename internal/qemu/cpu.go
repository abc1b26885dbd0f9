package qemu

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's CPU
// times; 100 on every Linux architecture Go supports.
const clockTicks = 100

// CPUTime is the CPU time QEMU has used so far, user and system, from
// /proc (Linux only). Benchmarks read it before and after a run to see what
// the VNC server's encoding cost.
func (vm *VM) CPUTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", vm.process.Pid()))
	if err != nil {
		return 0, fmt.Errorf("qemu: read CPU time: %w", err)
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("qemu: /proc stat too short: %q", s)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("qemu: /proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
