package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/render"
)

func TestParseGuestMode(t *testing.T) {
	for name, tc := range map[string]struct {
		value   string
		want    guestMode
		wantErr bool
	}{
		"unset is the Debian guest": {value: "", want: debianGuest},
		"debian":                    {value: "debian", want: debianGuest},
		"echo":                      {value: "echo", want: echoGuest},
		"anything else is refused":  {value: "fedora", wantErr: true},
		"case matters":              {value: "Echo", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseGuestMode(tc.value)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseGuestMode(%q) = %v, %v; want %v, error %v", tc.value, got, err, tc.want, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), guestEnv) {
				t.Errorf("error %q does not name %s", err, guestEnv)
			}
		})
	}
}

func TestWithBeforeVMs(t *testing.T) {
	ns := render.Object{"kind": "Namespace"}
	dv := render.Object{"kind": "DataVolume"}
	vm := render.Object{"kind": "VirtualMachine"}
	key := render.Object{"kind": "Secret"}
	for name, tc := range map[string]struct {
		in, want []render.Object
	}{
		"before the first VM, after the namespace": {in: []render.Object{ns, dv, vm, vm}, want: []render.Object{ns, dv, key, vm, vm}},
		"no VM: last":     {in: []render.Object{ns}, want: []render.Object{ns, key}},
		"only VMs: first": {in: []render.Object{vm}, want: []render.Object{key, vm}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := withBeforeVMs(tc.in, key); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("withBeforeVMs = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRunningStatus(t *testing.T) {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	vmi.Spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{Name: "default", MacAddress: "02:58:9e:f5:05:75"}}
	got := runningStatus(vmi, "127.0.0.1")
	want := []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: "127.0.0.1", IPs: []string{"127.0.0.1"}, MAC: "02:58:9e:f5:05:75"}}
	if got.Phase != kubevirtv1.Running || !reflect.DeepEqual(got.Interfaces, want) {
		t.Errorf("runningStatus = %+v; want Running with %+v", got, want)
	}
}

// TestWriteDemoKey: the private key loads as an SSH client loads it, its
// public half is the line the Secret carries, and a later run keeps it
// (alice-home, with her authorized_keys, is kept too).
func TestWriteDemoKey(t *testing.T) {
	f := demoFiles{dir: t.TempDir()}
	line, err := writeDemoKey(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.sshKey())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatalf("the private key does not parse: %v", err)
	}
	pub, comment, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil || comment != demoKeyComment || string(pub.Marshal()) != string(signer.PublicKey().Marshal()) || pub.Type() != ssh.KeyAlgoED25519 {
		t.Errorf("authorized_keys line %q (%v) is not the ed25519 private key's public half with comment %q", line, err, demoKeyComment)
	}
	if st, err := os.Stat(f.sshKey()); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
	if again, err := writeDemoKey(f); err != nil || again != line {
		t.Errorf("second run gave %q, %v; want the same key %q", again, err, line)
	}
	sec := keySecret(line)
	if sec["stringData"].(map[string]any)["authorized_keys"] != line+"\n" {
		t.Errorf("Secret carries %v", sec["stringData"])
	}
}
