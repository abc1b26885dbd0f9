package testenv

import (
	"bytes"
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
)

// WriteStats are what the API server counted of the writes on one resource.
type WriteStats struct {
	// Count is apiserver_request_total.
	Count float64
	// Seconds is apiserver_request_duration_seconds_sum: the time the API
	// server spent on them (admission and storage included).
	Seconds float64
}

// writeVerbs are the API server's metric verbs that write.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// APIWrites reads, from the API server's own /metrics, the writes it has
// served on resource of group ("" for the core group): a test counts the
// writes something caused by reading it before and after.
func (e *Env) APIWrites(ctx context.Context, group, resource string) (WriteStats, error) {
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return WriteStats{}, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return WriteStats{}, fmt.Errorf("read the API server's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return WriteStats{}, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	var out WriteStats
	for _, m := range families["apiserver_request_total"].GetMetric() {
		if isWriteOn(m, group, resource) {
			out.Count += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["apiserver_request_duration_seconds"].GetMetric() {
		if isWriteOn(m, group, resource) {
			out.Seconds += m.GetHistogram().GetSampleSum()
		}
	}
	return out, nil
}

func isWriteOn(m *dto.Metric, group, resource string) bool {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels["group"] == group && labels["resource"] == resource && labels["subresource"] == "" && writeVerbs[labels["verb"]]
}
