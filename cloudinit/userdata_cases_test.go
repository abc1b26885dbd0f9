package cloudinit

import (
	"bytes"
	"compress/gzip"
	"strings"
)

// userPart is one part cloud-init should hand to its part handlers.
type userPart struct {
	ctype   string
	payload string
}

// userDataCase is user-data a VM may carry, how Merge should carry it, and
// what cloud-init should make of it.
type userDataCase struct {
	data []byte
	// verbatim: the data is a MIME message nested as is; else the part's
	// Content-Type is ctype and its encoding cte.
	verbatim bool
	ctype    string
	cte      string
	// parts cloud-init finds in the user's part (nil: the data itself, typed
	// ctype).
	parts []userPart
}

// userDataCases are shared by the MIME, cloud-init and fuzz tests.
func userDataCases() map[string]userDataCase {
	userMIME := "MIME-Version: 1.0\n" +
		"Content-Type: multipart/mixed; boundary=\"===============user==\"\n" +
		"\n" +
		"--===============user==\n" +
		"Content-Type: text/x-shellscript; charset=\"us-ascii\"\n" +
		"\n" +
		"#!/bin/sh\necho from-user-mime\n" +
		"\n" +
		"--===============user==\n" +
		"Content-Type: text/cloud-config\n" +
		"\n" +
		"#cloud-config\nruncmd:\n- echo from-user-mime\n" +
		"--===============user==--\n"
	cc := "#cloud-config\nhostname: user-host\nbootcmd:\n- echo user-boot\nruncmd:\n- [echo, user-run]\n"
	return map[string]userDataCase{
		"cloud-config":                {data: []byte(cc), ctype: typeCloudConfig, cte: cte7bit},
		"shell script":                {data: []byte("#!/bin/sh\necho hi\n"), ctype: "text/x-shellscript", cte: cte7bit},
		"CRLF line ends":              {data: []byte("#cloud-config\r\npackages: [htop]\r\n"), ctype: typeCloudConfig, cte: cte7bit},
		"no trailing newline":         {data: []byte("#!/bin/sh\necho hi"), ctype: "text/x-shellscript", cte: cte7bit},
		"trailing blank lines":        {data: []byte("#!/bin/sh\necho hi\n\n\n"), ctype: "text/x-shellscript", cte: cte7bit},
		"boothook":                    {data: []byte("#cloud-boothook\n#!/bin/sh\necho boot\n"), ctype: "text/cloud-boothook", cte: cte7bit},
		"jinja template":              {data: []byte("## template: jinja\n#cloud-config\nruncmd:\n- echo {{ v1.instance_id }}\n"), ctype: "text/jinja2", cte: cte7bit},
		"cloud-config-archive":        {data: []byte("#cloud-config-archive\n- type: text/x-shellscript\n  content: \"#!/bin/sh\\necho archived\\n\"\n"), ctype: "text/cloud-config-archive", cte: cte7bit, parts: []userPart{{"text/x-shellscript", "#!/bin/sh\necho archived\n"}}},
		"include of a local file":     {data: []byte("#include\nfile:///proc/sys/kernel/ostype\n"), ctype: "text/x-include-url", cte: cte7bit, parts: []userPart{{"text/x-not-multipart", "Linux\n"}}},
		"leading blanks, upper case":  {data: []byte(" \n\t#Cloud-Config\nhostname: x\n"), ctype: typeCloudConfig, cte: cte7bit},
		"plain text":                  {data: []byte("hello world\n"), ctype: typePlain, cte: cte7bit},
		"one space":                   {data: []byte(" "), ctype: typePlain, cte: cte7bit},
		"non-ASCII UTF-8":             {data: []byte("#cloud-config\nwrite_files:\n- path: /etc/motd\n  content: \"héllo € ✓\\n\"\n"), ctype: typeCloudConfig, cte: cteBase64},
		"binary":                      {data: []byte("\x00\x01\xff\xfe#!\r\n--\x80"), ctype: typePlain, cte: cteBase64},
		"invalid UTF-8 shell script":  {data: []byte("#!/bin/sh\necho \xff\xfe\n"), ctype: "text/x-shellscript", cte: cteBase64},
		"gzip":                        {data: gzipped("#cloud-config\nruncmd:\n- echo gzipped\n"), ctype: typeGzip, cte: cteBase64, parts: []userPart{{typeCloudConfig, "#cloud-config\nruncmd:\n- echo gzipped\n"}}},
		"gzip, zero padded":           {data: append(gzipped("#!/bin/sh\necho padded\n"), 0, 0, 0), ctype: typeGzip, cte: cteBase64, parts: []userPart{{"text/x-shellscript", "#!/bin/sh\necho padded\n"}}},
		"gzip of two members":         {data: append(gzipped("#!/bin/sh\n"), gzipped("echo two\n")...), ctype: typeGzip, cte: cteBase64, parts: []userPart{{"text/x-shellscript", "#!/bin/sh\necho two\n"}}},
		"gzip of invalid UTF-8":       {data: gzipped("#!/bin/sh\necho \xff\n"), ctype: typePlain, cte: cteBase64},
		"gzip magic, not gzip":        {data: []byte("\x1f\x8b#!/bin/sh\n"), ctype: typePlain, cte: cteBase64},
		"gzip, truncated":             {data: gzipped("#!/bin/sh\necho cut\n")[:20], ctype: typePlain, cte: cteBase64},
		"bare CR":                     {data: []byte("#!/bin/sh\recho a\r"), ctype: "text/x-shellscript", cte: cteBase64},
		"NUL in text":                 {data: []byte("#!/bin/sh\necho a\x00b\n"), ctype: "text/x-shellscript", cte: cteBase64},
		"999-byte line":               {data: []byte("#!/bin/sh\n#" + strings.Repeat("x", 998) + "\n"), ctype: "text/x-shellscript", cte: cteBase64},
		"998-byte line, CRLF":         {data: []byte("#!/bin/sh\r\n#" + strings.Repeat("x", 997) + "\r\n"), ctype: "text/x-shellscript", cte: cte7bit},
		"boundary-like lines":         {data: []byte("#!/bin/sh\n--virtstation-\n--virtstation-0123456789abcdef0123456789abcdef\n--virtstation-0123--\n--\n"), ctype: "text/x-shellscript", cte: cte7bit},
		"MIME-Version in a script":    {data: []byte("#!/bin/sh\necho 'MIME-Version: 1.0'\n"), ctype: "text/x-shellscript", cte: cte7bit},
		"MIME headers without a body": {data: []byte("MIME-Version: 1.0\nContent-Type: text/x-shellscript\n"), ctype: typePlain, cte: cte7bit, parts: []userPart{{typePlain, "MIME-Version: 1.0\nContent-Type: text/x-shellscript\n"}}},
		"MIME multipart": {data: []byte(userMIME), verbatim: true, parts: []userPart{
			{"text/x-shellscript", "#!/bin/sh\necho from-user-mime\n"},
			{typeCloudConfig, "#cloud-config\nruncmd:\n- echo from-user-mime"},
		}},
		"MIME single part, CRLF": {data: []byte("MIME-Version: 1.0\r\nContent-Type: text/x-shellscript\r\n\r\n#!/bin/sh\r\necho single\r\n"), verbatim: true, parts: []userPart{
			{"text/x-shellscript", "#!/bin/sh\r\necho single\r\n"},
		}},
		"MIME base64 part": {data: []byte("MIME-Version: 1.0\nContent-Type: text/cloud-config\nContent-Transfer-Encoding: base64\n\nI2Nsb3VkLWNvbmZpZwpob3N0bmFtZTogYjY0Cg==\n"), verbatim: true, parts: []userPart{
			{typeCloudConfig, "#cloud-config\nhostname: b64\n"},
		}},
		"earlier Merge output": {data: Merge([]byte(cc), []byte("#cloud-config\nruncmd: [echo stale]\n")), verbatim: true, parts: []userPart{
			{typeCloudConfig, cc},
			{typeCloudConfig, "#cloud-config\nruncmd: [echo stale]\n"},
		}},
	}
}

// gzipped returns s compressed, deterministically.
func gzipped(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}
