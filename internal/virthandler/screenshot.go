package virthandler

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/virtstation/virtstation/internal/qemu"
)

// screenshotTimeout bounds one screendump. QEMU writes a PNG of its display
// in milliseconds; a loaded 2-core machine under TCG can take far longer.
const screenshotTimeout = 30 * time.Second

// screenshot serves GET .../virtualmachineinstances/{name}/vnc/screenshot as
// virt-api and virt-handler do: a VMI without a display is 400, otherwise
// the PNG of QEMU's primary display (libvirt's virDomainScreenshot, here
// QMP screendump) with Content-Type image/png. moveCursor is recorded;
// QEMU's text screen has no screensaver to wake.
func (s *Server) screenshot(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.inflight.Done()
	call := newCall(Screenshot, r)
	call.MoveCursor, _ = strconv.ParseBool(r.URL.Query().Get("moveCursor"))
	target, ok := s.target(call.Namespace, call.Name)
	if !ok {
		s.fail(w, call, apierrors.NewNotFound(vmiResource, call.Name))
		return
	}
	if target.VNC == "" {
		// virt-api's words (vmiHasDisplay).
		s.fail(w, call, apierrors.NewBadRequest("No graphics devices are present."))
		return
	}
	if target.QMP == "" {
		s.fail(w, call, apierrors.NewInternalError(fmt.Errorf("virtualmachineinstance %s/%s has no QEMU monitor to take a screenshot from", call.Namespace, call.Name)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), screenshotTimeout)
	defer cancel()
	png, err := qemu.Screendump(ctx, target.QMP)
	if err != nil {
		s.fail(w, call, apierrors.NewInternalError(fmt.Errorf("screenshot: %w", err)))
		return
	}
	call.Status = http.StatusOK
	s.calls.add(call)
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Content-Length", strconv.Itoa(len(png)))
	_, _ = w.Write(png)
}
