package mutate

import (
	"fmt"
	"net"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/mac"
	"github.com/virtstation/virtstation/policy"
)

// defaultInterface is the name KubeVirt gives an auto-attached pod interface.
const defaultInterface = "default"

var fieldInterfaces = field.NewPath("spec", "template", "spec", "domain", "devices", "interfaces")

// podTarget is where the MAC goes.
type podTarget struct {
	// index of the pod-network interface in devices.interfaces.
	index int
	name  string
	// current MAC on the interface, "" when none.
	current string
	// addDefault: the VM has no interfaces and auto-attach is on, so the
	// webhook adds the default masquerade interface and pod network.
	addDefault bool
	// masquerade: the interface has (or gets) masquerade binding, where
	// mac.Reserved belongs to the in-pod bridge.
	masquerade bool
}

// findPodInterface locates the pod-network interface, or says why there is
// none to pin.
func findPodInterface(spec *kubevirtv1.VirtualMachineInstanceSpec) (podTarget, string) {
	ifaces := spec.Domain.Devices.Interfaces
	podNetwork := ""
	for _, n := range spec.Networks {
		if n.Pod != nil {
			podNetwork = n.Name
			break
		}
	}
	if podNetwork == "" {
		autoattach := spec.Domain.Devices.AutoattachPodInterface
		if len(spec.Networks) == 0 && len(ifaces) == 0 && (autoattach == nil || *autoattach) {
			return podTarget{name: defaultInterface, addDefault: true, masquerade: true}, ""
		}
		if len(spec.Networks) == 0 && len(ifaces) == 0 {
			return podTarget{}, "autoattachPodInterface is false and the VM has no interfaces"
		}
		return podTarget{}, "the VM has no pod network"
	}
	for i, iface := range ifaces {
		if iface.Name == podNetwork {
			return podTarget{index: i, name: iface.Name, current: iface.MacAddress, masquerade: iface.Masquerade != nil}, ""
		}
	}
	return podTarget{}, fmt.Sprintf("pod network %q has no interface of the same name", podNetwork)
}

// pinMAC pins a MAC on the pod-network interface. It never rewrites a MAC
// the interface already has: that would mark a running VM RestartRequired.
func pinMAC(m *mutation) error {
	vm := m.in.VM
	annPath := field.NewPath("metadata", "annotations").Key(api.AnnotationMAC)
	setting, err := api.ParseMACAnnotation(vm.Annotations[api.AnnotationMAC])
	if err != nil {
		m.denied = append(m.denied, field.Invalid(annPath, vm.Annotations[api.AnnotationMAC],
			policy.Explain(err.Error(), policy.RuleMAC, "set it to auto, off, or a unicast MAC such as 02:00:5e:10:00:01")))
		return nil
	}
	if setting.Mode == api.MACOff || vm.Spec.Template == nil {
		return nil
	}
	if m.released {
		return m.keepStoredMAC()
	}
	target, why := findPodInterface(&vm.Spec.Template.Spec)
	if why != "" {
		m.warnings = append(m.warnings, fmt.Sprintf("virtstation: MAC not pinned: %s", why))
		return nil
	}
	if setting.Mode == api.MACFixed && target.masquerade {
		if err := mac.ValidateMasquerade(setting.Address); err != nil {
			m.denied = append(m.denied, field.Invalid(annPath, vm.Annotations[api.AnnotationMAC],
				policy.Explain(fmt.Sprintf("%v; interface %q uses masquerade", err, target.name), policy.RuleMAC, "set it to auto, off, or another unicast MAC such as 02:00:5e:10:00:01")))
			return nil
		}
	}
	self := types.NamespacedName{Namespace: m.in.Namespace, Name: m.in.Name}

	if target.current != "" {
		return m.keepMAC(target, setting, self)
	}

	addr, record, err := m.chooseMAC(target, setting, self)
	if err != nil {
		return err
	}
	if target.addDefault {
		m.addDefaultInterface()
		if record != nil {
			record.AddedInterface = true
		}
	}
	m.vm.Spec.Template.Spec.Domain.Devices.Interfaces[target.index].MacAddress = addr.String()
	m.injected.MAC = record
	return nil
}

// keepStoredMAC is pinMAC on a released VM (release.go): the MAC stays, and
// an UPDATE that drops it from the pod-network interface gets the stored one
// back, as on a managed VM; nothing else is pinned or recorded.
func (m *mutation) keepStoredMAC() error {
	target, why := findPodInterface(&m.in.VM.Spec.Template.Spec)
	if why != "" || target.addDefault || target.current != "" {
		return nil
	}
	old := m.storedMAC(target.name)
	if old == nil {
		return nil
	}
	m.vm.Spec.Template.Spec.Domain.Devices.Interfaces[target.index].MacAddress = old.String()
	return nil
}

// keepMAC validates a MAC the interface already has and keeps it.
func (m *mutation) keepMAC(target podTarget, setting api.MACSetting, self types.NamespacedName) error {
	fld := fieldInterfaces.Index(target.index).Child("macAddress")
	addr, err := mac.Parse(target.current)
	if err == nil {
		err = mac.ValidateAssignable(addr)
	}
	if err == nil && target.masquerade {
		err = mac.ValidateMasquerade(addr)
	}
	if err != nil {
		m.denied = append(m.denied, field.Invalid(fld, target.current,
			policy.Explain(err.Error(), policy.RuleMAC, "remove macAddress to get a derived MAC, or give a unicast MAC such as 02:00:5e:10:00:01")))
		return nil
	}
	if setting.Mode == api.MACFixed && !mac.Equal(setting.Address, addr) {
		m.warnings = append(m.warnings, fmt.Sprintf(
			"virtstation: interface %q keeps its MAC %s; the %s annotation (%s) is ignored because an existing MAC is never rewritten by the webhook (a running VM would need a restart); to change it, set %s yourself",
			target.name, addr, api.AnnotationMAC, setting.Address, fld))
	}
	if err := m.warnDuplicate(addr, self); err != nil {
		return err
	}
	// Keep the record only when this MAC is the one the webhook pinned.
	if m.prev.MAC != nil && m.prev.MAC.Interface == target.name && strings.EqualFold(m.prev.MAC.Address, addr.String()) {
		m.injected.MAC = m.prev.MAC
	}
	return nil
}

// chooseMAC picks the MAC for an interface that has none, and the record of
// it (nil when the MAC is the user's own, restored from the stored object).
func (m *mutation) chooseMAC(target podTarget, setting api.MACSetting, self types.NamespacedName) (net.HardwareAddr, *api.InjectedMAC, error) {
	// An UPDATE that drops the MAC (kubectl replace, a GitOps tool) keeps
	// the stored one: the MAC of an existing VM never changes.
	if old := m.storedMAC(target.name); old != nil {
		var record *api.InjectedMAC
		if prev, err := api.ParseInjected(m.in.OldVM.Annotations[api.AnnotationInjected]); err == nil &&
			prev.MAC != nil && prev.MAC.Interface == target.name && strings.EqualFold(prev.MAC.Address, old.String()) {
			record = prev.MAC
		}
		return old, record, nil
	}
	if setting.Mode == api.MACFixed {
		if err := m.warnDuplicate(setting.Address, self); err != nil {
			return nil, nil, err
		}
		return setting.Address, &api.InjectedMAC{Interface: target.name, Address: setting.Address.String(), Source: api.MACSourceAnnotation}, nil
	}
	var lookupErr error
	taken := func(addr net.HardwareAddr) bool {
		owners, err := m.otherOwners(addr, self)
		if err != nil {
			lookupErr = err
			return false
		}
		return len(owners) > 0
	}
	addr, _, err := mac.Derive(self.Namespace, m.macSeedName(), taken)
	if lookupErr != nil {
		return nil, nil, lookupErr
	}
	if err != nil {
		return nil, nil, err
	}
	return addr, &api.InjectedMAC{Interface: target.name, Address: addr.String(), Source: api.MACSourceDerived}, nil
}

// macSeedName is the name the MAC is derived from. A VM created with
// generateName has no name at admission (the API server picks it after the
// webhooks), so its MAC is derived from the prefix and the request UID: still
// fixed for the life of the VM, because the webhook never rewrites a MAC.
func (m *mutation) macSeedName() string {
	if m.in.Name != "" {
		return m.in.Name
	}
	return m.in.VM.GenerateName + "@" + m.in.RequestUID
}

// storedMAC is the valid MAC the stored object (UPDATE only) has on the
// interface with the given name, or nil.
func (m *mutation) storedMAC(iface string) net.HardwareAddr {
	if m.in.Operation != admissionv1.Update || m.in.OldVM == nil || m.in.OldVM.Spec.Template == nil {
		return nil
	}
	for _, i := range m.in.OldVM.Spec.Template.Spec.Domain.Devices.Interfaces {
		if i.Name != iface || i.MacAddress == "" {
			continue
		}
		addr, err := mac.Parse(i.MacAddress)
		if err != nil || mac.ValidateAssignable(addr) != nil {
			return nil
		}
		return addr
	}
	return nil
}

// warnDuplicate adds a warning when other VMs already use addr.
func (m *mutation) warnDuplicate(addr net.HardwareAddr, self types.NamespacedName) error {
	owners, err := m.otherOwners(addr, self)
	if err != nil {
		return err
	}
	if len(owners) == 0 {
		return nil
	}
	m.warnings = append(m.warnings, duplicateMACWarning(addr, self.Namespace, owners))
	return nil
}

// duplicateMACWarning says which VMs also use addr, naming only those of
// the request's namespace: the names in other namespaces are not the
// requester's to learn, only that they exist.
func duplicateMACWarning(addr net.HardwareAddr, namespace string, owners []types.NamespacedName) string {
	var names []string
	elsewhere := 0
	for _, o := range owners {
		if o.Namespace == namespace {
			names = append(names, o.Name)
		} else {
			elsewhere++
		}
	}
	var who []string
	if len(names) > 0 {
		who = append(who, "VirtualMachine "+strings.Join(names, ", "))
	}
	if elsewhere > 0 {
		who = append(who, fmt.Sprintf("%d VirtualMachine(s) in other namespaces", elsewhere))
	}
	return fmt.Sprintf("virtstation: MAC %s is also used by %s; two VMs with one MAC on a shared network will conflict", addr, strings.Join(who, " and "))
}

// otherOwners lists the VMs other than self that use addr, sorted.
func (m *mutation) otherOwners(addr net.HardwareAddr, self types.NamespacedName) ([]types.NamespacedName, error) {
	owners, err := m.cluster.MACOwners(m.ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("look up mac owners: %w", err)
	}
	out := owners[:0:0]
	for _, o := range owners {
		if o != self {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// addDefaultInterface writes the interface and network KubeVirt would
// auto-attach, with masquerade binding, so the MAC has a place to go.
func (m *mutation) addDefaultInterface() {
	spec := &m.vm.Spec.Template.Spec
	spec.Domain.Devices.Interfaces = []kubevirtv1.Interface{{
		Name:                   defaultInterface,
		InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}},
	}}
	spec.Networks = []kubevirtv1.Network{{Name: defaultInterface, NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
}
