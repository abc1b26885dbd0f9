package policyreport

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/webhooks/validate"
)

var vm = VMRef("team-a", "ws-alice", "uid-1")

func brief(rs []Result) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s %s mode=%s field=%s msg=%q", r.Subjects[0].Name, r.Rule, r.Result,
			r.Properties[PropMode], r.Properties[PropField], r.Description))
	}
	return strings.Join(out, "\n")
}

// TestVMResults: one result per rule, its value from the violations and the
// rule's mode, with the webhook's message and field path.
func TestVMResults(t *testing.T) {
	mount := policy.Violation{ID: "mount-path", Field: "metadata.annotations[virtstation.io/data-disks][0].mountPath", Message: " /etc is a system directory (rule: mount-path; fix: mount under /srv) "}
	mount2 := policy.Violation{ID: "mount-path", Field: "metadata.annotations[virtstation.io/data-disks][1].mountPath", Message: "/usr too (rule: mount-path; fix: x)"}
	rules := []string{"disk-claim", "mount-path"}
	cases := map[string]struct {
		d     policy.Decision
		modes policy.Modes
		want  string
	}{
		"all pass": {
			want: "ws-alice disk-claim pass mode=deny field= msg=\"\"\nws-alice mount-path pass mode=deny field= msg=\"\"",
		},
		"deny mode fails with the webhook's message": {
			d:    policy.Decision{Deny: []policy.Violation{mount}},
			want: "ws-alice disk-claim pass mode=deny field= msg=\"\"\nws-alice mount-path fail mode=deny field=metadata.annotations[virtstation.io/data-disks][0].mountPath msg=\"/etc is a system directory (rule: mount-path; fix: mount under /srv)\"",
		},
		"dryrun mode still fails": {
			d: policy.Decision{Deny: []policy.Violation{mount}}, modes: policy.Modes{"mount-path": policy.ModeDryRun},
			want: "ws-alice disk-claim pass mode=deny field= msg=\"\"\nws-alice mount-path fail mode=dryrun field=metadata.annotations[virtstation.io/data-disks][0].mountPath msg=\"/etc is a system directory (rule: mount-path; fix: mount under /srv)\"",
		},
		"warn mode warns": {
			d: policy.Decision{Deny: []policy.Violation{mount}}, modes: policy.Modes{"mount-path": policy.ModeWarn},
			want: "ws-alice disk-claim pass mode=deny field= msg=\"\"\nws-alice mount-path warn mode=warn field=metadata.annotations[virtstation.io/data-disks][0].mountPath msg=\"/etc is a system directory (rule: mount-path; fix: mount under /srv)\"",
		},
		"two violations, one result": {
			d:    policy.Decision{Deny: []policy.Violation{mount, mount2}},
			want: "ws-alice disk-claim pass mode=deny field= msg=\"\"\nws-alice mount-path fail mode=deny field=metadata.annotations[virtstation.io/data-disks][0].mountPath, metadata.annotations[virtstation.io/data-disks][1].mountPath msg=\"/etc is a system directory (rule: mount-path; fix: mount under /srv)\\n/usr too (rule: mount-path; fix: x)\"",
		},
		"a warn violation of a rule the set does not list": {
			d:    policy.Decision{Warn: []policy.Violation{{ID: "policy", Field: "spec", Message: "m"}}},
			want: "ws-alice disk-claim pass mode=deny field= msg=\"\"\nws-alice mount-path pass mode=deny field= msg=\"\"\nws-alice policy warn mode=deny field=spec msg=\"m\"",
		},
		"deny and warn of one rule: fail": {
			d:    policy.Decision{Deny: []policy.Violation{mount}, Warn: []policy.Violation{{ID: "mount-path", Field: "f", Message: "w"}}},
			want: "ws-alice disk-claim pass mode=deny field= msg=\"\"\nws-alice mount-path fail mode=deny field=metadata.annotations[virtstation.io/data-disks][0].mountPath, f msg=\"/etc is a system directory (rule: mount-path; fix: mount under /srv)\\nw\"",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := VMResults(vm, rules, tc.d, tc.modes)
			if brief(got) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", brief(got), tc.want)
			}
			for _, r := range got {
				if r.Source != Source || r.Policy != r.Rule || !r.Scored || r.Subjects[0] != vm {
					t.Errorf("result %+v: wrong identity", r)
				}
			}
		})
	}
}

// TestBoundedSize: a policy's long message cannot grow a result without
// bound, and a namespace too large for one object gets several reports,
// never splitting a VM's results.
func TestBoundedSize(t *testing.T) {
	long := policy.Violation{ID: "r", Field: strings.Repeat("f", 5000), Message: strings.Repeat("é", 5000)}
	r := VMResults(vm, nil, policy.Decision{Deny: []policy.Violation{long}}, nil)[0]
	if len(r.Description) > maxMessageBytes || len(r.Properties[PropField]) > maxFieldBytes || !strings.HasSuffix(r.Description, "…") {
		t.Errorf("message %d bytes, field %d bytes: not bounded", len(r.Description), len(r.Properties[PropField]))
	}
	var all []Result
	for i := 0; i < 2000; i++ {
		all = append(all, VMResults(VMRef("ns", fmt.Sprintf("vm-%04d", i), "u"), []string{"a", "b"}, policy.Decision{Deny: []policy.Violation{long}}, nil)...)
	}
	reports := Build("ns", all)
	if len(reports) < 2 {
		t.Fatalf("%d reports for %d large results, want several", len(reports), len(all))
	}
	total := 0
	for i, rep := range reports {
		want := ReportName
		if i > 0 {
			want = fmt.Sprintf("%s-%d", ReportName, i+1)
		}
		if rep.Name != want {
			t.Errorf("report %d named %s, want %s", i, rep.Name, want)
		}
		if n := resultsBytes(rep.Results); n > MaxReportBytes {
			t.Errorf("report %s holds %d bytes of results, more than %d", rep.Name, n, MaxReportBytes)
		}
		if rep.Summary.Fail+rep.Summary.Pass != len(rep.Results) {
			t.Errorf("report %s summary %+v for %d results", rep.Name, rep.Summary, len(rep.Results))
		}
		if i > 0 && subjectName(rep.Results[0]) == subjectName(reports[i-1].Results[len(reports[i-1].Results)-1]) {
			t.Errorf("VM %s split across reports", subjectName(rep.Results[0]))
		}
		total += len(rep.Results)
	}
	if total != len(all) {
		t.Errorf("%d results in the reports, want %d", total, len(all))
	}
	if Build("ns", nil) != nil {
		t.Error("a namespace without results got a report")
	}
}

// TestStampAndTransitions: an unchanged result keeps its timestamp (so an
// audit that finds nothing new writes nothing); transitions are pass↔fail
// of VMs the previous audit knew.
func TestStampAndTransitions(t *testing.T) {
	t0, t1 := time.Unix(1000, 0), time.Unix(2000, 0)
	bad := policy.Decision{Deny: []policy.Violation{{ID: "mount-path", Field: "f", Message: "m"}}}
	prev := VMResults(vm, []string{"mount-path", "disk-claim"}, policy.Decision{}, nil)
	Stamp(prev, nil, t0)
	next := VMResults(vm, []string{"mount-path", "disk-claim", "owner"}, bad, nil)
	Stamp(next, prev, t1)
	stamps := map[string]int64{}
	for _, r := range next {
		stamps[r.Rule] = r.Timestamp.Seconds
	}
	if stamps["disk-claim"] != 1000 || stamps["mount-path"] != 2000 || stamps["owner"] != 2000 {
		t.Errorf("timestamps %v: want the unchanged result's kept", stamps)
	}
	again := VMResults(vm, []string{"mount-path", "disk-claim", "owner"}, bad, nil)
	Stamp(again, next, time.Unix(3000, 0))
	if !Equal(Build("ns", again)[0], Build("ns", next)[0]) {
		t.Error("an audit that found nothing new built a different report")
	}

	newVM := VMResults(VMRef("team-a", "ws-new", "uid-2"), []string{"mount-path"}, bad, nil)
	owner := policy.Decision{Deny: []policy.Violation{{ID: "owner", Field: "f", Message: "m"}}}
	cases := map[string]struct {
		previous, next []Result
		want           []string
	}{
		"starts failing":          {prev, next, []string{"mount-path failing"}},
		"passes again":            {next, prev, []string{"mount-path passing"}},
		"unchanged":               {next, again, nil},
		"a VM new to the audit":   {prev, newVM, nil},
		"a new rule it now fails": {prev, VMResults(vm, []string{"mount-path", "disk-claim", "owner"}, owner, nil), []string{"owner failing"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, tr := range Transitions(tc.previous, tc.next) {
				s := tr.Result.Rule + " passing"
				if tr.Failing {
					s = tr.Result.Rule + " failing"
				}
				got = append(got, s)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("transitions %v, want %v", got, tc.want)
			}
		})
	}
}

// TestObjectRoundTrip: both report kinds carry the content and the label,
// and read back equal.
func TestObjectRoundTrip(t *testing.T) {
	rs := VMResults(vm, []string{"disk-claim", "mount-path"}, policy.Decision{Deny: []policy.Violation{{ID: "mount-path", Field: "f", Message: "m"}}, Revision: "rev1"}, nil)
	Stamp(rs, nil, time.Unix(1000, 0))
	rep := Build("team-a", rs)[0]
	for _, gvk := range []struct{ kind, apiVersion string }{{"PolicyReport", "wgpolicyk8s.io/v1alpha2"}, {"Report", "openreports.io/v1alpha1"}} {
		g := WGPolicy
		if gvk.kind == "Report" {
			g = OpenReports
		}
		u, err := Object(rep, g)
		if err != nil {
			t.Fatal(err)
		}
		if u.GetKind() != gvk.kind || u.GetAPIVersion() != gvk.apiVersion || u.GetNamespace() != "team-a" || u.GetName() != ReportName || u.GetLabels()[LabelManagedBy] != ManagedBy {
			t.Errorf("%s: object %s %s %s/%s %v", gvk.kind, u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName(), u.GetLabels())
		}
		back, err := FromObject(u)
		if err != nil {
			t.Fatal(err)
		}
		if !Equal(back, rep) {
			t.Errorf("%s: read back %+v, want %+v", gvk.kind, back, rep)
		}
		if back.Summary.Fail != 1 || back.Summary.Pass != 1 {
			t.Errorf("%s: summary %+v", gvk.kind, back.Summary)
		}
	}
}

// TestFromEvaluation: a decision gives its results; an evaluation past its
// deadline, or one that failed, gives an error result for every rule.
func TestFromEvaluation(t *testing.T) {
	late := &validate.DeadlineError{Module: "slow.rego", Revision: "rev1"}
	cases := map[string]struct {
		err  error
		want string
	}{
		"decided":           {want: "ws-alice disk-claim pass mode=deny field= msg=\"\"\nws-alice mount-path pass mode=deny field= msg=\"\""},
		"past the deadline": {err: fmt.Errorf("evaluate: %w", late), want: fmt.Sprintf("ws-alice disk-claim error mode=deny field= msg=%q\nws-alice mount-path error mode=deny field= msg=%q", late.Denial(), late.Denial())},
		"failed":            {err: errors.New("conflict"), want: "ws-alice disk-claim error mode=deny field= msg=\"the policies could not be evaluated: conflict\"\nws-alice mount-path error mode=deny field= msg=\"the policies could not be evaluated: conflict\""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := FromEvaluation(vm, []string{"mount-path", "disk-claim"}, policy.Decision{}, tc.err, nil, "rev1")
			if brief(got) != tc.want {
				t.Errorf("got\n%s\nwant\n%s", brief(got), tc.want)
			}
		})
	}
}
