package auth_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtstation/virtstation/bridge/auth"
)

// kubeVirtRule is one permission a role may hold in KubeVirt's subresource
// group: a verb on resource/subresource.
type kubeVirtRule struct{ verb, resource string }

// everyKubeVirtRule is every permission of KubeVirt v1.9's subresource
// group that a user might hold instead of the right one (the subresources
// virt-api registers in pkg/virt-api/api.go), with the verbs RBAC knows.
func everyKubeVirtRule() []kubeVirtRule {
	subs := []string{
		"virtualmachineinstances/console", "virtualmachineinstances/vnc", "virtualmachineinstances/vnc/screenshot",
		"virtualmachineinstances/portforward", "virtualmachineinstances/usbredir", "virtualmachineinstances/vsock",
		"virtualmachineinstances/pause", "virtualmachineinstances/unpause", "virtualmachineinstances/softreboot",
		"virtualmachines/start", "virtualmachines/stop", "virtualmachines/restart", "virtualmachines/migrate",
		"virtualmachines/portforward",
	}
	var out []kubeVirtRule
	for _, s := range subs {
		for _, v := range []string{"get", "list", "create", "update", "patch", "delete"} {
			out = append(out, kubeVirtRule{v, s})
		}
	}
	return out
}

// ruleOf is the rule that allows a.
func ruleOf(a auth.Attributes) kubeVirtRule {
	return kubeVirtRule{a.Verb, a.Resource + "/" + a.Subresource}
}

// TestKubeVirtAccessAsksWhatKubeVirtAsks holds auth.KubeVirtAccess to what
// KubeVirt v1.9 and the API server in front of it enforce, against the real
// RBAC authorizer: a user with every permission of the group but one the
// action needs is refused; a user with only what it needs is allowed.
func TestKubeVirtAccessAsksWhatKubeVirtAsks(t *testing.T) {
	startControlPlane(t)
	const ns = "kv-access"
	cases := map[auth.Action][]string{
		auth.Console:    {"get virtualmachineinstances/console"},
		auth.VNC:        {"get virtualmachineinstances/vnc"},
		auth.Screenshot: {"get virtualmachineinstances/vnc", "get virtualmachineinstances/vnc/screenshot"},
		auth.SSH:        {"get virtualmachineinstances/portforward"},
		auth.Restart:    {"update virtualmachines/restart"},
		auth.Start:      {"update virtualmachines/start"},
	}
	authz := auth.NewAuthorizer(kube.AuthorizationV1().SubjectAccessReviews())
	for action, want := range cases {
		t.Run(string(action), func(t *testing.T) {
			attrs := auth.KubeVirtAccess(action, ns, "ws1")
			var got []string
			for _, a := range attrs {
				if a.Group != "subresources.kubevirt.io" || a.Namespace != ns || a.Name != "ws1" {
					t.Fatalf("%s: %+v is not about %s/ws1 in subresources.kubevirt.io", action, a, ns)
				}
				got = append(got, a.Verb+" "+a.Resource+"/"+a.Subresource)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s asks %q, want %q", action, got, want)
			}

			only := fmt.Sprintf("only-%s", action)
			grant(t, ns, only, func(r kubeVirtRule) bool {
				return slices.ContainsFunc(attrs, func(a auth.Attributes) bool { return ruleOf(a) == r })
			})
			if err := authz.AuthorizeAll(context.Background(), user(only), attrs); err != nil {
				t.Fatalf("with only %q: %v", want, err)
			}
			for i, missing := range attrs {
				name := fmt.Sprintf("all-but-%s-%d", action, i)
				grant(t, ns, name, func(r kubeVirtRule) bool { return r != ruleOf(missing) })
				err := authz.AuthorizeAll(context.Background(), user(name), attrs)
				var fe *auth.ForbiddenError
				if !errors.As(err, &fe) || fe.Attr != missing {
					t.Fatalf("with everything but %s: err = %v, want a refusal naming it", missing, err)
				}
			}
		})
	}
}

func user(name string) auth.User {
	return auth.User{Name: name, Groups: []string{"system:authenticated"}}
}

// grant binds user name to a Role in ns with the rules of
// everyKubeVirtRule that keep says to, plus get on kubevirt.io's
// virtualmachines, and waits until the RBAC authorizer has seen it.
func grant(t *testing.T, ns, name string, keep func(kubeVirtRule) bool) {
	t.Helper()
	ctx := context.Background()
	_, _ = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"get"},
	}}}
	for _, r := range everyKubeVirtRule() {
		if keep(r) {
			role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{r.resource}, Verbs: []string{r.verb}})
		}
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: name}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer reads roles from an informer: wait until the
	// binding shows, so a refusal cannot be a binding not seen yet.
	canary := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: name, ResourceAttributes: &authzv1.ResourceAttributes{
		Namespace: ns, Name: "ws1", Verb: "get", Group: "kubevirt.io", Resource: "virtualmachines",
	}}}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, canary, metav1.CreateOptions{})
		if err == nil && sar.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the binding of %s never took effect: %v", name, err)
		}
	}
}
