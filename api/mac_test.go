package api

import (
	"bytes"
	"net"
	"strings"
	"testing"

	"github.com/virtstation/virtstation/mac"
)

func TestParseMACAnnotation(t *testing.T) {
	fixed := net.HardwareAddr{0x02, 0x00, 0x5e, 0x10, 0x00, 0x01}
	cases := map[string]struct {
		value   string
		want    MACSetting
		wantErr string // substring; "" means no error
	}{
		"absent":             {value: "", want: MACSetting{Mode: MACAuto}},
		"blank":              {value: "  \t", want: MACSetting{Mode: MACAuto}},
		"auto":               {value: "auto", want: MACSetting{Mode: MACAuto}},
		"AUTO":               {value: "AUTO", want: MACSetting{Mode: MACAuto}},
		"off":                {value: "off", want: MACSetting{Mode: MACOff}},
		"off with spaces":    {value: " off ", want: MACSetting{Mode: MACOff}},
		"Off":                {value: "Off", want: MACSetting{Mode: MACOff}},
		"fixed":              {value: "02:00:5e:10:00:01", want: MACSetting{Mode: MACFixed, Address: fixed}},
		"fixed upper case":   {value: "02:00:5E:10:00:01", want: MACSetting{Mode: MACFixed, Address: fixed}},
		"fixed hyphenated":   {value: "02-00-5e-10-00-01", want: MACSetting{Mode: MACFixed, Address: fixed}},
		"fixed with newline": {value: "02:00:5e:10:00:01\n", want: MACSetting{Mode: MACFixed, Address: fixed}},
		"word":               {value: "random", wantErr: "want auto, off or a MAC address"},
		"off with junk":      {value: "off!", wantErr: "want auto, off or a MAC address"},
		"truncated MAC":      {value: "02:00:5e:10:00", wantErr: "want auto, off or a MAC address"},
		"bad hex":            {value: "02:00:5e:10:00:0z", wantErr: "want auto, off or a MAC address"},
		"dotted form":        {value: "0200.5e10.0001", want: MACSetting{Mode: MACFixed, Address: fixed}},
		"multicast":          {value: "01:00:5e:10:00:01", wantErr: "multicast"},
		"broadcast":          {value: "ff:ff:ff:ff:ff:ff", wantErr: "multicast"},
		// The reserved address is refused on masquerade interfaces only,
		// when the webhook pins it.
		"reserved": {value: "02:00:00:00:00:00", want: MACSetting{Mode: MACFixed, Address: mac.Reserved}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseMACAnnotation(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseMACAnnotation(%q) = %+v, %v; want an error containing %q", tc.value, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMACAnnotation(%q): %v", tc.value, err)
			}
			if got.Mode != tc.want.Mode || !bytes.Equal(got.Address, tc.want.Address) {
				t.Errorf("ParseMACAnnotation(%q) = %+v, want %+v", tc.value, got, tc.want)
			}
		})
	}
}

func FuzzParseMACAnnotation(f *testing.F) {
	for _, s := range []string{"", "auto", "OFF", " off ", "02:00:5e:10:00:01", "02-00-5E-10-00-01", "01:00:5e:10:00:01", "02:00:00:00:00:00", "0200.5e10.0001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := ParseMACAnnotation(value)
		if err != nil {
			return
		}
		switch got.Mode {
		case MACAuto, MACOff:
			if got.Address != nil {
				t.Fatalf("ParseMACAnnotation(%q) = %+v: address set outside MACFixed", value, got)
			}
		case MACFixed:
			if len(got.Address) != 6 {
				t.Fatalf("ParseMACAnnotation(%q) = %+v: want a 6-octet address", value, got)
			}
			if err := mac.ValidateAssignable(got.Address); err != nil {
				t.Fatalf("ParseMACAnnotation(%q) = %+v, not assignable: %v", value, got, err)
			}
		default:
			t.Fatalf("ParseMACAnnotation(%q) = %+v: unknown mode", value, got)
		}
	})
}
