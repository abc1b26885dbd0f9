package mutate

import (
	"encoding/base64"
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/cloudinit"
	"github.com/virtstation/virtstation/userdata"
)

// cloudInitVolume is the name of the volume the webhook adds to a VM that
// has none.
const cloudInitVolume = "vs-cloudinit"

// UserDataSecretName is the per-VM Secret holding merged user-data, written
// by the userdata reconciler.
func UserDataSecretName(vm string) string { return userdata.SecretName(vm) }

var cloudInitSources = []string{"cloudInitNoCloud", "cloudInitConfigDrive"}

// mergeCloudInit puts Virtstation's cloud-config part (data-disk mounts,
// cloudInit SSH keys) next to the user's own user-data, which is kept byte
// for byte. The webhook reads no Secret: when the user's data is inline and
// the merge fits KubeVirt's inline limit, it merges inline; otherwise it
// points the volume at <vm>-userdata, keeps the user's own source in the
// virtstation.io/user-data annotation, and the userdata reconciler writes the
// Secret from the stored VM. Only Virtstation's part is re-rendered on later
// admissions.
func mergeCloudInit(m *mutation) error {
	if m.in.VM.Spec.Template == nil {
		return nil
	}
	for _, d := range m.injected.DataDisks {
		if d.MountPath != "" && d.Type == string(api.DiskTypeDisk) && d.ReadOnly {
			m.warnings = append(m.warnings, fmt.Sprintf("virtstation: read-only data disk %s is attached but not mounted at %s: a read-only disk cannot be formatted on first use; mount it in the guest yourself", d.Name, d.MountPath))
		}
	}
	part := userdata.Part(m.injected, m.sshUser, nil)
	prev := m.prev.CloudInit
	if prev == nil {
		prev = m.oldInjected().CloudInit
	}
	volumes := getList(m.obj, pathVolumes)
	idx, kind := findCloudInit(volumes)
	if part.IsZero() && !m.keysInCloudInit {
		return m.unmergeCloudInit(volumes, idx, kind, prev)
	}
	rec := &api.InjectedCloudInit{}
	if idx < 0 {
		name := freeName(cloudInitVolume, names(volumes).Union(names(getList(m.obj, pathDisks))))
		volumes = append(volumes, map[string]any{"name": name, "cloudInitNoCloud": map[string]any{}})
		idx, kind = len(volumes)-1, "cloudInitNoCloud"
		disks := append(getList(m.obj, pathDisks), map[string]any{"name": name, "disk": map[string]any{"bus": "virtio"}})
		if err := setList(m.obj, disks, pathDisks); err != nil {
			return fmt.Errorf("add cloud-init disk: %w", err)
		}
		rec.AddedVolume = true
	} else if prev != nil && prev.AddedVolume && volumeName(volumes[idx]) == prev.Volume {
		rec.AddedVolume = true
	}
	vol, ok := volumes[idx].(map[string]any)
	if !ok { // findCloudInit finds only objects
		return fmt.Errorf("cloud-init volume %d is not an object", idx)
	}
	rec.Volume = str(vol["name"])
	src, _ := vol[kind].(map[string]any)
	if src == nil {
		src = map[string]any{}
		vol[kind] = src
	}
	fld := field.NewPath("spec", "template", "spec", "volumes").Index(idx).Child(kind)
	user, ok := m.userSource(src, prev, fld)
	if !ok {
		return nil
	}
	m.checkCloudConfig(user, fld)
	inline, fits, err := inlineMerge(user, part, m.keysInCloudInit)
	if err != nil {
		return err
	}
	clearUserData(src)
	switch {
	case fits:
		for k, v := range inline {
			src[k] = v
		}
		if err := setAnnotation(m.obj, api.AnnotationUserData, ""); err != nil {
			return fmt.Errorf("remove %s: %w", api.AnnotationUserData, err)
		}
	case m.in.Name == "":
		m.denied = append(m.denied, field.Forbidden(field.NewPath("spec", "template", "spec", "volumes").Index(idx),
			"the merged cloud-init user-data needs a per-VM Secret, which is named after the VM, and a VM created with generateName has no name yet (rule: cloud-init; fix: give the VM a name)"))
		return nil
	case user.SecretRef == UserDataSecretName(m.in.Name):
		// Admitted before the annotation existed, with the user's data
		// inside Virtstation's Secret: the reconciler splits it out.
		rec.Secret = user.SecretRef
		src["secretRef"] = map[string]any{"name": rec.Secret}
	default:
		if saved := user.String(); len(saved) > api.MaxUserDataAnnotationBytes {
			m.deny(field.ErrorList{field.TooLong(fld.Child("userData"), "", api.MaxUserDataAnnotationBytes)}, api.RuleCloudInit, fmt.Sprintf(
				"your inline user-data does not fit KubeVirt's %d-byte inline limit once merged, and is kept in annotation %s, which holds at most %d bytes: put it in a Secret of your own and name it in secretRef",
				api.MaxInlineUserData, api.AnnotationUserData, api.MaxUserDataAnnotationBytes))
			return nil
		} else if err := setAnnotation(m.obj, api.AnnotationUserData, saved); err != nil {
			return fmt.Errorf("write %s: %w", api.AnnotationUserData, err)
		}
		rec.Secret = UserDataSecretName(m.in.Name)
		src["secretRef"] = map[string]any{"name": rec.Secret}
	}
	if err := setList(m.obj, volumes, pathVolumes); err != nil {
		return fmt.Errorf("write cloud-init volume: %w", err)
	}
	m.injected.CloudInit = rec
	return nil
}

// inlineMerge is the user's inline user-data merged with part, as the
// cloud-init source fields to set, and whether it fits KubeVirt's inline
// limit. User-data in a Secret, or SSH keys that go through cloud-init
// (only the reconciler reads them), never merge inline.
func inlineMerge(user api.UserCloudInit, part cloudinit.Part, keys bool) (map[string]any, bool, error) {
	if user.SecretRef != "" || keys {
		return nil, false, nil
	}
	own, base64Form := inlineBytes(user)
	rendered, err := part.Render()
	if err != nil {
		return nil, false, fmt.Errorf("render cloud-config part: %w", err)
	}
	merged := cloudinit.Merge(own, rendered)
	if base64Form || !utf8.Valid(merged) {
		enc := base64.StdEncoding.EncodeToString(merged)
		return map[string]any{"userDataBase64": enc}, len(enc) <= api.MaxInlineUserData, nil
	}
	return map[string]any{"userData": string(merged)}, len(merged) <= api.MaxInlineUserData, nil
}

// inlineBytes is the user's inline user-data and whether it was given as
// userDataBase64. userSource has checked that the base64 decodes.
func inlineBytes(user api.UserCloudInit) ([]byte, bool) {
	switch {
	case user.UserDataBase64 != nil:
		b, _ := base64.StdEncoding.DecodeString(*user.UserDataBase64)
		return b, true
	case user.UserData != nil:
		return []byte(*user.UserData), false
	}
	return nil, false
}

// clearUserData removes the user-data fields of a cloud-init source.
func clearUserData(src map[string]any) {
	delete(src, "userData")
	delete(src, "userDataBase64")
	delete(src, "secretRef")
}

// unmergeCloudInit restores the user's own user-data when Virtstation has
// nothing left to say, and drops the volume it added.
func (m *mutation) unmergeCloudInit(volumes []any, idx int, kind string, prev *api.InjectedCloudInit) error {
	if err := setAnnotation(m.obj, api.AnnotationUserData, ""); err != nil {
		return fmt.Errorf("remove %s: %w", api.AnnotationUserData, err)
	}
	if idx < 0 {
		return nil
	}
	fld := field.NewPath("spec", "template", "spec", "volumes").Index(idx).Child(kind)
	vol, ok := volumes[idx].(map[string]any)
	if !ok { // findCloudInit finds only objects
		return fmt.Errorf("cloud-init volume %d is not an object", idx)
	}
	src, _ := vol[kind].(map[string]any)
	if prev == nil {
		// Nothing of ours to take out: the user-data stays as it is, and
		// only inline user-data is checked.
		m.checkInlineCloudConfig(src, fld)
		return nil
	}
	if prev.AddedVolume && str(vol["name"]) == prev.Volume {
		drop := map[string]bool{prev.Volume: true}
		keep := volumes[:0:0]
		for i, v := range volumes {
			if i != idx {
				keep = append(keep, v)
			}
		}
		disks := getList(m.obj, pathDisks)
		keptDisks := disks[:0:0]
		for _, d := range disks {
			if o, ok := d.(map[string]any); ok && drop[str(o["name"])] {
				continue
			}
			keptDisks = append(keptDisks, d)
		}
		if err := setList(m.obj, keptDisks, pathDisks); err != nil {
			return err
		}
		return setList(m.obj, keep, pathVolumes)
	}
	user, ok := m.userSource(src, prev, fld)
	if !ok {
		return nil
	}
	m.checkCloudConfig(user, fld)
	clearUserData(src)
	switch {
	case user.SecretRef != "":
		src["secretRef"] = map[string]any{"name": user.SecretRef}
	case user.UserDataBase64 != nil:
		src["userDataBase64"] = *user.UserDataBase64
	case user.UserData != nil:
		src["userData"] = *user.UserData
	}
	return setList(m.obj, volumes, pathVolumes)
}

// userSource finds the user's own user-data behind a cloud-init source,
// without reading any Secret: a secretRef of the user's names the user's
// Secret; a secretRef to Virtstation's Secret stands for the source kept in
// the virtstation.io/user-data annotation (on the object, else on the stored
// object); inline user-data is the user's, minus a previous inline merge.
// ok is false when the admission is denied.
func (m *mutation) userSource(src map[string]any, prev *api.InjectedCloudInit, fld *field.Path) (api.UserCloudInit, bool) {
	if ref, _ := src["secretRef"].(map[string]any); ref != nil {
		name := str(ref["name"])
		if m.in.Name == "" || name != UserDataSecretName(m.in.Name) {
			return api.UserCloudInit{SecretRef: name}, true
		}
		if saved, ok, err := m.savedUserData(); err != nil || ok {
			if err != nil {
				m.denied = append(m.denied, field.Invalid(field.NewPath("metadata", "annotations").Key(api.AnnotationUserData), "(omitted)", fmt.Sprintf(
					"%v (rule: cloud-init; fix: remove this annotation and put your own user-data back in %s)", err, fld)))
				return api.UserCloudInit{}, false
			}
			return saved, true
		}
		if prev != nil && prev.Secret == name {
			// Admitted before the annotation existed: the record names the
			// user's Secret, or the user's data is inside ours.
			if prev.UserSecret != "" {
				return api.UserCloudInit{SecretRef: prev.UserSecret}, true
			}
			return api.UserCloudInit{SecretRef: name}, true
		}
		m.denied = append(m.denied, field.Forbidden(fld.Child("secretRef", "name"), fmt.Sprintf(
			"your user-data Secret is named %s, the name of the Secret Virtstation writes the merged user-data to (rule: cloud-init; fix: rename your Secret, for example to %s-cloud-init, and this secretRef with it)",
			name, m.in.Name)))
		return api.UserCloudInit{}, false
	}
	if s := str(src["userDataBase64"]); s != "" {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			m.denied = append(m.denied, field.Invalid(fld.Child("userDataBase64"), "(omitted)", "not valid base64 (rule: cloud-init; fix: encode your user-data with base64)"))
			return api.UserCloudInit{}, false
		}
		user, ok := m.split(raw, fld.Child("userDataBase64"))
		if !ok || len(user) == 0 {
			return api.UserCloudInit{}, ok
		}
		enc := base64.StdEncoding.EncodeToString(user)
		return api.UserCloudInit{UserDataBase64: &enc}, true
	}
	user, ok := m.split([]byte(str(src["userData"])), fld.Child("userData"))
	if !ok || len(user) == 0 {
		return api.UserCloudInit{}, ok
	}
	s := string(user)
	return api.UserCloudInit{UserData: &s}, true
}

// savedUserData is the user's own source kept in virtstation.io/user-data,
// on the request's object, else on the stored object (UPDATE).
func (m *mutation) savedUserData() (api.UserCloudInit, bool, error) {
	v, ok := m.in.VM.Annotations[api.AnnotationUserData]
	if !ok && m.in.OldVM != nil {
		v, ok = m.in.OldVM.Annotations[api.AnnotationUserData]
	}
	if !ok {
		return api.UserCloudInit{}, false, nil
	}
	u, err := api.ParseUserCloudInit(v)
	if err == nil && u.SecretRef == UserDataSecretName(m.in.Name) {
		err = fmt.Errorf("annotation %s names Virtstation's own Secret %s", api.AnnotationUserData, u.SecretRef)
	}
	if err == nil && u.UserDataBase64 != nil {
		if _, derr := base64.StdEncoding.DecodeString(*u.UserDataBase64); derr != nil {
			err = fmt.Errorf("annotation %s: userDataBase64 is not valid base64", api.AnnotationUserData)
		}
	}
	return u, err == nil, err
}

// checkCloudConfig warns when the user's own inline user-data is a
// #cloud-config that cloud-init will ignore (cloudinit.CheckCloudConfig).
// The admission does not refuse it, as KubeVirt does not, but nothing else
// would tell the user before the VM boots without it. User-data in a Secret
// is not read for it: the webhook reads no Secret.
func (m *mutation) checkCloudConfig(user api.UserCloudInit, fld *field.Path) {
	own, base64Form := inlineBytes(user)
	if len(own) == 0 {
		return
	}
	err := cloudinit.CheckCloudConfig(own)
	if err == nil {
		return
	}
	where := fld.Child("userData").String()
	if base64Form {
		where = fld.Child("userDataBase64").String()
	}
	m.warnings = append(m.warnings, fmt.Sprintf(
		"virtstation: %s: your #cloud-config is not valid cloud-config YAML: %v; the VM's cloud-init will likely ignore all of it (Virtstation's own part still applies); fix it and apply again", where, err))
}

// checkInlineCloudConfig runs checkCloudConfig on inline user-data that
// Virtstation did not merge (userData, or userDataBase64 that decodes).
func (m *mutation) checkInlineCloudConfig(src map[string]any, fld *field.Path) {
	if _, ok := src["secretRef"]; ok {
		return
	}
	if s := str(src["userDataBase64"]); s != "" {
		if _, err := base64.StdEncoding.DecodeString(s); err == nil {
			m.checkCloudConfig(api.UserCloudInit{UserDataBase64: &s}, fld)
		}
		return
	}
	if s := str(src["userData"]); s != "" {
		m.checkCloudConfig(api.UserCloudInit{UserData: &s}, fld)
	}
}

// split recovers the user's own user-data from data that may hold an
// earlier merge. A merge that was edited by hand cannot be split safely: the
// admission is denied rather than the user's data guessed at.
func (m *mutation) split(data []byte, fld *field.Path) ([]byte, bool) {
	user, _, err := cloudinit.Split(data)
	if err != nil {
		m.denied = append(m.denied, field.Invalid(fld, "(omitted)", fmt.Sprintf(
			"this user-data holds Virtstation's merged format but was edited, so your part cannot be recovered byte for byte: %v (rule: cloud-init; fix: replace it with your own user-data only; Virtstation merges its part again)", err)))
		return nil, false
	}
	return user, true
}

// freeName is base, or base-1, base-2, … : the first not in taken.
func freeName(base string, taken sets.Set[string]) string {
	name := base
	for i := 1; taken.Has(name); i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name
}

// volumeName is the name of volume v, "" if v is not an object.
func volumeName(v any) string {
	o, _ := v.(map[string]any)
	return str(o["name"])
}

// findCloudInit returns the index and source key of the first cloud-init
// volume, or -1.
func findCloudInit(volumes []any) (int, string) {
	for i, v := range volumes {
		o, ok := v.(map[string]any)
		if !ok {
			continue
		}
		for _, k := range cloudInitSources {
			if _, ok := o[k]; ok {
				return i, k
			}
		}
	}
	return -1, ""
}
