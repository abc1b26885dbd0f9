package proc

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestProcess(t *testing.T) {
	cases := map[string]struct {
		script string
		kill   bool
		output string
	}{
		"exits by itself": {script: "echo out; echo err >&2", output: "out\nerr\n"},
		"killed":          {script: "echo started; exec sleep 60", kill: true, output: "started\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := &Output{}
			cmd := exec.Command("sh", "-c", tc.script)
			cmd.Stdout, cmd.Stderr = out, out
			p, err := Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			if tc.kill {
				for !strings.Contains(out.String(), "started") {
					time.Sleep(10 * time.Millisecond)
				}
				if err := p.Kill(); err != nil {
					t.Fatalf("Kill: %v", err)
				}
			}
			select {
			case <-p.Exited():
			case <-time.After(10 * time.Second):
				t.Fatal("the process did not exit")
			}
			if cmd.ProcessState == nil {
				t.Error("no ProcessState after Exited")
			}
			// Killing an exited process is no error.
			if err := p.Kill(); err != nil {
				t.Errorf("Kill after exit: %v", err)
			}
			if got := out.String(); got != tc.output {
				t.Errorf("output %q, want %q", got, tc.output)
			}
		})
	}
}

func TestStartFails(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/virtstation-proc-test")); err == nil {
		t.Fatal("Start succeeded")
	}
}
