package userdata

import (
	"encoding/base64"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/sshkeys"
)

// SourceMissingError says the user's own user-data Secret, named in the
// VM's source, does not exist or has no user-data key.
type SourceMissingError struct {
	Namespace, Secret string
}

// Error implements error.
func (e *SourceMissingError) Error() string {
	return fmt.Sprintf("cloud-init user-data Secret %s has no userdata key or does not exist in namespace %s", e.Secret, e.Namespace)
}

// errRead marks a failed read of the cluster: the reconcile is retried.
var errRead = errors.New("read")

// Compute is the user-data Secret the Reconciler writes for the stored vm,
// or nil when vm needs none (Source). get reads a Secret of the VM's
// namespace by name (nil when it does not exist); keySecrets lists the
// namespace's SSH key Secrets, read only when the keys go through
// cloud-init. Reconciler and render both compute through it.
func Compute(vm *kubevirtv1.VirtualMachine, get func(name string) (*corev1.Secret, error), keySecrets func() ([]corev1.Secret, error)) (*corev1.Secret, error) {
	src, ok, err := Source(vm)
	if err != nil || !ok {
		return nil, err
	}
	user, err := userPart(vm, src, get)
	if err != nil {
		return nil, err
	}
	setting, errs := api.ParseSSH(vm.Annotations, field.NewPath("metadata", "annotations"))
	var keys []string
	if len(errs) == 0 && setting.User != "" && setting.Propagation == api.PropagationCloudInit {
		sources, err := keySecrets()
		if err != nil {
			return nil, fmt.Errorf("%w: list ssh key secrets: %w", errRead, err)
		}
		keys, _ = sshkeys.Collect(sources)
	}
	rec, _ := api.ParseInjected(vm.Annotations[api.AnnotationInjected])
	return Desired(vm, user, Part(rec, setting.User, keys))
}

// userPart reads the user's own user-data from src: inline, or from the
// named Secret in the VM's namespace.
func userPart(vm *kubevirtv1.VirtualMachine, src api.UserCloudInit, get func(string) (*corev1.Secret, error)) ([]byte, error) {
	switch {
	case src.UserData != nil:
		return []byte(*src.UserData), nil
	case src.UserDataBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*src.UserDataBase64)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: userDataBase64 is not valid base64", api.AnnotationUserData)
		}
		return b, nil
	case src.SecretRef == "":
		return nil, nil
	}
	s, err := get(src.SecretRef)
	if err != nil {
		return nil, fmt.Errorf("%w: get user-data secret %s: %w", errRead, src.SecretRef, err)
	}
	if s == nil && src.SecretRef == SecretName(vm.Name) {
		// Ours, from before the user's part had an annotation: its user
		// part is gone with it.
		return nil, nil
	}
	if s == nil {
		return nil, &SourceMissingError{Namespace: vm.Namespace, Secret: src.SecretRef}
	}
	data, ok := UserDataOf(s)
	if !ok {
		return nil, &SourceMissingError{Namespace: vm.Namespace, Secret: src.SecretRef}
	}
	return data, nil
}
