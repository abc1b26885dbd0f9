package virthandler

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/yaml"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// maxRestartBody bounds a restart request body; RestartOptions is a few
// dozen bytes.
const maxRestartBody = 64 << 10

// restart serves PUT .../virtualmachines/{name}/restart: it checks the body
// as virt-api does, records the call and answers 202 Accepted.
func (s *Server) restart(w http.ResponseWriter, r *http.Request) {
	call := newCall(Restart, r)
	if _, ok := s.target(call.Namespace, call.Name); !ok {
		s.fail(w, call, apierrors.NewNotFound(vmResource, call.Name))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRestartBody+1))
	if err != nil {
		s.fail(w, call, apierrors.NewBadRequest("read request body: "+err.Error()))
		return
	}
	if len(body) > maxRestartBody {
		s.fail(w, call, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("restart options larger than %d bytes", maxRestartBody)))
		return
	}
	opts, err := decodeRestartOptions(body)
	if err != nil {
		s.fail(w, call, apierrors.NewBadRequest(err.Error()))
		return
	}
	call.RestartOptions = opts
	call.Status = http.StatusAccepted
	s.calls.add(call)
	w.WriteHeader(http.StatusAccepted)
}

// decodeRestartOptions parses a restart body (JSON or YAML, possibly empty)
// and applies virt-api's checks on gracePeriodSeconds.
func decodeRestartOptions(body []byte) (*kubevirtv1.RestartOptions, error) {
	opts := &kubevirtv1.RestartOptions{}
	err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(body), 1024).Decode(opts)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("can not unmarshal request body to RestartOptions: %w", err)
	}
	if g := opts.GracePeriodSeconds; g != nil {
		switch {
		case *g > 0:
			return nil, errors.New("for force restart, only gracePeriod=0 is supported for now")
		case *g < 0:
			return nil, errors.New("gracePeriod has to be greater or equal to 0")
		}
	}
	return opts, nil
}
