'use strict';
/*
 * test_agent.js - guardedAgent with node:http and node:https's own clients
 * (http.get, https.get), and the pinhole-node check CLI (node --test).
 * Hostile: a name answering a denied address, an IP literal, an unlisted
 * port; each refused with its reason and zero bytes at a recording
 * listener, and the same request with a plain agent reaching it.
 */
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const http = require('node:http');
const https = require('node:https');
const path = require('node:path');
const { test, before, after } = require('node:test');
const { Guard, PinholeError, guardedAgent } = require('../../guard/node/lib/index.js');
const S = require('./support.js');

const D = S.DOMAIN;
const CLI = path.join(__dirname, '..', '..', 'guard', 'node', 'bin', 'pinhole-node.js');
let dns, app, rec, guard, table, tlsApp, pki;

/* GET url with client (http or https) and options: {status, body} or the error. */
function get(client, url, options) {
  return new Promise((resolve, reject) => {
    const req = client.get(url, options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.setTimeout((options && options.timeout) || 2000, () => req.destroy(new Error('timeout')));
  });
}

const settle = () => new Promise((r) => setTimeout(r, 100));

async function refusedWith(reason, promise) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof PinholeError, `a PinholeError, got ${e && e.stack}`);
    assert.equal(e.reason, reason, e.message);
    return true;
  });
}

/* A plain agent whose lookup asks the test's dnsmasq: the negative control. */
function plainAgent() {
  const lookup = (host, opts, cb) => {
    dns.resolver.resolve4(host).then((as) => {
      if (opts.all) cb(null, as.map((a) => ({ address: a, family: 4 })));
      else cb(null, as[0], 4);
    }, cb);
  };
  return new http.Agent({ lookup });
}

/* Runs pinhole-node (or cmd) with args and stdin input: {code, stdout, stderr}. */
function cli(args, input, { cmd = [process.execPath, CLI], env = {} } = {}) {
  return new Promise((resolve) => {
    const child = execFile(cmd[0], [...cmd.slice(1), ...args],
      { env: { ...process.env, PINHOLE_TABLE: '', ...env }, encoding: 'latin1', maxBuffer: 1 << 24 },
      (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stdout, stderr }));
    child.stdin.on('error', () => {}); // a CLI that exits without reading stdin
    child.stdin.end(input === undefined ? '' : input);
  });
}

before(async () => {
  rec = await S.recorder('0.0.0.0');
  app = await S.httpServer((req, res) => res.end('hello'));
  pki = S.makeCert([`tls.${D}`]);
  tlsApp = https.createServer({ cert: pki.cert, key: pki.key }, (req, res) => res.end('tls hello'));
  await new Promise((r) => tlsApp.listen(0, '127.0.0.1', r));
  tlsApp.port = tlsApp.address().port;
  dns = await S.startDnsmasq({ [`app.${D}`]: ['127.0.0.1'], [`tls.${D}`]: ['127.0.0.1'],
    [`wrongname.${D}`]: ['127.0.0.1'], [`zero.${D}`]: ['0.0.0.0'] });
  table = S.compileTable({ default: [[`app.${D}`, [app.port]], [`tls.${D}`, [tlsApp.port]],
    [`wrongname.${D}`, [tlsApp.port]], [`zero.${D}`, [rec.port]]] });
  guard = new Guard(table, { dnsServers: dns.server });
});

after(() => { tlsApp.closeAllConnections(); tlsApp.close(); guard.close(); S.cleanup(); });

test('guardedAgent: http.get of a listed name', async () => {
  const agent = guardedAgent(guard, 'default', { keepAlive: true });
  const start = app.seen.length;
  for (let i = 0; i < 3; i++) {
    assert.deepEqual(await get(http, `http://app.${D}:${app.port}/`, { agent }), { status: 200, body: 'hello' });
  }
  assert.equal(app.seen.length - start, 3);
  agent.destroy();
});

test('guardedAgent: https.get verifies the certificate for the decided name', async () => {
  const agent = guardedAgent(guard, 'default', { https: true, ca: pki.ca });
  assert.deepEqual(await get(https, `https://tls.${D}:${tlsApp.port}/`, { agent }), { status: 200, body: 'tls hello' });
  // The request's own rejectUnauthorized: false is not the agent's to honour.
  await refusedWith('upstream_unreachable',
    get(https, `https://wrongname.${D}:${tlsApp.port}/`, { agent, rejectUnauthorized: false }));
  await refusedWith('upstream_unreachable',
    get(https, `https://tls.${D}:${tlsApp.port}/`, { agent: guardedAgent(guard, 'default', { https: true }) }));
});

for (const [name, url, reason] of [
  ['a name answering 0.0.0.0', () => `http://zero.${D}:${rec.port}/`, 'denied_address'],
  ['an IP literal', () => `http://127.0.0.1:${rec.port}/`, 'ip_literal'],
  ['an unlisted port', () => `http://app.${D}:${rec.port}/`, 'port_not_allowed'],
]) {
  test(`hostile: guardedAgent refuses ${name}: ${reason}`, async () => {
    const before = rec.bytes;
    await refusedWith(reason, get(http, url(), { agent: guardedAgent(guard, 'default') }));
    // The request's own lookup is not used either.
    await refusedWith(reason, get(http, url(), { agent: guardedAgent(guard, 'default'),
      lookup: (h, o, cb) => cb(null, [{ address: '127.0.0.1', family: 4 }]) }));
    await settle();
    assert.equal(rec.bytes - before, 0, 'nothing reached the listener');
    await assert.rejects(get(http, url(), { agent: plainAgent(), timeout: 500 }));
    assert.ok(rec.bytes > before, `a plain agent reached the listener (${rec.bytes - before} bytes)`);
  });
}

test('pinhole-node check: verdict lines and exit statuses as python3 -m pinhole check', async () => {
  let r = await cli(['check', '-t', table, `http://app.${D}:${app.port}/`]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^ALLOW http://app\\.${D}:${app.port}/ host=app\\.${D} port=${app.port} rule=\\S+\\.yaml:\\d+ list=default match=app\\.${D}\\n$`));
  assert.match(r.stderr, /TEST BUILD/);
  r = await cli(['check', '-t', table, `http://app.${D}:${app.port}/`, 'http://169.254.169.254/', `http://evil.${D}/`]);
  assert.equal(r.code, 1);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 3);
  assert.match(lines[1], /^DENY http:\/\/169\.254\.169\.254\/ reason=ip_literal detail=".*"$/);
  assert.match(lines[2], /^DENY http:\/\/evil\.\S+ reason=not_allowlisted detail=/);
  // stdin, one URL a line; a hostile line cannot forge a second line.
  r = await cli(['check', '-t', table, '--json'], `http://app.${D}:${app.port}/\n\nhttp://x\r/\n`);
  assert.equal(r.code, 1);
  const objs = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(objs.length, 2);
  assert.equal(objs[0].allowed, true);
  assert.equal(objs[0].rule.list, 'default');
  assert.equal(objs[1].url, 'http://x?/');
  assert.equal(objs[1].allowed, false);
  // --resolve checks every address.
  r = await cli(['check', '-t', table, '-r', '--dns-server', dns.server,
    `http://app.${D}:${app.port}/`, `http://zero.${D}:${rec.port}/`]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stdout, /^ALLOW .* addresses=127\.0\.0\.1\nDENY .* reason=denied_address detail=/);
  // A URL over PH_URL_MAX_LEN: refused, shown cut.
  r = await cli(['check', '-t', table, `http://app.${D}/${'a'.repeat(10000)}`]);
  assert.equal(r.code, 1);
  assert.match(r.stdout, /^DENY http:\/\/app\S+\.\.\. reason=\w+ detail=/);
  // Usage errors: exit 2.
  for (const args of [[], ['check'], ['check', '-t', table, '--dns-server', '1.1.1.1', 'http://a/'],
    ['check', '-t', table, '-r', '--dns-timeout', '0', 'http://a/'], ['check', '-t', '/nonexistent.ptab', 'http://a/'],
    ['check', '-t', table, '--bogus'], ['frobnicate']]) {
    r = await cli(args);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, /^pinhole: /m);
    assert.equal(r.stdout, '');
  }
  r = await cli(['--help']);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /^Usage: pinhole-node check/);
});

test('pinhole-node check prints what pinhole-guard check prints (the production library)', async (t) => {
  const guardCli = process.env.PH_GUARD_CLI;
  const addon = process.env.PH_NODE_ADDON_PRODUCTION;
  if (!guardCli || !addon) return t.skip('PH_GUARD_CLI and PH_NODE_ADDON_PRODUCTION not given');
  const node = { env: { PINHOLE_NODE_ADDON: addon } };
  const urls = [`http://app.${D}:${app.port}/x`, `http://unlisted.${D}/`, 'http://127.0.0.1/',
    `http://app.${D}/"quote`, `http://app.${D}:${app.port}/${'a'.repeat(400)}`, 'http://a\u0001b/',
    `https://tls.${D}:${tlsApp.port}/`, `http://zero.${D}:${rec.port}/`];
  const both = async (args, input) => [await cli(['check', ...args], input, { cmd: [guardCli] }),
    await cli(['check', ...args], input, node)];
  for (const mode of [[], ['--json'], ['--resolve', '--dns-server', dns.server],
    ['--json', '--resolve', '--dns-server', dns.server]]) {
    const [a, b] = await both(['--table', table, ...mode, ...urls]);
    assert.equal(b.stdout, a.stdout, `${mode.join(' ') || 'text'}: same lines`);
    assert.deepEqual([b.code, a.code], [1, 1], `${mode.join(' ') || 'text'}: exit 1`);
  }
  const [a, b] = await both(['--table', table], `${urls.join('\n')}\n${'x'.repeat(9000)}\n`);
  assert.equal(b.stdout, a.stdout, 'stdin: same lines');
  for (const [args, code] of [[['--table', table, urls[0]], 0], [['--table', '/nonexistent.ptab', urls[0]], 2],
    [['--table', table, '--dns-server', dns.server, urls[0]], 2], [['--bogus'], 2]]) {
    const [x, y] = await both(args);
    assert.deepEqual([y.code, x.code], [code, code], args.join(' '));
    assert.equal(y.stdout, x.stdout, args.join(' '));
  }
  return undefined;
});
