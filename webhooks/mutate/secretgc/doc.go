// Package secretgc keeps the per-VM Secrets the mutating webhook writes
// (user data, SSH keys) from outliving their VirtualMachines.
//
// The webhook writes a Secret during admission, often before its VM has a
// UID, so it cannot always make the VM the Secret's owner. Adopter does that
// for the user-data Secret once the VM exists (sshkeys.Reconciler does it
// for the SSH-key Secret), so the garbage collector deletes the Secret with
// its VM. Sweeper deletes the Secrets left by admissions that were admitted
// and then rejected, whose VM never appeared. Package webhooks wires both
// into the manager.
package secretgc
