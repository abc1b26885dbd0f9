package bridge

import "testing"

func TestAPILimits(t *testing.T) {
	for name, tc := range map[string]struct {
		qps       float32
		burst     int
		wantQPS   float32
		wantBurst int
	}{
		"unset: no client-side limit":           {wantQPS: -1},
		"negative: no client-side limit":        {qps: -1, burst: 10, wantQPS: -1},
		"a limit with its burst":                {qps: 50, burst: 100, wantQPS: 50, wantBurst: 100},
		"a burst below the rate is raised":      {qps: 50, burst: 10, wantQPS: 50, wantBurst: 50},
		"no burst: one second's worth":          {qps: 20, wantQPS: 20, wantBurst: 20},
		"a fractional rate gets a burst of one": {qps: 0.5, wantQPS: 0.5, wantBurst: 1},
	} {
		t.Run(name, func(t *testing.T) {
			qps, burst := apiLimits(tc.qps, tc.burst)
			if qps != tc.wantQPS || burst != tc.wantBurst {
				t.Errorf("apiLimits(%v, %d) = %v, %d; want %v, %d", tc.qps, tc.burst, qps, burst, tc.wantQPS, tc.wantBurst)
			}
		})
	}
}
