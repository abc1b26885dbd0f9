package policy

import "sort"

// Rule ids. Every admission denial says "(rule: <id>; fix: <how>)" (see
// Explain), and the enforcement-modes ConfigMap (ModesConfigMapName) keys on
// the same ids. The ids below are those of the checks written in Go; the Rego rules
// (mount-path, disk-claim, shared-memory, and operator rules) take theirs
// from the loaded policies. GoRules says which of these take a mode.
const (
	// RuleMAC: the virtstation.io/mac annotation and the pinned MAC.
	RuleMAC = "mac"
	// RuleDataDisks: the virtstation.io/data-disks annotation, the disks it
	// names and when attachments may change.
	RuleDataDisks = "data-disks"
	// RuleGPUs: the virtstation.io/gpus annotation and */gpu resources.
	RuleGPUs = "gpus"
	// RuleVideo: the virtstation.io/video annotation.
	RuleVideo = "video"
	// RuleSSHKeys: the virtstation.io/ssh-user and ssh-propagation
	// annotations.
	RuleSSHKeys = "ssh-keys"
	// RuleCloudInit: merging the user's cloud-init user-data.
	RuleCloudInit = "cloud-init"
	// RuleLifecycle: the idle-stop annotations (api/lifecycle.go).
	RuleLifecycle = "lifecycle"
	// RuleLimits: the size limits (api/limits.go).
	RuleLimits = "limits"
	// RuleSecrets: the per-VM Secrets the mutating webhook writes.
	RuleSecrets = "secrets"
	// RuleDiskClaim: a data disk is claimed by one VM at a time. The Rego
	// rule of that name judges managed VMs; the Go check of unmanaged VMs
	// reports under the same id, so one mode covers both.
	RuleDiskClaim = "disk-claim"
	// RuleDataDiskDelete: deleting a claimed or in-use data disk.
	RuleDataDiskDelete = "data-disk-delete"
	// RulePolicyDeadline: a policy evaluation that ran past its deadline.
	RulePolicyDeadline = "policy-deadline"
	// RulePolicyBudget: a policy ConfigMap whose Rego runs over the time
	// budget on the sample inputs.
	RulePolicyBudget = "policy-budget"
	// RulePolicyMemory: a policy ConfigMap whose tests or evaluation on the
	// sample inputs go over the memory budget.
	RulePolicyMemory = "policy-memory"
	// RuleUnnamed is the id of a Rego violation that gives none.
	RuleUnnamed = "policy"
)

// GoRule is a check written in Go.
type GoRule struct {
	// ID is the rule id.
	ID string
	// Modes: the enforcement modes apply to its denials. When false the
	// check always denies, and the modes ConfigMap may not name it.
	Modes bool
	// Why says, for a rule that always denies, who checks it and why it
	// cannot warn instead.
	Why string
}

const mutatingWhy = "is checked by the mutating webhook, which cannot build the VM it describes, so it always denies"

// GoRules lists the checks written in Go, sorted by id.
var GoRules = []GoRule{
	{ID: RuleCloudInit, Why: mutatingWhy},
	{ID: RuleDataDiskDelete, Why: "guards deleting a disk a VM still uses, so it always denies"},
	{ID: RuleDataDisks, Why: mutatingWhy},
	{ID: RuleDiskClaim, Modes: true},
	{ID: RuleGPUs, Why: mutatingWhy},
	{ID: RuleLifecycle, Why: mutatingWhy},
	{ID: RuleLimits, Why: mutatingWhy},
	{ID: RuleMAC, Why: mutatingWhy},
	{ID: RuleUnnamed, Modes: true},
	{ID: RulePolicyBudget, Why: "is checked when a policy ConfigMap is applied, and always refuses it"},
	{ID: RulePolicyDeadline, Why: "denies a VM whose policies could not be evaluated in time, failing closed"},
	{ID: RuleSecrets, Why: mutatingWhy},
	{ID: RuleSSHKeys, Why: mutatingWhy},
	{ID: RuleVideo, Why: mutatingWhy},
}

// LookupGoRule returns the Go check with id.
func LookupGoRule(id string) (GoRule, bool) {
	i := sort.Search(len(GoRules), func(i int) bool { return GoRules[i].ID >= id })
	if i < len(GoRules) && GoRules[i].ID == id {
		return GoRules[i], true
	}
	return GoRule{}, false
}
