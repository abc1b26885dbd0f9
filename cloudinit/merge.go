package cloudinit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"unicode/utf8"
)

// The merged user-data is a MIME multipart/mixed message with LF line ends
// (cloud-init's own make-mime writes LF; Python's and Go's MIME parsers accept
// it). Its layout is fixed, so that Split can recover the user's bytes exactly
// without a general MIME parser:
//
//	MIME-Version: 1.0
//	Content-Type: multipart/mixed; boundary="virtstation-<hex>"
//	X-Virtstation-User-Data: absent | encoded | verbatim
//
//	--virtstation-<hex>
//	<user part: our headers, blank line, 7bit or base64 body; or, verbatim,
//	 the user's own MIME entity, headers included>
//	--virtstation-<hex>
//	Content-Type: text/cloud-config; charset="utf-8"
//	Content-Transfer-Encoding: 7bit | base64
//	X-Virtstation-Part: managed
//
//	<rendered part>
//	--virtstation-<hex>--
//
// The boundary occurs nowhere in the user's data or the part, so the first
// delimiter line after a part's start ends it, for Split as for any parser.
const (
	mimeHeadPrefix = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\""
	boundaryPrefix = "virtstation-"
	userModeHeader = "X-Virtstation-User-Data: "
	partHeader     = "X-Virtstation-Part: "

	// managedMarker is the X-Virtstation-Part value on Virtstation's own part.
	managedMarker = "managed"
	// userMarker is the X-Virtstation-Part value on an encoded user part.
	userMarker = "user"
)

// userMode says how the user's data travels in the merged message.
type userMode string

const (
	// userAbsent: there is no user data, only our part.
	userAbsent userMode = "absent"
	// userEncoded: a part with our headers and a 7bit or base64 body.
	userEncoded userMode = "encoded"
	// userVerbatim: the user's MIME message, as is, is the whole part.
	userVerbatim userMode = "verbatim"
)

// Content-Transfer-Encodings of the parts we write.
const (
	cte7bit   = "7bit"
	cteBase64 = "base64"
)

// maxLine is RFC 5322's limit on a line, CRLF excluded, in a 7bit body.
const maxLine = 998

// mimeSniffLen is how far into user-data cloud-init looks for "mime-version:"
// to decide whether to parse it as MIME (user_data.convert_string).
const mimeSniffLen = 4096

// base64Line is the length of a base64 body line (RFC 2045).
const base64Line = 76

// Merge returns user-data holding the user's data byte for byte and the part. user may be nil/empty: then Merge returns only the rendered part (still recognisable by Split). Otherwise a MIME multipart/mixed message: the user's part first, with a boundary that does not occur in the user's data; the user's bytes travel unchanged (Content-Transfer-Encoding 7bit/8bit when they are text that can travel as is, base64 otherwise — decoding must give back the exact bytes); the user's part Content-Type is detected the way cloud-init does from the first line (#cloud-config → text/cloud-config, #! → text/x-shellscript, #cloud-boothook, #include, ## template: jinja, #part-handler, gzip magic → application/gzip, otherwise text/plain which cloud-init re-detects); our part is text/cloud-config with a header `X-Virtstation-Part: managed` (or similar marker).
//
// As built: text travels 7bit only when it is ASCII with CRLF or LF line ends
// and lines of at most 998 bytes; everything else travels base64, because
// cloud-init 22.4 corrupts non-ASCII 8bit parts (it parses the message as a
// str and re-encodes a non-ASCII payload as raw-unicode-escape). User data
// that cloud-init would itself parse as MIME (valid UTF-8, "mime-version:"
// in its first 4096 bytes, well-formed headers) is nested verbatim, so its
// own parts still reach cloud-init. part is expected to be [Part.Render]
// output: with empty user data and a part that does not start like one, Merge
// still wraps it in MIME so that Split recognises the result.
//
// Callers merge the user's data, never earlier Merge output: pass user-data
// through [Split] first.
func Merge(user []byte, part []byte) []byte {
	if len(user) == 0 && bytes.HasPrefix(part, []byte(renderedHeader)) {
		return bytes.Clone(part)
	}
	mode := userAbsent
	switch {
	case len(user) == 0:
	case isMIMEEntity(user):
		mode = userVerbatim
	default:
		mode = userEncoded
	}
	b := boundaryFor(user, part)

	var buf bytes.Buffer
	buf.Grow(len(user)*4/3 + len(part)*4/3 + 512)
	buf.WriteString(mimeHeadPrefix + b + "\"\n")
	buf.WriteString(userModeHeader + string(mode) + "\n\n")
	switch mode {
	case userVerbatim:
		buf.WriteString("--" + b + "\n")
		buf.Write(user)
		buf.WriteString("\n")
	case userEncoded:
		buf.WriteString("--" + b + "\n")
		writePart(&buf, detectType(user), userMarker, user)
		buf.WriteString("\n")
	}
	buf.WriteString("--" + b + "\n")
	writePart(&buf, typeCloudConfig+`; charset="utf-8"`, managedMarker, part)
	buf.WriteString("\n--" + b + "--\n")
	return buf.Bytes()
}

// writePart writes a body part's headers, the blank line and the body, 7bit
// when the body can travel as is and base64 otherwise. The line break that
// precedes the next delimiter belongs to the delimiter, not to the body.
func writePart(buf *bytes.Buffer, ctype, marker string, body []byte) {
	cte := cteBase64
	if is7bit(body) {
		cte = cte7bit
	}
	buf.WriteString("Content-Type: " + ctype + "\n")
	buf.WriteString("Content-Transfer-Encoding: " + cte + "\n")
	buf.WriteString(partHeader + marker + "\n\n")
	if cte == cte7bit {
		buf.Write(body)
		return
	}
	enc := base64.StdEncoding.EncodeToString(body)
	for len(enc) > base64Line {
		buf.WriteString(enc[:base64Line])
		buf.WriteByte('\n')
		enc = enc[base64Line:]
	}
	buf.WriteString(enc)
}

// is7bit reports whether data can travel as a 7bit body that every parser
// gives back unchanged: ASCII without NUL, every CR followed by LF (Python
// also breaks lines at a bare CR), no line longer than maxLine.
func is7bit(data []byte) bool {
	line := 0
	for i, c := range data {
		switch {
		case c == 0 || c >= utf8.RuneSelf:
			return false
		case c == '\r':
			if i+1 >= len(data) || data[i+1] != '\n' {
				return false
			}
		case c == '\n':
			line = 0
			continue
		}
		if c != '\r' {
			line++
		}
		if line > maxLine {
			return false
		}
	}
	return true
}

// isMIMEEntity reports whether cloud-init, given data on its own, would parse
// it as a MIME message, and whether it is well-formed enough to nest as a
// body part: valid UTF-8 (cloud-init decodes it so), "mime-version:" in the
// first mimeSniffLen bytes, and a header block, ended by a blank line, that
// holds a MIME-Version header.
func isMIMEEntity(data []byte) bool {
	if !utf8.Valid(data) {
		return false
	}
	if !bytes.Contains(bytes.ToLower(data[:min(len(data), mimeSniffLen)]), []byte("mime-version:")) {
		return false
	}
	hdr, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(data))).ReadMIMEHeader()
	if err != nil {
		return false
	}
	return hdr.Get("Mime-Version") != ""
}

// boundaryFor returns a boundary derived from the user's data, so that
// re-merging the same data gives the same bytes, that occurs in neither the
// user's data nor the part. Hex digits after a single hyphen: it contains no
// "--", so no boundary the user's own MIME uses can mistake our delimiter
// lines for its own.
func boundaryFor(user, part []byte) string {
	for n := uint64(0); ; n++ {
		h := sha256.New()
		var ctr [8]byte
		binary.BigEndian.PutUint64(ctr[:], n)
		h.Write(ctr[:])
		h.Write(user)
		b := boundaryPrefix + hex.EncodeToString(h.Sum(nil)[:16])
		if !bytes.Contains(user, []byte(b)) && !bytes.Contains(part, []byte(b)) {
			return b
		}
	}
}

// Split recovers the user's original bytes from data produced by Merge (ours=true), or returns data unchanged with ours=false when it is not Merge output. Split(Merge(u, p)) must return exactly u for every u (including empty, binary, data containing boundary-like lines, CRLF line endings, no trailing newline). Re-merging must not grow: Merge(Split(Merge(u,p1)), p2) == Merge(u, p2).
//
// Data that starts like Merge output but does not follow its layout (edited
// or truncated) gives ours=true and an error: the caller should refuse it
// rather than nest it inside a new merge. The user bytes returned never alias
// data; they are nil when the merged data held no user data.
func Split(data []byte) (user []byte, ours bool, err error) {
	if !bytes.HasPrefix(data, []byte(mimeHeadPrefix+boundaryPrefix)) {
		switch {
		case bytes.HasPrefix(data, []byte(renderedHeader)):
			return nil, true, nil
		case bytes.HasPrefix(data, []byte(strings.ReplaceAll(mimeHeadPrefix+boundaryPrefix, "\n", "\r\n"))):
			return nil, true, errors.New("merged user-data: line ends were converted to CRLF; restore the user's own user-data")
		}
		return data, false, nil
	}
	user, err = splitMIME(data[len(mimeHeadPrefix):])
	if err != nil {
		return nil, true, fmt.Errorf("merged user-data: %w", err)
	}
	return user, true, nil
}

// splitMIME parses the merged layout after mimeHeadPrefix.
func splitMIME(rest []byte) ([]byte, error) {
	b, rest, ok := bytes.Cut(rest, []byte("\"\n"))
	if !ok || !validBoundary(b) {
		return nil, errors.New("malformed boundary")
	}
	line, rest, ok := bytes.Cut(rest, []byte("\n\n"))
	mode, found := bytes.CutPrefix(line, []byte(userModeHeader))
	if !ok || !found {
		return nil, errors.New("missing X-Virtstation-User-Data header")
	}
	delim := []byte("--" + string(b) + "\n")
	rest, ok = bytes.CutPrefix(rest, delim)
	if !ok {
		return nil, errors.New("missing first boundary")
	}
	end := []byte("\n--" + string(b))

	var user []byte
	switch userMode(mode) {
	case userAbsent:
	case userVerbatim, userEncoded:
		i := bytes.Index(rest, end)
		if i < 0 {
			return nil, errors.New("user part not closed")
		}
		section := rest[:i]
		rest, ok = bytes.CutPrefix(rest[i+len(end):], []byte("\n"))
		if !ok {
			return nil, errors.New("managed part missing")
		}
		if userMode(mode) == userVerbatim {
			user = bytes.Clone(section)
			break
		}
		var err error
		if user, err = decodePart(section, userMarker); err != nil {
			return nil, fmt.Errorf("user part: %w", err)
		}
		if len(user) == 0 {
			return nil, errors.New("user part: empty")
		}
	default:
		return nil, fmt.Errorf("unknown user-data mode %q", mode)
	}

	i := bytes.Index(rest, end)
	if i < 0 {
		return nil, errors.New("managed part not closed")
	}
	if _, err := decodePart(rest[:i], managedMarker); err != nil {
		return nil, fmt.Errorf("managed part: %w", err)
	}
	if !bytes.Equal(rest[i+len(end):], []byte("--\n")) {
		return nil, errors.New("data after the managed part")
	}
	return user, nil
}

// validBoundary reports whether b is a boundary Merge could have written.
func validBoundary(b []byte) bool {
	hexPart, ok := bytes.CutPrefix(b, []byte(boundaryPrefix))
	if !ok || len(hexPart) == 0 {
		return false
	}
	for _, c := range hexPart {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodePart checks that section is a part writePart wrote with the given
// marker and returns its decoded body.
func decodePart(section []byte, marker string) ([]byte, error) {
	head, body, ok := bytes.Cut(section, []byte("\n\n"))
	if !ok {
		return nil, errors.New("no blank line after the headers")
	}
	var cte []byte
	marked := false
	for _, line := range bytes.Split(head, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Content-Transfer-Encoding: ")); ok {
			cte = v
		}
		if v, ok := bytes.CutPrefix(line, []byte(partHeader)); ok && string(v) == marker {
			marked = true
		}
	}
	if !marked {
		return nil, fmt.Errorf("no %s%s header", partHeader, marker)
	}
	switch string(cte) {
	case cte7bit:
		return bytes.Clone(body), nil
	case cteBase64:
		out, err := base64.StdEncoding.DecodeString(string(bytes.ReplaceAll(body, []byte("\n"), nil)))
		if err != nil {
			return nil, fmt.Errorf("base64 body: %w", err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unknown Content-Transfer-Encoding %q", cte)
	}
}
