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

// reportWrites is how many writes (POST, PUT, PATCH, APPLY, DELETE,
// DELETECOLLECTION) the API server has counted on wgpolicyk8s.io
// policyreports, from apiserver_request_total on its /metrics.
func reportWrites(ctx context.Context, cs kubernetes.Interface) (float64, error) {
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read API server metrics: %w", err)
	}
	var n float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels := parseLabels(line[len("apiserver_request_total{"):end])
		if labels["group"] != "wgpolicyk8s.io" || labels["resource"] != "policyreports" || !isWrite(labels["verb"]) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		n += v
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
