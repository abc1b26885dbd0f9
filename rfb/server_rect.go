package rfb

import "encoding/binary"

// tightRawMax: Tight sends filtered data shorter than this uncompressed,
// without a length.
const tightRawMax = 12

// hextileTile is the Hextile tile size.
const hextileTile = 16

// stepUpdate runs the steps of a FramebufferUpdate and its rectangles,
// but for the Hextile and Tight encodings' own.
func (t *ServerTracker) stepUpdate() error {
	be := binary.BigEndian
	b := t.buf
	r := &t.rect
	switch t.st {
	case sUpdateHead:
		t.rectsLeft, t.rectsSeen, t.lastRect = int(be.Uint16(b[1:])), 0, false
		t.pf = t.s.updateFormat()
		t.send(Event{Kind: EventUpdateStart, Type: MsgFramebufferUpdate, Rects: t.rectsLeft})
		t.nextRect()
	case sRectHead:
		*r = Rect{X: be.Uint16(b), Y: be.Uint16(b[2:]), Width: be.Uint16(b[4:]), Height: be.Uint16(b[6:]), Encoding: int32(be.Uint32(b[8:]))}
		return t.rectBody()
	case sRectEnd:
		r.Bytes = t.msgBytes - t.rectStart
		t.send(Event{Kind: EventRect, Type: MsgFramebufferUpdate, Rect: *r})
		t.rectsSeen++
		t.rectsLeft--
		t.nextRect()
	case sLengthThenSkip:
		t.skipThen(int64(be.Uint32(b)), sRectEnd)
	case sCountThenSkip:
		t.countThenSkip(b)
	case sAlphaCursor:
		if enc := int32(be.Uint32(b)); enc != EncodingRaw {
			return protoErr("FramebufferUpdate", "a cursor-with-alpha rectangle in encoding %d; the tracker frames only Raw cursors", enc)
		}
		t.skipThen(int64(r.Width)*int64(r.Height)*4, sRectEnd)
	case sWMVi:
		pf := parsePixelFormat(b)
		if !pf.valid() {
			return protoErr("FramebufferUpdate", "a WMVi rectangle with bits-per-pixel %d", pf.BitsPerPixel)
		}
		t.pf = pf
		t.s.setFormat(pf)
		t.collect(0, sRectEnd)
	}
	return nil
}

// countThenSkip passes over the counted items that follow head: RRE and
// CoRRE's U32 count and background pixel, or ExtendedDesktopSize's U8
// count and 3 bytes of padding.
func (t *ServerTracker) countThenSkip(head []byte) {
	r := &t.rect
	if r.Encoding == EncodingExtendedDesktopSize {
		if r.Y == 0 { // status 0: the size changed (or was confirmed)
			t.s.setFramebufferSize(r.Width, r.Height)
		}
		t.skipThen(int64(head[0])*t.unit, sRectEnd)
		return
	}
	t.skipThen(int64(binary.BigEndian.Uint32(head))*t.unit, sRectEnd)
}

// stepHextile runs the steps of a Hextile rectangle, tile by tile.
func (t *ServerTracker) stepHextile() error {
	b := t.buf
	switch t.st {
	case sHextileTile:
		return t.hextileTile(b[0])
	case sHextileSub:
		per := hextileSubrectLen(t.hexMask, t.pf.BytesPerPixel())
		t.skipThen(int64(b[t.hexFixed])*per, sHextileNext)
	case sHextileNext:
		r := &t.rect
		t.tileX += hextileTile
		if t.tileX >= int(r.Width) {
			t.tileX = 0
			t.tileY += hextileTile
		}
		if t.tileY >= int(r.Height) {
			t.collect(0, sRectEnd)
			return nil
		}
		t.collect(1, sHextileTile)
	}
	return nil
}

// hextileSubrectLen is the size of one subrectangle of a Hextile tile
// whose subencoding mask is m: its position and size, and its colour when
// m says SubrectsColoured.
func hextileSubrectLen(m byte, bpp int) int64 {
	if m&0x10 != 0 { // SubrectsColoured
		return 2 + int64(bpp)
	}
	return 2
}

// stepTight runs the steps of a Tight or TightPNG rectangle.
func (t *ServerTracker) stepTight() error {
	b := t.buf
	r := &t.rect
	w, h := int64(r.Width), int64(r.Height)
	switch t.st {
	case sTightCtl:
		return t.tightControl(b[0])
	case sTightFilter:
		switch b[0] {
		case 0, 2: // copy, gradient: a TPIXEL per pixel
			t.tightData = w * h * int64(t.pf.TPixelSize())
			t.collect(0, sTightData)
		case 1: // palette
			t.collect(1, sTightPalette)
		default:
			return protoErr("FramebufferUpdate", "a Tight rectangle with filter %d", b[0])
		}
	case sTightPalette:
		n := int64(b[0]) + 1
		t.tightData = tightIndexedLen(n, w, h)
		t.skipThen(n*int64(t.pf.TPixelSize()), sTightData)
	case sTightData:
		if t.tightData < tightRawMax {
			t.skipThen(t.tightData, sRectEnd)
			return nil
		}
		t.collect(1, sTightLen)
	case sTightLen:
		l, complete := tightCompactLength(b)
		if !complete {
			t.need++
			return nil
		}
		t.skipThen(l, sRectEnd)
	}
	return nil
}

// tightIndexedLen is the size of a w by h rectangle's data under Tight's
// palette filter with n colours: one bit per pixel (rows padded to bytes)
// for two colours or fewer, else one byte per pixel.
func tightIndexedLen(n, w, h int64) int64 {
	if n <= 2 {
		return (w + 7) / 8 * h
	}
	return w * h
}

// tightCompactLength decodes Tight's compact length: 1 to 3 bytes, 7 bits
// each, the third 8 bits. complete is false while b is a prefix that needs
// one more byte.
func tightCompactLength(b []byte) (l int64, complete bool) {
	if n := len(b); n < 3 && b[n-1]&0x80 != 0 {
		return 0, false
	}
	for i, c := range b {
		if i < 2 {
			c &= 0x7F
		}
		l |= int64(c) << (7 * i)
	}
	return l, true
}

// nextRect goes on to the next rectangle, or ends the update.
func (t *ServerTracker) nextRect() {
	if t.rectsLeft > 0 && !t.lastRect {
		t.rectStart = t.msgBytes
		t.collect(rectHead, sRectHead)
		return
	}
	t.send(Event{Kind: EventUpdateEnd, Type: MsgFramebufferUpdate, Rects: t.rectsSeen, Bytes: t.msgBytes})
	t.nextMessage()
}

// rectBody frames the data after a rectangle header.
func (t *ServerTracker) rectBody() error {
	r := &t.rect
	w, h := int64(r.Width), int64(r.Height)
	bpp := int64(t.pf.BytesPerPixel())
	mask := (w + 7) / 8 * h // a 1-bit-per-pixel bitmap, rows padded to bytes
	switch r.Encoding {
	case EncodingRaw:
		t.skipThen(w*h*bpp, sRectEnd)
	case EncodingCopyRect:
		t.skipThen(4, sRectEnd)
	case EncodingRRE: // count, background, count * (pixel, x, y, w, h)
		t.unit = bpp + 8
		t.collect(4+int(bpp), sCountThenSkip)
	case EncodingCoRRE: // the same with 1-byte x, y, w, h
		t.unit = bpp + 4
		t.collect(4+int(bpp), sCountThenSkip)
	case EncodingExtendedDesktopSize:
		t.unit = screenLen
		t.collect(4, sCountThenSkip)
	case EncodingHextile:
		t.tileX, t.tileY = 0, 0
		if w == 0 || h == 0 {
			t.collect(0, sRectEnd)
			return nil
		}
		t.collect(1, sHextileTile)
	case EncodingZlib, EncodingZRLE, EncodingZYWRLE, EncodingDesktopName:
		t.collect(4, sLengthThenSkip)
	case EncodingTight, EncodingTightPNG:
		t.collect(1, sTightCtl)
	case EncodingCursor:
		t.skipThen(w*h*bpp+mask, sRectEnd)
	case EncodingXCursor:
		// Two colours, a bitmap and a mask; nothing at all for an empty
		// cursor (libvncclient and TigerVNC read nothing then).
		if w*h == 0 {
			t.collect(0, sRectEnd)
			return nil
		}
		t.skipThen(6+2*mask, sRectEnd)
	case EncodingCursorWithAlpha:
		t.collect(4, sAlphaCursor)
	case EncodingWMVi:
		t.collect(pixelFormatLen, sWMVi)
	case EncodingQEMULEDState:
		t.skipThen(1, sRectEnd)
	case EncodingDesktopSize:
		t.s.setFramebufferSize(r.Width, r.Height)
		t.collect(0, sRectEnd)
	case EncodingLastRect:
		t.lastRect = true
		t.collect(0, sRectEnd)
	case EncodingExtendedMouseButtons:
		t.s.confirmExtendedMouseButtons()
		t.collect(0, sRectEnd)
	case EncodingPointerPos, EncodingPointerTypeChange, EncodingQEMUExtendedKeyEvent, EncodingQEMUAudio:
		t.collect(0, sRectEnd)
	default:
		return protoErr("FramebufferUpdate", "a rectangle in encoding %d, which the tracker cannot frame", r.Encoding)
	}
	return nil
}

// hextileTile frames one Hextile tile from its subencoding mask.
func (t *ServerTracker) hextileTile(m byte) error {
	if m&^0x1F != 0 {
		return protoErr("FramebufferUpdate", "a Hextile tile with subencoding %#x (bits 5-7 are not Hextile)", m)
	}
	r := &t.rect
	tw := int64(min(hextileTile, int(r.Width)-t.tileX))
	th := int64(min(hextileTile, int(r.Height)-t.tileY))
	bpp := t.pf.BytesPerPixel()
	if m&0x01 != 0 { // Raw: the other bits do not count
		t.skipThen(tw*th*int64(bpp), sHextileNext)
		return nil
	}
	fixed := 0
	if m&0x02 != 0 { // BackgroundSpecified
		fixed += bpp
	}
	if m&0x04 != 0 { // ForegroundSpecified
		fixed += bpp
	}
	if m&0x08 != 0 { // AnySubrects: a count follows the colours
		t.hexMask, t.hexFixed = m, fixed
		t.collect(fixed+1, sHextileSub)
		return nil
	}
	t.skipThen(int64(fixed), sHextileNext)
	return nil
}

// tightControl frames a Tight rectangle from its compression-control byte.
func (t *ServerTracker) tightControl(c byte) error {
	r := &t.rect
	switch method := c >> 4; {
	case method == 0x8:
		r.Tight = TightFill
		t.skipThen(int64(t.pf.TPixelSize()), sRectEnd)
	case method == 0x9:
		r.Tight = TightJPEG
		t.collect(1, sTightLen)
	case method == 0xA && r.Encoding == EncodingTightPNG:
		r.Tight = TightPNG
		t.collect(1, sTightLen)
	case method > 0x7:
		return protoErr("FramebufferUpdate", "a Tight rectangle with compression control %#02x", c)
	default:
		r.Tight = TightBasic
		if c&0x40 != 0 { // read-filter-id
			t.collect(1, sTightFilter)
			return nil
		}
		t.tightData = int64(r.Width) * int64(r.Height) * int64(t.pf.TPixelSize())
		t.collect(0, sTightData)
	}
	return nil
}
