package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VMPath and VMIPath are where serve answers VirtualMachine and
// VirtualMachineInstance admission. StartPath answers a POSTed stored
// VirtualMachine with the VirtualMachineInstance KubeVirt would store when
// it starts (the tests' stand-in for virt-controller's start).
const (
	VMPath    = "/validate-kubevirt-vm"
	VMIPath   = "/validate-kubevirt-vmi"
	StartPath = "/start-vm"
)

// serve is a validating webhook for VirtualMachines: KubeVirt's VM
// admission, plus the start-time VMI admission, so a VM that could never
// start is refused at apply in tests (a cluster refuses it only at start).
// It prints "listening on ADDR" once it serves.
func serve(ctx context.Context, p *pipeline, addr, certDir string, out io.Writer) error {
	if certDir == "" {
		return errors.New("serve needs --cert-dir with tls.crt and tls.key")
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return err
	}
	ln, err := tls.Listen("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc(VMPath, func(w http.ResponseWriter, r *http.Request) {
		handle(w, r, "KubeVirt v1.9.0 would refuse this VirtualMachine's VirtualMachineInstance when it starts", func(req *admissionv1.AdmissionRequest) (Verdict, error) {
			return p.checkVM(r.Context(), req.Object.Raw, req.Operation)
		})
	})
	// VMIs are judged at CREATE, as virt-api's create admitter does; its
	// update admitter guards spec changes by KubeVirt's own service
	// accounts, which tests do not run as.
	mux.HandleFunc(VMIPath, func(w http.ResponseWriter, r *http.Request) {
		handle(w, r, "KubeVirt v1.9.0 refuses the VirtualMachineInstance", func(req *admissionv1.AdmissionRequest) (Verdict, error) {
			if req.Operation != admissionv1.Create {
				return Verdict{Allowed: true}, nil
			}
			return p.checkVMI(r.Context(), req.Object.Raw)
		})
	})
	mux.HandleFunc(StartPath, func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil || r.Method != http.MethodPost {
			http.Error(w, "POST a VirtualMachine", http.StatusBadRequest)
			return
		}
		vmi, err := p.startVM(raw)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(vmi)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(out, "listening on %s\n", ln.Addr().(*net.TCPAddr).String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// handle answers one AdmissionReview with judge's verdict on its object.
// A refusal at the VMI stage is worded with vmiPrefix.
func handle(w http.ResponseWriter, r *http.Request, vmiPrefix string, judge func(*admissionv1.AdmissionRequest) (Verdict, error)) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "expected an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if (req.Operation == admissionv1.Create || req.Operation == admissionv1.Update) && len(req.Object.Raw) > 0 {
		v, err := judge(req)
		switch {
		case err != nil:
			resp.Allowed = false
			resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest, Message: err.Error()}
		case !v.Allowed:
			resp.Allowed = false
			resp.Result = denial(v, vmiPrefix)
		}
		resp.Warnings = v.Warnings
	}
	review.Response = resp
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// denial is KubeVirt's refusal as the API server shows it, with the stage
// named so a test failure says whether apply or start would fail.
func denial(v Verdict, vmiPrefix string) *metav1.Status {
	var msgs []string
	var causes []metav1.StatusCause
	for _, c := range v.Causes {
		msgs = append(msgs, c.Message)
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: c.Field, Message: c.Message})
	}
	prefix := "KubeVirt v1.9.0 refuses the VirtualMachine"
	if v.Stage == StageVMI {
		prefix = vmiPrefix
	}
	return &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnprocessableEntity,
		Reason:  metav1.StatusReasonInvalid,
		Message: prefix + ": " + strings.Join(msgs, "; "),
		Details: &metav1.StatusDetails{Causes: causes},
	}
}
