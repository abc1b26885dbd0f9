package validate

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// ReasonPolicyDeadlineExceeded is the Event reason of an admission denied
// because its policy evaluation ran past its deadline.
const ReasonPolicyDeadlineExceeded = "PolicyDeadlineExceeded"

// deadlineDenied reports an evaluation of vm's admission that ran past its
// deadline, in the log, the metric and an Event (on the module's policy
// ConfigMap when it has one, else on the VM), and denies the admission:
// fail closed, naming the module.
func (h *VMHandler) deadlineDenied(ctx context.Context, req admission.Request, vm types.NamespacedName, de *DeadlineError) admission.Response {
	logf.FromContext(ctx).Error(de, "policy evaluation ran past its deadline; denying", "uid", req.UID, "vm", vm.String(), "module", de.Module, "configMap", de.ConfigMap.String())
	h.metrics().DeadlineExceeded(de.Module)
	if h.Recorder != nil {
		vmRef := &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"},
			ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name, UID: vmUID(req)},
		}
		note := fmt.Sprintf("%s of VM %s denied: %s", req.Operation, vm, de.Denial())
		var cm corev1.ConfigMap
		if de.ConfigMap.Name != "" && h.Client != nil && h.Client.Get(ctx, de.ConfigMap, &cm) == nil {
			h.Recorder.Eventf(&cm, vmRef, corev1.EventTypeWarning, ReasonPolicyDeadlineExceeded, "EvaluatePolicy", "%s", truncateNote(note))
		} else {
			h.Recorder.Eventf(vmRef, nil, corev1.EventTypeWarning, ReasonPolicyDeadlineExceeded, "EvaluatePolicy", "%s", truncateNote(note))
		}
	}
	return admission.Denied(de.Denial())
}

// vmUID is the UID of the VM an UPDATE is for; empty on CREATE.
func vmUID(req admission.Request) types.UID {
	var m metav1.PartialObjectMetadata
	if len(req.OldObject.Raw) == 0 || json.Unmarshal(req.OldObject.Raw, &m) != nil {
		return ""
	}
	return m.UID
}

func (h *VMHandler) metrics() *Metrics {
	if h.Metrics != nil {
		return h.Metrics
	}
	return DefaultMetrics()
}
