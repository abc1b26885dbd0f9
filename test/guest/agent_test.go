package guest

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/bridge/relay"
)

// bobUserData creates bob, whose keys reach the guest through the agent.
const bobUserData = `#cloud-config
users:
  - name: bob
    shell: /bin/bash
`

// agentVM is a labelled VM whose SSH keys go through the guest agent
// (Virtstation's default propagation).
func agentVM(namespace, name, user, userData string) string {
	return `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
  labels:
    virtstation.io/managed: "true"
  annotations:
    virtstation.io/ssh-user: ` + user + `
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        memory:
          guest: 1Gi
        devices:
          disks:
            - name: root
              disk:
                bus: virtio
      volumes:
        - name: root
          containerDisk:
            image: quay.io/containerdisks/debian:12
        - name: cloudinit
          cloudInitNoCloud:
            userData: |
` + indent(userData, "              ") + `
`
}

// TestGuestAgentKeys hands the <vm>-ssh-keys Secret's keys to the guest
// agent as virt-launcher does, and shows that a key deleted from the
// namespace's Secrets stops letting its user in once handed over again.
func TestGuestAgentKeys(t *testing.T) {
	t.Parallel()
	laptop, desktop := newKey(t, "bob@laptop"), newKey(t, "bob@desktop")
	create(t,
		keySecret(teamB, "bob-laptop", laptop.public),
		keySecret(teamB, "bob-desktop", desktop.public),
		agentVM(teamB, "ws-bob", "bob", bobUserData),
	)
	waitKeys(t, teamB, "ws-bob-ssh-keys", []string{laptop.public, desktop.public}, nil)
	g := boot(t, teamB, "ws-bob", "127.0.0.3")

	_, refused := bridgeSSH(t, teamB, "ws-bob", "bob", laptop)
	refusedCode(t, "before the agent has the keys", refused, relay.CodeSSHAuthFailed)

	propagate := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := g.PropagateAccessCredentials(ctx, env.Client, g.vmi); err != nil {
			t.Fatal(err)
		}
	}
	propagate()
	for _, k := range []keyPair{laptop, desktop} {
		c, refused := bridgeSSH(t, teamB, "ws-bob", "bob", k)
		if refused != nil {
			t.Fatalf("%s was refused after the agent set the keys: %d %q", k.public, refused.Code, refused.Text)
		}
		shell(t, c, "echo $(whoami)-$((6*7))", "bob-42")
		closeSession(t, c)
	}
	if got := g.run(t, "bob", laptop.signer, "stat -c %U:%a ~/.ssh/authorized_keys"); got != "bob:600" {
		t.Errorf("authorized_keys written by the agent: %s, want bob:600", got)
	}

	if err := env.Client.Delete(context.Background(), &corev1.Secret{ObjectMeta: objectMeta(teamB, "bob-desktop")}); err != nil {
		t.Fatal(err)
	}
	waitKeys(t, teamB, "ws-bob-ssh-keys", []string{laptop.public}, []string{desktop.public})
	propagate()
	_, refused = bridgeSSH(t, teamB, "ws-bob", "bob", desktop)
	refusedCode(t, "the deleted key", refused, relay.CodeSSHAuthFailed)
	c, refused := bridgeSSH(t, teamB, "ws-bob", "bob", laptop)
	if refused != nil {
		t.Fatalf("the remaining key was refused: %d %q", refused.Code, refused.Text)
	}
	shell(t, c, "echo still-$((6*7))", "still-42")
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
