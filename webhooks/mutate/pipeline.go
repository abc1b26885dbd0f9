package mutate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Request is one admission of a VirtualMachine, as the API server sends
// it, with what the mutation reads of the world passed in: the clock, the
// identities and the policy revision here, cluster state through a
// Cluster.
type Request struct {
	// Operation is CREATE or UPDATE.
	Operation admissionv1.Operation
	// Namespace and Name are the request's; the object's own fill in what
	// they leave out.
	Namespace, Name string
	// UID identifies the request (it seeds the MAC of a generateName VM).
	UID string
	// Object is the VM as sent; OldObject the stored VM on UPDATE.
	Object, OldObject []byte
	// Now is the admission's time.
	Now time.Time
	// PolicyRevision, when set, is recorded on the VM.
	PolicyRevision string
	// Requester is who sends the request (userInfo.username, as the API
	// server says); Controller the lifecycle controller's user
	// (Input.Controller).
	Requester, Controller string
}

// DecodeError is a request whose objects do not decode: the caller's
// fault (HTTP 400), not the webhook's.
type DecodeError struct{ Err error }

func (e *DecodeError) Error() string { return e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// Outcome is what Admit decided.
type Outcome struct {
	// Input is the decoded request.
	Input Input
	// Result is the mutation; zero when Skipped.
	Result Result
	// Skipped: the VM is being deleted, and nothing is plumbed on it (its
	// finalizers are never blocked).
	Skipped bool
}

// Admit is the mutating admission of one VM: decode the request, run the
// steps on the typed VM, and diff it into a JSON patch against the object
// as sent. The webhook (Handler) and render run it alike. Errors are a
// *DecodeError for a request that does not decode, else internal faults.
func Admit(ctx context.Context, req Request, cluster Cluster) (Outcome, error) {
	in, err := decodeRequest(req)
	if err != nil {
		return Outcome{}, &DecodeError{Err: err}
	}
	if in.VM.DeletionTimestamp != nil {
		return Outcome{Input: in, Skipped: true}, nil
	}
	res, err := mutateVM(ctx, in, cluster)
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Input: in, Result: res}, nil
}

// decodeRequest reads the request's object (and old object on UPDATE).
func decodeRequest(req Request) (Input, error) {
	in := Input{Operation: req.Operation, Namespace: req.Namespace, Name: req.Name, RequestUID: req.UID,
		PolicyRevision: req.PolicyRevision, Now: req.Now, Object: req.Object, Requester: req.Requester, Controller: req.Controller}
	var err error
	if in.VM, err = DecodeVM(req.Object); err != nil {
		return Input{}, err
	}
	if in.Name == "" {
		in.Name = in.VM.Name
	}
	if in.Namespace == "" {
		in.Namespace = in.VM.Namespace
	}
	if req.Operation == admissionv1.Update && len(req.OldObject) > 0 {
		in.OldVM = &kubevirtv1.VirtualMachine{}
		if err := json.Unmarshal(req.OldObject, in.OldVM); err != nil {
			return Input{}, fmt.Errorf("decode old VirtualMachine: %w", err)
		}
	}
	return in, nil
}

// Patched is raw with the patch applied, decoded: the object the API
// server stores for an admission that answered with ops.
func Patched(raw []byte, res Result) (map[string]any, error) {
	return applyPatch(raw, res.Patch)
}
