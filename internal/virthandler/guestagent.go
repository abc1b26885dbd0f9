package virthandler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/yaml"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxOptionsBody bounds a start or stop request body; their options are a
// few dozen bytes.
const maxOptionsBody = 64 << 10

// guestAgent is what a VMI's guest agent says, as a test set it.
type guestAgent struct {
	users []kubevirtv1.VirtualMachineInstanceGuestOSUser
	info  *kubevirtv1.VirtualMachineInstanceGuestAgentInfo
}

// SetUsers makes VMI namespace/name's guest agent connected, reporting
// users as logged in (userlist, and guestosinfo's userList). Nil users
// with no guest OS info set disconnects the agent again.
func (s *Server) SetUsers(namespace, name string, users []kubevirtv1.VirtualMachineInstanceGuestOSUser) {
	s.setAgent(namespace, name, func(a *guestAgent) {
		a.users = slices.Clone(users)
	})
}

// SetGuestOSInfo makes VMI namespace/name's guest agent connected,
// reporting info (guestosinfo; its UserList is replaced by SetUsers' users
// when those are set). Nil info with no users disconnects the agent.
func (s *Server) SetGuestOSInfo(namespace, name string, info *kubevirtv1.VirtualMachineInstanceGuestAgentInfo) {
	s.setAgent(namespace, name, func(a *guestAgent) {
		if info != nil {
			info = info.DeepCopy()
		}
		a.info = info
	})
}

func (s *Server) setAgent(namespace, name string, set func(*guestAgent)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := [2]string{namespace, name}
	a := s.agents[key]
	set(&a)
	if a.users == nil && a.info == nil {
		delete(s.agents, key)
		return
	}
	s.agents[key] = a
}

// agent is the guest agent of a VMI; false when none is connected.
func (s *Server) agent(namespace, name string) (guestAgent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[[2]string{namespace, name}]
	return a, ok
}

// userList serves GET .../virtualmachineinstances/{name}/userlist.
func (s *Server) userList(w http.ResponseWriter, r *http.Request) {
	s.serveAgent(w, r, UserList, func(a guestAgent) any {
		return &kubevirtv1.VirtualMachineInstanceGuestOSUserList{Items: nonNil(a.users)}
	})
}

// guestOSInfo serves GET .../virtualmachineinstances/{name}/guestosinfo.
func (s *Server) guestOSInfo(w http.ResponseWriter, r *http.Request) {
	s.serveAgent(w, r, GuestOSInfo, func(a guestAgent) any {
		info := &kubevirtv1.VirtualMachineInstanceGuestAgentInfo{}
		if a.info != nil {
			info = a.info.DeepCopy()
		}
		if a.users != nil {
			info.UserList = a.users
		}
		return info
	})
}

// serveAgent answers a guest agent call as virt-api does: with a Client,
// the stored VMI must exist (404), be Running (409) and have the
// AgentConnected condition (409); and the agent must have been given
// something to say (SetUsers, SetGuestOSInfo), or it is not connected
// (409).
func (s *Server) serveAgent(w http.ResponseWriter, r *http.Request, kind Kind, answer func(guestAgent) any) {
	call := newCall(kind, r)
	if s.opts.Client != nil {
		if serr := s.checkAgentVMI(r.Context(), call.Namespace, call.Name); serr != nil {
			s.fail(w, call, serr)
			return
		}
	}
	a, ok := s.agent(call.Namespace, call.Name)
	if !ok {
		s.fail(w, call, apierrors.NewConflict(vmiResource, call.Name, errors.New(vmiGuestAgentErr)))
		return
	}
	body, err := json.Marshal(answer(a))
	if err != nil {
		s.fail(w, call, apierrors.NewInternalError(err))
		return
	}
	call.Status = http.StatusOK
	s.calls.add(call)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// checkAgentVMI is virt-api's validation of a guest agent call.
func (s *Server) checkAgentVMI(ctx context.Context, namespace, name string) *apierrors.StatusError {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.opts.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, vmi); apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(vmiResource, name)
	} else if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("unable to retrieve vmi [%s]: %w", name, err))
	}
	if vmi.Status.Phase != kubevirtv1.Running {
		return apierrors.NewConflict(vmiResource, name, errors.New(vmiNotRunning))
	}
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceAgentConnected {
			return nil
		}
	}
	return apierrors.NewConflict(vmiResource, name, errors.New(vmiGuestAgentErr))
}

// nonNil makes an empty list marshal as [], as virt-handler's does.
func nonNil(users []kubevirtv1.VirtualMachineInstanceGuestOSUser) []kubevirtv1.VirtualMachineInstanceGuestOSUser {
	if users == nil {
		return []kubevirtv1.VirtualMachineInstanceGuestOSUser{}
	}
	return users
}

// decodeBody reads a start or stop body (JSON or YAML, possibly empty) as
// virt-api's decodeBody does.
func decodeBody(r *http.Request, into any) *apierrors.StatusError {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxOptionsBody+1))
	if err != nil {
		return apierrors.NewBadRequest("read request body: " + err.Error())
	}
	if len(body) > maxOptionsBody {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("options larger than %d bytes", maxOptionsBody))
	}
	err = yaml.NewYAMLOrJSONDecoder(bytes.NewReader(body), 1024).Decode(into)
	if err != nil && !errors.Is(err, io.EOF) {
		return apierrors.NewBadRequest(fmt.Sprintf("Can not unmarshal Request body to struct, error: %s", err))
	}
	return nil
}
