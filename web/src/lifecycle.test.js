// Unit tests of lifecycle.js's pure parts: `npm test`. The flows (start,
// progress, banner) are tested through the Client in session.test.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { vmStopped, stepIndex, formatCountdown, idleNotice, steps } from './lifecycle.js';

test('only a 412 VMStopped close means the VM is stopped', () => {
  assert.equal(vmStopped(4412, 'VMStopped: VM a/b is stopped'), true);
  assert.equal(vmStopped(4412, 'VMINotRunning: not yet'), false);
  assert.equal(vmStopped(4503, 'VMStopped: x'), false);
  assert.equal(vmStopped(1006, ''), false);
});

test('phases map to the progress steps in order', () => {
  assert.deepEqual(steps.map((s) => stepIndex(s.phase)), [0, 1, 2, 3, 4]);
  assert.equal(stepIndex('ready'), 4);
  assert.equal(stepIndex('stopping'), 0);
  assert.equal(stepIndex('unheard-of'), -1);
});

test('the countdown is mm:ss, rounded up, never negative', () => {
  assert.equal(formatCountdown(0), '00:00');
  assert.equal(formatCountdown(-5000), '00:00');
  assert.equal(formatCountdown(1), '00:01');
  assert.equal(formatCountdown(95_000), '01:35');
  assert.equal(formatCountdown(3_600_000), '60:00');
});

test('the idle notice needs a time it can read', () => {
  const at = Date.parse('2026-12-06T18:00:00Z');
  assert.equal(idleNotice({ idleStopAt: '2026-12-06T18:00:00Z' }, at - 61_000), 'This workstation will stop in 01:01 because it has been idle');
  assert.equal(idleNotice({}, at), '');
  assert.equal(idleNotice({ idleStopAt: 'soon' }, at), '');
  assert.equal(idleNotice(null, at), '');
});
