// Builds the browser client into bridge/ui/dist, which the Go package
// bridge/ui embeds: dist/index.html plus content-hashed assets, so `go build`
// never needs npm. Run with `npm ci && npm run build` (make ui).
import * as esbuild from 'esbuild';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.resolve(here, '../bridge/ui/dist');
const assets = path.join(dist, 'assets');

// Licences of what the bundle contains, shipped beside it.
const licences = [
  ['@novnc/novnc', 'node_modules/@novnc/novnc/LICENSE.txt'],
  ['pako (vendored by noVNC)', 'node_modules/@novnc/novnc/vendor/pako/LICENSE'],
  ['@xterm/xterm', 'node_modules/@xterm/xterm/LICENSE'],
  ['@xterm/addon-fit', 'node_modules/@xterm/addon-fit/LICENSE'],
];

await rm(dist, { recursive: true, force: true });
await mkdir(assets, { recursive: true });

const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: { app: 'src/app.js' },
  bundle: true,
  format: 'esm', // noVNC uses top-level await
  target: ['es2022', 'chrome100', 'firefox100', 'safari15.4'],
  minify: true,
  legalComments: 'none', // the licences go to licenses.txt
  charset: 'utf8',
  outdir: assets,
  entryNames: '[name]-[hash]',
  metafile: true,
  logLevel: 'warning',
});

const outputs = Object.keys(result.metafile.outputs).map((p) => path.basename(p));
const pick = (ext) => {
  const found = outputs.filter((f) => f.endsWith(ext));
  if (found.length !== 1) throw new Error(`want one ${ext} output, got ${found.join(', ') || 'none'}`);
  return found[0];
};
const names = { 'app.js': pick('.js'), 'app.css': pick('.css') };

// The page lives at /ui/namespaces/NS/virtualmachines/NAME; relative asset
// paths keep it working behind a proxy that mounts the bridge under a prefix.
let html = await readFile(path.join(here, 'src/index.html'), 'utf8');
html = html.replaceAll('{{ASSETS}}', '../../../assets');
for (const [k, v] of Object.entries(names)) html = html.replaceAll(`{{${k}}}`, v);
await writeFile(path.join(dist, 'index.html'), html);

let text = 'Third-party software bundled in the Virtstation browser client.\n';
for (const [name, file] of licences) {
  const pkg = JSON.parse(await readFile(path.join(here, 'node_modules', name.split(' ')[0], 'package.json'), 'utf8').catch(() => '{}'));
  text += `\n==== ${name}${pkg.version ? ` ${pkg.version}` : ''} ====\n\n${await readFile(path.join(here, file), 'utf8')}`;
}
await writeFile(path.join(assets, 'licenses.txt'), text);

for (const f of [...outputs, 'licenses.txt']) {
  const size = (await readFile(path.join(assets, f))).length;
  console.log(`bridge/ui/dist/assets/${f}\t${(size / 1024).toFixed(1)} KiB`);
}
