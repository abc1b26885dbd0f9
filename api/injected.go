package api

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Injected is the record of what the mutating webhook did, stored as JSON in
// the virtstation.io/injected annotation (AnnotationInjected). Each mutation
// step owns one field. The mutating webhook writes it; the claim reconciler,
// the deletion guard and the injection reporter read it.
type Injected struct {
	MAC       *InjectedMAC       `json:"mac,omitempty"`
	DataDisks []InjectedDisk     `json:"dataDisks,omitempty"`
	GPUs      *InjectedGPUs      `json:"gpus,omitempty"`
	SSHKeys   *InjectedSSHKeys   `json:"sshKeys,omitempty"`
	Video     *InjectedVideo     `json:"video,omitempty"`
	CloudInit *InjectedCloudInit `json:"cloudInit,omitempty"`
}

// InjectedDisk records one attached data disk.
type InjectedDisk struct {
	// Name of the DataVolume or PVC.
	Name string `json:"name"`
	// Kind is KindDataVolume or KindPVC.
	Kind string `json:"kind"`
	// Disk is the name of the disk and volume in the VM spec.
	Disk string `json:"disk"`
	// Serial shows in the guest as /dev/disk/by-id/virtio-<serial>.
	Serial    string `json:"serial"`
	Type      string `json:"type"`
	Bus       string `json:"bus"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	MountPath string `json:"mountPath,omitempty"`
}

// InjectedGPUs records the GPUs the webhook added and the resource keys it
// moved into gpus[].
type InjectedGPUs struct {
	// Added are the gpus[] entries the annotation manages.
	Added []InjectedGPU `json:"added,omitempty"`
	// MovedResources are domain.resources keys turned into gpus[] entries.
	MovedResources []string `json:"movedResources,omitempty"`
	// Moved says, for the keys of MovedResources, what the user gave and
	// which gpus[] entries it became, so that releasing the VM (removing
	// the virtstation.io/managed label) puts the keys back. Records written
	// before it have only MovedResources.
	Moved []MovedGPUResource `json:"moved,omitempty"`
}

// MovedGPUResource is one `*/gpu` key of domain.resources turned into
// gpus[] entries.
type MovedGPUResource struct {
	// Key is the resource name, e.g. nvidia.com/gpu.
	Key string `json:"key"`
	// Request and Limit are the values of requests[Key] and limits[Key]
	// exactly as the user gave them (a JSON string or number); absent when
	// the user gave none.
	Request json.RawMessage `json:"request,omitempty"`
	Limit   json.RawMessage `json:"limit,omitempty"`
	// Entries are the names of the gpus[] entries the key became.
	Entries []string `json:"entries,omitempty"`
}

// InjectedGPU is one gpus[] entry.
type InjectedGPU struct {
	Name       string `json:"name"`
	DeviceName string `json:"deviceName"`
}

// InjectedSSHKeys records how SSH keys reach the guest.
type InjectedSSHKeys struct {
	User        string `json:"user"`
	Propagation string `json:"propagation"`
	// Secret is the per-VM keys Secret (qemuGuestAgent).
	Secret string `json:"secret,omitempty"`
}

// InjectedVideo records the video device.
type InjectedVideo struct {
	Type string `json:"type"`
	// Replaced is the user's own video.type that Type replaced; nil when
	// the VM had no video device. Removing the annotation puts it back.
	Replaced *string `json:"replaced,omitempty"`
	// AddedTablet: the webhook added a USB tablet so the VNC pointer tracks.
	AddedTablet bool `json:"addedTablet,omitempty"`
}

// InjectedCloudInit records how Virtstation's cloud-config part reaches the guest.
type InjectedCloudInit struct {
	// Volume is the cloud-init volume holding the merged user-data.
	Volume string `json:"volume"`
	// AddedVolume: the VM had no cloud-init volume; the webhook added it.
	AddedVolume bool `json:"addedVolume,omitempty"`
	// Secret holds the merged user-data when it is too large to inline or
	// the user's own user-data came from a Secret.
	Secret string `json:"secret,omitempty"`
	// UserSecret is the user's own cloud-init secretRef, merged into Secret.
	UserSecret string `json:"userSecret,omitempty"`
	// UserDataBase64: the user's own inline user-data, now in Secret, was
	// given as userDataBase64. It goes back there, and later admissions keep
	// the base64 form when the merge fits inline again.
	UserDataBase64 bool `json:"userDataBase64,omitempty"`
}

// InjectedMAC records a MAC the webhook pinned.
type InjectedMAC struct {
	// Interface is the name of the pod-network interface.
	Interface string `json:"interface"`
	// Address is the pinned MAC.
	Address string `json:"address"`
	// Source is MACSourceDerived or MACSourceAnnotation.
	Source string `json:"source"`
	// AddedInterface is true when the webhook created the default
	// masquerade interface and pod network to pin the MAC on.
	AddedInterface bool `json:"addedInterface,omitempty"`
}

// Sources of a pinned MAC.
const (
	// MACSourceDerived: hashed from the VM's namespace and name.
	MACSourceDerived = "derived"
	// MACSourceAnnotation: given in the virtstation.io/mac annotation.
	MACSourceAnnotation = "annotation"
)

// IsZero reports whether nothing was injected.
func (i Injected) IsZero() bool {
	return i.MAC == nil && len(i.DataDisks) == 0 && i.GPUs == nil && i.SSHKeys == nil && i.Video == nil && i.CloudInit == nil
}

// ParseInjected reads a virtstation.io/injected value. An empty value is an
// empty record.
func ParseInjected(value string) (Injected, error) {
	var in Injected
	if value == "" {
		return in, nil
	}
	if err := json.Unmarshal([]byte(value), &in); err != nil {
		return Injected{}, fmt.Errorf("parse injected record: %w", err)
	}
	return in, nil
}

// Summary is a one-line, human-readable account of the record, for Events.
func (i Injected) Summary() string {
	var parts []string
	if i.MAC != nil {
		s := fmt.Sprintf("pinned MAC %s (%s) on interface %q", i.MAC.Address, i.MAC.Source, i.MAC.Interface)
		if i.MAC.AddedInterface {
			s += ", added as the default masquerade interface on the pod network"
		}
		parts = append(parts, s)
	}
	for _, d := range i.DataDisks {
		s := fmt.Sprintf("attached %s %s as %s (serial %s)", d.Kind, d.Name, d.Type, d.Serial)
		if d.MountPath != "" {
			s += " mounted at " + d.MountPath
		}
		parts = append(parts, s)
	}
	if i.GPUs != nil {
		for _, g := range i.GPUs.Added {
			parts = append(parts, fmt.Sprintf("added GPU %s (%s)", g.Name, g.DeviceName))
		}
		if len(i.GPUs.MovedResources) > 0 {
			parts = append(parts, "moved resources "+strings.Join(i.GPUs.MovedResources, ", ")+" into gpus")
		}
	}
	if i.SSHKeys != nil {
		s := fmt.Sprintf("SSH keys for %s via %s", i.SSHKeys.User, i.SSHKeys.Propagation)
		if i.SSHKeys.Secret != "" {
			s += " from Secret " + i.SSHKeys.Secret
		}
		parts = append(parts, s)
	}
	if i.Video != nil {
		s := "video " + i.Video.Type
		if i.Video.AddedTablet {
			s += " with a USB tablet"
		}
		parts = append(parts, s)
	}
	if i.CloudInit != nil && i.CloudInit.Secret != "" {
		parts = append(parts, "cloud-init user-data in Secret "+i.CloudInit.Secret)
	}
	if len(parts) == 0 {
		return "nothing injected"
	}
	return strings.Join(parts, "; ")
}
