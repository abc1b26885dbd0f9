package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/virtstation/virtstation/internal/virthandler"
)

// demoFiles are the files the demo writes for its user, side by side in
// one directory: her token, her SSH key pair, the demo CA that signed the
// bridge's serving certificate, and a kubeconfig that points virtctl at
// the bridge; and the workstation's data disks, kept across runs.
type demoFiles struct{ dir string }

func (f demoFiles) token() string      { return filepath.Join(f.dir, demoUser+".token") }
func (f demoFiles) ca() string         { return filepath.Join(f.dir, "ca.crt") }
func (f demoFiles) kubeconfig() string { return filepath.Join(f.dir, demoUser+".kubeconfig") }

// sshKey is the demo user's private key; its public key is sshKey()+".pub".
func (f demoFiles) sshKey() string { return filepath.Join(f.dir, demoUser+"_ed25519") }

// storage holds the image files of the claims the guest mounts
// (virtlauncher.Options.Storage): alice-home survives a restart of the demo.
func (f demoFiles) storage() string { return filepath.Join(f.dir, "storage") }

// screenshot is where the demo saves the guest's display.
func (f demoFiles) screenshot() string { return filepath.Join(f.dir, demoVM+".png") }

// certDir holds the bridge's serving certificate and key (tls.crt,
// tls.key), as a kubernetes.io/tls Secret mounted at --cert-dir would.
func (f demoFiles) certDir() string { return filepath.Join(f.dir, "bridge-tls") }

// demoTLS issues the bridge a serving certificate for localhost and
// 127.0.0.1 from a fresh demo CA, writes the CA to ca.crt, and returns the
// server's TLS configuration and a client's that trusts the CA.
//
// The bridge serves TLS because client-go, and so virtctl, sends a bearer
// token only to an https:// server: against plain HTTP virtctl would send
// none.
func demoTLS(f demoFiles) (server, client *tls.Config, err error) {
	if err := os.MkdirAll(f.certDir(), 0o700); err != nil {
		return nil, nil, err
	}
	caPEM, err := virthandler.WriteServingCert(f.certDir())
	if err != nil {
		return nil, nil, fmt.Errorf("the bridge's serving certificate: %w", err)
	}
	if err := os.WriteFile(f.ca(), caPEM, 0o600); err != nil {
		return nil, nil, err
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(f.certDir(), "tls.crt"), filepath.Join(f.certDir(), "tls.key"))
	if err != nil {
		return nil, nil, fmt.Errorf("load the bridge's serving certificate: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, errors.New("the demo CA's PEM holds no certificate")
	}
	server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	client = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	return server, client, nil
}

// demoKubeconfig is a kubeconfig for the demo user: the bridge at server
// (https://host:port) as the cluster, trusted through the demo CA, her
// token file as the credential, and the demo VM's namespace as the
// context's, so that `virtctl --kubeconfig <file> console dev-alice`
// needs nothing more. Paths are absolute: clientcmd resolves a relative one
// against the file's directory only when it loads through loading rules.
func demoKubeconfig(server string, f demoFiles) *clientcmdapi.Config {
	const name = "virtstation-demo-bridge"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: f.ca()}
	cfg.AuthInfos[demoUser] = &clientcmdapi.AuthInfo{TokenFile: f.token()}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: demoUser, Namespace: demoNamespace}
	cfg.CurrentContext = name
	return cfg
}

// writeDemoKubeconfig writes demoKubeconfig to f.kubeconfig().
func writeDemoKubeconfig(server string, f demoFiles) error {
	if err := clientcmd.WriteToFile(*demoKubeconfig(server, f), f.kubeconfig()); err != nil {
		return fmt.Errorf("write %s: %w", f.kubeconfig(), err)
	}
	return nil
}

// dialAddr is where a client on this machine reaches a listener at addr:
// an unspecified host (0.0.0.0, ::) is reached on 127.0.0.1, which the
// serving certificate names.
func dialAddr(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
