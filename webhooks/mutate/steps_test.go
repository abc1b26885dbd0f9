package mutate

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/cloudinit"
)

// SSH public keys in the namespace's key Secret, in the order SSHKeys
// returns them.
const (
	keyAlice = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDr6mH3eyKSfRLmRHqHx8cZW2xRyUOiS3ZZ9W3N5a1Xy alice@laptop"
	keyBob   = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC3yv9Jm2ZcR7h0dDq bob@desk"

	h200 = "nvidia.com/GH100_H200"
	t4   = "nvidia.com/TU104GL_Tesla_T4"
)

var (
	stepKeys = []string{keyAlice, keyBob}

	annPath           = field.NewPath("metadata", "annotations")
	pathDataDisksAnn  = annPath.Key(api.AnnotationDataDisks)
	pathGPUsAnn       = annPath.Key(api.AnnotationGPUs)
	pathVideoAnn      = annPath.Key(api.AnnotationVideo)
	pathSpecDisks     = field.NewPath("spec", "template", "spec", "domain", "devices", "disks")
	pathSpecVolumes   = field.NewPath("spec", "template", "spec", "volumes")
	serialChars       = regexp.MustCompile(`^[A-Za-z0-9_.+-]{1,20}$`)
	userCloudConfig   = []byte("#cloud-config\r\npackages: [htop]\r\nruncmd:\r\n  - [sh, -c, 'echo \"--virtstation-x\" > /tmp/x']\r\n# no newline at the end")
	userShellScript   = []byte("#!/bin/sh\necho hello from the user\n")
	userSecretName    = "my-userdata"
	vmUserDataSecret  = UserDataSecretName(testName)
	vmSSHKeysSecret   = testName + "-ssh-keys"
	stepContext       = context.Background()
	stepLabelDataDisk = map[string]string{api.LabelDataDisk: api.LabelTrue}
)

// fakeCollectKeys stands in for the real key collection: one key a line of each
// Secret's authorized_keys, blank lines skipped, sorted.
func fakeCollectKeys(secrets []corev1.Secret) []string {
	var keys []string
	for _, s := range secrets {
		for _, line := range strings.Split(string(s.Data["authorized_keys"]), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				keys = append(keys, line)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// testKeySecret is the namespace's Secret of SSH public keys.
func testKeySecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "team-keys", Labels: map[string]string{api.LabelSSHPublicKey: api.LabelTrue}},
		Data:       map[string][]byte{"authorized_keys": []byte(keyBob + "\n\n" + keyAlice + "\n")},
	}
}

// testUserSecret is the user's own cloud-init user-data Secret.
func testUserSecret(data []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: userSecretName},
		Data:       map[string][]byte{"userdata": data},
	}
}

// managedSecret is a Secret the webhook asks the handler to write.
func managedSecret(name, key string, data []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, Labels: map[string]string{api.LabelManagedBy: api.ManagedByValue}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{key: data},
	}
}

// userDataWrite is the merged user-data Secret of the VM under test.
func userDataWrite(data []byte) SecretWrite {
	return SecretWrite{Secret: managedSecret(vmUserDataSecret, "userdata", data)}
}

// sshKeysWrite is the keys Secret of the VM under test, created only when
// missing.
func sshKeysWrite(data string) SecretWrite {
	return SecretWrite{Secret: managedSecret(vmSSHKeysSecret, "authorized_keys", []byte(data)), CreateOnly: true}
}

// stepAnn is an annotation map from key, value pairs, with MAC pinning off
// so that only the steps under test change the object.
func stepAnn(kv ...string) map[string]string {
	return ann(append([]string{api.AnnotationMAC, "off"}, kv...)...)
}

// withRecord adds the virtstation.io/injected record rec to a.
func withRecord(a map[string]string, rec api.Injected) map[string]string {
	b, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	out := map[string]string{api.AnnotationInjected: string(b)}
	for k, v := range a {
		out[k] = v
	}
	return out
}

// stopped is vm (from vmJSON) with runStrategy Halted.
func stopped(vm string) string {
	return strings.Replace(vm, `"runStrategy":"Always"`, `"runStrategy":"Halted"`, 1)
}

// specParts builds spec.template.spec: a root disk and volume, then disks
// and volumes, with more fields in domain.devices, domain and the spec.
type specParts struct {
	disks, volumes []any
	devices        map[string]any
	domain         map[string]any
	spec           map[string]any
}

func (p specParts) String() string {
	devices := map[string]any{"disks": append([]any{jsonObj("name", "rootdisk", "disk", jsonObj("bus", "virtio"))}, p.disks...)}
	for k, v := range p.devices {
		devices[k] = v
	}
	domain := map[string]any{"devices": devices}
	for k, v := range p.domain {
		domain[k] = v
	}
	spec := map[string]any{
		"domain":  domain,
		"volumes": append([]any{jsonObj("name", "rootdisk", "containerDisk", jsonObj("image", "quay.io/containerdisks/fedora:41"))}, p.volumes...),
	}
	for k, v := range p.spec {
		spec[k] = v
	}
	b, err := json.Marshal(spec)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// jsonObj builds a JSON object from key, value pairs.
func jsonObj(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// jsonList builds a JSON list.
func jsonList(items ...any) []any { return items }

// virtioDisk is a disk entry on the virtio bus, with serial when not "".
func virtioDisk(name, serial string) map[string]any {
	d := jsonObj("name", name, "disk", jsonObj("bus", "virtio"))
	if serial != "" {
		d["serial"] = serial
	}
	return d
}

// cloudInitDisk is the disk the webhook adds with its cloud-init volume.
func cloudInitDisk() map[string]any { return virtioDisk(cloudInitVolume, "") }

// noCloud is a cloudInitNoCloud volume.
func noCloud(name string, src map[string]any) map[string]any {
	return jsonObj("name", name, "cloudInitNoCloud", src)
}

// gpuEntry is a gpus[] entry.
func gpuEntry(name, device string) map[string]any { return jsonObj("name", name, "deviceName", device) }

// keyCredential is an accessCredentials entry giving secret's keys to users
// through the guest agent.
func keyCredential(secret string, users ...any) map[string]any {
	return jsonObj("sshPublicKey", jsonObj(
		"source", jsonObj("secret", jsonObj("secretName", secret)),
		"propagationMethod", jsonObj("qemuGuestAgent", jsonObj("users", users)),
	))
}

// renderPart is Virtstation's cloud-config part as the guest receives it.
func renderPart(p cloudinit.Part) []byte {
	b, err := p.Render()
	if err != nil {
		panic(err)
	}
	return b
}

// listAt is the list at path in a mutated object.
func listAt(t *testing.T, o map[string]any, path ...string) []any {
	t.Helper()
	l, _, err := unstructured.NestedSlice(o, path...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(path, "."), err)
	}
	return l
}

// cloudInitSource is the cloudInitNoCloud source of the named volume.
func cloudInitSource(t *testing.T, o map[string]any, volume string) map[string]any {
	t.Helper()
	for _, v := range listAt(t, o, "spec", "template", "spec", "volumes") {
		if m := v.(map[string]any); m["name"] == volume {
			src, _ := m["cloudInitNoCloud"].(map[string]any)
			return src
		}
	}
	t.Fatalf("no volume %q in\n%s", volume, toJSON(o))
	return nil
}

// assertUserData checks that merged user-data gives back the user's bytes
// exactly and carries Virtstation's part.
func assertUserData(t *testing.T, merged, user, part []byte) {
	t.Helper()
	got, ours, err := cloudinit.Split(merged)
	if err != nil || !ours {
		t.Fatalf("Split(merged) = ours %v, err %v; want Virtstation's merged user-data", ours, err)
	}
	if !bytes.Equal(got, user) {
		t.Errorf("user's data after the merge = %q, want %q", got, user)
	}
	if !bytes.Contains(merged, part) {
		t.Errorf("merged user-data does not carry the part:\n%s", merged)
	}
}

type stepCase struct {
	// op defaults to CREATE.
	op admissionv1.Operation
	vm string
	// oldVM is the stored object on UPDATE.
	oldVM string
	// objects puts DataVolumes, PVCs, VMIs and Secrets in the cluster.
	objects func(c *StaticCluster)

	// want is the mutated object; "" when only check asserts on it or the
	// case is denied.
	want        string
	wantSecrets []SecretWrite
	// wantWarnings are substrings, one per warning, in order.
	wantWarnings []string
	wantDenied   field.ErrorList
	// wantDetail is a substring of every denial's message.
	wantDetail string
	// check asserts what want cannot spell out.
	check func(t *testing.T, res Result)
}

// cluster is the case's cluster, with keys collected by fakeCollectKeys.
func (tc stepCase) cluster() *StaticCluster {
	c := NewStaticCluster(nil)
	c.CollectKeys = fakeCollectKeys
	if tc.objects != nil {
		tc.objects(c)
	}
	return c
}

func stepCases() map[string]stepCase {
	base := specParts{}.String()
	addHome := func(c *StaticCluster) { c.AddDataDisk(api.KindDataVolume, testNamespace, "home", stepLabelDataDisk) }
	addKeys := func(c *StaticCluster) { c.AddSecret(testKeySecret()) }
	all := func(fs ...func(*StaticCluster)) func(*StaticCluster) {
		return func(c *StaticCluster) {
			for _, f := range fs {
				f(c)
			}
		}
	}

	// A DataVolume mounted at /home: the part is too large to inline.
	homePart := renderPart(cloudinit.Part{Mounts: []cloudinit.Mount{{Serial: "home", Path: "/home"}}})
	homeDisk := api.InjectedDisk{Name: "home", Kind: api.KindDataVolume, Disk: "vs-home", Serial: "home", Type: "disk", Bus: "virtio", MountPath: "/home"}
	homeRecord := api.Injected{
		DataDisks: []api.InjectedDisk{homeDisk},
		CloudInit: &api.InjectedCloudInit{Volume: cloudInitVolume, AddedVolume: true, Secret: vmUserDataSecret},
	}
	homeIn := vmJSON(stepAnn(api.AnnotationDataDisks, "home:/home"), base)
	homeSpec := specParts{
		disks:   jsonList(virtioDisk("vs-home", "home"), cloudInitDisk()),
		volumes: jsonList(jsonObj("name", "vs-home", "dataVolume", jsonObj("name", "home")), noCloud(cloudInitVolume, jsonObj("secretRef", jsonObj("name", vmUserDataSecret)))),
	}.String()
	homeOut := vmJSON(withRecord(stepAnn(api.AnnotationDataDisks, "home:/home"), homeRecord), homeSpec)

	srvPart := renderPart(cloudinit.Part{Mounts: []cloudinit.Mount{{Serial: "home", Path: "/srv/home"}}})

	// SSH keys through cloud-init: a part small enough to inline.
	sshCloudInit := []string{api.AnnotationSSHUser, "alice", api.AnnotationSSHPropagation, api.PropagationCloudInit}
	keysPart := renderPart(cloudinit.Part{Owner: "alice", AuthorizedKeys: stepKeys})
	keysRecord := &api.InjectedSSHKeys{User: "alice", Propagation: api.PropagationCloudInit, Keys: 2}

	// The user's own inline user-data, merged with the keys.
	userInlineSpec := specParts{
		disks:   jsonList(virtioDisk("cloudinitdisk", "")),
		volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userData", string(userCloudConfig)))),
	}.String()
	userInlineMerged := cloudinit.Merge(userCloudConfig, keysPart)
	userInlineRecord := api.Injected{SSHKeys: keysRecord, CloudInit: &api.InjectedCloudInit{Volume: "cloudinitdisk"}}
	userInlineOut := vmJSON(withRecord(stepAnn(sshCloudInit...), userInlineRecord), specParts{
		disks:   jsonList(virtioDisk("cloudinitdisk", "")),
		volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userData", string(userInlineMerged)))),
	}.String())

	// The user's inline user-data and a mount: merged into a Secret.
	homeAndUserMerged := cloudinit.Merge(userCloudConfig, homePart)
	homeAndUserRecord := api.Injected{DataDisks: []api.InjectedDisk{homeDisk}, CloudInit: &api.InjectedCloudInit{Volume: "cloudinitdisk", Secret: vmUserDataSecret}}
	srvDisk := homeDisk
	srvDisk.MountPath = "/srv/home"
	homeAndSrvRecord := homeAndUserRecord
	homeAndSrvRecord.DataDisks = []api.InjectedDisk{srvDisk}
	homeAndUserSpec := specParts{
		disks:   jsonList(virtioDisk("cloudinitdisk", ""), virtioDisk("vs-home", "home")),
		volumes: jsonList(noCloud("cloudinitdisk", jsonObj("secretRef", jsonObj("name", vmUserDataSecret))), jsonObj("name", "vs-home", "dataVolume", jsonObj("name", "home"))),
	}.String()

	// The user's user-data in their own Secret.
	userSecretSpec := specParts{
		disks:   jsonList(virtioDisk("cloudinitdisk", "")),
		volumes: jsonList(noCloud("cloudinitdisk", jsonObj("secretRef", jsonObj("name", userSecretName)))),
	}.String()
	userSecretRecord := api.Injected{SSHKeys: keysRecord, CloudInit: &api.InjectedCloudInit{Volume: "cloudinitdisk", Secret: vmUserDataSecret, UserSecret: userSecretName}}
	userSecretOutSpec := specParts{
		disks:   jsonList(virtioDisk("cloudinitdisk", "")),
		volumes: jsonList(noCloud("cloudinitdisk", jsonObj("secretRef", jsonObj("name", vmUserDataSecret)))),
	}.String()

	// SSH keys through the guest agent.
	agentRecord := api.Injected{SSHKeys: &api.InjectedSSHKeys{User: "alice", Propagation: api.PropagationQemuGuestAgent, Secret: vmSSHKeysSecret}}
	agentSpec := specParts{spec: jsonObj("accessCredentials", jsonList(keyCredential(vmSSHKeysSecret, "alice")))}.String()
	opsCredential := func() map[string]any { return keyCredential("ops-keys", "root") }

	gpuRecord := func(added ...api.InjectedGPU) api.Injected {
		return api.Injected{GPUs: &api.InjectedGPUs{Added: added}}
	}
	tablet := func() []any { return jsonList(jsonObj("name", "tablet", "type", "tablet", "bus", "usb")) }

	return map[string]stepCase{
		// Data disks.
		"data disk: DataVolume mounted through a cloud-init volume the webhook adds": {
			vm:          homeIn,
			objects:     addHome,
			want:        homeOut,
			wantSecrets: []SecretWrite{userDataWrite(homePart)},
		},
		"data disk: PVC attached without a mount": {
			vm: vmJSON(stepAnn(api.AnnotationDataDisks, "scratch"), base),
			objects: func(c *StaticCluster) {
				c.AddDataDisk(api.KindPVC, testNamespace, "scratch", stepLabelDataDisk)
			},
			want: vmJSON(withRecord(stepAnn(api.AnnotationDataDisks, "scratch"), api.Injected{DataDisks: []api.InjectedDisk{
				{Name: "scratch", Kind: api.KindPVC, Disk: "vs-scratch", Serial: "scratch", Type: "disk", Bus: "virtio"},
			}}), specParts{
				disks:   jsonList(virtioDisk("vs-scratch", "scratch")),
				volumes: jsonList(jsonObj("name", "vs-scratch", "persistentVolumeClaim", jsonObj("claimName", "scratch"))),
			}.String()),
		},
		"data disk: cdrom attached read-only on sata and not mounted": {
			vm: vmJSON(stepAnn(api.AnnotationDataDisks, `[{"name":"home","mountPath":"/home"},{"name":"install-iso","type":"cdrom"}]`), base),
			objects: all(addHome, func(c *StaticCluster) {
				c.AddDataDisk(api.KindPVC, testNamespace, "install-iso", stepLabelDataDisk)
			}),
			want: vmJSON(withRecord(stepAnn(api.AnnotationDataDisks, `[{"name":"home","mountPath":"/home"},{"name":"install-iso","type":"cdrom"}]`), api.Injected{
				DataDisks: []api.InjectedDisk{homeDisk, {Name: "install-iso", Kind: api.KindPVC, Disk: "vs-install-iso", Serial: "install-iso", Type: "cdrom", Bus: "sata", ReadOnly: true}},
				CloudInit: &api.InjectedCloudInit{Volume: cloudInitVolume, AddedVolume: true, Secret: vmUserDataSecret},
			}), specParts{
				disks: jsonList(virtioDisk("vs-home", "home"), jsonObj("name", "vs-install-iso", "cdrom", jsonObj("bus", "sata", "readonly", true)), cloudInitDisk()),
				volumes: jsonList(
					jsonObj("name", "vs-home", "dataVolume", jsonObj("name", "home")),
					jsonObj("name", "vs-install-iso", "persistentVolumeClaim", jsonObj("claimName", "install-iso", "readOnly", true)),
					noCloud(cloudInitVolume, jsonObj("secretRef", jsonObj("name", vmUserDataSecret))),
				),
			}.String()),
			// Only /home is in the part.
			wantSecrets: []SecretWrite{userDataWrite(homePart)},
		},
		"data disk: read-only disk with a mount path is attached, not mounted": {
			vm: vmJSON(stepAnn(api.AnnotationDataDisks, `[{"name":"reference","mountPath":"/ref","readOnly":true}]`), base),
			objects: func(c *StaticCluster) {
				c.AddDataDisk(api.KindPVC, testNamespace, "reference", stepLabelDataDisk)
			},
			want: vmJSON(withRecord(stepAnn(api.AnnotationDataDisks, `[{"name":"reference","mountPath":"/ref","readOnly":true}]`), api.Injected{DataDisks: []api.InjectedDisk{
				{Name: "reference", Kind: api.KindPVC, Disk: "vs-reference", Serial: "reference", Type: "disk", Bus: "virtio", ReadOnly: true, MountPath: "/ref"},
			}}), specParts{
				disks:   jsonList(jsonObj("name", "vs-reference", "disk", jsonObj("bus", "virtio", "readonly", true), "serial", "reference")),
				volumes: jsonList(jsonObj("name", "vs-reference", "persistentVolumeClaim", jsonObj("claimName", "reference", "readOnly", true))),
			}.String()),
			wantWarnings: []string{"read-only data disk reference is attached but not mounted at /ref"},
		},
		"data disk: long names get distinct 20-character serials": {
			vm: vmJSON(stepAnn(api.AnnotationDataDisks, "home-directory-of-alice-2024:/home,home-directory-of-alice-2025:/backup"), base),
			objects: func(c *StaticCluster) {
				c.AddDataDisk(api.KindDataVolume, testNamespace, "home-directory-of-alice-2024", stepLabelDataDisk)
				c.AddDataDisk(api.KindPVC, testNamespace, "home-directory-of-alice-2025", stepLabelDataDisk)
			},
			check: func(t *testing.T, res Result) {
				serials := map[string]string{} // volume source name → serial
				disks := map[string]map[string]any{}
				for _, d := range listAt(t, res.Object, "spec", "template", "spec", "domain", "devices", "disks") {
					disks[d.(map[string]any)["name"].(string)] = d.(map[string]any)
				}
				for _, v := range listAt(t, res.Object, "spec", "template", "spec", "volumes") {
					vol := v.(map[string]any)
					name := vol["name"].(string)
					src := ""
					if dv, ok := vol["dataVolume"].(map[string]any); ok {
						src = dv["name"].(string)
					} else if pvc, ok := vol["persistentVolumeClaim"].(map[string]any); ok {
						src = pvc["claimName"].(string)
					} else {
						continue
					}
					if !strings.HasPrefix(name, "vs-") || len(validation.IsDNS1123Label(name)) > 0 {
						t.Errorf("volume %q of %s: want a DNS label with the vs- prefix", name, src)
					}
					serial, _ := disks[name]["serial"].(string)
					if len(serial) != 20 || !serialChars.MatchString(serial) {
						t.Errorf("serial of %s = %q, want 20 characters of [A-Za-z0-9_.+-]", src, serial)
					}
					serials[src] = serial
				}
				if len(serials) != 2 || serials["home-directory-of-alice-2024"] == serials["home-directory-of-alice-2025"] {
					t.Errorf("serials = %v, want two distinct ones", serials)
				}
				if len(res.Secrets) != 1 {
					t.Fatalf("Secrets = %s, want the merged user-data", toJSON(res.Secrets))
				}
				want := renderPart(cloudinit.Part{Mounts: []cloudinit.Mount{
					{Serial: serials["home-directory-of-alice-2024"], Path: "/home"},
					{Serial: serials["home-directory-of-alice-2025"], Path: "/backup"},
				}})
				if got := res.Secrets[0].Secret.Data["userdata"]; !bytes.Equal(got, want) {
					t.Errorf("user-data mounts the disks by other serials:\n%s", got)
				}
			},
		},
		"data disk: missing or unlabelled": {
			vm: vmJSON(stepAnn(api.AnnotationDataDisks, "home:/home,nowhere:/x,unlabelled:/y"), base),
			objects: all(addHome, func(c *StaticCluster) {
				c.AddDataDisk(api.KindPVC, testNamespace, "unlabelled", map[string]string{"team": "a"})
				c.AddDataDisk(api.KindDataVolume, "elsewhere", "nowhere", stepLabelDataDisk)
			}),
			wantDenied: field.ErrorList{
				field.NotFound(pathDataDisksAnn.Index(1).Child("name"), "nowhere"),
				field.NotFound(pathDataDisksAnn.Index(2).Child("name"), "unlabelled"),
			},
			wantDetail: "rule: data-disks",
		},
		"data disk: two names that map to one disk name": {
			vm: vmJSON(stepAnn(api.AnnotationDataDisks, "a.b:/x,a-b:/y"), base),
			objects: func(c *StaticCluster) {
				c.AddDataDisk(api.KindPVC, testNamespace, "a.b", stepLabelDataDisk)
				c.AddDataDisk(api.KindPVC, testNamespace, "a-b", stepLabelDataDisk)
			},
			wantDenied: field.ErrorList{field.Invalid(pathDataDisksAnn.Index(1).Child("name"), "a-b", "")},
			wantDetail: "rule: data-disks",
		},
		"data disk: invalid annotation": {
			vm:         vmJSON(stepAnn(api.AnnotationDataDisks, "Home:/home"), base),
			objects:    addHome,
			wantDenied: field.ErrorList{field.Invalid(pathDataDisksAnn.Index(0).Child("name"), "Home", "")},
			wantDetail: "rule: data-disks",
		},
		"data disk: the user already has a disk named vs-home": {
			vm: vmJSON(stepAnn(api.AnnotationDataDisks, "home:/home"), specParts{
				disks:   jsonList(virtioDisk("vs-home", "")),
				volumes: jsonList(jsonObj("name", "vs-home", "containerDisk", jsonObj("image", "quay.io/me/tools"))),
			}.String()),
			objects:    addHome,
			wantDenied: field.ErrorList{field.Invalid(pathDataDisksAnn, "home", "")},
			wantDetail: "rule: data-disks",
		},
		"data disk: a user disk has the same serial": {
			vm: vmJSON(stepAnn(api.AnnotationDataDisks, "home:/home"), specParts{
				disks:   jsonList(virtioDisk("mine", "home")),
				volumes: jsonList(jsonObj("name", "mine", "containerDisk", jsonObj("image", "quay.io/me/tools"))),
			}.String()),
			objects:    addHome,
			wantDenied: field.ErrorList{field.Duplicate(pathSpecDisks.Key("mine").Child("serial"), "home")},
		},
		"data disk: attaching while the VMI exists": {
			op:         admissionv1.Update,
			vm:         stopped(homeIn),
			oldVM:      stopped(vmJSON(stepAnn(), base)),
			objects:    all(addHome, func(c *StaticCluster) { c.AddVMI(testNamespace, testName) }),
			wantDenied: field.ErrorList{field.Forbidden(pathDataDisksAnn, "")},
			wantDetail: "only while the VM is stopped",
		},
		"data disk: attaching to a VM set to run": {
			op:         admissionv1.Update,
			vm:         homeIn,
			oldVM:      vmJSON(stepAnn(), base),
			objects:    addHome,
			wantDenied: field.ErrorList{field.Forbidden(pathDataDisksAnn, "")},
			wantDetail: "only while the VM is stopped",
		},
		"data disk: attaching to a halted VM without a VMI": {
			op:          admissionv1.Update,
			vm:          stopped(homeIn),
			oldVM:       stopped(vmJSON(stepAnn(), base)),
			objects:     addHome,
			want:        stopped(homeOut),
			wantSecrets: []SecretWrite{userDataWrite(homePart)},
		},
		"data disk: a new mount path while running keeps the attachment": {
			op:    admissionv1.Update,
			vm:    vmJSON(withRecord(stepAnn(api.AnnotationDataDisks, "home:/srv/home"), homeAndUserRecord), homeAndUserSpec),
			oldVM: vmJSON(withRecord(stepAnn(api.AnnotationDataDisks, "home:/home"), homeAndUserRecord), homeAndUserSpec),
			objects: all(addHome, func(c *StaticCluster) {
				c.AddVMI(testNamespace, testName)
				c.AddSecret(userDataWrite(homeAndUserMerged).Secret)
			}),
			want:        vmJSON(withRecord(stepAnn(api.AnnotationDataDisks, "home:/srv/home"), homeAndSrvRecord), homeAndUserSpec),
			wantSecrets: []SecretWrite{userDataWrite(cloudinit.Merge(userCloudConfig, srvPart))},
		},
		"data disk: removing the annotation on a stopped VM detaches and drops the cloud-init volume": {
			op:      admissionv1.Update,
			vm:      stopped(vmJSON(withRecord(stepAnn(), homeRecord), homeSpec)),
			oldVM:   stopped(homeOut),
			objects: all(addHome, func(c *StaticCluster) { c.AddSecret(userDataWrite(homePart).Secret) }),
			want:    stopped(vmJSON(stepAnn(), base)),
		},
		"data disk: removing the annotation on a running VM": {
			op:         admissionv1.Update,
			vm:         vmJSON(withRecord(stepAnn(), homeRecord), homeSpec),
			oldVM:      homeOut,
			objects:    all(addHome, func(c *StaticCluster) { c.AddVMI(testNamespace, testName) }),
			wantDenied: field.ErrorList{field.Forbidden(pathDataDisksAnn, "")},
			wantDetail: "only while the VM is stopped",
		},

		// Cloud-init.
		"cloud-init: keys inline in a cloud-init volume the webhook adds": {
			vm:      vmJSON(stepAnn(sshCloudInit...), base),
			objects: addKeys,
			want: vmJSON(withRecord(stepAnn(sshCloudInit...), api.Injected{
				SSHKeys:   keysRecord,
				CloudInit: &api.InjectedCloudInit{Volume: cloudInitVolume, AddedVolume: true},
			}), specParts{
				disks:   jsonList(cloudInitDisk()),
				volumes: jsonList(noCloud(cloudInitVolume, jsonObj("userData", string(keysPart)))),
			}.String()),
		},
		"cloud-init: the user's inline userData is kept byte for byte": {
			vm:      vmJSON(stepAnn(sshCloudInit...), userInlineSpec),
			objects: addKeys,
			want:    userInlineOut,
			check: func(t *testing.T, res Result) {
				assertUserData(t, []byte(cloudInitSource(t, res.Object, "cloudinitdisk")["userData"].(string)), userCloudConfig, keysPart)
			},
		},
		"cloud-init: userDataBase64 stays base64": {
			vm: vmJSON(stepAnn(sshCloudInit...), specParts{
				disks:   jsonList(virtioDisk("cloudinitdisk", "")),
				volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userDataBase64", base64.StdEncoding.EncodeToString(userShellScript)))),
			}.String()),
			objects: addKeys,
			want: vmJSON(withRecord(stepAnn(sshCloudInit...), userInlineRecord), specParts{
				disks:   jsonList(virtioDisk("cloudinitdisk", "")),
				volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userDataBase64", base64.StdEncoding.EncodeToString(cloudinit.Merge(userShellScript, keysPart))))),
			}.String()),
			check: func(t *testing.T, res Result) {
				merged, err := base64.StdEncoding.DecodeString(cloudInitSource(t, res.Object, "cloudinitdisk")["userDataBase64"].(string))
				if err != nil {
					t.Fatalf("userDataBase64: %v", err)
				}
				assertUserData(t, merged, userShellScript, keysPart)
			},
		},
		"cloud-init: over 2048 bytes the user's inline userData moves to a Secret": {
			vm: vmJSON(stepAnn(api.AnnotationDataDisks, "home:/home"), specParts{
				disks:   jsonList(virtioDisk("cloudinitdisk", "")),
				volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userData", string(userCloudConfig)))),
			}.String()),
			objects:     addHome,
			want:        vmJSON(withRecord(stepAnn(api.AnnotationDataDisks, "home:/home"), homeAndUserRecord), homeAndUserSpec),
			wantSecrets: []SecretWrite{userDataWrite(homeAndUserMerged)},
			check: func(t *testing.T, res Result) {
				assertUserData(t, res.Secrets[0].Secret.Data["userdata"], userCloudConfig, homePart)
			},
		},
		"cloud-init: user-data in the user's Secret is merged into the VM's Secret": {
			vm:          vmJSON(stepAnn(sshCloudInit...), userSecretSpec),
			objects:     all(addKeys, func(c *StaticCluster) { c.AddSecret(testUserSecret(userCloudConfig)) }),
			want:        vmJSON(withRecord(stepAnn(sshCloudInit...), userSecretRecord), userSecretOutSpec),
			wantSecrets: []SecretWrite{userDataWrite(cloudinit.Merge(userCloudConfig, keysPart))},
			check: func(t *testing.T, res Result) {
				assertUserData(t, res.Secrets[0].Secret.Data["userdata"], userCloudConfig, keysPart)
			},
		},
		"cloud-init: the user's Secret does not exist": {
			vm:         vmJSON(stepAnn(sshCloudInit...), userSecretSpec),
			objects:    addKeys,
			wantDenied: field.ErrorList{field.NotFound(pathSpecVolumes.Index(1).Child("cloudInitNoCloud", "secretRef", "name"), userSecretName)},
			wantDetail: "rule: cloud-init",
		},
		"cloud-init: nothing left to merge restores the user's inline userData": {
			vm:   vmJSON(withRecord(stepAnn(), userInlineRecord), specParts{disks: jsonList(virtioDisk("cloudinitdisk", "")), volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userData", string(userInlineMerged))))}.String()),
			want: vmJSON(stepAnn(), userInlineSpec),
		},
		"cloud-init: nothing left to merge restores the user's Secret": {
			vm:      vmJSON(withRecord(stepAnn(), userSecretRecord), userSecretOutSpec),
			objects: func(c *StaticCluster) { c.AddSecret(testUserSecret(userCloudConfig)) },
			want:    vmJSON(stepAnn(), userSecretSpec),
		},
		"cloud-init: detaching the last mount brings the user's userData back inline": {
			op:    admissionv1.Update,
			vm:    stopped(vmJSON(withRecord(stepAnn(), homeAndUserRecord), homeAndUserSpec)),
			oldVM: stopped(vmJSON(withRecord(stepAnn(api.AnnotationDataDisks, "home:/home"), homeAndUserRecord), homeAndUserSpec)),
			objects: all(addHome, func(c *StaticCluster) {
				c.AddSecret(userDataWrite(homeAndUserMerged).Secret)
			}),
			want: stopped(vmJSON(stepAnn(), specParts{
				disks:   jsonList(virtioDisk("cloudinitdisk", "")),
				volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userData", string(userCloudConfig)))),
			}.String())),
		},

		// GPUs.
		"gpus: the annotation adds gpu0 and gpu1": {
			vm:   vmJSON(stepAnn(api.AnnotationGPUs, h200+"=2"), base),
			want: vmJSON(withRecord(stepAnn(api.AnnotationGPUs, h200+"=2"), gpuRecord(api.InjectedGPU{Name: "gpu0", DeviceName: h200}, api.InjectedGPU{Name: "gpu1", DeviceName: h200})), specParts{devices: jsonObj("gpus", jsonList(gpuEntry("gpu0", h200), gpuEntry("gpu1", h200)))}.String()),
		},
		"gpus: names skip those of existing gpus and host devices": {
			vm: vmJSON(stepAnn(api.AnnotationGPUs, h200+"=1"), specParts{devices: jsonObj(
				"gpus", jsonList(gpuEntry("gpu0", t4)),
				"hostDevices", jsonList(jsonObj("name", "gpu1", "deviceName", "intel.com/qat")),
			)}.String()),
			want: vmJSON(withRecord(stepAnn(api.AnnotationGPUs, h200+"=1"), gpuRecord(api.InjectedGPU{Name: "gpu2", DeviceName: h200})), specParts{devices: jsonObj(
				"gpus", jsonList(gpuEntry("gpu0", t4), gpuEntry("gpu2", h200)),
				"hostDevices", jsonList(jsonObj("name", "gpu1", "deviceName", "intel.com/qat")),
			)}.String()),
		},
		"gpus: */gpu resource keys become entries, the larger of request and limit": {
			vm: vmJSON(stepAnn(), specParts{domain: jsonObj("resources", jsonObj(
				"requests", jsonObj("memory", "8Gi", "nvidia.com/gpu", "1"),
				"limits", jsonObj("nvidia.com/gpu", "2"),
			))}.String()),
			want: vmJSON(withRecord(stepAnn(), api.Injected{GPUs: &api.InjectedGPUs{MovedResources: []string{"nvidia.com/gpu"}}}), specParts{
				domain:  jsonObj("resources", jsonObj("requests", jsonObj("memory", "8Gi"))),
				devices: jsonObj("gpus", jsonList(gpuEntry("gpu0", "nvidia.com/gpu"), gpuEntry("gpu1", "nvidia.com/gpu"))),
			}.String()),
		},
		"gpus: lowering the count removes the webhook's newest entry": {
			vm:   vmJSON(withRecord(stepAnn(api.AnnotationGPUs, h200+"=1"), gpuRecord(api.InjectedGPU{Name: "gpu0", DeviceName: h200}, api.InjectedGPU{Name: "gpu1", DeviceName: h200})), specParts{devices: jsonObj("gpus", jsonList(gpuEntry("gpu0", h200), gpuEntry("gpu1", h200)))}.String()),
			want: vmJSON(withRecord(stepAnn(api.AnnotationGPUs, h200+"=1"), gpuRecord(api.InjectedGPU{Name: "gpu0", DeviceName: h200})), specParts{devices: jsonObj("gpus", jsonList(gpuEntry("gpu0", h200)))}.String()),
		},
		"gpus: lowering the count never removes the user's entries": {
			vm:   vmJSON(withRecord(stepAnn(api.AnnotationGPUs, h200+"=1"), gpuRecord(api.InjectedGPU{Name: "gpu0", DeviceName: h200})), specParts{devices: jsonObj("gpus", jsonList(gpuEntry("gpu0", h200), gpuEntry("mine", h200)))}.String()),
			want: vmJSON(stepAnn(api.AnnotationGPUs, h200+"=1"), specParts{devices: jsonObj("gpus", jsonList(gpuEntry("mine", h200)))}.String()),
		},
		"gpus: removing the annotation removes the webhook's entries only": {
			vm:   vmJSON(withRecord(stepAnn(), gpuRecord(api.InjectedGPU{Name: "gpu0", DeviceName: h200})), specParts{devices: jsonObj("gpus", jsonList(gpuEntry("gpu0", h200), gpuEntry("mine", h200)))}.String()),
			want: vmJSON(stepAnn(), specParts{devices: jsonObj("gpus", jsonList(gpuEntry("mine", h200)))}.String()),
		},
		"gpus: invalid annotation": {
			vm:         vmJSON(stepAnn(api.AnnotationGPUs, h200+"=0"), base),
			wantDenied: field.ErrorList{field.Invalid(pathGPUsAnn.Index(0), h200+"=0", "")},
			wantDetail: "rule: gpus",
		},

		// SSH keys.
		"ssh: qemuGuestAgent sources the VM's keys Secret": {
			vm:          vmJSON(stepAnn(api.AnnotationSSHUser, "alice"), base),
			objects:     addKeys,
			want:        vmJSON(withRecord(stepAnn(api.AnnotationSSHUser, "alice"), agentRecord), agentSpec),
			wantSecrets: []SecretWrite{sshKeysWrite(keyAlice + "\n" + keyBob + "\n")},
		},
		"ssh: qemuGuestAgent without keys still creates the Secret": {
			vm:          vmJSON(stepAnn(api.AnnotationSSHUser, "alice", api.AnnotationSSHPropagation, api.PropagationQemuGuestAgent), base),
			want:        vmJSON(withRecord(stepAnn(api.AnnotationSSHUser, "alice", api.AnnotationSSHPropagation, api.PropagationQemuGuestAgent), agentRecord), agentSpec),
			wantSecrets: []SecretWrite{sshKeysWrite("")},
		},
		// Issue 13, finding 9: cloud-init ignores a #cloud-config that is
		// not YAML; the admission says so, with the line.
		"cloud-init: the user's invalid cloud-config warns with its line": {
			vm: vmJSON(stepAnn(sshCloudInit...), specParts{
				disks:   jsonList(virtioDisk("cloudinitdisk", "")),
				volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userData", "#cloud-config\nruncmd:\n\t- echo hi\n"))),
			}.String()),
			objects:      addKeys,
			wantWarnings: []string{"virtstation: spec.template.spec.volumes[1].cloudInitNoCloud.userData: your #cloud-config is not valid cloud-config YAML: line 3: "},
		},
		"cloud-init: the user's invalid cloud-config warns when Virtstation has no part": {
			vm: vmJSON(stepAnn(), specParts{
				disks:   jsonList(virtioDisk("cloudinitdisk", "")),
				volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userDataBase64", "I2Nsb3VkLWNvbmZpZwotIGEgbGlzdAo="))),
			}.String()),
			wantWarnings: []string{"spec.template.spec.volumes[1].cloudInitNoCloud.userDataBase64: your #cloud-config is not valid cloud-config YAML: the top level is a list"},
		},
		"cloud-init: a valid cloud-config does not warn": {
			vm: vmJSON(stepAnn(sshCloudInit...), specParts{
				disks:   jsonList(virtioDisk("cloudinitdisk", "")),
				volumes: jsonList(noCloud("cloudinitdisk", jsonObj("userData", "#cloud-config\nruncmd:\n  - echo hi\n"))),
			}.String()),
			objects: addKeys,
		},
		"ssh: cloudInit without keys warns": {
			vm:           vmJSON(stepAnn(sshCloudInit...), base),
			want:         vmJSON(withRecord(stepAnn(sshCloudInit...), api.Injected{SSHKeys: &api.InjectedSSHKeys{User: "alice", Propagation: api.PropagationCloudInit}}), base),
			wantWarnings: []string{"no valid SSH keys"},
		},
		"ssh: switching to cloudInit drops the webhook's accessCredentials": {
			vm:      vmJSON(withRecord(stepAnn(sshCloudInit...), agentRecord), specParts{spec: jsonObj("accessCredentials", jsonList(opsCredential(), keyCredential(vmSSHKeysSecret, "alice")))}.String()),
			objects: addKeys,
			want: vmJSON(withRecord(stepAnn(sshCloudInit...), api.Injected{SSHKeys: keysRecord, CloudInit: &api.InjectedCloudInit{Volume: cloudInitVolume, AddedVolume: true}}), specParts{
				disks:   jsonList(cloudInitDisk()),
				volumes: jsonList(noCloud(cloudInitVolume, jsonObj("userData", string(keysPart)))),
				spec:    jsonObj("accessCredentials", jsonList(opsCredential())),
			}.String()),
		},
		"ssh: removing ssh-user keeps the user's own accessCredentials": {
			vm:      vmJSON(withRecord(stepAnn(), agentRecord), specParts{spec: jsonObj("accessCredentials", jsonList(opsCredential(), keyCredential(vmSSHKeysSecret, "alice")))}.String()),
			objects: addKeys,
			want:    vmJSON(stepAnn(), specParts{spec: jsonObj("accessCredentials", jsonList(opsCredential()))}.String()),
		},
		"ssh: removing ssh-user removes accessCredentials the webhook alone wrote": {
			vm:      vmJSON(withRecord(stepAnn(), agentRecord), agentSpec),
			objects: addKeys,
			want:    vmJSON(stepAnn(), base),
		},
		"ssh: invalid user": {
			vm:         vmJSON(stepAnn(api.AnnotationSSHUser, "Alice"), base),
			objects:    addKeys,
			wantDenied: field.ErrorList{field.Invalid(annPath.Key(api.AnnotationSSHUser), "Alice", "")},
			wantDetail: "rule: ssh-keys",
		},
		"ssh: unknown propagation": {
			vm:      vmJSON(stepAnn(api.AnnotationSSHUser, "alice", api.AnnotationSSHPropagation, "scp"), base),
			objects: addKeys,
			wantDenied: field.ErrorList{field.NotSupported(annPath.Key(api.AnnotationSSHPropagation), "scp",
				[]string{api.PropagationQemuGuestAgent, api.PropagationCloudInit})},
			wantDetail: "rule: ssh-keys",
		},

		// Video.
		"video: type set and a tablet added": {
			vm: vmJSON(stepAnn(api.AnnotationVideo, "vga"), base),
			want: vmJSON(withRecord(stepAnn(api.AnnotationVideo, "vga"), api.Injected{Video: &api.InjectedVideo{Type: "vga", AddedTablet: true}}), specParts{devices: jsonObj(
				"video", jsonObj("type", "vga"),
				"inputs", tablet(),
			)}.String()),
		},
		"video: a VM with an input device gets no tablet": {
			vm: vmJSON(stepAnn(api.AnnotationVideo, "virtio"), specParts{devices: jsonObj(
				"video", jsonObj("type", "bochs"),
				"inputs", jsonList(jsonObj("name", "pointer", "type", "tablet", "bus", "virtio")),
			)}.String()),
			want: vmJSON(withRecord(stepAnn(api.AnnotationVideo, "virtio"), api.Injected{Video: &api.InjectedVideo{Type: "virtio"}}), specParts{devices: jsonObj(
				"video", jsonObj("type", "virtio"),
				"inputs", jsonList(jsonObj("name", "pointer", "type", "tablet", "bus", "virtio")),
			)}.String()),
		},
		"video: unknown type": {
			vm:         vmJSON(stepAnn(api.AnnotationVideo, "qxl"), base),
			wantDenied: field.ErrorList{field.NotSupported(pathVideoAnn, "qxl", api.VideoTypes)},
			wantDetail: "rule: video",
		},
		"video: graphics turned off": {
			vm:         vmJSON(stepAnn(api.AnnotationVideo, "vga"), specParts{devices: jsonObj("autoattachGraphicsDevice", false)}.String()),
			wantDenied: field.ErrorList{field.Forbidden(pathVideoAnn, "")},
			wantDetail: "autoattachGraphicsDevice",
		},

		// Everything at once.
		"all steps together": {
			vm: vmJSON(stepAnn(
				api.AnnotationDataDisks, "home:/home",
				api.AnnotationGPUs, h200,
				api.AnnotationSSHUser, "alice",
				api.AnnotationSSHPropagation, api.PropagationCloudInit,
				api.AnnotationVideo, "virtio",
			), userInlineSpec),
			objects: all(addHome, addKeys),
			check: func(t *testing.T, res Result) {
				part := renderPart(cloudinit.Part{Mounts: []cloudinit.Mount{{Serial: "home", Path: "/home"}}, Owner: "alice", AuthorizedKeys: stepKeys})
				if len(res.Secrets) != 1 || res.Secrets[0].Secret.Name != vmUserDataSecret {
					t.Fatalf("Secrets = %s, want %s only", toJSON(res.Secrets), vmUserDataSecret)
				}
				assertUserData(t, res.Secrets[0].Secret.Data["userdata"], userCloudConfig, part)
				if got := listAt(t, res.Object, "spec", "template", "spec", "domain", "devices", "gpus"); !reflect.DeepEqual(got, jsonList(gpuEntry("gpu0", h200))) {
					t.Errorf("gpus = %s", toJSON(got))
				}
				if got := listAt(t, res.Object, "spec", "template", "spec", "domain", "devices", "inputs"); !reflect.DeepEqual(got, tablet()) {
					t.Errorf("inputs = %s", toJSON(got))
				}
				want := api.Injected{
					DataDisks: []api.InjectedDisk{homeDisk},
					GPUs:      &api.InjectedGPUs{Added: []api.InjectedGPU{{Name: "gpu0", DeviceName: h200}}},
					SSHKeys:   keysRecord,
					Video:     &api.InjectedVideo{Type: "virtio", AddedTablet: true},
					CloudInit: &api.InjectedCloudInit{Volume: "cloudinitdisk", Secret: vmUserDataSecret},
				}
				if !reflect.DeepEqual(res.Injected, want) {
					t.Errorf("Injected = %s, want %s", toJSON(res.Injected), toJSON(want))
				}
			},
		},
	}
}

func TestMutateSteps(t *testing.T) {
	for name, tc := range stepCases() {
		t.Run(name, func(t *testing.T) {
			in := mutateInput(t, tc.op, tc.vm, tc.oldVM)
			before := toJSON(in.Object)
			res, err := Mutate(stepContext, in, tc.cluster())
			if err != nil {
				t.Fatalf("Mutate: %v", err)
			}
			if after := toJSON(in.Object); after != before {
				t.Errorf("Mutate changed its input object:\n%s", after)
			}

			if len(tc.wantDenied) > 0 {
				if res.Object != nil || len(res.Secrets) > 0 {
					t.Errorf("denied mutation returned an object or Secrets:\n%s\n%s", toJSON(res.Object), toJSON(res.Secrets))
				}
				if len(res.Denied) != len(tc.wantDenied) {
					t.Fatalf("Denied = %v, want %v", res.Denied, tc.wantDenied)
				}
				for i, want := range tc.wantDenied {
					got := res.Denied[i]
					if got.Type != want.Type || got.Field != want.Field || !reflect.DeepEqual(got.BadValue, want.BadValue) {
						t.Errorf("Denied[%d] = %s %s %#v, want %s %s %#v", i, got.Type, got.Field, got.BadValue, want.Type, want.Field, want.BadValue)
					}
					if !strings.Contains(got.Detail, tc.wantDetail) {
						t.Errorf("Denied[%d] detail %q, want it to contain %q", i, got.Detail, tc.wantDetail)
					}
				}
			} else {
				if len(res.Denied) > 0 {
					t.Fatalf("unexpected denial: %v", res.Denied)
				}
				if tc.want != "" {
					var want map[string]any
					if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
						t.Fatalf("bad want in test table: %v", err)
					}
					if !reflect.DeepEqual(res.Object, want) {
						t.Errorf("object:\n%s\nwant:\n%s", toJSON(res.Object), toJSON(want))
					}
					if !reflect.DeepEqual(res.Secrets, tc.wantSecrets) {
						t.Errorf("Secrets:\n%s\nwant:\n%s", toJSON(res.Secrets), toJSON(tc.wantSecrets))
					}
				}
			}
			if tc.check != nil && len(res.Denied) == 0 {
				tc.check(t, res)
			}

			if len(res.Warnings) != len(tc.wantWarnings) {
				t.Fatalf("warnings %q, want %d matching %q", res.Warnings, len(tc.wantWarnings), tc.wantWarnings)
			}
			for i, w := range tc.wantWarnings {
				if !strings.Contains(res.Warnings[i], w) {
					t.Errorf("warning[%d] = %q, want it to contain %q", i, res.Warnings[i], w)
				}
			}
		})
	}
}

// TestMutateStepsIdempotent mutates every admitted case's result again, as
// the API server does with reinvocationPolicy IfNeeded, once the handler has
// written the Secrets the first admission asked for.
func TestMutateStepsIdempotent(t *testing.T) {
	for name, tc := range stepCases() {
		if len(tc.wantDenied) > 0 {
			continue
		}
		t.Run(name, func(t *testing.T) {
			in := mutateInput(t, tc.op, tc.vm, tc.oldVM)
			cluster := tc.cluster()
			first, err := Mutate(stepContext, in, cluster)
			if err != nil || len(first.Denied) > 0 {
				t.Fatalf("first Mutate: %v %v", err, first.Denied)
			}
			for _, w := range first.Secrets {
				if existing, _ := cluster.Secret(stepContext, w.Secret.Namespace, w.Secret.Name); existing == nil || !w.CreateOnly {
					cluster.AddSecret(w.Secret.DeepCopy())
				}
			}
			second, err := Mutate(stepContext, reinput(t, in, first.Object), cluster)
			if err != nil || len(second.Denied) > 0 {
				t.Fatalf("second Mutate: %v %v", err, second.Denied)
			}
			if !reflect.DeepEqual(second.Object, first.Object) {
				t.Errorf("second mutation:\n%s\nfirst:\n%s", toJSON(second.Object), toJSON(first.Object))
			}
			if toJSON(second.Injected) != toJSON(first.Injected) {
				t.Errorf("second Injected %s, first %s", toJSON(second.Injected), toJSON(first.Injected))
			}
			if !reflect.DeepEqual(second.Secrets, first.Secrets) {
				t.Errorf("second Secrets %s, first %s", toJSON(second.Secrets), toJSON(first.Secrets))
			}
		})
	}
}
