// Package vmsecret decides whether a reconciler may write a per-VM Secret
// that exists (Classify), and what writing it changes (Update). The per-VM
// Secrets (user-data, SSH keys) are written by reconcilers from stored VMs,
// each controlled by its VM so that it goes with it.
package vmsecret
