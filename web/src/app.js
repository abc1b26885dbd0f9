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
    for (const k of ['login', 'prompt', 'ssh']) el[k].hidden = k !== which;
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
  },
  modeChanged(mode) { history.replaceState(null, '', location.pathname + location.search + fragmentFor(mode)); },
  forgetToken() { forgetToken(window); },
  confirm(text) { return window.confirm(text); },
};

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

function main() {
  const vm = parseVMPath(location.pathname);
  if (!vm) {
    view.status(State.refused, 'Open this page at /ui/namespaces/NAMESPACE/virtualmachines/NAME.', undefined, false);
    return;
  }
  document.title = `${vm.name} · Virtstation`;
  el.vm.textContent = `${vm.namespace}/${vm.name}`;
  const client = new Client({
    vm, view, display, terminal, request, clock,
    dial: (path, protocols) => new WebSocket(wsURL(location, path), protocols),
  });
  const { token, mode } = takeToken(window);
  let reloaded = false;
  try {
    const prev = JSON.parse(sessionStorage.getItem(reloadKey) || 'null');
    sessionStorage.removeItem(reloadKey);
    reloaded = !!prev && prev.mode === (mode || client.mode) && Date.now() - prev.at < reloadWindow;
  } catch { /* storage disabled */ }
  wire(client);
  client.start({ token, mode, reloaded });
}

main();
