package guest

import (
	"strings"
	"testing"

	"github.com/virtstation/virtstation/bridge/relay"
)

// aliceUserData is the user's own cloud-config: it creates alice, the
// account Virtstation's mounts and keys are for, and leaves marks of its
// write_files and runcmd.
const aliceUserData = `#cloud-config
users:
  - name: alice
    shell: /bin/bash
    sudo: "ALL=(ALL) NOPASSWD:ALL"
write_files:
  - path: /etc/virtstation-test/written
    content: |
      written by the user's own cloud-config
runcmd:
  - [sh, -c, "echo the runcmd of the user ran > /var/tmp/user-runcmd"]
`

// workstation is a labelled VM with three data disks (blank, an existing
// ext4 filesystem, a partitioned disk), SSH keys through cloud-init, and
// the user's own cloud-config.
func workstation(namespace, name, user, userData string) string {
	return `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
  labels:
    virtstation.io/managed: "true"
  annotations:
    virtstation.io/data-disks: '[{"name":"alice-home","mountPath":"/home/alice"},{"name":"alice-scratch","mountPath":"/srv/scratch"},{"name":"alice-parted","mountPath":"/mnt/parted"}]'
    virtstation.io/ssh-user: ` + user + `
    virtstation.io/ssh-propagation: cloudInit
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        cpu:
          cores: 2
        memory:
          guest: 1Gi
        devices:
          disks:
            - name: root
              disk:
                bus: virtio
          interfaces:
            - name: default
              masquerade: {}
      networks:
        - name: default
          pod: {}
      volumes:
        - name: root
          containerDisk:
            image: quay.io/containerdisks/debian:12
        - name: cloudinit
          cloudInitNoCloud:
            userData: |
` + indent(userData, "              ") + `
`
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// TestWorkstation boots a labelled workstation twice (one boot at a time,
// each guest on both cores: faster than two guests on one core each).
// The first boot, with keys through cloud-init, formats the blank disk
// and mounts it for its user, mounts the user's existing ext4 disk
// unchanged, leaves the partitioned disk alone, runs the user's own
// cloud-config, and lets the user in through the bridge's SSH, serial
// console and display. The user then switches the stopped VM to keys
// through the guest agent: the second boot keeps the data, and the
// agent's keys follow the namespace's Secrets.
func TestWorkstation(t *testing.T) {
	alice, desktop, stranger := newKey(t, "alice@laptop"), newKey(t, "alice@desktop"), newKey(t, "stranger@elsewhere")
	create(t,
		keySecret(teamA, "alice-laptop", alice.public),
		keySecret(teamA, "alice-desktop", desktop.public),
		blankDataVolume(teamA, "alice-home", "2Gi"),
		dataPVC(teamA, "alice-scratch", "64Mi"),
		dataPVC(teamA, "alice-parted", "64Mi"),
	)
	ext4Claim(t, teamA, "alice-scratch", map[string]string{"keep-me": "made before the VM existed\n"})
	partitionedClaim(t, teamA, "alice-parted")
	create(t, workstation(teamA, "ws-alice", "alice", aliceUserData))

	g := boot(t, teamA, "ws-alice", "127.0.0.2")
	homeUUID := ""
	t.Run("first boot: disks and the user's cloud-config", func(t *testing.T) {
		sh := func(cmd string) string { return g.run(t, "alice", alice.signer, cmd) }
		if got := sh("findmnt -n -o FSTYPE,SOURCE /home/alice"); !strings.HasPrefix(got, "ext4 ") {
			t.Errorf("/home/alice: findmnt says %q, want the blank disk formatted as ext4 and mounted", got)
		}
		if got := sh("readlink -f /dev/disk/by-id/virtio-alice-home"); !strings.Contains(sh("findmnt -n -o SOURCE /home/alice"), got) {
			t.Errorf("/home/alice is not the disk with serial alice-home (%s)", got)
		}
		if got := sh("stat -c %U:%G /home/alice"); got != "alice:alice" {
			t.Errorf("/home/alice is owned by %s, want alice:alice (the ssh-user, created by the user's own cloud-config)", got)
		}
		if got := sh("ls -A /home/alice"); strings.Contains(got, ".virtstation-owner-pending") {
			t.Errorf("the owner marker is still in /home/alice: %q", got)
		}
		homeUUID = sh("sudo blkid -s UUID -o value /dev/disk/by-id/virtio-alice-home")
		if got := sh("cat /srv/scratch/keep-me; findmnt -n -o FSTYPE /srv/scratch"); got != "made before the VM existed\next4" {
			t.Errorf("/srv/scratch: %q, want the existing ext4 disk mounted with its file", got)
		}
		if got := sh("stat -c %U /srv/scratch"); got != "root" {
			t.Errorf("/srv/scratch is owned by %s: an existing filesystem must be mounted unchanged", got)
		}
		if _, err := g.try("alice", alice.signer, "mountpoint -q /mnt/parted"); err == nil {
			t.Errorf("/mnt/parted is mounted: a partitioned disk must be left alone")
		}
		want := "virtstation: /dev/disk/by-id/virtio-alice-parted has a partition table (gpt): left alone, /mnt/parted not mounted"
		if !strings.Contains(g.Serial(), want) {
			t.Errorf("the serial console lacks the script's message %q", want)
		}
		if got := sh("sudo sfdisk --dump /dev/disk/by-id/virtio-alice-parted | grep -c '^/dev'"); got != "1" {
			t.Errorf("the partitioned disk's table changed: %s partitions", got)
		}
		if got := sh("cat /etc/virtstation-test/written /var/tmp/user-runcmd"); got != "written by the user's own cloud-config\nthe runcmd of the user ran" {
			t.Errorf("the user's own write_files and runcmd left %q", got)
		}
		sh("echo kept across boots > /home/alice/notes.txt && sync")
	})

	t.Run("SSH through the bridge", func(t *testing.T) {
		c, refused := bridgeSSH(t, teamA, "ws-alice", "alice", alice)
		if refused != nil {
			t.Fatalf("alice's key from the Secret was refused: %d %q", refused.Code, refused.Text)
		}
		shell(t, c, "echo $(whoami)-$((6*7)) on $(hostname)", "alice-42 on ws-alice")
		closeSession(t, c)
		_, refused = bridgeSSH(t, teamA, "ws-alice", "alice", stranger)
		refusedCode(t, "a key not in the Secret", refused, relay.CodeSSHAuthFailed)
	})

	t.Run("serial console through the bridge", func(t *testing.T) {
		c := dialBridge(t, teamA, "ws-alice", "console")
		if err := c.WriteMessage(2, []byte("\r")); err != nil {
			t.Fatal(err)
		}
		readUntil(t, c, "ws-alice login:")
	})

	t.Run("display in Chromium", func(t *testing.T) { checkDisplay(t, g, teamA, "ws-alice") })

	g.stop()
	setPropagation(t, teamA, "ws-alice", "qemuGuestAgent")
	g = boot(t, teamA, "ws-alice", "127.0.0.2")
	t.Run("second boot: data kept", func(t *testing.T) {
		sh := func(cmd string) string { return g.run(t, "alice", alice.signer, cmd) }
		if got := sh("cat /home/alice/notes.txt"); got != "kept across boots" {
			t.Errorf("/home/alice/notes.txt after a reboot: %q", got)
		}
		if got := sh("sudo blkid -s UUID -o value /dev/disk/by-id/virtio-alice-home"); homeUUID == "" || got != homeUUID {
			t.Errorf("the home disk's filesystem UUID went from %q to %q: it was reformatted", homeUUID, got)
		}
		if got := sh("stat -c %U:%G /home/alice; cat /srv/scratch/keep-me"); got != "alice:alice\nmade before the VM existed" {
			t.Errorf("after a reboot: %q", got)
		}
	})

	t.Run("second boot: new host keys", func(t *testing.T) {
		// A containerDisk root starts fresh on every boot, so cloud-init
		// sees a new instance and makes new SSH host keys: the bridge's
		// pin from the first boot refuses them, as virtctl ssh's
		// known_hosts would, and says how to reset the pin.
		_, refused := bridgeSSH(t, teamA, "ws-alice", "alice", alice)
		refusedCode(t, "SSH after a containerDisk reboot", refused, relay.CodeSSHHostKeyChanged)
		resetHostKeyPin(t, teamA, "ws-alice")
	})

	t.Run("second boot: keys through the guest agent", func(t *testing.T) {
		agentKeys(t, g, teamA, "ws-alice", "alice", alice, desktop, "alice-desktop")
	})
}
