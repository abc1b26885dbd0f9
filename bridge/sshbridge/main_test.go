package sshbridge

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/virtstation/virtstation/internal/testenv"
)

// The ConfigMapStore tests share one API server, started by the first test
// that needs it (so `go test -fuzz`, whose workers run TestMain too, starts
// none) and stopped by TestMain.
var (
	controlPlaneOnce sync.Once
	controlPlane     *testenv.ControlPlane
	controlPlaneErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if controlPlane != nil {
		if err := controlPlane.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "control plane stop:", err)
		}
	}
	os.Exit(code)
}

// newClientset returns a fresh admin client of the shared API server, as a
// separate bridge replica would have.
func newClientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	controlPlaneOnce.Do(func() { controlPlane, controlPlaneErr = testenv.StartControlPlane() })
	if controlPlaneErr != nil {
		t.Fatalf("start control plane: %v", controlPlaneErr)
	}
	cs, err := kubernetes.NewForConfig(controlPlane.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
