'use strict';
/*
 * support.js - what the Node package's end-to-end tests share. Real parts
 * only: dnsmasq on a loopback port (answers the test names from a hosts
 * file; names under slow.<domain> are forwarded to a socket nobody answers:
 * a DNS timeout), tables compiled by policyc, servers on ports the kernel
 * chose. The addon under test is linked against libpinhole built with
 * PINHOLE_TEST_LOOPBACK_UPSTREAM (127.0.0.0/8 and ::1 exempt, nothing
 * else), passed as $PINHOLE_NODE_ADDON; policyc as $PH_POLICYC.
 */
const { spawn, execFileSync } = require('node:child_process');
const dgram = require('node:dgram');
const dns = require('node:dns');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const DOMAIN = 'pinhole-node.test';
const TMP = fs.mkdtempSync(path.join(os.tmpdir(), 'pinhole-node-'));
const cleanups = [];
/* Stops every server and dnsmasq and removes TMP; the tests' after(). */
function cleanup() {
  while (cleanups.length) { try { cleanups.pop()(); } catch { /* best effort */ } }
  fs.rmSync(TMP, { recursive: true, force: true });
}
process.on('exit', cleanup);

function listen(server, host = '127.0.0.1') {
  return new Promise((resolve) => server.listen(0, host, () => resolve(server.address().port)));
}

async function freeUdpTcpPort() {
  for (;;) {
    const s = net.createServer();
    const port = await listen(s);
    const u = dgram.createSocket('udp4');
    const ok = await new Promise((resolve) => {
      u.once('error', () => resolve(false));
      u.bind(port, '127.0.0.1', () => resolve(true));
    });
    u.close();
    s.close();
    if (ok) return port;
  }
}

/* Plain undici fetch (no guard) with a lookup that asks dns (what
 * startDnsmasq returned): the negative control that shows an attack would
 * have reached its target. */
function plainFetch(dnsServer, url, init = {}) {
  const undici = require('undici');
  const lookup = (host, opts, cb) => {
    dnsServer.resolver.resolve4(host).then((as) => {
      if (opts.all) cb(null, as.map((a) => ({ address: a, family: 4 })));
      else cb(null, as[0], 4);
    }, cb);
  };
  return undici.fetch(url, { ...init, dispatcher: new undici.Agent({ connect: { lookup } }) });
}

/* dnsmasq answering records {name: [addresses]}. */
async function startDnsmasq(records) {
  const hosts = path.join(TMP, 'hosts');
  const write = () => {
    fs.writeFileSync(`${hosts}.tmp`, Object.entries(records)
      .flatMap(([n, as]) => as.map((a) => `${a} ${n}\n`)).join(''));
    fs.renameSync(`${hosts}.tmp`, hosts);
  };
  write();
  let proc;
  let resolver;
  /* Changes name's answer: rewrites the file, SIGHUP, waits until dnsmasq
   * answers the new addresses. */
  async function setRecord(name, addrs) {
    records[name] = addrs;
    write();
    proc.kill('SIGHUP');
    const want = [...addrs].sort().join(',');
    for (let i = 0; i < 100; i++) {
      const got = await resolver.resolve4(name).then((a) => a.sort().join(','), () => '');
      if (got === want) return;
      await new Promise((res) => setTimeout(res, 50));
    }
    throw new Error(`dnsmasq still does not answer ${want} for ${name}`);
  }
  const silent = dgram.createSocket('udp4');
  await new Promise((r) => silent.bind(0, '127.0.0.1', r));
  cleanups.push(() => silent.close());
  for (let attempt = 0; attempt < 10; attempt++) {
    const port = await freeUdpTcpPort();
    proc = spawn('dnsmasq', ['--keep-in-foreground', '--conf-file=/dev/null', '--no-resolv',
      '--no-hosts', '--bind-interfaces', '--listen-address=127.0.0.1', `--port=${port}`,
      '--pid-file=', '--user=', '--log-facility=/dev/null', '--local-ttl=0', `--local=/${DOMAIN}/`,
      `--addn-hosts=${hosts}`, `--server=/slow.${DOMAIN}/127.0.0.1#${silent.address().port}`],
    { stdio: 'ignore' });
    const p = proc;
    cleanups.push(() => p.kill());
    const r = new dns.promises.Resolver({ timeout: 200, tries: 1 });
    r.setServers([`127.0.0.1:${port}`]);
    resolver = r;
    for (let i = 0; i < 100 && proc.exitCode === null; i++) {
      try {
        await r.resolve4(Object.keys(records)[0]);
        return { server: `127.0.0.1:${port}`, resolver: r, set: (n, as) => setRecord(n, as) };
      } catch { await new Promise((res) => setTimeout(res, 50)); }
    }
    proc.kill();
  }
  throw new Error('dnsmasq did not start');
}

/* {list: [[host, [ports]]]} compiled by policyc into TMP/name.ptab. */
function compileTable(lists, name = 'table') {
  const lines = ['version: 1', 'lists:'];
  for (const [list, rules] of Object.entries(lists)) {
    lines.push(`  ${list}:`, '    rules:');
    for (const [host, ports] of rules) lines.push(`      - host: "${host}"`, `        ports: [${ports.join(', ')}]`);
  }
  const src = path.join(TMP, `${name}.yaml`);
  const out = path.join(TMP, `${name}.ptab`);
  fs.writeFileSync(src, lines.join('\n') + '\n');
  execFileSync(process.env.PH_POLICYC, ['compile', src, '-o', out]);
  return out;
}

/* A TCP listener that counts connections and bytes received and never
 * answers: where an attack would land. */
async function recorder(host = '127.0.0.1') {
  const rec = { connections: 0, bytes: 0, sockets: [] };
  rec.server = net.createServer((s) => {
    rec.connections++;
    rec.sockets.push(s);
    s.on('data', (d) => { rec.bytes += d.length; });
    s.on('error', () => {});
  });
  rec.port = await listen(rec.server, host);
  rec.close = () => { rec.sockets.forEach((s) => s.destroy()); rec.server.close(); };
  cleanups.push(rec.close);
  return rec;
}

/* A TCP blackhole on loopback: a listener (Debian's python3: node's own
 * listeners accept everything) that never accepts, its accept queue
 * filled, so the kernel drops every further SYN. {port}. */
async function blackhole() {
  const py = spawn('/usr/bin/python3', ['-c', `
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(0)
print(s.getsockname()[1], flush=True)
sys.stdin.read()
`], { stdio: ['pipe', 'pipe', 'inherit'] });
  cleanups.push(() => py.kill());
  const port = await new Promise((resolve, reject) => {
    py.stdout.once('data', (d) => resolve(Number(String(d).trim())));
    py.once('exit', () => reject(new Error('the blackhole listener exited')));
  });
  // Fill the accept queue: connect until a connection does not complete.
  const fillers = [];
  cleanups.push(() => fillers.forEach((s) => s.destroy()));
  for (;;) {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    fillers.push(s);
    const connected = await new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), 300);
      s.once('connect', () => { clearTimeout(t); resolve(true); });
    });
    if (!connected) return { port };
  }
}

/* An HTTP server; handler(req, res). Records every request in .seen. */
async function httpServer(handler) {
  const srv = { seen: [] };
  srv.server = http.createServer((req, res) => {
    srv.seen.push({ method: req.method, url: req.url, headers: req.headers });
    handler(req, res);
  });
  srv.port = await listen(srv.server);
  srv.close = () => { srv.server.closeAllConnections(); srv.server.close(); };
  cleanups.push(srv.close);
  return srv;
}

/* Answers res with a 302 to location whose body never ends (the client
 * must stop reading it); onClose(bytes the server wrote) when the client
 * closes the connection. */
function floodRedirect(res, location, onClose) {
  res.writeHead(302, { location, 'content-type': 'application/octet-stream' });
  res.socket.once('close', () => onClose(res.socket.bytesWritten));
  const chunk = Buffer.alloc(65536, 0x41);
  const pump = () => { while (res.write(chunk)) { if (res.writableLength > 1 << 26) return; } };
  res.on('drain', pump);
  pump();
}

/* A test CA and a certificate for names signed by it (openssl): {ca, cert,
 * key} as PEM strings. */
function makeCert(names, tag = 'leaf') {
  const dir = fs.mkdtempSync(path.join(TMP, 'ca-'));
  const f = (n) => path.join(dir, n);
  const run = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  run('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=pinhole node test CA');
  run('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
    '-keyout', f('leaf.key'), '-out', f('leaf.csr'), '-subj', `/CN=${tag}`);
  fs.writeFileSync(f('ext'), `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}\n`);
  run('x509', '-req', '-in', f('leaf.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'),
    '-CAcreateserial', '-out', f('leaf.pem'), '-days', '2', '-extfile', f('ext'));
  return { ca: fs.readFileSync(f('ca.pem'), 'utf8'), cert: fs.readFileSync(f('leaf.pem'), 'utf8'),
    key: fs.readFileSync(f('leaf.key'), 'utf8') };
}

module.exports = { blackhole, floodRedirect, makeCert, cleanup, plainFetch, DOMAIN, TMP, startDnsmasq, compileTable, recorder, httpServer };
