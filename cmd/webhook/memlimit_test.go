package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestApplyMemoryLimitHeadroom(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	cases := map[string]struct {
		limit     int64
		percent   int
		wantAfter int64
		wantErr   bool
	}{
		"512 MiB, 10%":      {limit: 512 << 20, percent: 10, wantAfter: 512 << 20 / 100 * 90},
		"no limit set":      {limit: math.MaxInt64, percent: 10, wantAfter: math.MaxInt64},
		"no headroom":       {limit: 512 << 20, percent: 0, wantAfter: 512 << 20},
		"headroom too high": {limit: 512 << 20, percent: 95, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			debug.SetMemoryLimit(tc.limit)
			before, after, err := applyMemoryLimitHeadroom(tc.percent)
			if tc.wantErr {
				if err == nil {
					t.Error("no error")
				}
				return
			}
			if err != nil || before != tc.limit || after != tc.wantAfter || debug.SetMemoryLimit(-1) != tc.wantAfter {
				t.Errorf("before %d, after %d, err %v; want %d, %d", before, after, err, tc.limit, tc.wantAfter)
			}
		})
	}
}
