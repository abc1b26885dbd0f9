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

// demoKeyComment names the demo user's key in authorized_keys.
const demoKeyComment = demoUser + "@virtstation-demo"

// writeDemoKey returns the authorized_keys line of the demo user's ed25519
// key pair: the one in f.sshKey() from an earlier run, or a fresh pair it
// writes there (the private key as OpenSSH PEM, 0600; the public key in
// f.sshKey()+".pub"). An earlier run's key is kept because alice-home,
// where cloud-init appends the key to ~/.ssh/authorized_keys, is kept too.
func writeDemoKey(f demoFiles) (string, error) {
	if b, err := os.ReadFile(f.sshKey()); err == nil {
		if signer, err := ssh.ParsePrivateKey(b); err == nil {
			return authorizedLine(signer.PublicKey()), nil
		}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generate %s's SSH key: %w", demoUser, err)
	}
	block, err := ssh.MarshalPrivateKey(priv, demoKeyComment)
	if err != nil {
		return "", fmt.Errorf("encode %s's SSH key: %w", demoUser, err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode %s's SSH public key: %w", demoUser, err)
	}
	line := authorizedLine(sshPub)
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

// authorizedLine is pub's authorized_keys line, with demoKeyComment.
func authorizedLine(pub ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " " + demoKeyComment
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
