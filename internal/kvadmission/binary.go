package kvadmission

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Env names the binary's path; make test sets it.
const Env = "KUBEVIRT_ADMISSION"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary is $KUBEVIRT_ADMISSION, or the path hack/kubevirt-admission.sh
// prints after building the binary once per machine.
func Binary() (string, error) {
	binOnce.Do(func() { binPath, binErr = findBinary() })
	return binPath, binErr
}

func findBinary() (string, error) {
	if p := os.Getenv(Env); p != "" {
		return p, nil
	}
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("kvadmission: cannot locate the repository; set " + Env + " (make test does)")
	}
	script := filepath.Join(filepath.Dir(self), "..", "..", "hack", "kubevirt-admission.sh")
	cmd := exec.Command(script)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("build KubeVirt's admission with %s (or set %s; make test does): %w", script, Env, err)
	}
	return strings.TrimSpace(string(out)), nil
}
