package main

import (
	"fmt"
	"math"
	"runtime/debug"
)

// defaultMemoryLimitHeadroom is the percentage of GOMEMLIMIT the webhook
// keeps free by default: the chart and config/ set GOMEMLIMIT to the
// container's memory limit, and the kernel counts more than the Go
// runtime's limit does (the mapped binary, page cache, OS buffers).
const defaultMemoryLimitHeadroom = 10

// applyMemoryLimitHeadroom lowers the Go runtime's soft memory limit, when
// one is set (GOMEMLIMIT), by percent of it, and returns the limit before
// and after; unchanged (and no limit) when none is set.
func applyMemoryLimitHeadroom(percent int) (before, after int64, err error) {
	if percent < 0 || percent > 90 {
		return 0, 0, fmt.Errorf("--memory-limit-headroom=%d: want a percentage from 0 to 90", percent)
	}
	before = debug.SetMemoryLimit(-1)
	if before == math.MaxInt64 || percent == 0 {
		return before, before, nil
	}
	after = before / 100 * int64(100-percent)
	debug.SetMemoryLimit(after)
	return before, after, nil
}
