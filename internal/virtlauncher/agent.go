package virtlauncher

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxAgentLine bounds one reply of the guest agent.
const maxAgentLine = 1 << 20

// AuthorizedKeys are the keys virt-launcher's access credential manager
// reads from a mounted Secret: every non-empty trimmed line of every key,
// keys in name order (pkg/virt-launcher/virtwrap/access-credentials,
// readKeysFromDirectory).
func AuthorizedKeys(s *corev1.Secret) []string {
	var keys []string
	for _, name := range sortedKeys(s.Data) {
		for _, line := range strings.Split(string(s.Data[name]), "\n") {
			if k := strings.TrimSpace(line); k != "" {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// PropagateAccessCredentials does for vmi what virt-launcher's access
// credential manager does on each sync: for every SSH public key
// credential propagated by qemuGuestAgent, it reads the Secret and sets
// each user's authorized keys to exactly its keys through the guest agent.
// A Secret with no keys changes nothing, as in KubeVirt.
func (m *Machine) PropagateAccessCredentials(ctx context.Context, c client.Reader, vmi *kubevirtv1.VirtualMachineInstance) error {
	for _, cred := range vmi.Spec.AccessCredentials {
		k := cred.SSHPublicKey
		if k == nil || k.PropagationMethod.QemuGuestAgent == nil || k.Source.Secret == nil {
			continue
		}
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: vmi.Namespace, Name: k.Source.Secret.SecretName}, s); err != nil {
			return fmt.Errorf("virtlauncher: access credential Secret: %w", err)
		}
		keys := AuthorizedKeys(s)
		if len(keys) == 0 {
			continue
		}
		for _, user := range k.PropagationMethod.QemuGuestAgent.Users {
			if err := m.SetAuthorizedKeys(ctx, user, keys); err != nil {
				return err
			}
		}
	}
	return nil
}

// SetAuthorizedKeys replaces user's authorized_keys in the guest with keys,
// with the guest agent command libvirt's virDomainAuthorizedSSHKeysSet
// sends for virt-launcher (guest-ssh-add-authorized-keys, reset true). The
// agent must be running in the guest; ctx bounds the wait for it.
func (m *Machine) SetAuthorizedKeys(ctx context.Context, user string, keys []string) error {
	a, err := dialAgent(ctx, m.AgentSocket)
	if err != nil {
		return err
	}
	defer func() { _ = a.Close() }()
	_, err = a.execute("guest-ssh-add-authorized-keys", map[string]any{"username": user, "keys": keys, "reset": true})
	return err
}

// agent is a session with the guest agent on its virtio-serial channel.
type agent struct {
	conn net.Conn
	r    *bufio.Reader
	stop func() bool
}

// dialAgent connects and synchronises with guest-sync until the agent
// answers (it may still be starting, and stale replies may be queued).
func dialAgent(ctx context.Context, socket string) (*agent, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, fmt.Errorf("virtlauncher: guest agent channel: %w", err)
	}
	a := &agent{conn: conn, r: bufio.NewReaderSize(conn, maxAgentLine)}
	a.stop = context.AfterFunc(ctx, func() { _ = conn.Close() })
	for id := int64(time.Now().UnixNano() & 0x7fffffff); ; id++ {
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		got, err := a.execute("guest-sync", map[string]any{"id": id})
		var n int64
		if err == nil && json.Unmarshal(got, &n) == nil && n == id {
			_ = conn.SetReadDeadline(time.Time{})
			return a, nil
		}
		if ctx.Err() != nil {
			_ = a.Close()
			return nil, fmt.Errorf("virtlauncher: the guest agent did not answer: %w", errors.Join(ctx.Err(), err))
		}
	}
}

func (a *agent) Close() error {
	a.stop()
	return a.conn.Close()
}

// execute sends one command and returns its "return" value.
func (a *agent) execute(command string, arguments any) (json.RawMessage, error) {
	b, err := json.Marshal(map[string]any{"execute": command, "arguments": arguments})
	if err != nil {
		return nil, err
	}
	if _, err := a.conn.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("virtlauncher: guest agent %s: %w", command, err)
	}
	for {
		line, err := a.r.ReadSlice('\n')
		if err != nil {
			return nil, fmt.Errorf("virtlauncher: guest agent %s: %w", command, err)
		}
		var reply struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
		}
		if json.Unmarshal(line, &reply) != nil {
			continue // a partial line left by an earlier session
		}
		if reply.Error != nil {
			return nil, fmt.Errorf("virtlauncher: guest agent %s: %s: %s", command, reply.Error.Class, reply.Error.Desc)
		}
		if reply.Return != nil {
			return reply.Return, nil
		}
	}
}
