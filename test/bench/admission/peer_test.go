package admission_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
)

// peerName names the ValidatingAdmissionPolicy and its binding.
const peerName = "virtstation-bench-cel-peer"

// peerReadyTimeout bounds the wait for the API server's policy informer to
// pick up the policy and its binding.
const peerReadyTimeout = 30 * time.Second

// The peer's rules, in the CEL of Kubernetes' ValidatingAdmissionPolicy:
// the shipped mount-path and shared-memory rules (policies/mount_path.rego,
// policies/shared_memory.rego) on the shorthand form of the data-disks
// annotation (name:/mount,…), which is what the benchmark's VMs use. Like
// the CEL peer in webhooks/validate, it gives a verdict and a fixed message,
// not the per-violation explanation the Rego rules build.
const (
	celDataDisks = `has(object.metadata.annotations) && '` + api.AnnotationDataDisks + `' in object.metadata.annotations ? object.metadata.annotations['` + api.AnnotationDataDisks + `'].trim() : ''`
	celMounts    = `variables.dataDisks == '' || variables.dataDisks.startsWith('[') ? [] : variables.dataDisks.split(',').map(e, e.trim()).filter(e, e.indexOf(':') >= 0).map(e, e.substring(e.indexOf(':') + 1).trim()).filter(p, p != '')`
	celPlausible = `variables.mounts.all(p, size(p) <= 255 && p.matches('^(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)+$') && !p.matches('^/(?:bin|boot|dev|etc|lib[^/]*|proc|root|run|sbin|sys|tmp|usr|var)$|^/(?:boot|dev|etc|proc|run|sys|usr)/'))`
	celUnique    = `variables.mounts.all(p, variables.mounts.exists_one(q, q == p))`
	celNoShmDisk = `variables.mounts.all(p, p != '/dev/shm' && !p.startsWith('/dev/shm/'))`
	celNoShmAnn  = `!has(object.metadata.annotations) || !('` + api.AnnotationSharedMemory + `' in object.metadata.annotations)`
)

// peerPolicy is the ValidatingAdmissionPolicy and binding of the peer: it
// applies to VM creates and updates labelled peerLabel=cel.
func peerPolicy() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: peerName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{"kubevirt.io"}, APIVersions: []string{"v1"}, Resources: []string{"virtualmachines"},
						},
					},
				}},
			},
			Variables: []admissionregistrationv1.Variable{
				{Name: "dataDisks", Expression: celDataDisks},
				{Name: "mounts", Expression: celMounts},
			},
			Validations: []admissionregistrationv1.Validation{
				{Expression: celPlausible, Message: "a data disk's mount path is not an absolute, clean path of [A-Za-z0-9._/-] of at most 255 characters outside the system directories (rule: mount-path)"},
				{Expression: celUnique, Message: "two data disks share a mount path (rule: mount-path)"},
				{Expression: celNoShmDisk, Message: "a data disk is mounted at /dev/shm; VMs cannot use shared memory (rule: shared-memory)"},
				{Expression: celNoShmAnn, Message: "annotation " + api.AnnotationSharedMemory + " is set; VMs cannot use shared memory (rule: shared-memory)"},
			},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: peerName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        peerName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{peerLabel: "cel"}},
			},
		},
	}
	return policy, binding
}

// installPeer creates the peer policy and binding and waits until the API
// server enforces them: a dry-run create of a peer VM with the shared-memory
// annotation is denied, and one without is admitted.
func installPeer(ctx context.Context, c client.Client, ns string) error {
	policy, binding := peerPolicy()
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T: %w", obj, err)
		}
	}
	deadline := time.Now().Add(peerReadyTimeout)
	for {
		bad := newVM(full, celPeer, ns, 0)
		bad.Annotations[api.AnnotationSharedMemory] = "1Gi"
		errBad := c.Create(ctx, bad, client.DryRunAll)
		errGood := c.Create(ctx, newVM(full, celPeer, ns, 0), client.DryRunAll)
		if apierrors.IsInvalid(errBad) && errGood == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the ValidatingAdmissionPolicy peer is not enforced after %s: denied VM: %w; plain VM: %w",
				peerReadyTimeout, orNone(errBad), orNone(errGood))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func orNone(err error) error {
	if err == nil {
		return errors.New("admitted")
	}
	return err
}
