package admission_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// requestKey names a kind of API request as the API server's metrics do
// (HTTP verbs; LIST for collection GETs): "PATCH cdi.kubevirt.io/datavolumes".
type requestKey string

// requestStats is what the API server counted for one requestKey.
type requestStats struct {
	// Count is apiserver_request_total.
	Count float64
	// Seconds is apiserver_request_duration_seconds_sum: time spent in the
	// API server (admission, storage) on these requests.
	Seconds float64
	// Timed is apiserver_request_duration_seconds_count.
	Timed float64
}

// apiRequests reads the API server's request counters from /metrics.
func apiRequests(ctx context.Context, cs kubernetes.Interface) (map[requestKey]requestStats, error) {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read API server metrics: %w", err)
	}
	out := map[requestKey]requestStats{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var field func(*requestStats, float64)
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			field = func(s *requestStats, v float64) { s.Count += v }
		case strings.HasPrefix(line, "apiserver_request_duration_seconds_sum{"):
			field = func(s *requestStats, v float64) { s.Seconds += v }
		case strings.HasPrefix(line, "apiserver_request_duration_seconds_count{"):
			field = func(s *requestStats, v float64) { s.Timed += v }
		case strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_sum{"):
			field = func(s *requestStats, v float64) { s.Seconds += v }
		case strings.HasPrefix(line, "apiserver_admission_webhook_admission_duration_seconds_count{"):
			field = func(s *requestStats, v float64) { s.Count += v; s.Timed += v }
		default:
			continue
		}
		open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
		if open < 0 || end < open {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := parseLabels(line[open+1 : end])
		if strings.HasPrefix(line, "apiserver_admission_webhook_") {
			key := requestKey("WEBHOOK " + labels["name"])
			s := out[key]
			field(&s, v)
			out[key] = s
			continue
		}
		res := labels["resource"]
		if labels["group"] != "" {
			res = labels["group"] + "/" + res
		}
		if labels["subresource"] != "" {
			res += "/" + labels["subresource"]
		}
		key := requestKey(labels["verb"] + " " + res)
		s := out[key]
		field(&s, v)
		out[key] = s
	}
	return out, sc.Err()
}

// parseLabels parses a Prometheus label set: a="x",b="y".
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return out
		}
		name := strings.TrimLeft(s[:eq], ", ")
		rest := s[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
			}
			val.WriteByte(rest[i])
		}
		out[name] = val.String()
		if i+1 > len(rest) {
			return out
		}
		s = rest[i+1:]
	}
	return out
}

// diff is after minus before.
func diff(before, after map[requestKey]requestStats) map[requestKey]requestStats {
	out := map[requestKey]requestStats{}
	for k, a := range after {
		b := before[k]
		d := requestStats{Count: a.Count - b.Count, Seconds: a.Seconds - b.Seconds, Timed: a.Timed - b.Timed}
		if d.Count != 0 {
			out[k] = d
		}
	}
	return out
}

// extraRow is one kind of request a labelled create costs beyond an
// unlabelled one.
type extraRow struct {
	Key requestKey
	// PerCreate is (labelled − unlabelled) requests per create.
	PerCreate float64
	// MeanMs is the mean time the API server spent on one such request
	// during the labelled phase.
	MeanMs float64
}

// isWrite reports whether the verb writes.
func isWrite(k requestKey) bool {
	verb, _, _ := strings.Cut(string(k), " ")
	switch verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION", "CREATE", "UPDATE":
		return true
	}
	return false
}

// extras compares the labelled phase to the unlabelled one, both of n
// creates, and keeps the request kinds that differ by at least 0.05 per
// create. WATCH is left out: it is long-running and not per create.
func extras(lab, unlab map[requestKey]requestStats, n int) []extraRow {
	keys := map[requestKey]bool{}
	for k := range lab {
		keys[k] = true
	}
	for k := range unlab {
		keys[k] = true
	}
	var out []extraRow
	for k := range keys {
		if strings.HasPrefix(string(k), "WATCH ") || strings.HasPrefix(string(k), "WEBHOOK ") {
			continue
		}
		per := (lab[k].Count - unlab[k].Count) / float64(n)
		if per < 0.05 && per > -0.05 {
			continue
		}
		row := extraRow{Key: k, PerCreate: per}
		if t := lab[k].Timed; t > 0 {
			row.MeanMs = lab[k].Seconds / t * 1000
		}
		out = append(out, row)
	}
	sort.Slice(out, func(i, j int) bool {
		if isWrite(out[i].Key) != isWrite(out[j].Key) {
			return isWrite(out[i].Key)
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// webhookCalls returns the webhook calls (by webhook name) of a phase with
// the mean time the API server waited on each, transport included.
func webhookCalls(phase map[requestKey]requestStats, n int) []extraRow {
	var out []extraRow
	for k, st := range phase {
		if !strings.HasPrefix(string(k), "WEBHOOK ") || st.Count == 0 {
			continue
		}
		out = append(out, extraRow{Key: k, PerCreate: st.Count / float64(n), MeanMs: st.Seconds / st.Timed * 1000})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// handlerTimes reads controller-runtime's webhook latency histogram (time in
// the handler, as the webhook server measures it) by path, from this
// process's registry.
func handlerTimes() (map[string]requestStats, error) {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]requestStats{}
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_latency_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			path := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" {
					path = l.GetValue()
				}
			}
			h := m.GetHistogram()
			out[path] = requestStats{Count: float64(h.GetSampleCount()), Timed: float64(h.GetSampleCount()), Seconds: h.GetSampleSum()}
		}
	}
	return out, nil
}
