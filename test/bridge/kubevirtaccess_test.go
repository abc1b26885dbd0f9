package bridge

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtstation/virtstation/internal/virthandler"
)

// permission is one RBAC rule in KubeVirt's subresource group.
type permission struct{ verb, resource string }

func (p permission) String() string { return p.verb + " " + p.resource }

// kubeVirtPermissions are the permissions a user might hold in KubeVirt
// v1.9's subresource group besides the right one: every subresource
// virt-api registers that is near the bridge's (pkg/virt-api/api.go), with
// every verb.
func kubeVirtPermissions() []permission {
	var out []permission
	for _, r := range []string{
		"virtualmachineinstances/console", "virtualmachineinstances/vnc", "virtualmachineinstances/vnc/screenshot",
		"virtualmachineinstances/portforward", "virtualmachineinstances/usbredir", "virtualmachineinstances/vsock",
		"virtualmachines/start", "virtualmachines/stop", "virtualmachines/restart", "virtualmachines/portforward",
	} {
		for _, v := range []string{"get", "list", "create", "update", "patch", "delete"} {
			out = append(out, permission{v, r})
		}
	}
	return out
}

// kubeVirtAction is one thing the bridge does through KubeVirt, the
// permissions KubeVirt v1.9 (and the API server in front of it) require
// for it, and how a client asks the bridge for it.
type kubeVirtAction struct {
	needs []permission
	// do asks the bridge as token's user and returns the HTTP status.
	do func(t *testing.T, token string) int
	// settle, when set, waits until the action's session is over.
	settle func(t *testing.T)
}

func dialStatus(path string) func(t *testing.T, token string) int {
	return func(t *testing.T, token string) int {
		c, resp, err := dialCLI(t, replicaA.URL, path, token)
		if err == nil {
			_ = c.Close()
			return http.StatusSwitchingProtocols
		}
		if resp == nil {
			t.Fatalf("dial %s: %v", path, err)
		}
		return resp.StatusCode
	}
}

func requestStatus(method, path string) func(t *testing.T, token string) int {
	return func(t *testing.T, token string) int {
		resp, _ := request(t, method, replicaA.URL+path, token)
		return resp.StatusCode
	}
}

// TestEachActionNeedsExactlyWhatKubeVirtNeeds: for every action the bridge
// serves, a user holding every KubeVirt permission but one the action
// needs is refused (403), and a user holding only what it needs is served.
func TestEachActionNeedsExactlyWhatKubeVirtNeeds(t *testing.T) {
	console := []permission{{"get", "virtualmachineinstances/console"}}
	vnc := []permission{{"get", "virtualmachineinstances/vnc"}}
	settle := func(mode string, kind virthandler.Kind) func(t *testing.T) {
		return func(t *testing.T) {
			if kind != "" {
				waitUpstreamClosed(t, kind)
			}
			waitSessionFree(t, mode)
		}
	}
	actions := map[string]kubeVirtAction{
		"console": {needs: console, do: dialStatus(vmPath("ws1", "console") + "?takeover=true"), settle: settle("console", virthandler.Console)},
		"vnc":     {needs: vnc, do: dialStatus(vmPath("ws1", "vnc") + "?takeover=true"), settle: settle("vnc", virthandler.VNC)},
		"ssh": {needs: []permission{{"get", "virtualmachineinstances/portforward"}},
			do: dialStatus(vmPath("ws1", "ssh") + "?takeover=true"), settle: settle("ssh", "")},
		"KubeVirt's console path": {needs: console, do: dialStatus(vmiPath("v1", "ws1", "console")), settle: settle("console", virthandler.Console)},
		"KubeVirt's vnc path":     {needs: vnc, do: dialStatus(vmiPath("v1", "ws1", "vnc") + "?preserveSession=false"), settle: settle("vnc", virthandler.VNC)},
		"screenshot": {needs: []permission{{"get", "virtualmachineinstances/vnc"}, {"get", "virtualmachineinstances/vnc/screenshot"}},
			do: requestStatus(http.MethodGet, vmiPath("v1", "ws1", "vnc/screenshot"))},
		"restart": {needs: []permission{{"update", "virtualmachines/restart"}},
			do: requestStatus(http.MethodPost, vmPath("ws1", "restart"))},
	}
	success := map[string]int{"screenshot": http.StatusOK, "restart": http.StatusAccepted}
	names := make([]string, 0, len(actions))
	for name := range actions {
		names = append(names, name)
	}
	slices.Sort(names)
	for i, name := range names {
		a := actions[name]
		t.Run(name, func(t *testing.T) {
			want, ok := success[name]
			if !ok {
				want = http.StatusSwitchingProtocols
			}
			only := fmt.Sprintf("kv-only-%d", i)
			if got := a.do(t, permittedToken(t, only, a.needs)); got != want {
				t.Fatalf("with only %v: HTTP %d, want %d", a.needs, got, want)
			}
			if a.settle != nil {
				a.settle(t)
			}
			for j, missing := range a.needs {
				var rest []permission
				for _, p := range kubeVirtPermissions() {
					if p != missing {
						rest = append(rest, p)
					}
				}
				but := fmt.Sprintf("kv-all-but-%d-%d", i, j)
				if got := a.do(t, permittedToken(t, but, rest)); got != http.StatusForbidden {
					t.Fatalf("with every KubeVirt permission but %v: HTTP %d, want 403", missing, got)
				}
			}
		})
	}
}

// TestScreenshotWithOnlyVNCIsRefused: KubeVirt's virt-api asks for
// vnc/screenshot, which vnc alone does not grant.
func TestScreenshotWithOnlyVNCIsRefused(t *testing.T) {
	tok := permittedToken(t, "kv-vnc-only", []permission{{"get", "virtualmachineinstances/vnc"}})
	resp, body := request(t, http.MethodGet, replicaA.URL+vmiPath("v1", "ws1", "vnc/screenshot"), tok)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Type") == "image/png" {
		t.Fatalf("screenshot with only vnc: %s %s, want 403", resp.Status, body)
	}
}

// permittedToken makes ServiceAccount name in userNS holding exactly
// perms (and get on kubevirt.io virtualmachines, to tell when the binding
// took effect), and returns its token.
func permittedToken(t *testing.T, name string, perms []permission) string {
	t.Helper()
	ctx := testContext(t)
	tok, err := stack.Token(ctx, userNS, name)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"get"},
	}}}
	for _, p := range perms {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{p.resource}, Verbs: []string{p.verb}})
	}
	if _, err := kube.RbacV1().Roles(userNS).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: userNS}},
	}
	if _, err := kube.RbacV1().RoleBindings(userNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBinding(ctx, t, user(name))
	return tok
}

// waitBinding waits until the RBAC authorizer, which reads roles from an
// informer, lets u get ws1: then a refusal is the role's, not a binding
// not seen yet.
func waitBinding(ctx context.Context, t *testing.T, u string) {
	t.Helper()
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: u,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + userNS, "system:authenticated"},
		ResourceAttributes: &authzv1.ResourceAttributes{Namespace: userNS, Name: "ws1", Verb: "get", Group: "kubevirt.io", Resource: "virtualmachines"}}}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err == nil && got.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the binding of %s never took effect: %v", u, err)
		}
	}
}
