package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/internal/bridgestack"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// demoMachine plays virt-controller and virt-handler for dev-alice, the
// demo having no KubeVirt: a start that KubeVirt's start subresource
// accepted (the bridge's start on connect, virtctl start) boots its guest,
// and a stop (the lifecycle's idle stop, virtctl stop) powers the guest off
// and deletes its VMI and launcher pod, as KubeVirt does for a Halted VM.
// The stand-in virt-api calls onStart and onStop (virthandler.Options).
type demoMachine struct {
	env *testenv.Env
	// stack is set once the bridge stack is up, before any start.
	stack *bridgestack.Stack
	// boot starts the guest and writes its running VMI.
	boot func(ctx context.Context) (demoGuest, error)
	log  io.Writer

	// op serialises boots and stops; each is seconds (QEMU starts and
	// the VMI is written; the guest boots on).
	op sync.Mutex
	mu sync.Mutex
	// cur is the running guest, nil while stopped; err is the last boot's.
	cur demoGuest
	err error
}

// demoGuest is a guest the machine booted.
type demoGuest interface {
	// stop powers it off; ctx may be done already (Ctrl-C).
	stop(ctx context.Context) error
}

// echoRunning is the echo guest: the stack's own QEMU, which keeps running
// while dev-alice is stopped (its console is simply not served then).
type echoRunning struct{}

func (echoRunning) stop(context.Context) error { return nil }

// virtAPI is the stand-in virt-api's options that make m dev-alice's
// KubeVirt.
func (m *demoMachine) virtAPI() virthandler.Options {
	return virthandler.Options{Client: m.env.Client, OnStart: m.onStart, OnStop: m.onStop}
}

// onStart boots dev-alice's guest after KubeVirt's start was accepted.
func (m *demoMachine) onStart(ctx context.Context, vm *kubevirtv1.VirtualMachine) {
	if vm.Namespace != demoNamespace || vm.Name != demoVM {
		return
	}
	m.op.Lock()
	defer m.op.Unlock()
	if m.current() != nil {
		return
	}
	g, err := m.boot(ctx)
	if err != nil {
		g = nil
	}
	m.mu.Lock()
	m.cur, m.err = g, err
	m.mu.Unlock()
	if err != nil {
		fmt.Fprintf(m.log, "demo: start %s: %v\n", demoVM, err)
	}
}

// onStop powers dev-alice's guest off and deletes its instance after
// KubeVirt's stop was accepted.
func (m *demoMachine) onStop(ctx context.Context, vm *kubevirtv1.VirtualMachine) {
	if vm.Namespace != demoNamespace || vm.Name != demoVM {
		return
	}
	m.op.Lock()
	defer m.op.Unlock()
	if err := m.halt(ctx); err != nil {
		fmt.Fprintf(m.log, "demo: stop %s: %v\n", demoVM, err)
	}
}

// halt ends the running guest's sessions, powers it off, and deletes its
// VMI and launcher pod.
func (m *demoMachine) halt(ctx context.Context) error {
	g := m.take()
	if g == nil {
		return nil
	}
	m.stack.VirtAPI.Unregister(demoNamespace, demoVM)
	stopErr := g.stop(ctx)
	vmi := &kubevirtv1.VirtualMachineInstance{}
	err := m.env.Client.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: demoVM}, vmi)
	if apierrors.IsNotFound(err) {
		return stopErr
	}
	if err != nil {
		return errors.Join(stopErr, err)
	}
	// No garbage collector runs in the demo: the pod goes by hand.
	delPods := m.env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(demoNamespace),
		client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)})
	delVMI := m.env.Client.Delete(ctx, vmi, client.Preconditions{UID: &vmi.UID})
	if apierrors.IsNotFound(delVMI) {
		delVMI = nil
	}
	return errors.Join(stopErr, delPods, delVMI)
}

// current is the running guest, or nil.
func (m *demoMachine) current() demoGuest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// waitRunning waits for a boot to have finished: the guest, or the error
// the boot failed with.
func (m *demoMachine) waitRunning(ctx context.Context) (demoGuest, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		m.mu.Lock()
		g, err := m.cur, m.err
		m.mu.Unlock()
		if g != nil || err != nil {
			return g, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s did not start: %w", demoVM, ctx.Err())
		case <-tick.C:
		}
	}
}

// close stops the running guest, if any, at the demo's end; the control
// plane stops next, so the VMI is left.
func (m *demoMachine) close(ctx context.Context) error {
	m.op.Lock()
	defer m.op.Unlock()
	if g := m.take(); g != nil {
		return g.stop(ctx)
	}
	return nil
}

// take is the running guest, or nil, which m no longer holds.
func (m *demoMachine) take() demoGuest {
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.cur
	m.cur = nil
	return g
}
