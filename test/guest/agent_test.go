package guest

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/bridge/sshbridge"
	"github.com/virtstation/virtstation/internal/bridgestack"
)

// setPropagation switches the stopped VM's key propagation, as a user
// edits the annotation.
func setPropagation(t *testing.T, namespace, name, method string) {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, vm); err != nil {
		t.Fatal(err)
	}
	vm.Annotations["virtstation.io/ssh-propagation"] = method
	if err := env.Client.Update(context.Background(), vm); err != nil {
		t.Fatalf("switch %s/%s to %s: %v", namespace, name, method, err)
	}
}

// resetHostKeyPin does what the bridge's refusal tells an administrator:
// it deletes the VM's pinned host key, so the next session trusts the
// guest's new one.
func resetHostKeyPin(t *testing.T, namespace, name string) {
	t.Helper()
	err := env.Client.DeleteAllOf(context.Background(), &corev1.ConfigMap{}, client.InNamespace(bridgestack.Namespace),
		client.MatchingLabels{sshbridge.VMNamespaceLabel: namespace, sshbridge.VMNameLabel: name})
	if err != nil {
		t.Fatal(err)
	}
}

// agentKeys hands the <vm>-ssh-keys Secret's keys to the guest agent as
// virt-launcher does, and shows that a key deleted from the namespace's
// Secrets stops letting its user in once handed over again.
func agentKeys(t *testing.T, g *guest, namespace, vm, user string, kept, deleted keyPair, deletedSecret string) {
	propagate := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := g.PropagateAccessCredentials(ctx, env.Client, g.vmi); err != nil {
			t.Fatal(err)
		}
	}
	waitKeys(t, namespace, vm+"-ssh-keys", []string{kept.public, deleted.public}, nil)
	propagate()
	for _, k := range []keyPair{kept, deleted} {
		c, refused := bridgeSSH(t, namespace, vm, user, k)
		if refused != nil {
			t.Fatalf("%s was refused after the agent set the keys: %d %q", k.public, refused.Code, refused.Text)
		}
		shell(t, c, "echo $(whoami)-$((6*7))", user+"-42")
		closeSession(t, c)
	}
	if got := g.run(t, user, kept.signer, "stat -c %U:%a ~/.ssh/authorized_keys; grep -c . ~/.ssh/authorized_keys"); got != user+":600\n2" {
		t.Errorf("authorized_keys as the agent wrote it: %q, want %s:600 and exactly the Secret's 2 keys", got, user)
	}

	if err := env.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: objectMeta(namespace, deletedSecret)}); err != nil {
		t.Fatal(err)
	}
	waitKeys(t, namespace, vm+"-ssh-keys", []string{kept.public}, []string{deleted.public})
	propagate()
	_, refused := bridgeSSH(t, namespace, vm, user, deleted)
	refusedCode(t, "the deleted key", refused, relay.CodeSSHAuthFailed)
	c, refused := bridgeSSH(t, namespace, vm, user, kept)
	if refused != nil {
		t.Fatalf("the remaining key was refused: %d %q", refused.Code, refused.Text)
	}
	shell(t, c, "echo still-$((6*7))", "still-42")
	closeSession(t, c)
}

// waitKeys waits until Secret namespace/name holds every key of want and
// none of gone, as the key reconciler keeps it.
func waitKeys(t *testing.T, namespace, name string, want, gone []string) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for {
		s := &corev1.Secret{}
		err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s)
		var all strings.Builder
		for _, v := range s.Data {
			all.Write(v)
		}
		ok := err == nil
		for _, k := range want {
			ok = ok && strings.Contains(all.String(), k)
		}
		for _, k := range gone {
			ok = ok && !strings.Contains(all.String(), k)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Secret %s/%s: %v; holds %q, want %q and not %q", namespace, name, err, all.String(), want, gone)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
