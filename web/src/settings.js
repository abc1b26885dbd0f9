// The display's settings: how the VM's screen fits the window, and whether
// the page only watches. noVNC's names and values, so that its users' links
// work: ?resize=scale|remote|off and ?view_only=1 in the page's query
// string. A setting in the URL wins; otherwise the one the user last chose
// on this browser (localStorage), otherwise the default: local scaling,
// full control. Nothing here is secret: the token never goes in storage.

export const storageKey = 'virtstation.display';

/** resizeModes are noVNC's scaling modes. */
export const resizeModes = Object.freeze({
  // scale: the whole screen shrinks or grows to fit the window (noVNC's
  // scaleViewport), the guest's resolution unchanged.
  scale: { scaleViewport: true, resizeSession: false },
  // remote: the page asks the guest to take the window's size (noVNC's
  // resizeSession, RFB SetDesktopSize); guests without a driver that can
  // (QEMU's std VGA) keep theirs, shown unscaled.
  remote: { scaleViewport: false, resizeSession: true },
  // off: one screen pixel per CSS pixel, clipped by the window.
  off: { scaleViewport: false, resizeSession: false },
});

export const defaults = Object.freeze({ resize: 'scale', viewOnly: false });

// truthy and falsy are the spellings noVNC's getConfigVar users write.
const truthy = new Set(['1', 'true', 'yes', 'on']);
const falsy = new Set(['0', 'false', 'no', 'off']);

function parseBool(v) {
  if (v == null) return undefined;
  const s = String(v).trim().toLowerCase();
  if (truthy.has(s)) return true;
  if (falsy.has(s)) return false;
  return undefined;
}

// clean keeps the known settings with valid values.
function clean(s) {
  const out = {};
  if (s && Object.hasOwn(resizeModes, s.resize)) out.resize = s.resize;
  if (s && typeof s.viewOnly === 'boolean') out.viewOnly = s.viewOnly;
  return out;
}

/** fromQuery reads ?resize= and ?view_only= (noVNC's parameter names). */
export function fromQuery(search) {
  const q = new URLSearchParams(search || '');
  return clean({ resize: q.get('resize'), viewOnly: parseBool(q.get('view_only')) });
}

/** fromStorage reads what the user chose before; junk reads as nothing. */
export function fromStorage(text) {
  try { return clean(JSON.parse(text || 'null')); } catch { return {}; }
}

/**
 * resolve is the settings in force: the URL's over the stored over the
 * defaults. locked names the settings the URL fixed.
 */
export function resolve(search, stored) {
  const url = fromQuery(search);
  return { ...defaults, ...fromStorage(stored), ...url, locked: Object.keys(url) };
}

/** toStorage is what the page keeps after the user changes a setting. */
export function toStorage(s) {
  return JSON.stringify(clean(s));
}

/**
 * withQuery is the page's query string with setting name (resize or
 * viewOnly) set to value, so that the address bar, a reload and a shared
 * link keep the choice the URL made.
 */
export function withQuery(search, name, value) {
  const q = new URLSearchParams(search || '');
  if (name === 'viewOnly') q.set('view_only', value ? '1' : '0');
  else if (name === 'resize') q.set('resize', value);
  const s = q.toString();
  return s ? `?${s}` : '';
}

// maxClipboardBytes bounds the text the page sends as ClientCutText. The
// bridge (package rfb, MaxCutTextLength) and QEMU end a session whose
// ClientCutText announces more than 1 MiB; noVNC sends UTF-8 through the
// extended clipboard, zlib-compressed, so a quarter of that leaves room for
// text that does not compress.
export const maxClipboardBytes = 256 << 10;

/** clipboardTooLong says whether text is over maxClipboardBytes in UTF-8. */
export function clipboardTooLong(text) {
  return new TextEncoder().encode(text).length > maxClipboardBytes;
}
