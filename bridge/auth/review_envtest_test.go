package auth_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/virtstation/virtstation/bridge/auth"
	"github.com/virtstation/virtstation/internal/testenv"
)

var (
	shared   testenv.Shared
	kubeOnce sync.Once
	kube     kubernetes.Interface
)

func TestMain(m *testing.M) { shared.Main(m) }

// startControlPlane starts it on first use, so unit tests and fuzzing run
// without one.
func startControlPlane(t *testing.T) {
	t.Helper()
	cp := shared.Get(t)
	kubeOnce.Do(func() { kube = kubernetes.NewForConfigOrDie(cp.Config) })
}

// serviceAccountToken creates a ServiceAccount and returns a token for it,
// as `kubectl create token` would.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	_, _ = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func TestAuthenticateAndAuthorizeAgainstTheAPIServer(t *testing.T) {
	startControlPlane(t)
	ctx := context.Background()
	token := serviceAccountToken(t, "team-a", "alice")
	authn := auth.NewAuthenticator(kube.AuthenticationV1().TokenReviews(), nil)

	u, err := authn.Authenticate(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	if u.Name != "system:serviceaccount:team-a:alice" || !contains(u.Groups, "system:serviceaccounts:team-a") {
		t.Fatalf("user = %+v", u)
	}
	if _, err := authn.Authenticate(ctx, token+"x"); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("tampered token: err = %v, want ErrUnauthenticated", err)
	}

	authz := auth.NewAuthorizer(kube.AuthorizationV1().SubjectAccessReviews())
	err = authz.AuthorizeAll(ctx, u, auth.KubeVirtAccess(auth.Console, "team-a", "ws1"))
	var fe *auth.ForbiddenError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "get on virtualmachineinstances/console in API group subresources.kubevirt.io") {
		t.Fatalf("before any RBAC: err = %v, want a ForbiddenError naming the permission", err)
	}

	grantConsole(t, "team-a", "alice")
	// The API server's RBAC authorizer reads roles from an informer: allow it
	// a moment to see the new binding.
	deadline := time.Now().Add(5 * time.Second)
	for err = authz.AuthorizeAll(ctx, u, auth.KubeVirtAccess(auth.Console, "team-a", "ws1")); err != nil && time.Now().Before(deadline); err = authz.AuthorizeAll(ctx, u, auth.KubeVirtAccess(auth.Console, "team-a", "ws1")) {
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("with the console role: %v", err)
	}
	if err := authz.AuthorizeAll(ctx, u, auth.KubeVirtAccess(auth.VNC, "team-a", "ws1")); !errors.As(err, &fe) {
		t.Fatalf("console role must not open VNC: err = %v", err)
	}
	if err := authz.AuthorizeAll(ctx, u, auth.KubeVirtAccess(auth.Console, "team-b", "ws1")); !errors.As(err, &fe) {
		t.Fatalf("the role is namespaced: err = %v", err)
	}
}

func grantConsole(t *testing.T, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "console"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"subresources.kubevirt.io"}, Resources: []string{"virtualmachineinstances/console"}, Verbs: []string{"get"},
	}}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "console-" + sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "console"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
