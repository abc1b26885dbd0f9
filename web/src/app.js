// Virtstation's browser client: the VM's display (noVNC), serial console and
// SSH (xterm.js), through the bridge that served this page. This file is
// the page's edge: its elements, the browser's WebSocket, fetch and storage.
// What happens to a session is session.js's Client, which has no DOM.
import './nonce.js';
import { State } from './policy.js';
import { Client } from './session.js';
import {
  parseVMPath, wsURL, takeToken, storeToken, forgetToken, fragmentFor,
} from './location.js';
import { TerminalView } from './terminal.js';
import { DisplayView } from './display.js';
import { combos } from './keys.js';
import { steps } from './lifecycle.js';
import {
  resolve as resolveSettings, storageKey as settingsKey, toStorage, withQuery, clipboardTooLong, maxClipboardBytes,
} from './settings.js';
import './app.css';

// The mode a page had connected, kept in this tab over a reload for
// reloadWindow, so the new page retries quietly while the bridge releases
// the old page's session.
const reloadKey = 'virtstation.reload';
const reloadWindow = 10_000;

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
  stage: $('stage'), displayBar: $('display-bar'), fullscreen: $('fullscreen'), viewOnlyBadge: $('view-only-badge'),
  drawers: { keys: $('keys'), clipboard: $('clipboard'), settings: $('settings') },
  drawerButtons: { keys: $('keys-button'), clipboard: $('clipboard-button'), settings: $('settings-button') },
  clipText: $('clipboard-text'), clipMessage: $('clipboard-message'),
  clipSend: $('clipboard-send'), clipCopy: $('clipboard-copy'), clipClear: $('clipboard-clear'),
  resize: $('resize'), viewOnly: $('view-only'),
  progress: $('progress'), progressSteps: $('progress-steps'), progressMessage: $('progress-message'),
  banner: $('idle-banner'), bannerText: $('idle-banner-text'), bannerMessage: $('idle-banner-message'), keepRunning: $('keep-running'),
};

const terminal = new TerminalView(el.terminal);
const display = new DisplayView(el.screen);

function useKey() { return el.sshForm.elements.auth.value === 'key'; }

// view is the page as the Client sees it.
const view = {
  status(state, text, code, signedIn) {
    el.signout.hidden = el.restart.hidden = !signedIn;
    el.status.dataset.state = state;
    if (code) el.status.dataset.code = String(code); else delete el.status.dataset.code;
    el.status.textContent = text;
  },
  // show makes one panel or view visible; the others hide.
  show(which, mode) {
    for (const k of ['login', 'prompt', 'ssh', 'progress']) el[k].hidden = k !== which;
    el.screen.hidden = !(which === 'screen' || (which === 'prompt' && mode === 'display'));
    el.terminal.hidden = !(which === 'terminal' || (which === 'prompt' && mode !== 'display'));
    if (!el.terminal.hidden) terminal.refit();
    if (which === 'prompt') (!el.takeover.hidden ? el.takeover : !el.promptReconnect.hidden ? el.promptReconnect : el.cancel).focus();
  },
  reconnectButton(label) {
    el.reconnect.textContent = label || 'Reconnect';
    el.reconnect.hidden = !label;
  },
  notice({ title, text, takeover, reconnect }) {
    el.promptTitle.textContent = title;
    el.promptText.textContent = text;
    el.takeover.hidden = !takeover;
    el.promptReconnect.hidden = !reconnect;
    el.cancel.textContent = takeover ? 'Cancel' : 'Dismiss';
  },
  noticeText(text) { el.promptText.textContent = text; },
  // progress draws the start's steps: those before step done, step current.
  progress({ phase, message, step }) {
    el.progress.dataset.phase = phase;
    el.progressSteps.replaceChildren(...steps.map((s, i) => {
      const li = document.createElement('li');
      li.textContent = s.label;
      li.dataset.phase = s.phase;
      li.dataset.state = i < step ? 'done' : i === step ? 'current' : 'todo';
      return li;
    }));
    el.progressMessage.textContent = message;
  },
  banner(text) {
    el.banner.hidden = !text;
    el.bannerText.textContent = text;
    if (!text) el.bannerMessage.textContent = '';
  },
  bannerMessage(text) { el.bannerMessage.textContent = text; },
  holder(user) { el.prompt.dataset.holder = user; },
  login(message) {
    el.loginMessage.textContent = message;
    view.show('login');
    el.token.focus();
  },
  sshForm(message) {
    el.sshMessage.textContent = message;
    view.show('ssh');
    (el.sshUser.value ? (useKey() ? el.sshKey : el.sshPassword) : el.sshUser).focus();
  },
  tabs(mode) {
    for (const t of el.tabs) t.setAttribute('aria-selected', String(t.dataset.mode === mode));
    el.displayBar.hidden = mode !== 'display';
    el.stage.classList.toggle('with-toolbar', mode === 'display');
    if (mode !== 'display') openDrawer('');
  },
  modeChanged(mode) { history.replaceState(null, '', location.pathname + location.search + fragmentFor(mode)); },
  forgetToken() { forgetToken(window); },
  confirm(text) { return window.confirm(text); },
};

// openDrawer shows one of the display's drawers (extra keys, clipboard,
// settings) and hides the others; '' hides all.
function openDrawer(which) {
  for (const [k, d] of Object.entries(el.drawers)) {
    d.hidden = k !== which;
    el.drawerButtons[k].setAttribute('aria-expanded', String(k === which));
  }
}

// settings are the display's, as settings.js resolves them from the URL
// and this browser's choice.
let settings;
try {
  settings = resolveSettings(location.search, localStorage.getItem(settingsKey));
} catch {
  settings = resolveSettings(location.search, null); // storage disabled
}

// choose keeps a setting the user changed: in the URL when the URL had set
// it (a reload or a shared link keeps it), else in this browser.
function choose(name, value) {
  settings = { ...settings, [name]: value };
  if (settings.locked.includes(name)) {
    history.replaceState(null, '', location.pathname + withQuery(location.search, name, value) + location.hash);
    return;
  }
  try { localStorage.setItem(settingsKey, toStorage(settings)); } catch { /* this tab only */ }
}

function showSettings() {
  el.resize.value = settings.resize;
  el.viewOnly.checked = settings.viewOnly;
  el.viewOnlyBadge.hidden = !settings.viewOnly;
  // View only sends no keys and no clipboard, and noVNC shows it none.
  for (const b of [el.drawerButtons.keys, el.drawerButtons.clipboard]) b.disabled = settings.viewOnly;
  if (settings.viewOnly && el.drawers.settings.hidden) openDrawer('');
}

// intervals reads the status polling intervals a test may shorten
// (?progress_interval=ms&status_interval=ms, at least 200 ms); the defaults
// are lifecycle.js's.
function intervals(search) {
  const q = new URLSearchParams(search);
  const out = {};
  for (const [param, key] of [['progress_interval', 'progressInterval'], ['status_interval', 'statusInterval']]) {
    const ms = Number(q.get(param));
    if (Number.isFinite(ms) && ms >= 200) out[key] = ms;
  }
  return out;
}

function request(path, { method = 'GET', token }) {
  return fetch(path, {
    method, headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' },
    cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
  });
}

const clock = {
  now: () => Date.now(),
  setTimeout: (f, ms) => setTimeout(f, ms),
  clearTimeout: (id) => clearTimeout(id),
  setInterval: (f, ms) => setInterval(f, ms),
  clearInterval: (id) => clearInterval(id),
};

function wire(client) {
  for (const t of el.tabs) t.addEventListener('click', () => client.switchMode(t.dataset.mode));
  el.reconnect.addEventListener('click', () => client.reconnect());
  el.signout.addEventListener('click', () => client.signOut(''));
  el.takeover.addEventListener('click', () => client.takeOver());
  el.promptReconnect.addEventListener('click', () => client.reconnect());
  el.cancel.addEventListener('click', () => client.dismiss());
  el.loginForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const token = client.signIn(el.token.value);
    el.token.value = '';
    if (token) storeToken(window, token);
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
    let creds;
    if (useKey()) {
      creds = { user, privateKey: el.sshKey.value };
      if (el.sshPassphrase.value) creds.passphrase = el.sshPassphrase.value;
    } else {
      creds = { user, password: el.sshPassword.value };
    }
    el.sshKey.value = el.sshPassphrase.value = el.sshPassword.value = '';
    client.submitSSH(creds);
  });
  el.restart.addEventListener('click', () => client.restart());
  el.keepRunning.addEventListener('click', () => client.keepRunning());
  terminal.onData = (d, binary) => {
    client.input(binary ? Uint8Array.from(d, (ch) => ch.charCodeAt(0) & 0xff) : new TextEncoder().encode(d));
  };
  terminal.onResize = (cols, rows) => client.resize(cols, rows);
  window.addEventListener('pagehide', () => {
    const keep = client.leave();
    if (keep) {
      try { sessionStorage.setItem(reloadKey, JSON.stringify(keep)); } catch { /* no grace then */ }
    }
  });
}

// wireDisplay wires the display's toolbar: extra keys, clipboard, full
// screen and settings, after noVNC's vnc.html.
function wireDisplay(client) {
  for (const [k, b] of Object.entries(el.drawerButtons)) {
    b.addEventListener('click', () => openDrawer(el.drawers[k].hidden ? k : ''));
  }
  for (const [id, c] of Object.entries(combos)) {
    const b = document.createElement('button');
    Object.assign(b, { type: 'button', textContent: c.label });
    b.dataset.key = id;
    b.addEventListener('click', () => display.sendKeys(id));
    el.drawers.keys.append(b);
  }
  display.onClipboard = (text) => {
    el.clipText.value = text;
    el.clipMessage.textContent = 'From the VM.';
  };
  let sent = '';
  const send = (always) => {
    const text = el.clipText.value;
    if (!always && text === sent) return;
    if (clipboardTooLong(text)) {
      el.clipMessage.textContent = `Too long to send: the VM's clipboard takes at most ${maxClipboardBytes >> 10} KiB.`;
      return;
    }
    const ok = client.state === State.connected && display.paste(text);
    if (ok) sent = text;
    el.clipMessage.textContent = ok ? 'Sent to the VM.' : 'Not sent: the display is not connected.';
  };
  el.clipText.addEventListener('change', () => send(false)); // noVNC sends when the box loses focus
  el.clipSend.addEventListener('click', () => send(true));
  el.clipClear.addEventListener('click', () => { el.clipText.value = ''; el.clipMessage.textContent = ''; });
  el.clipCopy.addEventListener('click', async () => {
    el.clipText.select();
    try {
      await navigator.clipboard.writeText(el.clipText.value);
      el.clipMessage.textContent = 'Copied.';
    } catch {
      el.clipMessage.textContent = 'Selected: copy it with Ctrl+C.';
    }
  });
  wireFullscreen();
  el.resize.addEventListener('change', () => {
    choose('resize', el.resize.value);
    display.configure({ resize: settings.resize });
  });
  el.viewOnly.addEventListener('change', () => {
    choose('viewOnly', el.viewOnly.checked);
    display.configure({ viewOnly: settings.viewOnly });
    showSettings();
    client.setViewOnly(settings.viewOnly);
  });
}

// wireFullscreen makes the stage (the screen, its toolbar and the prompts)
// full screen; the browser's Esc leaves it.
function wireFullscreen() {
  el.fullscreen.hidden = !document.fullscreenEnabled;
  el.fullscreen.addEventListener('click', async () => {
    try {
      if (document.fullscreenElement) await document.exitFullscreen();
      else await el.stage.requestFullscreen();
    } catch { /* refused: the page stays as it is */ }
    display.focus();
  });
  document.addEventListener('fullscreenchange', () => {
    const on = document.fullscreenElement === el.stage;
    el.fullscreen.setAttribute('aria-pressed', String(on));
    el.fullscreen.textContent = on ? 'Exit full screen' : 'Full screen';
  });
}

function main() {
  const vm = parseVMPath(location.pathname);
  if (!vm) {
    view.status(State.refused, 'Open this page at /ui/namespaces/NAMESPACE/virtualmachines/NAME.', undefined, false);
    return;
  }
  document.title = `${vm.name} · Virtstation`;
  el.vm.textContent = `${vm.namespace}/${vm.name}`;
  const client = new Client({
    vm, view, display, terminal, request, clock, ...intervals(location.search),
    dial: (path, protocols) => new WebSocket(wsURL(location, path), protocols),
  });
  display.configure({ resize: settings.resize, viewOnly: settings.viewOnly });
  showSettings();
  const { token, mode } = takeToken(window);
  let reloaded = false;
  try {
    const prev = JSON.parse(sessionStorage.getItem(reloadKey) || 'null');
    sessionStorage.removeItem(reloadKey);
    reloaded = !!prev && prev.mode === (mode || client.mode) && Date.now() - prev.at < reloadWindow;
  } catch { /* storage disabled */ }
  wire(client);
  wireDisplay(client);
  client.start({ token, mode, reloaded, viewOnly: settings.viewOnly });
}

main();
