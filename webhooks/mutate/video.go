package mutate

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

// setVideo sets domain.devices.video.type from virtstation.io/video and adds
// a tablet (USB; virtio on s390x, which has no USB) when the VM has no input
// device, so the VNC pointer tracks the browser's instead of drifting with
// relative PS/2 motion. The type must be one the VM's architecture takes.
func setVideo(m *mutation) error {
	typ := m.in.VM.Annotations[api.AnnotationVideo]
	if m.in.VM.Spec.Template == nil {
		return nil
	}
	if typ == "" {
		removeVideo(m)
		return nil
	}
	fld := field.NewPath("metadata", "annotations").Key(api.AnnotationVideo)
	if !slices.Contains(api.VideoTypes, typ) {
		m.deny(field.ErrorList{field.NotSupported(fld, typ, api.VideoTypes)}, policy.RuleVideo, "pick one of the supported types")
		return nil
	}
	arch, ok, err := m.archOf(policy.RuleVideo)
	if err != nil || !ok {
		return err
	}
	if !arch.AcceptsVideo(typ) {
		// KubeVirt admits the VM and refuses its VMI at start: "video model
		// '<typ>' is not supported on <arch> architecture".
		e := field.NotSupported(fld, typ, arch.VideoTypes)
		e.Detail = policy.Explain(fmt.Sprintf("KubeVirt v1.9.0 refuses video model %q on %s at start: %s", typ, arch.Name, e.Detail),
			policy.RuleVideo, "use "+strings.Join(quoteAll(arch.VideoTypes), " or "))
		m.denied = append(m.denied, e)
		return nil
	}
	devices := m.in.VM.Spec.Template.Spec.Domain.Devices
	if devices.AutoattachGraphicsDevice != nil && !*devices.AutoattachGraphicsDevice {
		m.denied = append(m.denied, field.Forbidden(fld, policy.Explain(
			"a video device needs graphics, but spec.template.spec.domain.devices.autoattachGraphicsDevice is false",
			policy.RuleVideo, fmt.Sprintf("remove autoattachGraphicsDevice: false or the %s annotation", api.AnnotationVideo))))
		return nil
	}
	out := &m.vm.Spec.Template.Spec.Domain.Devices
	if out.Video == nil {
		out.Video = &kubevirtv1.VideoDevice{}
	}
	out.Video.Type = typ
	rec := &api.InjectedVideo{Type: typ, Replaced: usersVideoType(m.prev.Video, devices.Video)}
	if len(devices.Inputs) == 0 {
		out.Inputs = []kubevirtv1.Input{{Name: "tablet", Type: "tablet", Bus: kubevirtv1.InputBus(arch.TabletBus)}}
		rec.AddedTablet = true
	} else if m.prev.Video != nil && m.prev.Video.AddedTablet && len(devices.Inputs) == 1 && devices.Inputs[0].Name == "tablet" {
		rec.AddedTablet = true
	}
	m.injected.Video = rec
	return nil
}

// usersVideoType is the user's own video.type under what the webhook
// writes: what the record says it replaced while the VM still shows the
// webhook's type, else what the VM has now (nil: no video device).
func usersVideoType(prev *api.InjectedVideo, cur *kubevirtv1.VideoDevice) *string {
	if cur == nil {
		return nil
	}
	if prev != nil && cur.Type == prev.Type {
		return prev.Replaced
	}
	t := cur.Type
	return &t
}

// removeVideo gives the VM back its own video device and inputs once the
// annotation is gone: the type the webhook replaced (or no video device),
// and no tablet if the webhook added the one there is.
func removeVideo(m *mutation) {
	prev := m.prev.Video
	if prev == nil {
		return
	}
	devices := m.in.VM.Spec.Template.Spec.Domain.Devices
	out := &m.vm.Spec.Template.Spec.Domain.Devices
	if devices.Video != nil && devices.Video.Type == prev.Type {
		if prev.Replaced == nil {
			out.Video = nil
		} else {
			out.Video.Type = *prev.Replaced // "" leaves it out
		}
	}
	if prev.AddedTablet && len(devices.Inputs) == 1 && devices.Inputs[0].Name == "tablet" && devices.Inputs[0].Type == "tablet" {
		out.Inputs = nil
	}
}

func quoteAll(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
