// Unit tests of the display's settings: `npm test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  resolve, fromQuery, fromStorage, toStorage, withQuery, defaults, resizeModes, clipboardTooLong, maxClipboardBytes,
} from './settings.js';

test('the default is local scaling with full control', () => {
  assert.deepEqual(resolve('', null), { resize: 'scale', viewOnly: false, locked: [] });
  assert.deepEqual(resizeModes[defaults.resize], { scaleViewport: true, resizeSession: false });
});

test('noVNC\'s query parameters: view_only and resize', () => {
  const cases = {
    '?view_only=1': { viewOnly: true },
    '?view_only=true': { viewOnly: true },
    '?view_only=0': { viewOnly: false },
    '?view_only=maybe': {},
    '?view_only=': {},
    '?resize=remote': { resize: 'remote' },
    '?resize=off&view_only=yes': { resize: 'off', viewOnly: true },
    '?resize=downscale': {},
    '': {},
  };
  for (const [q, want] of Object.entries(cases)) assert.deepEqual(fromQuery(q), want, q);
});

test('the URL wins over what the user chose before, which wins over the default', () => {
  const stored = toStorage({ resize: 'remote', viewOnly: true });
  assert.deepEqual(resolve('', stored), { resize: 'remote', viewOnly: true, locked: [] });
  assert.deepEqual(resolve('?view_only=0', stored), { resize: 'remote', viewOnly: false, locked: ['viewOnly'] });
  assert.deepEqual(resolve('?resize=off', stored), { resize: 'off', viewOnly: true, locked: ['resize'] });
});

test('stored junk reads as nothing, and only known settings are stored', () => {
  for (const junk of ['{', '"x"', '[1]', '{"resize":"huge","viewOnly":"yes"}', 'null', '']) {
    assert.deepEqual(fromStorage(junk), {}, junk);
  }
  assert.equal(toStorage({ resize: 'off', viewOnly: false, token: 'secret', locked: ['x'] }), '{"resize":"off","viewOnly":false}');
});

test('withQuery keeps the other parameters and writes noVNC\'s names', () => {
  assert.equal(withQuery('?view_only=1&x=y', 'viewOnly', false), '?view_only=0&x=y');
  assert.equal(withQuery('', 'resize', 'remote'), '?resize=remote');
  assert.equal(withQuery('?resize=off', 'resize', 'scale'), '?resize=scale');
});

test('the clipboard limit counts UTF-8 bytes, within the bridge\'s 1 MiB', () => {
  assert.ok(maxClipboardBytes * 4 <= 1 << 20);
  assert.equal(clipboardTooLong('a'.repeat(maxClipboardBytes)), false);
  assert.equal(clipboardTooLong('a'.repeat(maxClipboardBytes + 1)), true);
  assert.equal(clipboardTooLong('é'.repeat(maxClipboardBytes / 2 + 1)), true);
});
