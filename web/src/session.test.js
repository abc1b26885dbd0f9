// Unit tests of the page's session logic, with a fake socket, clock and
// page: `npm test`. The Chromium tests (test/bridge/browser_test.go) run
// the same Client in the real page against a real bridge.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, settleDelay, reloadRetries, reloadRetryDelay, stableAfter } from './session.js';
import { Backoff, State } from './policy.js';

const vm = { prefix: '', namespace: 'team-a', name: 'ws1' };
const base = '/api/v1/namespaces/team-a/virtualmachines/ws1';

// FakeSocket is a WebSocket the test drives: open(), message(), drop().
class FakeSocket extends EventTarget {
  constructor(path, protocols) {
    super();
    Object.assign(this, { path, protocols, readyState: 0, sent: [], closedWith: null, binaryType: 'blob' });
  }

  send(data) { this.sent.push(data); }

  close(code, reason) {
    this.closedWith = { code, reason };
    this.readyState = 3;
  }

  open() {
    this.readyState = 1;
    this.dispatchEvent(new Event('open'));
  }

  message(bytes) {
    const e = new Event('message');
    e.data = new Uint8Array(bytes).buffer;
    this.dispatchEvent(e);
  }

  // drop is the bridge closing the socket with code and reason.
  drop(code, reason = '') {
    this.readyState = 3;
    const e = new Event('close');
    Object.assign(e, { code, reason });
    this.dispatchEvent(e);
  }
}

// FakeClock runs timers when the test advances it.
class FakeClock {
  t = 1_000_000;
  timers = new Map();
  next = 1;

  now() { return this.t; }
  setTimeout(f, ms) { const id = this.next++; this.timers.set(id, { at: this.t + ms, f }); return id; }
  clearTimeout(id) { this.timers.delete(id); }
  setInterval(f, ms) { const id = this.next++; this.timers.set(id, { at: this.t + ms, f, every: ms }); return id; }
  clearInterval(id) { this.timers.delete(id); }

  advance(ms) {
    const end = this.t + ms;
    for (;;) {
      const due = [...this.timers].filter(([, x]) => x.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      const [id, x] = due;
      this.t = x.at;
      if (x.every) x.at += x.every; else this.timers.delete(id);
      x.f();
    }
    this.t = end;
  }
}

// rig is a Client on fakes, with what the page would show.
function rig({
  sessions = { sessions: [] }, restart = { ok: true }, confirm = true,
  start = { status: 202, body: { phase: 'starting', message: 'Starting', connectable: false } },
  statuses = [{ phase: 'ready', message: 'Ready', connectable: true }], keepRunning = { status: 200, body: {} },
} = {}) {
  const r = {
    progress: [], banner: '', bannerMessage: '', vmStatuses: [...statuses], start, keepRunning,
    sockets: [], requests: [], statuses: [], panel: '', notice: null, holder: null,
    login: null, sshForm: null, reconnectLabel: '', tokenForgotten: false, fragment: '', tabs: '',
    display: { attached: null, detached: 0, focused: 0 },
    terminal: { written: [], resets: 0, opened: 0, size: { cols: 100, rows: 30 } },
    clock: new FakeClock(),
    sessions, restart,
  };
  const view = {
    status: (state, text, code, signedIn) => r.statuses.push({ state, text, code, signedIn }),
    show: (which) => { r.panel = which; },
    reconnectButton: (label) => { r.reconnectLabel = label; },
    notice: (n) => { r.notice = { ...n }; },
    noticeText: (text) => { r.notice.text = text; },
    holder: (user) => { r.holder = user; },
    login: (message) => { r.login = message; r.panel = 'login'; },
    sshForm: (message) => { r.sshForm = message; r.panel = 'ssh'; },
    tabs: (mode) => { r.tabs = mode; },
    modeChanged: (mode) => { r.fragment = `#mode=${mode}`; },
    forgetToken: () => { r.tokenForgotten = true; },
    confirm: () => confirm,
    progress: (p) => { r.progress.push(p); },
    banner: (text) => { r.banner = text; },
    bannerMessage: (text) => { r.bannerMessage = text; },
  };
  const display = {
    attach: (ws, handlers) => { r.display.attached = { ws, ...handlers }; },
    detach: () => { r.display.detached++; },
    focus: () => { r.display.focused++; },
  };
  const terminal = {
    open: () => { r.terminal.opened++; },
    write: (b) => r.terminal.written.push([...b]),
    reset: () => { r.terminal.resets++; },
    focus: () => {},
    get size() { return r.terminal.size; },
  };
  const request = async (path, { method = 'GET', token }) => {
    r.requests.push({ path, method, token });
    const answer = (status, body) => ({ ok: status < 300, status, statusText: 'Refused', json: async () => body });
    if (path.endsWith('/status')) {
      // Each poll takes the next status; the last one stays.
      return answer(200, r.vmStatuses.length > 1 ? r.vmStatuses.shift() : r.vmStatuses[0]);
    }
    if (path.endsWith('/start')) return answer(r.start.status, r.start.body);
    if (path.endsWith('/keep-running')) return answer(r.keepRunning.status, r.keepRunning.body);
    const body = path.endsWith('/sessions') ? r.sessions : r.restart;
    return { ok: body.ok !== false, status: body.ok !== false ? 200 : 409, statusText: 'Conflict', json: async () => body };
  };
  const dial = (path, protocols) => {
    const ws = new FakeSocket(path, protocols);
    r.sockets.push(ws);
    return ws;
  };
  r.client = new Client({ vm, view, display, terminal, request, dial, clock: r.clock, backoff: new Backoff({ jitter: 0 }) });
  r.ws = () => r.sockets.at(-1);
  r.status = () => r.statuses.at(-1);
  r.states = () => r.statuses.map((s) => s.state);
  return r;
}

// settle lets the sessions list's promise chain finish.
const settle = () => new Promise((resolve) => setImmediate(resolve));

test('without a token the page asks for one, then connects with it in the subprotocol only', () => {
  const r = rig();
  r.client.start({ token: '', mode: 'display' });
  assert.equal(r.status().state, State.signedOut);
  assert.equal(r.panel, 'login');
  assert.equal(r.sockets.length, 0);

  assert.equal(r.client.signIn('  tok  '), 'tok');
  assert.equal(r.ws().path, `${base}/vnc`);
  assert.deepEqual(r.ws().protocols, ['binary', 'base64url.bearer.authorization.k8s.io.dG9r']);
  assert.equal(r.status().state, State.connecting);
  assert.equal(r.status().signedIn, true);
  r.ws().open();
  r.display.attached.onConnect();
  assert.equal(r.status().state, State.connected);
  assert.match(r.status().text, /display of team-a\/ws1/);
});

test('a refused terminal session is never shown as connected and gets no credentials', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'ssh' });
  assert.equal(r.panel, 'ssh', 'SSH asks for the guest credentials first');
  r.client.submitSSH({ user: 'dev', password: 'pw' });
  const ws = r.ws();
  assert.equal(ws.path, `${base}/ssh`);
  ws.open();
  r.clock.advance(settleDelay / 2);
  ws.drop(4403, 'Forbidden: alice may not');
  r.clock.advance(settleDelay);
  assert.ok(!r.states().includes(State.connected), `states ${r.states()}`);
  assert.deepEqual(ws.sent, []);
  assert.equal(r.status().state, State.refused);
  assert.equal(r.notice.text, 'alice may not');
});

test('SSH: the hello carries the credentials and the terminal size; a refusal forgets them', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'ssh' });
  r.client.submitSSH({ user: 'dev', privateKey: 'KEY' });
  r.ws().open();
  r.clock.advance(settleDelay);
  assert.equal(r.status().state, State.connected);
  assert.deepEqual(JSON.parse(r.ws().sent[0]), { type: 'ssh', user: 'dev', privateKey: 'KEY', cols: 100, rows: 30 });
  r.client.input(new Uint8Array([108, 115]));
  r.client.resize(120, 40);
  assert.deepEqual([...r.ws().sent[1]], [108, 115]);
  assert.deepEqual(JSON.parse(r.ws().sent[2]), { type: 'resize', cols: 120, rows: 40 });
  r.ws().message([104, 105]);
  assert.deepEqual(r.terminal.written, [[104, 105]]);

  r.ws().drop(4011, 'the guest refused the key');
  assert.equal(r.panel, 'ssh');
  assert.equal(r.sshForm, 'the guest refused the key');
  const dials = r.sockets.length;
  r.client.reconnect();
  assert.equal(r.sockets.length, dials, 'no dial without credentials');
  assert.equal(r.panel, 'ssh');
});

test('held: the take-over prompt names the holder from the sessions list', async () => {
  const since = '2030-01-02T03:04:05Z';
  const r = rig({ sessions: { sessions: [{ mode: 'console', holder: { user: 'alice', since } }] } });
  r.client.start({ token: 'bob-token', mode: 'serial' });
  r.ws().open();
  r.ws().drop(4409, 'SessionHeld: held by alice since 03:04:05Z; take over to continue');
  assert.equal(r.status().state, State.held);
  assert.equal(r.panel, 'prompt');
  assert.equal(r.notice.takeover, true);
  assert.match(r.notice.text, /in use: held by alice/, 'the close text until the list answers');
  await settle();
  assert.deepEqual(r.requests.at(-1), { path: `${base}/sessions`, method: 'GET', token: 'bob-token' });
  assert.equal(r.holder, 'alice');
  assert.equal(r.status().text, 'In use by alice');
  assert.match(r.notice.text, /in use by alice since .*Take it over\?/);

  r.clock.advance(60_000);
  assert.equal(r.sockets.length, 1, 'a held session does not retry by itself');
  r.client.takeOver();
  assert.equal(r.ws().path, `${base}/console?takeover=true`);
});

test('held: a sessions list that answers after the user moved on changes nothing', async () => {
  const r = rig({ sessions: { sessions: [{ mode: 'console', holder: { user: 'alice', since: '' } }] } });
  r.client.start({ token: 't', mode: 'serial' });
  r.ws().drop(4409, 'SessionHeld: held by alice since 03:04:05Z; take over to continue');
  r.client.switchMode('display');
  await settle();
  assert.equal(r.holder, '');
  assert.equal(r.status().state, State.connecting);
});

test('held by a reservation: the prompt says for whom', async () => {
  const r = rig({ sessions: { sessions: [{ mode: 'vnc', holder: { user: 'bob', since: '2030-01-02T03:04:05Z', reserved: true } }] } });
  r.client.start({ token: 't', mode: 'display' });
  r.ws().drop(4409, 'SessionHeld: reserved for bob by a take-over at 03:04:05Z');
  await settle();
  assert.match(r.notice.text, /reserved for bob, who took it over/);
});

test('taken over: named from the sessions list, and no reconnect by itself', async () => {
  const r = rig({ sessions: { sessions: [{ mode: 'console', holder: { user: 'bob', since: '', reserved: true } }] } });
  r.client.start({ token: 't', mode: 'serial' });
  r.ws().open();
  r.clock.advance(settleDelay);
  r.ws().drop(4001, 'taken over by another user (bob)');
  assert.equal(r.status().state, State.takenOver);
  assert.equal(r.status().code, 4001);
  await settle();
  assert.match(r.status().text, /taken over by bob\./);
  assert.match(r.notice.text, /taken over by bob\./);
  assert.equal(r.reconnectLabel, 'Reconnect');
  r.clock.advance(120_000);
  assert.equal(r.sockets.length, 1);
});

test('a dropped session reconnects with a doubling backoff that resets once a session lasts', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'serial' });
  const delays = [];
  for (let i = 0; i < 3; i++) {
    const before = r.sockets.length;
    r.ws().open();
    r.ws().drop(1006);
    assert.equal(r.status().state, State.reconnecting);
    const t0 = r.clock.now();
    while (r.sockets.length === before) r.clock.advance(250);
    delays.push(r.clock.now() - t0);
  }
  assert.deepEqual(delays, [1000, 2000, 4000]);
  r.ws().open();
  r.clock.advance(stableAfter);
  r.ws().drop(1001, 'shutting down');
  assert.match(r.status().text, /Reconnecting in 1 s/);
});

test('after a reload the page retries a held session quietly before it prompts', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'serial', reloaded: true });
  for (let i = 0; i < reloadRetries; i++) {
    r.ws().drop(4409, 'SessionHeld: held by me since 03:04:05Z; take over to continue');
    assert.equal(r.status().state, State.connecting, `retry ${i}`);
    r.clock.advance(reloadRetryDelay);
  }
  assert.equal(r.sockets.length, reloadRetries + 1);
  r.ws().drop(4409, 'SessionHeld: held by me since 03:04:05Z; take over to continue');
  assert.equal(r.status().state, State.held);
});

test('a refused token signs the page out', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'display' });
  r.ws().drop(4401, 'Unauthorized: the token was not accepted');
  assert.equal(r.status().state, State.signedOut);
  assert.equal(r.status().signedIn, false);
  assert.equal(r.tokenForgotten, true);
  assert.match(r.login, /did not accept the token/);
});

test('switching modes closes the open session and opens the new one', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'display' });
  const old = r.ws();
  old.open();
  r.client.switchMode('serial');
  assert.deepEqual(old.closedWith, { code: 1000, reason: 'closed by the user' });
  assert.equal(r.display.detached, 1);
  assert.equal(r.ws().path, `${base}/console`);
  assert.equal(r.fragment, '#mode=serial');
  assert.equal(r.tabs, 'serial');
  old.drop(1000);
  assert.equal(r.status().state, State.connecting, 'the old socket\'s close is ignored');
  r.client.switchMode('nonsense');
  assert.equal(r.client.mode, 'serial');
});

test('leaving SSH forgets the guest credentials', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'ssh' });
  r.client.submitSSH({ user: 'dev', password: 'pw' });
  r.client.switchMode('serial');
  assert.equal(r.terminal.resets, 1, 'the terminal starts clean');
  r.client.switchMode('ssh');
  assert.equal(r.panel, 'ssh');
});

test('leaving the page keeps the mode for a quiet retry only when connected', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'serial' });
  assert.equal(r.client.leave(), null);
  r.client.connect();
  r.ws().open();
  r.clock.advance(settleDelay);
  assert.deepEqual(r.client.leave(), { mode: 'serial', at: r.clock.now() });
  assert.equal(r.ws().closedWith.code, 1000);
});

test('input and resize go nowhere without an open terminal session', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'display' });
  r.ws().open();
  r.client.input(new Uint8Array([1]));
  r.client.resize(1, 1);
  assert.deepEqual(r.ws().sent, []);
});

test('restart asks first, then reports what the bridge said', async () => {
  const cases = {
    // Accepted: the progress page follows (see the restart test below).
    accepted: [{ ok: true }, true, /Starting team-a\/ws1/],
    refused: [{ ok: false, message: 'alice may not restart' }, true, /Restart refused: alice may not restart/],
    declined: [{ ok: true }, false, null],
  };
  for (const [name, [restart, confirm, want]] of Object.entries(cases)) {
    const r = rig({ restart, confirm });
    r.client.start({ token: 't', mode: 'display' });
    const n = r.statuses.length;
    await r.client.restart();
    if (!want) {
      assert.equal(r.requests.length, 0, name);
      assert.equal(r.statuses.length, n, name);
      continue;
    }
    assert.deepEqual(r.requests.find((q) => q.method === 'POST'), { path: `${base}/restart`, method: 'POST', token: 't' }, name);
    assert.match(r.status().text, want, name);
    assert.equal(r.status().state, State.connecting, `${name}: the session's state stays`);
  }
});

test('view only opens the display with ?view_only=1, says so, and leaves the terminals alone', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'display', viewOnly: true });
  assert.equal(r.ws().path, `${base}/vnc?view_only=1`);
  r.ws().open();
  r.display.attached.onConnect();
  assert.equal(r.status().state, State.connected);
  assert.match(r.status().text, /\(view only\)$/);
  r.client.switchMode('serial');
  assert.equal(r.ws().path, `${base}/console`, 'the serial console has no view only');
});

test('a take-over keeps view only in the same request', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'display', viewOnly: true });
  r.ws().drop(4409, 'SessionHeld: held by bob since 03:04:05Z; take over to continue');
  r.client.takeOver();
  assert.equal(r.ws().path, `${base}/vnc?takeover=true&view_only=1`);
});

test('changing view only reopens an open display session, retrying quietly while the old one is released', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'display' });
  const first = r.ws();
  first.open();
  r.display.attached.onConnect();
  r.client.setViewOnly(true);
  assert.deepEqual(first.closedWith, { code: 1000, reason: 'closed by the user' });
  assert.equal(r.ws().path, `${base}/vnc?view_only=1`);
  // The bridge has not yet released the session this page just closed.
  r.ws().drop(4409, 'SessionHeld: held by me since 03:04:05Z; take over to continue');
  assert.equal(r.status().state, State.connecting, 'no take-over prompt for our own session');
  r.clock.advance(reloadRetryDelay);
  assert.equal(r.sockets.length, 3);
  r.ws().open();
  r.display.attached.onConnect();
  assert.match(r.status().text, /\(view only\)$/);
  r.client.setViewOnly(true);
  assert.equal(r.sockets.length, 3, 'no change, no new session');
  r.client.setViewOnly(false);
  assert.equal(r.ws().path, `${base}/vnc`);
});

test('changing view only while no display session is open opens none', () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'serial' });
  r.client.setViewOnly(true);
  assert.equal(r.sockets.length, 1);
  assert.equal(r.client.viewOnly, true);
  r.client.switchMode('display');
  assert.equal(r.ws().path, `${base}/vnc?view_only=1`);
  r.ws().drop(4001, 'taken over by bob');
  r.client.setViewOnly(false);
  assert.equal(r.sockets.length, 2, 'a taken-over page stays down');
});

// flush lets the fake request promises resolve.
const flush = () => new Promise((resolve) => setImmediate(resolve));

const stoppedClose = [4412, 'VMStopped: VM team-a/ws1 is stopped; start it (virtctl start ws1 -n team-a) and try again'];

test('a stopped VM is started, the progress page follows it, then the display connects without a reload', async () => {
  const r = rig({
    statuses: [
      { phase: 'starting', message: 'Starting', connectable: false },
      { phase: 'scheduled', message: 'Scheduled', connectable: false },
      { phase: 'booting', message: 'Booting', connectable: true },
    ],
  });
  r.client.start({ token: 't', mode: 'display' });
  r.ws().drop(...stoppedClose);
  await flush();
  assert.deepEqual(r.requests[0], { path: `${base}/start`, method: 'POST', token: 't' });
  assert.equal(r.panel, 'progress');
  assert.deepEqual(r.progress.map((p) => p.phase), ['starting', 'starting']); // the start's answer, then the first poll
  assert.equal(r.sockets.length, 1, 'no dial while the VM starts');
  r.clock.advance(1000);
  await flush();
  assert.equal(r.progress.at(-1).phase, 'scheduled');
  assert.equal(r.progress.at(-1).step, 2);
  r.clock.advance(1000);
  await flush();
  assert.equal(r.progress.at(-1).phase, 'booting');
  assert.equal(r.sockets.length, 2, 'connects once the instance runs');
  assert.equal(r.ws().path, `${base}/vnc`);
});

test('a reconnect the client makes by itself never starts a stopped VM (an open tab does not undo an idle stop)', async () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'serial' });
  r.ws().open();
  r.ws().drop(1006); // the VM was stopped under the session
  while (r.sockets.length === 1) r.clock.advance(250);
  r.ws().drop(...stoppedClose);
  await flush();
  assert.equal(r.requests.length, 0, 'no start from an automatic reconnect');
  assert.match(r.status().text, /is stopped/);
  assert.equal(r.reconnectLabel, 'Start');
  r.client.reconnect(); // the user asks
  r.ws().drop(...stoppedClose);
  await flush();
  assert.deepEqual(r.requests[0], { path: `${base}/start`, method: 'POST', token: 't' });
});

test('a user who may not start the VM is told why, and nothing is retried', async () => {
  const r = rig({ start: { status: 403, body: { message: 'user "bob" may not do this on team-a/ws1: it needs update on virtualmachines/start in API group subresources.kubevirt.io' } } });
  r.client.start({ token: 't', mode: 'serial' });
  r.ws().drop(...stoppedClose);
  await flush();
  assert.equal(r.status().state, State.refused);
  assert.match(r.status().text, /you may not start it: .*update on virtualmachines\/start/);
  assert.equal(r.panel, 'prompt');
  assert.equal(r.notice.reconnect, false);
  r.clock.advance(60_000);
  await flush();
  assert.equal(r.requests.length, 1, 'no status polls after a refusal');
  assert.equal(r.sockets.length, 1);
});

test('the progress page gives up after the start timeout and offers a retry', async () => {
  const r = rig({ statuses: [{ phase: 'starting', message: 'Starting: waiting for a node', connectable: false }] });
  r.client.start({ token: 't', mode: 'display' });
  r.ws().drop(...stoppedClose);
  await flush();
  for (let i = 0; i < 301; i++) {
    r.clock.advance(1000);
    await flush();
  }
  assert.equal(r.status().state, State.refused);
  assert.match(r.status().text, /waiting for a node/);
  assert.equal(r.reconnectLabel, 'Retry');
  assert.equal(r.sockets.length, 1);
});

test('after a restart the progress page waits for the old instance to go before it connects', async () => {
  const r = rig({
    statuses: [
      { phase: 'ready', connectable: true }, // the banner's poll while connected
      { phase: 'ready', connectable: true }, // the old instance, still running
      { phase: 'stopping', connectable: false },
      { phase: 'booting', connectable: true },
    ],
  });
  r.client.start({ token: 't', mode: 'serial' });
  r.ws().open();
  r.clock.advance(200);
  await r.client.restart();
  await flush();
  assert.equal(r.panel, 'progress');
  assert.equal(r.sockets.length, 1, 'the old instance is not taken for the new one');
  r.clock.advance(1000);
  await flush();
  assert.equal(r.sockets.length, 1);
  r.clock.advance(1000);
  await flush();
  assert.equal(r.sockets.length, 2, 'connects to the new instance');
});

test('the idle banner counts down while a stop is due, and Keep running hides it', async () => {
  const at = Date.parse('2026-12-06T18:00:00Z');
  const r = rig({ statuses: [{ phase: 'ready', connectable: true }, { phase: 'ready', connectable: true, idleStopAt: '2026-12-06T18:00:00Z' }] });
  r.clock.t = at - 125_000;
  r.client.start({ token: 't', mode: 'serial' });
  r.ws().open();
  r.clock.advance(settleDelay);
  await flush();
  assert.equal(r.banner, '', 'no banner without a notice');
  r.clock.advance(30_000);
  await flush();
  assert.equal(r.banner, 'This workstation will stop in 01:35 because it has been idle');
  r.clock.advance(1000);
  assert.equal(r.banner, 'This workstation will stop in 01:34 because it has been idle');
  await r.client.keepRunning();
  assert.deepEqual(r.requests.at(-1), { path: `${base}/keep-running`, method: 'POST', token: 't' });
  assert.equal(r.banner, '');
});

test('Keep running on a bridge without it says so and keeps the banner', async () => {
  const r = rig({ statuses: [{ phase: 'ready', connectable: true, idleStopAt: new Date(2_000_000).toISOString() }], keepRunning: { status: 404, body: {} } });
  r.client.start({ token: 't', mode: 'serial' });
  r.ws().open();
  r.clock.advance(settleDelay);
  await flush();
  assert.match(r.banner, /will stop in/);
  await r.client.keepRunning();
  assert.match(r.bannerMessage, /cannot keep the workstation running/);
  assert.match(r.banner, /will stop in/);
});

test('the banner stops polling when the session ends', async () => {
  const r = rig();
  r.client.start({ token: 't', mode: 'serial' });
  r.ws().open();
  r.clock.advance(settleDelay);
  await flush();
  const n = r.requests.length;
  r.client.switchMode('display');
  r.clock.advance(120_000);
  await flush();
  assert.equal(r.requests.length, n, 'no status polls without a connected session');
});
