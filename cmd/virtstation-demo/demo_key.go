package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/render"
)

// demoKeySecret is the Secret that carries alice's public key to her
// workstation: labelled as a key source, in the VM's namespace.
const demoKeySecret = demoUser + "-demo-key"

// writeDemoKey makes a fresh ed25519 key pair for the demo user, writes the
// private key (OpenSSH PEM, 0600) to f.sshKey() and the public key to
// f.sshKey()+".pub", and returns the public key's authorized_keys line.
// Every run makes a new pair: the guest's root disk is new every boot, and
// cloudInit propagation gives keys on first boot only.
func writeDemoKey(f demoFiles) (string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generate %s's SSH key: %w", demoUser, err)
	}
	block, err := ssh.MarshalPrivateKey(priv, demoUser+"@virtstation-demo")
	if err != nil {
		return "", fmt.Errorf("encode %s's SSH key: %w", demoUser, err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode %s's SSH public key: %w", demoUser, err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " " + demoUser + "@virtstation-demo"
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(f.sshKey(), pem.EncodeToMemory(block), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(f.sshKey()+".pub", []byte(line+"\n"), 0o600); err != nil {
		return "", err
	}
	return line, nil
}

// keySecret is the ssh-public-key Secret holding authorizedKey, as a
// manifest the demo applies with the examples.
func keySecret(authorizedKey string) render.Object {
	return render.Object{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{
			"name":      demoKeySecret,
			"namespace": demoNamespace,
			"labels":    map[string]any{api.LabelSSHPublicKey: api.LabelTrue},
		},
		"stringData": map[string]any{"authorized_keys": authorizedKey + "\n"},
	}
}

// withBeforeVMs returns objs with extra inserted before the first
// VirtualMachine, so that the webhook sees it when it admits every VM
// (after the Namespaces the examples create).
func withBeforeVMs(objs []render.Object, extra render.Object) []render.Object {
	out := make([]render.Object, 0, len(objs)+1)
	inserted := false
	for _, o := range objs {
		if !inserted && o["kind"] == "VirtualMachine" {
			out = append(out, extra)
			inserted = true
		}
		out = append(out, o)
	}
	if !inserted {
		out = append(out, extra)
	}
	return out
}
