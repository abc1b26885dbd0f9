package bridge

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// activityInterval is the activity replicas' interval: short, so that
// several pass in a test.
const activityInterval = time.Second

// leaseWrites watches the Lease called name in the bridge's namespace and
// returns, once stop is called, the spec of every write (create or
// update) the API server took meanwhile.
func leaseWrites(t *testing.T, name string) (stop func() []coordinationv1.LeaseSpec) {
	t.Helper()
	w, err := kube.CoordinationV1().Leases(bridgeNS).Watch(t.Context(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []coordinationv1.LeaseSpec
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				mu.Lock()
				got = append(got, l.Spec)
				mu.Unlock()
			}
		}
	}()
	return func() []coordinationv1.LeaseSpec {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// TestActivityIsInputAcrossReplicas: alice types on ws1's console through
// one bridge replica and moves the pointer and types on its display
// through another, for several activity intervals. Through the real API
// server the VM's activity Lease is written at most once an interval
// between the two replicas, its renewTime follows the input, and what is
// not input (screen requests, encodings, a terminal resize, an open tab)
// writes nothing.
func TestActivityIsInputAcrossReplicas(t *testing.T) {
	var servers [2]string
	for i, name := range []string{"replica-activity-1", "replica-activity-2"} {
		hs, err := startReplica(t.Context(), name, bridge.Options{ActivityInterval: activityInterval})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(hs.Close)
		servers[i] = hs.URL
	}
	console := mustDial(t, servers[0], vmPath("ws1", "console"), tokens["alice"])
	go func() { // the guest's echo, read and ignored
		for {
			if _, _, err := console.ReadMessage(); err != nil {
				return
			}
		}
	}()
	vnc := newRFBClientFor(t, servers[1], "ws1", "")
	defer func() {
		_ = console.Close()
		_ = vnc.c.Close()
		waitUpstreamClosed(t, virthandler.Console)
		waitUpstreamClosed(t, virthandler.VNC)
		waitSessionFree(t, "console")
		waitSessionFree(t, "vnc")
	}()

	// Open sessions that only ask for the screen and resize the terminal
	// for two intervals: no activity.
	stop := leaseWrites(t, api.ActivityLeaseName(userNS, "ws1"))
	vnc.setEncodings(noVNCEncodings)
	for begin := time.Now(); time.Since(begin) < 2*activityInterval; time.Sleep(50 * time.Millisecond) {
		vnc.request(true)
		send(t, console, websocket.TextMessage, `{"type":"resize","cols":120,"rows":40}`)
	}
	if got := stop(); len(got) != 0 {
		t.Fatalf("%d activity writes without input: %+v", len(got), got)
	}

	// Continuous input on both replicas.
	stop = leaseWrites(t, api.ActivityLeaseName(userNS, "ws1"))
	const d = 5 * activityInterval
	start := time.Now()
	for i := 0; time.Since(start) < d; i++ {
		send(t, console, websocket.BinaryMessage, "x")
		vnc.send([]byte{5, 0, 0, byte(i), 0, byte(i)}) // PointerEvent: motion
		vnc.send([]byte{4, 1, 0, 0, 0, 0, 0, 'a'})     // KeyEvent: 'a' down
		vnc.send([]byte{4, 0, 0, 0, 0, 0, 0, 'a'})     // and up
		time.Sleep(10 * time.Millisecond)
	}
	end := time.Now()
	time.Sleep(activityInterval) // writes in flight land
	got := stop()

	maxWrites := int(math.Ceil(float64(d)/float64(activityInterval))) + 1
	if len(got) < 3 || len(got) > maxWrites {
		t.Fatalf("%d writes of ws1's activity Lease in %v of input through two replicas, want 3 to %d", len(got), d, maxWrites)
	}
	var last time.Time
	sources := map[string]bool{}
	for i, s := range got {
		at := s.RenewTime.Time
		if !at.After(last) || at.Before(start.Add(-time.Second)) || at.After(end.Add(time.Second)) {
			t.Errorf("write %d: renewTime %v, want after %v and within the input (%v to %v)", i, at, last, start, end)
		}
		last = at
		sources[*s.HolderIdentity] = true
	}
	for src := range sources {
		if src != "bridge console input" && src != "bridge vnc input" {
			t.Errorf("activity source %q", src)
		}
	}
	for _, server := range servers {
		if m := scrape(t, server); !strings.Contains(m, `virtstation_bridge_activity_writes_total{result="written"}`) {
			t.Errorf("the replica's metrics have no activity writes:\n%s", m)
		}
	}
}

// keepRunning posts body to ws1's (or vm's) keep-running endpoint on
// replica A as the token's user.
func keepRunning(t *testing.T, vm, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, replicaA.URL+vmPath(vm, "keep-running"), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestKeepRunningFromTheBrowser: a user who may open ws1's console or
// display takes a keep-running lease; it lands on the VM's activity Lease
// with who and until when. Anyone else, a bad body or a missing VM is a
// Status saying why.
func TestKeepRunningFromTheBrowser(t *testing.T) {
	before := time.Now()
	code, body := keepRunning(t, "ws1", tokens["alice"], `{"duration":"2h"}`)
	if code != http.StatusOK {
		t.Fatalf("alice's keep-running: %d %s", code, body)
	}
	var answer struct {
		KeepRunningUntil time.Time `json:"keepRunningUntil"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	if d := answer.KeepRunningUntil.Sub(before); d < 2*time.Hour-time.Second || d > 2*time.Hour+time.Minute {
		t.Fatalf("kept running until %v, %v from the request; want 2h", answer.KeepRunningUntil, d)
	}
	l, err := kube.CoordinationV1().Leases(bridgeNS).Get(t.Context(), api.ActivityLeaseName(userNS, "ws1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Annotations[api.AnnotationKeepRunningUntil] != answer.KeepRunningUntil.UTC().Format(time.RFC3339) ||
		l.Annotations[api.AnnotationKeepRunningBy] != "system:serviceaccount:team-a:alice" {
		t.Errorf("the activity Lease says %v", l.Annotations)
	}
	if l.Spec.RenewTime.Time.Before(before.Add(-time.Second)) {
		t.Errorf("the keep-running lease is not activity: renewTime %v", l.Spec.RenewTime)
	}
	// "Keep running" clicked again at once: the lease held, no write.
	if code, again := keepRunning(t, "ws1", tokens["alice"], `{"duration":"2h"}`); code != http.StatusOK || again != body {
		t.Errorf("keep-running again: %d %s, want 200 %s", code, again, body)
	}

	for name, tc := range map[string]struct {
		vm, user, body string
		code           int
		reason, says   string
	}{
		"a user without console or VNC": {vm: "ws1", user: "eve", body: `{"duration":"2h"}`, code: 403, reason: "Forbidden", says: "virtualmachineinstances/console"},
		"no token":                      {vm: "ws1", body: `{}`, code: 401, reason: "Unauthorized"},
		"a duration over the bound":     {vm: "ws1", user: "alice", body: `{"duration":"9000h"}`, code: 400, reason: "BadRequest", says: "at most"},
		"not a duration":                {vm: "ws1", user: "alice", body: `{"duration":"soon"}`, code: 400, reason: "BadRequest", says: "Go duration"},
		"a huge body":                   {vm: "ws1", user: "alice", body: strings.Repeat(" ", 4<<10), code: 413, reason: "BadRequest", says: "larger than"},
		"no such VM":                    {vm: "nope", user: "alice", body: `{}`, code: 404, reason: "VMNotFound"},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := keepRunning(t, tc.vm, tokens[tc.user], tc.body)
			var st status
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatalf("%d %q is not a Status: %v", code, body, err)
			}
			if code != tc.code || st.Reason != tc.reason || !strings.Contains(st.Message, tc.says) {
				t.Fatalf("%d %s %q, want %d %s saying %q", code, st.Reason, st.Message, tc.code, tc.reason, tc.says)
			}
		})
	}
	// Nothing of the refused requests reached the Lease.
	l2, err := kube.CoordinationV1().Leases(bridgeNS).Get(t.Context(), api.ActivityLeaseName(userNS, "ws1"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l2.ResourceVersion != l.ResourceVersion {
		t.Errorf("a refused keep-running request wrote the Lease: %v", l2.Annotations)
	}
}

// TestActivityIsSSHInput: bytes typed in an SSH session through the bridge
// (a real sshd) are activity, recorded on the VM's Lease as SSH input.
func TestActivityIsSSHInput(t *testing.T) {
	hs, err := startReplica(t.Context(), "replica-activity-ssh", bridge.Options{ActivityInterval: activityInterval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hs.Close)
	c := mustDial(t, hs.URL, vmPath("ws1", "ssh"), tokens["alice"])
	defer func() {
		_ = c.Close()
		waitSessionFree(t, "ssh")
	}()
	send(t, c, websocket.TextMessage, hello(t, map[string]any{"user": sshd1.User, "privateKey": string(sshd1.ClientKeyPEM), "cols": 80, "rows": 24}))
	send(t, c, websocket.BinaryMessage, "echo ready-$((6*7))\n")
	readUntil(t, c, "ready-42")
	stop := leaseWrites(t, api.ActivityLeaseName(userNS, "ws1"))
	for begin := time.Now(); time.Since(begin) < 3*activityInterval; time.Sleep(100 * time.Millisecond) {
		send(t, c, websocket.BinaryMessage, "true\n")
	}
	time.Sleep(activityInterval) // writes in flight land
	got := stop()
	ssh := 0
	for _, s := range got {
		if *s.HolderIdentity == "bridge ssh input" {
			ssh++
		}
	}
	if ssh == 0 || len(got) > 4 {
		t.Fatalf("%d writes of ws1's activity Lease in 3 intervals of SSH input, %d of them SSH input; want 1 to 4, from SSH", len(got), ssh)
	}
}
