// Close-code policy: what the page does when a session's WebSocket closes.
// Pure functions, so `npm test` covers them without a browser. The codes are
// the bridge's (bridge/relay/codes.go): 4000+HTTP status for refusals known
// before the session started, 4001 taken over, 4002 idle, and so on.

/** Outcome kinds, also the #status element's data-state. */
export const State = Object.freeze({
  signedOut: 'signed-out',
  connecting: 'connecting',
  connected: 'connected',
  reconnecting: 'reconnecting',
  held: 'held',
  takenOver: 'taken-over',
  idle: 'idle',
  refused: 'refused',
  sshForm: 'ssh-form',
  ended: 'ended',
});

/** How the page gets back: by itself after a delay, by a button, or not. */
export const Reconnect = Object.freeze({ auto: 'auto', manual: 'manual', none: 'none' });

/**
 * Code holds the bridge's close codes, named as in bridge/relay/codes.go
 * without the "Code" prefix. TestCloseCodesMatchThePage (bridge/relay) reads
 * this object and fails when it and the Go constants differ.
 */
export const Code = Object.freeze({
  HTTPBase: 4000,
  TakenOver: 4001,
  Idle: 4002,
  SessionLost: 4003,
  UpstreamClosed: 4004,
  SSHHostKeyChanged: 4010,
  SSHAuthFailed: 4011,
  SSHUnreachable: 4012,
  BadHello: 4013,
  GoingAway: 1001,
  ClientTooSlow: 1008,
  ProtocolError: 1002,
  Normal: 1000,
});

// noStatus is what a browser reports for a close frame without a code
// (RFC 6455 §7.1.5); no bridge sends it.
const noStatus = 1005;

/**
 * splitReason splits a refusal's close reason, "SessionHeld: held by …",
 * into the reason a program switches on and the message a person reads.
 */
export function splitReason(reason) {
  const m = /^([A-Za-z]+): (.*)$/s.exec(reason || '');
  return m ? { reason: m[1], message: m[2] } : { reason: '', message: reason || '' };
}

/**
 * holderOf reads who holds a mode's session from the body of
 * GET …/sessions ({sessions: [{mode, holder: {user, since, reserved}}]}),
 * the bridge's structured answer; a close frame's text is for people only.
 * Null when the route's session is free or the body is not such a list.
 */
export function holderOf(list, route) {
  const s = Array.isArray(list?.sessions) ? list.sessions.find((x) => x?.mode === route) : null;
  const h = s?.holder;
  if (!h || typeof h.user !== 'string' || !h.user) return null;
  return { user: h.user, since: typeof h.since === 'string' ? h.since : '', reserved: h.reserved === true };
}

/** takenOverMessage says who took the session over, when the page knows. */
export function takenOverMessage(user) {
  return `This session was taken over by ${user || 'another user'}. It will not reconnect by itself.`;
}

/**
 * decide maps a close event to what the page shows and whether it
 * reconnects. It returns {state, reconnect, message}. Who holds a session
 * (held, taken over) is not in the close frame as data: the page asks
 * GET …/sessions and reads it with holderOf.
 */
export function decide(code, reason) {
  const { reason: why, message } = splitReason(reason);
  const text = message || reason || '';
  switch (code) {
    case Code.TakenOver:
      return { state: State.takenOver, reconnect: Reconnect.manual, message: takenOverMessage('') };
    case Code.Idle:
      return { state: State.idle, reconnect: Reconnect.manual, message: 'The session was closed after inactivity.' };
    case Code.SessionLost:
    case Code.UpstreamClosed:
    case Code.SSHUnreachable:
      return { state: State.reconnecting, reconnect: Reconnect.auto, message: text || 'The connection ended.' };
    case Code.SSHHostKeyChanged:
      return { state: State.refused, reconnect: Reconnect.manual, message: text };
    case Code.SSHAuthFailed:
    case Code.BadHello:
      return { state: State.sshForm, reconnect: Reconnect.none, message: text };
    case Code.HTTPBase + 401:
      return { state: State.signedOut, reconnect: Reconnect.none, message: text || 'The bridge did not accept the token.' };
    case Code.HTTPBase + 409:
      if (why === 'SessionHeld') {
        return { state: State.held, reconnect: Reconnect.none, message: text };
      }
      return { state: State.refused, reconnect: Reconnect.manual, message: text };
    case Code.HTTPBase + 502:
    case Code.HTTPBase + 503:
    case Code.HTTPBase + 504:
      return { state: State.reconnecting, reconnect: Reconnect.auto, message: text };
    case Code.Normal:
    case noStatus:
      return { state: State.ended, reconnect: Reconnect.manual, message: text || 'The session ended.' };
    default:
      if (code >= Code.HTTPBase && code < Code.HTTPBase + 600) {
        return { state: State.refused, reconnect: Reconnect.manual, message: text || `Refused (${code - Code.HTTPBase}).` };
      }
      if (code >= 4000) {
        return { state: State.refused, reconnect: Reconnect.manual, message: text || `Closed (${code}).` };
      }
      // 1001 going away (a bridge replica stopping), 1006 dropped, 1008 too
      // slow, 1011 server error, 1012–1014 restarts and gateways.
      return { state: State.reconnecting, reconnect: Reconnect.auto, message: text || 'The connection dropped.' };
  }
}

/**
 * Backoff is a capped exponential delay with jitter: 1 s, 2 s, 4 s … 30 s.
 * Reset it once a connection has stayed up for a while, so a session that
 * flaps right after opening still backs off.
 */
export class Backoff {
  constructor({ min = 1000, max = 30000, jitter = 0.2, random = Math.random } = {}) {
    Object.assign(this, { min, max, jitter, random });
    this.attempt = 0;
  }

  /** next returns the delay before the next attempt, in milliseconds. */
  next() {
    const base = Math.min(this.max, this.min * 2 ** Math.min(this.attempt, 30));
    this.attempt++;
    const spread = base * this.jitter * (2 * this.random() - 1);
    return Math.max(this.min, Math.min(this.max, Math.round(base + spread)));
  }

  reset() { this.attempt = 0; }
}
