// The VM's display: noVNC's RFB client on a WebSocket the page opened, so
// the page can read the close code that noVNC does not report.
import RFB from '@novnc/novnc';

export class DisplayView {
  constructor(container) {
    this.container = container;
    this.rfb = null;
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
    rfb.scaleViewport = true;
    rfb.resizeSession = true;
    rfb.focusOnClick = true;
    rfb.background = '#111';
    rfb.addEventListener('connect', () => { rfb.focus(); onConnect(); });
    rfb.addEventListener('securityfailure', (e) => onFailure(e.detail.reason || 'VNC security failure'));
    rfb.addEventListener('disconnect', (e) => { if (!e.detail.clean) onFailure('the display connection failed'); });
    this.rfb = rfb;
  }

  detach() {
    if (!this.rfb) return;
    const rfb = this.rfb;
    this.rfb = null;
    try { rfb.disconnect(); } catch { /* already closed */ }
  }

  focus() { if (this.rfb) this.rfb.focus(); }
}
