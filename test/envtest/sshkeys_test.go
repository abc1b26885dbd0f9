package envtest_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/sshkeys"
)

// syncTimeout bounds each wait for the reconciler; a round trip takes well
// under a second, the rest is slack for a loaded 2-core machine.
const syncTimeout = 20 * time.Second

// newPublicKey returns a fresh ed25519 key as an authorized_keys line.
func newPublicKey(t *testing.T, comment string) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(k)), "\n") + " " + comment
}

// createKeySecret creates a Secret labelled as holding SSH public keys.
func createKeySecret(t *testing.T, ns, name, authorizedKeys string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{api.LabelSSHPublicKey: api.LabelTrue}},
		Data:       map[string][]byte{sshkeys.DataKey: []byte(authorizedKeys)},
	}
	if err := env.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// createKeyVM creates a managed VM whose SSH keys go through the guest agent.
func createKeyVM(t *testing.T, ns, name string, opts ...vmOption) *kubevirtv1.VirtualMachine {
	t.Helper()
	opts = append([]vmOption{managed, withAnnotation(api.AnnotationSSHUser, "dev")}, opts...)
	vm := newVM(ns, name, opts...)
	if err := env.Client.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	return vm
}

// keysSecret reads the per-VM Secret.
func keysSecret(ns, vm string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: sshkeys.SecretName(vm)}, s)
	return s, err
}

// waitForKeys waits until the per-VM Secret holds exactly keys, in order,
// and has the VM as its controller owner.
func waitForKeys(t *testing.T, vm *kubevirtv1.VirtualMachine, keys ...string) *corev1.Secret {
	t.Helper()
	want := sshkeys.Render(keys)
	var s *corev1.Secret
	eventually(t, syncTimeout, func() error {
		var err error
		if s, err = keysSecret(vm.Namespace, vm.Name); err != nil {
			return err
		}
		if got := s.Data[sshkeys.DataKey]; !bytes.Equal(got, want) {
			return fmt.Errorf("%s = %q, want %q", sshkeys.DataKey, got, want)
		}
		owner := metav1.GetControllerOf(s)
		if owner == nil || owner.UID != vm.UID || owner.Kind != "VirtualMachine" || owner.BlockOwnerDeletion == nil || !*owner.BlockOwnerDeletion {
			return fmt.Errorf("owner references %+v, want the VM (uid %s) as blocking controller", s.OwnerReferences, vm.UID)
		}
		return nil
	})
	return s
}

// eventsRegarding lists the events.k8s.io Events about an object.
func eventsRegarding(t *testing.T, ns, kind, name string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// waitForEvent waits for an Event with reason whose note contains all of
// parts.
func waitForEvent(t *testing.T, ns, kind, name, reason string, parts ...string) {
	t.Helper()
	eventually(t, syncTimeout, func() error {
	next:
		for _, e := range eventsRegarding(t, ns, kind, name) {
			if e.Reason != reason || e.Type != corev1.EventTypeWarning {
				continue
			}
			for _, p := range parts {
				if !strings.Contains(e.Note, p) {
					continue next
				}
			}
			return nil
		}
		return fmt.Errorf("no %s Warning on %s %s/%s naming %q", reason, kind, ns, name, parts)
	})
}

func TestSSHKeySecrets(t *testing.T) {

	t.Run("VM gets the namespace's keys in a Secret it owns", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ns := newNamespace(t, "sshkeys")
		alice, bob := newPublicKey(t, "alice"), newPublicKey(t, "bob")
		createKeySecret(t, ns, "team-b", bob+"\n")
		createKeySecret(t, ns, "team-a", "# the A team\n"+alice+"\n")
		plain := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unlabelled"},
			Data:       map[string][]byte{sshkeys.DataKey: []byte(newPublicKey(t, "mallory"))},
		}
		if err := env.Client.Create(ctx, plain); err != nil {
			t.Fatal(err)
		}
		vm := createKeyVM(t, ns, "dev-1")
		s := waitForKeys(t, vm, alice, bob)
		if s.Labels[api.LabelManagedBy] != api.ManagedByValue {
			t.Errorf("labels = %v, want %s=%s", s.Labels, api.LabelManagedBy, api.ManagedByValue)
		}

		// Changes that do not touch the keys write nothing.
		vm.Annotations["example.com/note"] = "touched"
		if err := env.Client.Update(ctx, vm); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if again, err := keysSecret(ns, vm.Name); err != nil || again.ResourceVersion != s.ResourceVersion {
			t.Fatalf("secret rewritten without a change (resourceVersion %s -> %s, %v)", s.ResourceVersion, again.ResourceVersion, err)
		}

		// Someone edits the Secret: it is put back.
		s.Data[sshkeys.DataKey] = []byte(newPublicKey(t, "intruder") + "\n")
		if err := env.Client.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		waitForKeys(t, vm, alice, bob)

		// Someone deletes it: it comes back.
		if err := env.Client.Delete(ctx, s); err != nil {
			t.Fatal(err)
		}
		waitForKeys(t, vm, alice, bob)
	})

	t.Run("keys added, rotated and deleted apply", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ns := newNamespace(t, "sshkeys")
		vm := createKeyVM(t, ns, "dev-2")
		waitForKeys(t, vm)

		alice := newPublicKey(t, "alice")
		src := createKeySecret(t, ns, "alice", alice)
		waitForKeys(t, vm, alice)

		rotated := newPublicKey(t, "alice-2026")
		src.Data[sshkeys.DataKey] = []byte(rotated + "\n")
		if err := env.Client.Update(ctx, src); err != nil {
			t.Fatal(err)
		}
		waitForKeys(t, vm, rotated)

		bob := newPublicKey(t, "bob")
		createKeySecret(t, ns, "bob", bob)
		waitForKeys(t, vm, rotated, bob)

		// Removing the label withdraws the keys like a deletion.
		delete(src.Labels, api.LabelSSHPublicKey)
		if err := env.Client.Update(ctx, src); err != nil {
			t.Fatal(err)
		}
		waitForKeys(t, vm, bob)

		if err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bob"}}); err != nil {
			t.Fatal(err)
		}
		waitForKeys(t, vm)
	})

	t.Run("invalid line gives a Warning on its Secret and the rest still syncs", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, "sshkeys")
		alice, bob := newPublicKey(t, "alice"), newPublicKey(t, "bob")
		createKeySecret(t, ns, "team", alice+"\nssh-ed25519 not-a-key carol\n"+bob+"\n")
		vm := createKeyVM(t, ns, "dev-3")
		waitForKeys(t, vm, alice, bob)
		waitForEvent(t, ns, "Secret", "team", sshkeys.ReasonInvalidKey, "data key "+sshkeys.DataKey+" line 2: ")
		for _, e := range eventsRegarding(t, ns, "Secret", "team") {
			if strings.Contains(e.Note, "not-a-key") {
				t.Errorf("event note %q repeats the line", e.Note)
			}
		}
	})

	// Issue 13, finding 8: the events recorder merges Events of one object
	// and reason into a series showing one note, so one Event per line
	// showed only one of the two problems.
	t.Run("a pasted private key and a bad line both show, with their lines", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, "sshkeys")
		alice, bob := newPublicKey(t, "alice"), newPublicKey(t, "bob")
		lines := []string{
			alice,                                 // 1
			"-----BEGIN OPENSSH PRIVATE KEY-----", // 2
			"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", // 3
			"-----END OPENSSH PRIVATE KEY-----",          // 4
			"",                                           // 5
			"# bob",                                      // 6
			bob,                                          // 7
			"",                                           // 8
			"ssh-ed25519 AAAAnot-base64!! carol",         // 9
		}
		createKeySecret(t, ns, "pasted", strings.Join(lines, "\n")+"\n")
		vm := createKeyVM(t, ns, "dev-6")
		waitForKeys(t, vm, alice, bob)
		waitForEvent(t, ns, "Secret", "pasted", sshkeys.ReasonInvalidKey,
			"2 line(s) skipped", "data key "+sshkeys.DataKey+" line 2: a PEM block", "data key "+sshkeys.DataKey+" line 9: ")
		for _, e := range eventsRegarding(t, ns, "Secret", "pasted") {
			if strings.Contains(e.Note, "b3BlbnNzaC1rZXkt") || strings.Contains(e.Note, "AAAAnot-base64") {
				t.Errorf("event note %q repeats a line", e.Note)
			}
		}
	})

	t.Run("the webhook's empty Secret is adopted", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ns := newNamespace(t, "sshkeys")
		alice := newPublicKey(t, "alice")
		createKeySecret(t, ns, "alice", alice)
		pre := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: sshkeys.SecretName("dev-4"),
				Labels:      map[string]string{api.LabelManagedBy: api.ManagedByValue, "example.com/team": "a"},
				Annotations: map[string]string{"example.com/note": "kept"},
			},
			Data: map[string][]byte{sshkeys.DataKey: {}},
		}
		if err := env.Client.Create(ctx, pre); err != nil {
			t.Fatal(err)
		}
		vm := createKeyVM(t, ns, "dev-4")
		s := waitForKeys(t, vm, alice)
		if s.UID != pre.UID {
			t.Errorf("secret recreated (uid %s, was %s), want it adopted", s.UID, pre.UID)
		}
		if s.Labels["example.com/team"] != "a" || s.Annotations["example.com/note"] != "kept" {
			t.Errorf("adoption dropped metadata: labels %v annotations %v", s.Labels, s.Annotations)
		}
	})

	// The webhook denies a VM whose Secret name is already taken, so a
	// foreign Secret meets the reconciler only when it replaces the VM's own.
	t.Run("a foreign Secret of that name is left alone", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ns := newNamespace(t, "sshkeys")
		alice := newPublicKey(t, "alice")
		createKeySecret(t, ns, "alice", alice)
		vm := createKeyVM(t, ns, "dev-5")
		foreign := waitForKeys(t, vm, alice)
		foreign.Labels, foreign.OwnerReferences = nil, nil
		foreign.Data = map[string][]byte{"password": []byte("hunter2")}
		if err := env.Client.Update(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		waitForEvent(t, ns, "VirtualMachine", vm.Name, sshkeys.ReasonSecretTaken, foreign.Name, api.LabelManagedBy)
		// The key Secret changing makes the reconciler look again.
		createKeySecret(t, ns, "bob", newPublicKey(t, "bob"))
		time.Sleep(time.Second)
		got, err := keysSecret(ns, vm.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != foreign.ResourceVersion || len(got.OwnerReferences) != 0 || len(got.Labels) != 0 ||
			string(got.Data["password"]) != "hunter2" || len(got.Data) != 1 {
			t.Fatalf("foreign secret touched: %+v", got)
		}
	})

	t.Run("cloudInit propagation gets no Secret", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, "sshkeys")
		alice := newPublicKey(t, "alice")
		createKeySecret(t, ns, "alice", alice)
		cloud := createKeyVM(t, ns, "cloud", withAnnotation(api.AnnotationSSHPropagation, api.PropagationCloudInit))
		// A guest-agent VM created after it shows the reconciler has seen
		// the namespace by the time its Secret appears.
		agent := createKeyVM(t, ns, "agent")
		waitForKeys(t, agent, alice)
		if _, err := keysSecret(ns, cloud.Name); !apierrors.IsNotFound(err) {
			t.Fatalf("cloudInit VM: get %s = %v, want NotFound", sshkeys.SecretName(cloud.Name), err)
		}
	})
}
