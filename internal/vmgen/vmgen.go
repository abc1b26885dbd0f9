package vmgen

import (
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/mac"
)

// Case is one generated VirtualMachine and the cluster it is admitted into.
type Case struct {
	// Namespace is the VM's namespace; the objects live in it too.
	Namespace string
	// VM is the manifest as the API server sends it to the webhook on
	// CREATE: metadata.namespace is set, and metadata.name is empty when
	// the VM uses generateName.
	VM map[string]any
	// Objects exist before the VM is applied: data disks (DataVolumes and
	// PVCs), Secrets (the user's user-data and network-data Secrets, SSH
	// key Secrets, and Secrets that take a name Virtstation derives), and
	// other managed VMs.
	Objects []map[string]any
	// Architecture is the cluster's default architecture (the KubeVirt
	// CR's spec.configuration.architectureConfiguration.defaultArchitecture).
	Architecture string
	// UserData is the user's own cloud-init user-data; nil when the VM has
	// no cloud-init volume or its volume has only network data.
	UserData *UserData
	// Features name what the case covers, for the test's coverage count.
	Features []string
}

// UserData is where the user put their own cloud-init user-data.
type UserData struct {
	// Volume is the cloud-init volume's name, Source its kind
	// (cloudInitNoCloud or cloudInitConfigDrive).
	Volume, Source string
	// Field is userData, userDataBase64 or secretRef.
	Field string
	// Secret names the user's Secret when Field is secretRef.
	Secret string
	// Data are the bytes the guest must see from the user.
	Data []byte
}

// The values Generate draws from.
const (
	// Image is the container disk every generated VM boots.
	Image = "quay.io/containerdisks/debian:12"
	// GPU device names (kubevirt.io/api permittedHostDevices-style resource
	// names).
	gpuH200 = "nvidia.com/GH100_H200"
	gpuT4   = "nvidia.com/TU104GL_Tesla_T4"
)

// Architectures are the values of spec.template.spec.architecture and of the
// cluster default the generator uses.
var Architectures = []string{"amd64", "arm64", "s390x"}

// Options says what Generate may make.
type Options struct {
	// Instancetypes lets VMs take their CPU and memory from a cluster
	// instancetype (u1.small, u1.medium) instead of the template. Only a
	// checker that can look instancetypes up can judge them: without the
	// lookup, KubeVirt's VMI admission finds no memory. Without it, VMs
	// name only a cluster preference (debian). test/property serves both
	// to KubeVirt's admission from an API server.
	Instancetypes bool
}

// Generate makes one Case from src.
func Generate(src Source, opts Options) Case {
	g := &gen{src: src, c: &Case{}, opts: opts}
	g.generate()
	slices.Sort(g.c.Features)
	g.c.Features = slices.Compact(g.c.Features)
	return *g.c
}

type gen struct {
	src  Source
	c    *Case
	opts Options

	name, generateName string
	arch               string // effective architecture of the VM
	secrets            map[string]bool
}

func (g *gen) intn(n int) int          { return g.src.Intn(n) }
func (g *gen) chance(pct int) bool     { return g.intn(100) < pct }
func (g *gen) feature(f ...string)     { g.c.Features = append(g.c.Features, strings.Join(f, "=")) }
func (g *gen) pick(s ...string) string { return s[g.intn(len(s))] }

// weighted returns an index into weights, chosen in proportion to them.
func (g *gen) weighted(weights ...int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := g.intn(total)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	return len(weights) - 1
}

func (g *gen) lower(n int) string {
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alnum[g.intn(len(alnum))]
	}
	b[0] = 'a' + byte(g.intn(26))
	return string(b)
}

func (g *gen) generate() {
	c := g.c
	g.secrets = map[string]bool{}
	c.Namespace = g.pick("ns", "team-a")
	c.Architecture = []string{"amd64", "arm64"}[g.weighted(3, 1)]
	g.feature("cluster-arch", c.Architecture)

	meta := map[string]any{"namespace": c.Namespace, "labels": map[string]any{api.LabelManaged: api.LabelTrue}}
	switch g.weighted(85, 10, 5) {
	case 0:
		g.name = "vm-" + g.lower(3+g.intn(6))
		meta["name"] = g.name
		g.feature("name")
	case 1:
		g.generateName = g.pick("ws-", "dev-", "vm-"+g.lower(4)+"-")
		meta["generateName"] = g.generateName
		g.feature("generateName")
	default:
		// Long names: the per-VM Secret names (<vm>-userdata,
		// <vm>-ssh-keys) would pass 253 characters.
		g.name = g.longName(230 + g.intn(24))
		meta["name"] = g.name
		g.feature("long-name")
	}
	annotations := map[string]any{}
	template := g.templateSpec(annotations)
	spec := map[string]any{"template": map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "workstation"}},
		"spec":     template,
	}}
	g.runStrategy(spec)
	if g.chance(15) {
		g.instancetype(spec, template)
	}
	g.dataVolumeTemplates(spec, template)
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	c.VM = map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachine",
		"metadata":   meta,
		"spec":       spec,
	}
}

// longName is a DNS-1123 subdomain of n characters, in labels of at most 63.
func (g *gen) longName(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		l := min(40+g.intn(24), n-b.Len())
		if l < 1 {
			break
		}
		b.WriteString(g.lower(l))
	}
	s := strings.TrimRight(b.String(), ".")
	return s
}

// vmKey is what Virtstation hashes and names Secrets after; "" for a
// generateName VM.
func (g *gen) vmKey() string { return g.name }

func (g *gen) templateSpec(ann map[string]any) map[string]any {
	c := g.c
	tmpl := map[string]any{}
	switch g.weighted(55, 15, 20, 10) {
	case 1:
		tmpl["architecture"] = "amd64"
	case 2:
		tmpl["architecture"] = "arm64"
	case 3:
		tmpl["architecture"] = "s390x"
	}
	g.arch = c.Architecture
	if a, ok := tmpl["architecture"].(string); ok {
		g.arch = a
		g.feature("vm-arch", a)
	} else {
		g.feature("vm-arch", "default")
	}
	devices := map[string]any{}
	domain := map[string]any{"devices": devices}
	tmpl["domain"] = domain
	if g.chance(50) {
		domain["memory"] = map[string]any{"guest": g.pick("1Gi", "2Gi", "4Gi")}
	} else {
		domain["resources"] = map[string]any{"requests": map[string]any{"memory": g.pick("1Gi", "2Gi")}}
	}

	var disks, volumes []any
	// The boot disk.
	disks = append(disks, map[string]any{"name": "rootdisk", "disk": map[string]any{"bus": g.userDiskBus()}})
	volumes = append(volumes, map[string]any{"name": "rootdisk", "containerDisk": map[string]any{"image": Image}})
	if g.chance(10) {
		disks = append(disks, map[string]any{"name": "iso", "cdrom": map[string]any{"bus": g.userCDROMBus()}})
		volumes = append(volumes, map[string]any{"name": "iso", "containerDisk": map[string]any{"image": "quay.io/containerdisks/tools:latest"}})
		g.feature("user-cdrom")
	}
	if vol, ok := g.cloudInit(); ok {
		name, _ := vol["name"].(string)
		disks = append(disks, map[string]any{"name": name, "disk": map[string]any{"bus": "virtio"}})
		volumes = append(volumes, vol)
	}
	devices["disks"] = disks
	tmpl["volumes"] = volumes

	g.networks(tmpl, devices, ann)
	g.devices(domain, devices, ann)
	g.accessCredentials(tmpl, ann)
	g.dataDisks(ann)
	return tmpl
}

// userDiskBus is a bus KubeVirt accepts for the user's own disks on the
// VM's architecture.
func (g *gen) userDiskBus() string {
	if g.arch == "amd64" {
		return g.pick("virtio", "virtio", "sata", "scsi")
	}
	return g.pick("virtio", "scsi")
}

func (g *gen) userCDROMBus() string {
	if g.arch == "amd64" {
		return g.pick("sata", "scsi")
	}
	return "scsi"
}

func (g *gen) runStrategy(spec map[string]any) {
	// KubeVirt v1.9.0 wants one of them ("RunStrategy must be specified").
	if g.chance(70) {
		s := g.pick("Always", "Halted", "Manual", "RerunOnFailure", "Once")
		spec["runStrategy"] = s
		g.feature("runStrategy", s)
		return
	}
	r := g.chance(50)
	spec["running"] = r
	g.feature("running", fmt.Sprint(r))
}

// instancetype names a cluster preference (debian), or replaces the
// template's memory with a cluster instancetype (u1.small, u1.medium) and
// sometimes the preference too: an instancetype conflicts with
// domain.memory and resources.
func (g *gen) instancetype(spec, tmpl map[string]any) {
	domain, _ := tmpl["domain"].(map[string]any)
	debian := map[string]any{"kind": "VirtualMachineClusterPreference", "name": "debian"}
	if !g.opts.Instancetypes || g.chance(30) {
		spec["preference"] = debian
		g.feature("preference")
		return
	}
	delete(domain, "memory")
	if res, ok := domain["resources"].(map[string]any); ok {
		delete(res, "requests")
		if len(res) == 0 {
			delete(domain, "resources")
		}
	}
	spec["instancetype"] = map[string]any{"kind": "VirtualMachineClusterInstancetype", "name": g.pick("u1.small", "u1.medium")}
	g.feature("instancetype")
	if g.chance(50) {
		spec["preference"] = debian
		g.feature("instancetype+preference")
	}
}

// dataVolumeTemplates boots some VMs from a DataVolume the VM creates,
// instead of the container disk.
func (g *gen) dataVolumeTemplates(spec, tmpl map[string]any) {
	if !g.chance(20) {
		return
	}
	dv := "root-" + g.lower(5)
	spec["dataVolumeTemplates"] = []any{map[string]any{
		"metadata": map[string]any{"name": dv},
		"spec": map[string]any{
			"source":  map[string]any{"registry": map[string]any{"url": "docker://" + Image}},
			"storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "10Gi"}}},
		},
	}}
	volumes, _ := tmpl["volumes"].([]any)
	volumes[0] = map[string]any{"name": "rootdisk", "dataVolume": map[string]any{"name": dv}}
	g.feature("dataVolumeTemplates")
}

// cloudInit is the user's own cloud-init volume, if the VM has one.
func (g *gen) cloudInit() (map[string]any, bool) {
	if !g.chance(70) {
		g.feature("cloud-init", "none")
		return nil, false
	}
	source := []string{"cloudInitNoCloud", "cloudInitConfigDrive"}[g.weighted(3, 1)]
	name := "cloudinitdisk"
	if g.chance(10) {
		// The name Virtstation gives the volume it adds.
		name = "vs-cloudinit"
		g.feature("cloud-init-volume-named-vs-cloudinit")
	}
	g.feature("cloud-init", source)
	src := map[string]any{}
	vol := map[string]any{"name": name, source: src}

	hasNetwork := g.chance(25)
	fieldChoice := g.weighted(40, 25, 20, 15)
	if fieldChoice == 3 && !hasNetwork {
		// KubeVirt wants user-data or network-data in a cloud-init volume.
		hasNetwork = true
	}
	if hasNetwork {
		g.networkData(src)
	}
	if fieldChoice == 3 {
		g.feature("userdata", "none")
		return vol, true
	}
	ud := &UserData{Volume: name, Source: source}
	switch fieldChoice {
	case 0:
		ud.Field = "userData"
		ud.Data = g.userData(2048, false)
		src["userData"] = string(ud.Data)
	case 1:
		ud.Field = "userDataBase64"
		ud.Data = g.userData(2048, true)
		src["userDataBase64"] = base64.StdEncoding.EncodeToString(ud.Data)
	default:
		ud.Field = "secretRef"
		ud.Data = g.userData(6000, true)
		ud.Secret = "my-userdata"
		if g.vmKey() != "" && g.chance(35) {
			// The user's own Secret takes the name of Virtstation's.
			ud.Secret = g.vmKey() + "-userdata"
			g.feature("user-secret-named-like-virtstation's")
		}
		src["secretRef"] = map[string]any{"name": ud.Secret}
		g.addSecret(ud.Secret, map[string]any{g.pick("userdata", "userdata", "userData"): ud.Data}, nil)
	}
	g.feature("userdata", ud.Field)
	g.c.UserData = ud
	return vol, true
}

func (g *gen) networkData(src map[string]any) {
	data := []byte("version: 2\nethernets:\n  enp1s0:\n    dhcp4: true\n")
	if g.chance(30) {
		data = []byte("network:\n  version: 1\n  config:\n    - type: physical\n      name: eth0\n      subnets:\n        - type: dhcp\n")
	}
	switch g.intn(3) {
	case 0:
		src["networkData"] = string(data)
		g.feature("networkdata", "networkData")
	case 1:
		src["networkDataBase64"] = base64.StdEncoding.EncodeToString(data)
		g.feature("networkdata", "networkDataBase64")
	default:
		src["networkDataSecretRef"] = map[string]any{"name": "my-networkdata"}
		g.addSecret("my-networkdata", map[string]any{"networkdata": data}, nil)
		g.feature("networkdata", "networkDataSecretRef")
	}
}

// userData returns the user's own user-data: sizes around KubeVirt's
// 2,048-byte inline limit (the merged result crosses it as Virtstation's
// part grows), small ones and, up to limit, large ones. binary allows data
// that is not UTF-8.
func (g *gen) userData(limit int, binary bool) []byte {
	var size int
	switch g.weighted(30, 40, 15, 15) {
	case 0:
		size = 16 + g.intn(300)
		g.feature("userdata-size", "small")
	case 1:
		// Most where the merge crosses the inline limit: the user's
		// data plus Virtstation's part (a few hundred bytes for keys,
		// more for mounts) lands around 1,536 (the base64 limit) to 2,048.
		if g.chance(65) {
			size = 1100 + g.intn(949) // 1100..2048
		} else {
			size = 500 + g.intn(600)
		}
		g.feature("userdata-size", "near-limit")
	case 2:
		size = []int{2048, 2047, 1536, 1537, 1024, 1500, 1700}[g.intn(7)]
		g.feature("userdata-size", "edge")
	default:
		size = 2049 + g.intn(4000)
		g.feature("userdata-size", "large")
	}
	size = min(size, limit)
	kinds := []int{45, 25, 10, 10, 10}
	if !binary {
		kinds[3] = 0
	}
	out := g.userDataKind(size, kinds)
	if len(out) > limit {
		// A MIME wrapper or CRLFs grew it past what KubeVirt takes inline.
		out = g.pad([]byte("#!/bin/sh\n"), limit)
	}
	return out
}

func (g *gen) userDataKind(size int, kinds []int) []byte {
	switch g.weighted(kinds...) {
	case 0:
		g.feature("userdata-kind", "cloud-config")
		return g.cloudConfig(size)
	case 1:
		g.feature("userdata-kind", "script")
		return g.pad([]byte("#!/bin/sh\necho hello from the user > /var/tmp/hello\n"), size)
	case 2:
		g.feature("userdata-kind", "mime")
		return g.mime(size)
	case 3:
		g.feature("userdata-kind", "gzip")
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(g.cloudConfig(size)) // a bytes.Buffer never fails
		_ = zw.Close()
		return b.Bytes()
	default:
		g.feature("userdata-kind", "include")
		return g.pad([]byte("#include\nhttps://example.com/user-data.yaml\n"), size)
	}
}

// cloudConfig is a valid #cloud-config of about size bytes, in one of the
// line-ending and trailing-newline styles users write.
func (g *gen) cloudConfig(size int) []byte {
	head := "#cloud-config\npackages:\n  - vim\n  - git\nruncmd:\n  - [sh, -c, 'echo user > /var/tmp/user']\n"
	if g.chance(30) {
		head = "#cloud-config\nusers:\n  - name: alice\n    shell: /bin/bash\n    sudo: ALL=(ALL) NOPASSWD:ALL\n"
	}
	out := g.pad([]byte(head), size)
	switch g.weighted(80, 10, 10) {
	case 1:
		out = bytes.ReplaceAll(out, []byte("\n"), []byte("\r\n"))
		g.feature("userdata-crlf")
		if len(out) > size {
			out = out[:size]
		}
	case 2:
		out = bytes.TrimRight(out, "\n")
		g.feature("userdata-no-final-newline")
	}
	return out
}

// pad appends YAML/shell comment lines to head until it is size bytes
// (or head's own size, when larger).
func (g *gen) pad(head []byte, size int) []byte {
	out := append([]byte(nil), head...)
	for len(out) < size {
		room := size - len(out)
		if room < 3 {
			out = append(out, bytes.Repeat([]byte("\n"), room)...)
			break
		}
		n := min(room, 2+g.intn(78))
		line := append([]byte("# "), bytes.Repeat([]byte{'a' + byte(g.intn(26))}, max(n-3, 0))...)
		out = append(append(out, line[:n-1]...), '\n')
	}
	return out
}

// mime is user-data that is itself a MIME multipart, as
// cloud-init's make-mime writes it.
func (g *gen) mime(size int) []byte {
	boundary := "===============" + g.lower(10) + "=="
	part := g.cloudConfig(max(size-300, 60))
	var b bytes.Buffer
	fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"%s\"\nMIME-Version: 1.0\n\n", boundary)
	fmt.Fprintf(&b, "--%s\nContent-Type: text/cloud-config; charset=\"us-ascii\"\nMIME-Version: 1.0\nContent-Transfer-Encoding: 7bit\nContent-Disposition: attachment; filename=\"user.yaml\"\n\n", boundary)
	b.Write(bytes.ReplaceAll(part, []byte("\r\n"), []byte("\n")))
	fmt.Fprintf(&b, "\n--%s--\n", boundary)
	return b.Bytes()
}

// networks picks the interface kinds: none (auto-attached), masquerade or
// bridge on the pod network, secondary Multus bridge or SR-IOV interfaces,
// and no pod network at all.
func (g *gen) networks(tmpl, devices, ann map[string]any) {
	podName := "default"
	var ifaces, nets []any
	switch g.weighted(25, 30, 15, 5, 10, 5, 10) {
	case 0:
		g.feature("interfaces", "auto-attached")
	case 1:
		ifaces = append(ifaces, map[string]any{"name": podName, "masquerade": map[string]any{}})
		g.feature("interfaces", "masquerade")
	case 2:
		ifaces = append(ifaces, map[string]any{"name": podName, "bridge": map[string]any{}})
		g.feature("interfaces", "bridge")
	case 3:
		devices["autoattachPodInterface"] = false
		g.feature("interfaces", "autoattach-off")
	case 4:
		ifaces = append(ifaces, map[string]any{"name": podName, "masquerade": map[string]any{}}, g.secondary())
		g.feature("interfaces", "masquerade+secondary")
	case 5:
		ifaces = append(ifaces, g.secondary())
		g.feature("interfaces", "secondary-only")
	default:
		podName = "pod"
		ifaces = append(ifaces, map[string]any{"name": podName, g.pick("masquerade", "bridge"): map[string]any{}})
		g.feature("interfaces", "pod-named-pod")
	}
	for _, i := range ifaces {
		iface, _ := i.(map[string]any)
		name, _ := iface["name"].(string)
		if name == podName {
			nets = append(nets, map[string]any{"name": podName, "pod": map[string]any{}})
		} else {
			nets = append(nets, map[string]any{"name": name, "multus": map[string]any{"networkName": "br-net"}})
		}
		if g.chance(35) {
			_, masquerade := iface["masquerade"]
			iface["macAddress"] = g.existingMAC(masquerade)
		}
	}
	if len(ifaces) > 0 {
		devices["interfaces"] = ifaces
		tmpl["networks"] = nets
	}
	g.macAnnotation(ann)
	g.otherVMs()
}

func (g *gen) secondary() map[string]any {
	if g.chance(50) {
		g.feature("secondary", "sriov")
		return map[string]any{"name": "sec", "sriov": map[string]any{}}
	}
	g.feature("secondary", "bridge")
	return map[string]any{"name": "sec", "bridge": map[string]any{}}
}

// existingMAC is a MAC the user already set on an interface, in one of the
// forms KubeVirt accepts (net.ParseMAC, 6 octets). masquerade interfaces
// cannot take KubeVirt's reserved 02:00:00:00:00:00.
func (g *gen) existingMAC(masquerade bool) string {
	if !masquerade && g.chance(10) {
		g.feature("existing-mac", "reserved-on-bridge")
		return "02:00:00:00:00:00"
	}
	addr := net.HardwareAddr{0x02, byte(g.intn(256)), byte(g.intn(256)), byte(g.intn(256)), byte(g.intn(256)), byte(1 + g.intn(254))}
	form := g.pick("colon", "colon", "upper", "hyphen", "dotted")
	g.feature("existing-mac", form)
	return macForm(addr, form)
}

func macForm(addr net.HardwareAddr, form string) string {
	s := addr.String()
	switch form {
	case "upper":
		return strings.ToUpper(s)
	case "hyphen":
		return strings.ReplaceAll(s, ":", "-")
	case "dotted":
		h := strings.ReplaceAll(s, ":", "")
		return h[0:4] + "." + h[4:8] + "." + h[8:12]
	}
	return s
}

func (g *gen) macAnnotation(ann map[string]any) {
	switch g.weighted(60, 10, 10, 20) {
	case 1:
		ann[api.AnnotationMAC] = "auto"
		g.feature("mac-annotation", "auto")
	case 2:
		ann[api.AnnotationMAC] = g.pick("off", "OFF")
		g.feature("mac-annotation", "off")
	case 3:
		addr := net.HardwareAddr{0x02, 0x00, 0x5e, byte(g.intn(256)), byte(g.intn(256)), byte(1 + g.intn(254))}
		form := g.pick("colon", "colon", "upper", "hyphen", "dotted")
		ann[api.AnnotationMAC] = macForm(addr, form)
		g.feature("mac-annotation", form)
	default:
		g.feature("mac-annotation", "absent")
	}
}

// otherVMs adds a managed VM that already holds a MAC: sometimes the one
// this VM's name derives to, or the one its annotation asks for.
func (g *gen) otherVMs() {
	if !g.chance(20) {
		return
	}
	addr := net.HardwareAddr{0x02, 0x11, byte(g.intn(256)), byte(g.intn(256)), byte(g.intn(256)), byte(1 + g.intn(254))}
	if g.name != "" && g.chance(50) {
		if d, _, err := mac.Derive(g.c.Namespace, g.name, nil); err == nil {
			addr = d
			g.feature("other-vm-holds-derived-mac")
		}
	} else {
		g.feature("other-vm")
	}
	g.c.Objects = append(g.c.Objects, map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "other-" + g.lower(4), "namespace": g.c.Namespace, "uid": "00000000-0000-0000-0000-00000000000" + fmt.Sprint(g.intn(10)),
			"labels": map[string]any{api.LabelManaged: api.LabelTrue}},
		"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{"spec": map[string]any{
			"domain":   map[string]any{"devices": map[string]any{"interfaces": []any{map[string]any{"name": "default", "masquerade": map[string]any{}, "macAddress": addr.String()}}}},
			"networks": []any{map[string]any{"name": "default", "pod": map[string]any{}}},
		}}},
	})
}

// devices sets graphics, inputs, the user's own GPUs and `*/gpu`
// resources, and the video and GPU annotations.
func (g *gen) devices(domain, devices, ann map[string]any) {
	switch g.weighted(70, 15, 15) {
	case 1:
		devices["autoattachGraphicsDevice"] = true
		g.feature("autoattachGraphicsDevice", "true")
	case 2:
		devices["autoattachGraphicsDevice"] = false
		g.feature("autoattachGraphicsDevice", "false")
	default:
		g.feature("autoattachGraphicsDevice", "unset")
	}
	switch g.weighted(70, 20, 10) {
	case 1:
		devices["inputs"] = []any{map[string]any{"name": "tablet", "type": "tablet", "bus": "usb"}}
		g.feature("user-input", "usb")
	case 2:
		devices["inputs"] = []any{map[string]any{"name": "mytablet", "type": "tablet", "bus": "virtio"}}
		g.feature("user-input", "virtio")
	}
	if g.chance(30) {
		t := g.pick(api.VideoTypes...)
		ann[api.AnnotationVideo] = t
		g.feature("video", t)
	}
	if g.chance(10) {
		devices["gpus"] = []any{map[string]any{"name": "gpu0", "deviceName": gpuT4}}
		g.feature("user-gpus")
	}
	if g.chance(20) {
		ann[api.AnnotationGPUs] = g.pick(gpuH200+"=1", gpuH200+"=2,"+gpuT4+"=1", gpuT4+"=1")
		g.feature("gpu-annotation")
	}
	if g.chance(15) {
		res, _ := domain["resources"].(map[string]any)
		if res == nil {
			res = map[string]any{}
			domain["resources"] = res
		}
		key := g.pick("limits", "requests")
		m, _ := res[key].(map[string]any)
		if m == nil {
			m = map[string]any{}
			res[key] = m
		}
		m[g.pick("nvidia.com/gpu", "amd.com/gpu")] = g.pick("1", "2")
		g.feature("gpu-resources", key)
	}
}

// accessCredentials adds the user's own accessCredentials entry, the
// virtstation.io/ssh-* annotations, and the namespace's key Secrets.
func (g *gen) accessCredentials(tmpl, ann map[string]any) {
	if g.chance(15) {
		secret := "my-keys"
		if g.vmKey() != "" && g.chance(40) {
			// The name of the Secret Virtstation derives for qemuGuestAgent.
			secret = g.vmKey() + "-ssh-keys"
			g.feature("user-credentials-named-like-virtstation's")
		} else {
			g.feature("user-credentials")
		}
		tmpl["accessCredentials"] = []any{map[string]any{"sshPublicKey": map[string]any{
			"source":            map[string]any{"secret": map[string]any{"secretName": secret}},
			"propagationMethod": map[string]any{"qemuGuestAgent": map[string]any{"users": []any{"bob"}}},
		}}}
		if !g.secrets[secret] {
			g.addSecret(secret, map[string]any{"key1": []byte(g.publicKey())}, nil)
		}
	}
	if !g.chance(55) {
		g.feature("ssh", "none")
		return
	}
	ann[api.AnnotationSSHUser] = g.pick("alice", "dev")
	switch g.weighted(30, 30, 40) {
	case 1:
		ann[api.AnnotationSSHPropagation] = api.PropagationQemuGuestAgent
		g.feature("ssh", api.PropagationQemuGuestAgent)
	case 2:
		ann[api.AnnotationSSHPropagation] = api.PropagationCloudInit
		g.feature("ssh", api.PropagationCloudInit)
	default:
		g.feature("ssh", "default-propagation")
	}
	if g.chance(75) {
		var keys []string
		for range 1 + g.intn(3) {
			keys = append(keys, g.publicKey())
		}
		if g.chance(20) {
			keys = append(keys, "ssh-ed25519 not-a-key user@host")
			g.feature("invalid-ssh-key")
		}
		g.addSecret("keys-"+g.lower(4), map[string]any{"authorized_keys": []byte(strings.Join(keys, "\n") + "\n")},
			map[string]any{api.LabelSSHPublicKey: api.LabelTrue})
	}
	if key := g.vmKey(); key != "" && g.chance(8) && !g.secrets[key+"-ssh-keys"] {
		// Someone else's Secret takes the name Virtstation needs.
		g.addSecret(key+"-ssh-keys", map[string]any{"ssh-publickey": []byte(g.publicKey())}, nil)
		g.feature("foreign-ssh-keys-secret")
	}
}

// publicKey is an ed25519 authorized_keys line from the source's bytes.
func (g *gen) publicKey() string {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(g.intn(256))
	}
	pub, err := ssh.NewPublicKey(ed25519.NewKeyFromSeed(seed).Public())
	if err != nil { // an ed25519 public key always converts
		panic(fmt.Sprintf("vmgen: ssh public key: %v", err))
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " " + g.lower(5) + "@example.com"
}

// dataDisks writes virtstation.io/data-disks in either grammar, with the
// DataVolumes and PVCs it names.
func (g *gen) dataDisks(ann map[string]any) {
	if !g.chance(50) {
		return
	}
	n := 1 + g.intn(3)
	mounts := []string{"/data", "/srv/work", "/home/dev/projects", "/mnt/scratch", "/opt/cache", "/workspace"}
	var entries []api.DataDisk
	for i := range n {
		d := api.DataDisk{Name: fmt.Sprintf("data-%d-%s", i, g.lower(3))}
		if g.chance(75) {
			d.MountPath = mounts[(i+g.intn(2)*3)%len(mounts)]
		}
		entries = append(entries, d)
		g.dataDiskObject(d.Name)
	}
	// Distinct mount paths: the step's duplicate check is not what is tested.
	seen := map[string]bool{}
	for i := range entries {
		if seen[entries[i].MountPath] {
			entries[i].MountPath = ""
		}
		seen[entries[i].MountPath] = entries[i].MountPath != ""
	}
	if g.chance(50) {
		var parts []string
		for _, d := range entries {
			if d.MountPath == "" {
				parts = append(parts, d.Name)
			} else {
				parts = append(parts, d.Name+":"+d.MountPath)
			}
		}
		sep := g.pick(",", ", ")
		ann[api.AnnotationDataDisks] = strings.Join(parts, sep)
		g.feature("data-disks", "shorthand")
		return
	}
	var list []map[string]any
	for _, d := range entries {
		e := map[string]any{"name": d.Name}
		if d.MountPath != "" {
			e["mountPath"] = d.MountPath
		}
		if g.chance(25) {
			e["type"] = "cdrom"
			delete(e, "mountPath")
			if g.chance(60) {
				bus := g.pick("sata", "scsi")
				e["bus"] = bus
				g.feature("data-cdrom-bus", bus)
			}
			if g.chance(30) {
				e["readOnly"] = true
			}
			g.feature("data-cdrom")
		} else {
			if g.chance(70) {
				e["type"] = "disk"
			}
			if g.chance(50) {
				bus := g.pick("virtio", "sata", "scsi", "usb")
				e["bus"] = bus
				g.feature("data-disk-bus", bus)
			}
			if g.chance(25) {
				e["readOnly"] = true
				g.feature("data-disk-readOnly")
			}
		}
		list = append(list, e)
	}
	b, err := json.Marshal(list)
	if err != nil { // maps of strings and bools always marshal
		panic(fmt.Sprintf("vmgen: data disks: %v", err))
	}
	ann[api.AnnotationDataDisks] = string(b)
	g.feature("data-disks", "json")
}

// dataDiskObject adds the DataVolume or PVC a data-disks entry names,
// labelled a data disk (and, rarely, not).
func (g *gen) dataDiskObject(name string) {
	labels := map[string]any{api.LabelDataDisk: api.LabelTrue}
	if g.chance(5) {
		labels = map[string]any{}
		g.feature("data-disk-unlabelled")
	}
	meta := map[string]any{"name": name, "namespace": g.c.Namespace, "labels": labels}
	if g.chance(60) {
		g.c.Objects = append(g.c.Objects, map[string]any{
			"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": meta,
			"spec": map[string]any{"source": map[string]any{"blank": map[string]any{}},
				"storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "10Gi"}}}},
		})
		g.feature("data-disk-object", "DataVolume")
		return
	}
	g.c.Objects = append(g.c.Objects, map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
		"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "10Gi"}}},
	})
	g.feature("data-disk-object", "PersistentVolumeClaim")
}

// addSecret adds a Secret; values are []byte (data, base64 in JSON).
func (g *gen) addSecret(name string, data map[string]any, labels map[string]any) {
	enc := map[string]any{}
	for k, v := range data {
		b, _ := v.([]byte)
		enc[k] = base64.StdEncoding.EncodeToString(b)
	}
	meta := map[string]any{"name": name, "namespace": g.c.Namespace}
	if labels != nil {
		meta["labels"] = labels
	}
	g.secrets[name] = true
	g.c.Objects = append(g.c.Objects, map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": enc})
}
