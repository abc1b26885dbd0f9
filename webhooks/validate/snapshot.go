package validate

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
)

// Snapshotter reads the disk and claim state a VM's admission is judged on.
// The first read of an admission comes from the informer caches; a retry
// after a lost claim race reads through to the API server, since the cache
// may not have seen the winner yet.
type Snapshotter struct {
	// Cache is the manager's cache (labelled data disks, VMs, VMIs).
	Cache client.Reader
	// API reads through to the API server.
	API client.Reader
	// NoDataVolumes: CDI is not installed.
	NoDataVolumes bool
	// Grace is how long a claim holds before its VM exists.
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
	r := s.Cache
	if fresh {
		r = s.API
	}
	var vmis kubevirtv1.VirtualMachineInstanceList
	if err := s.Cache.List(ctx, &vmis, client.InNamespace(namespace)); err != nil {
		return Snapshot{}, fmt.Errorf("list VMIs: %w", err)
	}
	snap := Snapshot{States: make(map[string]DiskState, len(names)), Objects: map[string]client.Object{}, Dead: map[string][]string{}}
	for _, name := range names {
		obj, kind, err := s.readDisk(ctx, r, namespace, name)
		if err != nil {
			return Snapshot{}, err
		}
		f := DiskFacts{Kind: kind, UsedBy: usedBy(vmis.Items, name, self)}
		if obj != nil {
			snap.Objects[name] = obj
			f.Labelled = obj.GetLabels()[api.LabelDataDisk] == api.LabelTrue
			f.Claims = claims.Read(obj)
			f.Claimants = map[string]claims.Facts{}
			key := types.NamespacedName{Namespace: namespace, Name: name}
			for _, holder := range f.Claims.Holders() {
				if holder == self.String() {
					continue
				}
				if f.Claimants[holder], err = claims.ClaimantFacts(ctx, r, holder, key); err != nil {
					return Snapshot{}, fmt.Errorf("read claimant of %s: %w", name, err)
				}
			}
		}
		st, lapsed := JudgeDisk(f, self.String(), now, s.grace())
		snap.States[name] = st
		if len(lapsed) > 0 {
			snap.Dead[name] = lapsed
		}
	}
	return snap, nil
}

// readDisk reads the DataVolume, else the PVC, of that name.
func (s Snapshotter) readDisk(ctx context.Context, r client.Reader, namespace, name string) (client.Object, string, error) {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	if !s.NoDataVolumes {
		dv := &cdiv1beta1.DataVolume{}
		err := r.Get(ctx, key, dv)
		if err == nil {
			return dv, "DataVolume", nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("read DataVolume %s: %w", name, err)
		}
	}
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Get(ctx, key, pvc)
	if err == nil {
		return pvc, "PersistentVolumeClaim", nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, "", fmt.Errorf("read PVC %s: %w", name, err)
	}
	return nil, "", nil
}

func (s Snapshotter) grace() time.Duration {
	if s.Grace > 0 {
		return s.Grace
	}
	return claims.DefaultGrace
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
