'use strict';
/*
 * bench_guard_node - guardedFetch beside undici's plain fetch on loopback,
 * in the same run: sequential GETs of a small body from a local server
 * under a name dnsmasq answers, (1) on a kept-alive connection and (2) on
 * a new connection per request (the server closes each). Both clients ask
 * the same dnsmasq for the name (plain fetch through a lookup, the guard
 * through its resolver), so the difference is the guard's: the decision
 * per request, and per connection the checked resolution and the pinned
 * connect. The clients take turns request by request (which goes first
 * alternates), so load from other processes hits both alike, and the
 * median request of each is printed: wall time, and the process's CPU
 * time over the request (client and server: the server's share is the
 * same for both). Asserts nothing about time.
 *
 * usage: bench_guard_node [--requests N]   (run via the wrapper CMake
 *        generates: the test-loopback addon, policyc, npm modules)
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
const REQUESTS = arg('--requests', 4000);

/* One request: [wall us, CPU us of this process (client and server)]. */
async function one(fetchFn, url) {
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const res = await fetchFn(url);
  if ((await res.text()) !== 'ok') throw new Error(`bad answer from ${url}`);
  const t = Number(process.hrtime.bigint() - t0) / 1e3;
  const c = process.cpuUsage(c0);
  return [t, c.user + c.system];
}

const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s[s.length >> 1];
};

/* n requests of each client, taking turns: the median [wall, CPU] of each. */
async function turns(clients, url, n) {
  const wall = clients.map(() => []);
  const cpu = clients.map(() => []);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < clients.length; j++) {
      const k = (i + j) % clients.length;
      const [w, c] = await one(clients[k], url);
      wall[k].push(w);
      cpu[k].push(c);
    }
  }
  return clients.map((_, k) => [median(wall[k]), median(cpu[k])]);
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
    await turns([plain, guarded], url, 200);
    const [p, g] = await turns([plain, guarded], url, n);
    rows.push([what, n, p, g]);
  }
  console.log(`bench_guard_node: loopback http, sequential GETs taking turns, median request, node ${process.version}`);
  console.log('  (CPU: this process, client and server, over one request)');
  const pct = (g, p) => `${(100 * (g - p) / p).toFixed(1)}%`;
  for (const [what, n, [pw, pc], [gw, gc]] of rows) {
    console.log(`  plain undici fetch, ${what.padEnd(20)} ${pw.toFixed(1).padStart(8)} us/req wall ${pc.toFixed(1).padStart(7)} us CPU  (${n} requests)`);
    console.log(`  guardedFetch,       ${what.padEnd(20)} ${gw.toFixed(1).padStart(8)} us/req wall ${gc.toFixed(1).padStart(7)} us CPU  overhead ${pct(gw, pw)} wall (${(gw - pw).toFixed(1)} us), ${pct(gc, pc)} CPU (${(gc - pc).toFixed(1)} us)`);
  }
  await agent.close();
  await guarded.agent.close();
  guard.close();
  server.close();
  S.cleanup();
}

main().catch((e) => { console.error(`bench_guard_node: ${e.stack}`); process.exit(1); });
