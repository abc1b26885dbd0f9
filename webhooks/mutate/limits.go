package mutate

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

// ruleLimits names the limits in denials.
const ruleLimits = policy.RuleLimits

// annotationPrefix is the prefix of Virtstation's annotations.
const annotationPrefix = "virtstation.io/"

// checkAnnotationSizes denies a virtstation.io/ annotation value longer than
// its limit (api.MaxAnnotationBytes, api.MaxInjectedBytes for the webhook's
// own record). It runs before any step parses an annotation, so no step
// works on more than the limits allow.
func checkAnnotationSizes(m *mutation) {
	ann := m.in.VM.Annotations
	keys := make([]string, 0, len(ann))
	for k := range ann {
		if strings.HasPrefix(k, annotationPrefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		limit, fix := api.MaxAnnotationBytes, "shorten the value"
		switch k {
		case api.AnnotationInjected:
			limit, fix = api.MaxInjectedBytes, "remove the annotation: the webhook writes it"
		case api.AnnotationUserData:
			limit, fix = api.MaxUserDataAnnotationBytes, "put your user-data in a Secret of your own and name it in the cloud-init volume's secretRef"
		}
		if len(ann[k]) > limit {
			m.deny(field.ErrorList{field.TooLong(field.NewPath("metadata", "annotations").Key(k), "", limit)}, ruleLimits, fix)
		}
	}
}

// listLimit is a list of the VM spec whose length KubeVirt bounds.
type listLimit struct {
	path []string
	max  int
	fix  string
	// length is the list's length in a template spec.
	length func(*kubevirtv1.VirtualMachineInstanceSpec) int
}

// kubevirtListLimits are the lists the steps add to, with KubeVirt v1.9.0's
// maxItems for each.
var kubevirtListLimits = []listLimit{
	{pathDisks, api.MaxDisks, "attach fewer data disks, or remove disks of your own",
		func(s *kubevirtv1.VirtualMachineInstanceSpec) int { return len(s.Domain.Devices.Disks) }},
	{pathVolumes, api.MaxVolumes, "attach fewer data disks, or remove volumes of your own",
		func(s *kubevirtv1.VirtualMachineInstanceSpec) int { return len(s.Volumes) }},
	{pathAccessCredentials, api.MaxAccessCredentials, "remove an accessCredentials entry of your own, or the virtstation.io/ssh-user annotation",
		func(s *kubevirtv1.VirtualMachineInstanceSpec) int { return len(s.AccessCredentials) }},
}

// checkListLimits denies a mutation that takes one of KubeVirt's bounded
// lists past its limit. A list that was already too long in the request is
// KubeVirt's to deny, with its own message.
func checkListLimits(m *mutation) error {
	if m.in.VM.Spec.Template == nil {
		return nil
	}
	for _, l := range kubevirtListLimits {
		before, after := l.length(&m.in.VM.Spec.Template.Spec), l.length(&m.vm.Spec.Template.Spec)
		if after > l.max && after > before {
			m.deny(field.ErrorList{field.TooMany(field.NewPath(l.path[0], l.path[1:]...), after, l.max)}, ruleLimits,
				fmt.Sprintf("%s: Virtstation's additions would take it past KubeVirt's limit", l.fix))
		}
	}
	return nil
}
