package validate

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// TestSetupWithManagerEndsWithItsContext: the first load reads through the
// caller's context, so a webhook told to stop while the API server does not
// answer stops at once, not after initialLoadTimeout.
func TestSetupWithManagerEndsWithItsContext(t *testing.T) {
	// An API server that answers discovery and never answers a read.
	stop := make(chan struct{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api":
			_, _ = io.WriteString(w, `{"kind":"APIVersions","versions":["v1"]}`)
		case "/apis":
			_, _ = io.WriteString(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`)
		case "/api/v1":
			_, _ = io.WriteString(w, `{"kind":"APIResourceList","groupVersion":"v1","resources":[`+
				`{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["get","list","watch"]}]}`)
		default:
			select {
			case <-stop:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(func() { close(stop); api.Close() })
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(&rest.Config{Host: api.URL}, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	l := &PolicyLoader{Namespace: installNS, Engine: NewEngine(0), Recorder: &eventLog{}, Metrics: DefaultMetrics()}
	const stopAfter = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), stopAfter)
	defer cancel()
	start := time.Now()
	_ = l.SetupWithManager(ctx, mgr) // the shipped set may or may not load in what is left
	if took := time.Since(start); took > stopAfter+10*time.Second {
		t.Fatalf("SetupWithManager took %v after its context ended at %v; want it to end with the context", took, stopAfter)
	}
}
