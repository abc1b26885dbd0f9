package cloudinit

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// diskSize is the size of each sparse loop-device backing file.
const diskSize = 64 << 20

// diskTools are the commands the disk tests and the script need, with the
// Debian packages that provide them.
var diskTools = map[string]string{
	"losetup":    "mount",
	"mount":      "mount",
	"umount":     "mount",
	"blkid":      "util-linux",
	"mountpoint": "util-linux",
	"mkswap":     "util-linux",
	"mkfs.ext4":  "e2fsprogs",
	"mkfs.ext2":  "e2fsprogs",
	"sfdisk":     "fdisk",
	"useradd":    "passwd",
	"userdel":    "passwd",
	"sed":        "sed",
}

// requireDisks skips without root (loop devices, mkfs and mount need it) and
// fails when a tool is missing.
func requireDisks(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the mount script is run against loop devices, which only root can attach, format and mount")
	}
	for tool, pkg := range diskTools {
		requireTool(t, tool, pkg)
	}
}

// run runs a command, failing the test with its output when it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// diskEnv is a fake /dev/disk/by-id with loop devices behind it.
type diskEnv struct {
	t    *testing.T
	root string // temp dir: backing files, by-id, mount points
	byID string
	cwd  string // the script's working directory; must stay empty
}

func newDiskEnv(t *testing.T) *diskEnv {
	root := t.TempDir()
	e := &diskEnv{t: t, root: root, byID: filepath.Join(root, "by-id"), cwd: filepath.Join(root, "cwd")}
	for _, d := range []string{e.byID, e.cwd} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Registered after TempDir's cleanup, so it runs before the removal.
	t.Cleanup(e.unmountAll)
	return e
}

// disk attaches a blank sparse disk and returns its loop device. Link it
// with link.
func (e *diskEnv) disk(name string) string {
	t := e.t
	file := filepath.Join(e.root, name+".img")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(diskSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	dev := run(t, "losetup", "--find", "--show", file)
	t.Cleanup(func() {
		// The unmount cleanup was registered earlier, so runs later:
		// unmount here too before detaching.
		e.unmountAll()
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v\n%s", dev, err, out)
		}
	})
	return dev
}

// link makes dev appear as $BYID/virtio-<serial>.
func (e *diskEnv) link(serial, dev string) {
	if err := os.Symlink(dev, filepath.Join(e.byID, "virtio-"+serial)); err != nil {
		e.t.Fatal(err)
	}
}

// unmountAll unmounts everything mounted below the env's root.
func (e *diskEnv) unmountAll() {
	for {
		var below []string
		for _, m := range mounts(e.t) {
			if strings.HasPrefix(m.point, e.root+"/") {
				below = append(below, m.point)
			}
		}
		if len(below) == 0 {
			return
		}
		for _, p := range below {
			if out, err := exec.Command("umount", p).CombinedOutput(); err != nil {
				e.t.Errorf("umount %q: %v\n%s", p, err, out)
				return
			}
		}
	}
}

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	point, fstype, source string
}

// mounts reads /proc/self/mountinfo, unescaping mount points (\040 etc.).
func mounts(t *testing.T) []mountEntry {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read-only
	var out []mountEntry
	s := bufio.NewScanner(f)
	for s.Scan() {
		pre, post, ok := strings.Cut(s.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 2 {
			t.Fatalf("unexpected mountinfo line %q", s.Text())
		}
		out = append(out, mountEntry{point: unescapeOctal(fields[4]), fstype: tail[0], source: tail[1]})
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// unescapeOctal undoes the kernel's \ooo escapes in mountinfo.
func unescapeOctal(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsAt returns the devices mounted at path, with their types.
func mountsAt(t *testing.T, path string) []mountEntry {
	var at []mountEntry
	for _, m := range mounts(t) {
		if m.point == path {
			at = append(at, m)
		}
	}
	return at
}

// probe returns blkid's low-level view of dev: TYPE, UUID, PTTYPE.
func probe(t *testing.T, dev string) map[string]string {
	t.Helper()
	out, _ := exec.Command("blkid", "-p", "-o", "export", dev).Output()
	kv := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			kv[k] = v
		}
	}
	return kv
}

// cloudInitScript returns the sh script cloud-init writes for key (bootcmd or
// runcmd) of a rendered part: util.shellify, as cc_bootcmd and cc_runcmd do.
func cloudInitScript(t *testing.T, key string, rendered []byte) string {
	t.Helper()
	cmd := exec.Command(cloudInitPython(t), filepath.Join("testdata", "cloudinit_userdata.py"), "--shellify", key)
	cmd.Stdin = bytes.NewReader(rendered)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("shellify %s: %v\n%s", key, err, stderr.Bytes())
	}
	return string(out)
}

// runScript runs script as cloud-init does (/bin/sh FILE), with the fake
// by-id directory, and returns its stderr. It must exit 0.
func (e *diskEnv) runScript(script string, wait int) string {
	t := e.t
	t.Helper()
	file := filepath.Join(e.root, "script.sh")
	if err := os.WriteFile(file, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.Remove(file) }() // a temp file; a leftover is harmless
	cmd := exec.Command("/bin/sh", file)
	cmd.Dir = e.cwd
	cmd.Env = append(os.Environ(), "VIRTSTATION_BYID_DIR="+e.byID, "VIRTSTATION_WAIT_SECONDS="+strconv.Itoa(wait))
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("script failed (it must never fail the boot): %v\n%s", err, stderr.Bytes())
	}
	if entries, _ := os.ReadDir(e.cwd); len(entries) != 0 {
		t.Errorf("the script left files in its working directory: %v", entries)
	}
	return stderr.String()
}

// bootcmd runs the rendered part's bootcmd the way cc_bootcmd does.
func (e *diskEnv) bootcmd(p Part, wait int) string {
	return e.runScript(cloudInitScript(e.t, "bootcmd", mustRender(e.t, p)), wait)
}

// runcmd runs the rendered part's runcmd the way cc_runcmd does.
func (e *diskEnv) runcmd(p Part) string {
	return e.runScript(cloudInitScript(e.t, "runcmd", mustRender(e.t, p)), 0)
}

// tempUser creates a throwaway account, deleted at cleanup, and returns its
// uid and gid.
func tempUser(t *testing.T, name string) (uid, gid int) {
	t.Helper()
	run(t, "useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name)
	t.Cleanup(func() {
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v\n%s", name, err, out)
		}
	})
	uid, err := strconv.Atoi(run(t, "id", "-u", name))
	if err != nil {
		t.Fatal(err)
	}
	gid, err = strconv.Atoi(run(t, "id", "-g", name))
	if err != nil {
		t.Fatal(err)
	}
	return uid, gid
}

// testUserName returns an account name unique to this process and suffix.
func testUserName(suffix string) string {
	return fmt.Sprintf("vst%d%s", os.Getpid()%100000, suffix)
}

// owner returns the uid and gid owning path.
func owner(t *testing.T, path string) (uid, gid int) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// TestMountScriptDisks runs the rendered bootcmd, as cloud-init runs it,
// against real block devices.
func TestMountScriptDisks(t *testing.T) {
	requireDisks(t)
	mkfsExt4WithFile := func(t *testing.T, dev string) {
		run(t, "mkfs.ext4", "-q", dev)
		dir := t.TempDir()
		run(t, "mount", "-t", "ext4", dev, dir)
		if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("precious\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, "umount", dir)
	}
	cases := map[string]struct {
		prepare func(t *testing.T, dev string) // nil: a blank disk
		owner   string                         // "new": a throwaway account; "missing": one that does not exist
		// want
		mounted    bool
		formatted  bool   // a new filesystem (UUID differs from before)
		keepsFile  bool   // keep.txt survived
		stderr     string // a substring of the script's complaints
		wantType   string // blkid TYPE afterwards
		wantPTType string
		ownedBy    string // "root", "new" or "missing" (marker left)
	}{
		"blank disk: formatted and mounted": {
			mounted: true, formatted: true, wantType: "ext4", ownedBy: "root",
		},
		"existing ext4: mounted unchanged": {
			prepare: mkfsExt4WithFile, mounted: true, keepsFile: true, wantType: "ext4", ownedBy: "root",
		},
		"partition table: left alone": {
			prepare: func(t *testing.T, dev string) {
				cmd := exec.Command("sfdisk", "--quiet", dev)
				cmd.Stdin = strings.NewReader("label: dos\n,32M,L\n")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("sfdisk: %v\n%s", err, out)
				}
			},
			stderr: "has a partition table (dos)", wantPTType: "dos",
		},
		"swap: left alone": {
			prepare: func(t *testing.T, dev string) { run(t, "mkswap", dev) },
			stderr:  "holds swap, not ext4", wantType: "swap",
		},
		"ext2: left alone": {
			prepare: func(t *testing.T, dev string) { run(t, "mkfs.ext2", "-q", dev) },
			stderr:  "holds ext2, not ext4", wantType: "ext2",
		},
		"blank disk, existing owner: given to the owner": {
			owner: "new", mounted: true, formatted: true, wantType: "ext4", ownedBy: "new",
		},
		"blank disk, owner without an account yet: marked": {
			owner: "missing", mounted: true, formatted: true, wantType: "ext4", ownedBy: "missing",
		},
		"existing ext4, existing owner: ownership untouched": {
			prepare: mkfsExt4WithFile, owner: "new", mounted: true, keepsFile: true, wantType: "ext4", ownedBy: "root",
		},
	}
	n := 0
	for name, tc := range cases {
		n++
		t.Run(name, func(t *testing.T) {
			e := newDiskEnv(t)
			dev := e.disk("d")
			if tc.prepare != nil {
				tc.prepare(t, dev)
			}
			before := probe(t, dev)
			e.link("vs-disk", dev)
			mnt := filepath.Join(e.root, "mnt", "data")
			p := Part{Mounts: []Mount{{Serial: "vs-disk", Path: mnt}}}
			var uid, gid int
			switch tc.owner {
			case "new":
				p.Owner = testUserName(fmt.Sprintf("n%d", n))
				uid, gid = tempUser(t, p.Owner)
			case "missing":
				p.Owner = testUserName(fmt.Sprintf("m%d", n))
			}

			stderr := e.bootcmd(p, 5)

			if tc.stderr != "" && !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q does not say %q", stderr, tc.stderr)
			}
			if tc.stderr == "" && stderr != "" {
				t.Errorf("unexpected stderr: %s", stderr)
			}
			after := probe(t, dev)
			if after["TYPE"] != tc.wantType || after["PTTYPE"] != tc.wantPTType {
				t.Errorf("blkid after: TYPE=%q PTTYPE=%q, want %q %q", after["TYPE"], after["PTTYPE"], tc.wantType, tc.wantPTType)
			}
			if fresh := after["UUID"] != before["UUID"]; fresh != tc.formatted {
				t.Errorf("UUID %q -> %q: formatted=%v, want %v", before["UUID"], after["UUID"], fresh, tc.formatted)
			}
			at := mountsAt(t, mnt)
			if !tc.mounted {
				if len(at) != 0 {
					t.Fatalf("mounted, want left alone: %+v", at)
				}
				return
			}
			if len(at) != 1 || at[0].source != dev || at[0].fstype != "ext4" {
				t.Fatalf("mounts at %s: %+v, want %s as ext4 once", mnt, at, dev)
			}
			if _, err := os.Stat(filepath.Join(mnt, "keep.txt")); (err == nil) != tc.keepsFile {
				t.Errorf("keep.txt present=%v, want %v", err == nil, tc.keepsFile)
			}
			marker := filepath.Join(mnt, ownerPendingMarker)
			markerData, markerErr := os.ReadFile(marker)
			gotUID, gotGID := owner(t, mnt)
			switch tc.ownedBy {
			case "root":
				if gotUID != 0 || gotGID != 0 || markerErr == nil {
					t.Errorf("mount root %d:%d, marker %v; want 0:0 and no marker", gotUID, gotGID, markerErr == nil)
				}
			case "new":
				if gotUID != uid || gotGID != gid || markerErr == nil {
					t.Errorf("mount root %d:%d, marker %v; want %d:%d and no marker", gotUID, gotGID, markerErr == nil, uid, gid)
				}
			case "missing":
				if gotUID != 0 || markerErr != nil || string(markerData) != p.Owner+"\n" {
					t.Fatalf("mount root uid %d, marker %q (%v); want root and a marker naming %s", gotUID, markerData, markerErr, p.Owner)
				}
				// Until the account exists, runcmd reports and keeps the marker.
				if stderr := e.runcmd(p); !strings.Contains(stderr, "no account "+p.Owner) {
					t.Errorf("runcmd without the account: stderr %q", stderr)
				}
				if _, err := os.Stat(marker); err != nil {
					t.Errorf("runcmd removed the marker without an account: %v", err)
				}
				// cloud-init creates the account, then runs runcmd.
				newUID, newGID := tempUser(t, p.Owner)
				if stderr := e.runcmd(p); stderr != "" {
					t.Errorf("runcmd stderr: %s", stderr)
				}
				if gotUID, gotGID := owner(t, mnt); gotUID != newUID || gotGID != newGID {
					t.Errorf("after runcmd the mount root is %d:%d, want %d:%d", gotUID, gotGID, newUID, newGID)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Errorf("runcmd left the marker")
				}
			}
		})
	}
}

// TestMountScriptEveryBoot runs the script on three boots: the first formats,
// the second finds the disk mounted, the third (after an unmount) mounts the
// existing filesystem. None reformats.
func TestMountScriptEveryBoot(t *testing.T) {
	requireDisks(t)
	e := newDiskEnv(t)
	dev := e.disk("d")
	e.link("vs-disk", dev)
	mnt := filepath.Join(e.root, "data")
	p := Part{Mounts: []Mount{{Serial: "vs-disk", Path: mnt}}}

	if stderr := e.bootcmd(p, 5); stderr != "" {
		t.Fatalf("first boot: %s", stderr)
	}
	uuid := probe(t, dev)["UUID"]
	if uuid == "" || len(mountsAt(t, mnt)) != 1 {
		t.Fatalf("first boot: UUID %q, mounts %+v", uuid, mountsAt(t, mnt))
	}
	if err := os.WriteFile(filepath.Join(mnt, "keep.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		before func()
	}{
		{"already mounted", func() {}},
		{"unmounted", func() { run(t, "umount", mnt) }},
	}
	for _, s := range steps {
		s.before()
		if stderr := e.bootcmd(p, 5); stderr != "" {
			t.Fatalf("%s: %s", s.name, stderr)
		}
		if got := probe(t, dev)["UUID"]; got != uuid {
			t.Fatalf("%s: UUID %q, want %q (reformatted)", s.name, got, uuid)
		}
		if at := mountsAt(t, mnt); len(at) != 1 || at[0].source != dev {
			t.Fatalf("%s: mounts %+v, want %s once", s.name, at, dev)
		}
		if _, err := os.Stat(filepath.Join(mnt, "keep.txt")); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
}

// TestMountScriptWaits: a disk that never appears costs at most the wait
// budget and does not stop the next disk; a disk that appears late is mounted.
func TestMountScriptWaits(t *testing.T) {
	requireDisks(t)
	cases := map[string]struct {
		wait      int
		lateBy    time.Duration // the second disk's link appears this late
		missing   bool          // a first disk that never appears
		maxTime   time.Duration
		wantError string
	}{
		"missing disk, next one mounted": {wait: 2, missing: true, maxTime: 5 * time.Second, wantError: "did not appear within 2s"},
		"late disk mounted":              {wait: 30, lateBy: 2 * time.Second, maxTime: 20 * time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := newDiskEnv(t)
			dev := e.disk("d")
			mnt := filepath.Join(e.root, "present")
			p := Part{Mounts: []Mount{{Serial: "vs-present", Path: mnt}}}
			if tc.missing {
				p.Mounts = append([]Mount{{Serial: "vs-missing", Path: filepath.Join(e.root, "missing")}}, p.Mounts...)
			}
			script := cloudInitScript(t, "bootcmd", mustRender(t, p))
			done := make(chan struct{})
			go func() {
				defer close(done)
				time.Sleep(tc.lateBy)
				if err := os.Symlink(dev, filepath.Join(e.byID, "virtio-vs-present")); err != nil {
					t.Error(err)
				}
			}()
			start := time.Now()
			stderr := e.runScript(script, tc.wait)
			<-done
			if took := time.Since(start); took > tc.maxTime {
				t.Errorf("took %v, want at most %v", took, tc.maxTime)
			}
			if tc.wantError != "" && !strings.Contains(stderr, tc.wantError) {
				t.Errorf("stderr %q does not say %q", stderr, tc.wantError)
			}
			if tc.wantError == "" && stderr != "" {
				t.Errorf("unexpected stderr: %s", stderr)
			}
			if at := mountsAt(t, mnt); len(at) != 1 || at[0].source != dev {
				t.Errorf("mounts at %s: %+v, want %s", mnt, at, dev)
			}
			if _, err := os.Stat(filepath.Join(e.root, "missing")); err == nil {
				t.Errorf("the missing disk's mount path was created")
			}
		})
	}
}

// hostilePath is a mount path with every shell metacharacter the quoting
// must neutralise.
const hostilePath = "a b $HOME `touch pwned1` $(touch pwned2) it's \"q\" ; touch pwned3 & \\ *"

// TestMountScriptQuotingDisk mounts at a hostile path and checks the mount
// lands exactly there and nothing else is created.
func TestMountScriptQuotingDisk(t *testing.T) {
	requireDisks(t)
	e := newDiskEnv(t)
	dev := e.disk("d")
	e.link("a.b+c-d_e", dev)
	parent := filepath.Join(e.root, "mnt")
	mnt := filepath.Join(parent, hostilePath)
	// Render accepts the path: the policy, not the renderer, restricts paths.
	p := Part{Mounts: []Mount{{Serial: "a.b+c-d_e", Path: mnt}}}
	if stderr := e.bootcmd(p, 5); stderr != "" {
		t.Fatalf("stderr: %s", stderr)
	}
	if at := mountsAt(t, mnt); len(at) != 1 || at[0].source != dev {
		t.Fatalf("mounts at %q: %+v, want %s", mnt, at, dev)
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != hostilePath {
		t.Errorf("%s holds %v, want only %q", parent, entries, hostilePath)
	}
	assertNoStrayFiles(t, e.root)
}

// TestMountScriptQuotingNoDisk feeds hostile serials, paths and owners to
// MountScript (bypassing Render's checks) with no disk present: the script
// reports the literal values and creates nothing. Needs no root.
func TestMountScriptQuotingNoDisk(t *testing.T) {
	requireTool(t, "sed", "sed")
	cases := map[string]struct {
		serial, path, owner string
	}{
		"quote in the serial":   {serial: "x'; touch pwned1; '", path: "/nonexistent/a", owner: ""},
		"command substitution":  {serial: "$(touch pwned2)", path: "/nonexistent/`touch pwned3`", owner: "$(touch pwned4)"},
		"quotes everywhere":     {serial: "'\"'", path: "/nonexistent/it's", owner: "o'; touch pwned5; '"},
		"globs and separators":  {serial: "*", path: "/nonexistent/; touch pwned6 &", owner: "|| touch pwned7"},
		"line break in a value": {serial: "a\ntouch pwned8", path: "/nonexistent/b\ntouch pwned9", owner: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			byID := filepath.Join(dir, "by-id")
			if err := os.Mkdir(byID, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("sh", "-c", MountScript([]Mount{{Serial: tc.serial, Path: tc.path}}, tc.owner))
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "VIRTSTATION_BYID_DIR="+byID, "VIRTSTATION_WAIT_SECONDS=0")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("script failed: %v\n%s", err, out)
			}
			want := fmt.Sprintf("virtstation: %s/virtio-%s did not appear within 0s; %s not mounted\n", byID, tc.serial, tc.path)
			if string(out) != want {
				t.Errorf("output\n%q\nwant\n%q", out, want)
			}
			assertNoStrayFiles(t, dir)
		})
	}
}

// injectedFile matches the files the hostile values try to create.
var injectedFile = regexp.MustCompile(`^pwned[0-9]$`)

// assertNoStrayFiles fails when an injected command created a file below root.
func assertNoStrayFiles(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if injectedFile.MatchString(d.Name()) {
			t.Errorf("injected command ran: %s exists", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMountScriptSyntax checks the script parses in dash, Debian's /bin/sh
// and the strictest common POSIX shell.
func TestMountScriptSyntax(t *testing.T) {
	dash := requireTool(t, "dash", "dash")
	cases := map[string][]Mount{
		"no mounts":  nil,
		"one mount":  {{Serial: "a", Path: "/a"}},
		"two mounts": {{Serial: "a", Path: "/a"}, {Serial: "b", Path: "/it's"}},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			for script, text := range map[string]string{"mount": MountScript(m, "alice"), "chown": chownPendingScript(m, "alice")} {
				if out, err := exec.Command(dash, "-n", "-c", text).CombinedOutput(); err != nil {
					t.Errorf("%s script: dash -n: %v\n%s", script, err, out)
				}
			}
		})
	}
}

// TestMountDiskScriptMarker: mountdisk.sh marks a mount with the marker the
// runcmd script looks for, and holds no tab, which a YAML block scalar cannot.
func TestMountDiskScriptMarker(t *testing.T) {
	if want := "\nMARKER=" + ownerPendingMarker + "\n"; !strings.Contains(mountDiskScript, want) {
		t.Errorf("mountdisk.sh does not set %q", strings.TrimSpace(want))
	}
	if strings.Contains(mountDiskScript, "\t") {
		t.Error("mountdisk.sh holds a tab")
	}
}
