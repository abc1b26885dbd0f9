package mutate

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
)

var (
	pathVideo  = []string{"spec", "template", "spec", "domain", "devices", "video"}
	pathInputs = []string{"spec", "template", "spec", "domain", "devices", "inputs"}
)

// setVideo sets domain.devices.video.type from virtstation.io/video and adds
// a tablet (USB; virtio on s390x, which has no USB) when the VM has no input
// device, so the VNC pointer tracks the browser's instead of drifting with
// relative PS/2 motion. The type must be one the VM's architecture takes.
func setVideo(m *mutation) error {
	typ := m.in.VM.Annotations[api.AnnotationVideo]
	if typ == "" || m.in.VM.Spec.Template == nil {
		return nil
	}
	fld := field.NewPath("metadata", "annotations").Key(api.AnnotationVideo)
	if !slices.Contains(api.VideoTypes, typ) {
		m.deny(field.ErrorList{field.NotSupported(fld, typ, api.VideoTypes)}, api.RuleVideo, "pick one of the supported types")
		return nil
	}
	arch, ok, err := m.archOf(api.RuleVideo)
	if err != nil || !ok {
		return err
	}
	if !arch.AcceptsVideo(typ) {
		// KubeVirt admits the VM and refuses its VMI at start: "video model
		// '<typ>' is not supported on <arch> architecture".
		e := field.NotSupported(fld, typ, arch.VideoTypes)
		e.Detail = fmt.Sprintf("KubeVirt v1.9.0 refuses video model %q on %s at start: %s (rule: %s; fix: use %s)",
			typ, arch.Name, e.Detail, api.RuleVideo, strings.Join(quoteAll(arch.VideoTypes), " or "))
		m.denied = append(m.denied, e)
		return nil
	}
	devices := m.in.VM.Spec.Template.Spec.Domain.Devices
	if devices.AutoattachGraphicsDevice != nil && !*devices.AutoattachGraphicsDevice {
		m.denied = append(m.denied, field.Forbidden(fld, fmt.Sprintf(
			"a video device needs graphics, but spec.template.spec.domain.devices.autoattachGraphicsDevice is false (rule: video; fix: remove autoattachGraphicsDevice: false or the %s annotation)", api.AnnotationVideo)))
		return nil
	}
	video, err := ensureObject(m.obj, pathVideo)
	if err != nil {
		return fmt.Errorf("write video: %w", err)
	}
	video["type"] = typ
	rec := &api.InjectedVideo{Type: typ}
	if len(devices.Inputs) == 0 {
		if err := setList(m.obj, []any{map[string]any{"name": "tablet", "type": "tablet", "bus": arch.TabletBus}}, pathInputs); err != nil {
			return fmt.Errorf("write inputs: %w", err)
		}
		rec.AddedTablet = true
	} else if m.prev.Video != nil && m.prev.Video.AddedTablet && len(devices.Inputs) == 1 && devices.Inputs[0].Name == "tablet" {
		rec.AddedTablet = true
	}
	m.injected.Video = rec
	return nil
}

func quoteAll(l []string) []string {
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
