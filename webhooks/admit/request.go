package admit

import (
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// CreateOrUpdate reports whether req creates or updates its object: the
// operations the VM and ConfigMap webhooks judge. They allow any other
// operation unjudged.
func CreateOrUpdate(req admission.Request) bool {
	return req.Operation == admissionv1.Create || req.Operation == admissionv1.Update
}

// DryRun reports whether req is a dry run: the webhook decides as for a
// real request but writes nothing (sideEffects=NoneOnDryRun).
func DryRun(req admission.Request) bool {
	return req.DryRun != nil && *req.DryRun
}
