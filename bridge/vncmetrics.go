package bridge

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// vncSessions exposes the per-VM series of the live VNC sessions. It is a
// prometheus.Collector that reads each session's counters when scraped,
// instead of a labelled child per series held for the session's life: an
// idle session then costs its four counters, not four metric children and
// their label pairs (about 2.6 KiB of heap each, measured with 2,000
// sessions).
//
// A VM has at most one VNC session, but a take-over overlaps the old and
// the new one for a moment: the VM's series are the latest session's, and
// an ending session removes them only while they are still its own.
type vncSessions struct {
	updates, tier, bytes *prometheus.Desc

	mu   sync.RWMutex
	byVM map[types.NamespacedName]*vncSession
}

func newVNCSessions() *vncSessions {
	vm := []string{"namespace", "name"}
	return &vncSessions{
		updates: prometheus.NewDesc("virtstation_bridge_vnc_updates_total",
			"FramebufferUpdates delivered, by the VM of the (single) VNC session; removed when the session ends.", vm, nil),
		tier: prometheus.NewDesc("virtstation_bridge_vnc_tier",
			"The adaptive controller's tier of the VM's VNC session: 0 good, 1 fair, 2 poor.", vm, nil),
		bytes: prometheus.NewDesc("virtstation_bridge_vnc_bytes_total",
			"Bytes of the VM's VNC session by direction (to_vm, to_client); removed when the session ends.",
			append(vm, "direction"), nil),
		byVM: map[types.NamespacedName]*vncSession{},
	}
}

func (c *vncSessions) add(v *vncSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byVM[v.key] = v
}

func (c *vncSessions) remove(v *vncSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byVM[v.key] == v {
		delete(c.byVM, v.key)
	}
}

// Describe implements prometheus.Collector.
func (c *vncSessions) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.updates
	ch <- c.tier
	ch <- c.bytes
}

// Collect implements prometheus.Collector.
func (c *vncSessions) Collect(ch chan<- prometheus.Metric) {
	c.mu.RLock()
	live := make([]*vncSession, 0, len(c.byVM))
	for _, v := range c.byVM {
		live = append(live, v)
	}
	c.mu.RUnlock()
	for _, v := range live {
		vm := v.key
		ch <- prometheus.MustNewConstMetric(c.updates, prometheus.CounterValue, float64(v.updates.Load()), vm.Namespace, vm.Name)
		ch <- prometheus.MustNewConstMetric(c.tier, prometheus.GaugeValue, float64(v.tier.Load()), vm.Namespace, vm.Name)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(v.toVM.Load()), vm.Namespace, vm.Name, "to_vm")
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(v.toClient.Load()), vm.Namespace, vm.Name, "to_client")
	}
}
