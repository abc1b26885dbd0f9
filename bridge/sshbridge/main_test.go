package sshbridge

import (
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/virtstation/virtstation/internal/testenv"
)

// The ConfigMapStore tests share one API server, started by the first test
// that needs it (so `go test -fuzz`, whose workers run TestMain too, starts
// none) and stopped by TestMain.
var shared testenv.Shared

func TestMain(m *testing.M) { shared.Main(m) }

// newClientset returns a fresh admin client of the shared API server, as a
// separate bridge replica would have.
func newClientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(shared.Get(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
