package lifecycle

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virthandler"
	"github.com/virtstation/virtstation/lifecycle"
	"github.com/virtstation/virtstation/webhooks"
)

const installNS = "virtstation-system"

func benchVMs() int {
	if n, err := strconv.Atoi(os.Getenv("LIFECYCLE_BENCH_VMS")); err == nil && n > 0 {
		return n
	}
	return 10000
}

// idleBatch is how many VMs go through a whole idle stop.
const idleBatch = 200

func BenchmarkLifecycleScale(b *testing.B) {
	ctx := context.Background()
	cp, err := testenv.StartControlPlane(testenv.WithCRDs(), testenv.WithAggregation())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cp.Stop() }()
	c, err := client.New(cp.Config, client.Options{Scheme: webhooks.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	kv, err := virthandler.Start(ctx, virthandler.Options{FrontProxyCA: cp.FrontProxy.CA, AllowedNames: []string{testenv.FrontProxyClientName},
		DNSNames: []string{testenv.SubresourceServerName}, Client: c,
		OnStop: func(ctx context.Context, vm *kubevirtv1.VirtualMachine) {
			_ = c.Delete(ctx, &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name}})
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = kv.Close() }()
	if err := testenv.RegisterSubresourceAPI(ctx, cp.Config, kv.Port(), kv.CABundle()); err != nil {
		b.Fatal(err)
	}
	for _, ns := range []string{installNS, "fleet", "idle"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	n := benchVMs()
	start := time.Now()
	store(ctx, b, c, "fleet", n, map[string]string{api.AnnotationIdleTimeout: "1h"})
	b.Logf("stored %d VMs and their VMIs in %s", n, time.Since(start).Round(time.Second))

	if b.N != 1 {
		b.Fatal("run with -benchtime 1x: a process holds one lifecycle controller")
	}
	peer, stop := heapOf(b, ctx, cp, false, n)
	stop()
	steady := counter(b, "virtstation_lifecycle_api_writes_total")
	with, stop := heapOf(b, ctx, cp, true, n)
	defer stop()
	time.Sleep(5 * time.Second)
	b.ReportMetric(counter(b, "virtstation_lifecycle_api_writes_total")-steady, "writes-while-in-use")
	b.ReportMetric(float64(with-peer)/float64(n), "controller-B/VM")
	b.ReportMetric(float64(peer)/float64(n), "peer-caches-B/VM")
	b.ReportMetric(float64(with-peer)/float64(peer), "controller/caches")
	writes := idleStops(b, ctx, c)
	b.ReportMetric(writes, "writes/idle-stop")
	b.ReportMetric(writes*float64(n), "writes/h-if-all-idle-hourly")
}

// store creates n running managed VMs (and their VMIs) in ns, 16 at a time.
func store(ctx context.Context, b *testing.B, c client.Client, ns string, n int, ann map[string]string) {
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := storeOne(ctx, c, ns, fmt.Sprintf("ws-%05d", i), ann); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

func storeOne(ctx context.Context, c client.Client, ns, name string, ann map[string]string) error {
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{api.LabelManaged: api.LabelTrue}, Annotations: ann},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways), Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{
				Disks: []kubevirtv1.Disk{{Name: "root", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}}}}},
				Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{Image: "quay.io/containerdisks/fedora:41"}}}},
			}}},
	}
	if err := c.Create(ctx, vm); err != nil {
		return err
	}
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:   vm.Spec.Template.Spec,
		Status: kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running}}
	return c.Create(ctx, vmi)
}

// heapOf starts a manager with the webhooks' caches (and the lifecycle
// controller when withController), waits until it has seen all n VMs (the
// controller: looked at each), and returns the live heap after a GC.
func heapOf(b *testing.B, ctx context.Context, cp *testenv.ControlPlane, withController bool, n int) (uint64, func()) {
	runtime.GC()
	mctx, cancel := context.WithCancel(ctx)
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: webhooks.NewScheme(), Cache: webhooks.CacheOptions(installNS),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		b.Fatal(err)
	}
	for _, obj := range []client.Object{&kubevirtv1.VirtualMachine{}, &kubevirtv1.VirtualMachineInstance{}, &corev1.ConfigMap{}} {
		if _, err := mgr.GetCache().GetInformer(mctx, obj); err != nil {
			b.Fatal(err)
		}
	}
	if withController {
		kv, err := lifecycle.NewSubresources(cp.Config)
		if err != nil {
			b.Fatal(err)
		}
		lc := &lifecycle.Controller{Client: mgr.GetClient(), Reader: mgr.GetCache(), APIReader: mgr.GetAPIReader(), KubeVirt: kv,
			Recorder: mgr.GetEventRecorder("bench"), Namespace: installNS}
		if err := lc.SetupWithManager(mgr); err != nil {
			b.Fatal(err)
		}
	}
	go func() { _ = mgr.Start(mctx) }()
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		b.Fatal("caches did not sync")
	}
	for withController && gauge(b, "virtstation_lifecycle_vms", "running") < float64(n) {
		time.Sleep(200 * time.Millisecond)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, cancel
}

// idleStops stores idleBatch VMs that go idle at once, for the running
// controller, and returns its API writes per stop.
func idleStops(b *testing.B, ctx context.Context, c client.Client) float64 {
	before := counter(b, "virtstation_lifecycle_api_writes_total")
	store(ctx, b, c, "idle", idleBatch, map[string]string{api.AnnotationIdleTimeout: "2s", api.AnnotationIdleGracePeriod: "2s", api.AnnotationIdleStopUnsafe: "true"})
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var vms kubevirtv1.VirtualMachineList
		if err := c.List(ctx, &vms, client.InNamespace("idle")); err != nil {
			b.Fatal(err)
		}
		stopped := 0
		for _, vm := range vms.Items {
			if vm.Annotations[api.AnnotationIdleStop] != "" && vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy == kubevirtv1.RunStrategyHalted {
				stopped++
			}
		}
		if stopped == idleBatch {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d VMs stopped after 5 minutes", stopped, idleBatch)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // nothing more should be written
	return (counter(b, "virtstation_lifecycle_api_writes_total") - before) / idleBatch
}

func gather(b *testing.B, name string) []*dto.Metric {
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}

func gauge(b *testing.B, name, state string) float64 {
	for _, m := range gather(b, name) {
		for _, l := range m.GetLabel() {
			if l.GetName() == "state" && l.GetValue() == state {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func counter(b *testing.B, name string) float64 {
	var sum float64
	for _, m := range gather(b, name) {
		sum += m.GetCounter().GetValue()
	}
	return sum
}
