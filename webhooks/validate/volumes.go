package validate

import (
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// VolumeDisk is a DataVolume or PVC that a VM attaches directly, outside
// the virtstation.io/data-disks annotation: a volume of its template
// (dataVolume.name, persistentVolumeClaim.claimName), or one of its
// dataVolumeTemplates. When such a disk is labelled as a data disk it
// counts for claims exactly as an annotated one does; any other disk (a
// root disk, a scratch PVC) is none of Virtstation's business.
type VolumeDisk struct {
	// Name is the DataVolume or PVC, in the VM's namespace.
	Name string
	// Field is the path that names it, e.g.
	// spec.template.spec.volumes[3].dataVolume.name or
	// spec.dataVolumeTemplates[0].metadata.name.
	Field string
	// Volume is the volume's name; "" for a dataVolumeTemplate that no
	// volume refers to.
	Volume string
	// ReadOnly: every reference attaches it read-only (a cdrom, a disk or
	// lun marked readonly, or a persistentVolumeClaim with readOnly).
	ReadOnly bool
}

// vmVolumes is the part of a VirtualMachine's spec that names disks. Only
// these fields are decoded, so an unrelated field the Go types would
// refuse cannot make the decode fail.
type vmVolumes struct {
	DataVolumeTemplates []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"dataVolumeTemplates"`
	Template *struct {
		Spec struct {
			Domain struct {
				Devices struct {
					Disks []struct {
						Name string `json:"name"`
						Disk *struct {
							ReadOnly bool `json:"readonly"`
						} `json:"disk"`
						LUN *struct {
							ReadOnly bool `json:"readonly"`
						} `json:"lun"`
						CDRom *struct {
							ReadOnly *bool `json:"readonly"`
						} `json:"cdrom"`
					} `json:"disks"`
				} `json:"devices"`
			} `json:"domain"`
			Volumes []struct {
				Name string `json:"name"`
				claimSource
			} `json:"volumes"`
		} `json:"spec"`
	} `json:"template"`
}

var (
	volumesPath   = field.NewPath("spec", "template", "spec", "volumes")
	templatesPath = field.NewPath("spec", "dataVolumeTemplates")
)

// ParseVolumeDisks returns the disks a VirtualMachine's spec (raw JSON;
// empty or null for none) attaches directly, in order: the volumes first,
// then the dataVolumeTemplates that no volume refers to (KubeVirt creates
// those DataVolumes; one that already exists is attached as it is). A disk
// named more than once counts once, at its first writable reference if it
// has one, else at its first. Disks named in skip (the data-disks
// annotation's, which the annotation accounts for) are left out.
func ParseVolumeDisks(spec []byte, skip []string) ([]VolumeDisk, error) {
	if len(spec) == 0 || string(spec) == "null" {
		return nil, nil
	}
	var v vmVolumes
	if err := json.Unmarshal(spec, &v); err != nil {
		return nil, fmt.Errorf("decode spec volumes: %w", err)
	}
	var out []VolumeDisk
	at := map[string]int{}
	add := func(d VolumeDisk) {
		if d.Name == "" || slices.Contains(skip, d.Name) {
			return
		}
		i, seen := at[d.Name]
		switch {
		case !seen:
			at[d.Name] = len(out)
			out = append(out, d)
		case out[i].ReadOnly && !d.ReadOnly:
			out[i] = d
		}
	}
	if t := v.Template; t != nil {
		readOnly := map[string]bool{}
		for _, d := range t.Spec.Domain.Devices.Disks {
			switch {
			case d.CDRom != nil:
				readOnly[d.Name] = d.CDRom.ReadOnly == nil || *d.CDRom.ReadOnly
			case d.Disk != nil:
				readOnly[d.Name] = d.Disk.ReadOnly
			case d.LUN != nil:
				readOnly[d.Name] = d.LUN.ReadOnly
			}
		}
		for i, vol := range t.Spec.Volumes {
			if c, ok := vol.claim(); ok {
				add(VolumeDisk{Name: c.Name, Field: c.NameField(volumesPath.Index(i)).String(),
					Volume: vol.Name, ReadOnly: readOnly[vol.Name] || c.ReadOnly})
			}
		}
	}
	for i, dvt := range v.DataVolumeTemplates {
		if _, seen := at[dvt.Metadata.Name]; !seen {
			add(VolumeDisk{Name: dvt.Metadata.Name, Field: templatesPath.Index(i).Child("metadata", "name").String()})
		}
	}
	return out, nil
}
