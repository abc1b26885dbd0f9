package secretgc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestSweeperStartLogs: a sweep that the manager's shutdown cuts short logs
// nothing (`virtstation demo` showed "sweep orphaned secrets: context
// canceled" on Ctrl-C); a sweep that fails while running is logged.
func TestSweeperStartLogs(t *testing.T) {
	errAPI := errors.New("the server is currently unable to handle the request")
	tests := map[string]struct {
		list    func(ctx context.Context) error
		wantLog bool
	}{
		"shutdown during a sweep": {
			// What client-go returns once the request's ctx ends.
			list:    func(ctx context.Context) error { <-ctx.Done(); return fmt.Errorf("get secrets: %w", ctx.Err()) },
			wantLog: false,
		},
		"the API fails": {
			list:    func(context.Context) error { return errAPI },
			wantLog: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			// A failed List is the Sweeper's only line here.
			var lines []string
			log := funcr.New(func(_, args string) {
				mu.Lock()
				defer mu.Unlock()
				lines = append(lines, args)
			}, funcr.Options{})
			ctx, cancel := context.WithCancel(logf.IntoContext(context.Background(), log))
			listed := make(chan struct{}, 1)
			r := listReader{list: func(ctx context.Context) error {
				select {
				case listed <- struct{}{}:
				default:
				}
				return tc.list(ctx)
			}}
			s := &Sweeper{APIReader: r, Suffixes: []string{"-userdata"}, Grace: time.Minute, Every: time.Hour}
			done := make(chan error, 1)
			go func() { done <- s.Start(ctx) }()
			<-listed
			time.Sleep(10 * time.Millisecond) // let a failing sweep log
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Start = %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := len(lines) > 0; got != tc.wantLog {
				t.Errorf("logged %q; want an error logged: %v", lines, tc.wantLog)
			}
		})
	}
}

// listReader is a client.Reader whose List is list; the Sweeper reads VMs
// with Get only after a List that returned Secrets.
type listReader struct {
	list func(ctx context.Context) error
}

func (r listReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("unexpected Get")
}

func (r listReader) List(ctx context.Context, _ client.ObjectList, _ ...client.ListOption) error {
	return r.list(ctx)
}
