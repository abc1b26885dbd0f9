// Package virtlauncher is the tests' stand-in for KubeVirt's virt-launcher
// at start: it takes a stored VirtualMachineInstance, and the Secrets and
// claims it names, from the API server and boots it in a real QEMU as
// KubeVirt would present it to the guest. It is as thin as
// internal/virthandler: it decides nothing that Virtstation or KubeVirt
// decides, it only presents.
//
// What the guest sees, device by device (Domain is the pure mapping):
//
//   - every disk of spec.domain.devices.disks, in order, on its bus (virtio,
//     sata, scsi, usb; cdroms on sata or scsi) with its serial and readOnly;
//   - a containerDisk is the Debian guest image (hack/guest-image.sh), as a
//     copy-on-write snapshot discarded at exit, as a containerDisk is; the
//     image has no bootloader, so the guest's kernel boots directly with
//     root=LABEL=vsroot (device names are not stable once data disks are
//     added);
//   - a dataVolume or persistentVolumeClaim volume is a raw image file named
//     after its claim in Options.Storage, created blank at the claim's
//     requested size when missing (what CDI's blank source and a volume
//     provisioner would do), kept across boots;
//   - an emptyDisk is a blank file of its capacity, new every boot;
//   - the cloudInitNoCloud volume is the ISO KubeVirt builds (nocloud.go):
//     user-data from userData, userDataBase64 or the secretRef Secret,
//     meta-data with the instance-id and hostname, network-config when
//     given, written with xorrisofs and volume id cidata as virt-launcher
//     does;
//   - the pod network interface is QEMU user networking (the guest gets
//     DHCP, as behind KubeVirt's masquerade) with its MAC and model, and
//     the guest's port 22 forwarded to Options.SSHAddr, a loopback address
//     the test writes into the VMI status for the bridge;
//   - the video device of spec.domain.devices.video (or KubeVirt's default,
//     vga) behind the VNC unix socket, the serial console on a unix socket
//     (also logged to a file, as KubeVirt's guest-console-log does), the
//     guest agent's virtio-serial channel org.qemu.guest_agent.0, and the
//     QMP monitor for screenshots.
//
// Anything else (GPUs, host devices, more networks, other volume types) is
// refused with an error naming it: a test must not believe a device was
// presented when it was not.
//
// agent.go hands SSH keys to the guest agent as virt-launcher's access
// credential manager does (guest-ssh-add-authorized-keys with reset).
package virtlauncher
