package cloudinit

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// checkCases are user-data with the CheckCloudConfig verdict; line is the
// line a YAML error must name (0: valid, or no line): where PyYAML, and so
// cloud-init's log, puts it first, which for an unclosed construct is the
// line it opened on.
var checkCases = map[string]struct {
	data    string
	invalid bool
	line    int
}{
	"valid":                 {data: "#cloud-config\npackages: [git]\nruncmd:\n  - echo hi\n"},
	"comments only":         {data: "#cloud-config\n# nothing yet\n"},
	"duplicate keys":        {data: "#cloud-config\npackages: [git]\npackages: [vim]\n"},
	"CRLF":                  {data: "#cloud-config\r\npackages:\r\n  - git\r\n"},
	"unclosed flow list":    {data: "#cloud-config\npackages: [git, vim\nruncmd: []\n", invalid: true, line: 2},
	"mapping in plain text": {data: "#cloud-config\nruncmd:\n  - echo a: b: c\nusers: x\n", invalid: true, line: 3},
	"tab indentation":       {data: "#cloud-config\nruncmd:\n\t- echo hi\n", invalid: true, line: 3},
	"bad indentation":       {data: "#cloud-config\nusers:\n  - name: a\n   shell: /bin/sh\n", invalid: true, line: 3},
	"top level list":        {data: "#cloud-config\n- packages\n", invalid: true},
	"top level string":      {data: "#cloud-config\njust words\n", invalid: true},
	"two documents":         {data: "#cloud-config\na: 1\n---\nb: 2\n", invalid: true},
	"shell script":          {data: "#!/bin/sh\nthis: is: not: yaml\n"},
	"cloud-config-archive":  {data: "#cloud-config-archive\n- [not: closed\n"},
	"plain text":            {data: "hello: world: again\n"},
	"leading blank line":    {data: "\n#cloud-config\npackages: [git\n", invalid: true, line: 3},
}

func TestCheckCloudConfig(t *testing.T) {
	for name, tc := range checkCases {
		t.Run(name, func(t *testing.T) {
			err := CheckCloudConfig([]byte(tc.data))
			if !tc.invalid {
				if err != nil {
					t.Fatalf("CheckCloudConfig = %v, want nil", err)
				}
				return
			}
			var ce *CloudConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("CheckCloudConfig = %v, want a *CloudConfigError", err)
			}
			if ce.Line != tc.line {
				t.Errorf("line = %d (%v), want %d", ce.Line, ce, tc.line)
			}
			if tc.line > 0 && !strings.HasPrefix(ce.Error(), "line ") {
				t.Errorf("Error() = %q, want it to start with the line", ce.Error())
			}
		})
	}
}

// TestCheckCloudConfigAgreesWithCloudInit: every case CheckCloudConfig calls
// invalid is one cloud-init's own loader (util.load_yaml, as its
// cloud-config handler calls it) ignores, and every cloud-config it calls
// valid cloud-init loads.
func TestCheckCloudConfigAgreesWithCloudInit(t *testing.T) {
	py := cloudInitPython(t)
	names := make([]string, 0, len(checkCases))
	inputs := make([]string, 0, len(checkCases))
	for name, tc := range checkCases {
		if detectType([]byte(tc.data)) != typeCloudConfig {
			continue
		}
		names = append(names, name)
		inputs = append(inputs, base64.StdEncoding.EncodeToString([]byte(tc.data)))
	}
	const script = `
import base64, json, sys, logging
logging.disable(logging.CRITICAL)
from cloudinit import util
import yaml
out = []
for b in json.load(sys.stdin):
    data = base64.b64decode(b)
    got = util.load_yaml(data, default="IGNORED")
    line = 0
    try:
        yaml.safe_load(data)
    except yaml.MarkedYAMLError as e:
        mark = e.context_mark or e.problem_mark
        line = mark.line + 1 if mark else 0
    except yaml.YAMLError:
        pass
    out.append({"verdict": "ignored" if got == "IGNORED" else "loaded", "line": line})
json.dump(out, sys.stdout)
`
	in, err := json.Marshal(inputs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = strings.NewReader(string(in))
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("cloud-init's python: %v", err)
	}
	var verdicts []struct {
		Verdict string
		Line    int
	}
	if err := json.Unmarshal(raw, &verdicts); err != nil || len(verdicts) != len(names) {
		t.Fatalf("cloud-init's python said %q (%v)", raw, err)
	}
	for i, name := range names {
		tc, v := checkCases[name], verdicts[i]
		empty := name == "comments only" // load_yaml returns the default for an empty document too
		if tc.invalid != (v.Verdict == "ignored") && !empty {
			t.Errorf("%s: CheckCloudConfig invalid=%v, cloud-init %s it", name, tc.invalid, v.Verdict)
		}
		if tc.line != 0 && v.Line != tc.line {
			t.Errorf("%s: PyYAML names line %d, the case (and CheckCloudConfig) line %d", name, v.Line, tc.line)
		}
	}
}
