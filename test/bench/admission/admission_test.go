package admission_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/sshkeys"
)

var (
	createsFlag = flag.Int("creates", 300, "measured VM creates per variant and spec (BenchmarkAdmission)")
	countFlag   = flag.Int("count-creates", 50, "VM creates per variant in the request-counting phase (BenchmarkAdmission)")
)

// Protocol constants.
const (
	// warmUp creates per variant are made and not measured: the first
	// requests pay for connections, caches and the policy's compilation.
	warmUp = 20
	// block is how many creates of one variant run back to back; the
	// variants take turns, in a rotating order, block by block.
	block = 10
	// settle is how long the counting phase waits after its creates for
	// the webhook's background reconcilers (Secret adoption, events) to
	// finish their writes, so they are counted.
	settle = 3 * time.Second
	// diskSyncTimeout bounds the wait for the webhook's cache to see the
	// pre-created data disks.
	diskSyncTimeout = 60 * time.Second
)

// teamKey is the namespace's public key (examples/06-ssh-keys.yaml).
const teamKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM+A+BzAeVbKARZ/Hth8zd13lHA/GpufS18bOYtokQH7 alice@example\n"

var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

// sharedEnv starts the control plane once, for the tests and benchmarks
// that need it; TestMain stops it.
func sharedEnv(tb testing.TB) *testenv.Env {
	tb.Helper()
	envOnce.Do(func() {
		env, envErr = testenv.Start(context.Background())
	})
	if envErr != nil {
		tb.Fatalf("start envtest: %v", envErr)
	}
	return env
}

func TestMain(m *testing.M) {
	flag.Parse()
	// Errors only: a log line per admission would be part of what is timed.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "envtest stop:", err)
		}
	}
	os.Exit(code)
}

// run is one spec's measurement.
type run struct {
	// Latency is each measured create's client-side latency, by variant.
	Latency map[variant][]time.Duration
	// Extras is what a labelled create costs in API requests beyond an
	// unlabelled one, from the counting phase.
	Extras []extraRow
	// PeerExtras is the same for the CEL peer (expected: nothing).
	PeerExtras []extraRow
	// NoopWebhooks are the no-op pair's calls per create and the mean time
	// the API server waited on each: the transport floor of a webhook call.
	NoopWebhooks []extraRow
	// Webhooks are the webhook calls per labelled create and the mean time
	// the API server waited on each.
	Webhooks []extraRow
	// Handlers is the mean time per call in each webhook handler, by path,
	// over the labelled counting phase.
	Handlers map[string]float64
}

// bench is a prepared namespace for one spec.
type bench struct {
	env  *testenv.Env
	c    client.Client
	cs   kubernetes.Interface
	s    spec
	ns   string
	next map[variant]int
	// disks is how many VMs of each variant can be created: full VM i
	// uses the pre-created data disks i.
	disks int
}

func newBench(ctx context.Context, tb testing.TB, e *testenv.Env, s spec, disks int) *bench {
	tb.Helper()
	cfg := rest.CopyConfig(e.Config)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling: measure the server
	c, err := client.New(cfg, client.Options{Scheme: e.Manager.GetScheme()})
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-" + string(s) + "-"}}
	if err := c.Create(ctx, nsObj); err != nil {
		tb.Fatal(err)
	}
	bn := &bench{env: e, c: c, cs: cs, s: s, ns: nsObj.Name, next: map[variant]int{}, disks: disks}
	keys := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: bn.ns, Name: "team-keys", Labels: map[string]string{api.LabelSSHPublicKey: api.LabelTrue}},
		StringData: map[string]string{"authorized_keys": teamKey},
	}
	if err := c.Create(ctx, keys); err != nil {
		tb.Fatal(err)
	}
	if s == full {
		bn.createDisks(ctx, tb, disks)
	}
	if err := installPeer(ctx, c, bn.ns); err != nil {
		tb.Fatal(err)
	}
	if err := installNoop(ctx, e, c, bn.ns); err != nil {
		tb.Fatal(err)
	}
	// The webhook is ready once its policies are loaded: retry a dry run.
	deadline := time.Now().Add(diskSyncTimeout)
	for {
		err := c.Create(ctx, newVM(s, labelled, bn.ns, 0), client.DryRunAll)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the webhooks do not admit a labelled %s VM: %v", s, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return bn
}

// createDisks pre-creates each full VM's two data disks (a DataVolume and a
// bare PVC, labelled as data disks) and waits until the webhook's cache has
// them.
func (bn *bench) createDisks(ctx context.Context, tb testing.TB, n int) {
	tb.Helper()
	labels := map[string]string{api.LabelDataDisk: api.LabelTrue}
	for i := range n {
		dvName, pvcName := dataDiskNames(i)
		dv := &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: bn.ns, Name: dvName, Labels: labels}}
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: bn.ns, Name: pvcName, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			},
		}
		for _, obj := range []client.Object{dv, pvc} {
			if err := bn.c.Create(ctx, obj); err != nil {
				tb.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(diskSyncTimeout)
	for {
		var dvs cdiv1beta1.DataVolumeList
		var pvcs corev1.PersistentVolumeClaimList
		cache := bn.env.Manager.GetCache()
		if err := cache.List(ctx, &dvs, client.InNamespace(bn.ns)); err != nil {
			tb.Fatal(err)
		}
		if err := cache.List(ctx, &pvcs, client.InNamespace(bn.ns)); err != nil {
			tb.Fatal(err)
		}
		if len(dvs.Items) >= n && len(pvcs.Items) >= n {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the webhook's cache has %d DataVolumes and %d PVCs of %d", len(dvs.Items), len(pvcs.Items), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// create creates the variant's next VM and returns how long it took.
func (bn *bench) create(ctx context.Context, tb testing.TB, v variant) time.Duration {
	tb.Helper()
	i := bn.next[v]
	bn.next[v]++
	vm := newVM(bn.s, v, bn.ns, i)
	start := time.Now()
	err := bn.c.Create(ctx, vm)
	d := time.Since(start)
	if err != nil {
		tb.Fatalf("create %s VM %s: %v", v, vm.Name, err)
	}
	return d
}

// measure runs the interleaved protocol: warm-up, then n creates per
// variant in blocks whose variant order rotates every round.
func (bn *bench) measure(ctx context.Context, tb testing.TB, n int) map[variant][]time.Duration {
	tb.Helper()
	for range min(warmUp, n) {
		for _, v := range variants {
			bn.create(ctx, tb, v)
		}
	}
	out := map[variant][]time.Duration{}
	for round := 0; len(out[unlabelled]) < n; round++ {
		for k := range variants {
			v := variants[(round+k)%len(variants)]
			for j := 0; j < block && len(out[v]) < n; j++ {
				out[v] = append(out[v], bn.create(ctx, tb, v))
			}
		}
	}
	return out
}

// count creates n VMs of the variant and returns the API requests the
// server counted meanwhile, background writes included (it waits settle).
func (bn *bench) count(ctx context.Context, tb testing.TB, v variant, n int) (map[requestKey]requestStats, map[string]float64) {
	tb.Helper()
	before, err := apiRequests(ctx, bn.cs)
	if err != nil {
		tb.Fatal(err)
	}
	hBefore, err := handlerTimes()
	if err != nil {
		tb.Fatal(err)
	}
	for range n {
		bn.create(ctx, tb, v)
	}
	hAfter, err := handlerTimes()
	if err != nil {
		tb.Fatal(err)
	}
	time.Sleep(settle)
	after, err := apiRequests(ctx, bn.cs)
	if err != nil {
		tb.Fatal(err)
	}
	handlers := map[string]float64{}
	for path, a := range hAfter {
		if d := a.Count - hBefore[path].Count; d > 0 {
			handlers[path] = (a.Seconds - hBefore[path].Seconds) / d * 1000
		}
	}
	return diff(before, after), handlers
}

// runSpec measures one spec: n creates per variant, then m per variant in
// the counting phase.
func runSpec(ctx context.Context, tb testing.TB, e *testenv.Env, s spec, n, m int) run {
	tb.Helper()
	disks := min(warmUp, n) + n + m
	if *apiserverProfile != "" {
		disks += profileDisks
	}
	bn := newBench(ctx, tb, e, s, disks)
	r := run{Latency: bn.measure(ctx, tb, n)}
	defer bn.profileSpec(ctx, tb)
	unlab, _ := bn.count(ctx, tb, unlabelled, m)
	lab, handlers := bn.count(ctx, tb, labelled, m)
	peer, _ := bn.count(ctx, tb, celPeer, m)
	noop, noopHandlers := bn.count(ctx, tb, noopPeer, m)
	r.Extras = extras(lab, unlab, m)
	r.Webhooks, r.Handlers = webhookCalls(lab, m), handlers
	r.PeerExtras = extras(peer, unlab, m)
	r.NoopWebhooks = webhookCalls(noop, m)
	for _, p := range []string{noopMutatePath, noopValidatePath} {
		r.Handlers[p] = noopHandlers[p]
	}
	return r
}

// quantile is the q-quantile (nearest rank) of ds, in milliseconds.
func quantile(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}

// BenchmarkAdmission creates VMs through the real API server: for each spec,
// -creates VMs per variant (interleaved), then -count-creates per variant
// while counting the API server's requests. It measures once per spec,
// whatever b.N is; run it with -benchtime 1x.
func BenchmarkAdmission(b *testing.B) {
	e := sharedEnv(b)
	for _, s := range []spec{plumbing, full} {
		b.Run(string(s), func(b *testing.B) {
			ctx := context.Background()
			r := runSpec(ctx, b, e, s, *createsFlag, *countFlag)
			report(b, s, r, *createsFlag, *countFlag)
		})
	}
}

func report(b *testing.B, s spec, r run, n, m int) {
	p50 := map[variant]float64{}
	var lines []string
	lines = append(lines, fmt.Sprintf("%s: %d creates per variant (median and p99 of each, ms)", s, n))
	for _, v := range variants {
		p50[v] = quantile(r.Latency[v], 0.5)
		p99 := quantile(r.Latency[v], 0.99)
		short := string(v)[:1]
		b.ReportMetric(p50[v], short+"-p50-ms")
		b.ReportMetric(p99, short+"-p99-ms")
		lines = append(lines, fmt.Sprintf("  %-13s p50 %6.2f  p99 %6.2f", v, p50[v], p99))
	}
	b.ReportMetric(p50[labelled]/p50[unlabelled], "b/a")
	b.ReportMetric(p50[labelled]/p50[celPeer], "b/c")
	b.ReportMetric(p50[celPeer]/p50[unlabelled], "c/a")
	b.ReportMetric(p50[noopPeer]/p50[unlabelled], "d/a")
	b.ReportMetric(p50[labelled]/p50[noopPeer], "b/d")
	lines = append(lines, fmt.Sprintf("  ratios of medians: b/a %.2f  b/c %.2f  c/a %.2f  d/a %.2f  b/d %.2f",
		p50[labelled]/p50[unlabelled], p50[labelled]/p50[celPeer], p50[celPeer]/p50[unlabelled],
		p50[noopPeer]/p50[unlabelled], p50[labelled]/p50[noopPeer]))
	lines = append(lines, fmt.Sprintf("  the two webhook calls add %.2f ms (Virtstation) and %.2f ms (no-op pair) to the median create",
		p50[labelled]-p50[unlabelled], p50[noopPeer]-p50[unlabelled]))
	writes := 0.0
	lines = append(lines, fmt.Sprintf("  API requests per labelled create beyond an unlabelled one (%d creates each, background included):", m))
	for _, x := range r.Extras {
		if isWrite(x.Key) {
			writes += x.PerCreate
		}
		lines = append(lines, fmt.Sprintf("    %-50s %5.2f per create, mean %.2f ms in the API server", x.Key, x.PerCreate, x.MeanMs))
	}
	b.ReportMetric(writes, "extra-writes/create")
	lines = append(lines, "  webhook calls per labelled create, mean wait in the API server (transport included):")
	for _, x := range r.Webhooks {
		lines = append(lines, fmt.Sprintf("    %-50s %5.2f per create, mean %.2f ms", x.Key, x.PerCreate, x.MeanMs))
	}
	lines = append(lines, "  the no-op pair's calls per create, mean wait in the API server (transport included):")
	for _, x := range r.NoopWebhooks {
		lines = append(lines, fmt.Sprintf("    %-50s %5.2f per create, mean %.2f ms", x.Key, x.PerCreate, x.MeanMs))
	}
	lines = append(lines, "  mean time in the webhook handler per call (controller-runtime's histogram):")
	paths := slices.Sorted(maps.Keys(r.Handlers))
	for _, p := range paths {
		lines = append(lines, fmt.Sprintf("    %-50s %.2f ms", p, r.Handlers[p]))
	}
	lines = append(lines, "  the same for a CEL-peer create:")
	for _, x := range r.PeerExtras {
		lines = append(lines, fmt.Sprintf("    %-50s %5.2f per create", x.Key, x.PerCreate))
	}
	// b.Log would be cut to a few lines; the table goes to stdout whole.
	fmt.Println(strings.Join(lines, "\n"))
}

// TestAdmissionProtocol runs the benchmark's protocol at a tiny size so it
// cannot rot, and checks what it measures is what it claims: the labelled
// VMs were mutated and claimed their disks, and the peer denies what the
// shipped rules deny. It asserts no speed.
func TestAdmissionProtocol(t *testing.T) {
	e := sharedEnv(t)
	ctx := context.Background()
	bn := newBench(ctx, t, e, full, 8)
	lat := bn.measure(ctx, t, 2)
	for _, v := range variants {
		if len(lat[v]) != 2 {
			t.Fatalf("%s: %d creates measured, want 2", v, len(lat[v]))
		}
	}
	got := &corev1.Secret{}
	lab := newVM(full, labelled, bn.ns, 0)
	if err := bn.c.Get(ctx, client.ObjectKeyFromObject(lab), lab); err != nil {
		t.Fatal(err)
	}
	if lab.Annotations[api.AnnotationInjected] == "" {
		t.Errorf("labelled VM %s was not mutated (no %s)", lab.Name, api.AnnotationInjected)
	}
	if err := bn.c.Get(ctx, client.ObjectKey{Namespace: bn.ns, Name: sshkeys.SecretName(lab.Name)}, got); err != nil {
		t.Errorf("labelled VM's key Secret: %v", err)
	}
	dv, _ := dataDiskNames(0)
	disk := &cdiv1beta1.DataVolume{}
	if err := bn.c.Get(ctx, client.ObjectKey{Namespace: bn.ns, Name: dv}, disk); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(disk.Annotations), lab.Name) {
		t.Errorf("DataVolume %s carries no claim by %s: %v", dv, lab.Name, disk.Annotations)
	}
	plain := newVM(full, unlabelled, bn.ns, 0)
	if err := bn.c.Get(ctx, client.ObjectKeyFromObject(plain), plain); err != nil {
		t.Fatal(err)
	}
	if plain.Annotations[api.AnnotationInjected] != "" {
		t.Errorf("unlabelled VM %s was mutated", plain.Name)
	}
	noop := newVM(full, noopPeer, bn.ns, 0)
	if err := bn.c.Get(ctx, client.ObjectKeyFromObject(noop), noop); err != nil {
		t.Fatal(err)
	}
	if noop.Annotations[api.AnnotationInjected] != "" {
		t.Errorf("no-op-webhook VM %s was mutated by Virtstation", noop.Name)
	}
	calls, err := handlerTimes()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{noopMutatePath, noopValidatePath} {
		if calls[p].Count < 2 {
			t.Errorf("the no-op webhook %s was called %v times, want at least the 2 measured creates", p, calls[p].Count)
		}
	}
	for name, edit := range map[string]func(map[string]string){
		"mount under /etc":  func(a map[string]string) { a[api.AnnotationDataDisks] = "x:/etc/x" },
		"duplicate mount":   func(a map[string]string) { a[api.AnnotationDataDisks] = "x:/data,y:/data" },
		"mount at /dev/shm": func(a map[string]string) { a[api.AnnotationDataDisks] = "x:/dev/shm" },
		"shared memory":     func(a map[string]string) { a[api.AnnotationSharedMemory] = "1Gi" },
	} {
		vm := newVM(full, celPeer, bn.ns, 99)
		edit(vm.Annotations)
		if err := bn.c.Create(ctx, vm, client.DryRunAll); err == nil {
			t.Errorf("%s: the CEL peer admitted the VM", name)
		}
	}
	n := 2
	unlab, _ := bn.count(ctx, t, unlabelled, n)
	labd, _ := bn.count(ctx, t, labelled, n)
	if len(extras(labd, unlab, n)) == 0 {
		t.Error("the counting phase saw no extra API request for labelled full creates")
	}
}
