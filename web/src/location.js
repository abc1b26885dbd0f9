// Where the page is and who the user is: the VM from the path, the token
// from the fragment (never the query string), the mode from the fragment.

/** Modes the page offers, with the bridge route each one opens. */
export const modes = Object.freeze({
  display: { route: 'vnc', label: 'Display', noun: 'display' },
  serial: { route: 'console', label: 'Serial', noun: 'serial console' },
  ssh: { route: 'ssh', label: 'SSH', noun: 'SSH session' },
});

const tokenKey = 'virtstation.token';
const uiPath = /^(.*)\/ui\/namespaces\/([^/]+)\/virtualmachines\/([^/]+)\/?$/;

/**
 * parseVMPath reads /PREFIX/ui/namespaces/NS/virtualmachines/NAME. PREFIX is
 * kept so the page works behind a path-rewriting proxy.
 */
export function parseVMPath(pathname) {
  const m = uiPath.exec(pathname);
  if (!m) return null;
  return { prefix: m[1], namespace: decodeURIComponent(m[2]), name: decodeURIComponent(m[3]) };
}

/** vmURL is the bridge path of one of the VM's routes. */
export function vmURL(vm, route) {
  return `${vm.prefix}/api/v1/namespaces/${encodeURIComponent(vm.namespace)}/virtualmachines/${encodeURIComponent(vm.name)}/${route}`;
}

/** wsURL turns a same-origin path into a ws: or wss: URL. */
export function wsURL(loc, path) {
  return `${loc.protocol === 'https:' ? 'wss:' : 'ws:'}//${loc.host}${path}`;
}

/**
 * readFragment parses "#token=…&mode=…". The fragment never reaches a
 * server, which is why a link may carry the token there and nowhere else.
 */
export function readFragment(hash) {
  const params = new URLSearchParams((hash || '').replace(/^#/, ''));
  const mode = params.get('mode');
  return { token: (params.get('token') || '').trim(), mode: mode in modes ? mode : '' };
}

/**
 * fragmentFor is the fragment the page keeps: the mode, never the token.
 */
export function fragmentFor(mode) {
  return mode ? `#mode=${mode}` : '';
}

/**
 * takeToken returns the token from the URL fragment, or else from this
 * tab's sessionStorage, and rewrites the URL without it. The token lives in
 * memory and in sessionStorage only (gone when the tab closes), never in
 * localStorage, a cookie or a URL.
 */
export function takeToken(win) {
  const { token, mode } = readFragment(win.location.hash);
  if (win.location.hash) {
    const url = win.location.pathname + win.location.search + fragmentFor(mode);
    win.history.replaceState(null, '', url);
  }
  if (token) {
    storeToken(win, token);
    return { token, mode };
  }
  let stored = '';
  try { stored = win.sessionStorage.getItem(tokenKey) || ''; } catch { /* storage disabled */ }
  return { token: stored, mode };
}

/** storeToken keeps the token for this tab only. */
export function storeToken(win, token) {
  try { win.sessionStorage.setItem(tokenKey, token); } catch { /* memory only */ }
}

/** forgetToken signs the tab out. */
export function forgetToken(win) {
  try { win.sessionStorage.removeItem(tokenKey); } catch { /* nothing stored */ }
}

/**
 * bearerSubprotocol carries the token in the WebSocket handshake, as
 * Kubernetes' API server accepts it: base64url without padding.
 */
export function bearerSubprotocol(token) {
  const bytes = new TextEncoder().encode(token);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return 'base64url.bearer.authorization.k8s.io.' + btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
