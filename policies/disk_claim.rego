# Rule disk-claim: every data disk in the virtstation.io/data-disks
# annotation exists in the VM's namespace as a DataVolume or PVC labelled
# virtstation.io/data-disk=true, and this VM may attach it: a writable
# attachment needs the disk to itself; read-only attachments (cdrom or
# readOnly) may share it with each other, never with a writer.
#
# The same claims hold for a labelled data disk that the VM's volumes name
# directly (input.volumeDisks: spec.template.spec.volumes[i].dataVolume.name
# or .persistentVolumeClaim.claimName, or spec.dataVolumeTemplates[i]): a
# VM cannot get around a claim by leaving the annotation out. A disk named
# directly that does not exist or is not labelled is not a data disk (a root
# disk, a scratch PVC) and is left alone.
#
# input.disks[<name>] is the webhook's snapshot of the disk and its claims
# (see webhooks/validate.DiskState); a missing entry means the disk does not
# exist. The webhook evaluates this on every admission, so a disk is first
# checked on the common path (fine); only the others (suspect) go through
# the checks that explain what is wrong.
package virtstation.rules.disk_claim

rule_id := "disk-claim"

label := "virtstation.io/data-disk=true"

# self is this VM as claims name it: "<namespace>/<name>".
self := concat("/", [input.namespace, input.name])

# fine contains the index of each data disk that may be attached (ok).
fine contains i if {
	some i, d in input.dataDisks
	ok(d)
}

# ok(d): data disk d exists, is labelled, is not claimed by another live VM
# and, when attached writable, is shared with no one. The first body is the
# common case (a free disk) in plain comparisons, which Rego evaluates much
# faster than the function calls of the second, the rule itself.
ok(d) if {
	s := input.disks[d.name]
	s.exists == true
	s.labelled == true
	s.claimLive == false
	s.sharedBy == []
	s.usedBy == []
} else if {
	s := input.disks[d.name]
	s.exists
	s.labelled
	unclaimed(s)
	alone_or_reading(d, s)
}

unclaimed(s) if not s.claimLive

unclaimed(s) if s.claimedBy == self

alone_or_reading(d, _) if d.readOnly

alone_or_reading(_, s) if {
	s.sharedBy == []
	s.usedBy == []
}

# suspect[i] is a data disk that may break a rule below.
suspect[i] := d if {
	some i, d in input.dataDisks
	not i in fine
}

# deny looks at the precise checks only when some disk is not fine.
deny contains v if {
	some d in input.dataDisks
	not ok(d)
	some v in problems
}

field_path(i) := sprintf("metadata.annotations[virtstation.io/data-disks][%d].name", [i])

violation(i, what, fix) := {
	"id": rule_id,
	"field": field_path(i),
	"message": sprintf("%s (rule: %s; fix: %s)", [what, rule_id, fix]),
}

state(name) := object.get(input.disks, name, {})

# writable(d): the entry attaches the disk writable. The input's readOnly
# is already true for every cdrom (the annotation's parser sets it).
writable(d) if not object.get(d, "readOnly", false)

# writer(s) is the VM holding a live writable claim on the disk, unless that
# is this VM.
writer(s) := w if {
	w := object.get(s, "claimedBy", "")
	w != ""
	w != self
	object.get(s, "claimLive", false) == true
}

readers(s) := {r | some r in object.get(s, "sharedBy", []); r != self}

# users(s) are the VMIs using the disk that no claim above accounts for.
users(s) := {u |
	some u in object.get(s, "usedBy", [])
	u != self
	u != object.get(s, "claimedBy", "")
	not u in readers(s)
}

names(set) := concat(", ", sort(set))

kind(s) := k if {
	k := object.get(s, "kind", "")
	k != ""
} else := "data disk"

problems contains violation(i, sprintf("data disk %q does not exist in namespace %q", [d.name, input.namespace]), sprintf("create a DataVolume or PersistentVolumeClaim named %q in namespace %q labelled %s, or remove it from the list", [d.name, input.namespace, label])) if {
	some i, d in suspect
	not state(d.name).exists
}

problems contains violation(i, sprintf("%s %q is not labelled as a data disk", [kind(state(d.name)), d.name]), sprintf("label it %s if it is meant to be attached to VMs", [label])) if {
	some i, d in suspect
	state(d.name).exists
	not state(d.name).labelled
}

problems contains violation(i, sprintf("data disk %q is attached writable to VM %s", [d.name, writer(state(d.name))]), sprintf("detach it from %s or delete that VM first, or use another disk", [writer(state(d.name))])) if {
	some i, d in suspect
	state(d.name).exists
	writer(state(d.name))
}

problems contains violation(i, sprintf("data disk %q is attached read-only to VM %s; a writable attachment needs the disk to itself", [d.name, names(readers(state(d.name)))]), sprintf("attach it read-only here (\"readOnly\": true in the JSON form of the annotation), or detach it from %s first", [names(readers(state(d.name)))])) if {
	some i, d in suspect
	writable(d)
	state(d.name).exists
	count(readers(state(d.name))) > 0
}

problems contains violation(i, sprintf("data disk %q is in use by the running VM %s; a writable attachment needs the disk to itself", [d.name, names(users(state(d.name)))]), sprintf("stop %s first, or attach the disk read-only here (\"readOnly\": true in the JSON form of the annotation)", [names(users(state(d.name)))])) if {
	some i, d in suspect
	writable(d)
	state(d.name).exists
	count(users(state(d.name))) > 0
}

# Disks the volumes name directly (input.volumeDisks).

# direct_ok(v): the directly named disk v is not a labelled data disk, or
# this VM may attach it as the annotation's rules above say.
direct_ok(v) if not object.get(state(v.name), "labelled", false)

direct_ok(v) if {
	s := state(v.name)
	s.labelled
	unclaimed(s)
	alone_or_reading(v, s)
}

direct_suspect contains v if {
	some v in input.volumeDisks
	not direct_ok(v)
}

deny contains x if {
	some v in input.volumeDisks
	not direct_ok(v)
	some x in direct_problems
}

direct_violation(v, what, fix) := {
	"id": rule_id,
	"field": v.field,
	"message": sprintf("%s (rule: %s; fix: %s)", [what, rule_id, fix]),
}

# direct_remove is how to take the disk out of this VM.
direct_remove(v) := msg if {
	v.volume != ""
	msg := sprintf("remove volume %q from this VM", [v.volume])
} else := sprintf("remove the dataVolumeTemplate %q from this VM", [v.name])

direct_problems contains direct_violation(v, sprintf("data disk %q is attached writable to VM %s", [v.name, writer(state(v.name))]), sprintf("%s, detach the disk from %s or delete that VM first, or use another disk", [direct_remove(v), writer(state(v.name))])) if {
	some v in direct_suspect
	writer(state(v.name))
}

direct_problems contains direct_violation(v, sprintf("data disk %q is attached read-only to VM %s; a writable attachment needs the disk to itself", [v.name, names(readers(state(v.name)))]), sprintf("attach it read-only here (a cdrom, or readonly: true on its disk), or detach it from %s first", [names(readers(state(v.name)))])) if {
	some v in direct_suspect
	not v.readOnly
	count(readers(state(v.name))) > 0
}

direct_problems contains direct_violation(v, sprintf("data disk %q is in use by the running VM %s; a writable attachment needs the disk to itself", [v.name, names(users(state(v.name)))]), sprintf("stop %s first, or attach the disk read-only here (a cdrom, or readonly: true on its disk)", [names(users(state(v.name)))])) if {
	some v in direct_suspect
	not v.readOnly
	count(users(state(v.name))) > 0
}
