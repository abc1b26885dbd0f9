package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// pathDataDisks is where the data-disks errors point.
var pathDataDisks = field.NewPath("metadata", "annotations").Key(AnnotationDataDisks)

// assertErrors compares field errors by type, path and bad value; the
// details are prose and free to change.
func assertErrors(t *testing.T, got, want field.ErrorList) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("errors = %v, want %v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Type != w.Type || g.Field != w.Field || !reflect.DeepEqual(g.BadValue, w.BadValue) {
			t.Errorf("errors[%d] = %s %s %#v, want %s %s %#v", i, g.Type, g.Field, g.BadValue, w.Type, w.Field, w.BadValue)
		}
	}
}

func TestParseDataDisks(t *testing.T) {
	disk := func(name, mount string) DataDisk {
		return DataDisk{Name: name, MountPath: mount, Type: DiskTypeDisk}
	}
	seventeen := make([]string, 17)
	for i := range seventeen {
		seventeen[i] = fmt.Sprintf("d%d:/m%d", i, i)
	}
	sixteen := make([]DataDisk, 16)
	for i := range sixteen {
		sixteen[i] = disk(fmt.Sprintf("d%d", i), fmt.Sprintf("/m%d", i))
	}
	// The largest list the limits allow: MaxDataDisks entries in JSON, each
	// a 253-character name and a 255-character mount path, fits in
	// MaxAnnotationBytes.
	largest, largestWant := make([]DataDisk, MaxDataDisks), make([]DataDisk, MaxDataDisks)
	for i := range largest {
		name := fmt.Sprintf("%02d", i) + strings.Repeat("a", 251)
		mount := "/" + fmt.Sprintf("%02d", i) + strings.Repeat("m", 252)
		largest[i] = DataDisk{Name: name, MountPath: mount, Type: DiskTypeDisk, Bus: "", ReadOnly: false}
		largestWant[i] = disk(name, mount)
	}
	largestJSON, err := json.Marshal(largest)
	if err != nil {
		t.Fatal(err)
	}
	badJSON := `[{"name":"a",`
	unknownField := `[{"name":"a","size":"10Gi"}]`
	trailing := `[{"name":"a"}] [{"name":"b"}]`

	cases := map[string]struct {
		value   string
		want    []DataDisk
		wantErr field.ErrorList
	}{
		"the largest list the limits allow": {
			value: string(largestJSON),
			want:  largestWant,
		},
		"value longer than the annotation limit": {
			value:   "home:/home" + strings.Repeat(" ", MaxAnnotationBytes),
			wantErr: field.ErrorList{field.TooLong(pathDataDisks, "", MaxAnnotationBytes)},
		},
		"absent": {value: ""},
		"blank":  {value: " \t\n"},
		"shorthand": {
			value: "home:/home,scratch:/mnt/scratch",
			want:  []DataDisk{disk("home", "/home"), disk("scratch", "/mnt/scratch")},
		},
		"shorthand with whitespace": {
			value: "  home : /home ,\tscratch:/mnt/scratch \n",
			want:  []DataDisk{disk("home", "/home"), disk("scratch", "/mnt/scratch")},
		},
		"shorthand without a mount path": {
			value: "home:/home,raw",
			want:  []DataDisk{disk("home", "/home"), disk("raw", "")},
		},
		"shorthand with an empty mount path": {
			value: "raw:",
			want:  []DataDisk{disk("raw", "")},
		},
		"shorthand dotted name": {
			value: "data.v1:/data",
			want:  []DataDisk{disk("data.v1", "/data")},
		},
		"shorthand, sixteen disks": {
			value: strings.Join(seventeen[:16], ","),
			want:  sixteen,
		},
		"JSON defaults": {
			value: `[{"name":"home","mountPath":"/home"},{"name":"raw"}]`,
			want:  []DataDisk{disk("home", "/home"), disk("raw", "")},
		},
		"JSON with surrounding whitespace": {
			value: "\n [{\"name\":\"home\",\"mountPath\":\"/home\"}] \n",
			want:  []DataDisk{disk("home", "/home")},
		},
		"JSON empty list": {
			value: `[]`,
			want:  []DataDisk{},
		},
		"JSON cdrom is read-only, its bus left to the architecture": {
			value: `[{"name":"iso","type":"cdrom"}]`,
			want:  []DataDisk{{Name: "iso", Type: DiskTypeCDROM, ReadOnly: true}},
		},
		"JSON read-only disk on sata": {
			value:   `[{"name":"ref","bus":"sata","readOnly":true}]`,
			wantErr: field.ErrorList{field.Invalid(pathDataDisks.Index(0).Child("readOnly"), true, "")},
		},
		"JSON sata cdrom": {
			value: `[{"name":"iso","type":"cdrom","bus":"sata"}]`,
			want:  []DataDisk{{Name: "iso", Type: DiskTypeCDROM, Bus: "sata", ReadOnly: true}},
		},
		"JSON cdrom on scsi": {
			value: `[{"name":"iso","type":"cdrom","bus":"scsi","readOnly":false}]`,
			want:  []DataDisk{{Name: "iso", Type: DiskTypeCDROM, Bus: "scsi", ReadOnly: true}},
		},
		"JSON explicit bus and read-only disk": {
			value: `[{"name":"ref","mountPath":"/ref","type":"disk","bus":"scsi","readOnly":true},{"name":"usbstick","bus":"usb"}]`,
			want: []DataDisk{
				{Name: "ref", MountPath: "/ref", Type: DiskTypeDisk, Bus: "scsi", ReadOnly: true},
				{Name: "usbstick", Type: DiskTypeDisk, Bus: "usb"},
			},
		},
		"bad JSON": {
			value:   badJSON,
			wantErr: field.ErrorList{field.Invalid(pathDataDisks, badJSON, "")},
		},
		"JSON that is not a list of objects": {
			value:   `["home"]`,
			wantErr: field.ErrorList{field.Invalid(pathDataDisks, `["home"]`, "")},
		},
		"unknown JSON field": {
			value:   unknownField,
			wantErr: field.ErrorList{field.Invalid(pathDataDisks, unknownField, "")},
		},
		"trailing data after the JSON list": {
			value:   trailing,
			wantErr: field.ErrorList{field.Invalid(pathDataDisks, trailing, "trailing data after the JSON list")},
		},
		"empty name in the shorthand": {
			value:   ":/home",
			wantErr: field.ErrorList{field.Required(pathDataDisks.Index(0).Child("name"), "")},
		},
		"trailing comma": {
			value:   "home:/home,",
			wantErr: field.ErrorList{field.Required(pathDataDisks.Index(1).Child("name"), "")},
		},
		"missing name in JSON": {
			value:   `[{"mountPath":"/home"}]`,
			wantErr: field.ErrorList{field.Required(pathDataDisks.Index(0).Child("name"), "")},
		},
		"name that is not a DNS name": {
			value:   "home:/home,My_Disk:/data",
			wantErr: field.ErrorList{field.Invalid(pathDataDisks.Index(1).Child("name"), "My_Disk", "")},
		},
		"junk after the JSON list": {
			value:   `[{"name":"a"}]]`,
			wantErr: field.ErrorList{field.Invalid(pathDataDisks, `[{"name":"a"}]]`, "")},
		},
		"duplicate mount path": {
			value:   "x:/data,y:/data",
			wantErr: field.ErrorList{field.Duplicate(pathDataDisks.Index(1).Child("mountPath"), "/data")},
		},
		"NUL in a mount path": {
			value:   `[{"name":"x","mountPath":"/da\u0000ta"}]`,
			wantErr: field.ErrorList{field.Invalid(pathDataDisks.Index(0).Child("mountPath"), "/da\x00ta", "")},
		},
		"duplicate name": {
			value:   "home:/home,scratch:/scratch,home:/other",
			wantErr: field.ErrorList{field.Duplicate(pathDataDisks.Index(2).Child("name"), "home")},
		},
		"unknown type": {
			value: `[{"name":"fd","type":"floppy"}]`,
			wantErr: field.ErrorList{field.NotSupported(pathDataDisks.Index(0).Child("type"), "floppy",
				[]string{string(DiskTypeDisk), string(DiskTypeCDROM)})},
		},
		"wrong bus for a disk": {
			value:   `[{"name":"home","bus":"ide"}]`,
			wantErr: field.ErrorList{field.NotSupported(pathDataDisks.Index(0).Child("bus"), "ide", sets.List(diskBuses))},
		},
		"wrong bus for a cdrom": {
			value:   `[{"name":"iso","type":"cdrom","bus":"virtio"}]`,
			wantErr: field.ErrorList{field.NotSupported(pathDataDisks.Index(0).Child("bus"), "virtio", sets.List(cdromBuses))},
		},
		"cdrom with a mount path": {
			value:   `[{"name":"iso","type":"cdrom","mountPath":"/media/iso"}]`,
			wantErr: field.ErrorList{field.Invalid(pathDataDisks.Index(0).Child("mountPath"), "/media/iso", "")},
		},
		"relative mount path": {
			value:   "home:home",
			wantErr: field.ErrorList{field.Invalid(pathDataDisks.Index(0).Child("mountPath"), "home", "")},
		},
		"every error of every entry": {
			value: `[{"name":"Bad","mountPath":"rel"},{"name":"iso","type":"cdrom","bus":"usb"}]`,
			wantErr: field.ErrorList{
				field.Invalid(pathDataDisks.Index(0).Child("name"), "Bad", ""),
				field.Invalid(pathDataDisks.Index(0).Child("mountPath"), "rel", ""),
				field.NotSupported(pathDataDisks.Index(1).Child("bus"), "usb", sets.List(cdromBuses)),
			},
		},
		"more than sixteen disks": {
			value:   strings.Join(seventeen, ","),
			wantErr: field.ErrorList{field.TooMany(pathDataDisks, 17, MaxDataDisks)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := ParseDataDisks(tc.value, pathDataDisks)
			assertErrors(t, errs, tc.wantErr)
			if len(tc.wantErr) > 0 {
				if got != nil {
					t.Errorf("ParseDataDisks(%q) = %+v with errors, want nil", tc.value, got)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseDataDisks(%q) = %+v, want %+v", tc.value, got, tc.want)
			}
		})
	}
}

func FuzzParseDataDisks(f *testing.F) {
	for _, s := range []string{
		"", "home:/home,scratch:/mnt/scratch", " a : /x , b", "a,a", ":/x", "home:rel",
		`[{"name":"home","mountPath":"/home"}]`,
		`[{"name":"iso","type":"cdrom"}]`,
		`[{"name":"iso","type":"cdrom","bus":"scsi","mountPath":"/x"}]`,
		`[{"name":"a","type":"disk","bus":"usb","readOnly":true}]`,
		`[{"name":"a","type":"disk","bus":"sata","readOnly":true}]`,
		`[{"name":"a","type":"tape"}]`,
		`[{"name":"a"}] x`, `[{"name":"a","size":1}]`, `[null]`, `[]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		disks, errs := ParseDataDisks(value, pathDataDisks)
		if len(errs) > 0 {
			if disks != nil {
				t.Fatalf("ParseDataDisks(%q) = %+v with errors %v", value, disks, errs)
			}
			for _, e := range errs {
				if !strings.HasPrefix(e.Field, pathDataDisks.String()) {
					t.Fatalf("ParseDataDisks(%q): error %v outside the annotation", value, e)
				}
			}
			return
		}
		if len(value) > MaxAnnotationBytes {
			t.Fatalf("ParseDataDisks accepted a %d-byte value, over the %d-byte limit", len(value), MaxAnnotationBytes)
		}
		if len(disks) > MaxDataDisks {
			t.Fatalf("ParseDataDisks(%q) = %d disks, more than %d", value, len(disks), MaxDataDisks)
		}
		seen := sets.New[string]()
		for i, d := range disks {
			if d.Name == "" || len(validation.IsDNS1123Subdomain(d.Name)) > 0 {
				t.Fatalf("ParseDataDisks(%q)[%d].Name = %q, want a DNS-1123 subdomain", value, i, d.Name)
			}
			if seen.Has(d.Name) {
				t.Fatalf("ParseDataDisks(%q)[%d].Name = %q repeats", value, i, d.Name)
			}
			seen.Insert(d.Name)
			switch d.Type {
			case DiskTypeDisk:
				if d.Bus != "" && !diskBuses.Has(d.Bus) {
					t.Fatalf("ParseDataDisks(%q)[%d] = %+v: bus not allowed for a disk", value, i, d)
				}
				if d.Bus == "sata" && d.ReadOnly {
					t.Fatalf("ParseDataDisks(%q)[%d] = %+v: KubeVirt refuses a read-only sata disk", value, i, d)
				}
			case DiskTypeCDROM:
				if d.Bus != "" && !cdromBuses.Has(d.Bus) || !d.ReadOnly || d.MountPath != "" {
					t.Fatalf("ParseDataDisks(%q)[%d] = %+v: want a read-only, unmounted cdrom on sata or scsi", value, i, d)
				}
			default:
				t.Fatalf("ParseDataDisks(%q)[%d].Type = %q", value, i, d.Type)
			}
			if d.MountPath != "" && !strings.HasPrefix(d.MountPath, "/") {
				t.Fatalf("ParseDataDisks(%q)[%d].MountPath = %q, want absolute", value, i, d.MountPath)
			}
		}
	})
}
