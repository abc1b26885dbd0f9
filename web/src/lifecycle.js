// Start on connect, the progress page and the idle banner, without the DOM.
// The bridge answers GET …/status with {phase, message, connectable,
// idleStopAt, canStart} (bridge/phase.go); session.js's Client drives the
// classes here, app.js draws what they ask for.
import { Code, splitReason } from './policy.js';
import { vmURL } from './location.js';

/** progressInterval is how often the progress page polls the status. */
export const progressInterval = 1000;

/** statusInterval is how often a connected page polls for an idle notice. */
export const statusInterval = 30_000;

/**
 * startTimeout is how long the progress page waits for the instance to run
 * before it gives up and offers to retry: KubeVirt may be unable to
 * schedule it, and says so only in its events.
 */
export const startTimeout = 5 * 60_000;

/**
 * restartSettle is how long, after a restart, the page waits to see the old
 * instance go before it trusts a "connectable" status: the old instance is
 * running still when the restart is accepted.
 */
export const restartSettle = 15_000;

/** The phases the progress page shows, in order, with their labels. */
export const steps = Object.freeze([
  { phase: 'stopped', label: 'Stopped' },
  { phase: 'starting', label: 'Starting' },
  { phase: 'scheduled', label: 'Scheduled on a node' },
  { phase: 'booting', label: 'Booting' },
  { phase: 'guest-answering', label: 'Guest answering' },
]);

/**
 * vmStopped says whether a session's close means the VM is stopped: the
 * bridge refuses with 412 and reason VMStopped (bridge/target.go classify).
 */
export function vmStopped(code, reason) {
  return code === Code.HTTPBase + 412 && splitReason(reason).reason === 'VMStopped';
}

/**
 * stepIndex is where phase is in steps; ready counts as the last step,
 * stopping as the first, an unknown phase as -1.
 */
export function stepIndex(phase) {
  if (phase === 'ready') return steps.length - 1;
  if (phase === 'stopping') return 0;
  return steps.findIndex((s) => s.phase === phase);
}

/** formatCountdown shows ms as mm:ss, never below 00:00. */
export function formatCountdown(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const mm = String(Math.floor(s / 60)).padStart(2, '0');
  return `${mm}:${String(s % 60).padStart(2, '0')}`;
}

/**
 * idleNotice is the banner's text for a status at now (ms), or '' when no
 * idle stop is pending.
 */
export function idleNotice(status, now) {
  const at = Date.parse(status?.idleStopAt || '');
  if (Number.isNaN(at)) return '';
  return `This workstation will stop in ${formatCountdown(at - now)} because it has been idle`;
}

/** messageOf reads a bridge refusal's message, or falls back to text. */
export async function messageOf(resp, text) {
  try {
    return (await resp.json()).message || text;
  } catch {
    return text;
  }
}

/**
 * Progress polls a starting VM's status until its console and display can
 * be opened, then calls onReady once. It is not safe for concurrent use.
 *
 * deps: {vm, token, request, clock, view, interval?, timeout?};
 * view.progress({phase, message, step}) draws the page;
 * onReady() connects; onTimeout(message) gives up.
 */
export class Progress {
  #d;
  #timer = 0;
  #started = 0;
  #sawStop;
  #done = false;

  constructor(deps, { afterRestart = false, onReady, onTimeout }) {
    this.#d = { interval: progressInterval, timeout: startTimeout, ...deps, onReady, onTimeout };
    this.#sawStop = !afterRestart;
  }

  /** start shows the page and polls until ready, timed out or stopped. */
  start(initial) {
    this.#started = this.#d.clock.now();
    if (initial) this.#show(initial);
    this.#poll();
  }

  /** stop ends the polling; onReady is not called after it. */
  stop() {
    this.#done = true;
    this.#d.clock.clearTimeout(this.#timer);
  }

  async #poll() {
    if (this.#done) return;
    const { clock } = this.#d;
    let st = null;
    try {
      const resp = await this.#d.request(vmURL(this.#d.vm, 'status'), { token: this.#d.token });
      if (resp.ok) st = await resp.json();
    } catch { /* the next poll tries again */ }
    if (this.#done) return;
    const elapsed = clock.now() - this.#started;
    if (st) {
      this.#show(st);
      if (!st.connectable) this.#sawStop = true;
      if (st.connectable && (this.#sawStop || elapsed >= restartSettle)) {
        this.#done = true;
        this.#d.onReady(st);
        return;
      }
    }
    if (elapsed >= this.#d.timeout) {
      this.#done = true;
      this.#d.onTimeout(st?.message || 'The workstation did not start in time.');
      return;
    }
    this.#timer = clock.setTimeout(() => this.#poll(), this.#d.interval);
  }

  #show(st) {
    this.#d.view.progress({ phase: st.phase, message: st.message || '', step: stepIndex(st.phase) });
  }
}

/**
 * IdleBanner polls a connected VM's status and shows the idle notice while
 * an idle stop is pending, counting down each second. keepRunning asks the
 * bridge for a keep-running lease. It is not safe for concurrent use.
 *
 * deps: {vm, token, request, clock, view, interval?};
 * view.banner(text) shows the banner ('' hides it);
 * view.bannerMessage(text) says how Keep running went.
 */
export class IdleBanner {
  #d;
  #poller = 0;
  #ticker = 0;
  #status = null;
  #gen = 0; // a poll answered after a stop or a restart of polling is dropped

  constructor(deps) {
    this.#d = { interval: statusInterval, ...deps };
  }

  /** start polls now and every interval. */
  start() {
    this.stop();
    this.#poll();
    this.#poller = this.#d.clock.setInterval(() => this.#poll(), this.#d.interval);
  }

  /** stop ends polling and hides the banner. */
  stop() {
    const { clock } = this.#d;
    clock.clearInterval(this.#poller);
    clock.clearInterval(this.#ticker);
    this.#poller = this.#ticker = 0;
    this.#status = null;
    this.#gen++;
    this.#d.view.banner('');
  }

  /** keepRunning takes a keep-running lease and hides the banner. */
  async keepRunning() {
    const { request, view } = this.#d;
    let resp;
    try {
      resp = await request(vmURL(this.#d.vm, 'keep-running'), { method: 'POST', token: this.#d.token });
    } catch (err) {
      view.bannerMessage(`Keep running failed: ${err.message}`);
      return;
    }
    if (resp.status === 404) {
      view.bannerMessage('This bridge cannot keep the workstation running; using it (typing, moving the mouse) keeps it running.');
      return;
    }
    if (!resp.ok) {
      view.bannerMessage(`Keep running refused: ${await messageOf(resp, resp.statusText)}`);
      return;
    }
    this.#hide();
  }

  #hide() {
    this.#d.clock.clearInterval(this.#ticker);
    this.#ticker = 0;
    this.#status = null;
    this.#d.view.banner('');
  }

  async #poll() {
    const gen = this.#gen;
    let st = null;
    try {
      const resp = await this.#d.request(vmURL(this.#d.vm, 'status'), { token: this.#d.token });
      if (resp.ok) st = await resp.json();
    } catch { /* the next poll tries again */ }
    if (gen !== this.#gen) return;
    if (!st || !st.idleStopAt) {
      if (st) this.#hide();
      return;
    }
    this.#status = st;
    this.#tick();
    if (!this.#ticker) this.#ticker = this.#d.clock.setInterval(() => this.#tick(), 1000);
  }

  #tick() {
    if (this.#status) this.#d.view.banner(idleNotice(this.#status, this.#d.clock.now()));
  }
}
