'use strict';
/*
 * test_package.js - the package as a user gets it (node --test): npm pack
 * of guard/node gives a tarball that installs into an empty project (its
 * dependency from npm's cache when it holds it: the build's npm ci caches the
 * tarball, but not always the registry's metadata an install by version
 * range needs, so a fresh machine asks the registry), which requires
 * it and runs its pinhole-node bin; the TypeScript declarations type-check
 * under tsc --strict (typescript and @types/node pinned in the lockfile),
 * with a program using every entry point.
 */
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { test, after } = require('node:test');
const S = require('./support.js');

const PKG = path.join(__dirname, '..', '..', 'guard', 'node');
const MODULES = process.env.NODE_PATH;
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
let project;

after(() => S.cleanup());

test('npm pack gives a tarball that installs, requires, and runs pinhole-node check', () => {
  const dest = fs.mkdtempSync(path.join(S.TMP, 'pack-'));
  const out = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', dest], { cwd: PKG }));
  const files = out[0].files.map((f) => f.path).sort();
  assert.deepEqual(files, ['CMakeLists.txt', 'bin/pinhole-node.js', 'lib/cli.js', 'lib/index.d.ts',
    'lib/index.js', 'package.json', 'src/addon.c']);
  const tarball = path.join(dest, out[0].filename);
  console.log(`# ${out[0].filename}: ${out[0].size} bytes, ${files.length} files`);

  project = fs.mkdtempSync(path.join(S.TMP, 'project-'));
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'user', version: '1.0.0', private: true }));
  run('npm', ['install', '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', tarball], { cwd: project });
  const installed = JSON.parse(fs.readFileSync(path.join(project, 'node_modules', '@pinhole', 'guard', 'package.json'), 'utf8'));
  assert.equal(installed.name, '@pinhole/guard');
  assert.equal(JSON.parse(fs.readFileSync(path.join(project, 'node_modules', 'undici', 'package.json'), 'utf8')).version, '6.29.0');

  // Its own node_modules only (no NODE_PATH): what a user's project has.
  const env = { ...process.env, NODE_PATH: '' };
  const exported = run(process.execPath, ['-e',
    "const p = require('@pinhole/guard'); console.log(Object.keys(p).sort().join(' '))"], { cwd: project, env });
  for (const name of ['Guard', 'PinholeError', 'guardedAgent', 'guardedFetch']) {
    assert.ok(exported.split(' ').includes(name), `${name} in ${exported}`);
  }
  const table = S.compileTable({ default: [['api.example.com', [443]]] });
  const bin = path.join(project, 'node_modules', '.bin', 'pinhole-node');
  const line = run(bin, ['check', '-t', table, 'https://api.example.com/v1'], { cwd: project, env });
  assert.match(line, /^ALLOW https:\/\/api\.example\.com\/v1 host=api\.example\.com port=443 rule=\S+:\d+ list=default match=api\.example\.com\n$/);
  assert.throws(() => run(bin, ['check', '-t', table, 'http://169.254.169.254/'], { cwd: project, env }),
    (e) => e.status === 1 && /^DENY http:\/\/169\.254\.169\.254\/ reason=ip_literal/.test(e.stdout));
});

test('index.d.ts type-checks under tsc --strict, with a program using every entry point', () => {
  assert.ok(project, 'the package is installed (the test above)');
  fs.writeFileSync(path.join(project, 'use.ts'), `
import * as http from 'node:http';
import * as https from 'node:https';
import { Guard, PinholeError, guardedFetch, guardedAgent, testLoopback, URL_MAX_LEN,
         type Decision, type Resolution } from '@pinhole/guard';

async function main(): Promise<void> {
  const guard = new Guard('/etc/pinhole/allowlist.ptab', { dnsServers: '10.0.0.2', maxPending: 16 });
  const d: Decision = guard.decide('https://api.example.com/', 'default');
  const r: Resolution = await guard.resolve(new URL('https://api.example.com/'));
  const fetch = guardedFetch(guard, 'default', { maxRedirects: 5, ca: ['-----BEGIN CERTIFICATE-----'] });
  try {
    const res = await fetch('https://api.example.com/', { headers: { authorization: 'x' } });
    const text: string = await res.text();
    console.log(d.allowed, r.addresses[0].address, text, fetch.agent);
  } catch (e) {
    if (e instanceof PinholeError) console.log(e.reason, e.detail);
  }
  const a: http.Agent = guardedAgent(guard);
  const b: https.Agent = guardedAgent(guard, 'default', { https: true, keepAlive: true });
  http.get('http://api.example.com/', { agent: a });
  https.get('https://api.example.com/', { agent: b });
  const n: number = URL_MAX_LEN;
  const t: boolean = testLoopback;
  console.log(n, t);
  guard.close();
}
void main();
`);
  const tsc = path.join(MODULES, 'typescript', 'bin', 'tsc');
  try {
    run(process.execPath, [tsc, '--noEmit', '--strict', '--target', 'es2022', '--module', 'commonjs',
      '--moduleResolution', 'node10', '--lib', 'es2022', '--types', 'node', '--typeRoots', path.join(MODULES, '@types'),
      'use.ts'], { cwd: project });
  } catch (e) {
    assert.fail(`tsc: ${e.stdout}${e.stderr}`);
  }
  // A wrong use is an error: the declarations are read, not ignored.
  fs.writeFileSync(path.join(project, 'wrong.ts'),
    "import { guardedFetch } from '@pinhole/guard';\nguardedFetch('not a guard');\n");
  assert.throws(() => run(process.execPath, [tsc, '--noEmit', '--strict', '--skipLibCheck', '--types', 'node', '--typeRoots',
    path.join(MODULES, '@types'), 'wrong.ts'], { cwd: project }), (e) => /TS2345/.test(e.stdout));
});
