package proc

import (
	"bytes"
	"sync"
)

// Output collects a process's stdout and stderr. It is safe to read while
// the process writes it: use it as exec.Cmd's Stdout and Stderr.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
