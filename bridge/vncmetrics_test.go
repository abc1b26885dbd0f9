package bridge

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/virtstation/virtstation/bridge/vnc"
)

const vncSeries = "virtstation_bridge_vnc_updates_total virtstation_bridge_vnc_tier virtstation_bridge_vnc_bytes_total"

func vncExposition(series string) string {
	return `
# HELP virtstation_bridge_vnc_bytes_total Bytes of the VM's VNC session by direction (to_vm, to_client); removed when the session ends.
# TYPE virtstation_bridge_vnc_bytes_total counter
# HELP virtstation_bridge_vnc_tier The adaptive controller's tier of the VM's VNC session: 0 good, 1 fair, 2 poor.
# TYPE virtstation_bridge_vnc_tier gauge
# HELP virtstation_bridge_vnc_updates_total FramebufferUpdates delivered, by the VM of the (single) VNC session; removed when the session ends.
# TYPE virtstation_bridge_vnc_updates_total counter
` + series
}

func TestVNCSessionSeriesFollowTheVMsLatestSession(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := newMetrics(reg)

	alice := m.vncSession("team", "ws1")
	alice.Update(10 * time.Millisecond)
	alice.Update(20 * time.Millisecond)
	alice.Tier(vnc.Fair)
	meter := alice.meter(m.meter("vnc"))
	meter.ClientToUpstream(10)
	meter.UpstreamToClient(4096)
	other := m.vncSession("team", "ws2")
	want := vncExposition(`virtstation_bridge_vnc_bytes_total{direction="to_client",name="ws1",namespace="team"} 4096
virtstation_bridge_vnc_bytes_total{direction="to_vm",name="ws1",namespace="team"} 10
virtstation_bridge_vnc_bytes_total{direction="to_client",name="ws2",namespace="team"} 0
virtstation_bridge_vnc_bytes_total{direction="to_vm",name="ws2",namespace="team"} 0
virtstation_bridge_vnc_tier{name="ws1",namespace="team"} 1
virtstation_bridge_vnc_tier{name="ws2",namespace="team"} 0
virtstation_bridge_vnc_updates_total{name="ws1",namespace="team"} 2
virtstation_bridge_vnc_updates_total{name="ws2",namespace="team"} 0
`)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), strings.Fields(vncSeries)...); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "virtstation_bridge_vnc_request_to_update_seconds"); err != nil || n != 1 {
		t.Fatalf("request-to-update histogram: %d series, %v", n, err)
	}

	// Bob takes ws1 over: his session's series replace Alice's, and hers
	// ending afterwards leaves his in place.
	bob := m.vncSession("team", "ws1")
	bob.Update(time.Millisecond)
	alice.end()
	other.end()
	want = vncExposition(`virtstation_bridge_vnc_bytes_total{direction="to_client",name="ws1",namespace="team"} 0
virtstation_bridge_vnc_bytes_total{direction="to_vm",name="ws1",namespace="team"} 0
virtstation_bridge_vnc_tier{name="ws1",namespace="team"} 0
virtstation_bridge_vnc_updates_total{name="ws1",namespace="team"} 1
`)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), strings.Fields(vncSeries)...); err != nil {
		t.Fatal(err)
	}

	bob.end()
	if n, err := testutil.GatherAndCount(reg, strings.Fields(vncSeries)...); err != nil || n != 0 {
		t.Fatalf("after every session ended: %d series, %v; want none", n, err)
	}
}
