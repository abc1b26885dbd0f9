package virtstation.rules.disk_claim

name_field(i) := sprintf("metadata.annotations[virtstation.io/data-disks][%d].name", [i])

labelled_pvc := {"exists": true, "labelled": true, "kind": "PersistentVolumeClaim", "claimedBy": "", "claimLive": false, "sharedBy": [], "usedBy": []}

# vm(disks, states) is VM ns/me attaching disks, with the given disk states.
vm(disks, states) := {
	"operation": "CREATE",
	"namespace": "ns",
	"name": "me",
	"dataDisks": [object.union({"index": i, "type": "disk", "readOnly": false}, d) | some i, d in disks],
	"disks": states,
}

rw := {"name": "data", "mountPath": "/data"}

ro := {"name": "data", "readOnly": true}

cdrom := {"name": "data", "type": "cdrom", "readOnly": true}

with_state(patch) := {"data": object.union(labelled_pvc, patch)}

denials(disks, states) := vs if {
	vs := deny with input as vm(disks, states)
}

messages(disks, states) := {v.message | some v in denials(disks, states)}

test_labelled_free_disk_admitted if {
	count(denials([rw], with_state({}))) == 0
	count(denials([ro], with_state({}))) == 0
	count(denials([cdrom], with_state({"kind": "DataVolume"}))) == 0
}

test_no_data_disks if {
	count(deny) == 0 with input as {"namespace": "ns", "name": "me", "dataDisks": [], "disks": {}}
}

test_missing_disk_denied if {
	vs := denials([rw], {})
	count(vs) == 1
	some v in vs
	v.id == "disk-claim"
	v.field == name_field(0)
	contains(v.message, `data disk "data" does not exist in namespace "ns"`)
	contains(v.message, "fix: create a DataVolume or PersistentVolumeClaim named \"data\" in namespace \"ns\" labelled virtstation.io/data-disk=true")
}

test_missing_disk_explicit_state if {
	count(denials([rw], {"data": {"exists": false}})) == 1
}

test_unlabelled_disk_denied if {
	vs := denials([rw], with_state({"labelled": false}))
	count(vs) == 1
	some v in vs
	v.field == name_field(0)
	contains(v.message, `PersistentVolumeClaim "data" is not labelled as a data disk`)
	contains(v.message, "fix: label it virtstation.io/data-disk=true")
}

test_unlabelled_disk_without_kind if {
	some m in messages([rw], {"data": {"exists": true}})
	contains(m, `data disk "data" is not labelled`)
}

test_second_disk_field_index if {
	vs := denials([rw, {"name": "other", "mountPath": "/other"}], with_state({}))
	{v.field | some v in vs} == {name_field(1)}
}

test_writable_claim_by_other_live_vm_denies_writer if {
	vs := denials([rw], with_state({"claimedBy": "ns/winner", "claimLive": true}))
	count(vs) == 1
	some v in vs
	v.field == name_field(0)
	contains(v.message, "attached writable to VM ns/winner")
	contains(v.message, "fix: detach it from ns/winner")
}

test_writable_claim_by_other_live_vm_denies_readers if {
	some m in messages([ro], with_state({"claimedBy": "ns/winner", "claimLive": true}))
	contains(m, "ns/winner")
	some m2 in messages([cdrom], with_state({"claimedBy": "ns/winner", "claimLive": true}))
	contains(m2, "ns/winner")
}

test_stale_claim_is_ignored if {
	count(denials([rw], with_state({"claimedBy": "ns/gone", "claimLive": false}))) == 0
	count(denials([cdrom], with_state({"claimedBy": "ns/gone", "claimLive": false}))) == 0
}

test_own_claim_is_fine if {
	count(denials([rw], with_state({"claimedBy": "ns/me", "claimLive": true, "usedBy": ["ns/me"]}))) == 0
}

test_writer_denied_while_shared_read_only if {
	vs := denials([rw], with_state({"sharedBy": ["ns/r2", "ns/r1"]}))
	count(vs) == 1
	some v in vs
	contains(v.message, "attached read-only to VM ns/r1, ns/r2")
}

test_readers_share if {
	count(denials([ro], with_state({"sharedBy": ["ns/r1"], "usedBy": ["ns/r1"]}))) == 0
	count(denials([cdrom], with_state({"sharedBy": ["ns/r1", "ns/r2"]}))) == 0
}

test_own_read_only_claim_does_not_block_writable_update if {
	count(denials([rw], with_state({"sharedBy": ["ns/me"]}))) == 0
}

test_writer_denied_while_used_by_other_vmi if {
	vs := denials([rw], with_state({"usedBy": ["ns/legacy"]}))
	count(vs) == 1
	some v in vs
	contains(v.message, "in use by the running VM ns/legacy")
}

test_vmi_of_claimant_or_reader_reported_once if {
	vs := denials([rw], with_state({"claimedBy": "ns/w", "claimLive": true, "usedBy": ["ns/w"]}))
	count(vs) == 1
	vs2 := denials([rw], with_state({"sharedBy": ["ns/r"], "usedBy": ["ns/r"]}))
	count(vs2) == 1
}

test_reader_not_denied_by_vmi_use if {
	count(denials([ro], with_state({"usedBy": ["ns/legacy"]}))) == 0
}

test_every_violation_has_shape if {
	vs := denials([rw, {"name": "gone"}], with_state({"claimedBy": "ns/w", "claimLive": true, "sharedBy": ["ns/r"], "usedBy": ["ns/x"]}))
	count(vs) == 4
	every v in vs {
		v.id == "disk-claim"
		contains(v.message, "(rule: disk-claim; fix: ")
	}
}

# Disks named directly in spec.template.spec.volumes or
# spec.dataVolumeTemplates (input.volumeDisks).

volume_field := "spec.template.spec.volumes[3].dataVolume.name"

direct_rw := {"index": 0, "name": "data", "field": volume_field, "volume": "home", "readOnly": false}

direct_ro := object.union(direct_rw, {"readOnly": true})

# direct(vols, states) is VM ns/me with no annotation, attaching vols directly.
direct(vols, states) := {
	"operation": "CREATE",
	"namespace": "ns",
	"name": "me",
	"dataDisks": [],
	"volumeDisks": vols,
	"disks": states,
}

direct_denials(vols, states) := vs if {
	vs := deny with input as direct(vols, states)
}

test_direct_volume_of_claimed_disk_denied if {
	vs := direct_denials([direct_rw], with_state({"kind": "DataVolume", "claimedBy": "ns/winner", "claimLive": true}))
	count(vs) == 1
	some v in vs
	v.id == "disk-claim"
	v.field == volume_field
	contains(v.message, `data disk "data" is attached writable to VM ns/winner`)
	contains(v.message, `(rule: disk-claim; fix: remove volume "home" from this VM, detach the disk from ns/winner or delete that VM first, or use another disk)`)
}

test_direct_read_only_volume_of_claimed_disk_denied if {
	vs := direct_denials([direct_ro], with_state({"claimedBy": "ns/winner", "claimLive": true}))
	count(vs) == 1
}

test_direct_template_of_claimed_disk_denied if {
	t := {"index": 0, "name": "data", "field": "spec.dataVolumeTemplates[0].metadata.name", "volume": "", "readOnly": false}
	vs := direct_denials([t], with_state({"claimedBy": "ns/winner", "claimLive": true}))
	count(vs) == 1
	some v in vs
	v.field == "spec.dataVolumeTemplates[0].metadata.name"
	contains(v.message, `fix: remove the dataVolumeTemplate "data" from this VM`)
}

test_direct_volume_of_lapsed_or_own_claim_admitted if {
	count(direct_denials([direct_rw], with_state({"claimedBy": "ns/gone", "claimLive": false}))) == 0
	count(direct_denials([direct_rw], with_state({"claimedBy": "ns/me", "claimLive": true}))) == 0
	count(direct_denials([direct_rw], with_state({}))) == 0
}

test_direct_volume_of_unlabelled_or_missing_disk_admitted if {
	# A root disk or scratch PVC is not a data disk: no claim, no denial.
	count(direct_denials([direct_rw], with_state({"labelled": false, "claimedBy": "ns/winner", "claimLive": true}))) == 0
	count(direct_denials([direct_rw], {})) == 0
}

test_direct_writer_denied_while_shared_or_in_use if {
	some m in {v.message | some v in direct_denials([direct_rw], with_state({"sharedBy": ["ns/r1"]}))}
	contains(m, "attached read-only to VM ns/r1")
	some m2 in {v.message | some v in direct_denials([direct_rw], with_state({"usedBy": ["ns/legacy"]}))}
	contains(m2, "in use by the running VM ns/legacy")
	count(direct_denials([direct_ro], with_state({"sharedBy": ["ns/r1"], "usedBy": ["ns/legacy"]}))) == 0
}

test_direct_and_annotated_denials_name_their_own_fields if {
	st := with_state({"claimedBy": "ns/winner", "claimLive": true})
	other := {"data": st.data, "more": st.data}
	doc := object.union(vm([rw], other), {"volumeDisks": [object.union(direct_rw, {"name": "more"})]})
	vs := deny with input as doc
	{v.field | some v in vs} == {name_field(0), volume_field}
}
