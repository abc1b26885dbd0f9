package mutate

import (
	"encoding/base64"
	"fmt"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/cloudinit"
)

// cloudInitVolume is the name of the volume the webhook adds to a VM that
// has none.
const cloudInitVolume = "vs-cloudinit"

// userDataKey is the Secret key KubeVirt reads user-data from.
const userDataKey = "userdata"

// UserDataSecretName is the per-VM Secret holding merged user-data.
func UserDataSecretName(vm string) string { return vm + "-userdata" }

var cloudInitSources = []string{"cloudInitNoCloud", "cloudInitConfigDrive"}

// mergeCloudInit puts Virtstation's cloud-config part (data-disk mounts,
// cloudInit SSH keys) next to the user's own user-data, which is kept byte
// for byte. Only Virtstation's part is re-rendered on later admissions.
func mergeCloudInit(m *mutation) error {
	if m.in.VM.Spec.Template == nil {
		return nil
	}
	part := cloudinit.Part{Owner: m.sshUser, AuthorizedKeys: m.cloudInitKeys}
	for _, d := range m.injected.DataDisks {
		switch {
		case d.MountPath == "" || d.Type != string(api.DiskTypeDisk):
		case d.ReadOnly:
			m.warnings = append(m.warnings, fmt.Sprintf("virtstation: read-only data disk %s is attached but not mounted at %s: a read-only disk cannot be formatted on first use; mount it in the guest yourself", d.Name, d.MountPath))
		default:
			part.Mounts = append(part.Mounts, cloudinit.Mount{Serial: d.Serial, Path: d.MountPath})
		}
	}
	prev := m.prev.CloudInit
	if prev == nil {
		prev = m.oldInjected().CloudInit
	}
	volumes := getList(m.obj, pathVolumes)
	idx, kind := findCloudInit(volumes)

	if part.IsZero() {
		return m.unmergeCloudInit(volumes, idx, kind, prev)
	}
	rendered, err := part.Render()
	if err != nil {
		return fmt.Errorf("render cloud-config part: %w", err)
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
	user, userSecret, base64Form, ok, err := m.userData(src, prev, fld)
	if err != nil || !ok {
		return err
	}
	m.checkCloudConfig(user, src, fld, userSecret)
	merged := cloudinit.Merge(user, rendered)
	if len(merged) > api.MaxUserDataBytes {
		m.deny(field.ErrorList{field.TooLong(field.NewPath("spec", "template", "spec", "volumes").Index(idx).Child(kind), "", api.MaxUserDataBytes)}, api.RuleCloudInit,
			fmt.Sprintf("your user-data merged with Virtstation's part is %d bytes and is stored in one Secret, which holds at most %d: shrink your user-data", len(merged), api.MaxUserDataBytes))
		return nil
	}
	inline := string(merged)
	if base64Form || !utf8.Valid(merged) {
		inline = base64.StdEncoding.EncodeToString(merged)
	}
	delete(src, "userData")
	delete(src, "userDataBase64")
	delete(src, "secretRef")
	switch {
	case userSecret == "" && len(inline) <= api.MaxInlineUserData && (base64Form || !utf8.Valid(merged)):
		src["userDataBase64"] = inline
	case userSecret == "" && len(inline) <= api.MaxInlineUserData:
		src["userData"] = inline
	case m.in.Name == "":
		m.denied = append(m.denied, field.Forbidden(field.NewPath("spec", "template", "spec", "volumes").Index(idx),
			"the merged cloud-init user-data needs a per-VM Secret, which is named after the VM, and a VM created with generateName has no name yet (rule: cloud-init; fix: give the VM a name)"))
		return nil
	case userSecret == UserDataSecretName(m.in.Name):
		m.denied = append(m.denied, field.Forbidden(fld.Child("secretRef", "name"), fmt.Sprintf(
			"your user-data Secret is named %s, the name of the Secret Virtstation writes the merged user-data to (rule: cloud-init; fix: rename your Secret, for example to %s-cloud-init, and this secretRef with it)",
			userSecret, m.in.Name)))
		return nil
	default:
		rec.Secret, rec.UserSecret = UserDataSecretName(m.in.Name), userSecret
		rec.UserDataBase64 = userSecret == "" && base64Form
		src["secretRef"] = map[string]any{"name": rec.Secret}
		m.secrets = append(m.secrets, SecretWrite{Secret: userDataSecret(m.in.Namespace, rec.Secret, merged)})
	}
	if err := setList(m.obj, volumes, pathVolumes); err != nil {
		return fmt.Errorf("write cloud-init volume: %w", err)
	}
	m.injected.CloudInit = rec
	return nil
}

// unmergeCloudInit restores the user's own user-data when Virtstation has
// nothing left to say, and drops the volume it added.
func (m *mutation) unmergeCloudInit(volumes []any, idx int, kind string, prev *api.InjectedCloudInit) error {
	if idx < 0 {
		return nil
	}
	fld := field.NewPath("spec", "template", "spec", "volumes").Index(idx).Child(kind)
	if prev == nil {
		// Nothing of ours to take out: the user-data stays as it is, and
		// only inline user-data is checked (no Secret read for a warning).
		src, _ := volumes[idx].(map[string]any)[kind].(map[string]any)
		m.checkInlineCloudConfig(src, fld)
		return nil
	}
	vol, ok := volumes[idx].(map[string]any)
	if !ok { // findCloudInit finds only objects
		return fmt.Errorf("cloud-init volume %d is not an object", idx)
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
	src, _ := vol[kind].(map[string]any)
	user, userSecret, base64Form, ok, err := m.userData(src, prev, fld)
	if err != nil || !ok {
		return err
	}
	m.checkCloudConfig(user, src, fld, userSecret)
	delete(src, "userData")
	delete(src, "userDataBase64")
	delete(src, "secretRef")
	switch {
	case userSecret != "":
		src["secretRef"] = map[string]any{"name": userSecret}
	case len(user) == 0:
	case base64Form || !utf8.Valid(user):
		src["userDataBase64"] = base64.StdEncoding.EncodeToString(user)
	default:
		src["userData"] = string(user)
	}
	return setList(m.obj, volumes, pathVolumes)
}

// userData finds the user's own user-data behind a cloud-init source: inline
// (minus a previous merge), in the user's Secret, or, when the source points
// at Virtstation's Secret, recovered from it. userSecret is the user's own
// Secret's name when the data lives there. ok is false when the admission is
// denied.
func (m *mutation) userData(src map[string]any, prev *api.InjectedCloudInit, fld *field.Path) (user []byte, userSecret string, base64Form, ok bool, err error) {
	if ref, _ := src["secretRef"].(map[string]any); ref != nil {
		name := str(ref["name"])
		ours := m.in.Name != "" && name == UserDataSecretName(m.in.Name)
		if ours && prev != nil && prev.UserSecret != "" {
			name, ours = prev.UserSecret, false
		}
		data, found, managed, err := m.secretUserData(name)
		if ours && found && !managed {
			// The user's own Secret, of the name Virtstation writes to.
			ours = false
		}
		if err != nil {
			return nil, "", false, false, err
		}
		if !found {
			m.denied = append(m.denied, field.NotFound(fld.Child("secretRef", "name"), name))
			m.denied[len(m.denied)-1].Detail = fmt.Sprintf("the cloud-init user-data Secret %q does not exist in namespace %s, so Virtstation cannot merge its part without losing your user-data (rule: cloud-init; fix: create the Secret, or put your user-data inline)", name, m.in.Namespace)
			return nil, "", false, false, nil
		}
		user, ok := m.split(data, fld.Child("secretRef"))
		if ours {
			// Inline user-data the webhook moved here keeps the field it
			// was given in.
			return user, "", prev != nil && prev.UserDataBase64, ok, nil
		}
		return user, name, false, ok, nil
	}
	if s := str(src["userDataBase64"]); s != "" {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			m.denied = append(m.denied, field.Invalid(fld.Child("userDataBase64"), "(omitted)", "not valid base64 (rule: cloud-init; fix: encode your user-data with base64)"))
			return nil, "", false, false, nil
		}
		user, ok := m.split(raw, fld.Child("userDataBase64"))
		return user, "", true, ok, nil
	}
	user, ok = m.split([]byte(str(src["userData"])), fld.Child("userData"))
	return user, "", false, ok, nil
}

// checkCloudConfig warns when the user's own user-data, read from the
// cloud-init source src at fld, is a #cloud-config that cloud-init will
// ignore (cloudinit.CheckCloudConfig). The admission does not refuse it,
// as KubeVirt does not, but nothing else would tell the user before the VM
// boots without it. userSecret names the user's Secret when the data came
// from one. Call it before src is rewritten.
func (m *mutation) checkCloudConfig(user []byte, src map[string]any, fld *field.Path, userSecret string) {
	err := cloudinit.CheckCloudConfig(user)
	if err == nil {
		return
	}
	var where string
	switch ref, _ := src["secretRef"].(map[string]any); {
	case userSecret != "":
		where = fmt.Sprintf("%s (Secret %s)", fld.Child("secretRef", "name"), userSecret)
	case ref != nil:
		where = fmt.Sprintf("%s (your user-data, kept in Secret %s)", fld, str(ref["name"]))
	case str(src["userDataBase64"]) != "":
		where = fld.Child("userDataBase64").String()
	default:
		where = fld.Child("userData").String()
	}
	m.warnings = append(m.warnings, fmt.Sprintf(
		"virtstation: %s: your #cloud-config is not valid cloud-config YAML: %v; the VM's cloud-init will likely ignore all of it (Virtstation's own part still applies); fix it and apply again", where, err))
}

// checkInlineCloudConfig runs checkCloudConfig on inline user-data
// (userData, or userDataBase64 that decodes); a Secret is not read for it.
func (m *mutation) checkInlineCloudConfig(src map[string]any, fld *field.Path) {
	user := []byte(str(src["userData"]))
	if s := str(src["userDataBase64"]); s != "" {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return
		}
		user = raw
	}
	if _, ok := src["secretRef"]; !ok && len(user) > 0 {
		m.checkCloudConfig(user, src, fld, "")
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

// secretUserData reads the user-data key of a Secret; managed says the
// Secret is labelled as Virtstation's.
func (m *mutation) secretUserData(name string) (data []byte, found, managed bool, err error) {
	s, err := m.cluster.Secret(m.ctx, m.in.Namespace, name)
	if err != nil {
		return nil, false, false, fmt.Errorf("read user-data secret %s: %w", name, err)
	}
	if s == nil {
		return nil, false, false, nil
	}
	managed = s.Labels[api.LabelManagedBy] == api.ManagedByValue
	for _, k := range []string{"userdata", "userData"} {
		if v, ok := s.Data[k]; ok {
			return v, true, managed, nil
		}
	}
	return nil, true, managed, nil
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

func userDataSecret(namespace, name string, data []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name,
			Labels: map[string]string{api.LabelManagedBy: api.ManagedByValue},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{userDataKey: data},
	}
}
