package virtstation.rules.mount_path

# vm(paths) is an input whose data disks d0, d1, … mount at paths.
vm(paths) := {"dataDisks": [{"index": i, "name": sprintf("d%d", [i]), "mountPath": p, "type": "disk"} | some i, p in paths]}

# fields(paths) are the fields mount-path denies for those mount paths.
fields(paths) := {v.field | some v in deny with input as vm(paths)}

mp(i) := sprintf("metadata.annotations[virtstation.io/data-disks][%d].mountPath", [i])

messages(paths) := {v.message | some v in deny with input as vm(paths)}

test_good_paths_pass if {
	count(deny) == 0 with input as vm(["/data", "/srv/app", "/mnt/disk-1", "/var/lib/app", "/home/user/data", "/opt/x_y.z", "/tmp/scratch", "/library-data/x"])
}

test_no_data_disks if {
	count(deny) == 0 with input as {"dataDisks": []}
	count(deny) == 0 with input as {}
}

test_disk_without_mount_path_is_ignored if {
	count(deny) == 0 with input as {"dataDisks": [{"index": 0, "name": "a"}, {"index": 1, "name": "b", "mountPath": ""}]}
}

test_relative_path_denied if {
	fields(["data"]) == {mp(0)}
	some m in messages(["data"])
	contains(m, `mount path "data" is not absolute`)
	contains(m, "fix: start it with /, for example /data")
}

test_unclean_paths_denied if {
	every p in ["/data/", "/data//x", "/data/./x", "/data/../x", "/.", "/..", "//data"] {
		mp(0) in fields([p])
		some m in messages([p])
		contains(m, "is not clean")
	}
}

test_root_is_clean_but_reserved if {
	some m in messages(["/"])
	contains(m, "system directory /")
	not unclean("/")
}

test_duplicate_paths_denied_on_later_disk if {
	fields(["/data", "/srv", "/data"]) == {mp(2)}
	some m in messages(["/data", "/srv", "/data"])
	contains(m, "also the mount path of data disk 0")
}

test_length_limit if {
	ok := concat("", ["/", concat("", [x | some _ in numbers.range(1, 254); x := "a"])])
	count(ok) == 255
	count(deny) == 0 with input as vm([ok])
	long := concat("", [ok, "b"])
	fields([long]) == {mp(0)}
	some m in messages([long])
	contains(m, "256 characters long, more than 255")
}

test_unsafe_characters_denied if {
	every p in ["/data dir", "/data;rm", "/da$ta", "/data\nx", "/dätä", "/data'x", "/data\"x", "/data`x`", "/a*b"] {
		mp(0) in fields([p])
	}
	some m in messages(["/data dir"])
	contains(m, `contains " "`)
}

test_system_directories_denied if {
	every p in ["/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/libexec", "/proc", "/root", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var"] {
		fields([p]) == {mp(0)}
		some m in messages([p])
		contains(m, sprintf("is the system directory %s", [p]))
		contains(m, "(rule: mount-path; fix: mount the disk at a directory of its own")
	}
}

test_system_trees_denied if {
	every p in ["/boot/efi", "/dev/disk", "/dev/shm", "/etc/app", "/proc/x", "/run/app", "/sys/fs", "/usr/local/data", "/etc/a/b/c"] {
		fields([p]) == {mp(0)}
		some m in messages([p])
		contains(m, "is inside the system directory")
	}
}

test_below_other_directories_allowed if {
	count(deny) == 0 with input as vm(["/var/data", "/tmp/x", "/root/data", "/bin2", "/etcetera", "/devices", "/lib64/x"])
}

test_violation_shape if {
	vs := deny with input as vm(["rel", "/etc", "/etc"])
	count(vs) == 4
	every v in vs {
		v.id == "mount-path"
		startswith(v.field, "metadata.annotations[virtstation.io/data-disks][")
		contains(v.message, "(rule: mount-path; fix: ")
	}
}

test_non_string_mount_path_ignored if {
	count(deny) == 0 with input as {"dataDisks": [{"index": 0, "name": "a", "mountPath": 7}]}
}

# The common case is checked on all the paths at once (paths_fine); a bad
# path among good ones, a path holding a line break, and paths longer
# together than one may be are still judged path by path.
test_paths_checked_together if {
	fields(["/data", "/lib64"]) == {mp(1)}
	fields(["/data", "/srv/a\n/srv/b"]) == {mp(1)}
	fields(["/srv/a\n/srv/b"]) == {mp(0)}
	fields(["/data", "/srv", "/data/"]) == {mp(2)}
	fields(["/srv/x", "/srv/x"]) == {mp(1)}
	a := concat("", ["/", concat("", [x | some _ in numbers.range(1, 200); x := "a"])])
	b := concat("", ["/", concat("", [x | some _ in numbers.range(1, 200); x := "b"])])
	count(deny) == 0 with input as vm([a, b])
	fields([a, b, a]) == {mp(2)}
}
