package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestParseInjected(t *testing.T) {
	tests := map[string]struct {
		value   string
		want    Injected
		wantErr bool
	}{
		"empty is an empty record": {value: "", want: Injected{}},
		"a record the webhook wrote": {
			value: `{"mac":{"interface":"default","address":"02:aa:bb:cc:dd:ee","source":"derived"},"dataDisks":[{"name":"home","kind":"DataVolume","disk":"vs-home","serial":"home","type":"disk","bus":"virtio","mountPath":"/home"}]}`,
			want: Injected{
				MAC:       &InjectedMAC{Interface: "default", Address: "02:aa:bb:cc:dd:ee", Source: MACSourceDerived},
				DataDisks: []InjectedDisk{{Name: "home", Kind: KindDataVolume, Disk: "vs-home", Serial: "home", Type: "disk", Bus: "virtio", MountPath: "/home"}},
			},
		},
		"not JSON": {value: "{", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseInjected(tc.value)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseInjected(%q) error = %v, want error %v", tc.value, err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseInjected(%q) = %+v, want %+v", tc.value, got, tc.want)
			}
		})
	}
}

// FuzzParseInjected: ParseInjected never panics, a failed parse is the
// empty record, and a record it reads is written back the same after one
// more read (the webhook rewrites the records it reads).
func FuzzParseInjected(f *testing.F) {
	f.Add(``)
	f.Add(`{}`)
	f.Add(`{"mac":{"interface":"default","address":"02:00:00:00:00:01","source":"annotation","addedInterface":true}}`)
	f.Add(`{"dataDisks":[{"name":"iso","kind":"PersistentVolumeClaim","disk":"vs-iso","serial":"iso","type":"cdrom","bus":"sata","readOnly":true}]}`)
	f.Add(`{"gpus":{"added":[{"name":"gpu0","deviceName":"nvidia.com/H100"}],"movedResources":["nvidia.com/gpu"]},"sshKeys":{"user":"alice","propagation":"cloudInit","keys":2}}`)
	f.Add(`{"gpus":{"movedResources":["nvidia.com/gpu"],"moved":[{"key":"nvidia.com/gpu","request":"1","limit":2,"entries":["gpu0","gpu1"]}]}}`)
	f.Add(`{"gpus":{"moved":[{"key":"nvidia.com/gpu","request":null}]}}`)
	f.Add(`{"video":{"type":"virtio","addedTablet":true},"cloudInit":{"volume":"cloudinitdisk","secret":"vm-user-data"}}`)
	f.Add(`null`)
	f.Add(`[1]`)
	f.Fuzz(func(t *testing.T, value string) {
		rec, err := ParseInjected(value)
		if err != nil {
			if !reflect.DeepEqual(rec, Injected{}) {
				t.Fatalf("ParseInjected(%q) failed (%v) but returned %+v", value, err, rec)
			}
			return
		}
		_ = rec.Summary()
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatalf("encode %+v: %v", rec, err)
		}
		again, err := ParseInjected(string(b))
		if err != nil {
			t.Fatalf("ParseInjected(%s), re-read of %q: %v", b, value, err)
		}
		b2, err := json.Marshal(again)
		if err != nil {
			t.Fatalf("encode %+v: %v", again, err)
		}
		if string(b2) != string(b) {
			t.Fatalf("round trip of %q: wrote %s, then %s", value, b, b2)
		}
	})
}
