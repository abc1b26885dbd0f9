// Unit tests of the close-code policy and the fragment handling: `npm test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decide, Backoff, State, Reconnect, holderOf, splitReason, takenOverMessage,
} from './policy.js';
import { readFragment, fragmentFor, parseVMPath, vmURL, bearerSubprotocol } from './location.js';

test('close codes decide what the page does', () => {
  const cases = {
    'taken over: no reconnect': [4001, 'taken over by another user (system:serviceaccount:team-a:bob)',
      { state: State.takenOver, reconnect: Reconnect.manual }],
    'idle: a button, not a timer': [4002, 'no input for 6h0m0s', { state: State.idle, reconnect: Reconnect.manual }],
    'held: the take-over prompt': [4409, 'SessionHeld: held by alice since 10:11:12Z; take over to continue',
      { state: State.held, reconnect: Reconnect.none, message: 'held by alice since 10:11:12Z; take over to continue' }],
    'held outside the bridge: the reason, no prompt': [4409, 'HeldOutsideBridge: the VM\'s vnc is held by a client',
      { state: State.refused, reconnect: Reconnect.manual }],
    'unauthorized: sign in again': [4401, 'Unauthorized: the token was not accepted', { state: State.signedOut, reconnect: Reconnect.none }],
    forbidden: [4403, 'Forbidden: alice may not', { state: State.refused, reconnect: Reconnect.manual, message: 'alice may not' }],
    'not found': [4404, 'VMNotFound: no VM', { state: State.refused, reconnect: Reconnect.manual }],
    'stopped VM': [4412, 'VMStopped: start it', { state: State.refused, reconnect: Reconnect.manual }],
    'VM starting: back off': [4503, 'VMINotRunning: starting', { state: State.reconnecting, reconnect: Reconnect.auto }],
    'upstream closed: back off': [4004, 'the VM closed the console', { state: State.reconnecting, reconnect: Reconnect.auto }],
    'lease lost: back off': [4003, 'reconnect', { state: State.reconnecting, reconnect: Reconnect.auto }],
    'dropped: back off': [1006, '', { state: State.reconnecting, reconnect: Reconnect.auto }],
    'replica going away: back off': [1001, 'shutting down', { state: State.reconnecting, reconnect: Reconnect.auto }],
    'ssh auth failed: the form again': [4011, 'the guest refused', { state: State.sshForm, reconnect: Reconnect.none }],
    'ssh bad hello: the form again': [4013, 'bad first message', { state: State.sshForm, reconnect: Reconnect.none }],
    'ssh host key changed: no reconnect': [4010, 'host key changed', { state: State.refused, reconnect: Reconnect.manual }],
    'normal close': [1000, '', { state: State.ended, reconnect: Reconnect.manual }],
  };
  for (const [name, [code, reason, want]] of Object.entries(cases)) {
    const got = decide(code, reason);
    for (const [k, v] of Object.entries(want)) assert.deepEqual(got[k], v, `${name}: ${k}`);
    assert.ok(got.message, `${name}: a message`);
  }
});

test('the taken-over message names who took over, when the page knows', () => {
  assert.match(takenOverMessage('system:serviceaccount:team-a:bob'), /taken over by system:serviceaccount:team-a:bob\./);
  assert.match(takenOverMessage(''), /taken over by another user\./);
  assert.match(decide(4001, 'taken over by another user (bob)').message, /another user/, 'the close text is not parsed');
});

test('holders come from the sessions list, not from close text', () => {
  const since = '2030-01-02T03:04:05Z';
  const list = {
    namespace: 'team-a', name: 'ws1',
    sessions: [
      { mode: 'console', holder: { user: 'alice', since } },
      { mode: 'vnc', holder: { user: 'bob', since, reserved: true } },
    ],
  };
  const cases = {
    held: [list, 'console', { user: 'alice', since, reserved: false }],
    reserved: [list, 'vnc', { user: 'bob', since, reserved: true }],
    'free mode': [list, 'ssh', null],
    'no sessions': [{ sessions: [] }, 'console', null],
    'not a list': [{ sessions: 'x' }, 'console', null],
    'no body': [null, 'console', null],
    'holder without a user': [{ sessions: [{ mode: 'console', holder: { since } }] }, 'console', null],
    'odd since': [{ sessions: [{ mode: 'console', holder: { user: 'a', since: 7 } }] }, 'console', { user: 'a', since: '', reserved: false }],
  };
  for (const [name, [body, route, want]] of Object.entries(cases)) {
    assert.deepEqual(holderOf(body, route), want, name);
  }
  assert.deepEqual(splitReason('plain text'), { reason: '', message: 'plain text' });
});

test('backoff doubles from 1 s and stops at 30 s', () => {
  const b = new Backoff({ jitter: 0 });
  assert.deepEqual(Array.from({ length: 8 }, () => b.next()), [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  b.reset();
  assert.equal(b.next(), 1000);
  const j = new Backoff({ random: () => 1 });
  for (let i = 0; i < 10; i++) assert.ok(j.next() <= 30000);
});

test('the fragment gives the token and mode; the kept fragment has no token', () => {
  assert.deepEqual(readFragment('#token=abc.def-ghi_j&mode=serial'), { token: 'abc.def-ghi_j', mode: 'serial' });
  assert.deepEqual(readFragment('#mode=nonsense'), { token: '', mode: '' });
  assert.equal(fragmentFor('ssh'), '#mode=ssh');
});

test('VM paths, with and without a proxy prefix', () => {
  const vm = parseVMPath('/proxy/x/ui/namespaces/team-a/virtualmachines/ws1');
  assert.deepEqual(vm, { prefix: '/proxy/x', namespace: 'team-a', name: 'ws1' });
  assert.equal(vmURL(vm, 'console'), '/proxy/x/api/v1/namespaces/team-a/virtualmachines/ws1/console');
  assert.equal(parseVMPath('/ui/namespaces/team-a'), null);
});

test('the bearer subprotocol is base64url without padding', () => {
  assert.equal(bearerSubprotocol('a?b>'), 'base64url.bearer.authorization.k8s.io.YT9iPg');
});
