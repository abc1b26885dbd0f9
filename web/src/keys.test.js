// Unit tests of the extra keys: `npm test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { combos, fkey, keysyms, strokes } from './keys.js';

test('Ctrl+Alt+Del is what noVNC\'s sendCtrlAltDel sends', () => {
  assert.deepEqual(strokes('ctrl-alt-del'), [
    { keysym: 0xffe3, code: 'ControlLeft', down: true },
    { keysym: 0xffe9, code: 'AltLeft', down: true },
    { keysym: 0xffff, code: 'Delete', down: true },
    { keysym: 0xffff, code: 'Delete', down: false },
    { keysym: 0xffe9, code: 'AltLeft', down: false },
    { keysym: 0xffe3, code: 'ControlLeft', down: false },
  ]);
});

test('Ctrl+Alt+F1 to F12 switch virtual terminals with X11\'s function keysyms', () => {
  const want = [0xffbe, 0xffbf, 0xffc0, 0xffc1, 0xffc2, 0xffc3, 0xffc4, 0xffc5, 0xffc6, 0xffc7, 0xffc8, 0xffc9];
  for (let n = 1; n <= 12; n++) {
    const s = strokes(`ctrl-alt-f${n}`);
    assert.equal(s.length, 6);
    assert.deepEqual(s[2], { keysym: want[n - 1], code: `F${n}`, down: true });
    assert.deepEqual(s.map((e) => e.down), [true, true, true, false, false, false]);
    assert.deepEqual([s[0].code, s[1].code, s[4].code, s[5].code], ['ControlLeft', 'AltLeft', 'AltLeft', 'ControlLeft']);
  }
  assert.throws(() => fkey(0), RangeError);
  assert.throws(() => fkey(13), RangeError);
});

test('single keys are pressed and released', () => {
  const cases = { super: [0xffeb, 'MetaLeft'], tab: [0xff09, 'Tab'], esc: [0xff1b, 'Escape'] };
  for (const [id, [keysym, code]] of Object.entries(cases)) {
    assert.deepEqual(strokes(id), [{ keysym, code, down: true }, { keysym, code, down: false }], id);
  }
});

test('every offered combination has a label and releases what it pressed', () => {
  assert.ok(Object.keys(combos).length >= 16);
  for (const [id, c] of Object.entries(combos)) {
    assert.ok(c.label, id);
    const held = new Map();
    for (const e of strokes(id)) held.set(e.keysym, (held.get(e.keysym) || 0) + (e.down ? 1 : -1));
    assert.ok([...held.values()].every((n) => n === 0), `${id} leaves a key down`);
  }
  assert.throws(() => strokes('toString'), RangeError);
  assert.throws(() => strokes('ctrl-alt-f13'), RangeError);
  assert.equal(keysyms.ctrl.keysym, 0xffe3);
});
