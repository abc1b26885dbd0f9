package cloudinit

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestRenderGolden(t *testing.T) {
	cases := map[string]Part{"zero": {}}
	for name, p := range testParts {
		cases[name] = p
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			got := mustRender(t, p)
			if again := mustRender(t, p); !bytes.Equal(got, again) {
				t.Fatalf("Render is not deterministic:\n%s\n---\n%s", got, again)
			}
			golden(t, name+".yaml", got)
		})
	}
	t.Run("mount script", func(t *testing.T) {
		// The script's head is mountdisk.sh itself, and everything.yaml
		// holds the whole script: the golden file holds what follows the head.
		p := testParts["everything"]
		calls, ok := strings.CutPrefix(MountScript(p.Mounts, p.Owner), mountDiskScript+"\n")
		if !ok {
			t.Fatal("the mount script does not start with mountdisk.sh")
		}
		golden(t, "mountscript-calls.sh", []byte(calls))
	})
	t.Run("chown pending script", func(t *testing.T) {
		p := testParts["everything"]
		golden(t, "chownpending.sh", []byte(chownPendingScript(p.Mounts, p.Owner)))
	})
}

// renderedDoc is the rendered part read back through a YAML parser.
type renderedDoc struct {
	MergeHow          []mergeRule `json:"merge_how"`
	Bootcmd           [][]string  `json:"bootcmd"`
	Runcmd            [][]string  `json:"runcmd"`
	SSHAuthorizedKeys []string    `json:"ssh_authorized_keys"`
	Users             []any       `json:"users"`
}

func TestRenderContent(t *testing.T) {
	mounts := []Mount{{Serial: "d1", Path: "/data"}, {Serial: "d2", Path: "/it's a $(trap)"}}
	cases := map[string]struct {
		part Part
		want renderedDoc
	}{
		"zero": {
			want: renderedDoc{MergeHow: mergeHow},
		},
		"owner alone": {
			part: Part{Owner: "alice"},
			want: renderedDoc{MergeHow: mergeHow},
		},
		"mounts without owner: no runcmd": {
			part: Part{Mounts: mounts},
			want: renderedDoc{MergeHow: mergeHow, Bootcmd: [][]string{{"sh", "-c", MountScript(mounts, "")}}},
		},
		"mounts with owner: runcmd chowns marked mounts": {
			part: Part{Mounts: mounts, Owner: "alice"},
			want: renderedDoc{
				MergeHow: mergeHow,
				Bootcmd:  [][]string{{"sh", "-c", MountScript(mounts, "alice")}},
				Runcmd:   [][]string{{"sh", "-c", chownPendingScript(mounts, "alice")}},
			},
		},
		"keys without owner go to the default user": {
			part: Part{AuthorizedKeys: []string{testKeyA, testKeyB}},
			want: renderedDoc{MergeHow: mergeHow, SSHAuthorizedKeys: []string{testKeyA, testKeyB}},
		},
		"keys with owner go to the owner, default user kept": {
			part: Part{Owner: "alice", AuthorizedKeys: []string{testKeyA}},
			want: renderedDoc{MergeHow: mergeHow, Users: []any{
				"default",
				map[string]any{"name": "alice", "ssh_authorized_keys": []any{testKeyA}},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := mustRender(t, tc.part)
			if !bytes.HasPrefix(out, []byte("#cloud-config\n")) {
				t.Fatalf("part does not start with #cloud-config:\n%s", out)
			}
			var got renderedDoc
			if err := yaml.UnmarshalStrict(out, &got); err != nil {
				t.Fatalf("rendered part does not parse: %v\n%s", err, out)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rendered part:\n got %#v\nwant %#v\n%s", got, tc.want, out)
			}
			if gotZero, wantZero := tc.part.IsZero(), tc.want.Bootcmd == nil && tc.want.SSHAuthorizedKeys == nil && tc.want.Users == nil; gotZero != wantZero {
				t.Errorf("IsZero() = %v, want %v", gotZero, wantZero)
			}
		})
	}
}

func TestRenderRejects(t *testing.T) {
	ok := Mount{Serial: "ok", Path: "/ok"}
	cases := map[string]struct {
		part Part
		want []string // every problem, by field path
	}{
		"empty serial":         {Part{Mounts: []Mount{{Serial: "", Path: "/a"}}}, []string{`mounts[0].serial ""`}},
		"21-character serial":  {Part{Mounts: []Mount{{Serial: strings.Repeat("s", 21), Path: "/a"}}}, []string{"mounts[0].serial"}},
		"serial with a slash":  {Part{Mounts: []Mount{ok, {Serial: "a/b", Path: "/b"}}}, []string{`mounts[1].serial "a/b"`}},
		"serial with a quote":  {Part{Mounts: []Mount{{Serial: "a'b", Path: "/b"}}}, []string{`mounts[0].serial`}},
		"repeated serial":      {Part{Mounts: []Mount{ok, {Serial: "ok", Path: "/b"}}}, []string{`mounts[1].serial "ok": repeats mounts[0].serial`}},
		"relative path":        {Part{Mounts: []Mount{{Serial: "a", Path: "data"}}}, []string{`mounts[0].path "data": must be absolute`}},
		"empty path":           {Part{Mounts: []Mount{{Serial: "a", Path: ""}}}, []string{`mounts[0].path "": must be absolute`}},
		"path with NUL":        {Part{Mounts: []Mount{{Serial: "a", Path: "/a\x00b"}}}, []string{`mounts[0].path`}},
		"repeated path":        {Part{Mounts: []Mount{ok, {Serial: "b", Path: "/ok"}}}, []string{`mounts[1].path "/ok": repeats mounts[0].path`}},
		"owner with a colon":   {Part{Mounts: []Mount{ok}, Owner: "a:b"}, []string{`owner "a:b"`}},
		"owner as an option":   {Part{Mounts: []Mount{ok}, Owner: "-R"}, []string{`owner "-R"`}},
		"owner with a quote":   {Part{Owner: "a'b", AuthorizedKeys: []string{testKeyA}}, []string{`owner "a'b"`}},
		"33-character owner":   {Part{Owner: strings.Repeat("a", 33)}, []string{`owner`}},
		"empty key":            {Part{AuthorizedKeys: []string{testKeyA, " "}}, []string{"authorizedKeys[1]"}},
		"key with a line feed": {Part{AuthorizedKeys: []string{testKeyA + "\n" + testKeyB}}, []string{"authorizedKeys[0]"}},
		"every problem at once": {
			Part{Mounts: []Mount{{Serial: "", Path: "x"}}, Owner: "a b", AuthorizedKeys: []string{""}},
			[]string{"mounts[0].serial", "mounts[0].path", `owner "a b"`, "authorizedKeys[0]"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := tc.part.Render()
			if err == nil {
				t.Fatalf("Render accepted it:\n%s", out)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tc.want) {
				t.Errorf("got %d problems, want %d: %v", n, len(tc.want), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestRenderAccepts(t *testing.T) {
	cases := map[string]Part{
		"20-character serial with every allowed symbol": {Mounts: []Mount{{Serial: "Az09_.+-Az09_.+-Az09", Path: "/a"}}},
		"owner with upper case, dot and dollar":         {Mounts: []Mount{{Serial: "a", Path: "/a"}}, Owner: "Bob.Smith-2$"},
		"32-character owner":                            {Owner: strings.Repeat("a", 32), AuthorizedKeys: []string{testKeyA}},
		"path with shell metacharacters":                {Mounts: []Mount{{Serial: "a", Path: "/a b/$HOME/`id`/it's"}}},
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := p.Render(); err != nil {
				t.Fatalf("Render: %v", err)
			}
		})
	}
}
