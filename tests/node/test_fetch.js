'use strict';
/*
 * test_fetch.js - guardedFetch end to end (node --test): a benign fetch
 * through the guard, the hostile cases each refused with its reason and
 * zero bytes at a recording listener, each with a negative control (the
 * same request through plain undici fetch, with a DNS lookup that asks the
 * same dnsmasq, reaches the listener: the attack is real), and resolution
 * that does not hold up the event loop.
 */
const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');
const undici = require('undici');
const { Guard, PinholeError, guardedFetch } = require('../../guard/node/lib/index.js');
const S = require('./support.js');

const D = S.DOMAIN;
let dns, app, other, rec, guard, table, tlsApp, pki, hole;
let floodSent = -1; // bytes the flood's server wrote before its connection closed
let silent;         // a listener that reads requests and never answers
const dripClosed = []; // resolvers waiting for a drip connection to close

const plainFetch = (url, init) => S.plainFetch(dns, url, init);

async function refusedWith(reason, promise) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof PinholeError, `a PinholeError, got ${e && e.stack}`);
    assert.equal(e.reason, reason, e.message);
    return true;
  });
}

/* Lets the recorder see whatever is in flight to it. */
const settle = () => new Promise((r) => setTimeout(r, 100));

before(async () => {
  rec = await S.recorder('0.0.0.0');
  app = await S.httpServer((req, res) => {
    const u = new URL(req.url, 'http://x');
    if (u.pathname === '/hello') return res.end('hello');
    if (u.pathname === '/to-literal') {
      res.writeHead(307, { location: `http://127.0.0.1:${rec.port}/latest/meta-data/` });
      return res.end();
    }
    if (u.pathname === '/to-metadata') {
      res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/' });
      return res.end();
    }
    if (u.pathname === '/to-private-name') {
      res.writeHead(302, { location: `http://zero.${D}:${rec.port}/` });
      return res.end();
    }
    if (u.pathname === '/to-other') {
      res.writeHead(Number(u.searchParams.get('status')), { location: `http://other.${D}:${other.port}/seen` });
      return res.end();
    }
    if (u.pathname === '/to-self') {
      res.writeHead(307, { location: '/hello' });
      return res.end();
    }
    if (u.pathname.startsWith('/chain/')) {
      const n = Number(u.pathname.slice(7));
      res.writeHead(302, { location: `/chain/${n + 1}` });
      return res.end();
    }
    if (u.pathname === '/drip-redirect' || u.pathname === '/drip-body') {
      // A head, then a body of one byte every 50 ms that never ends.
      res.writeHead(u.pathname === '/drip-redirect' ? 302 : 200, { location: '/hello' });
      const t = setInterval(() => res.write('x'), 50);
      res.socket.once('close', () => { clearInterval(t); dripClosed.splice(0).forEach((r) => r()); });
      return undefined;
    }
    if (u.pathname === '/flood') {
      // A redirect whose body never ends: the guard reads at most 64 KiB.
      S.floodRedirect(res, '/hello', (n) => { floodSent = n; });
      return undefined;
    }
    res.statusCode = 404;
    return res.end();
  });
  other = await S.httpServer((req, res) => { req.resume(); req.on('end', () => res.end('other')); });
  hole = await S.blackhole();
  silent = await S.recorder();
  pki = S.makeCert([`tls.${D}`]);
  tlsApp = require('node:https').createServer({ cert: pki.cert, key: pki.key }, (req, res) => res.end('tls hello'));
  await new Promise((r) => tlsApp.listen(0, '127.0.0.1', r));
  tlsApp.port = tlsApp.address().port;
  dns = await S.startDnsmasq({ [`app.${D}`]: ['127.0.0.1'], [`other.${D}`]: ['127.0.0.1'],
    [`tls.${D}`]: ['127.0.0.1'], [`wrongname.${D}`]: ['127.0.0.1'],
    [`rebind.${D}`]: ['127.0.0.1'], [`hole.${D}`]: ['127.0.0.1'],
    [`zero.${D}`]: ['0.0.0.0'], [`silent.${D}`]: ['127.0.0.1'] });
  // zero.D is listed on the recorder's port: only its address refuses it.
  table = S.compileTable({ default: [[`app.${D}`, [app.port]], [`other.${D}`, [other.port]],
    [`rebind.${D}`, [app.port, rec.port]], [`tls.${D}`, [tlsApp.port]],
    [`wrongname.${D}`, [tlsApp.port]],
    [`zero.${D}`, [rec.port]], [`hole.${D}`, [hole.port]], [`silent.${D}`, [silent.port]],
    [`*.slow.${D}`, [80]]] });
  guard = new Guard(table, { dnsServers: dns.server, dnsTimeoutMs: 3000 });
});

test('options: maxRedirects 0 or not an integer is refused when the fetch is made (the library reads 0 as its default of 10)', () => {
  for (const bad of [0, -1, 1.5, '3', NaN]) {
    assert.throws(() => guardedFetch(guard, 'default', { maxRedirects: bad }),
      (e) => e instanceof TypeError && /maxRedirects/.test(e.message), String(bad));
  }
  assert.strictEqual(typeof guardedFetch(guard, 'default', { maxRedirects: 1 }), 'function');
});

test('benign: a listed name fetched through the guard', async () => {
  const f = guardedFetch(guard, 'default');
  const res = await f(`http://app.${D}:${app.port}/hello`);
  assert.equal(res.status, 200);
  assert.equal(await res.text(), 'hello');
  const d = guard.decide(`http://app.${D}:${app.port}/`, 'default');
  assert.equal(d.allowed, true);
  assert.equal(d.reason, 'allowed');
  const r = await guard.resolve(`http://app.${D}:${app.port}/`, 'default');
  assert.deepEqual(r.addresses, [{ address: '127.0.0.1', family: 4 }]);
});

test('https: SNI and the certificate verified for the decided name', async () => {
  const f = guardedFetch(guard, 'default', { ca: pki.ca });
  const res = await f(`https://tls.${D}:${tlsApp.port}/`);
  assert.equal(await res.text(), 'tls hello');
  // The same server under a name its certificate does not carry: refused.
  await assert.rejects(f(`https://wrongname.${D}:${tlsApp.port}/`),
    (e) => e.reason === 'upstream_unreachable' && /altnames|Hostname/i.test(e.detail));
  // Without the test CA the chain is not trusted.
  await assert.rejects(guardedFetch(guard, 'default')(`https://tls.${D}:${tlsApp.port}/`),
    (e) => e.reason === 'upstream_unreachable' && /certificate/i.test(e.detail));
});

test('hostile: a 307 to an IP literal (the metadata address) is refused: ip_literal', async () => {
  const f = guardedFetch(guard, 'default');
  await refusedWith('ip_literal', f(`http://app.${D}:${app.port}/to-metadata`));
  const before = rec.bytes;
  await refusedWith('ip_literal', f(`http://app.${D}:${app.port}/to-literal`));
  await settle();
  assert.equal(rec.bytes - before, 0, 'nothing reached the listener');
  // Negative control: plain fetch follows the 307 to the listener.
  const ctl = plainFetch(`http://app.${D}:${app.port}/to-literal`, { signal: AbortSignal.timeout(1000) });
  await assert.rejects(ctl);
  assert.ok(rec.bytes > before, `plain fetch reached the listener (${rec.bytes - before} bytes)`);
});

test('hostile: a name resolving to a denied address is refused: denied_address', async () => {
  const f = guardedFetch(guard, 'default');
  const before = rec.bytes;
  await refusedWith('denied_address', f(`http://app.${D}:${app.port}/to-private-name`));
  await refusedWith('denied_address', f(`http://zero.${D}:${rec.port}/`));
  await settle();
  assert.equal(rec.bytes - before, 0, 'nothing reached the listener');
  const ctl = plainFetch(`http://zero.${D}:${rec.port}/`, { signal: AbortSignal.timeout(1000) });
  await assert.rejects(ctl);
  assert.ok(rec.bytes > before, `plain fetch reached the listener (${rec.bytes - before} bytes)`);
});

test('hostile: DNS rebinding: the next connection checks the new answer: denied_address', async () => {
  // rebind.D answers 127.0.0.1 (the app); then 0.0.0.0 (where the recorder
  // listens on every address). dnsmasq's TTL is 0: nothing is cached.
  const f = guardedFetch(guard, 'default');
  assert.equal(await (await f(`http://rebind.${D}:${app.port}/hello`)).text(), 'hello');
  await dns.set(`rebind.${D}`, ['0.0.0.0']);
  const before = rec.bytes;
  await refusedWith('denied_address', f(`http://rebind.${D}:${rec.port}/`));
  await settle();
  assert.equal(rec.bytes - before, 0, 'nothing reached the listener');
  const ctl = plainFetch(`http://rebind.${D}:${rec.port}/`, { signal: AbortSignal.timeout(1000) });
  await assert.rejects(ctl);
  assert.ok(rec.bytes > before, `plain fetch reached the listener (${rec.bytes - before} bytes)`);
});

test('hostile: an unlisted port is refused: port_not_allowed', async () => {
  const f = guardedFetch(guard, 'default');
  const before = rec.bytes;
  await refusedWith('port_not_allowed', f(`http://app.${D}:${rec.port}/`));
  await settle();
  assert.equal(rec.bytes - before, 0, 'nothing reached the listener');
  const ctl = plainFetch(`http://app.${D}:${rec.port}/`, { signal: AbortSignal.timeout(1000) });
  await assert.rejects(ctl);
  assert.ok(rec.bytes > before, `plain fetch reached the listener (${rec.bytes - before} bytes)`);
});

test('a cross-origin redirect carries no secret header; a same-origin one keeps them', async () => {
  const f = guardedFetch(guard, 'default');
  const headers = { authorization: 'Bearer s3cret', 'x-api-key': 'k', 'private-token': 't',
    cookie: 'c=1', accept: 'application/json', 'user-agent': 'pinhole-test' };
  for (const status of [302, 307]) {
    const start = other.seen.length;
    const res = await f(`http://app.${D}:${app.port}/to-other?status=${status}`, { headers });
    assert.equal(await res.text(), 'other');
    const h = other.seen[start].headers;
    for (const n of ['authorization', 'x-api-key', 'private-token', 'cookie']) assert.equal(h[n], undefined, `${status}: ${n}`);
    assert.equal(h.accept, 'application/json');
    assert.equal(h['user-agent'], 'pinhole-test');
  }
  const start = app.seen.length;
  await (await f(`http://app.${D}:${app.port}/to-self`, { headers })).text();
  assert.equal(app.seen[start + 1].headers.authorization, 'Bearer s3cret');
});

test('hostile: a POST 307 to another origin: redirect_body_cross_origin unless asked for', async () => {
  const start = other.seen.length;
  await refusedWith('redirect_body_cross_origin', guardedFetch(guard, 'default')(
    `http://app.${D}:${app.port}/to-other?status=307`, { method: 'POST', body: 'secret body' }));
  assert.equal(other.seen.length, start, 'nothing reached the other origin');
  const f = guardedFetch(guard, 'default', { allowBodyCrossOrigin: true });
  const res = await f(`http://app.${D}:${app.port}/to-other?status=307`, { method: 'POST', body: 'secret body' });
  assert.equal(await res.text(), 'other');
  assert.equal(other.seen[start].method, 'POST');
  // A 303 turns it into a GET without the body: followed.
  const r303 = await guardedFetch(guard, 'default')(`http://app.${D}:${app.port}/to-other?status=303`,
    { method: 'POST', body: 'secret body', headers: { 'content-type': 'text/plain' } });
  assert.equal(await r303.text(), 'other');
  const last = other.seen[other.seen.length - 1];
  assert.equal(last.method, 'GET');
  assert.equal(last.headers['content-type'], undefined);
});

test("the caller's redirect mode 'manual' or 'error' is stricter and kept", async () => {
  const f = guardedFetch(guard, 'default');
  const before = rec.bytes;
  const res = await f(`http://app.${D}:${app.port}/to-literal`, { redirect: 'manual' });
  assert.equal(res.status, 307);
  assert.equal(res.headers.get('location'), `http://127.0.0.1:${rec.port}/latest/meta-data/`);
  await assert.rejects(f(`http://app.${D}:${app.port}/to-self`, { redirect: 'error' }), TypeError);
  await settle();
  assert.equal(rec.bytes - before, 0);
});

test("an init's members read from its prototype (a class's accessors) are fetch's: method, body, redirect", async () => {
  // fetch reads init.method, init.body, init.redirect wherever init has
  // them; a class keeps its accessors on its prototype, where for...in
  // does not look. Neither is the GET of a URL with headers and a signal.
  class Post {
    get method() { return 'POST'; }
    get body() { return 'a body'; }
  }
  class Manual {
    get redirect() { return 'manual'; }
  }
  const f = guardedFetch(guard, 'default');
  const start = other.seen.length;
  const res = await f(`http://other.${D}:${other.port}/seen`, new Post());
  assert.equal(await res.text(), 'other');
  assert.equal(other.seen[start].method, 'POST');
  assert.equal(other.seen[start].headers['content-length'], '6');
  const before = rec.bytes;
  const r = await f(`http://app.${D}:${app.port}/to-literal`, new Manual());
  assert.equal(r.status, 307);
  await settle();
  assert.equal(rec.bytes - before, 0);
});

test('hostile: a redirect chain over the hop limit is refused: redirect_limit', async () => {
  const f = guardedFetch(guard, 'default', { maxRedirects: 3 });
  const start = app.seen.length;
  await refusedWith('redirect_limit', f(`http://app.${D}:${app.port}/chain/0`));
  const paths = app.seen.slice(start).map((s) => s.url);
  assert.deepEqual(paths, ['/chain/0', '/chain/1', '/chain/2', '/chain/3']);
  // Negative control: plain fetch follows /chain/4 and beyond.
  const mid = app.seen.length;
  await assert.rejects(plainFetch(`http://app.${D}:${app.port}/chain/0`));
  assert.ok(app.seen.slice(mid).some((s) => s.url === '/chain/4'), 'plain fetch went past the limit');
});

test('hostile: a body flood on a redirect: at most 64 KiB read, then the next hop', async () => {
  const f = guardedFetch(guard, 'default');
  const t0 = process.hrtime.bigint();
  const res = await f(`http://app.${D}:${app.port}/flood`);
  assert.equal(await res.text(), 'hello');
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  for (let i = 0; i < 100 && floodSent < 0; i++) await settle();
  console.log(`# flood: followed in ${ms.toFixed(1)} ms; the server wrote ${floodSent} bytes before the close`);
  // The client closes the connection after 64 KiB; what the server wrote
  // beyond that sat in the socket buffers (a few MiB on loopback at most).
  assert.ok(floodSent > 0 && floodSent < 16 << 20, `server wrote ${floodSent} bytes`);
  assert.ok(ms < 5000, `followed in ${ms} ms`);
});

test('proxy variables and the global dispatcher never route around the guard', async () => {
  const saved = process.env.HTTP_PROXY;
  process.env.HTTP_PROXY = `http://127.0.0.1:${rec.port}`;
  process.env.http_proxy = process.env.HTTP_PROXY;
  const before = rec.bytes;
  const prev = undici.getGlobalDispatcher();
  undici.setGlobalDispatcher(new undici.ProxyAgent(`http://127.0.0.1:${rec.port}`));
  try {
    const f = guardedFetch(guard, 'default');
    const res = await f(`http://app.${D}:${app.port}/hello`);
    assert.equal(await res.text(), 'hello');
    await refusedWith('proxy_refused',
      f(`http://app.${D}:${app.port}/hello`, { dispatcher: undici.getGlobalDispatcher() }));
  } finally {
    undici.setGlobalDispatcher(prev);
    if (saved === undefined) delete process.env.HTTP_PROXY; else process.env.HTTP_PROXY = saved;
    delete process.env.http_proxy;
  }
  await settle();
  assert.equal(rec.bytes - before, 0, 'nothing reached the proxy');
});

test('12 blackholed tenant URLs in flight; a healthy fetch completes under 0.5 s', async () => {
  const f = guardedFetch(guard, 'default');
  const stuck = [];
  for (let i = 0; i < 12; i++) {
    stuck.push(f(`http://t${i}.slow.${D}/`).then(() => 'answered', (e) => e.reason));
  }
  const t0 = process.hrtime.bigint();
  const res = await f(`http://app.${D}:${app.port}/hello`);
  assert.equal(await res.text(), 'hello');
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log(`# healthy fetch with 12 blackholed in flight: ${ms.toFixed(1)} ms`);
  assert.ok(ms < 500, `healthy fetch took ${ms} ms`);
  assert.deepEqual(await Promise.all(stuck), Array(12).fill('dns_timeout'));
});

test('12 TCP-blackholed tenant URLs in flight; a healthy fetch completes under 0.5 s', async () => {
  // hole.D's port is a listener whose accept queue is full: the kernel
  // drops every further SYN, as a blackholed upstream does.
  const f = guardedFetch(guard, 'default', { connectTimeoutMs: 3000 });
  const stuck = [];
  for (let i = 0; i < 12; i++) {
    stuck.push(f(`http://hole.${D}:${hole.port}/${i}`).then(() => 'answered', (e) => e.reason));
  }
  const t0 = process.hrtime.bigint();
  const res = await f(`http://app.${D}:${app.port}/hello`);
  assert.equal(await res.text(), 'hello');
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log(`# healthy fetch with 12 TCP-blackholed in flight: ${ms.toFixed(1)} ms`);
  assert.ok(ms < 500, `healthy fetch took ${ms} ms`);
  assert.deepEqual(await Promise.all(stuck), Array(12).fill('upstream_timeout'));
});

test('resolutions over maxPending are refused at once: limit_exceeded', async () => {
  const g = new Guard(table, { dnsServers: dns.server, dnsTimeoutMs: 1000, maxPending: 2 });
  const a = g.resolve(`http://a.slow.${D}/`, 'default').catch((e) => e.reason);
  const b = g.resolve(`http://b.slow.${D}/`, 'default').catch((e) => e.reason);
  const t0 = process.hrtime.bigint();
  await assert.rejects(guardedFetch(g, 'default')(`http://app.${D}:${app.port}/hello`), (e) => {
    assert.ok(e instanceof PinholeError, `a PinholeError, got ${e && e.stack}`);
    assert.equal(e.reason, 'limit_exceeded');
    assert.match(e.detail, /2 resolutions already in flight on this guard \(maxPending\)/);
    return true;
  });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log(`# fetch over maxPending refused in ${ms.toFixed(1)} ms`);
  assert.ok(ms < 100, `refused after ${ms} ms`);
  assert.deepEqual([await a, await b], ['dns_timeout', 'dns_timeout']);
  g.close();
});

/* Resolves when silent's next connection closes. */
function silentClosed() {
  return new Promise((resolve) => silent.server.once('connection', (sock) => sock.once('close', resolve)));
}

test('timeoutMs: a server that never answers: upstream_timeout, and the request is aborted', { timeout: 60000 }, async () => {
  const f = guardedFetch(guard, 'default', { timeoutMs: 300 });
  const closed = silentClosed();
  const t0 = process.hrtime.bigint();
  await refusedWith('upstream_timeout', f(`http://silent.${D}:${silent.port}/`));
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log(`# deadline of 300 ms: refused after ${ms.toFixed(1)} ms`);
  assert.ok(ms >= 290, `refused after ${ms} ms, before the deadline`);
  await closed; // the request was aborted: its connection closed, not left waiting
  // The same guardedFetch goes on: its next request is served, and a later
  // deadline passes on its own.
  assert.equal(await (await f(`http://app.${D}:${app.port}/hello`)).text(), 'hello');
  await refusedWith('upstream_timeout', f(`http://silent.${D}:${silent.port}/again`));
});

test('timeoutMs: the deadline covers the connection (shorter than connectTimeoutMs)', { timeout: 60000 }, async () => {
  const f = guardedFetch(guard, 'default', { timeoutMs: 300, connectTimeoutMs: 20000 });
  const t0 = process.hrtime.bigint();
  await refusedWith('upstream_timeout', f(`http://hole.${D}:${hole.port}/`));
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log(`# deadline of 300 ms while connecting: refused after ${ms.toFixed(1)} ms`);
  assert.ok(ms >= 290 && ms < 10000, `refused after ${ms} ms`);
});

test('timeoutMs: the deadline covers a redirect body that never ends', { timeout: 60000 }, async () => {
  const f = guardedFetch(guard, 'default', { timeoutMs: 400 });
  const closed = new Promise((r) => dripClosed.push(r));
  const start = app.seen.length;
  await refusedWith('upstream_timeout', f(`http://app.${D}:${app.port}/drip-redirect`));
  await closed;
  assert.deepEqual(app.seen.slice(start).map((x) => x.url), ['/drip-redirect'], 'no hop after the deadline');
});

test('deadlines of requests in flight together pass each at its own time', { timeout: 60000 }, async () => {
  const f = guardedFetch(guard, 'default', { timeoutMs: 500 });
  const t0 = process.hrtime.bigint();
  const at = () => Number(process.hrtime.bigint() - t0) / 1e6;
  const first = f(`http://silent.${D}:${silent.port}/1`).then(() => 'answered', (e) => [e.reason, at()]);
  await new Promise((r) => setTimeout(r, 200));
  const second = f(`http://silent.${D}:${silent.port}/2`).then(() => 'answered', (e) => [e.reason, at()]);
  // A request that finishes in between leaves the others' deadlines alone.
  assert.equal(await (await f(`http://app.${D}:${app.port}/hello`)).text(), 'hello');
  const [[r1, ms1], [r2, ms2]] = [await first, await second];
  console.log(`# deadlines of 500 ms begun 200 ms apart: passed at ${ms1.toFixed(1)} and ${ms2.toFixed(1)} ms`);
  assert.deepEqual([r1, r2], ['upstream_timeout', 'upstream_timeout']);
  assert.ok(ms1 >= 490 && ms2 >= ms1 + 150, `passed at ${ms1} and ${ms2} ms`);
});

test("the caller's signal aborts a request in flight and the body of its response", { timeout: 60000 }, async () => {
  const f = guardedFetch(guard, 'default');
  const ac = new AbortController();
  const closed = silentClosed();
  const p = f(`http://silent.${D}:${silent.port}/`, { signal: ac.signal });
  await new Promise((r) => setTimeout(r, 100));
  ac.abort();
  await assert.rejects(p, (e) => e.name === 'AbortError');
  await closed;
  const body = new AbortController();
  const dripped = new Promise((r) => dripClosed.push(r));
  const res = await f(`http://app.${D}:${app.port}/drip-body`, { signal: body.signal });
  assert.equal(res.status, 200);
  body.abort();
  await assert.rejects(res.text(), (e) => e.name === 'AbortError');
  await dripped;
});

test('a finished request leaves no timer holding the process open', { timeout: 60000 }, async () => {
  // A process that makes one guarded request (deadline 60 s) and then has
  // nothing left to do exits at once.
  const { spawn } = require('node:child_process');
  const script = `
    const { Guard, guardedFetch } = require(${JSON.stringify(require.resolve('../../guard/node/lib/index.js'))});
    const g = new Guard(process.argv[1], { dnsServers: process.argv[2], reloadIntervalMs: 0 });
    guardedFetch(g, 'default', { timeoutMs: 60000 })(process.argv[3])
      .then((r) => r.text()).then((t) => { console.log(t); g.close(); });`;
  const t0 = process.hrtime.bigint();
  const child = spawn(process.execPath, ['-e', script, table, dns.server, `http://app.${D}:${app.port}/hello`],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const code = await new Promise((r) => child.once('exit', r));
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log(`# a process with one guarded request (deadline 60 s) exited after ${ms.toFixed(0)} ms`);
  assert.equal(code, 0);
  assert.equal(out.trim(), 'hello');
  assert.ok(ms < 30000, `exited after ${ms} ms`);
});

test('a reload re-decides the next request, even on a kept-alive connection', async () => {
  const fs = require('node:fs');
  const tpath = S.compileTable({ default: [[`app.${D}`, [app.port]]] }, 'reload-a');
  const g = new Guard(tpath, { dnsServers: dns.server, reloadIntervalMs: 0 });
  const f = guardedFetch(g, 'default');
  let connections = 0;
  const count = () => { connections++; };
  app.server.on('connection', count);
  try {
    // undici opens a second connection for a request made as the first
    // one's body ends; from then on the pool's connections are reused.
    for (let i = 0; i < 3; i++) assert.equal(await (await f(`http://app.${D}:${app.port}/hello`)).text(), 'hello');
    const warm = connections;
    assert.equal(await (await f(`http://app.${D}:${app.port}/hello`)).text(), 'hello');
    assert.equal(connections, warm, 'the request went on a kept-alive connection');
    // The new version lists only other.D.
    fs.renameSync(S.compileTable({ default: [[`other.${D}`, [other.port]]] }, 'reload-b'), tpath);
    assert.equal(g.reload().reloaded, true);
    const start = app.seen.length;
    await refusedWith('not_allowlisted', f(`http://app.${D}:${app.port}/hello`));
    assert.equal(app.seen.length, start, 'nothing was sent on the kept-alive connection');
  } finally {
    app.server.off('connection', count);
    await f.agent.close();
    g.close();
  }
});

test("admit, decide and resolve without their list throw; admit never answers allowed for it", () => {
  // admit's undefined is its "allowed": a call the addon could not decide
  // must throw, not return.
  const n = guard._native;
  assert.throws(() => n.admit(`http://unlisted.${D}/`), TypeError);
  assert.throws(() => n.admit(), TypeError);
  assert.throws(() => n.decide(`http://unlisted.${D}/`), TypeError);
  assert.throws(() => n.resolve(`http://unlisted.${D}/`), TypeError);
  assert.throws(() => n.admit(`http://unlisted.${D}/`, 'default'),
    (e) => e instanceof PinholeError && e.reason === 'not_allowlisted');
});

test('the guard refuses what is not on the list and reloads', () => {
  const d = guard.decide(`http://unlisted.${D}/`, 'default');
  assert.equal(d.allowed, false);
  assert.equal(d.reason, 'not_allowlisted');
  assert.equal(guard.decide(`http://app.${D}:${app.port}/`, 'nolist').reason, 'unknown_list');
  assert.equal(guard.reload().reloaded, false);
  assert.throws(() => new Guard('/nonexistent.ptab'), (e) => e instanceof PinholeError && e.reason === 'guard_error');
});

after(() => { tlsApp.closeAllConnections(); tlsApp.close(); guard.close(); S.cleanup(); });
