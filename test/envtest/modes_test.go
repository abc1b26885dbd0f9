package envtest_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/testenv"
)

// TestModesNameRules: the API server refuses a modes ConfigMap that sets a
// mode on a check of the mutating webhook (which always denies) or on an id
// no rule defines, naming the key, the rule and the fix; a mode on a
// shipped rule is accepted.
func TestModesNameRules(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(func() { setModes(t, map[string]string{}) })
	cases := map[string]struct {
		data map[string]string
		want []string // substrings of the denial; none: accepted
	}{
		"mutating webhook rule": {
			data: map[string]string{"data-disks": "warn"},
			want: []string{`data[data-disks]: Forbidden: rule data-disks is checked by the mutating webhook`, "always denies", "fix: remove the key data-disks; modes apply to disk-claim, mount-path, policy, shared-memory"},
		},
		"id no rule defines": {
			data: map[string]string{"mount-paths": "warn"},
			want: []string{`data[mount-paths]: Invalid value: "mount-paths": no rule has the id mount-paths`, "fix: use the id of a rule that takes a mode"},
		},
		"shipped rule": {data: map[string]string{"mount-path": "deny", "disk-claim": "deny"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := applyModes(ctx, tc.data)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("modes %v refused: %v", tc.data, err)
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("modes %v: err = %v, want a 403 denial", tc.data, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("denial %q lacks %q", err, w)
				}
			}
		})
	}
}

// applyModes creates or updates the modes ConfigMap with data.
func applyModes(ctx context.Context, data map[string]string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testenv.InstallNamespace, Name: "virtstation-policy-config",
		Labels: map[string]string{api.LabelPolicy: api.LabelTrue}}}
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	cm.Data = data
	switch {
	case apierrors.IsNotFound(err):
		return env.Client.Create(ctx, cm)
	case err != nil:
		return err
	}
	return env.Client.Update(ctx, cm)
}
