package cloudinit

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"strings"
	"testing"
)

// mimePart is one body part of merged user-data as Go's MIME parser reads it.
type mimePart struct {
	header textproto.MIMEHeader
	body   []byte // as transferred, not decoded
}

// parseMerged parses merged user-data with net/mail and mime/multipart.
func parseMerged(t testing.TB, data []byte) (boundary string, parts []mimePart) {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("net/mail: %v\n%s", err, data)
	}
	if v := msg.Header.Get("Mime-Version"); v != "1.0" {
		t.Errorf("MIME-Version = %q, want 1.0", v)
	}
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" || params["boundary"] == "" {
		t.Fatalf("Content-Type %q: want multipart/mixed with a boundary (%v)", msg.Header.Get("Content-Type"), err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := r.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("mime/multipart: part %d: %v\n%s", len(parts), err, data)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			t.Fatalf("mime/multipart: part %d body: %v", len(parts), err)
		}
		parts = append(parts, mimePart{header: p.Header, body: body})
	}
	return params["boundary"], parts
}

// decodeBody decodes a part body per its Content-Transfer-Encoding.
func decodeBody(t testing.TB, p mimePart) []byte {
	t.Helper()
	switch cte := p.header.Get("Content-Transfer-Encoding"); cte {
	case "7bit", "8bit", "":
		return p.body
	case "base64":
		out, err := io.ReadAll(base64.NewDecoder(base64.StdEncoding, bytes.NewReader(p.body)))
		if err != nil {
			t.Fatalf("base64 body: %v", err)
		}
		return out
	default:
		t.Fatalf("unexpected Content-Transfer-Encoding %q", cte)
		return nil
	}
}

// TestMergeMIME reads Merge output with Go's MIME parser: the user's part
// comes first and gives back the user's bytes, typed as cloud-init would type
// them; ours comes last, marked, and gives back the rendered part.
func TestMergeMIME(t *testing.T) {
	part := mustRender(t, testParts["everything"])
	for name, tc := range userDataCases() {
		t.Run(name, func(t *testing.T) {
			out := Merge(tc.data, part)
			boundary, parts := parseMerged(t, out)
			if bytes.Contains(tc.data, []byte(boundary)) {
				t.Errorf("boundary %q occurs in the user's data", boundary)
			}
			if len(parts) != 2 {
				t.Fatalf("got %d parts, want 2 (user's, ours)", len(parts))
			}
			user := parts[0]
			if tc.verbatim {
				// The user's message is the part: its headers are the
				// part's headers and its body the part's body.
				msg, err := mail.ReadMessage(bytes.NewReader(tc.data))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(msg.Body)
				for k, v := range msg.Header {
					if got := user.header.Values(k); strings.Join(got, "\n") != strings.Join(v, "\n") {
						t.Errorf("user part header %s = %q, want %q", k, got, v)
					}
				}
				if !bytes.Equal(user.body, body) {
					t.Errorf("nested user body:\n got %q\nwant %q", user.body, body)
				}
			} else {
				mt, _, err := mime.ParseMediaType(user.header.Get("Content-Type"))
				if err != nil || mt != tc.ctype {
					t.Errorf("user part type %q (%v), want %q", user.header.Get("Content-Type"), err, tc.ctype)
				}
				if got := user.header.Get("Content-Transfer-Encoding"); got != tc.cte {
					t.Errorf("user part encoding %q, want %q", got, tc.cte)
				}
				if got := decodeBody(t, user); !bytes.Equal(got, tc.data) {
					t.Errorf("user part decodes to\n%q\nwant\n%q", got, tc.data)
				}
			}
			ours := parts[1]
			if mt, _, err := mime.ParseMediaType(ours.header.Get("Content-Type")); err != nil || mt != typeCloudConfig {
				t.Errorf("our part type %q (%v), want %s", ours.header.Get("Content-Type"), err, typeCloudConfig)
			}
			if got := ours.header.Get("X-Virtstation-Part"); got != managedMarker {
				t.Errorf("our part X-Virtstation-Part = %q, want %q", got, managedMarker)
			}
			if got := decodeBody(t, ours); !bytes.Equal(got, part) {
				t.Errorf("our part decodes to\n%s\nwant\n%s", got, part)
			}
		})
	}
}

func TestMergeEmptyUser(t *testing.T) {
	part := mustRender(t, testParts["owner"])
	foreign := []byte("#cloud-config\nruncmd: [echo not rendered]\n")
	cases := map[string]struct {
		user, part []byte
		bare       bool // Merge returns the part itself
	}{
		"nil user":                      {user: nil, part: part, bare: true},
		"empty user":                    {user: []byte{}, part: part, bare: true},
		"nil user, part not rendered":   {user: nil, part: foreign},
		"empty user, part not rendered": {user: []byte{}, part: foreign},
		"nil user, empty part":          {user: nil, part: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := Merge(tc.user, tc.part)
			if tc.bare {
				if !bytes.Equal(out, tc.part) {
					t.Fatalf("Merge(empty, part) =\n%s\nwant the part itself", out)
				}
			} else {
				_, parts := parseMerged(t, out)
				if len(parts) != 1 || parts[0].header.Get("X-Virtstation-Part") != managedMarker || !bytes.Equal(decodeBody(t, parts[0]), tc.part) {
					t.Fatalf("want only our part, got %d parts:\n%s", len(parts), out)
				}
			}
			user, ours, err := Split(out)
			if err != nil || !ours || len(user) != 0 {
				t.Fatalf("Split = %q, %v, %v; want empty, true, nil", user, ours, err)
			}
		})
	}
}

func TestSplitRoundTrip(t *testing.T) {
	p1 := mustRender(t, testParts["everything"])
	p2 := mustRender(t, testParts["keys-owner"])
	for name, tc := range userDataCases() {
		t.Run(name, func(t *testing.T) {
			merged := Merge(tc.data, p1)
			user, ours, err := Split(merged)
			if err != nil || !ours {
				t.Fatalf("Split(Merge) ours=%v err=%v", ours, err)
			}
			if !bytes.Equal(user, tc.data) {
				t.Fatalf("Split(Merge(u)) =\n%q\nwant\n%q", user, tc.data)
			}
			if again := Merge(user, p2); !bytes.Equal(again, Merge(tc.data, p2)) {
				t.Fatalf("re-merging differs from merging the original")
			}
			if again := Merge(user, p1); !bytes.Equal(again, merged) {
				t.Fatalf("re-merging the same part changed the bytes")
			}
		})
	}
}

func TestSplitForeign(t *testing.T) {
	cases := map[string][]byte{
		"nil":             nil,
		"cloud-config":    []byte("#cloud-config\nhostname: x\n"),
		"user's own MIME": userDataCases()["MIME multipart"].data,
		"shell script":    []byte("#!/bin/sh\necho hi\n"),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			user, ours, err := Split(data)
			if err != nil || ours || !bytes.Equal(user, data) {
				t.Fatalf("Split = %q, %v, %v; want the data back, false, nil", user, ours, err)
			}
		})
	}
}

func TestSplitRejectsDamage(t *testing.T) {
	merged := string(Merge([]byte("#!/bin/sh\necho hi\n"), mustRender(t, testParts["owner"])))
	b64 := string(Merge([]byte("#!/bin/sh\necho \xff\n"), mustRender(t, testParts["owner"])))
	boundary := merged[len(mimeHeadPrefix):strings.Index(merged, "\"\n")]
	cases := map[string]string{
		"truncated":                 merged[:len(merged)-10],
		"no closing delimiter":      strings.TrimSuffix(merged, "--"+boundary+"--\n"),
		"trailing data":             merged + "x",
		"bad boundary":              strings.ReplaceAll(merged, boundary, "virtstation-XYZ"),
		"no user-data mode":         strings.Replace(merged, "X-Virtstation-User-Data: encoded\n", "", 1),
		"unknown user-data mode":    strings.Replace(merged, "X-Virtstation-User-Data: encoded", "X-Virtstation-User-Data: other", 1),
		"managed marker missing":    strings.Replace(merged, "X-Virtstation-Part: managed", "X-Virtstation-Part: other", 1),
		"user marker missing":       strings.Replace(merged, "X-Virtstation-Part: user", "X-Virtstation-Part: other", 1),
		"managed part missing":      merged[:strings.Index(merged, "--"+boundary+"\nContent-Type: text/cloud-config")] + "--" + boundary + "--\n",
		"unknown transfer encoding": strings.Replace(merged, "Content-Transfer-Encoding: 7bit", "Content-Transfer-Encoding: quoted-printable", 1),
		"line ends made CRLF":       strings.ReplaceAll(merged, "\n", "\r\n"),
		"corrupt base64":            strings.Replace(b64, "Content-Transfer-Encoding: base64\nX-Virtstation-Part: user\n\n", "Content-Transfer-Encoding: base64\nX-Virtstation-Part: user\n\n!", 1),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if data == merged || data == b64 {
				t.Fatal("the damage did not apply")
			}
			user, ours, err := Split([]byte(data))
			if err == nil || !ours || user != nil {
				t.Fatalf("Split = %q, %v, %v; want nil, true, an error", user, ours, err)
			}
		})
	}
}

func TestMergeGolden(t *testing.T) {
	part := mustRender(t, testParts["keys-default-user"])
	cases := map[string]string{
		"merged-shellscript.mime": "shell script",
		"merged-binary.mime":      "binary",
		"merged-nested-mime.mime": "MIME multipart",
	}
	for file, name := range cases {
		t.Run(file, func(t *testing.T) {
			golden(t, file, Merge(userDataCases()[name].data, part))
		})
	}
}

// TestIs7bit pins the boundary between 7bit and base64 bodies.
func TestIs7bit(t *testing.T) {
	cases := map[string]struct {
		in   string
		want bool
	}{
		"empty":                {"", true},
		"ASCII":                {"a\tb\n", true},
		"CRLF":                 {"a\r\nb\r\n", true},
		"bare CR":              {"a\rb", false},
		"CR at the end":        {"a\r", false},
		"NUL":                  {"a\x00", false},
		"DEL":                  {"\x7f", true},
		"non-ASCII":            {"é", false},
		"998-byte line":        {strings.Repeat("x", 998) + "\n", true},
		"999-byte line":        {strings.Repeat("x", 999), false},
		"998 bytes, then CRLF": {strings.Repeat("x", 998) + "\r\n" + strings.Repeat("x", 998), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := is7bit([]byte(tc.in)); got != tc.want {
				t.Errorf("is7bit = %v, want %v", got, tc.want)
			}
		})
	}
}

// readHeader parses data's header block as a nested part's would be.
func readHeader(data []byte) (textproto.MIMEHeader, error) {
	return textproto.NewReader(bufio.NewReader(bytes.NewReader(data))).ReadMIMEHeader()
}

func TestIsMIMEEntity(t *testing.T) {
	cases := map[string]struct {
		in   string
		want bool
	}{
		"multipart":                   {"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n--x--\n", true},
		"lower-case header":           {"mime-version: 1.0\n\nbody", true},
		"no MIME-Version header":      {"Content-Type: text/plain\n\nbody", false},
		"MIME-Version after 4096":     {"X-Pad: " + strings.Repeat("p", 4100) + "\nMIME-Version: 1.0\n\nbody", false},
		"no blank line":               {"MIME-Version: 1.0\nContent-Type: text/plain\n", false},
		"script mentioning it":        {"#!/bin/sh\necho MIME-Version: 1.0\n\n", false},
		"invalid UTF-8":               {"MIME-Version: 1.0\n\n\xff", false},
		"mbox From_ line":             {"From nobody\nMIME-Version: 1.0\n\nbody", false},
		"header continuation":         {"MIME-Version: 1.0\nContent-Type: text/plain;\n charset=utf-8\n\nbody", true},
		"leading blank line: no head": {"\nMIME-Version: 1.0\n\nbody", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := isMIMEEntity([]byte(tc.in)); got != tc.want {
				h, err := readHeader([]byte(tc.in))
				t.Errorf("isMIMEEntity = %v, want %v (header %v, %v)", got, tc.want, h, err)
			}
		})
	}
}
