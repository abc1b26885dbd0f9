package mutate

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

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
	keyAlice = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIL+1YQmejgEbok4avfbtVjS02uJ3R8o5Y93hdeGH4vgP alice@laptop"
	keyBob   = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC/kWUcvZoagD20WyHflGtWmjyTDV0v/vGpGz+C7RpfoKdU6M/nq+WmrYP3E9uS5m/IysOBLRU3Dk/xAIV8Cuv1XEH8Df9So0mdVTb2vfOckhT5/JxL+cv3fiAwoP1pugaiOfr42jX2IPbqML7cBYkb6DpWVA7mGFr49/wQLdkoPQ== bob@desk"

	h200 = "nvidia.com/GH100_H200"
	t4   = "nvidia.com/TU104GL_Tesla_T4"
)

var (
	stepKeys = []string{keyBob, keyAlice} // as sshkeys.Collect reads testKeySecret: in its order

	annPath           = field.NewPath("metadata", "annotations")
	pathGPUsAnn       = annPath.Key(api.AnnotationGPUs)
	pathVideoAnn      = annPath.Key(api.AnnotationVideo)
	pathSpecDisks     = field.NewPath("spec", "template", "spec", "domain", "devices", "disks")
	pathSpecVolumes   = field.NewPath("spec", "template", "spec", "volumes")
	serialChars       = regexp.MustCompile(`^[A-Za-z0-9_.+-]{1,20}$`)
	userCloudConfig   = []byte("#cloud-config\r\npackages: [htop]\r\nruncmd:\r\n  - [sh, -c, 'echo \"--virtstation-x\" > /tmp/x']\r\n# no newline at the end")
	userShellScript   = []byte("#!/bin/sh\necho hello from the user\n")
	userSecretName    = "my-userdata"
	vmUserDataSecret  = UserDataSecretName(testName)
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

// stepAnn is an annotation map from key, value pairs, with MAC pinning off
// so that only the steps under test change the object.
func stepAnn(kv ...string) map[string]string {
	return ann(append([]string{api.AnnotationMAC, "off"}, kv...)...)
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

// noCloud is a cloudInitNoCloud volume.
func noCloud(name string, src map[string]any) map[string]any {
	return jsonObj("name", name, "cloudInitNoCloud", src)
}

// gpuEntry is a gpus[] entry.
func gpuEntry(name, device string) map[string]any { return jsonObj("name", name, "deviceName", device) }

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

// stepChecks assert, for some golden cases, what a golden file cannot
// spell out: that the merge gives the user's bytes back, that serials are
// short and distinct. Keyed by the case's file name.
var stepChecks = map[string]func(t *testing.T, res Result, secrets []*corev1.Secret){
	"data-disk-long-names-get-distinct-20-character-serials": func(t *testing.T, res Result, secrets []*corev1.Secret) {
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
		want := renderPart(cloudinit.Part{Mounts: []cloudinit.Mount{
			{Serial: serials["home-directory-of-alice-2024"], Path: "/home"},
			{Serial: serials["home-directory-of-alice-2025"], Path: "/backup"},
		}})
		if got := userDataSecret(t, secrets); !bytes.Equal(got, want) {
			t.Errorf("user-data mounts the disks by other serials:\n%s", got)
		}
	},
	"cloud-init-the-user-s-inline-userdata-is-kept-byte-for-byte": func(t *testing.T, res Result, secrets []*corev1.Secret) {
		// Keys through cloud-init are Secret data: the merge lives in the
		// reconciler's Secret, the user's own part in the annotation.
		saved := savedSource(t, res)
		if saved.UserData == nil || *saved.UserData != string(userCloudConfig) {
			t.Errorf("annotation %s = %s, want the user's userData byte for byte", api.AnnotationUserData, saved)
		}
		assertUserData(t, userDataSecret(t, secrets), userCloudConfig, keysPart())
	},
	"cloud-init-userdatabase64-stays-base64": func(t *testing.T, res Result, secrets []*corev1.Secret) {
		saved := savedSource(t, res)
		if saved.UserDataBase64 == nil || *saved.UserDataBase64 != base64.StdEncoding.EncodeToString(userShellScript) {
			t.Errorf("annotation %s = %s, want the user's userDataBase64", api.AnnotationUserData, saved)
		}
		assertUserData(t, userDataSecret(t, secrets), userShellScript, keysPart())
	},
	"cloud-init-over-2048-bytes-the-user-s-inline-userdata-moves-to-a-secret": func(t *testing.T, res Result, secrets []*corev1.Secret) {
		assertUserData(t, userDataSecret(t, secrets), userCloudConfig, homePart())
	},
	"cloud-init-user-data-in-the-user-s-secret-is-merged-into-the-vm-s-secret": func(t *testing.T, res Result, secrets []*corev1.Secret) {
		assertUserData(t, userDataSecret(t, secrets), userCloudConfig, keysPart())
	},
	"all-steps-together": func(t *testing.T, res Result, secrets []*corev1.Secret) {
		part := renderPart(cloudinit.Part{Mounts: []cloudinit.Mount{{Serial: "home", Path: "/home"}}, Owner: "alice", AuthorizedKeys: stepKeys})
		assertUserData(t, userDataSecret(t, secrets), userCloudConfig, part)
		wantGPUs := jsonList(jsonObj("name", "gpu0", "deviceName", h200))
		if got := listAt(t, res.Object, "spec", "template", "spec", "domain", "devices", "gpus"); !reflect.DeepEqual(got, wantGPUs) {
			t.Errorf("gpus = %s", toJSON(got))
		}
		tablet := jsonList(jsonObj("name", "tablet", "type", "tablet", "bus", "usb"))
		if got := listAt(t, res.Object, "spec", "template", "spec", "domain", "devices", "inputs"); !reflect.DeepEqual(got, tablet) {
			t.Errorf("inputs = %s", toJSON(got))
		}
		want := api.Injected{
			DataDisks: []api.InjectedDisk{{Name: "home", Kind: api.KindDataVolume, Disk: "vs-home", Serial: "home", Type: "disk", Bus: "virtio", MountPath: "/home"}},
			GPUs:      &api.InjectedGPUs{Added: []api.InjectedGPU{{Name: "gpu0", DeviceName: h200}}},
			SSHKeys:   &api.InjectedSSHKeys{User: "alice", Propagation: api.PropagationCloudInit},
			Video:     &api.InjectedVideo{Type: "virtio", AddedTablet: true},
			CloudInit: &api.InjectedCloudInit{Volume: "cloudinitdisk", Secret: vmUserDataSecret},
		}
		if !reflect.DeepEqual(res.Injected, want) {
			t.Errorf("Injected = %s, want %s", toJSON(res.Injected), toJSON(want))
		}
	},
}

// userDataSecret is the data of the one user-data Secret among secrets.
func userDataSecret(t *testing.T, secrets []*corev1.Secret) []byte {
	t.Helper()
	for _, s := range secrets {
		if s.Name == vmUserDataSecret {
			return s.Data["userdata"]
		}
	}
	t.Fatalf("Secrets = %s, want %s", toJSON(secrets), vmUserDataSecret)
	return nil
}

// savedSource is the user's own source the admission kept in
// virtstation.io/user-data.
func savedSource(t *testing.T, res Result) api.UserCloudInit {
	t.Helper()
	md, _ := res.Object["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	v, _ := ann[api.AnnotationUserData].(string)
	u, err := api.ParseUserCloudInit(v)
	if err != nil {
		t.Fatalf("annotation %s: %v", api.AnnotationUserData, err)
	}
	return u
}

// homePart is Virtstation's part for a DataVolume mounted at /home.
func homePart() []byte {
	return renderPart(cloudinit.Part{Mounts: []cloudinit.Mount{{Serial: "home", Path: "/home"}}})
}

// keysPart is Virtstation's part giving alice the namespace's keys.
func keysPart() []byte { return renderPart(cloudinit.Part{Owner: "alice", AuthorizedKeys: stepKeys}) }

// TestMutateSteps runs every golden case of testdata/steps: Mutate's answer
// must equal NAME.out.yaml, leave its input alone, and pass the case's
// stepChecks.
func TestMutateSteps(t *testing.T) {
	goldens := loadStepGoldens(t)
	names := map[string]bool{}
	for _, g := range goldens {
		names[g.name] = true
		t.Run(g.name, func(t *testing.T) {
			in := g.input(t)
			before := toJSON(in.Object)
			res, err := Mutate(stepContext, in, g.cluster(t))
			if err != nil {
				t.Fatalf("Mutate: %v", err)
			}
			if after := toJSON(in.Object); after != before {
				t.Errorf("Mutate changed its input object:\n%s", after)
			}
			if len(res.Denied) > 0 && res.Object != nil {
				t.Errorf("denied mutation returned an object:\n%s", toJSON(res.Object))
			}
			secrets := reconciledSecrets(t, g.cluster(t), in, res.Object)
			compareGolden(t, filepath.Join(stepsDir, g.name+".out.yaml"), renderStepOutput(t, res, secrets))
			if check := stepChecks[g.name]; check != nil && len(res.Denied) == 0 {
				check(t, res, secrets)
			}
		})
	}
	for name := range stepChecks {
		if !names[name] {
			t.Errorf("stepChecks has %q, which is no case in %s", name, stepsDir)
		}
	}
}

// TestMutateStepsIdempotent mutates every admitted case's result again, as
// the API server does with reinvocationPolicy IfNeeded, once the handler has
// written the Secrets the first admission asked for.
func TestMutateStepsIdempotent(t *testing.T) {
	for _, g := range loadStepGoldens(t) {
		t.Run(g.name, func(t *testing.T) {
			in := g.input(t)
			cluster := g.cluster(t)
			first, err := Mutate(stepContext, in, cluster)
			if err != nil {
				t.Fatalf("first Mutate: %v", err)
			}
			if len(first.Denied) > 0 {
				t.Skip("denied")
			}
			storeSecrets(t, cluster, in, first)
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
			if a, b := reconciledSecrets(t, cluster, in, second.Object), reconciledSecrets(t, cluster, in, first.Object); !reflect.DeepEqual(a, b) {
				t.Errorf("second Secrets %s, first %s", toJSON(a), toJSON(b))
			}
		})
	}
}
