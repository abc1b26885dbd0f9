package mutate

import (
	"encoding/base64"
	"fmt"
	"slices"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/cloudinit"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/userdata"
)

// cloudInitVolume is the name of the volume the webhook adds to a VM that
// has none.
const cloudInitVolume = "vs-cloudinit"

// UserDataSecretName is the per-VM Secret holding merged user-data, written
// by the userdata reconciler.
func UserDataSecretName(vm string) string { return userdata.SecretName(vm) }

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
	spec := &m.vm.Spec.Template.Spec
	idx := findCloudInit(spec.Volumes)
	if part.IsZero() && !m.keysInCloudInit {
		return m.unmergeCloudInit(idx, prev)
	}
	rec := &api.InjectedCloudInit{}
	if idx < 0 {
		idx = m.addCloudInitVolume()
		rec.AddedVolume = true
	} else if prev != nil && prev.AddedVolume && spec.Volumes[idx].Name == prev.Volume {
		rec.AddedVolume = true
	}
	rec.Volume = spec.Volumes[idx].Name
	src, kind := sourceOf(&spec.Volumes[idx])
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
	src.clear()
	if fits {
		*src.data, *src.base64 = inline.data, inline.base64
		setAnnotation(m.vm, api.AnnotationUserData, "")
	} else if !m.inSecret(src, user, rec, idx, fld) {
		return nil
	}
	m.injected.CloudInit = rec
	return nil
}

// inSecret points src at the VM's user-data Secret, which the reconciler
// writes, keeping the user's own source in virtstation.io/user-data; false
// when the admission is denied.
func (m *mutation) inSecret(src userDataSource, user api.UserCloudInit, rec *api.InjectedCloudInit, idx int, fld *field.Path) bool {
	switch {
	case m.in.Name == "":
		m.denied = append(m.denied, field.Forbidden(field.NewPath("spec", "template", "spec", "volumes").Index(idx),
			policy.Explain("the merged cloud-init user-data needs a per-VM Secret, which is named after the VM, and a VM created with generateName has no name yet", policy.RuleCloudInit, "give the VM a name")))
		return false
	case user.SecretRef == UserDataSecretName(m.in.Name):
		// Admitted before the annotation existed, with the user's data
		// inside Virtstation's Secret: the reconciler splits it out.
	default:
		saved := user.String()
		if len(saved) > api.MaxUserDataAnnotationBytes {
			m.deny(field.ErrorList{field.TooLong(fld.Child("userData"), "", api.MaxUserDataAnnotationBytes)}, policy.RuleCloudInit, fmt.Sprintf(
				"your inline user-data does not fit KubeVirt's %d-byte inline limit once merged, and is kept in annotation %s, which holds at most %d bytes: put it in a Secret of your own and name it in secretRef",
				api.MaxInlineUserData, api.AnnotationUserData, api.MaxUserDataAnnotationBytes))
			return false
		}
		setAnnotation(m.vm, api.AnnotationUserData, saved)
	}
	rec.Secret = UserDataSecretName(m.in.Name)
	*src.secretRef = &corev1.LocalObjectReference{Name: rec.Secret}
	return true
}

// addCloudInitVolume adds a cloudInitNoCloud volume and its disk, and
// returns the volume's index.
func (m *mutation) addCloudInitVolume() int {
	spec := &m.vm.Spec.Template.Spec
	taken := sets.New[string]()
	for _, v := range spec.Volumes {
		taken.Insert(v.Name)
	}
	for _, d := range spec.Domain.Devices.Disks {
		taken.Insert(d.Name)
	}
	name := freeName(cloudInitVolume, taken)
	spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: name, VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{}}})
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: name, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})
	return len(spec.Volumes) - 1
}

// userDataSource points at the user-data fields of a cloud-init volume's
// source, NoCloud or ConfigDrive alike.
type userDataSource struct {
	secretRef    **corev1.LocalObjectReference
	base64, data *string
}

// sourceOf is the cloud-init source of v and its field name.
func sourceOf(v *kubevirtv1.Volume) (userDataSource, string) {
	if s := v.CloudInitNoCloud; s != nil {
		return userDataSource{&s.UserDataSecretRef, &s.UserDataBase64, &s.UserData}, "cloudInitNoCloud"
	}
	s := v.CloudInitConfigDrive
	return userDataSource{&s.UserDataSecretRef, &s.UserDataBase64, &s.UserData}, "cloudInitConfigDrive"
}

// clear removes the user-data fields.
func (s userDataSource) clear() {
	*s.secretRef, *s.base64, *s.data = nil, "", ""
}

// inlineUserData is user-data to write inline: one of the two fields.
type inlineUserData struct{ data, base64 string }

// inlineMerge is the user's inline user-data merged with part, and whether
// it fits KubeVirt's inline limit. User-data in a Secret, or SSH keys that
// go through cloud-init (only the reconciler reads them), never merge
// inline.
func inlineMerge(user api.UserCloudInit, part cloudinit.Part, keys bool) (inlineUserData, bool, error) {
	if user.SecretRef != "" || keys {
		return inlineUserData{}, false, nil
	}
	own, base64Form := inlineBytes(user)
	rendered, err := part.Render()
	if err != nil {
		return inlineUserData{}, false, fmt.Errorf("render cloud-config part: %w", err)
	}
	merged := cloudinit.Merge(own, rendered)
	if base64Form || !utf8.Valid(merged) {
		enc := base64.StdEncoding.EncodeToString(merged)
		return inlineUserData{base64: enc}, len(enc) <= api.MaxInlineUserData, nil
	}
	return inlineUserData{data: string(merged)}, len(merged) <= api.MaxInlineUserData, nil
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

// unmergeCloudInit restores the user's own user-data when Virtstation has
// nothing left to say, and drops the volume it added.
func (m *mutation) unmergeCloudInit(idx int, prev *api.InjectedCloudInit) error {
	setAnnotation(m.vm, api.AnnotationUserData, "")
	if idx < 0 {
		return nil
	}
	spec := &m.vm.Spec.Template.Spec
	src, kind := sourceOf(&spec.Volumes[idx])
	fld := field.NewPath("spec", "template", "spec", "volumes").Index(idx).Child(kind)
	if prev == nil {
		// Nothing of ours to take out: the user-data stays as it is, and
		// only inline user-data is checked.
		m.checkInlineCloudConfig(src, fld)
		return nil
	}
	if prev.AddedVolume && spec.Volumes[idx].Name == prev.Volume {
		spec.Volumes = nilIfEmpty(slices.Delete(spec.Volumes, idx, idx+1))
		spec.Domain.Devices.Disks = nilIfEmpty(slices.DeleteFunc(spec.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == prev.Volume }))
		return nil
	}
	user, ok := m.userSource(src, prev, fld)
	if !ok {
		return nil
	}
	m.checkCloudConfig(user, fld)
	src.clear()
	switch {
	case user.SecretRef != "":
		*src.secretRef = &corev1.LocalObjectReference{Name: user.SecretRef}
	case user.UserDataBase64 != nil:
		*src.base64 = *user.UserDataBase64
	case user.UserData != nil:
		*src.data = *user.UserData
	}
	return nil
}

// nilIfEmpty is l, or nil when it has no items: an empty list is left out
// of the object, as the user would.
func nilIfEmpty[T any](l []T) []T {
	if len(l) == 0 {
		return nil
	}
	return l
}

// userSource finds the user's own user-data behind a cloud-init source,
// without reading any Secret: a secretRef of the user's names the user's
// Secret; a secretRef to Virtstation's Secret stands for the source kept in
// the virtstation.io/user-data annotation (on the object, else on the stored
// object); inline user-data is the user's, minus a previous inline merge.
// ok is false when the admission is denied.
func (m *mutation) userSource(src userDataSource, prev *api.InjectedCloudInit, fld *field.Path) (api.UserCloudInit, bool) {
	if ref := *src.secretRef; ref != nil {
		name := ref.Name
		if m.in.Name == "" || name != UserDataSecretName(m.in.Name) {
			return api.UserCloudInit{SecretRef: name}, true
		}
		if saved, ok, err := m.savedUserData(); err != nil || ok {
			if err != nil {
				m.denied = append(m.denied, field.Invalid(field.NewPath("metadata", "annotations").Key(api.AnnotationUserData), "(omitted)", policy.Explain(
					err.Error(), policy.RuleCloudInit, fmt.Sprintf("remove this annotation and put your own user-data back in %s", fld))))
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
		m.denied = append(m.denied, field.Forbidden(fld.Child("secretRef", "name"), policy.Explain(
			fmt.Sprintf("your user-data Secret is named %s, the name of the Secret Virtstation writes the merged user-data to", name),
			policy.RuleCloudInit, fmt.Sprintf("rename your Secret, for example to %s-cloud-init, and this secretRef with it", m.in.Name))))
		return api.UserCloudInit{}, false
	}
	if s := *src.base64; s != "" {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			m.denied = append(m.denied, field.Invalid(fld.Child("userDataBase64"), "(omitted)", policy.Explain("not valid base64", policy.RuleCloudInit, "encode your user-data with base64")))
			return api.UserCloudInit{}, false
		}
		user, ok := m.split(raw, fld.Child("userDataBase64"))
		if !ok || len(user) == 0 {
			return api.UserCloudInit{}, ok
		}
		enc := base64.StdEncoding.EncodeToString(user)
		return api.UserCloudInit{UserDataBase64: &enc}, true
	}
	user, ok := m.split([]byte(*src.data), fld.Child("userData"))
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
func (m *mutation) checkInlineCloudConfig(src userDataSource, fld *field.Path) {
	if *src.secretRef != nil {
		return
	}
	if s := *src.base64; s != "" {
		if _, err := base64.StdEncoding.DecodeString(s); err == nil {
			m.checkCloudConfig(api.UserCloudInit{UserDataBase64: &s}, fld)
		}
		return
	}
	if s := *src.data; s != "" {
		m.checkCloudConfig(api.UserCloudInit{UserData: &s}, fld)
	}
}

// split recovers the user's own user-data from data that may hold an
// earlier merge. A merge that was edited by hand cannot be split safely: the
// admission is denied rather than the user's data guessed at.
func (m *mutation) split(data []byte, fld *field.Path) ([]byte, bool) {
	user, _, err := cloudinit.Split(data)
	if err != nil {
		m.denied = append(m.denied, field.Invalid(fld, "(omitted)", policy.Explain(
			fmt.Sprintf("this user-data holds Virtstation's merged format but was edited, so your part cannot be recovered byte for byte: %v", err),
			policy.RuleCloudInit, "replace it with your own user-data only; Virtstation merges its part again")))
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

// findCloudInit is the index of the first cloud-init volume, or -1.
func findCloudInit(volumes []kubevirtv1.Volume) int {
	for i, v := range volumes {
		if v.CloudInitNoCloud != nil || v.CloudInitConfigDrive != nil {
			return i
		}
	}
	return -1
}
