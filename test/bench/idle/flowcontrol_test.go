package idle_test

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/virtstation/virtstation/internal/testenv"
)

// exemptSessions applies the FlowSchema Virtstation ships
// (config/manager/bridge_flowschema.yaml): it routes the bridge's own dials
// of the console and VNC subresources to the API server's exempt priority
// level.
//
// kube-apiserver cannot tell that a request it proxies to an aggregated
// API server is long-running (kubernetes/kubernetes#83200): only watches,
// exec, attach, log, portforward and proxy are. So every open console or
// VNC connection through it holds a seat of API Priority and Fairness
// for its whole life, in the priority level of whoever dialled. The
// bridge's ServiceAccount falls in "service-accounts", level
// workload-low, shared with every controller's ServiceAccount; with the
// default --max-requests-inflight=400 and --max-mutating-requests-inflight=200
// that level has a few hundred seats, and idle sessions past them are
// refused with 429 (the bridge answers 502). -exempt-sessions=false shows
// that limit.
func (c *cluster) exemptSessions(ctx context.Context) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	return c.apply(ctx, filepath.Join(root, "config", "manager", "bridge_flowschema.yaml"))
}

// flowControlReport is the API server's own account of requests it
// rejected or is executing, by priority level, from its /metrics: what
// to look at when sessions fail to open.
func (c *cluster) flowControlReport(ctx context.Context) string {
	raw, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return "API server metrics: " + err.Error()
	}
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "apiserver_flowcontrol_rejected_requests_total{") ||
			strings.HasPrefix(line, "apiserver_flowcontrol_current_executing_seats{") ||
			strings.HasPrefix(line, "apiserver_flowcontrol_nominal_limit_seats{") {
			fmt.Fprintln(&b, line)
		}
	}
	return b.String()
}
