package activity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/virtstation/virtstation/api"
)

// MaxRequestBytes bounds the body of a keep-running request: a duration in
// a small JSON object.
const MaxRequestBytes = 1 << 10

// keepRunningRequest is the body of POST …/keep-running.
type keepRunningRequest struct {
	// Duration is a Go duration ("2h"); empty takes the default.
	Duration string `json:"duration"`
}

// ParseKeepRunning reads the body of a keep-running request: empty, or a
// JSON object {"duration": "<Go duration>"} with a duration greater than
// zero and at most api.MaxLifecycleDuration. Empty, or no duration, is
// api.DefaultMaxKeepRunning; the lifecycle controller caps it with the
// VM's max-keep-running. The error says what to send instead.
func ParseKeepRunning(body []byte) (time.Duration, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return api.DefaultMaxKeepRunning, nil
	}
	if len(body) > MaxRequestBytes {
		return 0, fmt.Errorf("the body is larger than %d bytes", MaxRequestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req keepRunningRequest
	if err := dec.Decode(&req); err != nil {
		return 0, errors.New(`the body is not a JSON object such as {"duration":"2h"}`)
	}
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		return 0, errors.New(`the body has more than one JSON value; send one object such as {"duration":"2h"}`)
	}
	if req.Duration == "" {
		return api.DefaultMaxKeepRunning, nil
	}
	d, err := time.ParseDuration(req.Duration)
	switch {
	case err != nil:
		return 0, fmt.Errorf("duration %q is not a Go duration, such as 30m or 2h", req.Duration)
	case d <= 0:
		return 0, fmt.Errorf("duration %q must be greater than zero", req.Duration)
	case d > api.MaxLifecycleDuration:
		return 0, fmt.Errorf("duration %q must be at most %s", req.Duration, api.MaxLifecycleDuration)
	}
	return d, nil
}
