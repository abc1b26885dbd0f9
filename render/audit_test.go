package render_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/policyreport"
	"github.com/virtstation/virtstation/render"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// auditVM is a managed VM (unless managed is false) with annotations.
func auditVM(ns, name, uid string, managed bool, annotations map[string]any) render.Object {
	md := map[string]any{"name": name, "namespace": ns, "annotations": annotations}
	if uid != "" {
		md["uid"] = uid
	}
	if managed {
		md["labels"] = map[string]any{"virtstation.io/managed": "true"}
	}
	return render.Object{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": md,
		"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{"spec": map[string]any{
			"domain": map[string]any{"devices": map[string]any{}},
		}}},
	}
}

// dataDisk is a labelled data disk (PVC), claimed by holder ("ns/vm") unless "".
func dataDisk(ns, name, holder string) render.Object {
	md := map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"virtstation.io/data-disk": "true"}}
	if holder != "" {
		md["annotations"] = map[string]any{"virtstation.io/claimed-by": holder, "virtstation.io/claimed-at": "2026-01-01T00:00:00Z"}
	}
	return render.Object{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": md}
}

// attaching gives vm a volume of the PVC disk, as the mutating webhook
// adds for a data disk.
func attaching(vm render.Object, disk string) render.Object {
	spec := vm["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	spec["volumes"] = []any{map[string]any{"name": "vs-" + disk, "persistentVolumeClaim": map[string]any{"claimName": disk}}}
	return vm
}

func modesConfigMap(data map[string]any) render.Object {
	return render.Object{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": policy.ModesConfigMapName, "namespace": "virtstation-system"}, "data": data}
}

// outcomes lists each result as "report ns/vm(uid) rule=result mode", and
// each non-passing result's field and message on the next line.
func outcomes(reports []policyreport.Report) []string {
	var out []string
	for _, r := range reports {
		for _, res := range r.Results {
			s := res.Subjects[0]
			out = append(out, fmt.Sprintf("%s/%s %s/%s(%s) %s=%s %s", r.Namespace, r.Name, s.Namespace, s.Name, s.UID, res.Rule, res.Result, res.Properties[policyreport.PropMode]))
			if res.Result != policyreport.Pass {
				out = append(out, fmt.Sprintf("  %s: %s", res.Properties[policyreport.PropField], res.Description))
			}
		}
	}
	return out
}

// operatorPolicy denies a VM without a team label and warns of a -tmp name.
var operatorPolicy = []validate.Module{{Name: "team.rego", Source: `package virtstation.rules.team

deny contains {"id": "team", "field": "metadata.labels[team]", "message": "a team label is required (rule: team; fix: add one)"} if {
	not input.object.metadata.labels.team
}

warn contains {"id": "tmp-name", "field": "metadata.name", "message": "a -tmp VM is deleted at night (rule: tmp-name; fix: none needed)"} if {
	endswith(input.object.metadata.name, "-tmp")
}
`}}

const etcMessage = `mount path "/etc/app" is inside the system directory /etc (rule: mount-path; fix: mount the disk at a directory of its own, such as /srv/<name>, /data or /mnt/<name>)`

// TestAudit: the offline audit gives each managed VM of the world the
// result the validating webhook's decision on it means, per rule, under
// the modes among the objects.
func TestAudit(t *testing.T) {
	ctx := context.Background()
	shipped := validate.NewEngine(5 * time.Second)
	if _, err := shipped.Load(ctx, validate.ShippedModules()); err != nil {
		t.Fatal(err)
	}
	withOperator := validate.NewEngine(5 * time.Second)
	if _, err := withOperator.Load(ctx, validate.Merge(validate.ShippedModules(), operatorPolicy)); err != nil {
		t.Fatal(err)
	}
	etc := map[string]any{"virtstation.io/data-disks": "app:/etc/app"}
	etcFixed := map[string]any{"virtstation.io/data-disks": "app:/srv/app"}
	shm := map[string]any{"virtstation.io/shared-memory": "1Gi"}

	tests := map[string]struct {
		engine             *validate.Engine
		cluster, manifests []render.Object
		want               []string
	}{
		"a passing VM passes every rule": {
			engine:  shipped,
			cluster: []render.Object{auditVM("team-a", "good", "u1", true, nil)},
			want: []string{
				"team-a/virtstation-policy team-a/good(u1) disk-claim=pass deny",
				"team-a/virtstation-policy team-a/good(u1) mount-path=pass deny",
				"team-a/virtstation-policy team-a/good(u1) shared-memory=pass deny",
			},
		},
		"a shipped rule denies a mount under /etc": {
			engine:  shipped,
			cluster: []render.Object{dataDisk("team-a", "app", "team-a/bad"), auditVM("team-a", "bad", "u2", true, etc)},
			want: []string{
				"team-a/virtstation-policy team-a/bad(u2) disk-claim=pass deny",
				"team-a/virtstation-policy team-a/bad(u2) mount-path=fail deny",
				"  metadata.annotations[virtstation.io/data-disks][0].mountPath: " + etcMessage,
				"team-a/virtstation-policy team-a/bad(u2) shared-memory=pass deny",
			},
		},
		"dryrun fails and warn mode warns, as the modes ConfigMap says": {
			engine: shipped,
			cluster: []render.Object{
				modesConfigMap(map[string]any{"mount-path": "warn", "shared-memory": "dryrun"}),
				dataDisk("team-a", "app", "team-a/bad"), auditVM("team-a", "bad", "u2", true, etc),
				auditVM("team-b", "shm", "u3", true, shm),
			},
			want: []string{
				"team-a/virtstation-policy team-a/bad(u2) disk-claim=pass deny",
				"team-a/virtstation-policy team-a/bad(u2) mount-path=warn warn",
				"  metadata.annotations[virtstation.io/data-disks][0].mountPath: " + etcMessage,
				"team-a/virtstation-policy team-a/bad(u2) shared-memory=pass dryrun",
				"team-b/virtstation-policy team-b/shm(u3) disk-claim=pass deny",
				"team-b/virtstation-policy team-b/shm(u3) mount-path=pass warn",
				"team-b/virtstation-policy team-b/shm(u3) shared-memory=fail dryrun",
				"  metadata.annotations[virtstation.io/shared-memory]: annotation virtstation.io/shared-memory is set, but VMs cannot use shared memory: a KubeVirt VM runs its own kernel, so it has no POSIX shared memory (/dev/shm) with the host or with other pods (rule: shared-memory; fix: remove the annotation; share data through a data disk or over the network instead)",
			},
		},
		"an operator policy's deny and warn rules": {
			engine:  withOperator,
			cluster: []render.Object{auditVM("team-a", "dev-tmp", "u4", true, nil)},
			want: []string{
				"team-a/virtstation-policy team-a/dev-tmp(u4) disk-claim=pass deny",
				"team-a/virtstation-policy team-a/dev-tmp(u4) mount-path=pass deny",
				"team-a/virtstation-policy team-a/dev-tmp(u4) shared-memory=pass deny",
				"team-a/virtstation-policy team-a/dev-tmp(u4) team=fail deny",
				"  metadata.labels[team]: a team label is required (rule: team; fix: add one)",
				"team-a/virtstation-policy team-a/dev-tmp(u4) tmp-name=warn deny",
				"  metadata.name: a -tmp VM is deleted at night (rule: tmp-name; fix: none needed)",
			},
		},
		"a disk another VM holds fails disk-claim": {
			engine: shipped,
			cluster: []render.Object{
				dataDisk("team-a", "home", "team-a/owner"),
				attaching(auditVM("team-a", "owner", "u5", true, map[string]any{"virtstation.io/data-disks": "home:/home"}), "home"),
				auditVM("team-a", "second", "u6", true, map[string]any{"virtstation.io/data-disks": "home:/home"}),
			},
			want: []string{
				"team-a/virtstation-policy team-a/owner(u5) disk-claim=pass deny",
				"team-a/virtstation-policy team-a/owner(u5) mount-path=pass deny",
				"team-a/virtstation-policy team-a/owner(u5) shared-memory=pass deny",
				"team-a/virtstation-policy team-a/second(u6) disk-claim=fail deny",
				"  metadata.annotations[virtstation.io/data-disks][0].name: data disk \"home\" is attached writable to VM team-a/owner (rule: disk-claim; fix: detach it from team-a/owner or delete that VM first, or use another disk)",
				"team-a/virtstation-policy team-a/second(u6) mount-path=pass deny",
				"team-a/virtstation-policy team-a/second(u6) shared-memory=pass deny",
			},
		},
		"a manifest admitted onto a VM fixes it and keeps its UID": {
			engine:    shipped,
			cluster:   []render.Object{dataDisk("team-a", "app", "team-a/bad"), auditVM("team-a", "bad", "u2", true, etc)},
			manifests: []render.Object{auditVM("team-a", "bad", "", true, etcFixed)},
			want: []string{
				"team-a/virtstation-policy team-a/bad(u2) disk-claim=pass deny",
				"team-a/virtstation-policy team-a/bad(u2) mount-path=pass deny",
				"team-a/virtstation-policy team-a/bad(u2) shared-memory=pass deny",
			},
		},
		"a denied manifest leaves the stored VM as it is": {
			engine:    shipped,
			cluster:   []render.Object{auditVM("team-a", "vm", "u7", true, nil)},
			manifests: []render.Object{auditVM("team-a", "vm", "", true, shm)},
			want: []string{
				"team-a/virtstation-policy team-a/vm(u7) disk-claim=pass deny",
				"team-a/virtstation-policy team-a/vm(u7) mount-path=pass deny",
				"team-a/virtstation-policy team-a/vm(u7) shared-memory=pass deny",
			},
		},
		"a new manifest VM is audited, without a UID": {
			engine:    shipped,
			manifests: []render.Object{auditVM("team-a", "new", "", true, nil)},
			want: []string{
				"team-a/virtstation-policy team-a/new() disk-claim=pass deny",
				"team-a/virtstation-policy team-a/new() mount-path=pass deny",
				"team-a/virtstation-policy team-a/new() shared-memory=pass deny",
			},
		},
		"unmanaged VMs have no report": {
			engine:  shipped,
			cluster: []render.Object{auditVM("team-a", "plain", "u8", false, shm)},
		},
	}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			reports, err := render.Audit(ctx, render.Options{Cluster: tc.cluster, Manifests: tc.manifests, Policies: tc.engine, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomes(reports); !slices.Equal(got, tc.want) {
				t.Errorf("results:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for _, r := range reports {
				for _, res := range r.Results {
					if res.Timestamp.Seconds != now.Unix() || res.Properties[policyreport.PropRevision] != tc.engine.Revision() {
						t.Errorf("%s/%s: timestamp %d, revision %q; want %d, %q", res.Subjects[0].Name, res.Rule,
							res.Timestamp.Seconds, res.Properties[policyreport.PropRevision], now.Unix(), tc.engine.Revision())
					}
				}
				if r.Summary != policyreport.Summarise(r.Results) {
					t.Errorf("%s: summary %+v does not count its results", r.Namespace, r.Summary)
				}
			}
		})
	}
}

// TestAuditErrors: what the audit cannot do it says, naming the object.
func TestAuditErrors(t *testing.T) {
	ctx := context.Background()
	engine := validate.NewEngine(5 * time.Second)
	if _, err := engine.Load(ctx, validate.ShippedModules()); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		opts render.Options
		want string
	}{
		"no policies": {
			opts: render.Options{Cluster: []render.Object{auditVM("team-a", "vm", "", true, nil)}},
			want: "audit needs the policies",
		},
		"a bad mode": {
			opts: render.Options{Policies: engine, Cluster: []render.Object{modesConfigMap(map[string]any{"mount-path": "audit"})}},
			want: `ConfigMap virtstation-system/virtstation-policy-config: data[mount-path]: Unsupported value: "audit"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := render.Audit(ctx, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Audit error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// slowPolicy runs for seconds on every VM.
var slowPolicy = []validate.Module{{Name: "slow.rego", Source: `package virtstation.rules.slow

deny contains {"id": "slow", "field": "metadata", "message": "never"} if {
	some i in numbers.range(1, 3000)
	some j in numbers.range(1, 3000)
	i * j < 0
}
`}}

// TestAuditDeadline: a VM whose evaluation runs past the deadline gets an
// error result on every rule, with the webhook's deadline denial.
func TestAuditDeadline(t *testing.T) {
	ctx := context.Background()
	engine := validate.NewEngine(50 * time.Millisecond)
	if _, err := engine.Load(ctx, validate.Merge(validate.ShippedModules(), slowPolicy)); err != nil {
		t.Fatal(err)
	}
	reports, err := render.Audit(ctx, render.Options{Policies: engine, Cluster: []render.Object{auditVM("team-a", "vm", "u1", true, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(reports) != 1 || len(reports[0].Results) != len(engine.Rules()) || reports[0].Summary.Error != len(engine.Rules()) {
		t.Fatalf("reports = %+v, want one error result for each of %v", reports, engine.Rules())
	}
	for _, res := range reports[0].Results {
		if !strings.Contains(res.Description, "slow.rego") {
			t.Errorf("%s: message %q does not name the slow module", res.Rule, res.Description)
		}
	}
}
