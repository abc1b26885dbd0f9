// The page's session logic, without the DOM: which mode is open, its
// WebSocket, what a close means (policy.js), the take-over, reconnects with
// backoff, the SSH credentials held in memory, and the quiet retries after
// a reload. app.js wires a Client to the page's elements, noVNC, xterm.js,
// fetch and the browser's WebSocket; session.test.js wires it to fakes.
import { State, Reconnect, decide, Backoff, holderOf, takenOverMessage } from './policy.js';
import { modes, vmURL, bearerSubprotocol } from './location.js';
import { Progress, IdleBanner, vmStopped, messageOf } from './lifecycle.js';

// stableAfter is how long a connection must last before the backoff starts
// again from its shortest delay; a session that drops right after opening
// keeps backing off.
export const stableAfter = 10_000;

// settleDelay is how long an opened terminal socket must stay open before
// the page calls it connected: a refusal's close frame follows the
// handshake at once.
export const settleDelay = 150;

// After a reload the bridge may not yet have released the session this tab
// held a moment ago, and refuses as "held" by the same user. The new page
// retries quietly a few times before it offers a take-over.
export const reloadRetries = 4;
export const reloadRetryDelay = 750;

// WebSocket readyState values.
const open = 1;

const titles = { [State.takenOver]: 'Taken over', [State.idle]: 'Closed after inactivity', [State.ended]: 'Session ended' };

/**
 * Client is one page's sessions with one VM, one mode at a time. It is not
 * safe for concurrent use; a page's event loop calls it.
 *
 * deps:
 *  - vm: {prefix, namespace, name}, as parseVMPath returns it;
 *  - view: the page (status, panels, prompt), see app.js's view;
 *  - display: {attach(ws, {onConnect, onFailure}), detach(), focus()};
 *  - terminal: {open(), write(bytes), reset(), focus(), size: {cols, rows}};
 *  - dial(path, protocols): a WebSocket to a same-origin path;
 *  - request(path, {method, token}): a fetch of a same-origin path;
 *  - clock: {now, setTimeout, clearTimeout, setInterval, clearInterval};
 *  - backoff: a Backoff (optional);
 *  - progressInterval, statusInterval: how often the progress page and
 *    the idle banner poll the VM's status, in ms (optional, lifecycle.js).
 *
 * A session refused because the VM is stopped starts it (POST …/start) and
 * shows the progress page until its console and display can be opened,
 * then connects, without a reload. While connected, the VM's status is
 * polled for an idle notice (the banner, lifecycle.js's IdleBanner).
 */
export class Client {
  #d;
  #token = '';
  #mode = 'display';
  #state = State.signedOut;
  #conn = null; // {ws, mode, openedAt, closing, failure}
  #retryTimer = 0;
  #countdown = 0;
  #sshCreds = null; // memory only, to reconnect; dropped on sign-out and on leaving SSH
  #reloadGrace = 0; // quiet retries left while our own previous page may still hold the session
  #viewOnly = false; // the display session is opened view only (?view_only=1): the bridge drops its input
  #progress = null; // a Progress while a start or restart is watched
  #banner = null; // an IdleBanner while connected

  constructor(deps) {
    this.#d = { backoff: new Backoff(), ...deps };
  }

  /** mode is the open mode: display, serial or ssh. */
  get mode() { return this.#mode; }

  /** state is the status shown, one of policy.js's State values. */
  get state() { return this.#state; }

  /** viewOnly says whether display sessions open view only. */
  get viewOnly() { return this.#viewOnly; }

  /** signedIn says whether the page holds a token. */
  get signedIn() { return this.#token !== ''; }

  /**
   * start opens the page's first session. reloaded says this tab held the
   * mode's session a moment ago, so a "held" refusal is retried quietly.
   * viewOnly opens display sessions view only.
   */
  start({ token = '', mode = '', reloaded = false, viewOnly = false } = {}) {
    this.#token = token;
    this.#viewOnly = !!viewOnly;
    if (mode in modes) this.#mode = mode;
    if (reloaded) this.#reloadGrace = reloadRetries;
    this.#d.view.tabs(this.#mode);
    this.connect();
  }

  /** signIn takes a token from the sign-in form. */
  signIn(token) {
    this.#token = token.trim();
    if (this.#token) this.connect();
    return this.#token;
  }

  /** signOut forgets the token and the SSH credentials. */
  signOut(message = '') {
    this.#stopRetry();
    this.#closeConn();
    this.#token = '';
    this.#sshCreds = null;
    this.#d.view.forgetToken();
    this.#showLogin(message);
  }

  /** submitSSH takes the guest credentials from the SSH form and connects. */
  submitSSH(creds) {
    this.#sshCreds = { ...creds };
    this.connect();
  }

  /** reconnect is the Reconnect buttons: at once, backoff from the start. */
  reconnect() {
    this.#d.backoff.reset();
    this.connect();
  }

  /**
   * setViewOnly changes how display sessions open. The bridge enforces view
   * only per session, so an open display session is opened again, retried
   * quietly while the bridge releases the one just closed (as after a
   * reload). A session not open stays so.
   */
  setViewOnly(on) {
    on = !!on;
    if (on === this.#viewOnly) return;
    this.#viewOnly = on;
    if (this.#mode !== 'display' || !this.#conn) return;
    this.#reloadGrace = reloadRetries;
    this.connect();
  }

  /** takeOver connects, closing whoever holds the session. */
  takeOver() { this.connect({ takeover: true }); }

  /** dismiss closes the prompt and leaves a Reconnect button. */
  dismiss() {
    this.#d.view.show(this.#mode === 'display' ? 'screen' : 'terminal', this.#mode);
    this.#d.view.reconnectButton('Reconnect');
  }

  /** switchMode closes the open session and opens mode m's. */
  switchMode(m) {
    if (!(m in modes) || m === this.#mode) return;
    this.#stopRetry();
    this.#closeConn();
    if (this.#mode === 'ssh') this.#sshCreds = null;
    if (this.#mode !== 'display' && m !== 'display') this.#d.terminal.reset();
    this.#mode = m;
    this.#d.view.modeChanged(m);
    this.#d.view.tabs(m);
    this.#d.backoff.reset();
    this.connect();
  }

  /** input sends the terminal's keystrokes to an open serial or SSH session. */
  input(bytes) {
    const c = this.#conn;
    if (c && c.mode !== 'display' && c.ws.readyState === open) c.ws.send(bytes);
  }

  /** resize tells an open serial or SSH session the terminal's size. */
  resize(cols, rows) {
    const c = this.#conn;
    if (c && c.mode !== 'display' && c.ws.readyState === open) c.ws.send(JSON.stringify({ type: 'resize', cols, rows }));
  }

  /**
   * leave ends the session as the page goes away. It returns what the next
   * page needs to retry quietly ({mode, at}) when a session was connected,
   * else null.
   */
  leave() {
    const keep = this.#conn && this.#state === State.connected ? { mode: this.#mode, at: this.#d.clock.now() } : null;
    this.#closeConn();
    return keep;
  }

  /** restart asks the bridge to restart the VM, once the user confirms. */
  async restart() {
    if (!this.#token) return;
    const vm = this.#describeVM();
    if (!this.#d.view.confirm(`Restart ${vm}? Unsaved work in the guest is lost.`)) return;
    const say = (text) => this.#status(this.#state, text);
    try {
      const resp = await this.#d.request(vmURL(this.#d.vm, 'restart'), { method: 'POST', token: this.#token });
      if (resp.ok) {
        say(`Restart requested for ${vm}.`);
        this.#stopRetry();
        this.#closeConn();
        this.#watchStart({ afterRestart: true });
        return;
      }
      let msg = resp.statusText;
      try { msg = (await resp.json()).message || msg; } catch { /* not a Status */ }
      say(`Restart refused: ${msg}`);
    } catch (err) {
      say(`Restart failed: ${err.message}`);
    }
  }

  /** keepRunning is the idle banner's button: a keep-running lease. */
  keepRunning() { return this.#banner ? this.#banner.keepRunning() : Promise.resolve(); }

  /**
   * connect opens the current mode's session; takeover takes it from
   * whoever holds it, in the same request.
   */
  // connect opens a session. auto marks a reconnect the client made by
  // itself, not one the user asked for: it never starts a stopped VM, so a
  // tab left open does not undo an idle stop or a virtctl stop.
  connect({ takeover = false, auto = false } = {}) {
    const { view, display, terminal } = this.#d;
    this.#stopRetry();
    this.#closeConn();
    if (!this.#token) { this.#showLogin(''); return; }
    if (this.#mode === 'ssh' && !this.#sshCreds) { this.#showSSHForm(''); return; }
    view.reconnectButton('');
    const mode = this.#mode;
    const query = new URLSearchParams();
    if (takeover) query.set('takeover', 'true');
    if (mode === 'display' && this.#viewOnly) query.set('view_only', '1');
    const q = query.toString();
    const path = vmURL(this.#d.vm, modes[mode].route) + (q ? `?${q}` : '');
    let ws;
    try {
      ws = this.#d.dial(path, ['binary', bearerSubprotocol(this.#token)]);
    } catch (err) {
      this.#status(State.refused, `Could not open a connection: ${err.message}`);
      view.reconnectButton('Retry');
      return;
    }
    const c = { ws, mode, openedAt: 0, closing: false, failure: '', auto };
    this.#conn = c;
    this.#status(State.connecting, `Connecting to the ${modes[mode].noun} of ${this.#describeVM()}…`);
    ws.addEventListener('open', () => { c.openedAt = this.#d.clock.now(); });
    ws.addEventListener('close', (e) => this.#onClose(c, e));
    if (mode === 'display') {
      view.show('screen', mode);
      display.attach(ws, { onConnect: () => this.#onConnected(c), onFailure: (msg) => { c.failure = msg; } });
      return;
    }
    view.show('terminal', mode);
    terminal.open();
    ws.binaryType = 'arraybuffer';
    ws.addEventListener('open', () => {
      // A refusal is an opened socket closed at once (the browser cannot
      // read a failed handshake's status). Its close frame puts the socket
      // in CLOSING before the close event fires; wait a moment for it, so a
      // refused session is never shown as connected and gets no credentials.
      this.#d.clock.setTimeout(() => {
        if (this.#conn !== c || ws.readyState !== open) return;
        if (c.mode === 'ssh') {
          const { cols, rows } = terminal.size;
          ws.send(JSON.stringify({ type: 'ssh', ...this.#sshCreds, cols, rows }));
        }
        this.#onConnected(c);
      }, settleDelay);
    });
    ws.addEventListener('message', (e) => {
      if (this.#conn === c && e.data instanceof ArrayBuffer) terminal.write(new Uint8Array(e.data));
    });
  }

  #status(state, text, code) {
    this.#state = state;
    this.#d.view.status(state, text, code, this.signedIn);
  }

  #describeVM() { return `${this.#d.vm.namespace}/${this.#d.vm.name}`; }

  #stopRetry() {
    const { clock } = this.#d;
    clock.clearTimeout(this.#retryTimer);
    clock.clearInterval(this.#countdown);
    this.#retryTimer = this.#countdown = 0;
    if (this.#progress) this.#progress.stop();
    this.#progress = null;
  }

  // startVM starts the stopped VM for the user, if KubeVirt's RBAC lets
  // them, and watches it start; a refusal is shown and the page stops there.
  async #startVM() {
    const vm = this.#describeVM();
    this.#status(State.connecting, `${vm} is stopped: starting it…`);
    let resp;
    try {
      resp = await this.#d.request(vmURL(this.#d.vm, 'start'), { method: 'POST', token: this.#token });
    } catch (err) {
      this.#startRefused(`Could not start ${vm}: ${err.message}`, true);
      return;
    }
    if (this.#conn || !this.#token) return; // the user moved on
    if (!resp.ok) {
      const msg = await messageOf(resp, resp.statusText);
      if (resp.status === 401) { this.signOut(`The bridge did not accept the token (${msg}). Sign in again.`); return; }
      if (resp.status === 403) { this.#startRefused(`${vm} is stopped, and you may not start it: ${msg}`, false); return; }
      this.#startRefused(`${vm} is stopped and could not be started: ${msg}`, true);
      return;
    }
    let st = null;
    try { st = await resp.json(); } catch { /* the first poll tells */ }
    this.#watchStart({ initial: st });
  }

  #startRefused(text, retry) {
    this.#status(State.refused, text);
    this.#d.view.reconnectButton(retry ? 'Retry' : '');
    this.#notice('Stopped', text, { reconnect: retry });
  }

  // watchStart shows the progress page until the VM can be connected to,
  // then connects.
  #watchStart({ initial = null, afterRestart = false } = {}) {
    const { request, clock, view, progressInterval } = this.#d;
    if (this.#progress) this.#progress.stop();
    view.show('progress', this.#mode);
    this.#status(State.connecting, `Starting ${this.#describeVM()}…`);
    const p = new Progress({ vm: this.#d.vm, token: this.#token, request, clock, view, ...(progressInterval ? { interval: progressInterval } : {}) }, {
      afterRestart,
      onReady: () => { if (this.#progress === p) { this.#progress = null; this.connect(); } },
      onTimeout: (msg) => { if (this.#progress === p) { this.#progress = null; this.#startRefused(msg, true); } },
    });
    this.#progress = p;
    p.start(initial);
  }

  #startBanner() {
    const { request, clock, view, statusInterval } = this.#d;
    if (this.#banner) this.#banner.stop();
    this.#banner = new IdleBanner({ vm: this.#d.vm, token: this.#token, request, clock, view, ...(statusInterval ? { interval: statusInterval } : {}) });
    this.#banner.start();
  }

  #stopBanner() {
    if (this.#banner) this.#banner.stop();
    this.#banner = null;
  }

  #onConnected(c) {
    if (this.#conn !== c) return;
    this.#reloadGrace = 0;
    const viewOnly = c.mode === 'display' && this.#viewOnly ? ' (view only)' : '';
    this.#status(State.connected, `Connected to the ${modes[c.mode].noun} of ${this.#describeVM()}${viewOnly}`);
    if (c.mode === 'display') this.#d.display.focus(); else this.#d.terminal.focus();
    this.#startBanner();
  }

  // closeConn ends the current session on purpose (mode switch, sign-out).
  #closeConn() {
    this.#stopBanner();
    const c = this.#conn;
    this.#conn = null;
    if (!c) return;
    c.closing = true;
    if (c.mode === 'display') this.#d.display.detach();
    if (c.ws.readyState <= open) c.ws.close(1000, 'closed by the user');
  }

  #onClose(c, e) {
    if (c.closing || this.#conn !== c) return;
    this.#conn = null;
    this.#stopBanner();
    const { clock, view } = this.#d;
    if (c.mode === 'display') this.#d.display.detach();
    if (vmStopped(e.code, e.reason)) {
      if (c.auto) {
        this.#status(State.ended, `${this.#describeVM()} is stopped.`, e.code);
        view.reconnectButton('Start');
        return;
      }
      this.#startVM();
      return;
    }
    if (c.openedAt && clock.now() - c.openedAt >= stableAfter) this.#d.backoff.reset();
    const d = decide(e.code, e.reason);
    if (c.failure && (e.code === 1000 || e.code === 1005)) d.message = `The display connection failed: ${c.failure}.`;
    switch (d.state) {
      case State.signedOut:
        this.signOut(`The bridge did not accept the token (${d.message}). Sign in again.`);
        return;
      case State.held:
        if (this.#reloadGrace > 0) {
          this.#reloadGrace--;
          this.#status(State.connecting, 'Waiting for this tab\'s previous connection to close…', e.code);
          this.#retryTimer = clock.setTimeout(() => this.connect({ auto: true }), reloadRetryDelay);
          return;
        }
        this.#showHeld(c.mode, d.message, e.code);
        return;
      case State.sshForm:
        this.#sshCreds = null;
        this.#showSSHForm(d.message);
        return;
      case State.reconnecting:
        this.#scheduleReconnect(d.message, e.code);
        return;
      default: {
        const text = d.state === State.idle ? `${d.message} Reconnect when you need it.` : d.message;
        this.#status(d.state, text, e.code);
        view.reconnectButton(d.reconnect === Reconnect.none ? '' : 'Reconnect');
        this.#notice(titles[d.state] || 'Not connected', text, { reconnect: d.reconnect !== Reconnect.none });
        if (d.state === State.takenOver) this.#showTaker(c.mode, e.code);
      }
    }
  }

  // notice explains, over the last screen, why the session is not there,
  // and offers what the user can do: take over, reconnect, or dismiss.
  #notice(title, text, { takeover = false, reconnect = false } = {}) {
    this.#d.view.notice({ title, text, takeover, reconnect });
    this.#d.view.show('prompt', this.#mode);
  }

  #scheduleReconnect(message, code) {
    const { clock, view } = this.#d;
    const delay = this.#d.backoff.next();
    const due = clock.now() + delay;
    const tick = () => {
      const s = Math.max(0, Math.ceil((due - clock.now()) / 1000));
      this.#status(State.reconnecting, `${message} Reconnecting in ${s} s…`, code);
    };
    tick();
    view.reconnectButton('Reconnect now');
    this.#countdown = clock.setInterval(tick, 1000);
    this.#retryTimer = clock.setTimeout(() => this.connect({ auto: true }), delay);
  }

  // showHeld offers the take-over. The close frame's text is shown as it
  // came until the sessions list says who holds the session, since when.
  #showHeld(m, message, code) {
    const what = `${modes[m].noun} of ${this.#describeVM()}`;
    this.#status(State.held, 'In use', code);
    this.#notice('In use', `The ${what} is in use: ${message}`, { takeover: true });
    this.#d.view.holder('');
    this.#holder(m, State.held).then((h) => {
      if (!h) return;
      const since = formatTime(h.since);
      this.#d.view.noticeText(h.reserved
        ? `The ${what} is reserved for ${h.user}, who took it over at ${since}.`
        : `The ${what} is in use by ${h.user} since ${since}. Take it over? Their session will be closed.`);
      this.#d.view.holder(h.user);
      this.#status(State.held, `In use by ${h.user}`, code);
    });
  }

  // showTaker names who took the session over, from the sessions list: the
  // take-over reserved the session for them.
  #showTaker(m, code) {
    this.#holder(m, State.takenOver).then((h) => {
      if (!h) return;
      const text = takenOverMessage(h.user);
      this.#status(State.takenOver, text, code);
      this.#d.view.noticeText(text);
    });
  }

  // holder asks the sessions list who holds mode m's session. It resolves
  // to null, too, when the page has moved on from state in mode m.
  async #holder(m, state) {
    let h = null;
    try {
      const resp = await this.#d.request(vmURL(this.#d.vm, 'sessions'), { token: this.#token });
      if (resp.ok) h = holderOf(await resp.json(), modes[m].route);
    } catch { /* the close frame's text stays */ }
    return h && this.#state === state && this.#mode === m && !this.#conn ? h : null;
  }

  #showLogin(message) {
    this.#status(State.signedOut, 'Signed out');
    this.#d.view.reconnectButton('');
    this.#d.view.login(message);
  }

  #showSSHForm(message) {
    this.#status(State.sshForm, message ? 'SSH refused' : 'SSH: sign in to the guest');
    this.#d.view.reconnectButton('');
    this.#d.view.sshForm(message);
  }
}

/** formatTime shows a sessions list's timestamp in the user's locale. */
export function formatTime(since) {
  const d = new Date(since);
  return Number.isNaN(d.getTime()) ? since : d.toLocaleString();
}
