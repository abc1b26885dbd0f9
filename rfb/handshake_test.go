package rfb

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// turn is one side's bytes in a handshake conversation.
type turn struct {
	client bool
	b      []byte
}

func srv(parts ...[]byte) turn { return turn{b: cat(parts...)} }
func cli(parts ...[]byte) turn { return turn{client: true, b: cat(parts...)} }

// outcome is what both parsers made of a conversation.
type outcome struct {
	msgs        []Message
	events      []Event
	clientErr   error
	serverErr   error
	clientPhase Phase
	serverPhase Phase
	version     Version
	security    SecurityType
}

// converse plays the turns in order, feeding each side's bytes to its
// parser cut at the given offsets of that side's whole stream.
func converse(turns []turn, clientCuts, serverCuts map[int]bool) outcome {
	s := NewSession()
	p, tr := NewClientParser(s), NewServerTracker(s)
	var o outcome
	emitMsg := func(m Message) error {
		o.msgs = append(o.msgs, Message{Raw: bytes.Clone(m.Raw), Body: cloneBody(m.Body)})
		return nil
	}
	emitEv := func(e Event) { o.events = append(o.events, e) }
	offset := map[bool]int{}
	for _, tu := range turns {
		cuts := serverCuts
		if tu.client {
			cuts = clientCuts
		}
		start := 0
		for i := 1; i <= len(tu.b); i++ {
			if i < len(tu.b) && !cuts[offset[tu.client]+i] {
				continue
			}
			chunk := tu.b[start:i]
			start = i
			if tu.client && o.clientErr == nil {
				o.clientErr = p.Feed(chunk, emitMsg)
			} else if !tu.client && o.serverErr == nil {
				o.serverErr = tr.Feed(chunk, emitEv)
			}
		}
		offset[tu.client] += len(tu.b)
	}
	o.clientPhase, o.serverPhase = p.Phase(), tr.Phase()
	o.version = s.Version()
	o.security, _ = s.SecurityType()
	return o
}

var (
	v33       = []byte("RFB 003.003\n")
	v35       = []byte("RFB 003.005\n")
	v37       = []byte("RFB 003.007\n")
	v38       = []byte("RFB 003.008\n")
	challenge = []byte("0123456789abcdef")
	response  = []byte("fedcba9876543210")
	qemuInit  = serverInitBytes(720, 400, pf32, "QEMU")
	okResult  = be32(0)
	failed    = be32(1)
	authFail  = "Authentication failed\x00"
)

var (
	longName = strings.Repeat("a long desktop name ", 15)
	longInit = serverInitBytes(1, 1, pf16, longName)
)

var wantInit = Event{Kind: EventServerInit, Init: ServerInit{Width: 720, Height: 400, Format: pf32, Name: "QEMU"}}

func TestHandshakes(t *testing.T) {
	var resp [16]byte
	copy(resp[:], response)
	cases := map[string]struct {
		turns       []turn
		wantMsgs    []Body
		wantEvents  []Event
		wantVersion Version
		wantSec     SecurityType
		wantPhase   Phase // the tracker's; the client's is normal iff it sent ClientInit
	}{
		"3.8 None": {
			turns:       []turn{srv(v38), cli(v38), srv([]byte{1, 1}), cli([]byte{1}), srv(okResult), cli([]byte{1}), srv(qemuInit)},
			wantMsgs:    []Body{ProtocolVersion{3, 8}, SecurityChoice{SecurityNone}, ClientInit{Shared: true}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityNone}, OK: true}, {Kind: EventSecurityResult, OK: true}, wantInit},
			wantVersion: Version38, wantSec: SecurityNone, wantPhase: PhaseNormal,
		},
		"3.8 None, ClientInit sent before SecurityResult": {
			turns:       []turn{srv(v38), cli(v38), srv([]byte{2, 2, 1}), cli([]byte{1, 0}), srv(okResult, qemuInit)},
			wantMsgs:    []Body{ProtocolVersion{3, 8}, SecurityChoice{SecurityNone}, ClientInit{}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityVNCAuth, SecurityNone}, OK: true}, {Kind: EventSecurityResult, OK: true}, wantInit},
			wantVersion: Version38, wantSec: SecurityNone, wantPhase: PhaseNormal,
		},
		"3.8 with many types and a long name": {
			turns:       []turn{srv(v38), cli(v38), srv([]byte{30}, filled(29, 200), []byte{1}), cli([]byte{1}), srv(okResult), cli([]byte{1}), srv(longInit)},
			wantMsgs:    []Body{ProtocolVersion{3, 8}, SecurityChoice{SecurityNone}, ClientInit{Shared: true}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, SecurityTypes: append(slices.Repeat([]SecurityType{200}, 29), SecurityNone), OK: true}, {Kind: EventSecurityResult, OK: true}, {Kind: EventServerInit, Init: ServerInit{Width: 1, Height: 1, Format: pf16, Name: longName}}},
			wantVersion: Version38, wantSec: SecurityNone, wantPhase: PhaseNormal,
		},
		"3.8 refusal with a long reason": {
			turns:       []turn{srv(v38), cli(v38), srv([]byte{0}, be32(uint32(len(longName))), []byte(longName))},
			wantMsgs:    []Body{ProtocolVersion{3, 8}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, Reason: longName}},
			wantVersion: Version38, wantPhase: PhaseClosed,
		},
		"3.8 VNC authentication": {
			turns:       []turn{srv(v38), cli(v38), srv([]byte{1, 2}), cli([]byte{2}), srv(challenge), cli(response), srv(okResult), cli([]byte{1}), srv(qemuInit)},
			wantMsgs:    []Body{ProtocolVersion{3, 8}, SecurityChoice{SecurityVNCAuth}, VNCAuthResponse{resp}, ClientInit{Shared: true}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityVNCAuth}, OK: true}, {Kind: EventVNCAuthChallenge}, {Kind: EventSecurityResult, OK: true}, wantInit},
			wantVersion: Version38, wantSec: SecurityVNCAuth, wantPhase: PhaseNormal,
		},
		"3.8 VNC authentication fails with a reason": {
			turns:       []turn{srv(v38), cli(v38), srv([]byte{1, 2}), cli([]byte{2}), srv(challenge), cli(response), srv(failed, be32(uint32(len(authFail))), []byte(authFail))},
			wantMsgs:    []Body{ProtocolVersion{3, 8}, SecurityChoice{SecurityVNCAuth}, VNCAuthResponse{resp}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityVNCAuth}, OK: true}, {Kind: EventVNCAuthChallenge}, {Kind: EventSecurityResult, Reason: authFail}},
			wantVersion: Version38, wantSec: SecurityVNCAuth, wantPhase: PhaseClosed,
		},
		"3.8 None fails with an empty reason": {
			turns:       []turn{srv(v38), cli(v38), srv([]byte{1, 1}), cli([]byte{1}), srv(failed, be32(0))},
			wantMsgs:    []Body{ProtocolVersion{3, 8}, SecurityChoice{SecurityNone}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityNone}, OK: true}, {Kind: EventSecurityResult}},
			wantVersion: Version38, wantSec: SecurityNone, wantPhase: PhaseClosed,
		},
		"3.8 server refuses the connection": {
			turns:       []turn{srv(v38), cli(v38), srv([]byte{0}, be32(8), []byte("too many"))},
			wantMsgs:    []Body{ProtocolVersion{3, 8}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, Reason: "too many"}},
			wantVersion: Version38, wantPhase: PhaseClosed,
		},
		"3.7 None": {
			turns:       []turn{srv(v38), cli(v37), srv([]byte{1, 1}), cli([]byte{1}), cli([]byte{1}), srv(qemuInit)},
			wantMsgs:    []Body{ProtocolVersion{3, 7}, SecurityChoice{SecurityNone}, ClientInit{Shared: true}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityNone}, OK: true}, wantInit},
			wantVersion: Version37, wantSec: SecurityNone, wantPhase: PhaseNormal,
		},
		"3.7 VNC authentication": {
			turns:       []turn{srv(v37), cli(v37), srv([]byte{1, 2}), cli([]byte{2}), srv(challenge), cli(response), srv(okResult), cli([]byte{0}), srv(qemuInit)},
			wantMsgs:    []Body{ProtocolVersion{3, 7}, SecurityChoice{SecurityVNCAuth}, VNCAuthResponse{resp}, ClientInit{}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 7}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityVNCAuth}, OK: true}, {Kind: EventVNCAuthChallenge}, {Kind: EventSecurityResult, OK: true}, wantInit},
			wantVersion: Version37, wantSec: SecurityVNCAuth, wantPhase: PhaseNormal,
		},
		"3.7 VNC authentication fails without a reason": {
			turns:       []turn{srv(v38), cli(v37), srv([]byte{1, 2}), cli([]byte{2}), srv(challenge), cli(response), srv(failed)},
			wantMsgs:    []Body{ProtocolVersion{3, 7}, SecurityChoice{SecurityVNCAuth}, VNCAuthResponse{resp}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityVNCAuth}, OK: true}, {Kind: EventVNCAuthChallenge}, {Kind: EventSecurityResult}},
			wantVersion: Version37, wantSec: SecurityVNCAuth, wantPhase: PhaseClosed,
		},
		"3.3 None": {
			turns:       []turn{srv(v38), cli(v33), srv(be32(1)), cli([]byte{1}), srv(qemuInit)},
			wantMsgs:    []Body{ProtocolVersion{3, 3}, ClientInit{Shared: true}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityNone}, OK: true}, wantInit},
			wantVersion: Version33, wantSec: SecurityNone, wantPhase: PhaseNormal,
		},
		"3.5 is read as 3.3": {
			turns:       []turn{srv(v38), cli(v35), srv(be32(1)), cli([]byte{1}), srv(qemuInit)},
			wantMsgs:    []Body{ProtocolVersion{3, 5}, ClientInit{Shared: true}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 8}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityNone}, OK: true}, wantInit},
			wantVersion: Version33, wantSec: SecurityNone, wantPhase: PhaseNormal,
		},
		"3.3 VNC authentication": {
			turns:       []turn{srv(v33), cli(v33), srv(be32(2), challenge), cli(response), srv(okResult), cli([]byte{1}), srv(qemuInit)},
			wantMsgs:    []Body{ProtocolVersion{3, 3}, VNCAuthResponse{resp}, ClientInit{Shared: true}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 3}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityVNCAuth}, OK: true}, {Kind: EventVNCAuthChallenge}, {Kind: EventSecurityResult, OK: true}, wantInit},
			wantVersion: Version33, wantSec: SecurityVNCAuth, wantPhase: PhaseNormal,
		},
		"3.3 VNC authentication fails without a reason": {
			turns:       []turn{srv(v33), cli(v33), srv(be32(2), challenge), cli(response), srv(failed)},
			wantMsgs:    []Body{ProtocolVersion{3, 3}, VNCAuthResponse{resp}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 3}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityVNCAuth}, OK: true}, {Kind: EventVNCAuthChallenge}, {Kind: EventSecurityResult}},
			wantVersion: Version33, wantSec: SecurityVNCAuth, wantPhase: PhaseClosed,
		},
		"3.3 server refuses the connection": {
			turns:       []turn{srv(v33), cli(v33), srv(be32(0), be32(6), []byte("reason"))},
			wantMsgs:    []Body{ProtocolVersion{3, 3}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 3}}, {Kind: EventSecurityTypes, Reason: "reason"}},
			wantVersion: Version33, wantPhase: PhaseClosed,
		},
		"a 3.8 client of a 3.3 server follows 3.3": {
			turns:       []turn{srv(v33), cli(v38), srv(be32(1)), cli([]byte{1}), srv(qemuInit)},
			wantMsgs:    []Body{ProtocolVersion{3, 8}, ClientInit{Shared: true}},
			wantEvents:  []Event{{Kind: EventServerVersion, Version: ProtocolVersion{3, 3}}, {Kind: EventSecurityTypes, SecurityTypes: []SecurityType{SecurityNone}, OK: true}, wantInit},
			wantVersion: Version33, wantSec: SecurityNone, wantPhase: PhaseNormal,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			whole := converse(tc.turns, nil, nil)
			if len(whole.msgs) != len(tc.wantMsgs) {
				t.Fatalf("client messages %+v, want bodies %+v (client error %v)", whole.msgs, tc.wantMsgs, whole.clientErr)
			}
			var clientBytes []byte
			for _, tu := range tc.turns {
				if tu.client {
					clientBytes = append(clientBytes, tu.b...)
				}
			}
			var raws []byte
			for i, m := range whole.msgs {
				if !reflect.DeepEqual(m.Body, tc.wantMsgs[i]) {
					t.Errorf("client message %d: %+v, want %+v", i, m.Body, tc.wantMsgs[i])
				}
				if again, err := m.Body.AppendBinary(nil); err != nil || !bytes.Equal(again, m.Raw) {
					t.Errorf("client message %d encodes to %q, %v; want %q", i, again, err, m.Raw)
				}
				raws = append(raws, m.Raw...)
			}
			if !bytes.Equal(raws, clientBytes) {
				t.Errorf("the messages' raw bytes %q do not add up to the client's %q", raws, clientBytes)
			}
			if whole.clientErr != nil || whole.serverErr != nil {
				t.Fatalf("errors: client %v, server %v", whole.clientErr, whole.serverErr)
			}
			if !reflect.DeepEqual(whole.events, tc.wantEvents) {
				t.Errorf("server events\n%+v\nwant\n%+v", whole.events, tc.wantEvents)
			}
			if whole.version != tc.wantVersion || whole.security != tc.wantSec || whole.serverPhase != tc.wantPhase {
				t.Errorf("version %v, security %v, server phase %v; want %v, %v, %v", whole.version, whole.security, whole.serverPhase, tc.wantVersion, tc.wantSec, tc.wantPhase)
			}
			sentInit := false
			for _, b := range tc.wantMsgs {
				if _, ok := b.(ClientInit); ok {
					sentInit = true
				}
			}
			if wantPhase := map[bool]Phase{true: PhaseNormal, false: PhaseHandshake}[sentInit]; whole.clientPhase != wantPhase {
				t.Errorf("client phase %v, want %v", whole.clientPhase, wantPhase)
			}

			// Every cut of either side, and byte by byte, gives the same.
			total := map[bool]int{}
			for _, tu := range tc.turns {
				total[tu.client] += len(tu.b)
			}
			for _, client := range []bool{false, true} {
				all := map[int]bool{}
				for k := 1; k < total[client]; k++ {
					all[k] = true
					cuts := map[int]bool{k: true}
					var got outcome
					if client {
						got = converse(tc.turns, cuts, nil)
					} else {
						got = converse(tc.turns, nil, cuts)
					}
					if !reflect.DeepEqual(got, whole) {
						t.Fatalf("client side %t cut at %d:\n%+v\nwant\n%+v", client, k, got, whole)
					}
				}
				if got := converse(tc.turns, all, all); !reflect.DeepEqual(got, whole) {
					t.Fatalf("byte by byte:\n%+v\nwant\n%+v", got, whole)
				}
			}
		})
	}
}

func TestHandshakeErrors(t *testing.T) {
	cases := map[string]struct {
		turns         []turn
		wantClientErr error
		wantServerErr error
	}{
		"client version is not a version line": {
			turns:         []turn{srv(v38), cli([]byte("GET / HTTP/1.1\r\n"))},
			wantClientErr: &ProtocolError{Message: "ProtocolVersion", Detail: `"GET / HTTP/1" is not a version line "RFB xxx.yyy\n"`},
		},
		"client version 4.0": {
			turns:         []turn{srv(v38), cli([]byte("RFB 004.000\n"))},
			wantClientErr: &ProtocolError{Message: "ProtocolVersion", Detail: "version 4.0 is not 3.3, 3.7 or 3.8"},
		},
		"server version 3.889": {
			turns:         []turn{srv([]byte("RFB 003.889\n"))},
			wantServerErr: &ProtocolError{Message: "ProtocolVersion", Detail: "version 3.889 is not 3.3, 3.7 or 3.8"},
		},
		"client chooses VeNCrypt": {
			turns:         []turn{srv(v38), cli(v38), srv([]byte{2, 19, 1}), cli([]byte{19})},
			wantClientErr: &ProtocolError{Message: "SecurityChoice", Detail: "the client chose security type 19; the parser can follow only None (1) and VNC authentication (2)"},
		},
		"3.3 client speaks before the server chose": {
			turns:         []turn{srv(v33), cli(v33, []byte{1})},
			wantClientErr: &ProtocolError{Message: "security", Detail: "the client sent data before the server chose a security type (RFB 3.3)"},
		},
		"3.3 client speaks after a refusal": {
			turns:         []turn{srv(v33), cli(v33), srv(be32(0), be32(0)), cli([]byte{1})},
			wantClientErr: &ProtocolError{Message: "security", Detail: "the client sent data after the server refused the connection"},
		},
		"3.8 client speaks after a refusal": {
			turns:         []turn{srv(v38), cli(v38), srv([]byte{0}, be32(0)), cli([]byte{1})},
			wantClientErr: &ProtocolError{Message: "security", Detail: "the client sent data after the server refused the connection"},
		},
		"3.3 server picks type 16": {
			turns:         []turn{srv(v33), cli(v33), srv(be32(16))},
			wantServerErr: &ProtocolError{Message: "security", Detail: "a 3.3 server chose security type 16; only 0, 1 and 2 exist in 3.3"},
		},
		"server security before the client's version": {
			turns:         []turn{srv(v38, []byte{1, 1})},
			wantServerErr: &ProtocolError{Message: "security", Detail: "the server sent security data before the client's version line"},
		},
		"server result before the client's choice": {
			turns:         []turn{srv(v38), cli(v38), srv([]byte{1, 1}, okResult)},
			wantServerErr: &ProtocolError{Message: "security", Detail: "the server sent data before the client chose a security type"},
		},
		"reason over the cap": {
			turns:         []turn{srv(v38), cli(v38), srv([]byte{0}, be32(MaxReasonLength+1))},
			wantServerErr: &LimitError{Message: "security failure", Field: "reason-length", Value: MaxReasonLength + 1, Cap: "MaxReasonLength", Limit: MaxReasonLength},
		},
		"desktop name over the cap": {
			turns:         []turn{srv(v38), cli(v38), srv([]byte{1, 1}), cli([]byte{1}), srv(okResult), cli([]byte{1}), srv(serverInitBytes(1, 1, pf32, "")[:20], be32(0xFFFFFFFF))},
			wantServerErr: &LimitError{Message: "ServerInit", Field: "name-length", Value: 0xFFFFFFFF, Cap: "MaxDesktopNameLength", Limit: MaxDesktopNameLength},
		},
		"ServerInit with 24 bits per pixel": {
			turns:         []turn{srv(v38), cli(v38), srv([]byte{1, 1}), cli([]byte{1}), srv(okResult), cli([]byte{1}), srv(serverInitBytes(1, 1, PixelFormat{BitsPerPixel: 24}, ""))},
			wantServerErr: &ProtocolError{Message: "ServerInit", Detail: "bits-per-pixel 24 is not 8, 16 or 32"},
		},
		"server talks after a refusal": {
			turns:         []turn{srv(v38), cli(v38), srv([]byte{0}, be32(0), []byte{0})},
			wantServerErr: &ProtocolError{Message: "handshake", Detail: "the server sent data after ending the handshake with a failure"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := converse(tc.turns, nil, nil)
			if !reflect.DeepEqual(got.clientErr, tc.wantClientErr) || !reflect.DeepEqual(got.serverErr, tc.wantServerErr) {
				t.Fatalf("errors: client %v, server %v; want %v, %v", got.clientErr, got.serverErr, tc.wantClientErr, tc.wantServerErr)
			}
			if tc.wantServerErr != nil && got.serverPhase != PhaseFailed || tc.wantClientErr != nil && got.clientPhase != PhaseFailed {
				t.Errorf("phases: client %v, server %v", got.clientPhase, got.serverPhase)
			}
		})
	}
}

// TestServerTrackerWaitsForTheClient: a tracker fed only the server's
// version waits (no error) for the client's version, then goes on.
func TestServerTrackerWaitsForTheClient(t *testing.T) {
	s := NewSession()
	tr, p := NewServerTracker(s), NewClientParser(s)
	if _, err := trackServer(tr, [][]byte{v38}); err != nil {
		t.Fatal(err)
	}
	if err := p.Feed(v38, nil); err != nil {
		t.Fatal(err)
	}
	evs, err := trackServer(tr, [][]byte{{1, 1}})
	if err != nil || len(evs) != 1 || evs[0].Kind != EventSecurityTypes {
		t.Fatalf("events %+v, error %v", evs, err)
	}
}
