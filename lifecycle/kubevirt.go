package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// KubeVirt is what the Controller asks of KubeVirt's subresource API.
type KubeVirt interface {
	// Stop stops the VM as virtctl stop does.
	Stop(ctx context.Context, namespace, name string) error
	// Users lists the users logged in to the guest, from its agent. An
	// error means the agent could not answer (none installed, not yet
	// connected): no signal either way.
	Users(ctx context.Context, namespace, name string) ([]kubevirtv1.VirtualMachineInstanceGuestOSUser, error)
}

// callTimeout bounds each call to KubeVirt's subresource API.
const callTimeout = 15 * time.Second

// maxUserListBytes bounds a userlist answer: a guest agent reports every
// session, and a guest is the tenant's.
const maxUserListBytes = 1 << 20

// Subresources calls KubeVirt's subresources.kubevirt.io API through the
// API server with the Controller's identity (RBAC: update
// virtualmachines/stop, get virtualmachineinstances/userlist).
type Subresources struct {
	Client *http.Client
	// Host is the API server's URL.
	Host string
}

// NewSubresources is Subresources for cfg.
func NewSubresources(cfg *rest.Config) (*Subresources, error) {
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubevirt subresource client: %w", err)
	}
	return &Subresources{Client: c, Host: strings.TrimRight(cfg.Host, "/")}, nil
}

func (s *Subresources) url(namespace, resource, name, sub string) string {
	return fmt.Sprintf("%s/apis/subresources.kubevirt.io/v1/namespaces/%s/%s/%s/%s",
		s.Host, url.PathEscape(namespace), resource, url.PathEscape(name), sub)
}

// Stop calls PUT .../virtualmachines/{name}/stop with empty StopOptions: no
// grace period override, so the guest is shut down gracefully and forced
// only after the VMI's terminationGracePeriodSeconds.
func (s *Subresources) Stop(ctx context.Context, namespace, name string) error {
	_, err := s.do(ctx, http.MethodPut, s.url(namespace, "virtualmachines", name, "stop"), "{}", 4<<10)
	return err
}

// Users calls GET .../virtualmachineinstances/{name}/userlist.
func (s *Subresources) Users(ctx context.Context, namespace, name string) ([]kubevirtv1.VirtualMachineInstanceGuestOSUser, error) {
	body, err := s.do(ctx, http.MethodGet, s.url(namespace, "virtualmachineinstances", name, "userlist"), "", maxUserListBytes)
	if err != nil {
		return nil, err
	}
	var list kubevirtv1.VirtualMachineInstanceGuestOSUserList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decode userlist: %w", err)
	}
	return list.Items, nil
}

func (s *Subresources) do(ctx context.Context, method, u, body string, limit int64) ([]byte, error) {
	// A hung virt-handler or guest agent must not stall the controller.
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s %s: answer larger than %d bytes", method, u, limit)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, truncate(string(b), 300))
	}
	return b, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
