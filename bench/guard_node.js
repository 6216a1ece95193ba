'use strict';
/*
 * bench_guard_node - guardedFetch beside undici's plain fetch on loopback,
 * in the same run: sequential GETs of a small body from a local server
 * under a name dnsmasq answers, (1) on a kept-alive connection and (2) on
 * a new connection per request (the server closes each). Both clients ask
 * the same dnsmasq for the name (plain fetch through a lookup, the guard
 * through its resolver), so the difference is the guard's: the decision
 * per request, and per connection the checked resolution and the pinned
 * connect. Rounds interleave the clients so load from other processes
 * hits both alike; the best round of each is printed, wall time and the
 * process's CPU time per request (client and server: the server's share is
 * the same for both). Asserts nothing about time.
 *
 * usage: bench_guard_node [--requests N] [--rounds R]   (run via the
 *        wrapper CMake generates: the test-loopback addon, policyc, npm
 *        modules)
 */
const http = require('node:http');
const path = require('node:path');
const undici = require('undici');
const S = require(path.join(__dirname, '..', 'tests', 'node', 'support.js'));
const { Guard, guardedFetch } = require(path.join(__dirname, '..', 'guard', 'node', 'lib', 'index.js'));

function arg(name, dflt) {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}
const REQUESTS = arg('--requests', 500);
const ROUNDS = arg('--rounds', 15);

/* n requests: [wall us, CPU us of this process (client and server)] per request. */
async function round(fetchFn, url, n) {
  const t0 = process.hrtime.bigint();
  const c0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const res = await fetchFn(url);
    if ((await res.text()) !== 'ok') throw new Error(`bad answer from ${url}`);
  }
  const c = process.cpuUsage(c0);
  return [Number(process.hrtime.bigint() - t0) / 1e3 / n, (c.user + c.system) / n];
}

async function main() {
  const server = http.createServer((req, res) => {
    if (req.url === '/close') res.shouldKeepAlive = false;
    res.end('ok');
  });
  server.keepAliveTimeout = 60000;
  const port = await new Promise((r) => server.listen(0, '127.0.0.1', () => r(server.address().port)));
  const D = S.DOMAIN;
  const dns = await S.startDnsmasq({ [`bench.${D}`]: ['127.0.0.1'] });
  const table = S.compileTable({ default: [[`bench.${D}`, [port]]] });
  const guard = new Guard(table, { dnsServers: dns.server, reloadIntervalMs: 0 });
  const guarded = guardedFetch(guard, 'default');
  const lookup = (host, opts, cb) => {
    dns.resolver.resolve4(host).then((as) => {
      if (opts.all) cb(null, as.map((a) => ({ address: a, family: 4 })));
      else cb(null, as[0], 4);
    }, cb);
  };
  const agent = new undici.Agent({ connect: { lookup } });
  const plain = (url) => undici.fetch(url, { dispatcher: agent });

  const rows = [];
  for (const [what, pathname, n] of [['reused connection', '/', REQUESTS],
    ['new connection each', '/close', Math.max(1, Math.floor(REQUESTS / 4))]]) {
    const url = `http://bench.${D}:${port}${pathname}`;
    await round(plain, url, 50);
    await round(guarded, url, 50);
    const best = { plain: [Infinity, Infinity], guarded: [Infinity, Infinity] };
    for (let r = 0; r < ROUNDS; r++) {
      for (const [k, f] of [['plain', plain], ['guarded', guarded]]) {
        const [wall, cpu] = await round(f, url, n);
        best[k] = [Math.min(best[k][0], wall), Math.min(best[k][1], cpu)];
      }
    }
    rows.push([what, n, best.plain, best.guarded]);
  }
  console.log(`bench_guard_node: loopback http, sequential GETs, best of ${ROUNDS} rounds, node ${process.version}`);
  console.log('  (CPU: this process, client and server, per request: the figure load from other processes disturbs least)');
  const pct = (g, p) => `${(100 * (g - p) / p).toFixed(1)}%`;
  for (const [what, n, [pw, pc], [gw, gc]] of rows) {
    console.log(`  plain undici fetch, ${what.padEnd(20)} ${(1e6 / pw).toFixed(0).padStart(7)} req/s ${pw.toFixed(1).padStart(8)} us/req wall ${pc.toFixed(1).padStart(7)} us CPU  (${n} a round)`);
    console.log(`  guardedFetch,       ${what.padEnd(20)} ${(1e6 / gw).toFixed(0).padStart(7)} req/s ${gw.toFixed(1).padStart(8)} us/req wall ${gc.toFixed(1).padStart(7)} us CPU  overhead ${pct(gw, pw)} wall, ${pct(gc, pc)} CPU (${(gc - pc).toFixed(1)} us)`);
  }
  await agent.close();
  await guarded.agent.close();
  guard.close();
  server.close();
  S.cleanup();
}

main().catch((e) => { console.error(`bench_guard_node: ${e.stack}`); process.exit(1); });
