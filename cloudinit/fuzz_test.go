package cloudinit

import (
	"bytes"
	"errors"
	"io"
	"net/mail"
	"testing"
)

// fuzzParts are two different rendered parts: merging with one and then the
// other must equal merging with the other from the start.
func fuzzParts(f *testing.F) (p1, p2 []byte) {
	return mustRender(f, testParts["everything"]), mustRender(f, testParts["keys-default-user"])
}

// addSeeds seeds a fuzz target with every user-data case and some Merge output.
func addSeeds(f *testing.F, p1 []byte) {
	for _, tc := range userDataCases() {
		f.Add(tc.data)
		f.Add(Merge(tc.data, p1))
	}
	f.Add([]byte(nil))
	f.Add(p1)
	f.Add([]byte(mimeHeadPrefix + boundaryPrefix + "0\"\n" + userModeHeader + "encoded\n\n--virtstation-0\n"))
	f.Add([]byte(mimeHeadPrefix + boundaryPrefix + "00\"\n" + userModeHeader + "absent\n\n--virtstation-00\n\n--virtstation-00--\n"))
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"))
	f.Add([]byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"virtstation-\"\n\n--virtstation---\n"))
}

// FuzzMerge: Split gives back exactly what Merge wrapped, re-merging with
// another part equals merging the original with it, and Go's MIME parser
// reads every merged message as the user's part (if any) and ours.
func FuzzMerge(f *testing.F) {
	p1, p2 := fuzzParts(f)
	addSeeds(f, p1)
	f.Fuzz(func(t *testing.T, user []byte) {
		merged := Merge(user, p1)
		got, ours, err := Split(merged)
		if err != nil || !ours {
			t.Fatalf("Split(Merge(u)): ours=%v err=%v\n%q", ours, err, merged)
		}
		if !bytes.Equal(got, user) {
			t.Fatalf("Split(Merge(u)) = %q, want %q", got, user)
		}
		if again, want := Merge(got, p2), Merge(user, p2); !bytes.Equal(again, want) {
			t.Fatalf("re-merge differs:\n%q\nwant\n%q", again, want)
		}
		if len(user) == 0 {
			return
		}
		_, parts := parseMerged(t, merged)
		if len(parts) != 2 {
			t.Fatalf("got %d MIME parts, want 2", len(parts))
		}
		if !bytes.Equal(decodeBody(t, parts[1]), p1) || parts[1].header.Get("X-Virtstation-Part") != managedMarker {
			t.Fatalf("our part does not read back")
		}
		if isMIMEEntity(user) {
			// Nested as is: the part's body is the message's body.
			msg, err := mail.ReadMessage(bytes.NewReader(user))
			if err != nil {
				t.Fatalf("nested user message: %v", err)
			}
			body, _ := io.ReadAll(msg.Body)
			if !bytes.Equal(parts[0].body, body) {
				t.Fatalf("the nested user part's body is %q, want %q", parts[0].body, body)
			}
		} else if got := decodeBody(t, parts[0]); !bytes.Equal(got, user) {
			t.Fatalf("the user's part decodes to %q, want %q", got, user)
		}
	})
}

// FuzzSplit: Split never panics; what it accepts as ours re-merges to a
// message it splits the same way, and what is not ours comes back unchanged.
func FuzzSplit(f *testing.F) {
	p1, _ := fuzzParts(f)
	addSeeds(f, p1)
	f.Fuzz(func(t *testing.T, data []byte) {
		user, ours, err := Split(data)
		switch {
		case !ours:
			if err != nil || !bytes.Equal(user, data) {
				t.Fatalf("not ours, but Split = %q, %v", user, err)
			}
		case err != nil:
			if user != nil {
				t.Fatalf("error %v with user data %q", err, user)
			}
		default:
			again, ours2, err2 := Split(Merge(user, p1))
			if err2 != nil || !ours2 || !bytes.Equal(again, user) {
				t.Fatalf("re-merged split: %q, %v, %v; want %q", again, ours2, err2, user)
			}
		}
	})
}

// FuzzCheckCloudConfig: CheckCloudConfig never panics, returns nil or a
// *CloudConfigError, and never calls anything but a #cloud-config invalid.
func FuzzCheckCloudConfig(f *testing.F) {
	for _, tc := range checkCases {
		f.Add([]byte(tc.data))
	}
	f.Add([]byte("#cloud-config\na: &x [*x]\n"))
	f.Add([]byte("#cloud-config\n\xff\xfe"))
	f.Fuzz(func(t *testing.T, user []byte) {
		err := CheckCloudConfig(user)
		if err == nil {
			return
		}
		var ce *CloudConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("CheckCloudConfig = %T %v, want a *CloudConfigError", err, err)
		}
		if detectType(user) != typeCloudConfig {
			t.Fatalf("CheckCloudConfig called non-cloud-config invalid: %v", err)
		}
	})
}
