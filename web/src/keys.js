// The keys a browser cannot send to the VM itself, because the browser or
// the user's desktop takes them first: Ctrl+Alt+Del, Ctrl+Alt+F1…F12 (the
// guest's virtual terminals), the Super (Windows) key, Tab and Esc. The same
// set noVNC's vnc.html offers in its extra-keys bar. Pure data and a pure
// function: display.js sends what strokes() returns with noVNC's sendKey.

// X11 keysyms (noVNC's core/input/keysym.js, X11's keysymdef.h) with the
// KeyboardEvent.code noVNC turns into the XT scancode of QEMU's extended
// key event.
const key = (keysym, code) => Object.freeze({ keysym, code });

export const keysyms = Object.freeze({
  ctrl: key(0xffe3, 'ControlLeft'), // XK_Control_L
  alt: key(0xffe9, 'AltLeft'), // XK_Alt_L
  del: key(0xffff, 'Delete'), // XK_Delete
  super: key(0xffeb, 'MetaLeft'), // XK_Super_L
  tab: key(0xff09, 'Tab'), // XK_Tab
  esc: key(0xff1b, 'Escape'), // XK_Escape
});

/** fkey is the keysym of F1…F12: XK_F1 is 0xffbe, and they follow in order. */
export function fkey(n) {
  if (!Number.isInteger(n) || n < 1 || n > 12) throw new RangeError(`no key F${n}`);
  return key(0xffbe + n - 1, `F${n}`);
}

// combo is a key with modifiers held down around it.
const combo = (label, mods, k) => Object.freeze({ label, mods: Object.freeze(mods), key: k });

/** combos are the keys the page offers, by id, in menu order. */
export const combos = Object.freeze(Object.fromEntries([
  ['ctrl-alt-del', combo('Ctrl+Alt+Del', [keysyms.ctrl, keysyms.alt], keysyms.del)],
  ...Array.from({ length: 12 }, (_, i) => [`ctrl-alt-f${i + 1}`, combo(`Ctrl+Alt+F${i + 1}`, [keysyms.ctrl, keysyms.alt], fkey(i + 1))]),
  ['super', combo('Super (Win)', [], keysyms.super)],
  ['tab', combo('Tab', [], keysyms.tab)],
  ['esc', combo('Esc', [], keysyms.esc)],
]));

/**
 * strokes is the key events of combo id, in order: the modifiers down, the
 * key down and up, the modifiers up in reverse, as a person presses them.
 * Each is {keysym, code, down}.
 */
export function strokes(id) {
  const c = Object.hasOwn(combos, id) ? combos[id] : null;
  if (!c) throw new RangeError(`no key combination ${id}`);
  const ev = (k, down) => ({ keysym: k.keysym, code: k.code, down });
  return [
    ...c.mods.map((m) => ev(m, true)),
    ev(c.key, true), ev(c.key, false),
    ...c.mods.slice().reverse().map((m) => ev(m, false)),
  ];
}
