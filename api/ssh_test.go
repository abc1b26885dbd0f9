package api

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestParseSSH(t *testing.T) {
	fld := field.NewPath("metadata", "annotations")
	pathUser := fld.Key(AnnotationSSHUser)
	pathPropagation := fld.Key(AnnotationSSHPropagation)
	methods := []string{PropagationQemuGuestAgent, PropagationCloudInit}
	longest := "a" + strings.Repeat("b", 31)
	tooLong := longest + "c"

	cases := map[string]struct {
		annotations map[string]string
		want        SSHSetting
		wantErr     field.ErrorList
	}{
		"no annotations": {
			want: SSHSetting{Propagation: PropagationQemuGuestAgent},
		},
		"user, default propagation": {
			annotations: map[string]string{AnnotationSSHUser: "alice"},
			want:        SSHSetting{User: "alice", Propagation: PropagationQemuGuestAgent},
		},
		"qemuGuestAgent": {
			annotations: map[string]string{AnnotationSSHUser: "alice", AnnotationSSHPropagation: PropagationQemuGuestAgent},
			want:        SSHSetting{User: "alice", Propagation: PropagationQemuGuestAgent},
		},
		"cloudInit": {
			annotations: map[string]string{AnnotationSSHUser: "alice", AnnotationSSHPropagation: PropagationCloudInit},
			want:        SSHSetting{User: "alice", Propagation: PropagationCloudInit},
		},
		"propagation without a user": {
			annotations: map[string]string{AnnotationSSHPropagation: PropagationCloudInit},
			want:        SSHSetting{Propagation: PropagationCloudInit},
		},
		"empty user": {
			annotations: map[string]string{AnnotationSSHUser: ""},
			want:        SSHSetting{Propagation: PropagationQemuGuestAgent},
		},
		"user names useradd accepts": {
			annotations: map[string]string{AnnotationSSHUser: "_svc-backup_2"},
			want:        SSHSetting{User: "_svc-backup_2", Propagation: PropagationQemuGuestAgent},
		},
		"32-character user": {
			annotations: map[string]string{AnnotationSSHUser: longest},
			want:        SSHSetting{User: longest, Propagation: PropagationQemuGuestAgent},
		},
		"unknown propagation": {
			annotations: map[string]string{AnnotationSSHUser: "alice", AnnotationSSHPropagation: "ssh"},
			wantErr:     field.ErrorList{field.NotSupported(pathPropagation, "ssh", methods)},
		},
		"propagation in the wrong case": {
			annotations: map[string]string{AnnotationSSHPropagation: "cloudinit"},
			wantErr:     field.ErrorList{field.NotSupported(pathPropagation, "cloudinit", methods)},
		},
		"upper-case user": {
			annotations: map[string]string{AnnotationSSHUser: "Alice"},
			wantErr:     field.ErrorList{field.Invalid(pathUser, "Alice", "")},
		},
		"user starting with a digit": {
			annotations: map[string]string{AnnotationSSHUser: "1alice"},
			wantErr:     field.ErrorList{field.Invalid(pathUser, "1alice", "")},
		},
		"33-character user": {
			annotations: map[string]string{AnnotationSSHUser: tooLong},
			wantErr:     field.ErrorList{field.Invalid(pathUser, tooLong, "")},
		},
		"user with a space": {
			annotations: map[string]string{AnnotationSSHUser: "a b"},
			wantErr:     field.ErrorList{field.Invalid(pathUser, "a b", "")},
		},
		"user with shell syntax": {
			annotations: map[string]string{AnnotationSSHUser: "$(x)"},
			wantErr:     field.ErrorList{field.Invalid(pathUser, "$(x)", "")},
		},
		"user with a trailing newline": {
			annotations: map[string]string{AnnotationSSHUser: "alice\n"},
			wantErr:     field.ErrorList{field.Invalid(pathUser, "alice\n", "")},
		},
		"both wrong": {
			annotations: map[string]string{AnnotationSSHUser: "root:x", AnnotationSSHPropagation: "agent"},
			wantErr: field.ErrorList{
				field.NotSupported(pathPropagation, "agent", methods),
				field.Invalid(pathUser, "root:x", ""),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, errs := ParseSSH(tc.annotations, fld)
			assertErrors(t, errs, tc.wantErr)
			if len(tc.wantErr) > 0 {
				return
			}
			if got != tc.want {
				t.Errorf("ParseSSH(%q) = %+v, want %+v", tc.annotations, got, tc.want)
			}
		})
	}
}
