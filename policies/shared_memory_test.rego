package virtstation.rules.shared_memory

vm(annotations, disks) := {
	"object": {"metadata": {"name": "me", "annotations": annotations}},
	"dataDisks": [object.union({"index": i, "type": "disk"}, d) | some i, d in disks],
}

test_plain_vm_admitted if {
	count(deny) == 0 with input as vm({"virtstation.io/data-disks": "data:/data"}, [{"name": "data", "mountPath": "/data"}])
	count(deny) == 0 with input as {"object": {"metadata": {}}, "dataDisks": []}
	count(deny) == 0 with input as {}
}

test_annotation_denied_whatever_its_value if {
	every value in ["1Gi", "", "true", "false"] {
		vs := deny with input as vm({"virtstation.io/shared-memory": value}, [])
		count(vs) == 1
		some v in vs
		v.id == "shared-memory"
		v.field == "metadata.annotations[virtstation.io/shared-memory]"
		contains(v.message, "VMs cannot use shared memory")
		contains(v.message, "no POSIX shared memory (/dev/shm) with the host or with other pods")
		contains(v.message, "(rule: shared-memory; fix: remove the annotation; share data through a data disk or over the network instead)")
	}
}

test_dev_shm_mount_denied if {
	every p in ["/dev/shm", "/dev/shm/data"] {
		vs := deny with input as vm({}, [{"name": "a", "mountPath": "/data"}, {"name": "b", "mountPath": p}])
		count(vs) == 1
		some v in vs
		v.field == "metadata.annotations[virtstation.io/data-disks][1].mountPath"
		contains(v.message, "VMs cannot use shared memory")
		contains(v.message, "fix: mount the disk elsewhere, such as /srv/b")
	}
}

test_similar_paths_allowed if {
	count(deny) == 0 with input as vm({}, [{"name": "a", "mountPath": "/dev/shmem"}, {"name": "b", "mountPath": "/srv/dev/shm"}])
}

test_both_reported if {
	vs := deny with input as vm({"virtstation.io/shared-memory": "1Gi"}, [{"name": "a", "mountPath": "/dev/shm"}])
	count(vs) == 2
}
