// The VM's display: noVNC's RFB client on a WebSocket the page opened, so
// the page can read the close code that noVNC does not report. It also
// carries what noVNC's own page (vnc.html) offers around the screen: the
// clipboard both ways, the extra keys, the scaling mode and view only.
import RFB from '@novnc/novnc';
import { strokes } from './keys.js';
import { defaults, resizeModes } from './settings.js';

export class DisplayView {
  constructor(container) {
    this.container = container;
    this.rfb = null;
    this.settings = { ...defaults };
    // onClipboard gets the text the VM's clipboard holds when it changes
    // (RFB ServerCutText).
    this.onClipboard = () => {};
  }

  /**
   * attach starts RFB on ws. onConnect fires once the RFB handshake is done;
   * onFailure gets noVNC's reason when RFB itself fails (the socket's close
   * event still decides what happens next).
   */
  attach(ws, { onConnect, onFailure }) {
    this.detach();
    this.container.replaceChildren();
    const rfb = new RFB(this.container, ws, { shared: true });
    rfb.focusOnClick = true;
    rfb.background = '#111';
    this.#apply(rfb);
    rfb.addEventListener('connect', () => { rfb.focus(); onConnect(); });
    rfb.addEventListener('securityfailure', (e) => onFailure(e.detail.reason || 'VNC security failure'));
    rfb.addEventListener('disconnect', (e) => { if (!e.detail.clean) onFailure('the display connection failed'); });
    rfb.addEventListener('clipboard', (e) => this.onClipboard(e.detail.text));
    this.rfb = rfb;
  }

  detach() {
    if (!this.rfb) return;
    const rfb = this.rfb;
    this.rfb = null;
    try { rfb.disconnect(); } catch { /* already closed */ }
  }

  focus() { if (this.rfb) this.rfb.focus(); }

  /** configure applies {resize, viewOnly} now and to later sessions. */
  configure(settings) {
    this.settings = { ...this.settings, ...settings };
    if (this.rfb) this.#apply(this.rfb);
  }

  #apply(rfb) {
    const mode = resizeModes[this.settings.resize] || resizeModes[defaults.resize];
    rfb.scaleViewport = mode.scaleViewport;
    rfb.resizeSession = mode.resizeSession;
    rfb.viewOnly = this.settings.viewOnly;
  }

  /**
   * sendKeys sends one of keys.js's combinations (ctrl-alt-del, ctrl-alt-f1,
   * super…) and gives the screen the keyboard back. noVNC sends nothing
   * while it is not connected or in view only.
   */
  sendKeys(id) {
    if (!this.rfb) return;
    for (const s of strokes(id)) this.rfb.sendKey(s.keysym, s.code, s.down);
    this.rfb.focus();
  }

  /**
   * paste sets the VM's clipboard to text (RFB ClientCutText; UTF-8
   * through the extended clipboard where the server has it, as QEMU does).
   * It says whether a session was there to take it.
   */
  paste(text) {
    if (!this.rfb || this.settings.viewOnly) return false;
    this.rfb.clipboardPasteFrom(text);
    return true;
  }
}
