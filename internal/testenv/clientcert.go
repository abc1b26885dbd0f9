package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/virtstation/virtstation/webhooks"
)

// WebhookClientName is the common name of the client certificate the API
// server presents to the webhooks under WithWebhookClientCerts, and the one
// name the webhook server allows (--client-allowed-names).
const WebhookClientName = "kube-apiserver-webhook-client"

// webhookClientValidity is long enough for any test run.
const webhookClientValidity = 24 * time.Hour

// StartOption configures Start.
type StartOption func(*startOptions)

type startOptions struct {
	noWebhookClientCerts bool
	defaultArch          string
	noAudit              bool
}

// WithoutAudit starts the webhook manager without the policy audit, so a
// benchmark can run its own Auditor and measure one pass alone.
func WithoutAudit() StartOption {
	return func(o *startOptions) { o.noAudit = true }
}

// WithWebhookClientCerts makes the webhook server require a client
// certificate (webhooks.ServerOptions.ClientCA) and the API server present
// one: kube-apiserver starts with --admission-control-config-file, an
// AdmissionConfiguration whose WebhookAdmission configuration, for both
// webhook admission plugins, names a kubeConfigFile with a certificate from
// a CA generated for this Env. Env.WebhookClient holds that PKI. This is
// the default, as the security model asks of the tests and the demo; the
// option stays for callers that depend on it.
func WithWebhookClientCerts() StartOption {
	return func(o *startOptions) { o.noWebhookClientCerts = false }
}

// WithoutWebhookClientCerts starts the webhook server without requiring
// client certificates and the API server without presenting one.
func WithoutWebhookClientCerts() StartOption {
	return func(o *startOptions) { o.noWebhookClientCerts = true }
}

// WebhookClientPKI is the PKI WithWebhookClientCerts sets up.
type WebhookClientPKI struct {
	// CA is the PEM certificate the webhook server verifies callers with.
	CA []byte
	// CAFile holds CA (--client-ca-file).
	CAFile string
	// Certificate is the client certificate the API server presents, named
	// WebhookClientName, for tests that play the API server.
	Certificate tls.Certificate
	// AdmissionConfigFile and KubeConfigFile are the files passed to
	// kube-apiserver, as an operator would write them.
	AdmissionConfigFile, KubeConfigFile string
}

// admissionConfiguration is the AdmissionConfiguration the API server
// reads: both webhook plugins take their client credentials from the same
// kubeconfig. %s is the kubeconfig's path.
const admissionConfiguration = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
`

// webhookKubeConfig is the kubeconfig of the webhook's credentials. The user
// name is the host (and port) of the webhook the credentials are for: an
// in-cluster webhook is <service>.<namespace>.svc, the test webhook server
// is a URL, host:port.
const webhookKubeConfig = `apiVersion: v1
kind: Config
users:
- name: %q
  user:
    client-certificate-data: %s
    client-key-data: %s
`

// configureWebhookClientCerts fixes te's webhook serving address (the
// kubeconfig names it), generates the CA and the API server's client
// certificate into dir, and sets --admission-control-config-file. Call it
// before te.Start.
func configureWebhookClientCerts(te *crenvtest.Environment, dir string) (*WebhookClientPKI, error) {
	wio := &te.WebhookInstallOptions
	if wio.LocalServingHost == "" {
		wio.LocalServingHost = "127.0.0.1"
	}
	if wio.LocalServingPort == 0 {
		port, err := freeLocalPort(wio.LocalServingHost)
		if err != nil {
			return nil, err
		}
		wio.LocalServingPort = port
	}
	caPEM, certPEM, keyPEM, err := NewClientPKI(WebhookClientName)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pki := &WebhookClientPKI{
		CA: caPEM, Certificate: cert,
		CAFile:              filepath.Join(dir, "webhook-client-ca.crt"),
		KubeConfigFile:      filepath.Join(dir, "webhook-client.kubeconfig"),
		AdmissionConfigFile: filepath.Join(dir, "admission-configuration.yaml"),
	}
	hostPort := net.JoinHostPort(wio.LocalServingHost, strconv.Itoa(wio.LocalServingPort))
	files := map[string]string{
		pki.CAFile: string(caPEM),
		pki.KubeConfigFile: fmt.Sprintf(webhookKubeConfig, hostPort,
			base64.StdEncoding.EncodeToString(certPEM), base64.StdEncoding.EncodeToString(keyPEM)),
		pki.AdmissionConfigFile: fmt.Sprintf(admissionConfiguration, pki.KubeConfigFile),
	}
	for path, data := range files {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			return nil, fmt.Errorf("write webhook client PKI: %w", err)
		}
	}
	te.ControlPlane.GetAPIServer().Configure().Set("admission-control-config-file", pki.AdmissionConfigFile)
	return pki, nil
}

// serverOptions adds the client CA to o.
func (pki *WebhookClientPKI) serverOptions(o *webhooks.ServerOptions) error {
	ca, err := webhooks.LoadClientCA(pki.CAFile)
	if err != nil {
		return err
	}
	o.ClientCA, o.ClientNames = ca, []string{WebhookClientName}
	return nil
}

// NewClientPKI generates a CA and a client certificate named cn, all PEM.
// Tests use it for certificates the webhook must refuse.
func NewClientPKI(cn string) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn + "-ca"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(webhookClientValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("client CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(webhookClientValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("client certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// freeLocalPort asks the kernel for a free TCP port on host.
func freeLocalPort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port for the webhook server: %w", err)
	}
	addr, ok := l.Addr().(*net.TCPAddr)
	if err := l.Close(); err != nil {
		return 0, err
	}
	if !ok {
		return 0, fmt.Errorf("find a free port for the webhook server: listener address %v is not TCP", l.Addr())
	}
	return addr.Port, nil
}
