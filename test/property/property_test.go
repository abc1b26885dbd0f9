package property

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/cloudinit"
	"github.com/virtstation/virtstation/internal/kvadmission"
	"github.com/virtstation/virtstation/internal/vmgen"
	"github.com/virtstation/virtstation/render"
)

// The corpus: make test runs defaultVMs cases of defaultSeed; the issue's
// done-criterion run is -vms 2000 (docs/property-test.md).
const (
	defaultVMs  = 200
	defaultSeed = 16
)

var (
	flagVMs  = flag.Int("vms", envInt("PROPERTY_VMS", defaultVMs), "how many generated VMs the property test admits (env PROPERTY_VMS)")
	flagSeed = flag.Uint64("seed", uint64(envInt("PROPERTY_SEED", defaultSeed)), "the property test's seed (env PROPERTY_SEED)")
	flagCase = flag.Int("case", envInt("PROPERTY_CASE", -1), "run only this case index of the seed (env PROPERTY_CASE)")
)

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

// failure is one property a case breaks. class groups failures that have
// one cause, for the summary.
type failure struct {
	check  string
	class  string
	detail string
}

// checkers are KubeVirt's admission, one per cluster default architecture.
// They look up the cluster instancetypes and preferences the corpus names
// in the package's API server (instancetypeKubeconfig).
type checkers map[string]*kvadmission.Checker

func startCheckers(t testing.TB) checkers {
	t.Helper()
	kubeconfig := instancetypeKubeconfig(t)
	kv := checkers{}
	for _, arch := range []string{"amd64", "arm64"} {
		kv[arch] = kvadmission.Start(t, arch, kvadmission.WithKubeconfig(kubeconfig))
	}
	return kv
}

// corpus is what the generator makes: every option on.
var corpus = vmgen.Options{Instancetypes: true}

// TestProperty admits the generated corpus and checks the five properties
// of every VM. A failure names the seed and case to rerun it alone, and the
// summary groups failures by class with one reproducer each.
func TestProperty(t *testing.T) {
	kv := startCheckers(t)
	t.Run("KubeVirt applies the cluster instancetypes", func(t *testing.T) { checkInstancetypesServed(t, kv["amd64"]) })
	ctx := context.Background()
	seed, n := *flagSeed, *flagVMs
	first, last := 0, n
	if *flagCase >= 0 {
		first, last = *flagCase, *flagCase+1
	}
	start := time.Now()
	features, denials := map[string]int{}, map[string]int{}
	type example struct {
		index int
		f     failure
		count int
	}
	classes := map[string]*example{}
	failed := 0
	for i := first; i < last; i++ {
		c := vmgen.Generate(vmgen.NewSource(seed, i), corpus)
		for _, f := range c.Features {
			features[f]++
		}
		fails, denied := checkCaseDenials(ctx, kv, c, fmt.Sprintf("seed-%d-case-%d", seed, i))
		for _, d := range denied {
			denials[indices.ReplaceAllString(secretName.ReplaceAllString(quoted.ReplaceAllString(d, `"…"`), "Secret … "), "[*]")]++
		}
		if len(fails) == 0 {
			continue
		}
		failed++
		for _, f := range fails {
			key := f.check + ": " + f.class
			if e, ok := classes[key]; ok {
				e.count++
				continue
			}
			classes[key] = &example{index: i, f: f, count: 1}
			t.Errorf("seed %d case %d (rerun: go test ./test/property -run TestProperty -args -seed %d -case %d): %s: %s\n%s\n%s",
				seed, i, seed, i, f.check, f.class, f.detail, caseYAML(c))
		}
	}
	t.Logf("property test: %d VMs (seed %d, cases %d to %d) in %s; %d cases fail", last-first, seed, first, last-1, time.Since(start).Round(time.Millisecond), failed)
	if len(classes) > 0 {
		keys := make([]string, 0, len(classes))
		for k := range classes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "  %4d× %s (first: case %d)\n", classes[k].count, k, classes[k].index)
		}
		t.Errorf("failing classes:\n%s", b.String())
	}
	if *flagCase < 0 && n >= defaultVMs {
		checkCoverage(t, features)
	}
	if testing.Verbose() {
		keys := make([]string, 0, len(features))
		for k := range features {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "  %5d %s\n", features[k], k)
		}
		t.Logf("features covered:\n%s", b.String())
		b.Reset()
		keys = keys[:0]
		for k := range denials {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %5d %s\n", denials[k], clipString(k, 240))
		}
		t.Logf("the webhook denied (KubeVirt accepts all of these VMs):\n%s", b.String())
	}
}

// FuzzProperty runs the same checks on cases the fuzzer's bytes choose
// (vmgen.BytesSource), so coverage guidance explores the generator's
// choices.
func FuzzProperty(f *testing.F) {
	for i := range 8 {
		b := make([]byte, 64)
		for j := range b {
			b[j] = byte(i*37 + j*11)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	kv := startCheckers(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, choices []byte) {
		c := vmgen.Generate(vmgen.BytesSource(choices), corpus)
		for _, fl := range checkCase(ctx, kv, c, "fuzz-request") {
			t.Errorf("%s: %s\n%s\n%s", fl.check, fl.class, fl.detail, caseYAML(c))
		}
	})
}

// requiredFeatures are what the issue asks the corpus to cover; a default
// run that misses one fails, so the generator cannot quietly stop making
// them.
var requiredFeatures = []string{
	"interfaces=auto-attached", "interfaces=masquerade", "interfaces=bridge", "interfaces=autoattach-off",
	"interfaces=masquerade+secondary", "interfaces=secondary-only", "secondary=sriov", "secondary=bridge",
	"existing-mac=colon", "existing-mac=dotted", "existing-mac=hyphen", "existing-mac=reserved-on-bridge",
	"cloud-init=cloudInitNoCloud", "cloud-init=cloudInitConfigDrive", "cloud-init=none",
	"userdata=userData", "userdata=userDataBase64", "userdata=secretRef", "userdata=none",
	"networkdata=networkData", "networkdata=networkDataBase64", "networkdata=networkDataSecretRef",
	"userdata-size=near-limit", "userdata-size=edge", "userdata-size=large",
	"data-disks=shorthand", "data-disks=json", "data-cdrom", "data-disk-readOnly", "data-disk-bus=sata", "data-cdrom-bus=sata",
	"gpu-annotation", "gpu-resources=limits", "user-gpus",
	"ssh=" + api.PropagationQemuGuestAgent, "ssh=" + api.PropagationCloudInit, "ssh=default-propagation",
	"video=vga", "video=virtio", "autoattachGraphicsDevice=false", "autoattachGraphicsDevice=true",
	"preference", "instancetype", "instancetype+preference", "runStrategy=Always", "runStrategy=Halted", "running=false", "generateName", "dataVolumeTemplates",
	"vm-arch=arm64", "vm-arch=s390x", "cluster-arch=arm64",
	"mac-annotation=auto", "mac-annotation=off", "mac-annotation=colon",
	"user-credentials", "user-credentials-named-like-virtstation's", "user-secret-named-like-virtstation's",
	"cloud-init-volume-named-vs-cloudinit", "long-name", "other-vm-holds-derived-mac",
}

func checkCoverage(t *testing.T, features map[string]int) {
	t.Helper()
	var missing []string
	for _, f := range requiredFeatures {
		if features[f] == 0 {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the corpus does not cover %s; change the generator's weights (internal/vmgen)", strings.Join(missing, ", "))
	}
}

// checkCase runs the five checks on one case. uid is the admission
// request's UID (it seeds the MAC of a generateName VM).
func checkCase(ctx context.Context, kv checkers, c vmgen.Case, uid string) []failure {
	fails, _ := checkCaseDenials(ctx, kv, c, uid)
	return fails
}

// checkCaseDenials is checkCase that also returns the causes of the
// webhook's denial of the CREATE, if it denied: a denial is a verdict,
// not a failure, but the verbose summary lists them for review.
func checkCaseDenials(ctx context.Context, kv checkers, c vmgen.Case, uid string) (fails []failure, denied []string) {
	fail := func(check, class, format string, args ...any) {
		fails = append(fails, failure{check: check, class: class, detail: fmt.Sprintf(format, args...)})
	}
	checker := kv[c.Architecture]

	// 0. The generator makes only VMs KubeVirt accepts as they are.
	before, err := kubevirt(checker, c.VM)
	if err != nil {
		fail("kubevirt", "checker error", "%v", err)
		return fails, denied
	}
	if !before.Allowed {
		fail("generator", "KubeVirt rejects the VM before Virtstation: "+verdictClass(before), "%s", verdictText(before))
		return fails, denied
	}

	w, err := newWorld(c)
	if err != nil {
		fail("harness", "world", "%v", err)
		return fails, denied
	}
	created, err := w.admit(ctx, uid, admissionv1.Create, c.VM, nil)
	if err != nil {
		fail("webhook", "admission fault", "%v", err)
		return fails, denied
	}
	written := w.takeWritten()
	if !created.allowed && created.code >= 500 {
		fail("webhook", "CREATE answered 500", "%s", created.message)
	}

	// 5. render reaches the webhook's verdict and output.
	fails = append(fails, compareRender(ctx, c, uid, created, written)...)
	if !created.allowed {
		denied = created.causes
		return fails, denied
	}

	// 1. KubeVirt accepts what Virtstation admitted.
	judged := map[string]bool{}
	checkKubeVirt := func(what string, obj map[string]any) {
		// The same admitted object needs judging once.
		if key := mustJSON(obj); judged[key] {
			return
		} else {
			judged[key] = true
		}
		v, err := kubevirt(checker, obj)
		if err != nil {
			fail("kubevirt", "checker error", "%s: %v", what, err)
			return
		}
		if !v.Allowed {
			fail("kubevirt", "rejects what Virtstation admitted: "+verdictClass(v), "%s: %s\nadmitted VM:\n%s", what, verdictText(v), toYAML(obj))
		}
	}
	checkKubeVirt("after CREATE", created.object)

	// 3. The user's own user-data survives byte for byte.
	fails = append(fails, checkUserData(ctx, w, c, created.object, "after CREATE")...)

	// 2. Admitting twice equals admitting once.
	// same fails unless an admission, what, gave want again.
	same := func(what string, want map[string]any, got outcome, err error) {
		switch {
		case err != nil:
			fail("idempotency", "admission fault on "+what, "%v", err)
		case !got.allowed:
			fail("idempotency", what+" denied what the admission before admitted", "%s", strings.Join(got.causes, "\n"))
		default:
			if d := diff(want, got.object); d != "" {
				fail("idempotency", what+" changes "+diffClass(want, got.object), "%s", d)
			}
		}
	}
	again, err := w.admit(ctx, uid, admissionv1.Create, created.object, nil)
	same("CREATE reinvocation", created.object, again, err)
	_ = w.takeWritten()

	stored := storedAs(created.object)
	updated, err := w.admit(ctx, "update-"+uid, admissionv1.Update, stored, stored)
	if err != nil {
		fail("idempotency", "admission fault on UPDATE", "%v", err)
		return fails, denied
	}
	if !updated.allowed {
		fail("idempotency", "UPDATE of the stored VM denied what CREATE admitted", "%s", strings.Join(updated.causes, "\n"))
		return fails, denied
	}
	if metaString(c.VM, "name") != "" {
		if d := diff(stored, updated.object); d != "" {
			fail("idempotency", "UPDATE of the stored VM changes "+diffClass(stored, updated.object), "%s", d)
		}
	} else {
		// Named only now, the VM may get what needs a name (the SSH keys
		// Secret); the update must then be stable.
		checkKubeVirt("after the first UPDATE of a generateName VM", updated.object)
		fails = append(fails, checkUserData(ctx, w, c, updated.object, "after the first UPDATE of a generateName VM")...)
	}
	for _, u := range []struct {
		what string
		old  map[string]any
	}{{"UPDATE reinvocation", stored}, {"a later UPDATE", updated.object}} {
		again, err := w.admit(ctx, "update-"+uid, admissionv1.Update, updated.object, u.old)
		same(u.what, updated.object, again, err)
	}
	// kubectl replace of the user's own manifest onto the stored VM.
	replaced, err := w.admit(ctx, "replace-"+uid, admissionv1.Update, withMetadataOf(c.VM, stored), updated.object)
	same("replacing with the user's manifest", updated.object, replaced, err)
	_ = w.takeWritten()

	// 4. Removing the annotations (and labels) gives the user's VM back.
	// Data disks change only on a stopped VM, so the user stops it first
	// (virtctl stop sets runStrategy Halted), and the VMI is gone.
	stop, err := w.admit(ctx, "stop-"+uid, admissionv1.Update, halted(updated.object), updated.object)
	switch {
	case err != nil:
		fail("round-trip", "admission fault on stop", "%v", err)
		return fails, denied
	case !stop.allowed:
		fail("round-trip", "stopping the VM denied", "%s", strings.Join(stop.causes, "\n"))
		return fails, denied
	}
	userVM := halted(withMetadataOf(c.VM, updated.object))
	for _, rt := range []struct {
		what   string
		labels bool
	}{{"annotations removed", false}, {"annotations and labels removed", true}} {
		back, err := w.admit(ctx, "strip-"+uid, admissionv1.Update, stripVirtstation(stop.object, rt.labels), stop.object)
		if err != nil {
			fail("round-trip", "admission fault with "+rt.what, "%v", err)
			continue
		}
		// The user's VM back: with the labels gone, the VM as written
		// (Virtstation no longer manages it); with the label kept, what
		// Virtstation admits for the VM had it never had the annotations
		// (the defaults, such as virtstation.io/mac: auto, still apply).
		want := outcome{allowed: true, object: stripVirtstation(userVM, rt.labels)}
		if !rt.labels {
			fresh, err := newWorld(c)
			if err != nil {
				fail("harness", "world", "%v", err)
				continue
			}
			if want, err = fresh.admit(ctx, "fresh-"+uid, admissionv1.Create, want.object, nil); err != nil {
				fail("round-trip", "admission fault on the VM without annotations", "%v", err)
				continue
			}
		}
		if back.allowed != want.allowed {
			fail("round-trip", fmt.Sprintf("%s: UPDATE allowed=%v, but a fresh VM without them allowed=%v", rt.what, back.allowed, want.allowed),
				"update: %s\nfresh: %s", strings.Join(back.causes, "\n"), strings.Join(want.causes, "\n"))
			continue
		}
		if !back.allowed {
			continue
		}
		// A MAC pinned on an interface the user left without one stays:
		// an existing MAC is never rewritten.
		wantObj := tolerateMACPin(normalizeRecord(want.object), c.VM)
		got := tolerateMACPin(normalizeRecord(back.object), c.VM)
		if rt.labels {
			got = tolerateDefaultInterface(got, c.VM)
		}
		if d := diff(wantObj, got); d != "" {
			for _, class := range diffClasses(wantObj, got) {
				fail("round-trip", rt.what+": the user's VM does not come back: "+class, "patch from the user's VM to the one admitted:\n%s", d)
			}
		}
		checkKubeVirt("after UPDATE with "+rt.what, back.object)
	}
	return fails, denied
}

// compareRender renders the case's VM with its cluster objects and compares
// the verdict with the webhook's CREATE.
// A generateName VM is rendered with the request's UID as its suffix, which
// render passes to the mutation as the webhook's request UID; render names
// it as the API server would, which the webhook's answer (nameless) is not
// compared on.
func compareRender(ctx context.Context, c vmgen.Case, uid string, hook outcome, written map[string]map[string]string) []failure {
	var fails []failure
	fail := func(class, format string, args ...any) {
		fails = append(fails, failure{check: "render-vs-webhook", class: class, detail: fmt.Sprintf(format, args...)})
	}
	objs := make([]render.Object, 0, len(c.Objects))
	for _, o := range c.Objects {
		objs = append(objs, deepCopy(o))
	}
	opts := render.Options{
		Manifests:           []render.Object{deepCopy(c.VM)},
		Cluster:             objs,
		Namespace:           c.Namespace,
		DefaultArchitecture: c.Architecture,
	}
	generateName := metaString(c.VM, "name") == "" && metaString(c.VM, "generateName") != ""
	if generateName {
		opts.GenerateNameSuffix = uid
	}
	verdicts, err := render.Render(ctx, opts)
	if err != nil {
		fail("render fails on a VM the webhook answers", "render: %v\nwebhook: allowed=%v %s", err, hook.allowed, strings.Join(hook.causes, "; "))
		return fails
	}
	if len(verdicts) != 1 {
		fail("render returns other than one verdict", "%d verdicts", len(verdicts))
		return fails
	}
	v := verdicts[0]
	var causes []string
	for _, e := range v.Denied {
		causes = append(causes, e.Field+": "+e.ErrorBody())
	}
	sort.Strings(causes)
	renderAllowed := len(v.Denied) == 0
	switch {
	case renderAllowed != hook.allowed:
		fail(fmt.Sprintf("verdicts differ (render allowed=%v, webhook allowed=%v)", renderAllowed, hook.allowed),
			"render denies: %s\nwebhook denies: %s (%s)", strings.Join(causes, "; "), strings.Join(hook.causes, "; "), hook.message)
		return fails
	case !hook.allowed:
		if strings.Join(causes, "\n") != strings.Join(hook.causes, "\n") {
			fail("denials differ", "render: %s\nwebhook: %s", strings.Join(causes, "\n"), strings.Join(hook.causes, "\n"))
		}
		return fails
	}
	if generateName {
		if got, want := metaString(v.Object, "name"), render.GeneratedName(metaString(c.VM, "generateName"), uid); got != want {
			fail("render names a generateName VM otherwise than the API server", "render: %q, want %q", got, want)
		}
		if md, ok := v.Object["metadata"].(map[string]any); ok {
			delete(md, "name")
		}
	}
	if d := diff(hook.object, v.Object); d != "" {
		fail("admitted objects differ in "+diffClass(hook.object, v.Object), "patch from the webhook's object to render's:\n%s", d)
	}
	if a, b := strings.Join(hook.warnings, "\n"), strings.Join(v.Warnings, "\n"); a != b {
		fail("warnings differ", "webhook:\n%s\nrender:\n%s", a, b)
	}
	rendered := map[string]map[string]string{}
	for _, s := range v.Secrets {
		name := metaString(s, "name")
		d := map[string]string{}
		if sd, ok := s["stringData"].(map[string]any); ok {
			for k, x := range sd {
				d[k], _ = x.(string)
			}
		}
		if bd, ok := s["data"].(map[string]any); ok {
			for k, x := range bd {
				str, _ := x.(string)
				raw, err := base64.StdEncoding.DecodeString(str)
				if err != nil {
					fail("render prints a Secret whose data is not base64", "%s/%s: %v", name, k, err)
				}
				d[k] = string(raw)
			}
		}
		rendered[name] = d
	}
	if a, b := mustJSON(written), mustJSON(rendered); a != b {
		fail("Secrets differ", "webhook writes: %s\nrender prints: %s", a, b)
	}
	return fails
}

// checkUserData checks that the user's user-data is what the guest gets
// from the user (split from Virtstation's part), that the user's own
// Secret is untouched, and that network data is unchanged.
func checkUserData(ctx context.Context, w *world, c vmgen.Case, obj map[string]any, when string) []failure {
	var fails []failure
	fail := func(class, format string, args ...any) {
		fails = append(fails, failure{check: "user-data", class: class, detail: when + ": " + fmt.Sprintf(format, args...)})
	}
	before, beforeKind := cloudInitSource(c.VM)
	after, afterKind := cloudInitSource(obj)
	if before != nil {
		if after == nil || afterKind != beforeKind {
			fail("the user's cloud-init volume is gone or changed kind", "before %s, after %s", beforeKind, afterKind)
			return fails
		}
		for _, k := range []string{"networkData", "networkDataBase64", "networkDataSecretRef"} {
			if mustJSON(before[k]) != mustJSON(after[k]) {
				fail("network data changed", "%s: %s became %s", k, mustJSON(before[k]), mustJSON(after[k]))
			}
		}
		if rec, _ := api.ParseInjected(annotation(obj, api.AnnotationInjected)); rec.CloudInit == nil && mustJSON(before) != mustJSON(after) {
			fail("the cloud-init volume changed though Virtstation records no cloud-init part", "%s", diff(map[string]any{"v": before}, map[string]any{"v": after}))
		}
	}
	// The user's own accessCredentials entries stay, whatever they source.
	have := map[string]bool{}
	for _, e := range list(obj, "spec", "template", "spec", "accessCredentials") {
		have[mustJSON(e)] = true
	}
	for _, e := range list(c.VM, "spec", "template", "spec", "accessCredentials") {
		if !have[mustJSON(e)] {
			fails = append(fails, failure{check: "user-fields", class: "the user's own accessCredentials entry is dropped", detail: when + ": " + mustJSON(e)})
		}
	}
	if after == nil {
		return fails
	}
	data, where, err := userDataBytes(ctx, w, c.Namespace, after)
	if err != nil {
		fail("the admitted user-data cannot be read", "%v", err)
		return fails
	}
	user, _, err := cloudinit.Split(data)
	if err != nil {
		fail("the admitted user-data does not split", "%s: %v", where, err)
		return fails
	}
	var want []byte
	if c.UserData != nil {
		want = c.UserData.Data
		if c.UserData.Field == "secretRef" {
			s, err := w.Secret(ctx, c.Namespace, c.UserData.Secret)
			if err != nil || s == nil {
				fail("the user's user-data Secret is gone", "%s: %v", c.UserData.Secret, err)
			} else if orig := originalSecret(c, c.UserData.Secret); mustJSON(secretData(s)) != mustJSON(orig) {
				fail("the user's user-data Secret was changed", "%s", c.UserData.Secret)
			}
		}
	}
	if !bytes.Equal(user, want) {
		fail("the user's user-data does not survive byte for byte", "given in %s (%d bytes), read back from %s: %d bytes\nwant %q\ngot  %q",
			fieldOf(c.UserData), len(want), where, len(user), clip(want), clip(user))
	}
	return fails
}

func fieldOf(ud *vmgen.UserData) string {
	if ud == nil {
		return "nothing"
	}
	return ud.Field
}

func originalSecret(c vmgen.Case, name string) map[string]string {
	for _, o := range c.Objects {
		if o["kind"] == "Secret" && metaString(o, "name") == name {
			d := map[string]string{}
			data, _ := o["data"].(map[string]any)
			for k, v := range data {
				s, _ := v.(string)
				raw, _ := base64.StdEncoding.DecodeString(s) // the generator encodes it
				d[k] = string(raw)
			}
			return d
		}
	}
	return nil
}

// cloudInitSource is the first cloud-init volume's source, as KubeVirt
// reads it.
func cloudInitSource(obj map[string]any) (map[string]any, string) {
	for _, v := range list(obj, "spec", "template", "spec", "volumes") {
		vol, _ := v.(map[string]any)
		for _, k := range []string{"cloudInitNoCloud", "cloudInitConfigDrive"} {
			if src, ok := vol[k].(map[string]any); ok {
				return src, k
			}
		}
	}
	return nil, ""
}

// userDataBytes reads the user-data the guest gets from a cloud-init
// source, as virt-launcher does.
func userDataBytes(ctx context.Context, w *world, ns string, src map[string]any) ([]byte, string, error) {
	if ref, ok := src["secretRef"].(map[string]any); ok {
		name, _ := ref["name"].(string)
		s, err := w.Secret(ctx, ns, name)
		if err != nil {
			return nil, "", err
		}
		if s == nil {
			return nil, "", fmt.Errorf("secretRef %s does not exist", name)
		}
		for _, k := range []string{"userdata", "userData"} {
			if v, ok := s.Data[k]; ok {
				return v, "secretRef " + name, nil
			}
		}
		return nil, "secretRef " + name, nil
	}
	if s, _ := src["userDataBase64"].(string); s != "" {
		raw, err := base64.StdEncoding.DecodeString(s)
		return raw, "userDataBase64", err
	}
	s, _ := src["userData"].(string)
	return []byte(s), "userData", nil
}

// halted is obj after virtctl stop: runStrategy Halted.
func halted(obj map[string]any) map[string]any {
	out := deepCopy(obj)
	spec, _ := out["spec"].(map[string]any)
	delete(spec, "running")
	spec["runStrategy"] = string(kubevirtv1.RunStrategyHalted)
	return out
}

// storedAs is obj as the API server stores it after CREATE: a name (for
// generateName), a uid and a resourceVersion.
func storedAs(obj map[string]any) map[string]any {
	out := deepCopy(obj)
	md, _ := out["metadata"].(map[string]any)
	if name, _ := md["name"].(string); name == "" {
		gen, _ := md["generateName"].(string)
		md["name"] = gen + "x7k2p"
	}
	md["uid"] = "6a1c2e0d-1b7e-4c55-9d0e-3f9a7c1b2d4e"
	md["resourceVersion"] = "1001"
	md["generation"] = int64(1)
	return out
}

// withMetadataOf is the user's manifest with the server-set metadata of
// stored (name, uid, resourceVersion, generation).
func withMetadataOf(manifest, stored map[string]any) map[string]any {
	out := deepCopy(manifest)
	md, _ := out["metadata"].(map[string]any)
	smd, _ := stored["metadata"].(map[string]any)
	for _, k := range []string{"name", "uid", "resourceVersion", "generation"} {
		if v, ok := smd[k]; ok {
			md[k] = v
		}
	}
	return out
}

// stripVirtstation removes the virtstation.io/ annotations a user writes
// (Virtstation's own record, virtstation.io/injected and policy-revision,
// stays, as kubectl apply leaves fields it did not set), and with labels
// the virtstation.io/ labels.
func stripVirtstation(obj map[string]any, labels bool) map[string]any {
	out := deepCopy(obj)
	md, _ := out["metadata"].(map[string]any)
	if ann, ok := md["annotations"].(map[string]any); ok {
		for k := range ann {
			if strings.HasPrefix(k, "virtstation.io/") && k != api.AnnotationInjected && k != api.AnnotationPolicyRevision {
				delete(ann, k)
			}
		}
		if len(ann) == 0 {
			delete(md, "annotations")
		}
	}
	if l, ok := md["labels"].(map[string]any); ok && labels {
		for k := range l {
			if strings.HasPrefix(k, "virtstation.io/") {
				delete(l, k)
			}
		}
		if len(l) == 0 {
			delete(md, "labels")
		}
	}
	return out
}

// normalizeRecord drops Virtstation's record annotations.
func normalizeRecord(obj map[string]any) map[string]any {
	out := deepCopy(obj)
	md, _ := out["metadata"].(map[string]any)
	if ann, ok := md["annotations"].(map[string]any); ok {
		delete(ann, api.AnnotationInjected)
		delete(ann, api.AnnotationPolicyRevision)
		if len(ann) == 0 {
			delete(md, "annotations")
		}
	}
	return out
}

// tolerateMACPin drops the macAddress of the interfaces that have none in
// user (the user's manifest): Virtstation pins one and never rewrites it.
func tolerateMACPin(obj, user map[string]any) map[string]any {
	out := deepCopy(obj)
	hasMAC := map[string]bool{}
	for _, i := range list(user, "spec", "template", "spec", "domain", "devices", "interfaces") {
		iface, _ := i.(map[string]any)
		name, _ := iface["name"].(string)
		_, hasMAC[name] = iface["macAddress"]
	}
	for _, i := range list(out, "spec", "template", "spec", "domain", "devices", "interfaces") {
		iface, _ := i.(map[string]any)
		name, _ := iface["name"].(string)
		if !hasMAC[name] {
			delete(iface, "macAddress")
		}
	}
	return out
}

// tolerateDefaultInterface drops the default interface and pod network
// Virtstation adds to a VM that has none, to pin its MAC: they stay with
// the MAC.
func tolerateDefaultInterface(obj, user map[string]any) map[string]any {
	out := deepCopy(obj)
	if len(list(user, "spec", "template", "spec", "domain", "devices", "interfaces")) > 0 || len(list(user, "spec", "template", "spec", "networks")) > 0 {
		return out
	}
	tmpl := mapAt(out, "spec", "template", "spec")
	devices := mapAt(out, "spec", "template", "spec", "domain", "devices")
	if tmpl != nil && devices != nil && len(list(out, "spec", "template", "spec", "domain", "devices", "interfaces")) == 1 && len(list(out, "spec", "template", "spec", "networks")) == 1 {
		delete(devices, "interfaces")
		delete(tmpl, "networks")
	}
	return out
}

// kubevirt asks KubeVirt's admission about obj.
func kubevirt(c *kvadmission.Checker, obj map[string]any) (kvadmission.Verdict, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return kvadmission.Verdict{}, err
	}
	var vm kubevirtv1.VirtualMachine
	if err := json.Unmarshal(b, &vm); err != nil {
		return kvadmission.Verdict{}, fmt.Errorf("decode VirtualMachine: %w", err)
	}
	return c.Check(&vm)
}

var (
	indices    = regexp.MustCompile(`\[\d+\]`)
	quoted     = regexp.MustCompile(`"[^"]*"`)
	secretName = regexp.MustCompile(`Secret \S+ `)
)

// verdictClass is a KubeVirt refusal without its list indices, to group
// failures of one cause.
func verdictClass(v kvadmission.Verdict) string {
	var parts []string
	for _, c := range v.Causes {
		parts = append(parts, indices.ReplaceAllString(c.Field, "[*]")+": "+c.Message)
	}
	sort.Strings(parts)
	return v.Stage + ": " + strings.Join(parts, "; ")
}

func verdictText(v kvadmission.Verdict) string {
	var b strings.Builder
	fmt.Fprintf(&b, "stage %s", v.Stage)
	for _, c := range v.Causes {
		fmt.Fprintf(&b, "\n  %s: %s", c.Field, c.Message)
	}
	return b.String()
}

// diff is the JSON patch from a to b, "" when they are equal.
func diff(a, b map[string]any) string {
	ops, err := jsonDiff(a, b)
	if err != nil {
		return fmt.Sprintf("(cannot diff: %v)", err)
	}
	if len(ops) == 0 {
		return ""
	}
	var lines []string
	for _, op := range ops {
		lines = append(lines, clipString(op.Json(), 400))
	}
	return strings.Join(lines, "\n")
}

// diffClass names the paths that differ, without list indices.
func diffClass(a, b map[string]any) string { return strings.Join(diffClasses(a, b), ", ") }

// diffClasses lists the operations that turn a into b, without list
// indices.
func diffClasses(a, b map[string]any) []string {
	ops, err := jsonDiff(a, b)
	if err != nil {
		return []string{"(cannot diff)"}
	}
	seen := map[string]bool{}
	var out []string
	for _, op := range ops {
		k := op.Operation + " " + indices.ReplaceAllString(regexp.MustCompile(`/\d+(/|$)`).ReplaceAllString(op.Path, "/*$1"), "[*]")
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// jsonDiff is the JSON patch from a to b, its operations in path order.
func jsonDiff(a, b map[string]any) ([]jsonpatch.Operation, error) {
	ops, err := jsonpatch.CreatePatch([]byte(mustJSON(a)), []byte(mustJSON(b)))
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
	return ops, err
}

// roundTrip normalizes numbers and types through JSON.
func roundTrip(m map[string]any) map[string]any {
	var out map[string]any
	if err := json.Unmarshal([]byte(mustJSON(m)), &out); err != nil {
		panic(err)
	}
	return out
}

func deepCopy(m map[string]any) map[string]any { return roundTrip(m) }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func list(obj map[string]any, path ...string) []any {
	m := mapAt(obj, path[:len(path)-1]...)
	l, _ := m[path[len(path)-1]].([]any)
	return l
}

func mapAt(obj map[string]any, path ...string) map[string]any {
	cur := obj
	for _, p := range path {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return nil
		}
		cur = next
	}
	return cur
}

func annotation(obj map[string]any, key string) string {
	ann := mapAt(obj, "metadata", "annotations")
	s, _ := ann[key].(string)
	return s
}

func clip(b []byte) string { return clipString(string(b), 300) }

func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("…(%d more bytes)", len(s)-n)
}

// caseYAML prints a case as the multi-document YAML `virtstation render -f
// vm.yaml --objects objects.yaml` reads: the VM, then its cluster objects.
func caseYAML(c vmgen.Case) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# cluster default architecture: %s\n", c.Architecture)
	for i, o := range append([]map[string]any{c.VM}, c.Objects...) {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(toYAML(o))
	}
	return b.String()
}

func toYAML(o map[string]any) string {
	y, err := yaml.Marshal(o)
	if err != nil {
		return fmt.Sprintf("(yaml: %v)", err)
	}
	return string(y)
}
