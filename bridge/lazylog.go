package bridge

import (
	"slices"

	"github.com/go-logr/logr"
)

// newLazyLogger is l, whose WithValues adds the values only when it logs.
// A logger with values of its own is not free (zap encodes them into a
// buffer of 1 KiB at once), and a session keeps its logger from start to
// end while it logs a few lines; a lazy one costs the slice of values.
// Make it once, and WithValues per session.
func newLazyLogger(l logr.Logger) logr.Logger {
	sink := l.GetSink()
	if sink == nil {
		return l
	}
	// lazySink's methods add a frame between the caller and sink.
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1)
	}
	return logr.New(&lazySink{parent: sink}).V(l.GetV())
}

// lazySink is a logr.LogSink that passes its values to parent with each
// line rather than once.
type lazySink struct {
	parent logr.LogSink
	kv     []any
}

// Init implements logr.LogSink; parent was initialised already.
func (s *lazySink) Init(logr.RuntimeInfo) {}

// Enabled implements logr.LogSink.
func (s *lazySink) Enabled(level int) bool { return s.parent.Enabled(level) }

// Info implements logr.LogSink.
func (s *lazySink) Info(level int, msg string, kv ...any) {
	s.parent.WithValues(s.kv...).Info(level, msg, kv...)
}

// Error implements logr.LogSink.
func (s *lazySink) Error(err error, msg string, kv ...any) {
	s.parent.WithValues(s.kv...).Error(err, msg, kv...)
}

// WithValues implements logr.LogSink.
func (s *lazySink) WithValues(kv ...any) logr.LogSink {
	return &lazySink{parent: s.parent, kv: append(slices.Clip(s.kv), kv...)}
}

// WithName implements logr.LogSink.
func (s *lazySink) WithName(name string) logr.LogSink {
	return &lazySink{parent: s.parent.WithName(name), kv: s.kv}
}
