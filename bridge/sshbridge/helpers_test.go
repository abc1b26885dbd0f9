package sshbridge

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/virtstation/virtstation/internal/sshd"
)

// waitFor bounds every wait on the guest in these tests.
const waitFor = 10 * time.Second

// screen collects a Session's Output, like the browser's terminal would.
type screen struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	seen int // expect matched up to here
	err  error
	eof  chan struct{}
}

func watch(r io.Reader) *screen {
	sc := &screen{eof: make(chan struct{})}
	go func() {
		defer close(sc.eof)
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			sc.mu.Lock()
			sc.buf.Write(b[:n])
			sc.err = err
			sc.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return sc
}

// expect waits until want appears in the output after the previous match.
func (sc *screen) expect(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		sc.mu.Lock()
		out := sc.buf.String()
		i := strings.Index(out[sc.seen:], want)
		if i >= 0 {
			sc.seen += i + len(want)
		}
		sc.mu.Unlock()
		if i >= 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q; it shows:\n%s", want, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitEOF waits for Output to end and returns the error it ended with.
func (sc *screen) waitEOF(t *testing.T) error {
	t.Helper()
	select {
	case <-sc.eof:
	case <-time.After(waitFor):
		t.Fatal("Output did not end")
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.err
}

func typeLine(t *testing.T, s *Session, line string) {
	t.Helper()
	if _, err := io.WriteString(s.Stdin, line+"\n"); err != nil {
		t.Fatalf("type %q: %v", line, err)
	}
}

// keyHello logs in to srv with its authorized client key.
func keyHello(srv *sshd.Server) *Hello {
	return &Hello{User: srv.User, PrivateKey: string(srv.ClientKeyPEM), Cols: DefaultCols, Rows: DefaultRows}
}

func dialOptions(srv *sshd.Server, h *Hello, vm VMRef, store HostKeyStore) DialOptions {
	return DialOptions{Addr: srv.Addr, Hello: h, VM: vm, HostKeys: store, Timeout: waitFor}
}

// newEd25519 returns a new key as an OpenSSH PEM, encrypted when passphrase
// is set, and its public half.
func newEd25519(t testing.TB, passphrase string) (string, ssh.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var block *pem.Block
	if passphrase != "" {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte(passphrase))
	} else {
		block, err = ssh.MarshalPrivateKey(priv, "test")
	}
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(block)), sshPub
}

// newECDSASEC1 returns a P-256 key as a SEC1 "EC PRIVATE KEY" PEM.
func newECDSASEC1(t testing.TB) (string, ssh.PublicKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})), pub
}

// newHostKey returns a public key to pin in store tests.
func newHostKey(t testing.TB) ssh.PublicKey {
	t.Helper()
	_, pub := newEd25519(t, "")
	return pub
}

func sameKey(a, b ssh.PublicKey) bool {
	return a != nil && b != nil && bytes.Equal(a.Marshal(), b.Marshal())
}

// keyBody is the base64 body of a PEM, the part that must never leak.
func keyBody(pemText string) string {
	lines := strings.Split(strings.TrimSpace(pemText), "\n")
	return strings.Join(lines[1:len(lines)-1], "")
}

// bridgeNamespace creates (once per name) the namespace a ConfigMapStore
// writes to.
func bridgeNamespace(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}
