package api

import (
	"encoding/json"
	"fmt"
)

// AnnotationUserData keeps, as JSON (UserCloudInit), the user's own
// cloud-init user-data source when the mutating webhook points the VM's
// cloud-init volume at the per-VM user-data Secret instead. The webhook
// writes it and never reads a Secret; the user-data reconciler reads it from
// the stored VM and writes the Secret. Removing Virtstation's annotations
// puts the source back where it came from.
const AnnotationUserData = "virtstation.io/user-data"

// UserCloudInit is the user's own cloud-init user-data source, exactly one
// of the three fields set (none for a VM that had no user-data).
type UserCloudInit struct {
	// UserData is inline user-data, as given in userData.
	UserData *string `json:"userData,omitempty"`
	// UserDataBase64 is inline user-data, as given in userDataBase64.
	UserDataBase64 *string `json:"userDataBase64,omitempty"`
	// SecretRef names a Secret in the VM's namespace holding the
	// user-data under the key "userdata" (or "userData"), as KubeVirt reads it.
	SecretRef string `json:"secretRef,omitempty"`
}

// ParseUserCloudInit reads a virtstation.io/user-data value.
func ParseUserCloudInit(value string) (UserCloudInit, error) {
	var u UserCloudInit
	if err := json.Unmarshal([]byte(value), &u); err != nil {
		return UserCloudInit{}, fmt.Errorf("parse %s: %w", AnnotationUserData, err)
	}
	n := 0
	for _, set := range []bool{u.UserData != nil, u.UserDataBase64 != nil, u.SecretRef != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return UserCloudInit{}, fmt.Errorf("parse %s: more than one of userData, userDataBase64 and secretRef", AnnotationUserData)
	}
	return u, nil
}

// String is the annotation value.
func (u UserCloudInit) String() string {
	b, err := json.Marshal(u)
	if err != nil { // a struct of strings always encodes
		panic(err)
	}
	return string(b)
}
