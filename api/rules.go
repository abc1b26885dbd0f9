package api

import "github.com/virtstation/virtstation/policy"

// Rule ids, forwarded from package policy, where they live, for the
// packages that still name them here (webhooks/mutate and test/envtest).
// New code imports policy; remove these once those packages do.
const (
	RuleMAC            = policy.RuleMAC
	RuleDataDisks      = policy.RuleDataDisks
	RuleGPUs           = policy.RuleGPUs
	RuleVideo          = policy.RuleVideo
	RuleSSHKeys        = policy.RuleSSHKeys
	RuleCloudInit      = policy.RuleCloudInit
	RuleLifecycle      = policy.RuleLifecycle
	RuleLimits         = policy.RuleLimits
	RuleSecrets        = policy.RuleSecrets
	RuleDiskClaim      = policy.RuleDiskClaim
	RuleDataDiskDelete = policy.RuleDataDiskDelete
	RulePolicyDeadline = policy.RulePolicyDeadline
	RulePolicyBudget   = policy.RulePolicyBudget
	RuleUnnamed        = policy.RuleUnnamed
)
