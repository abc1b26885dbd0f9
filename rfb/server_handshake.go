package rfb

import "encoding/binary"

// stepSecurity runs the steps of the version and security negotiation.
func (t *ServerTracker) stepSecurity() error {
	b := t.buf
	switch t.st {
	case sVersion:
		v, err := parseProtocolVersion(b)
		if err != nil {
			return err
		}
		t.s.setServerVersion(v)
		t.send(Event{Kind: EventServerVersion, Version: v})
		t.collect(0, sSecurityWait)
	case sSecurityWait:
		switch t.s.Version() {
		case VersionUnknown:
			return errBlocked
		case Version33:
			t.collect(4, sSecurity33)
		default:
			t.collect(1, sSecurityCount)
		}
	case sSecurity33:
		return t.security33(binary.BigEndian.Uint32(b))
	case sSecurityCount:
		if b[0] == 0 {
			t.refused()
			return nil
		}
		t.collect(int(b[0]), sSecurityList)
	case sSecurityList:
		types := make([]SecurityType, len(b))
		for i, c := range b {
			types[i] = SecurityType(c)
		}
		t.send(Event{Kind: EventSecurityTypes, SecurityTypes: types, OK: true})
		t.collect(0, sChoiceWait)
	case sChoiceWait:
		st, known := t.s.SecurityType()
		if !known {
			return errBlocked
		}
		return t.afterSecurity(st)
	}
	return nil
}

// security33 goes on from the security type a 3.3 server imposes, v.
func (t *ServerTracker) security33(v uint32) error {
	switch v {
	case uint32(SecurityInvalid):
		t.refused()
		return nil
	case uint32(SecurityNone), uint32(SecurityVNCAuth):
		st := SecurityType(v)
		t.s.setSecurity(st)
		t.send(Event{Kind: EventSecurityTypes, SecurityTypes: []SecurityType{st}, OK: true})
		return t.afterSecurity(st)
	}
	return protoErr("security", "a 3.3 server chose security type %d; only 0, 1 and 2 exist in 3.3", v)
}

// refused follows a server that refuses the connection: the reason comes
// next, in place of the security types.
func (t *ServerTracker) refused() {
	t.s.setSecurity(SecurityInvalid)
	t.reasonResult = false
	t.collect(4, sReasonLen)
}

// afterSecurity goes on from the security type in use.
func (t *ServerTracker) afterSecurity(st SecurityType) error {
	switch st {
	case SecurityVNCAuth:
		t.collect(vncAuthLen, sChallenge)
	case SecurityNone:
		if t.s.Version() == Version38 {
			t.collect(4, sResult)
		} else {
			t.collect(serverInitHead, sInitHead)
		}
	default:
		return protoErr("security", "%s is in use, which the tracker cannot follow", st)
	}
	return nil
}

// stepOutcome runs the steps of the security handshake's outcome: the VNC
// authentication challenge, the security result, and a failure's reason.
func (t *ServerTracker) stepOutcome() error {
	be := binary.BigEndian
	b := t.buf
	switch t.st {
	case sChallenge:
		t.send(Event{Kind: EventVNCAuthChallenge})
		t.collect(4, sResult)
	case sResult:
		if be.Uint32(b) == 0 {
			t.send(Event{Kind: EventSecurityResult, OK: true})
			t.collect(serverInitHead, sInitHead)
			return nil
		}
		if t.s.Version() == Version38 {
			t.reasonResult = true
			t.collect(4, sReasonLen)
			return nil
		}
		t.send(Event{Kind: EventSecurityResult})
		t.close()
	case sReasonLen:
		n := be.Uint32(b)
		if n > MaxReasonLength {
			return &LimitError{Message: "security failure", Field: "reason-length", Value: int64(n), Cap: "MaxReasonLength", Limit: MaxReasonLength}
		}
		t.collect(int(n), sReason)
	case sReason:
		kind := EventSecurityTypes
		if t.reasonResult {
			kind = EventSecurityResult
		}
		t.send(Event{Kind: kind, Reason: string(b)})
		t.close()
	case sClosed:
		return protoErr("handshake", "the server sent data after ending the handshake with a failure")
	}
	return nil
}

// close ends a handshake the server failed: it closes the connection next.
func (t *ServerTracker) close() {
	t.phase = PhaseClosed
	t.collect(1, sClosed)
}

// stepInit runs the steps of ServerInit, which ends the handshake.
func (t *ServerTracker) stepInit() error {
	be := binary.BigEndian
	b := t.buf
	switch t.st {
	case sInitHead:
		t.init = ServerInit{Width: be.Uint16(b), Height: be.Uint16(b[2:]), Format: parsePixelFormat(b[4:])}
		if !t.init.Format.valid() {
			return protoErr("ServerInit", "bits-per-pixel %d is not 8, 16 or 32", t.init.Format.BitsPerPixel)
		}
		n := be.Uint32(b[20:])
		if n > MaxDesktopNameLength {
			return &LimitError{Message: "ServerInit", Field: "name-length", Value: int64(n), Cap: "MaxDesktopNameLength", Limit: MaxDesktopNameLength}
		}
		t.collect(int(n), sInitName)
	case sInitName:
		t.init.Name = string(b)
		t.s.setServerInit(t.init.Width, t.init.Height, t.init.Format)
		t.pf = t.init.Format
		t.phase = PhaseNormal
		t.send(Event{Kind: EventServerInit, Init: t.init})
		t.nextMessage()
	}
	return nil
}
