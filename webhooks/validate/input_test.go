package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/virtstation/virtstation/api"
)

func TestBuildInput(t *testing.T) {
	obj := vmJSON(t, map[string]string{api.AnnotationDataDisks: `[{"name":"a","mountPath":"/srv/a"},{"name":"b","type":"cdrom"}]`})
	user := authenticationv1.UserInfo{Username: "alice", Groups: []string{"dev"}}
	in, err := BuildInput("UPDATE", "", "", obj, obj, user, map[string]DiskState{"a": free})
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"operation": "UPDATE", "namespace": "ns", "name": "vm",
		"userInfo": map[string]any{"username": "alice", "groups": []any{"dev"}},
		"dataDisks": []any{
			map[string]any{"index": 0.0, "name": "a", "mountPath": "/srv/a", "type": "disk", "bus": "", "readOnly": false},
			map[string]any{"index": 1.0, "name": "b", "mountPath": "", "type": "cdrom", "bus": "", "readOnly": true},
		},
		"disks": map[string]any{"a": map[string]any{"exists": true, "labelled": true, "kind": "PersistentVolumeClaim", "claimedBy": "", "claimLive": false, "sharedBy": []any{}, "usedBy": []any{}}},
	}
	for k, w := range want {
		if !reflect.DeepEqual(doc[k], w) {
			t.Errorf("input.%s = %#v, want %#v", k, doc[k], w)
		}
	}
	if o, ok := doc["object"].(map[string]any); !ok || o["kind"] != "VirtualMachine" {
		t.Errorf("input.object = %v", doc["object"])
	}
	if !reflect.DeepEqual(doc["object"], doc["oldObject"]) {
		t.Errorf("input.oldObject = %v", doc["oldObject"])
	}
}

func TestBuildInputDefaultsAndErrors(t *testing.T) {
	obj := vmJSON(t, nil)
	in, err := BuildInput("CREATE", "other", "given", obj, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in["namespace"] != "other" || in["name"] != "given" || in["oldObject"] != nil || in["userInfo"] != nil {
		t.Errorf("input = %v", in)
	}
	if d, ok := in["dataDisks"].([]any); !ok || len(d) != 0 {
		t.Errorf("dataDisks = %#v, want []", in["dataDisks"])
	}
	if d, ok := in["disks"].(map[string]any); !ok || len(d) != 0 {
		t.Errorf("disks = %#v, want {}", in["disks"])
	}
	if in, err := BuildInput("UPDATE", "", "", obj, []byte(" null "), nil, nil); err != nil || in["oldObject"] != nil {
		t.Errorf("null oldObject: %v %v", in["oldObject"], err)
	}
	for name, raw := range map[string]string{
		"not JSON":      "{",
		"not an object": "[1]",
		"trailing data": `{"kind":"VirtualMachine"} {}`,
		"empty":         "",
	} {
		if _, err := BuildInput("CREATE", "", "", []byte(raw), nil, nil, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := BuildInput("UPDATE", "", "", obj, []byte("{"), nil, nil); err == nil {
		t.Error("bad oldObject: no error")
	}
	if _, err := BuildInput("CREATE", "", "", obj, nil, func() {}, nil); err == nil {
		t.Error("unencodable userInfo: no error")
	}
}

func TestBuildInputKeepsNumbersExact(t *testing.T) {
	in, err := BuildInput("CREATE", "", "", []byte(`{"spec":{"big":12345678901234567890,"f":0.1}}`), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ast.InterfaceToValue(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.(ast.Object).Get(ast.StringTerm("object")).String(); !strings.Contains(got, "12345678901234567890") {
		t.Errorf("object = %s", got)
	}
}

func TestReadInput(t *testing.T) {
	cases := map[string]struct {
		source string
		// want is the pruned form of input {"a": {"b": 1, "c": 2}, "d": 3, "e": [4]}.
		want string
	}{
		"constant path": {
			source: "x if input.a.b == 1",
			want:   `{"a":{"b":1}}`,
		},
		"variable key reads the object": {
			source: "x if { some k; input.a[k] == 1 }",
			want:   `{"a":{"b":1,"c":2}}`,
		},
		"iteration": {
			source: "x if { some v in input.e; v == 4 }",
			want:   `{"e":[4]}`,
		},
		"bare input": {
			source: "x if count(input) == 3",
			want:   `{"a":{"b":1,"c":2},"d":3,"e":[4]}`,
		},
		"input as a function argument": {
			source: `x if object.get(input, ["a", "c"], 0) == 2`,
			want:   `{"a":{"b":1,"c":2},"d":3,"e":[4]}`,
		},
		"walk": {
			source: "x if { walk(input, [_, v]); v == 4 }",
			want:   `{"a":{"b":1,"c":2},"d":3,"e":[4]}`,
		},
		"with replaces, not reads": {
			source: "x if y with input as {\"d\": 1}\n\ny if input.d == 1",
			want:   `{"d":3}`,
		},
		"key from input": {
			source: "x if input.a[input.d]",
			want:   `{"a":{"b":1,"c":2},"d":3}`,
		},
		"path and its parent": {
			source: "x if input.a.b\n\ny if input.a",
			want:   `{"a":{"b":1,"c":2}}`,
		},
		"nothing": {
			source: "x if true",
			want:   `{}`,
		},
	}
	input := map[string]any{"a": map[string]any{"b": 1, "c": 2}, "d": 3, "e": []any{4}}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := Compile([]Module{{Name: "p.rego", Source: "package p\n\n" + tc.source + "\n"}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(readInput(c).prune(input))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("pruned input %s, want %s", got, tc.want)
			}
		})
	}
}

// TestPruningKeepsDecisions: an engine that converts only what the policies
// read decides like one that converts everything, for the shipped policies
// and for operator policies that read other parts of the input.
func TestPruningKeepsDecisions(t *testing.T) {
	operator := []Module{{Name: "other.rego", Source: `package virtstation.rules.other

deny contains {"id": "other", "field": "spec", "message": sprintf("%s by %s", [input.oldObject.spec.runStrategy, input.userInfo.username])} if {
	input.operation == "UPDATE"
	input.oldObject.spec.runStrategy != input.object.spec.runStrategy
}

warn contains {"id": "other", "field": "metadata.labels", "message": k} if {
	some k, _ in input.object.metadata.labels
	not startswith(k, "virtstation.io/")
}
`}}
	raw, err := os.ReadFile("testdata/vm.json")
	if err != nil {
		t.Fatal(err)
	}
	var vm map[string]any
	if err := json.Unmarshal(raw, &vm); err != nil {
		t.Fatal(err)
	}
	vm["spec"].(map[string]any)["runStrategy"] = "Always"
	changed, err := json.Marshal(vm)
	if err != nil {
		t.Fatal(err)
	}
	for _, modules := range [][]Module{ShippedModules(), Merge(ShippedModules(), operator)} {
		pruned, full := NewEngine(0), NewEngine(0)
		full.noPrune = true
		for _, e := range []*Engine{pruned, full} {
			if _, err := e.Load(context.Background(), modules); err != nil {
				t.Fatal(err)
			}
		}
		inputs := []map[string]any{realisticInput(t)}
		in, err := BuildInput("UPDATE", "", "", changed, raw, map[string]any{"username": "bob"}, map[string]DiskState{"heidi-home": {}})
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, in)
		for _, ann := range []string{"data:/etc", "data:/dev/shm,logs:/srv", "gone:/srv"} {
			in, err := BuildInput("CREATE", "", "", vmJSON(t, map[string]string{api.AnnotationDataDisks: ann, api.AnnotationSharedMemory: ""}), nil, nil, map[string]DiskState{"data": free})
			if err != nil {
				t.Fatal(err)
			}
			inputs = append(inputs, in)
		}
		decisions := 0
		for i, in := range inputs {
			a, err := pruned.Evaluate(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			b, err := full.Evaluate(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(a.Deny, a.Warn) != fmt.Sprint(b.Deny, b.Warn) {
				t.Errorf("input %d: pruned %v %v, full %v %v", i, a.Deny, a.Warn, b.Deny, b.Warn)
			}
			decisions += len(a.Deny) + len(a.Warn)
		}
		if decisions == 0 {
			t.Error("no input was denied or warned; the comparison proves nothing")
		}
	}
}

// FuzzBuildInput: arbitrary object bytes never panic BuildInput, and what it
// builds converts to a Rego value and evaluates without error.
func FuzzBuildInput(f *testing.F) {
	raw, err := os.ReadFile("testdata/vm.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add([]byte(`{"metadata":{"annotations":{"virtstation.io/data-disks":"a:/srv,b:/dev/shm,c"}}}`))
	f.Add([]byte(`{"metadata":{"annotations":{"virtstation.io/data-disks":"[{\"name\":\"a\",\"type\":\"cdrom\"}]","virtstation.io/shared-memory":""}}}`))
	f.Add([]byte(`{"metadata":{"annotations":{"virtstation.io/data-disks":7},"name":[],"namespace":{}}}`))
	f.Add([]byte(`{"metadata":null}`))
	// Past the limits: more entries than api.MaxDataDisks, and a value
	// longer than api.MaxAnnotationBytes.
	f.Add([]byte(`{"metadata":{"annotations":{"virtstation.io/data-disks":"a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q"}}}`))
	f.Add([]byte(`{"metadata":{"annotations":{"virtstation.io/data-disks":"a:/srv` + strings.Repeat(" ", api.MaxAnnotationBytes) + `"}}}`))
	f.Add([]byte(`{"metadata":{"annotations":null}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"a":1e400}`))
	f.Add([]byte("\xff"))
	e := mustShippedEngine(f)
	disks := map[string]DiskState{"a": free, "b": {Exists: true}, "c": {Exists: true, Labelled: true, ClaimedBy: "x/y", ClaimLive: true}}
	f.Fuzz(func(t *testing.T, object []byte) {
		in, err := BuildInput("UPDATE", "", "", object, object, map[string]any{"username": "u"}, disks)
		if err != nil {
			return
		}
		if _, err := ast.InterfaceToValue(in); err != nil {
			t.Fatalf("input does not convert: %v", err)
		}
		d, err := e.Evaluate(context.Background(), in)
		if err != nil {
			t.Fatalf("evaluate: %v", err)
		}
		// The handler's path (decode once, build what the policies read)
		// reaches the same decision.
		r, err := DecodeRequest("UPDATE", "", "", object, object, map[string]any{"username": "u"})
		if err != nil {
			t.Fatalf("DecodeRequest fails where BuildInput did not: %v", err)
		}
		d2, err := e.EvaluateRequest(context.Background(), r, disks)
		if err != nil {
			t.Fatalf("EvaluateRequest: %v", err)
		}
		if !reflect.DeepEqual(d, d2) {
			t.Fatalf("EvaluateRequest = %+v, Evaluate(BuildInput) = %+v", d2, d)
		}
	})
}
