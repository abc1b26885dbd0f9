package cloudinit

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v2"
)

// renderedHeader opens every rendered part. Its second line marks the
// document as Virtstation's, which is how [Split] recognises a bare part.
const renderedHeader = "#cloud-config\n" +
	"# virtstation: managed part (data disks, SSH keys); re-rendered on every admission, edit your own user-data instead\n"

// Mount is one data disk the boot script formats (first use only) and mounts.
type Mount struct {
	Serial string // virtio disk serial, 1-20 chars of [A-Za-z0-9_.+-]; the disk shows as /dev/disk/by-id/virtio-<Serial>
	Path   string // absolute mount path in the guest
}

// Part is Virtstation's own cloud-config part.
type Part struct {
	Mounts []Mount
	// Owner is the guest account (virtstation.io/ssh-user) that gets a freshly formatted mount; "" for none.
	Owner string
	// AuthorizedKeys (cloudInit SSH propagation): with Owner "" they go to top-level ssh_authorized_keys (the default user); with Owner set, to `users: [default, {name: Owner, ssh_authorized_keys: [...]}]`.
	AuthorizedKeys []string
}

// IsZero reports whether the part has nothing to say: no mounts and no keys.
// An Owner alone says nothing, since it only matters for mounts and keys.
func (p Part) IsZero() bool {
	return len(p.Mounts) == 0 && len(p.AuthorizedKeys) == 0
}

// mergeRule is one entry of cloud-config's merge_how list form.
type mergeRule struct {
	Name     string   `yaml:"name"`
	Settings []string `yaml:"settings"`
}

// mergeHow makes cloud-init, when it merges this part into the cloud-config
// gathered from earlier parts (the user's), append to lists and recurse into
// dicts without replacing values the user set. cloud-init's default for a part
// without merge_how is dict(replace): our bootcmd would replace the user's.
var mergeHow = []mergeRule{
	{Name: "list", Settings: []string{"append"}},
	{Name: "dict", Settings: []string{"no_replace", "recurse_list"}},
}

// document is the rendered cloud-config. Its fields are in key order, so
// the keys come out sorted and equal parts render to equal bytes. It is
// marshalled with yaml.v2 directly: a JSON round trip through
// sigs.k8s.io/yaml cost most of a mutation's time.
type document struct {
	Bootcmd           [][]string  `yaml:"bootcmd,omitempty"`
	MergeHow          []mergeRule `yaml:"merge_how"`
	Runcmd            [][]string  `yaml:"runcmd,omitempty"`
	SSHAuthorizedKeys []string    `yaml:"ssh_authorized_keys,omitempty"`
	Users             []any       `yaml:"users,omitempty"`
}

// userEntry is a named account in cloud-config's users list.
type userEntry struct {
	Name              string   `yaml:"name"`
	SSHAuthorizedKeys []string `yaml:"ssh_authorized_keys"`
}

// defaultUser names the distribution's default account in a users list; it
// keeps that account, which a users list without it would drop.
const defaultUser = "default"

var (
	serialRE = regexp.MustCompile(`^[A-Za-z0-9_.+-]{1,20}$`)
	// ownerRE admits the account names useradd accepts in practice (including
	// upper case and a trailing '$'), and nothing that chown's "user:" syntax
	// or an option parser could misread.
	ownerRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,31}\$?$`)
)

// Render returns the part as a "#cloud-config" document (deterministic bytes). It carries merge_how so that, merged after the user's own cloud-config, lists append and dicts recurse instead of replacing the user's bootcmd/runcmd/users.
//
// Render fails when a serial, path, owner or key is malformed or a serial or
// path repeats; the error lists every problem. A zero part renders to a valid
// document that holds merge_how only; callers normally skip it ([Part.IsZero]).
func (p Part) Render() ([]byte, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	doc := document{MergeHow: mergeHow}
	if len(p.Mounts) > 0 {
		doc.Bootcmd = [][]string{{"sh", "-c", MountScript(p.Mounts, p.Owner)}}
		if p.Owner != "" {
			doc.Runcmd = [][]string{{"sh", "-c", chownPendingScript(p.Mounts, p.Owner)}}
		}
	}
	if len(p.AuthorizedKeys) > 0 {
		keys := append([]string(nil), p.AuthorizedKeys...)
		if p.Owner == "" {
			doc.SSHAuthorizedKeys = keys
		} else {
			doc.Users = []any{defaultUser, userEntry{Name: p.Owner, SSHAuthorizedKeys: keys}}
		}
	}
	body, err := yaml.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("marshalling cloud-config: %w", err)
	}
	return append([]byte(renderedHeader), body...), nil
}

// validate reports every malformed or repeated value of the part.
func (p Part) validate() error {
	var errs []error
	serials := map[string]int{}
	paths := map[string]int{}
	for i, m := range p.Mounts {
		if !serialRE.MatchString(m.Serial) {
			errs = append(errs, fmt.Errorf("mounts[%d].serial %q: must be 1-20 characters of [A-Za-z0-9_.+-]", i, m.Serial))
		} else if j, dup := serials[m.Serial]; dup {
			errs = append(errs, fmt.Errorf("mounts[%d].serial %q: repeats mounts[%d].serial", i, m.Serial, j))
		} else {
			serials[m.Serial] = i
		}
		switch {
		case !strings.HasPrefix(m.Path, "/"):
			errs = append(errs, fmt.Errorf("mounts[%d].path %q: must be absolute", i, m.Path))
		case strings.ContainsRune(m.Path, 0):
			errs = append(errs, fmt.Errorf("mounts[%d].path %q: must not contain NUL", i, m.Path))
		default:
			if j, dup := paths[m.Path]; dup {
				errs = append(errs, fmt.Errorf("mounts[%d].path %q: repeats mounts[%d].path", i, m.Path, j))
			} else {
				paths[m.Path] = i
			}
		}
	}
	if p.Owner != "" && !ownerRE.MatchString(p.Owner) {
		errs = append(errs, fmt.Errorf("owner %q: must be 1-32 characters of [A-Za-z0-9._-], not starting with '.' or '-', optionally ending in '$'", p.Owner))
	}
	for i, k := range p.AuthorizedKeys {
		if strings.TrimSpace(k) == "" || strings.ContainsAny(k, "\r\n\x00") {
			errs = append(errs, fmt.Errorf("authorizedKeys[%d]: must be one non-empty line", i))
		}
	}
	return errors.Join(errs...)
}
