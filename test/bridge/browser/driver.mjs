// driver.mjs drives Debian's Chromium with playwright-core for
// internal/browser, the Go tests' harness. It reads one JSON command a line
// on stdin and answers each with one JSON line on stdout: {"id", "value"} or
// {"id", "error"}.
// The Go test keeps the scenario; this file only knows how to click, type,
// wait and look. It exits when stdin closes.
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
// The flags that work on these machines: without the background-networking
// ones Chromium dials Google's hosts, which the closed network refuses.
const args = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
// Waits are event-driven, so a generous limit costs a passing run nothing
// and keeps a loaded 2-core machine from failing it.
const defaultTimeout = 30_000;

// playwright-core makes a fresh, empty --user-data-dir under TMPDIR for each
// launch and removes it at close.
const browser = await chromium.launch({ executablePath, args, headless: true, timeout: 60_000 });

/** pages by name, each in its own context (own storage, like another user). */
const pages = new Map();

function page(name) {
  const p = pages.get(name);
  if (!p) throw new Error(`no page ${name}`);
  return p;
}

const ops = {
  // headers are sent with every request of the page, WebSocket handshakes
  // included: what a proxy in front of the server (oauth2-proxy) would add.
  async newPage({ page: name, headers }) {
    const context = await browser.newContext({ viewport: { width: 1024, height: 700 }, extraHTTPHeaders: headers || {} });
    // Record every state the page's #status goes through, for the test.
    await context.addInitScript(() => {
      window.__states = [];
      document.addEventListener('DOMContentLoaded', () => {
        const status = document.getElementById('status');
        if (!status) return;
        new MutationObserver(() => {
          const st = status.dataset.state;
          if (window.__states[window.__states.length - 1] !== st) window.__states.push(st);
        }).observe(status, { attributes: true, attributeFilter: ['data-state'] });
      });
    });
    const pg = await context.newPage();
    pg.setDefaultTimeout(defaultTimeout);
    const rec = { context, pg, sockets: [], csp: [], errors: [], console: [], failed: [] };
    pg.on('websocket', (ws) => rec.sockets.push(ws.url()));
    pg.on('pageerror', (err) => rec.errors.push(String(err)));
    pg.on('response', (resp) => { if (resp.status() >= 400) rec.failed.push(`${resp.status()} ${resp.url()}`); });
    pg.on('console', (msg) => {
      if (msg.type() !== 'error' && msg.type() !== 'warning') return;
      const text = msg.text();
      if (/Content.Security.Policy/i.test(text)) rec.csp.push(text);
      else rec.console.push(`${msg.type()}: ${text}`);
    });
    pages.set(name, rec);
    return null;
  },
  async goto({ page: name, url }) {
    const resp = await page(name).pg.goto(url, { waitUntil: 'load' });
    return { status: resp.status(), headers: resp.headers() };
  },
  async reload({ page: name }) {
    await page(name).pg.reload({ waitUntil: 'load' });
    return null;
  },
  // waitState waits for #status[data-state=state] and returns the status.
  async waitState({ page: name, state, timeout }) {
    const { pg } = page(name);
    try {
      await pg.waitForSelector(`#status[data-state="${state}"]`, { timeout: timeout || defaultTimeout });
    } catch (err) {
      const now = await pg.evaluate(() => {
        const s = document.getElementById('status');
        return `${s.dataset.state} (${s.dataset.code || '-'}): ${s.textContent}`;
      });
      throw new Error(`status never became ${state}; it is ${now}`);
    }
    return pg.evaluate(() => {
      const s = document.getElementById('status');
      return { state: s.dataset.state, code: s.dataset.code || '', text: s.textContent };
    });
  },
  // waitText waits until selector's text contains text.
  async waitText({ page: name, selector, text, timeout }) {
    const { pg } = page(name);
    try {
      await pg.waitForFunction(([sel, want]) => {
        const el = document.querySelector(sel);
        return el && el.textContent.replace(/\u00a0/g, ' ').includes(want);
      }, [selector, text], { timeout: timeout || defaultTimeout });
    } catch {
      const got = await pg.evaluate((sel) => document.querySelector(sel)?.textContent ?? '(no element)', selector);
      throw new Error(`${selector} never showed ${JSON.stringify(text)}; it shows ${JSON.stringify(got)}`);
    }
    return null;
  },
  async click({ page: name, selector }) {
    await page(name).pg.click(selector);
    return null;
  },
  async fill({ page: name, selector, value }) {
    await page(name).pg.fill(selector, value);
    return null;
  },
  // type focuses selector, then types like a person (Enter for \n).
  async type({ page: name, selector, text }) {
    const { pg } = page(name);
    if (selector) await pg.click(selector);
    await pg.keyboard.type(text, { delay: 20 });
    return null;
  },
  // press presses one key (Playwright's names: Escape, Control+a), on
  // selector when given, else where the focus is.
  async press({ page: name, selector, key }) {
    const { pg } = page(name);
    if (selector) await pg.press(selector, key);
    else await pg.keyboard.press(key);
    return null;
  },
  // select chooses the option of value in the <select> at selector.
  async select({ page: name, selector, value }) {
    await page(name).pg.selectOption(selector, value);
    return null;
  },
  // viewport resizes the page's window.
  async viewport({ page: name, width, height }) {
    await page(name).pg.setViewportSize({ width, height });
    return null;
  },
  // waitFor waits until the expression, evaluated in the page, is truthy.
  // It goes as a function: Playwright polls a string predicate with eval,
  // which the page's Content-Security-Policy rightly refuses.
  async waitFor({ page: name, expr, timeout }) {
    const predicate = new Function(`return (${expr});`);
    await page(name).pg.waitForFunction(predicate, null, { timeout: timeout || defaultTimeout, polling: 100 });
    return null;
  },
  async eval({ page: name, expr }) {
    return page(name).pg.evaluate(expr);
  },
  async screenshot({ page: name, path }) {
    await page(name).pg.screenshot({ path });
    return null;
  },
  // report is what the page did: WebSockets opened, CSP violations, errors.
  async report({ page: name }) {
    const { sockets, csp, errors, console, failed } = page(name);
    return { sockets, csp, errors, console, failed };
  },
  async closePage({ page: name }) {
    const rec = page(name);
    pages.delete(name);
    await rec.context.close();
    return null;
  },
};

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let id = 0;
  try {
    const cmd = JSON.parse(line);
    id = cmd.id;
    const fn = ops[cmd.op];
    if (!fn) throw new Error(`unknown op ${cmd.op}`);
    const value = await fn(cmd);
    process.stdout.write(JSON.stringify({ id, value: value ?? null }) + '\n');
  } catch (err) {
    process.stdout.write(JSON.stringify({ id, error: String(err && err.message ? err.message : err) }) + '\n');
  }
}
await browser.close();
