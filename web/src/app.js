// Virtstation's browser client: the VM's display (noVNC), serial console and
// SSH (xterm.js), through the bridge that served this page.
import './nonce.js';
import {
  State, Reconnect, decide, Backoff, holderOf, takenOverMessage,
} from './policy.js';
import {
  modes, parseVMPath, vmURL, wsURL, takeToken, storeToken, forgetToken, fragmentFor, bearerSubprotocol,
} from './location.js';
import { TerminalView } from './terminal.js';
import { DisplayView } from './display.js';
import './app.css';

// stableAfter is how long a connection must last before the backoff starts
// again from its shortest delay; a session that drops right after opening
// keeps backing off.
const stableAfter = 10_000;

// settleDelay is how long an opened terminal socket must stay open before
// the page calls it connected: a refusal's close frame follows the
// handshake at once.
const settleDelay = 150;

// After a reload the bridge may not yet have released the session this tab
// held a moment ago, and refuses as "held" by the same user. The new page
// retries quietly a few times before it offers a take-over.
const reloadKey = 'virtstation.reload';
const reloadWindow = 10_000;
const reloadRetries = 4;
const reloadRetryDelay = 750;

const $ = (id) => document.getElementById(id);
const el = {
  vm: $('vm'), status: $('status'), reconnect: $('reconnect'), restart: $('restart'), signout: $('signout'),
  tabs: [...document.querySelectorAll('[role="tab"][data-mode]')],
  login: $('login'), loginForm: $('login-form'), loginMessage: $('login-message'), token: $('token'),
  prompt: $('prompt'), promptTitle: $('prompt-title'), promptText: $('prompt-text'),
  takeover: $('takeover'), promptReconnect: $('prompt-reconnect'), cancel: $('cancel'),
  ssh: $('ssh'), sshForm: $('ssh-form'), sshMessage: $('ssh-message'), sshUser: $('ssh-user'),
  sshKey: $('ssh-key'), sshKeyFile: $('ssh-key-file'), sshPassphrase: $('ssh-passphrase'), sshPassword: $('ssh-password'),
  sshKeyFields: $('ssh-key-fields'), sshPasswordFields: $('ssh-password-fields'),
  screen: $('screen'), terminal: $('terminal'),
};

const vm = parseVMPath(location.pathname);
const terminal = new TerminalView(el.terminal);
const display = new DisplayView(el.screen);
const backoff = new Backoff();

let token = '';
let mode = 'display';
let conn = null; // {ws, mode, openedAt, closing, failure}
let retryTimer = 0;
let countdown = 0;
let sshCreds = null; // memory only, to reconnect; dropped on sign-out and on leaving SSH
let reloadGrace = 0; // quiet retries left while our own previous page may still hold the session

function setStatus(state, text, code) {
  el.signout.hidden = el.restart.hidden = !token;
  el.status.dataset.state = state;
  if (code) el.status.dataset.code = String(code); else delete el.status.dataset.code;
  el.status.textContent = text;
}

function describeVM() { return `${vm.namespace}/${vm.name}`; }

// show makes one panel or view visible; the others hide.
function show(which) {
  for (const k of ['login', 'prompt', 'ssh']) el[k].hidden = k !== which;
  el.screen.hidden = !(which === 'screen' || (which === 'prompt' && mode === 'display'));
  el.terminal.hidden = !(which === 'terminal' || (which === 'prompt' && mode !== 'display'));
  if (!el.terminal.hidden) terminal.refit();
}

function showReconnect(label) {
  el.reconnect.textContent = label || 'Reconnect';
  el.reconnect.hidden = !label;
}

function stopRetry() {
  clearTimeout(retryTimer);
  clearInterval(countdown);
  retryTimer = countdown = 0;
}

function selectTab() {
  for (const t of el.tabs) t.setAttribute('aria-selected', String(t.dataset.mode === mode));
}

// connect opens the current mode's session; takeover takes it from whoever
// holds it, in the same request.
function connect({ takeover = false } = {}) {
  stopRetry();
  closeConn();
  if (!token) { showLogin(''); return; }
  if (mode === 'ssh' && !sshCreds) { showSSHForm(''); return; }
  showReconnect('');
  const path = vmURL(vm, modes[mode].route) + (takeover ? '?takeover=true' : '');
  let ws;
  try {
    ws = new WebSocket(wsURL(location, path), ['binary', bearerSubprotocol(token)]);
  } catch (err) {
    setStatus(State.refused, `Could not open a connection: ${err.message}`);
    showReconnect('Retry');
    return;
  }
  const c = { ws, mode, openedAt: 0, closing: false, failure: '' };
  conn = c;
  setStatus(State.connecting, `Connecting to the ${modes[mode].noun} of ${describeVM()}…`);
  ws.addEventListener('open', () => { c.openedAt = Date.now(); });
  ws.addEventListener('close', (e) => onClose(c, e));
  if (mode === 'display') {
    show('screen');
    display.attach(ws, { onConnect: () => onConnected(c), onFailure: (msg) => { c.failure = msg; } });
    return;
  }
  show('terminal');
  terminal.open();
  ws.binaryType = 'arraybuffer';
  ws.addEventListener('open', () => {
    // A refusal is an opened socket closed at once (the browser cannot read
    // a failed handshake's status). Its close frame puts the socket in
    // CLOSING before the close event fires; wait a moment for it, so a
    // refused session is never shown as connected and gets no credentials.
    setTimeout(() => {
      if (conn !== c || ws.readyState !== WebSocket.OPEN) return;
      if (c.mode === 'ssh') {
        const { cols, rows } = terminal.size;
        ws.send(JSON.stringify({ type: 'ssh', ...sshCreds, cols, rows }));
      }
      onConnected(c);
    }, settleDelay);
  });
  ws.addEventListener('message', (e) => {
    if (conn === c && e.data instanceof ArrayBuffer) terminal.write(new Uint8Array(e.data));
  });
}

function onConnected(c) {
  if (conn !== c) return;
  reloadGrace = 0;
  setStatus(State.connected, `Connected to the ${modes[c.mode].noun} of ${describeVM()}`);
  if (c.mode === 'display') display.focus(); else terminal.focus();
}

// closeConn ends the current session on purpose (mode switch, sign-out).
function closeConn() {
  const c = conn;
  conn = null;
  if (!c) return;
  c.closing = true;
  if (c.mode === 'display') display.detach();
  if (c.ws.readyState <= WebSocket.OPEN) c.ws.close(1000, 'closed by the user');
}

function onClose(c, e) {
  if (c.closing || conn !== c) return;
  conn = null;
  if (c.mode === 'display') display.detach();
  if (c.openedAt && Date.now() - c.openedAt >= stableAfter) backoff.reset();
  const d = decide(e.code, e.reason);
  if (c.failure && (e.code === 1000 || e.code === 1005)) d.message = `The display connection failed: ${c.failure}.`;
  switch (d.state) {
    case State.signedOut:
      signOut(`The bridge did not accept the token (${d.message}). Sign in again.`);
      return;
    case State.held:
      if (reloadGrace > 0) {
        reloadGrace--;
        setStatus(State.connecting, 'Waiting for this tab\'s previous connection to close…', e.code);
        retryTimer = setTimeout(() => connect(), reloadRetryDelay);
        return;
      }
      showHeld(c.mode, d.message, e.code);
      return;
    case State.sshForm:
      sshCreds = null;
      showSSHForm(d.message);
      return;
    case State.reconnecting:
      scheduleReconnect(d.message, e.code);
      return;
    default: {
      const titles = { [State.takenOver]: 'Taken over', [State.idle]: 'Closed after inactivity', [State.ended]: 'Session ended' };
      const text = d.state === State.idle ? `${d.message} Reconnect when you need it.` : d.message;
      setStatus(d.state, text, e.code);
      showReconnect(d.reconnect === Reconnect.none ? '' : 'Reconnect');
      showNotice(titles[d.state] || 'Not connected', text, { reconnect: d.reconnect !== Reconnect.none });
      if (d.state === State.takenOver) showTaker(c.mode, e.code);
    }
  }
}

// showNotice explains, over the last screen, why the session is not there,
// and offers what the user can do: take over, reconnect, or dismiss.
function showNotice(title, text, { takeover = false, reconnect = false } = {}) {
  el.promptTitle.textContent = title;
  el.promptText.textContent = text;
  el.takeover.hidden = !takeover;
  el.promptReconnect.hidden = !reconnect;
  el.cancel.textContent = takeover ? 'Cancel' : 'Dismiss';
  show('prompt');
  (takeover ? el.takeover : reconnect ? el.promptReconnect : el.cancel).focus();
}

function scheduleReconnect(message, code) {
  const delay = backoff.next();
  const due = Date.now() + delay;
  const tick = () => {
    const s = Math.max(0, Math.ceil((due - Date.now()) / 1000));
    setStatus(State.reconnecting, `${message} Reconnecting in ${s} s…`, code);
  };
  tick();
  showReconnect('Reconnect now');
  countdown = setInterval(tick, 1000);
  retryTimer = setTimeout(() => connect(), delay);
}

// showHeld offers the take-over. The close frame's text is shown as it
// came until the sessions list says who holds the session, since when.
function showHeld(m, message, code) {
  const what = `${modes[m].noun} of ${describeVM()}`;
  setStatus(State.held, 'In use', code);
  showNotice('In use', `The ${what} is in use: ${message}`, { takeover: true });
  el.prompt.dataset.holder = '';
  fetchHolder(modes[m].route).then((h) => {
    if (!h || el.status.dataset.state !== State.held || mode !== m) return;
    const since = formatTime(h.since);
    el.promptText.textContent = h.reserved
      ? `The ${what} is reserved for ${h.user}, who took it over at ${since}.`
      : `The ${what} is in use by ${h.user} since ${since}. Take it over? Their session will be closed.`;
    el.prompt.dataset.holder = h.user;
    setStatus(State.held, `In use by ${h.user}`, code);
  });
}

// showTaker names who took the session over, from the sessions list: the
// take-over reserved the session for them.
function showTaker(m, code) {
  fetchHolder(modes[m].route).then((h) => {
    if (!h || el.status.dataset.state !== State.takenOver || mode !== m) return;
    const text = takenOverMessage(h.user);
    setStatus(State.takenOver, text, code);
    el.promptText.textContent = text;
  });
}

async function fetchHolder(route) {
  try {
    const resp = await fetch(vmURL(vm, 'sessions'), {
      headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' },
      cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
    });
    return resp.ok ? holderOf(await resp.json(), route) : null;
  } catch {
    return null;
  }
}

function formatTime(since) {
  const d = new Date(since);
  return Number.isNaN(d.getTime()) ? since : d.toLocaleString();
}

function showLogin(message) {
  setStatus(State.signedOut, 'Signed out');
  showReconnect('');
  el.loginMessage.textContent = message;
  show('login');
  el.token.focus();
}

function signOut(message) {
  stopRetry();
  closeConn();
  token = '';
  sshCreds = null;
  forgetToken(window);
  showLogin(message);
}

function showSSHForm(message) {
  setStatus(State.sshForm, message ? 'SSH refused' : 'SSH: sign in to the guest', undefined);
  showReconnect('');
  el.sshMessage.textContent = message;
  show('ssh');
  (el.sshUser.value ? (useKey() ? el.sshKey : el.sshPassword) : el.sshUser).focus();
}

function useKey() { return el.sshForm.elements.auth.value === 'key'; }

function switchMode(m) {
  if (!(m in modes) || m === mode) return;
  stopRetry();
  closeConn();
  if (mode === 'ssh') sshCreds = null;
  if (mode !== 'display' && m !== 'display') terminal.reset();
  mode = m;
  history.replaceState(null, '', location.pathname + location.search + fragmentFor(mode));
  selectTab();
  backoff.reset();
  connect();
}

function wire() {
  for (const t of el.tabs) t.addEventListener('click', () => switchMode(t.dataset.mode));
  el.reconnect.addEventListener('click', () => { backoff.reset(); connect(); });
  el.signout.addEventListener('click', () => signOut(''));
  el.takeover.addEventListener('click', () => connect({ takeover: true }));
  el.promptReconnect.addEventListener('click', () => { backoff.reset(); connect(); });
  el.cancel.addEventListener('click', () => {
    show(mode === 'display' ? 'screen' : 'terminal');
    showReconnect('Reconnect');
  });
  el.loginForm.addEventListener('submit', (e) => {
    e.preventDefault();
    token = el.token.value.trim();
    el.token.value = '';
    if (!token) return;
    storeToken(window, token);
    connect();
  });
  el.sshForm.addEventListener('change', () => {
    el.sshKeyFields.hidden = !useKey();
    el.sshPasswordFields.hidden = useKey();
  });
  el.sshKeyFile.addEventListener('change', async () => {
    const f = el.sshKeyFile.files[0];
    if (f && f.size < 64 << 10) el.sshKey.value = await f.text();
    el.sshKeyFile.value = '';
  });
  el.sshForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const user = el.sshUser.value.trim();
    if (useKey()) {
      sshCreds = { user, privateKey: el.sshKey.value };
      if (el.sshPassphrase.value) sshCreds.passphrase = el.sshPassphrase.value;
    } else {
      sshCreds = { user, password: el.sshPassword.value };
    }
    el.sshKey.value = el.sshPassphrase.value = el.sshPassword.value = '';
    connect();
  });
  el.restart.addEventListener('click', restart);
  terminal.onData = (d, binary) => {
    if (!conn || conn.mode === 'display' || conn.ws.readyState !== WebSocket.OPEN) return;
    const bytes = binary ? Uint8Array.from(d, (ch) => ch.charCodeAt(0) & 0xff) : new TextEncoder().encode(d);
    conn.ws.send(bytes);
  };
  terminal.onResize = (cols, rows) => {
    if (conn && conn.mode !== 'display' && conn.ws.readyState === WebSocket.OPEN) {
      conn.ws.send(JSON.stringify({ type: 'resize', cols, rows }));
    }
  };
  window.addEventListener('pagehide', () => {
    if (conn && el.status.dataset.state === State.connected) {
      try { sessionStorage.setItem(reloadKey, JSON.stringify({ mode, at: Date.now() })); } catch { /* no grace then */ }
    }
    closeConn();
  });
}

async function restart() {
  if (!token) return;
  if (!window.confirm(`Restart ${describeVM()}? Unsaved work in the guest is lost.`)) return;
  try {
    const resp = await fetch(vmURL(vm, 'restart'), {
      method: 'POST', headers: { Authorization: `Bearer ${token}` },
      cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
    });
    if (resp.ok) {
      setStatus(el.status.dataset.state, `Restart requested for ${describeVM()}.`);
      return;
    }
    let msg = resp.statusText;
    try { msg = (await resp.json()).message || msg; } catch { /* not a Status */ }
    setStatus(el.status.dataset.state, `Restart refused: ${msg}`);
  } catch (err) {
    setStatus(el.status.dataset.state, `Restart failed: ${err.message}`);
  }
}

function main() {
  if (!vm) {
    setStatus(State.refused, 'Open this page at /ui/namespaces/NAMESPACE/virtualmachines/NAME.');
    return;
  }
  document.title = `${vm.name} · Virtstation`;
  el.vm.textContent = describeVM();
  const taken = takeToken(window);
  token = taken.token;
  if (taken.mode) mode = taken.mode;
  try {
    const prev = JSON.parse(sessionStorage.getItem(reloadKey) || 'null');
    sessionStorage.removeItem(reloadKey);
    if (prev && prev.mode === mode && Date.now() - prev.at < reloadWindow) reloadGrace = reloadRetries;
  } catch { /* storage disabled */ }
  selectTab();
  wire();
  connect();
}

main();
