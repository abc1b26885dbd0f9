package mac

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	want := net.HardwareAddr{0x02, 0xab, 0xcd, 0xef, 0x01, 0x23}
	cases := map[string]struct {
		in      string
		want    net.HardwareAddr
		wantErr bool
	}{
		"colon separated":         {in: "02:ab:cd:ef:01:23", want: want},
		"hyphen separated":        {in: "02-ab-cd-ef-01-23", want: want},
		"upper case":              {in: "02:AB:CD:EF:01:23", want: want},
		"mixed case":              {in: "02:aB:Cd:eF:01:23", want: want},
		"globally administered":   {in: "00:1a:2b:3c:4d:5e", want: net.HardwareAddr{0x00, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e}},
		"empty":                   {in: "", wantErr: true},
		"five octets":             {in: "02:ab:cd:ef:01", wantErr: true},
		"seven octets":            {in: "02:ab:cd:ef:01:23:45", wantErr: true},
		"EUI-64":                  {in: "02:ab:cd:ef:01:23:45:67", wantErr: true},
		"one-digit octet":         {in: "2:ab:cd:ef:01:23", wantErr: true},
		"bad hex digit":           {in: "02:ab:cd:ef:01:2g", wantErr: true},
		"bad hex in first octet":  {in: "0x:ab:cd:ef:01:23", wantErr: true},
		"dotted form":             {in: "02ab.cdef.0123", want: want},
		"dotted form, upper case": {in: "02AB.CDEF.0123", want: want},
		"dotted EUI-64":           {in: "02ab.cdef.0123.4567", wantErr: true},
		"mixed separators":        {in: "02:ab-cd:ef:01:23", wantErr: true},
		"right length, no seps":   {in: "02abcdef0123abcde", wantErr: true},
		"leading space":           {in: " 02:ab:cd:ef:01:2", wantErr: true},
		"trailing separator":      {in: "02:ab:cd:ef:01:2:", wantErr: true},
		"space separated":         {in: "02 ab cd ef 01 23", wantErr: true},
		"infiniband 20 octets":    {in: "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01", wantErr: true},
		"dotted form, 17 chars":   {in: "02ab.cdef.0123.45", wantErr: true},
		"colon form with a blank": {in: "02:ab:cd:ef:01: 3", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Parse(%q) = %v, want an error", tc.in, got)
				}
				// The message reaches users in denials: it must name the
				// value and show the expected form.
				if !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in)) || !strings.Contains(err.Error(), "02:00:5e:10:00:01") {
					t.Errorf("Parse(%q) error %q: want it to quote the input and give an example", tc.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("Parse(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestValidateAssignable(t *testing.T) {
	cases := map[string]struct {
		addr    net.HardwareAddr
		wantErr string // substring; "" means valid
	}{
		"locally administered unicast":   {addr: net.HardwareAddr{0x02, 0xab, 0xcd, 0xef, 0x01, 0x23}},
		"globally administered unicast":  {addr: net.HardwareAddr{0x00, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e}},
		"one bit off reserved":           {addr: net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}},
		"multicast":                      {addr: net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}, wantErr: "multicast"},
		"locally administered multicast": {addr: net.HardwareAddr{0x03, 0xab, 0xcd, 0xef, 0x01, 0x23}, wantErr: "multicast"},
		"broadcast":                      {addr: net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, wantErr: "multicast"},
		"reserved for the pod bridge":    {addr: net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x00}}, // on bridge binding; see ValidateMasquerade
		"nil":                            {addr: nil, wantErr: "6 octets"},
		"EUI-64":                         {addr: net.HardwareAddr{0x02, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67}, wantErr: "6 octets"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateAssignable(tc.addr)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateAssignable(%v): %v", tc.addr, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ValidateAssignable(%v) = %v, want an error containing %q", tc.addr, err, tc.wantErr)
			}
		})
	}
}

func TestValidateMasquerade(t *testing.T) {
	for in, wantErr := range map[string]bool{
		"02:00:00:00:00:00": true,
		"02-00-00-00-00-00": true,
		"0200.0000.0000":    true,
		"02:00:00:00:00:01": false,
		"02:ab:cd:ef:01:23": false,
	} {
		addr, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateMasquerade(addr); (err != nil) != wantErr {
			t.Errorf("ValidateMasquerade(%s) = %v, want error %v", in, err, wantErr)
		}
	}
}

func TestDerive(t *testing.T) {
	first := Candidate("ns/web")
	cases := map[string]struct {
		namespace, name string
		taken           func(net.HardwareAddr) bool
		want            net.HardwareAddr
		wantCount       int
		wantErr         bool
	}{
		"nil taken": {
			namespace: "ns", name: "web",
			want: first,
		},
		"nothing taken": {
			namespace: "ns", name: "web",
			taken: func(net.HardwareAddr) bool { return false },
			want:  first,
		},
		"first candidate taken": {
			namespace: "ns", name: "web",
			taken: func(a net.HardwareAddr) bool { return Equal(a, first) },
			want:  Candidate("ns/web#1"), wantCount: 1,
		},
		"first two candidates taken": {
			namespace: "ns", name: "web",
			taken: func(a net.HardwareAddr) bool {
				return Equal(a, first) || Equal(a, Candidate("ns/web#1"))
			},
			want: Candidate("ns/web#2"), wantCount: 2,
		},
		"namespace is part of the key": {
			namespace: "other", name: "web",
			want: Candidate("other/web"),
		},
		"everything taken": {
			namespace: "ns", name: "web",
			taken:   func(net.HardwareAddr) bool { return true },
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, n, err := Derive(tc.namespace, tc.name, tc.taken)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Derive = %v, %d, want an error", got, n)
				}
				return
			}
			if err != nil {
				t.Fatalf("Derive: %v", err)
			}
			if !Equal(got, tc.want) || n != tc.wantCount {
				t.Errorf("Derive = %v, %d; want %v, %d", got, n, tc.want, tc.wantCount)
			}
			again, n2, err := Derive(tc.namespace, tc.name, tc.taken)
			if err != nil || !Equal(again, got) || n2 != n {
				t.Errorf("second Derive = %v, %d, %v; want the same %v, %d", again, n2, err, got, n)
			}
		})
	}
}

// TestDeriveAssignable checks the properties every derived MAC must have, over
// many names: locally administered unicast (first octet exactly 0x02),
// assignable, never Reserved, and different VMs get different MACs.
func TestDeriveAssignable(t *testing.T) {
	seen := map[string]string{}
	for i := 0; i < 5000; i++ {
		name := fmt.Sprintf("vm-%d", i)
		var offered []net.HardwareAddr
		got, _, err := Derive("ns", name, func(a net.HardwareAddr) bool {
			offered = append(offered, a)
			return false
		})
		if err != nil {
			t.Fatalf("Derive(ns, %s): %v", name, err)
		}
		if len(got) != 6 || got[0] != 0x02 {
			t.Fatalf("Derive(ns, %s) = %v: want 6 octets starting with 02", name, got)
		}
		if err := ValidateAssignable(got); err != nil {
			t.Fatalf("Derive(ns, %s) = %v: %v", name, got, err)
		}
		for _, a := range offered {
			if Equal(a, Reserved) {
				t.Fatalf("Derive(ns, %s) asked taken about the reserved address", name)
			}
		}
		if prev, ok := seen[got.String()]; ok {
			t.Fatalf("Derive gives %v to both ns/%s and ns/%s", got, prev, name)
		}
		seen[got.String()] = name
	}
}

func TestCandidate(t *testing.T) {
	// Golden values, computed independently (FNV-1a 64, high 40 bits behind
	// 0x02). A change here changes the MAC of every VM pinned from now on,
	// so two VMs pinned before and after an upgrade could collide.
	cases := map[string]struct {
		in   string
		want string
	}{
		"plain":           {in: "ns/web", want: "02:ca:2f:d7:2d:8c"},
		"rehashed":        {in: "ns/web#1", want: "02:72:31:a4:7e:ff"},
		"other namespace": {in: "default/fedora", want: "02:f2:e1:52:8a:d9"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Candidate(tc.in)
			if got.String() != tc.want {
				t.Errorf("Candidate(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"02:ab:cd:ef:01:23",
		"02-AB-CD-EF-01-23",
		"02:00:00:00:00:00",
		"ff:ff:ff:ff:ff:ff",
		"02ab.cdef.0123",
		"02:ab:cd:ef:01:23:45:67",
		"02:ab-cd:ef:01:23",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addr, err := Parse(s)
		if err != nil {
			if addr != nil {
				t.Fatalf("Parse(%q) returned %v with error %v", s, addr, err)
			}
			return
		}
		if len(addr) != 6 {
			t.Fatalf("Parse(%q) = %v: %d octets, want 6", s, addr, len(addr))
		}
		again, err := Parse(addr.String())
		if err != nil {
			t.Fatalf("Parse(%q) = %v, but Parse(%q): %v", s, addr, addr.String(), err)
		}
		if !Equal(again, addr) {
			t.Fatalf("Parse(%q) = %v, re-parsed as %v", s, addr, again)
		}
	})
}
