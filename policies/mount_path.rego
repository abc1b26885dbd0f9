# Rule mount-path: the mount path of each data disk in the
# virtstation.io/data-disks annotation is absolute, clean, unique within the
# VM, at most 255 characters of [A-Za-z0-9._/-] (it ends up in a shell
# script), and neither a system directory nor inside one.
#
# The webhook evaluates this on every admission, so all the paths are first
# checked at once (paths_fine); only when that fails is each path checked
# against two regular expressions (plausible), and only paths that fail
# them (suspect) go through the precise checks that explain what is wrong.
package virtstation.rules.mount_path

rule_id := "mount-path"

max_length := 255

# Directories a data disk must not be mounted over (besides /lib*).
system_dirs := {"/", "/bin", "/boot", "/dev", "/etc", "/proc", "/root", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var"}

# Directories a data disk must not be mounted inside.
system_trees := {"/boot", "/dev", "/etc", "/proc", "/run", "/sys", "/usr"}

elsewhere := "mount the disk at a directory of its own, such as /srv/<name>, /data or /mnt/<name>"

# Absolute, clean, and of safe characters: segments of [A-Za-z0-9._-] that
# do not start with a dot (so neither . nor ..).
plausible_pattern := `^(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)+$`

# A system directory, or a path inside one of the system trees.
system_pattern := `^/(?:bin|boot|dev|etc|lib[^/]*|proc|root|run|sbin|sys|tmp|usr|var)$|^/(?:boot|dev|etc|proc|run|sys|usr)/`

# mount_paths[i] is the mount path of data disk i, when it has one.
mount_paths[i] := p if {
	some i, d in input.dataDisks
	p := d.mountPath
	p != ""
}

# suspect[i] is a mount path that may break a rule below.
suspect[i] := p if {
	some i, p in mount_paths
	not plausible(p)
}

plausible(p) if {
	regex.match(plausible_pattern, p)
	count(p) <= max_length
	not regex.match(system_pattern, p)
}

# deny looks at the precise checks only when a path is suspect, and at
# duplicates only when there are some.
deny contains v if {
	not paths_fine
	count(suspect) > 0
	some v in problems
}

deny contains v if {
	not paths_fine
	count({p | some p in mount_paths}) < count(mount_paths)
	some v in duplicates
}

# path_list is the mount paths, in disk order.
path_list := [p | some d in input.dataDisks; p := d.mountPath; p != ""]

# paths_fine: the common case, every path plausible and none repeated,
# checked on all the paths at once, one per line: a regular expression
# evaluated once costs much less than one per path. It is only a shortcut:
# when it does not hold (or a path is not a string, or the paths together
# are longer than max_length), the rules above decide path by path.
paths_fine if {
	joined := concat("\n", path_list)
	strings.count(joined, "\n") == count(path_list) - 1 # no path holds a line break
	count(joined) <= max_length
	regex.match(`^(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)+(?:\n(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)+)*$`, joined)
	not regex.match(`(?m)^/(?:bin|boot|dev|etc|lib[^/\n]*|proc|root|run|sbin|sys|tmp|usr|var)$|^/(?:boot|dev|etc|proc|run|sys|usr)/`, joined)
	count({p | some p in path_list}) == count(path_list)
}

field_path(i) := sprintf("metadata.annotations[virtstation.io/data-disks][%d].mountPath", [i])

violation(i, what, fix) := {
	"id": rule_id,
	"field": field_path(i),
	"message": sprintf("%s (rule: %s; fix: %s)", [what, rule_id, fix]),
}

problems contains violation(i, sprintf("mount path %q is not absolute", [p]), sprintf("start it with /, for example /%s", [p])) if {
	some i, p in suspect
	is_string(p)
	not startswith(p, "/")
}

problems contains violation(i, sprintf("mount path %q is not clean", [p]), "remove trailing and doubled slashes and . or .. segments") if {
	some i, p in suspect
	is_string(p)
	unclean(p)
}

duplicates contains violation(j, sprintf("mount path %q is also the mount path of data disk %d", [p, i]), "give each data disk its own mount path") if {
	some i, p in mount_paths
	some j, q in mount_paths
	i < j
	p == q
}

problems contains violation(i, sprintf("mount path %q is %d characters long, more than %d", [sprintf("%s…", [substring(p, 0, 40)]), count(p), max_length]), sprintf("use a path of at most %d characters", [max_length])) if {
	some i, p in suspect
	is_string(p)
	count(p) > max_length
}

problems contains violation(i, sprintf("mount path %q contains %s; only letters, digits and . _ / - are allowed", [p, concat(" ", sort(bad_chars(p)))]), "rename the directory using only A-Z a-z 0-9 . _ / -") if {
	some i, p in suspect
	is_string(p)
	not regex.match(`^[A-Za-z0-9._/-]*$`, p)
}

problems contains violation(i, sprintf("mount path %q is the system directory %s; mounting a disk there hides the guest's own files", [p, p]), elsewhere) if {
	some i, p in suspect
	is_string(p)
	system_dir(p)
}

problems contains violation(i, sprintf("mount path %q is inside the system directory %s", [p, t]), elsewhere) if {
	some i, p in suspect
	is_string(p)
	some t in system_trees
	startswith(p, concat("", [t, "/"]))
}

unclean(p) if {
	p != "/"
	endswith(p, "/")
}

unclean(p) if contains(p, "//")

unclean(p) if {
	some seg in split(p, "/")
	seg in {".", ".."}
}

system_dir(p) if p in system_dirs

# /lib, /lib32, /lib64, /libx32 and every other /lib<anything>.
system_dir(p) if regex.match(`^/lib[^/]*$`, p)

# bad_chars(p) is the set of characters of p outside [A-Za-z0-9._/-], quoted.
bad_chars(p) := {sprintf("%q", [c]) | some c in regex.find_n(`[^A-Za-z0-9._/-]`, p, -1)}
