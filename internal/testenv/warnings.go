package testenv

import (
	"context"
	"sync"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WarningRecorder collects the warnings the API server relays (admission
// warnings among them). It is safe for concurrent use.
type WarningRecorder struct {
	mu   sync.Mutex
	list []string
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *WarningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// Take returns the warnings recorded so far and forgets them.
func (w *WarningRecorder) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// ClientWithWarnings returns a direct client whose warnings land in a new
// WarningRecorder.
func (e *Env) ClientWithWarnings() (client.Client, *WarningRecorder, error) {
	w := &WarningRecorder{}
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: e.Manager.GetScheme()})
	return c, w, err
}
