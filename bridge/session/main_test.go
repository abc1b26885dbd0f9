package session_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/virtstation/virtstation/bridge/session"
	"github.com/virtstation/virtstation/internal/testenv"
)

var (
	shared    testenv.Shared
	cp        *testenv.ControlPlane
	adminOnce sync.Once
	admin     kubernetes.Interface
)

func TestMain(m *testing.M) { shared.Main(m) }

// controlPlane starts the package's control plane on first use, so that
// unit tests and fuzzing (go test -fuzz) run without one.
func controlPlane(t *testing.T) {
	t.Helper()
	c := shared.Get(t)
	adminOnce.Do(func() { cp, admin = c, kubernetes.NewForConfigOrDie(c.Config) })
}

// fast are the durations of the tests' replicas: a crashed replica's slots
// free up within 2 s.
var fast = session.Options{LeaseDuration: 2 * time.Second, ReservationTTL: 2 * time.Second}

// bridgeNamespace creates a namespace for one test's session Leases and a
// user for its replicas that may do no more with Leases there than the
// bridge's ServiceAccount will be granted: get, list, watch, create, update.
func bridgeNamespace(t *testing.T) (string, kubernetes.Interface) {
	t.Helper()
	ns, cfg := bridgeNamespaceConfig(t)
	return ns, kubernetes.NewForConfigOrDie(cfg)
}

// bridgeNamespaceConfig is bridgeNamespace with the replicas' client
// configuration rather than a client.
func bridgeNamespaceConfig(t *testing.T) (string, *rest.Config) {
	t.Helper()
	controlPlane(t)
	ctx := t.Context()
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bridge-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "sessions"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			Verbs: []string{"get", "list", "watch", "create", "update"},
		}},
	}
	if _, err := admin.RbacV1().Roles(ns.Name).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user := "bridge-of-" + ns.Name
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "sessions"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "sessions"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	if _, err := admin.RbacV1().RoleBindings(ns.Name).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	// client-go's default limit of 5 requests per second would queue the
	// heartbeat behind the racers of TestRaceForOneSlotHasOneWinner until
	// it expires; the bridge raises it too.
	cfg.QPS, cfg.Burst = 50, 100
	client := kubernetes.NewForConfigOrDie(cfg)
	// The API server's RBAC authorizer learns of the binding from an
	// informer: wait until it has.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := client.CoordinationV1().Leases(ns.Name).List(ctx, metav1.ListOptions{})
		if err == nil {
			return ns.Name, cfg
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bridge's RBAC never took effect: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replica starts a Registry named name, as one bridge replica, and returns
// it with a function that stops it as a crash would: no release.
func replica(t *testing.T, client kubernetes.Interface, ns, name string, opts session.Options) (*session.Registry, context.CancelFunc) {
	t.Helper()
	r, err := session.New(client, ns, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return r, cancel
}

// twoReplicas starts replicas "a" and "b" on a fresh namespace.
func twoReplicas(t *testing.T, opts session.Options) (a, b *session.Registry, ns string) {
	t.Helper()
	ns, client := bridgeNamespace(t)
	a, _ = replica(t, client, ns, "a", opts)
	b, _ = replica(t, client, ns, "b", opts)
	return a, b, ns
}
