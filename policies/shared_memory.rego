# Rule shared-memory: VMs cannot use shared memory. A KubeVirt VM runs its
# own kernel inside a pod: its /dev/shm is guest memory, shared with nothing
# outside the VM, and there is no POSIX shared memory with the host or with
# other pods. The virtstation.io/shared-memory annotation, and a data disk
# mounted at /dev/shm, are denied with that explanation.
package virtstation.rules.shared_memory

rule_id := "shared-memory"

annotation := "virtstation.io/shared-memory"

why := "VMs cannot use shared memory: a KubeVirt VM runs its own kernel, so it has no POSIX shared memory (/dev/shm) with the host or with other pods"

alternatives := "share data through a data disk or over the network instead"

violation(path, what, fix) := {
	"id": rule_id,
	"field": path,
	"message": sprintf("%s (rule: %s; fix: %s)", [what, rule_id, fix]),
}

# The annotation, with any value (even empty), is denied.
deny contains violation(
	sprintf("metadata.annotations[%s]", [annotation]),
	sprintf("annotation %s is set, but %s", [annotation, why]),
	sprintf("remove the annotation; %s", [alternatives]),
) if {
	# The key is spelled out (it is annotation): a constant key is a
	# plain lookup, a rule reference is evaluated first.
	_ = input.object.metadata.annotations["virtstation.io/shared-memory"]
}

deny contains violation(
	sprintf("metadata.annotations[virtstation.io/data-disks][%d].mountPath", [i]),
	sprintf("data disk %q is mounted at %s, but %s; a disk there shares nothing", [d.name, p, why]),
	sprintf("mount the disk elsewhere, such as /srv/%s; %s", [d.name, alternatives]),
) if {
	some i, d in input.dataDisks
	p := d.mountPath
	startswith(p, "/dev/shm")
	shm(p)
}

shm(p) if p == "/dev/shm"

shm(p) if startswith(p, "/dev/shm/")
