package validate

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseVolumeDisks(t *testing.T) {
	const vols = "spec.template.spec.volumes"
	tests := map[string]struct {
		spec string
		skip []string
		want []VolumeDisk
	}{
		"no spec":     {},
		"null spec":   {spec: `null`},
		"no template": {spec: `{"running":false}`},
		"container disk and cloud-init only": {
			spec: `{"template":{"spec":{"volumes":[{"name":"root","containerDisk":{"image":"x"}},{"name":"ci","cloudInitNoCloud":{}}]}}}`,
		},
		"data volume and pvc, writable": {
			spec: `{"template":{"spec":{"domain":{"devices":{"disks":[{"name":"a","disk":{}},{"name":"b","disk":{"bus":"virtio"}}]}},
				"volumes":[{"name":"root","containerDisk":{}},{"name":"a","dataVolume":{"name":"home"}},{"name":"b","persistentVolumeClaim":{"claimName":"scratch"}}]}}}`,
			want: []VolumeDisk{
				{Name: "home", Field: vols + "[1].dataVolume.name", Volume: "a"},
				{Name: "scratch", Field: vols + "[2].persistentVolumeClaim.claimName", Volume: "b"},
			},
		},
		"read-only references": {
			spec: `{"template":{"spec":{"domain":{"devices":{"disks":[
				{"name":"cd","cdrom":{}},{"name":"ro","disk":{"readonly":true}},{"name":"lun","lun":{"readonly":true}},{"name":"cdrw","cdrom":{"readonly":false}}]}},
				"volumes":[{"name":"cd","dataVolume":{"name":"iso"}},{"name":"ro","dataVolume":{"name":"ro"}},{"name":"lun","dataVolume":{"name":"lun"}},
					{"name":"cdrw","dataVolume":{"name":"cdrw"}},{"name":"pvcro","persistentVolumeClaim":{"claimName":"pvcro","readOnly":true}}]}}}`,
			want: []VolumeDisk{
				{Name: "iso", Field: vols + "[0].dataVolume.name", Volume: "cd", ReadOnly: true},
				{Name: "ro", Field: vols + "[1].dataVolume.name", Volume: "ro", ReadOnly: true},
				{Name: "lun", Field: vols + "[2].dataVolume.name", Volume: "lun", ReadOnly: true},
				{Name: "cdrw", Field: vols + "[3].dataVolume.name", Volume: "cdrw"},
				{Name: "pvcro", Field: vols + "[4].persistentVolumeClaim.claimName", Volume: "pvcro", ReadOnly: true},
			},
		},
		"a disk named twice counts once, at its first writable reference": {
			spec: `{"template":{"spec":{"domain":{"devices":{"disks":[{"name":"cd","cdrom":{}}]}},
				"volumes":[{"name":"cd","dataVolume":{"name":"home"}},{"name":"rw","persistentVolumeClaim":{"claimName":"home"}},{"name":"again","dataVolume":{"name":"home"}}]}}}`,
			want: []VolumeDisk{{Name: "home", Field: vols + "[1].persistentVolumeClaim.claimName", Volume: "rw"}},
		},
		"annotated disks are left to the annotation": {
			spec: `{"template":{"spec":{"volumes":[{"name":"vs-data","dataVolume":{"name":"data"}},{"name":"x","dataVolume":{"name":"other"}}]}}}`,
			skip: []string{"data"},
			want: []VolumeDisk{{Name: "other", Field: vols + "[1].dataVolume.name", Volume: "x"}},
		},
		"data volume templates no volume refers to": {
			spec: `{"dataVolumeTemplates":[{"metadata":{"name":"root"}},{"metadata":{"name":"home"}}],
				"template":{"spec":{"volumes":[{"name":"root","dataVolume":{"name":"root"}}]}}}`,
			want: []VolumeDisk{
				{Name: "root", Field: vols + "[0].dataVolume.name", Volume: "root"},
				{Name: "home", Field: "spec.dataVolumeTemplates[1].metadata.name"},
			},
		},
		"empty names are not disks": {
			spec: `{"dataVolumeTemplates":[{"metadata":{}}],"template":{"spec":{"volumes":[{"name":"a","dataVolume":{}},{"name":"b","persistentVolumeClaim":{"claimName":""}}]}}}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseVolumeDisks([]byte(tc.spec), tc.skip)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseVolumeDisks =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestParseVolumeDisksRejectsWrongTypes(t *testing.T) {
	for _, spec := range []string{`[]`, `{"template":{"spec":{"volumes":{}}}}`, `{"template":{"spec":{"volumes":[{"dataVolume":{"name":7}}]}}}`} {
		if _, err := ParseVolumeDisks([]byte(spec), nil); err == nil || !strings.Contains(err.Error(), "decode spec volumes") {
			t.Errorf("ParseVolumeDisks(%s) error = %v, want a decode error", spec, err)
		}
	}
}

// FuzzParseVolumeDisks: any input either fails to decode or gives disks
// with names, field paths inside the spec, and no name twice.
func FuzzParseVolumeDisks(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`,
		`{"template":{"spec":{"volumes":[{"name":"a","dataVolume":{"name":"home"}},{"name":"b","persistentVolumeClaim":{"claimName":"home","readOnly":true}}]}}}`,
		`{"dataVolumeTemplates":[{"metadata":{"name":"x"}}],"template":{"spec":{"domain":{"devices":{"disks":[{"name":"a","cdrom":{"readonly":false}}]}}}}}`,
	} {
		f.Add([]byte(s), "home")
	}
	f.Fuzz(func(t *testing.T, spec []byte, skip string) {
		disks, err := ParseVolumeDisks(spec, []string{skip})
		if err != nil {
			return
		}
		if !json.Valid(spec) && len(spec) > 0 {
			t.Fatalf("invalid JSON %q parsed", spec)
		}
		seen := map[string]bool{}
		for _, d := range disks {
			if d.Name == "" || d.Name == skip || seen[d.Name] {
				t.Fatalf("disk %+v: empty, skipped or repeated name", d)
			}
			seen[d.Name] = true
			if !strings.HasPrefix(d.Field, "spec.template.spec.volumes[") && !strings.HasPrefix(d.Field, "spec.dataVolumeTemplates[") {
				t.Fatalf("disk %+v: field outside the spec", d)
			}
		}
	})
}
