package audit_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// writeStats are the API server's counters of writes (POST, PUT, PATCH,
// APPLY, DELETE, DELETECOLLECTION) on wgpolicyk8s.io policyreports.
type writeStats struct {
	// Count is apiserver_request_total.
	Count float64
	// Seconds is apiserver_request_duration_seconds_sum: time the API
	// server spent on them.
	Seconds float64
}

// reportWrites reads writeStats from the API server's /metrics.
func reportWrites(ctx context.Context, cs kubernetes.Interface) (writeStats, error) {
	var n writeStats
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return n, fmt.Errorf("read API server metrics: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, _, _ := strings.Cut(line, "{")
		var field *float64
		switch name {
		case "apiserver_request_total":
			field = &n.Count
		case "apiserver_request_duration_seconds_sum":
			field = &n.Seconds
		default:
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels := parseLabels(line[len(name)+1 : end])
		if labels["group"] != "wgpolicyk8s.io" || labels["resource"] != "policyreports" || !isWrite(labels["verb"]) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return n, fmt.Errorf("parse %q: %w", line, err)
		}
		*field += v
	}
	return n, sc.Err()
}

// isWrite reports whether an API server verb writes.
func isWrite(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
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
