package lifecycle

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// The lifecycle's metrics, registered with controller-runtime's registry
// by SetupWithManager:
//
//	virtstation_lifecycle_vms{state}             managed VMs with an idle timeout, by state:
//	                                             running, idle, pending-stop, stopped
//	virtstation_lifecycle_keep_running_leases    running VMs held by a keep-running lease
//	virtstation_lifecycle_notices_total          notices given
//	virtstation_lifecycle_stopped_total{mode}    idle stops (mode observe: would-stop records)
//	virtstation_lifecycle_skipped_total          due stops not made because they would lose data
//	virtstation_lifecycle_api_writes_total       the controller's writes: annotations and stops
//
// The bridge counts start-on-connect (virtstation_bridge_start_to_connected_seconds).
var metrics = struct {
	notices, skipped, writes prometheus.Counter
	stopped                  *prometheus.CounterVec
}{
	notices: prometheus.NewCounter(prometheus.CounterOpts{Name: "virtstation_lifecycle_notices_total", Help: "Idle-stop notices given."}),
	skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "virtstation_lifecycle_skipped_total", Help: "Due idle stops not made because the stop would lose data."}),
	writes:  prometheus.NewCounter(prometheus.CounterOpts{Name: "virtstation_lifecycle_api_writes_total", Help: "API writes of the lifecycle controller: annotation patches and stops."}),
	stopped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "virtstation_lifecycle_stopped_total", Help: "Idle stops; mode observe counts the stops observe mode would have made."}, []string{"mode"}),
}

var phaseNames = map[phase]string{phaseRunning: "running", phaseIdle: "idle", phasePending: "pending-stop", phaseStopped: "stopped"}

// collector reports the gauges from the controller's state.
type collector struct {
	s      *state
	vms    *prometheus.Desc
	leases *prometheus.Desc
}

func newCollector(s *state) *collector {
	return &collector{
		s:      s,
		vms:    prometheus.NewDesc("virtstation_lifecycle_vms", "Managed VMs with an idle timeout, by lifecycle state.", []string{"state"}, nil),
		leases: prometheus.NewDesc("virtstation_lifecycle_keep_running_leases", "Running VMs held by a keep-running lease.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) { ch <- c.vms; ch <- c.leases }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	byPhase, leases := c.s.counts()
	for p, name := range phaseNames {
		ch <- prometheus.MustNewConstMetric(c.vms, prometheus.GaugeValue, float64(byPhase[p]), name)
	}
	ch <- prometheus.MustNewConstMetric(c.leases, prometheus.GaugeValue, float64(leases))
}

// register registers the metrics with reg; collectors reg already has are
// kept (a second controller in one process, as in tests).
func register(reg prometheus.Registerer, s *state) error {
	for _, c := range []prometheus.Collector{metrics.notices, metrics.skipped, metrics.writes, metrics.stopped, newCollector(s)} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return fmt.Errorf("register lifecycle metrics: %w", err)
			}
		}
	}
	return nil
}
