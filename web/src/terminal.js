// One xterm.js terminal, shared by the Serial and SSH modes, fitted to its
// container.
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import '@xterm/xterm/css/xterm.css';

// Fonts the machine has: the page loads none (it must work air-gapped).
const fontFamily = '"DejaVu Sans Mono", "Liberation Mono", Menlo, Consolas, "Courier New", monospace';

export class TerminalView {
  constructor(container) {
    this.container = container;
    this.term = null;
    this.fit = null;
    this.onData = () => {};
    this.onResize = () => {};
  }

  /** open creates the terminal the first time the container is shown. */
  open() {
    if (this.term) return;
    this.term = new Terminal({ fontFamily, fontSize: 14, cursorBlink: true, scrollback: 5000, convertEol: false });
    this.fit = new FitAddon();
    this.term.loadAddon(this.fit);
    this.term.open(this.container);
    this.term.onData((d) => this.onData(d));
    this.term.onBinary((d) => this.onData(d, true));
    this.term.onResize(({ cols, rows }) => this.onResize(cols, rows));
    new ResizeObserver(() => this.refit()).observe(this.container);
    this.refit();
  }

  refit() {
    if (!this.fit || this.container.hidden) return;
    try { this.fit.fit(); } catch { /* not laid out yet */ }
  }

  get size() {
    return this.term ? { cols: this.term.cols, rows: this.term.rows } : { cols: 80, rows: 24 };
  }

  write(data) { this.term.write(data); }

  reset() { if (this.term) this.term.reset(); }

  focus() { if (this.term) this.term.focus(); }

  /** text is what the screen shows, for tests and for copying. */
  text() {
    if (!this.term) return '';
    const buf = this.term.buffer.active;
    const lines = [];
    for (let i = 0; i < buf.length; i++) lines.push(buf.getLine(i).translateToString(true));
    return lines.join('\n');
  }
}
