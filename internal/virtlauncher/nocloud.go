package virtlauncher

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// NoCloud is the content of the NoCloud volume virt-launcher builds
// (pkg/cloud-init/cloud-init.go, KubeVirt v1.9.0).
type NoCloud struct {
	// Volume is the cloudInitNoCloud volume's name.
	Volume string
	// UserData, MetaData and NetworkConfig are the files user-data,
	// meta-data and network-config; NetworkConfig is written only when set.
	UserData, MetaData, NetworkConfig []byte
}

// SecretData reads a Secret's data in the VMI's namespace.
type SecretData func(name string) (map[string][]byte, error)

// noCloudMetaData is KubeVirt's NoCloudMetadata, JSON as virt-launcher
// writes it.
type noCloudMetaData struct {
	InstanceType  string            `json:"instance-type,omitempty"`
	InstanceID    string            `json:"instance-id"`
	LocalHostname string            `json:"local-hostname,omitempty"`
	PublicSSHKeys map[string]string `json:"public-keys,omitempty"`
}

// NoCloudOf reads vmi's cloudInitNoCloud volume as virt-launcher does:
// inline userData, else userDataBase64, else the secretRef Secret's
// userdata or userData key (networkData likewise, with networkdata or
// networkData); meta-data holds the firmware UUID as instance-id, the
// hostname (the VMI's, else its name up to the first dot) and the noCloud
// access credentials' keys. ok is false when there is no such volume.
func NoCloudOf(vmi *kubevirtv1.VirtualMachineInstance, secret SecretData) (nc NoCloud, ok bool, err error) {
	var src *kubevirtv1.CloudInitNoCloudSource
	for _, v := range vmi.Spec.Volumes {
		if v.CloudInitNoCloud != nil {
			src, nc.Volume = v.CloudInitNoCloud, v.Name
			break
		}
	}
	if src == nil {
		return NoCloud{}, false, nil
	}
	user, err := rawOrBase64(src.UserData, src.UserDataBase64)
	if err != nil {
		return NoCloud{}, true, fmt.Errorf("virtlauncher: volume %q userDataBase64: %w", nc.Volume, err)
	}
	network, err := rawOrBase64(src.NetworkData, src.NetworkDataBase64)
	if err != nil {
		return NoCloud{}, true, fmt.Errorf("virtlauncher: volume %q networkDataBase64: %w", nc.Volume, err)
	}
	if ref := src.UserDataSecretRef; ref != nil {
		if user, err = secretKey(secret, ref.Name, "userdata", "userData"); err != nil {
			return NoCloud{}, true, err
		}
	}
	if ref := src.NetworkDataSecretRef; ref != nil {
		if network, err = secretKey(secret, ref.Name, "networkdata", "networkData"); err != nil {
			return NoCloud{}, true, err
		}
	}
	if len(user) == 0 && len(network) == 0 {
		return NoCloud{}, true, fmt.Errorf("virtlauncher: volume %q: UserData or NetworkData is required for cloud-init data source", nc.Volume)
	}
	keys, err := noCloudKeys(vmi.Spec.AccessCredentials, secret)
	if err != nil {
		return NoCloud{}, true, err
	}
	md := noCloudMetaData{
		InstanceType:  instancetype(vmi),
		LocalHostname: hostname(vmi),
		PublicSSHKeys: keys,
	}
	if fw := vmi.Spec.Domain.Firmware; fw != nil {
		md.InstanceID = string(fw.UUID)
	}
	if md.InstanceID == "" {
		return NoCloud{}, true, fmt.Errorf("virtlauncher: spec.domain.firmware.uuid is empty; start the VM through KubeVirt's own code (kvadmission.Webhook.StartVM), which sets it")
	}
	if nc.MetaData, err = json.Marshal(md); err != nil {
		return NoCloud{}, true, err
	}
	nc.UserData, nc.NetworkConfig = user, network
	return nc, true, nil
}

func rawOrBase64(raw, b64 string) ([]byte, error) {
	if raw != "" {
		return []byte(raw), nil
	}
	if b64 != "" {
		return base64.StdEncoding.DecodeString(b64)
	}
	return nil, nil
}

// secretKey is the first of keys the Secret holds.
func secretKey(secret SecretData, name string, keys ...string) ([]byte, error) {
	data, err := secret(name)
	if err != nil {
		return nil, fmt.Errorf("virtlauncher: Secret %q: %w", name, err)
	}
	for _, k := range keys {
		if v, ok := data[k]; ok {
			return v, nil
		}
	}
	return nil, fmt.Errorf("virtlauncher: Secret %q has none of the keys %s", name, strings.Join(keys, ", "))
}

// noCloudKeys are the public keys of the access credentials propagated by
// noCloud, numbered across Secrets in key order, as virt-launcher reads
// them from its mounted Secret directories.
func noCloudKeys(creds []kubevirtv1.AccessCredential, secret SecretData) (map[string]string, error) {
	keys := map[string]string{}
	for _, c := range creds {
		k := c.SSHPublicKey
		if k == nil || k.PropagationMethod.NoCloud == nil || k.Source.Secret == nil || k.Source.Secret.SecretName == "" {
			continue
		}
		data, err := secret(k.Source.Secret.SecretName)
		if err != nil {
			return nil, fmt.Errorf("virtlauncher: access credential Secret %q: %w", k.Source.Secret.SecretName, err)
		}
		for _, name := range sortedKeys(data) {
			if len(data[name]) > 0 {
				keys[strconv.Itoa(len(keys))] = string(data[name])
			}
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	return keys, nil
}

func sortedKeys(m map[string][]byte) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// hostname is KubeVirt's dns.SanitizeHostname.
func hostname(vmi *kubevirtv1.VirtualMachineInstance) string {
	if vmi.Spec.Hostname != "" {
		return vmi.Spec.Hostname
	}
	h, _, _ := strings.Cut(vmi.Name, ".")
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}

// instancetype is the instance-type meta-data: the cluster instancetype's
// name before a namespaced one's.
func instancetype(vmi *kubevirtv1.VirtualMachineInstance) string {
	if n := vmi.Annotations[kubevirtv1.ClusterInstancetypeAnnotation]; n != "" {
		return n
	}
	return vmi.Annotations[kubevirtv1.InstancetypeAnnotation]
}

// isoTimeout is virt-launcher's bound on xorrisofs.
const isoTimeout = 10 * time.Second

// WriteISO writes nc into dir/<volume>.iso with xorrisofs, with the
// arguments virt-launcher's defaultIsoFunc passes (Debian package xorriso).
func (nc NoCloud) WriteISO(ctx context.Context, dir string) (string, error) {
	staging, err := os.MkdirTemp(dir, "nocloud-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(staging) }()
	files := map[string][]byte{"user-data": nc.UserData, "meta-data": nc.MetaData}
	if len(nc.NetworkConfig) > 0 {
		files["network-config"] = nc.NetworkConfig
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(staging, name), b, 0o600); err != nil {
			return "", err
		}
	}
	iso := filepath.Join(dir, nc.Volume+".iso")
	ctx, cancel := context.WithTimeout(ctx, isoTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "xorrisofs", "-output", iso, "-volid", "cidata", "-joliet", "-rock",
		"-partition_cyl_align", "on", staging).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("virtlauncher: xorrisofs (Debian package xorriso): %w: %s", err, strings.TrimSpace(string(out)))
	}
	return iso, nil
}
