package audit_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/policyreport"
	"github.com/virtstation/virtstation/webhooks/audit"
	"github.com/virtstation/virtstation/webhooks/validate"
)

var (
	vmsFlag        = flag.Int("vms", 5000, "managed VMs to create and audit (BenchmarkPolicyAudit)")
	namespacesFlag = flag.Int("namespaces", 20, "namespaces the VMs are spread over (BenchmarkPolicyAudit)")
	clientsFlag    = flag.Int("clients", 8, "concurrent clients creating the VMs (BenchmarkPolicyAudit)")
	passProfile    = flag.String("pass-cpuprofile", "", "write a CPU profile of the full pass alone to this file (BenchmarkPolicyAudit)")
)

// evalTimeout is the webhook's bound on one evaluation (webhooks.Setup's
// policyEvalTimeout).
const evalTimeout = time.Second

func TestMain(m *testing.M) {
	flag.Parse()
	// Errors only: a log line per VM would be part of what is timed.
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	os.Exit(m.Run())
}

// pass is one audit of every namespace.
type pass struct {
	Wall time.Duration
	// Alloc is the bytes allocated meanwhile (the whole process's
	// TotalAlloc delta; nothing else runs but the manager's idle
	// informers).
	Alloc uint64
	// HeapAfter is HeapInuse after the pass and a GC; Retained is that
	// minus HeapInuse after a GC before it (what the Auditor keeps).
	HeapAfter, Retained int64
	// CPU is this process's CPU time meanwhile (user and system).
	CPU time.Duration
	// Writes are the PolicyReport writes the API server counted, and
	// WriteTime the time it spent on them.
	Writes    float64
	WriteTime time.Duration
	// Evaluated are the VMs whose policies the audit evaluated.
	Evaluated float64
}

// BenchmarkPolicyAudit measures the policy audit of -vms managed VMs over
// -namespaces namespaces against the validating webhook judging the same
// VMs. It measures once, whatever b.N is; run it with -benchtime 1x.
func BenchmarkPolicyAudit(b *testing.B) {
	ctx := context.Background()
	e, err := testenv.Start(ctx, testenv.WithoutAudit())
	if err != nil {
		b.Fatalf("start envtest: %v", err)
	}
	defer func() {
		if err := e.Stop(); err != nil {
			b.Errorf("stop envtest: %v", err)
		}
	}()
	cfg := rest.CopyConfig(e.Config)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling
	c, err := client.New(cfg, client.Options{Scheme: e.Manager.GetScheme()})
	if err != nil {
		b.Fatal(err)
	}
	w := world{vms: *vmsFlag, namespaces: *namespacesFlag}
	created, err := w.build(ctx, e, c, *clientsFlag)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d VMs in %d namespaces in %s (%.0f/s, not measured)", w.vms, w.namespaces, created.Round(time.Millisecond), float64(w.vms)/created.Seconds())

	mgr := e.Manager
	cache, apiReader := mgr.GetCache(), mgr.GetAPIReader()
	managed := client.MatchingLabels{api.LabelManaged: api.LabelTrue}
	if err := waitSame(ctx, cache, apiReader, func() client.ObjectList { return &kubevirtv1.VirtualMachineList{} }, managed); err != nil {
		b.Fatalf("VMs: %v", err)
	}
	if err := waitSame(ctx, cache, apiReader, func() client.ObjectList { return &corev1.PersistentVolumeClaimList{} },
		client.MatchingLabels{api.LabelDataDisk: api.LabelTrue}); err != nil {
		b.Fatalf("disks: %v", err)
	}

	// The webhook's engine and modes are not reachable from the Env: the
	// same shipped policies and the same ConfigMap give the same ones.
	engine := validate.NewEngine(evalTimeout)
	if _, err := engine.Load(ctx, validate.ShippedModules()); err != nil {
		b.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := apiReader.Get(ctx, client.ObjectKey{Namespace: testenv.InstallNamespace, Name: policy.ModesConfigMapName}, &cm); err != nil {
		b.Fatal(err)
	}
	parsed, err := policy.ParseModes(cm.Data)
	if err != nil {
		b.Fatal(err)
	}
	modes := &atomic.Pointer[policy.Modes]{}
	modes.Store(&parsed)
	snaps := validate.Snapshotter{Cache: cache, API: apiReader, Grace: testenv.ClaimGrace}
	auditor := &audit.Auditor{
		Reader: cache, Client: mgr.GetClient(), APIReader: apiReader,
		Engine: engine, Modes: modes, Snapshots: snaps, Kinds: []schema.GroupVersionKind{policyreport.WGPolicy},
		Recorder: mgr.GetEventRecorder("virtstation-audit"),
	}
	// The audit's controller watches its reports before its first
	// reconcile (SetupWithManager): start that informer outside the pass.
	reports := &unstructured.Unstructured{}
	reports.SetGroupVersionKind(policyreport.WGPolicy)
	if _, err := cache.GetInformer(ctx, reports); err != nil {
		b.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx) {
		b.Fatal("the report informer did not sync")
	}
	namespaces := make([]string, w.namespaces)
	for i := range namespaces {
		namespaces[i] = w.namespace(i)
	}
	sort.Strings(namespaces)

	stopProfile := startProfile(b, *passProfile)
	full := runPass(ctx, b, auditor, e, namespaces)
	stopProfile()
	if err := checkReports(ctx, apiReader, w, engine.Rules()); err != nil {
		b.Fatal(err)
	}
	reportList := func() client.ObjectList {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(policyreport.WGPolicy.GroupVersion().WithKind(policyreport.WGPolicy.Kind + "List"))
		return l
	}
	if err := waitSame(ctx, cache, apiReader, reportList); err != nil {
		b.Fatalf("reports: %v", err)
	}

	var vms kubevirtv1.VirtualMachineList
	if err := cache.List(ctx, &vms, managed); err != nil {
		b.Fatal(err)
	}
	peer, err := measurePeer(ctx, vmHandler(mgr, engine, modes, snaps), vms.Items, func() time.Duration { return processCPU(b) })
	if err != nil {
		b.Fatal(err)
	}

	resync := runPass(ctx, b, auditor, e, namespaces)
	if resync.Writes != 0 {
		b.Errorf("the resync with nothing changed wrote %v PolicyReports, want 0", resync.Writes)
	}

	b.ReportMetric(full.Wall.Seconds(), "pass_s")
	b.ReportMetric(full.CPU.Seconds(), "pass_cpu_s")
	b.ReportMetric(full.WriteTime.Seconds(), "pass_write_apiserver_s")
	b.ReportMetric(float64(full.Alloc)/1e6, "pass_alloc_MB")
	b.ReportMetric(float64(full.HeapAfter)/1e6, "heap_after_MB")
	b.ReportMetric(float64(full.Retained)/1e6, "retained_MB")
	b.ReportMetric(full.Writes, "pass_writes")
	b.ReportMetric(resync.Wall.Seconds(), "resync_s")
	b.ReportMetric(resync.Writes, "resync_writes")
	b.ReportMetric(resync.CPU.Seconds(), "resync_cpu_s")
	b.ReportMetric(peer.Handler.Seconds(), fmt.Sprintf("webhook_x%d_s", w.vms))
	b.ReportMetric(peer.HandlerCPU.Seconds(), fmt.Sprintf("webhook_x%d_cpu_s", w.vms))
	b.ReportMetric(peer.Evaluate.Seconds(), fmt.Sprintf("eval_x%d_s", w.vms))
	b.ReportMetric(full.Wall.Seconds()/peer.Handler.Seconds(), "pass/webhook")
	b.ReportMetric(full.Wall.Seconds()/peer.Evaluate.Seconds(), "pass/eval")

	per := func(d time.Duration) string {
		return fmt.Sprintf("%8.3f s  %7.1f µs/VM", d.Seconds(), float64(d.Microseconds())/float64(w.vms))
	}
	lines := []string{
		fmt.Sprintf("policy audit of %d managed VMs in %d namespaces (%d violate mount-path in dryrun mode), %d rules",
			w.vms, w.namespaces, w.violatingVMs(), len(engine.Rules())),
		fmt.Sprintf("  full pass (fresh Auditor)      %s  CPU %.2f s; %d evaluated, %.0f report writes (%.2f s in the API server), %.1f MB allocated, heap after %.1f MB (%.1f MB retained)",
			per(full.Wall), full.CPU.Seconds(), int(full.Evaluated), full.Writes, full.WriteTime.Seconds(), float64(full.Alloc)/1e6, float64(full.HeapAfter)/1e6, float64(full.Retained)/1e6),
		fmt.Sprintf("  resync, nothing changed        %s  CPU %.2f s; %d evaluated, %.0f report writes, %.1f MB allocated",
			per(resync.Wall), resync.CPU.Seconds(), int(resync.Evaluated), resync.Writes, float64(resync.Alloc)/1e6),
		fmt.Sprintf("  peer: VMHandler.Handle × %d  %s  CPU %.2f s", w.vms, per(peer.Handler), peer.HandlerCPU.Seconds()),
		fmt.Sprintf("  peer: EvaluateRequest × %d   %s", w.vms, per(peer.Evaluate)),
		fmt.Sprintf("  ratios: pass/webhook %.2f  pass/eval %.2f  resync/webhook %.2f",
			full.Wall.Seconds()/peer.Handler.Seconds(), full.Wall.Seconds()/peer.Evaluate.Seconds(), resync.Wall.Seconds()/peer.Handler.Seconds()),
	}
	b.Log(strings.Join(lines, "\n"))
	// b.Log may be cut; the table goes to stdout whole.
	fmt.Println(strings.Join(lines, "\n"))
}

// runPass reconciles every namespace once, one after the other as the
// audit's controller does, and measures it.
func runPass(ctx context.Context, b *testing.B, a *audit.Auditor, e *testenv.Env, namespaces []string) pass {
	b.Helper()
	writesBefore, err := e.APIWrites(ctx, policyreport.WGPolicy.Group, "policyreports")
	if err != nil {
		b.Fatal(err)
	}
	evaluatedBefore := evaluatedTotal(b)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cpu := processCPU(b)
	start := time.Now()
	for _, ns := range namespaces {
		if _, err := a.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: ns}}); err != nil {
			b.Fatalf("audit namespace %s: %v", ns, err)
		}
	}
	p := pass{Wall: time.Since(start), CPU: processCPU(b) - cpu}
	runtime.ReadMemStats(&after)
	p.Alloc = after.TotalAlloc - before.TotalAlloc
	runtime.GC()
	runtime.ReadMemStats(&after)
	p.HeapAfter, p.Retained = int64(after.HeapInuse), int64(after.HeapInuse)-int64(before.HeapInuse)
	writesAfter, err := e.APIWrites(ctx, policyreport.WGPolicy.Group, "policyreports")
	if err != nil {
		b.Fatal(err)
	}
	p.Writes = writesAfter.Count - writesBefore.Count
	p.WriteTime = time.Duration((writesAfter.Seconds - writesBefore.Seconds) * float64(time.Second))
	p.Evaluated = evaluatedTotal(b) - evaluatedBefore
	return p
}

// processCPU is the CPU time this process has used (user and system).
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startProfile starts a CPU profile into path (none when path is empty)
// and returns what stops it.
func startProfile(b *testing.B, path string) func() {
	b.Helper()
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// evaluatedTotal is virtstation_audit_vms_evaluated_total.
func evaluatedTotal(b *testing.B) float64 {
	b.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "virtstation_audit_vms_evaluated_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// checkReports checks what the pass wrote, as stored: one result per VM and
// rule, and a fail for mount-path on exactly the violating VMs.
func checkReports(ctx context.Context, r client.Reader, w world, rules []string) error {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(policyreport.WGPolicy.GroupVersion().WithKind(policyreport.WGPolicy.Kind + "List"))
	if err := r.List(ctx, list, client.MatchingLabels{policyreport.LabelManagedBy: policyreport.ManagedBy}); err != nil {
		return err
	}
	results, fails := 0, 0
	for i := range list.Items {
		rep, err := policyreport.FromObject(&list.Items[i])
		if err != nil {
			return err
		}
		results += len(rep.Results)
		for _, res := range rep.Results {
			if res.Result == policyreport.Fail {
				if res.Policy != "mount-path" {
					return fmt.Errorf("report %s/%s: VM %s fails %s, want only mount-path fails", rep.Namespace, rep.Name, res.Subjects[0].Name, res.Policy)
				}
				fails++
			}
		}
	}
	if want := w.vms * len(rules); results != want {
		return fmt.Errorf("the reports hold %d results, want %d (%d VMs × %d rules)", results, want, w.vms, len(rules))
	}
	if want := w.violatingVMs(); fails != want {
		return fmt.Errorf("the reports hold %d mount-path fails, want %d", fails, want)
	}
	if len(list.Items) < w.namespaces {
		return fmt.Errorf("%d reports, want at least one per namespace (%d)", len(list.Items), w.namespaces)
	}
	return nil
}
