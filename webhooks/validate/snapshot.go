package validate

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/disks"
)

// Snapshotter reads the disk and claim state a VM's admission is judged on;
// which object a disk's name denotes is disks.Cache's answer. The first read of an admission comes from the informer caches; a retry
// after a lost claim race reads through to the API server, since the cache
// may not have seen the winner yet.
type Snapshotter struct {
	// Cache is the manager's cache (labelled data disks, VMs, VMIs).
	Cache client.Reader
	// API reads through to the API server.
	API client.Reader
	// NoDataVolumes: CDI is not installed.
	NoDataVolumes bool
	// Grace is how long a claim holds before its VM exists; zero means
	// claims.DefaultGrace (claims.GraceOrDefault).
	Grace time.Duration
}

// Snapshot is the disk and claim state one admission is judged on.
type Snapshot struct {
	// States are what the policies see, by disk name.
	States map[string]DiskState
	// Objects are the disk objects that exist, as read, for the claim write.
	Objects map[string]client.Object
	// Dead are the claimants per disk whose claims no longer hold; the
	// claim write replaces them.
	Dead map[string][]string
}

// Snapshot returns the state of each named disk in namespace, as seen by VM
// self.
func (s Snapshotter) Snapshot(ctx context.Context, namespace string, self types.NamespacedName, names []string, fresh bool, now time.Time) (Snapshot, error) {
	var vmis kubevirtv1.VirtualMachineInstanceList
	if err := s.Cache.List(ctx, &vmis, client.InNamespace(namespace)); err != nil {
		return Snapshot{}, fmt.Errorf("list VMIs: %w", err)
	}
	return s.SnapshotAmong(ctx, vmis.Items, namespace, self, names, fresh, now)
}

// SnapshotAmong is Snapshot with the namespace's VMIs listed already: the
// policy audit lists them once for all the VMs of a namespace.
func (s Snapshotter) SnapshotAmong(ctx context.Context, vmis []kubevirtv1.VirtualMachineInstance, namespace string, self types.NamespacedName, names []string, fresh bool, now time.Time) (Snapshot, error) {
	r := s.Cache
	if fresh {
		r = s.API
	}
	lookup := disks.Cache{Reader: r, NoDataVolumes: s.NoDataVolumes}
	snap := Snapshot{States: make(map[string]DiskState, len(names)), Objects: map[string]client.Object{}, Dead: map[string][]string{}}
	for _, name := range names {
		disk, ok, err := lookup.Disk(ctx, namespace, name)
		if err != nil {
			return Snapshot{}, err
		}
		f := DiskFacts{UsedBy: usedBy(vmis, name, self)}
		if ok {
			snap.Objects[name] = disk.Object
			f.Kind, f.Labelled, f.Claims = disk.Kind, disk.Labelled, disk.Claims
			f.Claimants = map[string]claims.Facts{}
			key := types.NamespacedName{Namespace: namespace, Name: name}
			for _, holder := range f.Claims.Holders() {
				if holder == self.String() {
					continue
				}
				if f.Claimants[holder], err = claims.ClaimantFacts(ctx, r, holder, f.Claims.UID(holder), key); err != nil {
					return Snapshot{}, fmt.Errorf("read claimant of %s: %w", name, err)
				}
			}
		}
		st, lapsed := JudgeDisk(f, self.String(), now, claims.GraceOrDefault(s.Grace))
		snap.States[name] = st
		if len(lapsed) > 0 {
			snap.Dead[name] = lapsed
		}
	}
	return snap, nil
}

// usedBy lists the VMIs other than self's that use the disk.
func usedBy(vmis []kubevirtv1.VirtualMachineInstance, disk string, self types.NamespacedName) []string {
	var out []string
	for i := range vmis {
		if vmis[i].Name == self.Name || !claims.UsesDisk(&vmis[i], disk) {
			continue
		}
		out = append(out, vmis[i].Namespace+"/"+vmis[i].Name)
	}
	sort.Strings(out)
	return out
}
