package mutate

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/virtstation/virtstation/api"
)

// admitOnce runs the first admission of g and writes the Secrets it asks
// for into the case's cluster, as the handler does. ok is false when the
// case is denied.
func admitOnce(t *testing.T, g stepGolden) (in Input, first Result, cluster *StaticCluster, ok bool) {
	t.Helper()
	in = g.input(t)
	cluster = g.cluster(t)
	first, err := Mutate(stepContext, in, cluster)
	if err != nil {
		t.Fatalf("first Mutate: %v", err)
	}
	if len(first.Denied) > 0 {
		return in, first, cluster, false
	}
	storeSecrets(t, cluster, in, first)
	return in, first, cluster, true
}

// updateInput is an UPDATE of the stored object stored with obj.
func updateInput(t *testing.T, in Input, obj, stored any) Input {
	t.Helper()
	up := mutateInput(t, admissionv1.Update, mustJSON(t, obj), mustJSON(t, stored))
	up.Namespace, up.Name = in.Namespace, in.Name
	return up
}

// assertSameAdmission fails when got differs from want in object or record.
func assertSameAdmission(t *testing.T, what string, got, want Result) {
	t.Helper()
	if len(got.Denied) > 0 {
		t.Fatalf("%s: denied: %v", what, got.Denied)
	}
	if !reflect.DeepEqual(got.Object, want.Object) {
		t.Errorf("%s gives another object:\n%s\nwant:\n%s", what, lineDiff(toJSON(want.Object), toJSON(got.Object)), toJSON(want.Object))
	}
	if toJSON(got.Injected) != toJSON(want.Injected) {
		t.Errorf("%s: Injected %s, want %s", what, toJSON(got.Injected), toJSON(want.Injected))
	}
}

// TestMutateStepsIdempotentOnUpdate admits every admitted case, stores the
// result, then updates the stored VM: with itself (any later update that
// changes nothing of ours) and with the manifest first applied (kubectl
// replace, a GitOps tool re-applying). Both must give the stored VM back.
func TestMutateStepsIdempotentOnUpdate(t *testing.T) {
	for _, g := range loadStepGoldens(t) {
		t.Run(g.name, func(t *testing.T) {
			in, first, cluster, ok := admitOnce(t, g)
			if !ok {
				t.Skip("denied")
			}
			again, err := Mutate(stepContext, updateInput(t, in, first.Object, first.Object), cluster)
			if err != nil {
				t.Fatalf("Mutate: %v", err)
			}
			assertSameAdmission(t, "an UPDATE of the stored VM with itself", again, first)
			if in.Operation != admissionv1.Create {
				return // the manifest of an UPDATE case is not what was stored first
			}
			reapplied, err := Mutate(stepContext, updateInput(t, in, in.Object, first.Object), cluster)
			if err != nil {
				t.Fatalf("Mutate: %v", err)
			}
			assertSameAdmission(t, "an UPDATE with the manifest applied again", reapplied, first)
		})
	}
}

// withoutVirtstationAnnotations is obj less the virtstation.io/
// annotations a user writes (the MAC setting stays: a pinned MAC is never
// rewritten, by design). keepRecord keeps the virtstation.io/injected record,
// as kubectl apply does (the user never applied it).
func withoutVirtstationAnnotations(obj any, keepRecord bool) map[string]any {
	out := deepCopyJSON(obj)
	md, _ := out["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	for k := range ann {
		switch {
		case k == api.AnnotationMAC, keepRecord && k == api.AnnotationInjected:
		case strings.HasPrefix(k, "virtstation.io/"):
			delete(ann, k)
		}
	}
	if len(ann) == 0 {
		delete(md, "annotations")
	}
	return out
}

// releasedVM is obj without the virtstation.io/managed label and every
// virtstation.io/ annotation; keepRecord keeps virtstation.io/injected, as
// kubectl apply does.
func releasedVM(obj any, keepRecord bool) map[string]any {
	out := deepCopyJSON(obj)
	md, _ := out["metadata"].(map[string]any)
	if labels, ok := md["labels"].(map[string]any); ok {
		delete(labels, api.LabelManaged)
		if len(labels) == 0 {
			delete(md, "labels")
		}
	}
	ann, _ := md["annotations"].(map[string]any)
	for k := range ann {
		if strings.HasPrefix(k, "virtstation.io/") && (!keepRecord || k != api.AnnotationInjected) {
			delete(ann, k)
		}
	}
	if len(ann) == 0 {
		delete(md, "annotations")
	}
	return out
}

// withPinnedMAC is the user's VM obj with the MAC a release keeps: the one
// rec says the webhook pinned, on the default interface it added if it did.
func withPinnedMAC(t *testing.T, obj map[string]any, rec *api.InjectedMAC) map[string]any {
	t.Helper()
	out := deepCopyJSON(obj)
	if rec == nil {
		return out
	}
	if rec.AddedInterface {
		if err := setList(out, []any{map[string]any{"name": rec.Interface, "masquerade": map[string]any{}}}, pathInterfaces); err != nil {
			t.Fatal(err)
		}
		if err := setList(out, []any{map[string]any{"name": rec.Interface, "pod": map[string]any{}}}, pathNetworks); err != nil {
			t.Fatal(err)
		}
	}
	ifaces := getList(out, pathInterfaces)
	for _, i := range ifaces {
		if o, ok := i.(map[string]any); ok && o["name"] == rec.Interface {
			o["macAddress"] = rec.Address
		}
	}
	if err := setList(out, ifaces, pathInterfaces); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMutateStepsRoundTrip admits every admitted CREATE case, then removes
// the virtstation.io annotations from the stored VM: the VM must come back
// as the user wrote it, that is as the same manifest without the
// annotations is admitted. Removing the virtstation.io/managed label as well
// releases the VM: it must come back as the manifest without label and
// annotations, unmutated, but for the MAC the webhook pinned (a VM's MAC
// never changes).
func TestMutateStepsRoundTrip(t *testing.T) {
	for _, g := range loadStepGoldens(t) {
		t.Run(g.name, func(t *testing.T) {
			// Data disks change only on a stopped VM: stop it.
			halted := deepCopyJSON(g.in.Object)
			if spec, ok := halted["spec"].(map[string]any); ok {
				spec["runStrategy"] = "Halted"
			}
			g.vm = mustJSON(t, halted)
			in, first, cluster, ok := admitOnce(t, g)
			if !ok || in.Operation != admissionv1.Create || in.VM.Annotations[api.AnnotationInjected] != "" {
				t.Skip("denied, or not a CREATE of a manifest as a user writes it")
			}
			if len(g.in.Cluster.VMIs) > 0 {
				t.Skip("the VM runs: data disks cannot change")
			}
			plain := withoutVirtstationAnnotations(in.Object, false)
			want, err := Mutate(stepContext, mutateInput(t, admissionv1.Create, mustJSON(t, plain), ""), g.cluster(t))
			if err != nil || len(want.Denied) > 0 {
				t.Fatalf("Mutate of the manifest without annotations: %v %v", err, want.Denied)
			}
			// kubectl apply keeps the record: the user never applied it.
			for _, keepRecord := range []bool{true} {
				got, err := Mutate(stepContext, updateInput(t, in, withoutVirtstationAnnotations(first.Object, keepRecord), first.Object), cluster)
				if err != nil {
					t.Fatalf("Mutate: %v", err)
				}
				what := "removing the annotations"
				if !keepRecord {
					what += " and the record"
				}
				assertSameAdmission(t, what, got, want)
			}
			user := withPinnedMAC(t, releasedVM(in.Object, false), first.Injected.MAC)
			for _, keepRecord := range []bool{true, false} {
				got, err := Mutate(stepContext, updateInput(t, in, releasedVM(first.Object, keepRecord), first.Object), cluster)
				if err != nil {
					t.Fatalf("Mutate: %v", err)
				}
				what := "removing the managed label and the annotations"
				if !keepRecord {
					what += " and the record"
				}
				assertSameAdmission(t, what, got, Result{Object: user})
			}
		})
	}
}

// userScript is a shell script of exactly n bytes.
func userScript(n int) []byte {
	b := []byte("#!/bin/sh\n")
	for len(b) < n {
		line := fmt.Sprintf("echo line %d of the user's script\n", len(b))
		b = append(b, line...)
	}
	b = b[:n]
	b[n-1] = '\n'
	return b
}

// TestMutateUserDataAroundTheInlineLimit admits the user's inline
// user-data, in either field, with SSH keys going through cloud-init, at
// sizes where the merge crosses KubeVirt's 2048-byte inline limit (raw or
// as base64): the merged data moves to <vm>-userdata when it does not fit.
// Admitting again, as a reinvocation or an UPDATE, changes nothing, and
// removing the annotations gives the user's field back byte for byte.
func TestMutateUserDataAroundTheInlineLimit(t *testing.T) {
	keySecret := testKeySecret()
	for _, form := range []string{"userData", "userDataBase64"} {
		for n := 100; n <= 2100; n += 50 {
			t.Run(fmt.Sprintf("%s/%d", form, n), func(t *testing.T) {
				user := userScript(n)
				src := jsonObj("userData", string(user))
				if form == "userDataBase64" {
					src = jsonObj("userDataBase64", base64.StdEncoding.EncodeToString(user))
				}
				spec := specParts{disks: jsonList(virtioDisk("cloudinitdisk", "")), volumes: jsonList(noCloud("cloudinitdisk", src))}
				raw := vmJSON(stepAnn(api.AnnotationSSHUser, "alice", api.AnnotationSSHPropagation, api.PropagationCloudInit), spec.String())
				in := mutateInput(t, admissionv1.Create, raw, "")
				cluster := NewStaticCluster(nil)
				cluster.CollectKeys = fakeCollectKeys
				cluster.AddSecret(keySecret)
				first, err := Mutate(stepContext, in, cluster)
				if err != nil || len(first.Denied) > 0 {
					t.Fatalf("Mutate: %v %v", err, first.Denied)
				}
				storeSecrets(t, cluster, in, first)
				again, err := Mutate(stepContext, reinput(t, in, first.Object), cluster)
				if err != nil {
					t.Fatal(err)
				}
				assertSameAdmission(t, "the reinvocation", again, first)
				for what, obj := range map[string]any{"the stored VM": first.Object, "the manifest": in.Object} {
					up, err := Mutate(stepContext, updateInput(t, in, obj, first.Object), cluster)
					if err != nil {
						t.Fatal(err)
					}
					assertSameAdmission(t, "an UPDATE with "+what, up, first)
				}
				back, err := Mutate(stepContext, updateInput(t, in, withoutVirtstationAnnotations(first.Object, true), first.Object), cluster)
				if err != nil || len(back.Denied) > 0 {
					t.Fatalf("Mutate: %v %v", err, back.Denied)
				}
				if got := cloudInitSource(t, back.Object, "cloudinitdisk"); !reflect.DeepEqual(got, src) {
					t.Errorf("removing the annotations gives the cloud-init source\n%s\nwant the user's\n%s", toJSON(got), toJSON(src))
				}
			})
		}
	}
}
