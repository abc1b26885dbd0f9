package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DiskType is how a data disk is attached.
type DiskType string

// Disk types.
const (
	// DiskTypeDisk is a block disk, formatted and mounted through cloud-init
	// when it has a mount path.
	DiskTypeDisk DiskType = "disk"
	// DiskTypeCDROM is a read-only optical drive; it is never mounted.
	DiskTypeCDROM DiskType = "cdrom"
)

// DataDisk is one entry of virtstation.io/data-disks, with defaults filled in.
type DataDisk struct {
	// Name of the DataVolume or PVC in the VM's namespace.
	Name string `json:"name"`
	// MountPath in the guest; empty means attach without mounting.
	MountPath string `json:"mountPath,omitempty"`
	// Type is disk (default) or cdrom.
	Type DiskType `json:"type,omitempty"`
	// Bus is empty when the entry names none: the mutation then picks the
	// architecture's (Arch.DefaultBus: virtio for a disk; sata for a cdrom
	// on amd64, scsi elsewhere).
	Bus string `json:"bus,omitempty"`
	// ReadOnly attaches the disk read-only; always true for a cdrom.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// ParseDataDisks parses virtstation.io/data-disks: either the shorthand
// "name:/mount[,name[:/mount]]" or a JSON list of DataDisk. It checks the
// syntax and the rules that hold on every architecture, and fills the
// defaults that do not depend on it (type disk; a cdrom is read-only); the
// bus an entry leaves out, and whether the VM's architecture takes the one
// it names, are the mutation's (Arch). Whether the disks exist and the
// mount-path rules are checked where the cluster and the policies are
// known. fld is the
// annotation's path, for the errors. The value is at most
// MaxAnnotationBytes long, with at most MaxDataDisks entries.
func ParseDataDisks(value string, fld *field.Path) ([]DataDisk, field.ErrorList) {
	if len(value) > MaxAnnotationBytes {
		return nil, field.ErrorList{field.TooLong(fld, "", MaxAnnotationBytes)}
	}
	v := strings.TrimSpace(value)
	if v == "" {
		return nil, nil
	}
	var disks []DataDisk
	if strings.HasPrefix(v, "[") {
		dec := json.NewDecoder(bytes.NewReader([]byte(v)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&disks); err != nil {
			return nil, field.ErrorList{field.Invalid(fld, value, fmt.Sprintf(
				"not a valid JSON list of {name, mountPath, type, bus, readOnly}: %v (fix: use the shorthand name:/mount,… or valid JSON)", err))}
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, field.ErrorList{field.Invalid(fld, value, "trailing data after the JSON list (fix: remove it)")}
		}
	} else {
		for _, entry := range strings.Split(v, ",") {
			name, mount, _ := strings.Cut(strings.TrimSpace(entry), ":")
			disks = append(disks, DataDisk{Name: strings.TrimSpace(name), MountPath: strings.TrimSpace(mount)})
		}
	}
	if len(disks) > MaxDataDisks {
		return nil, field.ErrorList{field.TooMany(fld, len(disks), MaxDataDisks)}
	}
	var errs field.ErrorList
	seen, mounts := sets.New[string](), sets.New[string]()
	for i := range disks {
		errs = append(errs, defaultAndCheckDisk(&disks[i], fld.Index(i))...)
		if seen.Has(disks[i].Name) {
			errs = append(errs, field.Duplicate(fld.Index(i).Child("name"), disks[i].Name))
		}
		seen.Insert(disks[i].Name)
		if m := disks[i].MountPath; m != "" {
			if mounts.Has(m) {
				errs = append(errs, field.Duplicate(fld.Index(i).Child("mountPath"), m))
			}
			mounts.Insert(m)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return disks, nil
}

func defaultAndCheckDisk(d *DataDisk, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d.Name == "" {
		errs = append(errs, field.Required(fld.Child("name"), "the name of a DataVolume or PVC labelled "+LabelDataDisk+"=true"))
	} else if msgs := validation.IsDNS1123Subdomain(d.Name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(fld.Child("name"), d.Name, strings.Join(msgs, "; ")))
	}
	if d.Type == "" {
		d.Type = DiskTypeDisk
	}
	switch d.Type {
	case DiskTypeDisk:
		if d.Bus != "" && !diskBuses.Has(d.Bus) {
			errs = append(errs, field.NotSupported(fld.Child("bus"), d.Bus, sets.List(diskBuses)))
		}
		if d.Bus == BusSATA && d.ReadOnly {
			// KubeVirt: "sata hard-disks do not support read-only" (a sata
			// cdrom is read-only, a sata disk cannot be).
			errs = append(errs, field.Invalid(fld.Child("readOnly"), true,
				"KubeVirt refuses a read-only disk on the sata bus; use bus virtio or scsi (or leave bus out), or drop readOnly"))
		}
	case DiskTypeCDROM:
		if d.Bus != "" && !cdromBuses.Has(d.Bus) {
			errs = append(errs, field.NotSupported(fld.Child("bus"), d.Bus, sets.List(cdromBuses)))
		}
		if d.MountPath != "" {
			errs = append(errs, field.Invalid(fld.Child("mountPath"), d.MountPath, "a cdrom is attached read-only and never mounted; remove mountPath"))
		}
		d.ReadOnly = true
	default:
		errs = append(errs, field.NotSupported(fld.Child("type"), string(d.Type), []string{string(DiskTypeDisk), string(DiskTypeCDROM)}))
	}
	if d.MountPath != "" && !strings.HasPrefix(d.MountPath, "/") {
		errs = append(errs, field.Invalid(fld.Child("mountPath"), d.MountPath, "must be an absolute path such as /data"))
	}
	if strings.ContainsAny(d.MountPath, "\x00\n\r") {
		errs = append(errs, field.Invalid(fld.Child("mountPath"), d.MountPath, "must not contain NUL or line breaks"))
	}
	return errs
}
