package virtstation.rules.disk_limit

deny contains {"id": "disk-limit", "field": "metadata.annotations[virtstation.io/data-disks]", "message": msg} if {
	count(input.dataDisks) > 4
	msg := sprintf("%d data disks, at most 4 are allowed (rule: disk-limit; fix: attach fewer disks)", [count(input.dataDisks)])
}
