package bridge

import (
	"net/http"
	"testing"
)

func TestRestartCallsKubeVirtForAllowedUsers(t *testing.T) {
	url := replicaA.URL + "/api/v1/namespaces/team-a/virtualmachines/ws1/restart"
	if resp, b := request(t, http.MethodPost, url, tokens["eve"]); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("eve's restart: %s %s, want 403", resp.Status, b)
	}
	before := len(handler.Restarts())
	if resp, b := request(t, http.MethodPost, url, tokens["alice"]); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("alice's restart: %s %s, want 202", resp.Status, b)
	}
	restarts := handler.Restarts()
	if len(restarts) != before+1 {
		t.Fatalf("KubeVirt saw %d restarts, want %d", len(restarts), before+1)
	}
	if r := restarts[len(restarts)-1]; r.Namespace != "team-a" || r.Name != "ws1" {
		t.Fatalf("restart reached %s/%s", r.Namespace, r.Name)
	}
}
