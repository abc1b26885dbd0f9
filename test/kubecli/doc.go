// Command kubecli-peer drives a KubeVirt subresource API (KubeVirt's own
// virt-api, or Virtstation's bridge in its place) with KubeVirt's client
// library, kubevirt.io/client-go v1.9.0 kubecli, making the calls virtctl
// v1.9.0 makes for the same commands. The tests in test/bridge run it as a
// real peer: every request on the wire is kubecli's own.
//
//	kubecli-peer [--kubeconfig F] [-n NS] COMMAND NAME [flags]
//
//	console NAME [--timeout D]
//	    SerialConsole(NAME, {ConnectionTimeout: D}), which retries every
//	    second while the server answers 400 (a VMI that is not running
//	    yet), as `virtctl console --timeout` waits. Once connected it writes
//	    "Successfully connected to NAME console." on stderr and copies stdin
//	    to the console and the console to stdout, until either ends.
//	vnc NAME [--preserve-session]
//	    VNC(NAME, preserveSession), false unless asked, as virtctl's
//	    default; then, like `virtctl vnc --proxy-only`, listens on
//	    127.0.0.1:0, prints {"port":N} on stdout and pipes the first TCP
//	    client to the display. When the client connects it reads the VMI
//	    (virtctl's paused-VM warning) and warns on stderr if it is paused.
//	screenshot NAME --file F [--move-cursor]
//	    Screenshot(NAME, {MoveCursor}), written to F ("-" is stdout), as
//	    `virtctl vnc screenshot`.
//	vmi NAME
//	    Get(NAME) of the VirtualMachineInstance; prints its phase.
//	version
//	    ServerVersion().Get(): GET /apis/subresources.kubevirt.io, then the
//	    preferred version's /version, as `virtctl version` and virtctl's
//	    client/server version check after every failed command; prints the
//	    version.Info JSON.
//
// The client comes from the kubeconfig (--kubeconfig, else $KUBECONFIG and
// ~/.kube/config) through clientcmd and kubecli.GetKubevirtClientFromClientConfig,
// as virtctl builds it; the namespace is -n, else the kubeconfig context's.
// The exit status is 0 on success, 1 on an error (written on stderr), 2 on
// a usage error.
//
// # Why a separate module
//
// kubecli does not compile in Virtstation's module: its generated mock
// (generated_mock_kubevirt.go, in package kubecli itself) imports
// k8s.io/client-go typed clients that client-go v0.37 no longer has, such as
// kubernetes/typed/autoscaling/v2beta1, and Virtstation pins the
// Kubernetes libraries at v0.37.2. kubevirt.io/client-go v1.9.0 is built
// against v0.34.3, which this module gets. Being a nested module, it is not
// part of `go test ./...` or `go vet ./...` of the main module; hack/kubecli-peer.sh
// builds it and the Makefile vets it on its own.
//
// # Why not virtctl itself
//
// virtctl lives in kubevirt.io/kubevirt, whose v1.9.0 does not build from
// the module proxy here: it requires kubevirt.io/virt-template-api v0.2.0,
// which the proxy refuses, and its replace directives point at staging/
// directories that the module zip does not contain. So this command
// reproduces virtctl's console, vnc, vnc screenshot and version commands
// (kubevirt.io/kubevirt v1.9.0 pkg/virtctl/...) around the same kubecli
// calls, without the terminal handling and viewer launching that tests do
// not need.
package main
