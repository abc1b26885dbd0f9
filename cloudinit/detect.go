package cloudinit

import (
	"bytes"
	"compress/gzip"
	"io"
	"unicode"
	"unicode/utf8"
)

// Content types of user-data parts.
const (
	typeCloudConfig = "text/cloud-config"
	typePlain       = "text/plain"
	typeGzip        = "application/gzip"
)

// startsWith mirrors cloud-init's handlers.INCLUSION_TYPES_MAP (22.4), longest
// prefix first as cloud-init searches it.
var startsWith = []struct{ prefix, ctype string }{
	{"text/x-shellscript-per-instance", "text/x-shellscript-per-instance"},
	{"text/x-shellscript-per-boot", "text/x-shellscript-per-boot"},
	{"text/x-shellscript-per-once", "text/x-shellscript-per-once"},
	{"#cloud-config-archive", "text/cloud-config-archive"},
	{"#cloud-config-jsonp", "text/cloud-config-jsonp"},
	{"## template: jinja", "text/jinja2"},
	{"#cloud-boothook", "text/cloud-boothook"},
	{"#include-once", "text/x-include-once-url"},
	{"#cloud-config", typeCloudConfig},
	{"#part-handler", "text/part-handler"},
	{"#include", "text/x-include-url"},
	{"#!", "text/x-shellscript"},
}

// gzipMagic opens every gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// maxInflated bounds how much gzip user-data inflatesToText inflates. Far
// beyond any real user-data; it keeps a compression bomb from costing more.
const maxInflated = 32 << 20

// detectType returns the content type cloud-init gives data found in a
// text/plain part: application/gzip for gzip data (which cloud-init inflates
// and then detects again), else the type of the first matching prefix, else
// text/plain. Labelling a part text/plain or text/x-shellscript makes
// cloud-init detect again; any other label is taken as is, so the table and
// the matching mirror cloud-init's handlers.type_from_starts_with exactly.
//
// Data that starts like gzip but does not inflate to UTF-8 text is labelled
// text/plain: cloud-init 22.4 fails the whole user-data, Virtstation's part
// included, when a gzip part does not inflate or decode (ERROR_ON_USER_DATA_FAILURE).
func detectType(data []byte) string {
	if bytes.HasPrefix(data, gzipMagic) {
		if inflatesToText(data) {
			return typeGzip
		}
		return typePlain
	}
	rest := trimPythonSpace(data)
	for _, e := range startsWith {
		if hasFoldedPrefix(rest, e.prefix) {
			return e.ctype
		}
	}
	return typePlain
}

// trimPythonSpace drops the leading characters Python's str.lstrip() drops:
// Unicode White_Space plus the separators U+001C to U+001F. Bytes that are not
// UTF-8 stop it, as cloud-init's surrogate escapes do.
func trimPythonSpace(data []byte) []byte {
	for len(data) > 0 {
		r, n := utf8.DecodeRune(data)
		if r == utf8.RuneError && n <= 1 {
			break
		}
		if !unicode.IsSpace(r) && (r < 0x1c || r > 0x1f) {
			break
		}
		data = data[n:]
	}
	return data
}

// hasFoldedPrefix reports whether data starts with the ASCII prefix once
// lower-cased as Python's str.lower() does. The only runs of non-ASCII
// characters that lower-case to ASCII are U+212A KELVIN SIGN (to "k") and
// U+0130 (to "i" and a combining dot, which no prefix can match).
func hasFoldedPrefix(data []byte, prefix string) bool {
	for i := 0; i < len(prefix); i++ {
		if len(data) == 0 {
			return false
		}
		r, n := utf8.DecodeRune(data)
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		switch {
		case r == '\u212a':
			r = 'k'
		case r >= 'A' && r <= 'Z':
			r += 'a' - 'A'
		}
		if r != rune(prefix[i]) {
			return false
		}
		data = data[n:]
	}
	return true
}

// inflatesToText reports whether Python's gzip module would inflate data
// without error (every member whole, zero padding after a member allowed)
// into at most maxInflated bytes of UTF-8, as cloud-init's
// util.decomp_gzip(quiet=False) requires of a gzip part.
func inflatesToText(data []byte) bool {
	r := bytes.NewReader(data)
	zr, err := gzip.NewReader(r)
	if err != nil {
		return false
	}
	var out bytes.Buffer
	for {
		zr.Multistream(false)
		if _, err := io.Copy(&out, io.LimitReader(zr, maxInflated+1-int64(out.Len()))); err != nil {
			return false
		}
		if out.Len() > maxInflated {
			return false
		}
		for {
			c, err := r.ReadByte()
			if err == io.EOF {
				return utf8.Valid(out.Bytes())
			}
			if c != 0 {
				_ = r.UnreadByte()
				break
			}
		}
		if err := zr.Reset(r); err != nil {
			return false
		}
	}
}
