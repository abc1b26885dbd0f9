package admission_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

var (
	apiserverProfile = flag.String("apiserver-cpuprofile", "", "write CPU profiles of kube-apiserver while it admits only labelled, then only no-op-webhook VMs, to <prefix>-<spec>-<variant>.pprof (BenchmarkAdmission)")
	profileSeconds   = flag.Int("apiserver-profile-seconds", 5, "length of each kube-apiserver CPU profile")
)

// profileDisks is how many more VMs per variant a spec may create while
// the API server is profiled: more than 5 s of creates at ~10 ms each.
const profileDisks = 800

// profileAPIServer creates VMs of one variant back to back while the API
// server records a CPU profile through its /debug/pprof endpoint, and
// writes the profile to path. It returns how many VMs were created.
func (bn *bench) profileAPIServer(ctx context.Context, tb testing.TB, v variant, path string) int {
	tb.Helper()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var created atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pctx.Err() == nil && bn.next[v] < bn.disks {
			vm := newVM(bn.s, v, bn.ns, bn.next[v])
			bn.next[v]++
			if err := bn.c.Create(pctx, vm); err != nil {
				if pctx.Err() == nil {
					tb.Errorf("create %s VM %s: %v", v, vm.Name, err)
				}
				return
			}
			created.Add(1)
		}
	}()
	raw, err := bn.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(*profileSeconds)).Timeout(time.Duration(*profileSeconds+30) * time.Second).DoRaw(ctx)
	cancel()
	<-done
	if err != nil {
		tb.Fatalf("kube-apiserver CPU profile: %v", err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		tb.Fatal(err)
	}
	return int(created.Load())
}

// profileSpec writes the API server's CPU profiles for a spec's labelled
// and no-op-webhook creates, when -apiserver-cpuprofile asks for them.
func (bn *bench) profileSpec(ctx context.Context, tb testing.TB) {
	tb.Helper()
	if *apiserverProfile == "" {
		return
	}
	for _, v := range []variant{labelled, noopPeer} {
		path := fmt.Sprintf("%s-%s-%s.pprof", *apiserverProfile, bn.s, v)
		n := bn.profileAPIServer(ctx, tb, v, path)
		fmt.Printf("%s: kube-apiserver CPU profile over %d %s creates in %d s: %s\n", bn.s, n, v, *profileSeconds, path)
	}
}
