package webhooks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// writeCert writes a self-signed serving certificate for 127.0.0.1 with the
// given serial into dir, the way cert-manager or the kubelet's secret
// volume would replace it: a new file renamed over the old one.
func writeCert(t *testing.T, dir string, serial int64) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "virtstation-webhook"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"tls.crt": {Type: "CERTIFICATE", Bytes: der},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }() // only probing for a free port
	return l.Addr().(*net.TCPAddr).Port
}

// servedSerial connects and returns the serial of the certificate served.
func servedSerial(addr string) (int64, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the served certificate
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close() }() // only the handshake mattered
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// TestServerReloadsRenewedCertificate: a renewed certificate in CertDir is
// served to new connections without restarting the server.
func TestServerReloadsRenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, 1)
	port := freePort(t)
	srv := NewServer(ServerOptions{Host: "127.0.0.1", Port: port, CertDir: dir})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))

	waitSerial(t, addr, 1)
	writeCert(t, dir, 2)
	waitSerial(t, addr, 2)
}

func waitSerial(t *testing.T, addr string, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got int64
	var err error
	for time.Now().Before(deadline) {
		if got, err = servedSerial(addr); err == nil && got == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("served certificate serial = %d (%v), want %d", got, err, want)
}
