package bridge

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

func TestLazyLoggerLogsLikeWithValues(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) },
		funcr.Options{LogCaller: funcr.All, Verbosity: 1}).WithName("bridge")
	for name, l := range map[string]logr.Logger{
		"eager": base.WithValues("mode", "vnc", "vm", "ns/vm", "user", "alice"),
		"lazy":  newLazyLogger(base).WithValues("mode", "vnc", "vm", "ns/vm").WithValues("user", "alice"),
	} {
		lines = nil
		l.Info("session started", "since", "now")
		l.WithName("x").WithValues("k", 1).V(1).Info("detail")
		l.Error(errors.New("boom"), "release session")
		l.V(2).Info("too verbose")
		if len(lines) != 3 {
			t.Fatalf("%s: %d lines, want 3: %q", name, len(lines), lines)
		}
		for _, line := range lines {
			// The caller is this file, not the lazy sink's.
			if !strings.Contains(line, `"caller"={"file"="lazylog_test.go"`) || !strings.Contains(line, `"mode"="vnc" "vm"="ns/vm" "user"="alice"`) {
				t.Errorf("%s: %s", name, line)
			}
		}
		if !strings.HasPrefix(lines[1], "bridge/x ") || !strings.Contains(lines[1], `"k"=1`) {
			t.Errorf("%s: %s", name, lines[1])
		}
	}
}
