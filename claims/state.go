package claims

import (
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/api"
)

// State is what a disk's annotations say.
type State struct {
	// ClaimedBy is the VM ("<ns>/<vm>") holding the writable claim, or "".
	ClaimedBy string
	// SharedBy are the VMs holding read-only claims, sorted, without
	// duplicates.
	SharedBy []string
	// ClaimedAt is when the newest claim was written; zero when the
	// annotation is absent or not RFC 3339.
	ClaimedAt time.Time
	// UIDs are the metadata.uid of the VM each claim was written for, by
	// holder; nil when none is recorded. A holder without an entry (a
	// claim written before uids were recorded) is bound by name only.
	UIDs map[string]types.UID
}

// Read returns the claim State recorded in obj's annotations. Blank entries
// are dropped; shared-by is sorted and deduplicated.
func Read(obj metav1.Object) State {
	a := obj.GetAnnotations()
	s := State{
		ClaimedBy: strings.TrimSpace(a[api.AnnotationClaimedBy]),
		SharedBy:  parseList(a[api.AnnotationSharedBy]),
	}
	if t, err := time.Parse(time.RFC3339, strings.TrimSpace(a[api.AnnotationClaimedAt])); err == nil {
		s.ClaimedAt = t
	}
	s.UIDs = parseUIDs(a[api.AnnotationClaimUIDs], s.Holders())
	return s
}

// UID is the uid recorded for holder's claim; "" when none is.
func (s State) UID(holder string) types.UID {
	return s.UIDs[holder]
}

// BoundTo reports whether holder's claim may belong to the VM of that name
// with uid: no uid is recorded for it (a claim written before uids were),
// or the one recorded is uid.
func (s State) BoundTo(holder string, uid types.UID) bool {
	recorded := s.UIDs[holder]
	return recorded == "" || recorded == uid
}

// Empty reports whether no VM holds a claim.
func (s State) Empty() bool {
	return s.ClaimedBy == "" && len(s.SharedBy) == 0
}

// Holders returns every VM holding a claim: the writer first, then the
// readers, each once.
func (s State) Holders() []string {
	out := make([]string, 0, 1+len(s.SharedBy))
	if s.ClaimedBy != "" {
		out = append(out, s.ClaimedBy)
	}
	for _, vm := range s.SharedBy {
		if vm != s.ClaimedBy {
			out = append(out, vm)
		}
	}
	return out
}

// Holds reports whether vm ("<ns>/<vm>") holds a claim, and whether that
// claim is read-only. A VM recorded as both writer and reader holds the
// writable claim.
func (s State) Holds(vm string) (held, readOnly bool) {
	if vm == "" {
		return false, false
	}
	if s.ClaimedBy == vm {
		return true, false
	}
	if slices.Contains(s.SharedBy, vm) {
		return true, true
	}
	return false, false
}

// without returns s with vms' claims removed. ClaimedAt is cleared when no
// claim is left.
func (s State) without(vms ...string) State {
	out := State{ClaimedBy: s.ClaimedBy, ClaimedAt: s.ClaimedAt}
	if slices.Contains(vms, out.ClaimedBy) {
		out.ClaimedBy = ""
	}
	for _, vm := range s.SharedBy {
		if !slices.Contains(vms, vm) {
			out.SharedBy = append(out.SharedBy, vm)
		}
	}
	if out.Empty() {
		out.ClaimedAt = time.Time{}
	}
	for holder, uid := range s.UIDs {
		if !slices.Contains(vms, holder) {
			out = out.withUID(holder, uid)
		}
	}
	return out
}

// withUID returns s with uid recorded for holder (removed when uid is "").
// The map is copied: States are values.
func (s State) withUID(holder string, uid types.UID) State {
	uids := make(map[string]types.UID, len(s.UIDs)+1)
	maps.Copy(uids, s.UIDs)
	delete(uids, holder)
	if uid != "" {
		uids[holder] = uid
	}
	if len(uids) == 0 {
		uids = nil
	}
	s.UIDs = uids
	return s
}

// equal reports whether s and o record the same annotations.
func (s State) equal(o State) bool {
	return s.ClaimedBy == o.ClaimedBy && slices.Equal(s.SharedBy, o.SharedBy) &&
		formatTime(s.ClaimedAt) == formatTime(o.ClaimedAt) && formatUIDs(s.UIDs) == formatUIDs(o.UIDs)
}

// apply writes s into annotations (which may be nil) and returns them;
// empty fields remove their annotation.
func (s State) apply(annotations map[string]string) map[string]string {
	if annotations == nil {
		annotations = map[string]string{}
	}
	set := func(k, v string) {
		if v == "" {
			delete(annotations, k)
		} else {
			annotations[k] = v
		}
	}
	set(api.AnnotationClaimedBy, s.ClaimedBy)
	set(api.AnnotationSharedBy, strings.Join(s.SharedBy, ","))
	set(api.AnnotationClaimedAt, formatTime(s.ClaimedAt))
	set(api.AnnotationClaimUIDs, formatUIDs(s.UIDs))
	if len(annotations) == 0 {
		return nil
	}
	return annotations
}

// Name is how a claim names vm: "<ns>/<vm>".
func Name(vm types.NamespacedName) string {
	return vm.String()
}

// ParseName reads a claim's "<ns>/<vm>"; ok is false when it is not of that
// form.
func ParseName(s string) (vm types.NamespacedName, ok bool) {
	ns, name, found := strings.Cut(s, "/")
	if !found || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// formatUIDs writes uids as "<holder>=<uid>,…", sorted by holder.
func formatUIDs(uids map[string]types.UID) string {
	parts := make([]string, 0, len(uids))
	for _, holder := range slices.Sorted(maps.Keys(uids)) {
		parts = append(parts, holder+"="+string(uids[holder]))
	}
	return strings.Join(parts, ",")
}

// parseUIDs reads "<holder>=<uid>,…", keeping only the entries of holders
// (an entry for a VM that holds no claim binds nothing); nil when none is
// left. Malformed entries are dropped: that claim is then bound by name.
func parseUIDs(v string, holders []string) map[string]types.UID {
	var out map[string]types.UID
	for _, p := range strings.Split(v, ",") {
		holder, uid, ok := strings.Cut(strings.TrimSpace(p), "=")
		holder, uid = strings.TrimSpace(holder), strings.TrimSpace(uid)
		if !ok || uid == "" || !slices.Contains(holders, holder) {
			continue
		}
		if out == nil {
			out = map[string]types.UID{}
		}
		out[holder] = types.UID(uid)
	}
	return out
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// parseList splits a comma-separated list, drops blanks, sorts and
// deduplicates it. An empty list is nil.
func parseList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
