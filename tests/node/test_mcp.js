'use strict';
/*
 * test_mcp.js - the real TypeScript MCP SDK as the client under test
 * (node --test): Client + StreamableHTTPClientTransport with
 * guardedFetch, against the SDK's own McpServer on loopback, named by
 * dnsmasq. Benign: connect, list tools, call one, over http and over
 * https (a test CA). Hostile: the MCP URL redirected to an IP literal, to a
 * name answering a denied address, an unlisted port, DNS rebinding between
 * two requests of one session; the legacy SSE transport (the SDK's
 * SSEServerTransport) with an endpoint event on another origin (the SDK's
 * own check) and on its own origin while its name turns private; each
 * refused with its reason, zero bytes at the target, and the same through
 * plain fetch reaches it.
 */
const assert = require('node:assert/strict');
const http = require('node:http');
const https = require('node:https');
const { test, before, after } = require('node:test');
// The SDK's server side uses the global crypto (global from Node 19 on).
if (!globalThis.crypto) globalThis.crypto = require('node:crypto').webcrypto;
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { SSEClientTransport } = require('@modelcontextprotocol/sdk/client/sse.js');
const { SSEServerTransport } = require('@modelcontextprotocol/sdk/server/sse.js');
const { z } = require('zod');
const { Guard, PinholeError, guardedFetch } = require('../../guard/node/lib/index.js');
const S = require('./support.js');

const D = S.DOMAIN;
let dns, mcp, rec, guard, tlsMcp, pki;
// Bytes received on connections to the MCP server accepted after a name
// of it turned private (what a rebinding attack would deliver).
let afterFlip = { on: false, bytes: 0 };

const plainFetch = (url, init) => S.plainFetch(dns, url, init);

function mcpServer() {
  const server = new McpServer({ name: 'pinhole-test', version: '1.0.0' });
  server.tool('add', { a: z.number(), b: z.number() },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
  return server;
}

/* A client over transport URL url; resolves with the tools and a call's
 * result, rejects like the SDK does. */
async function session(url, fetchFn, redirectPolicy = 'same-origin', { sse = false, between } = {}) {
  const client = new Client({ name: 'pinhole-node-test', version: '1.0.0' });
  const Transport = sse ? SSEClientTransport : StreamableHTTPClientTransport;
  const transport = new Transport(new URL(url), { fetch: fetchFn, redirectPolicy });
  try {
    await client.connect(transport);
  } catch (e) {
    // An EventSource that failed tries again unless closed.
    await transport.close().catch(() => {});
    throw e;
  }
  try {
    if (between) await between();
    const tools = await client.listTools();
    const result = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
    return { tools: tools.tools.map((t) => t.name), text: result.content[0].text };
  } finally {
    await client.close();
  }
}

/* The PinholeError somewhere in what the SDK threw. */
function pinholeReason(e) {
  for (let x = e, i = 0; x && i < 8; x = x.cause, i++) {
    if (x instanceof PinholeError) return x.reason;
  }
  const m = /(ip_literal|denied_address|port_not_allowed|not_allowlisted|redirect_\w+|upstream_\w+)/.exec(String(e && e.message));
  return m ? m[1] : `not a refusal: ${e && e.stack}`;
}

/* The servers' one handler (http and https). */
const sseSessions = new Map();
async function handle(req, res) {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/mcp' || u.pathname === '/mcp-close') {
    // Stateless: one server and transport per request, the SDK's own pattern.
    // /mcp-close closes each connection after its response: the session's
    // next request needs a new connection (and a new resolution).
    if (u.pathname === '/mcp-close') res.shouldKeepAlive = false;
    const server = mcpServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res);
    return;
  }
  if (u.pathname === '/sse') {
    // The SDK's legacy SSE server; ?flip=NAME: NAME answers 0.0.0.0 before
    // the endpoint event goes out (the endpoint is on the stream's origin).
    if (u.searchParams.get('flip')) {
      await dns.set(u.searchParams.get('flip'), ['0.0.0.0']);
      afterFlip.on = true;
    }
    const transport = new SSEServerTransport('/messages', res);
    sseSessions.set(transport.sessionId, transport);
    res.on('close', () => sseSessions.delete(transport.sessionId));
    await mcpServer().connect(transport);
    return;
  }
  if (u.pathname === '/messages') {
    const t = sseSessions.get(u.searchParams.get('sessionId'));
    if (!t) { res.statusCode = 404; return res.end(); }
    await t.handlePostMessage(req, res);
    return;
  }
  if (u.pathname === '/sse-other-origin') {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(`event: endpoint\ndata: http://other.${D}:${rec.port}/messages\n\n`);
    return;
  }
  if (u.pathname === '/mcp-to-literal') {
    res.writeHead(307, { location: `http://127.0.0.1:${rec.port}/mcp` });
    return res.end();
  }
  if (u.pathname === '/mcp-to-metadata') {
    res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/' });
    return res.end();
  }
  if (u.pathname === '/mcp-to-private-name') {
    res.writeHead(307, { location: `http://zero.${D}:${rec.port}/mcp` });
    return res.end();
  }
  res.statusCode = 404;
  res.end();
}

async function serve(server) {
  server.on('connection', (s) => {
    if (!afterFlip.on) return;
    s.on('data', (d) => { if (afterFlip.on) afterFlip.bytes += d.length; });
  });
  const port = await new Promise((r) => server.listen(0, '127.0.0.1', () => r(server.address().port)));
  return { port, close: () => { server.closeAllConnections(); server.close(); } };
}

before(async () => {
  rec = await S.recorder('0.0.0.0');
  mcp = await serve(http.createServer(handle));
  pki = S.makeCert([`tls.${D}`]);
  tlsMcp = await serve(https.createServer({ cert: pki.cert, key: pki.key }, handle));
  dns = await S.startDnsmasq({ [`mcp.${D}`]: ['127.0.0.1'], [`zero.${D}`]: ['0.0.0.0'],
    [`tls.${D}`]: ['127.0.0.1'], [`rebind.${D}`]: ['127.0.0.1'], [`other.${D}`]: ['127.0.0.1'] });
  const table = S.compileTable({ default: [[`mcp.${D}`, [mcp.port]], [`zero.${D}`, [rec.port]],
    [`tls.${D}`, [tlsMcp.port]], [`rebind.${D}`, [mcp.port]], [`other.${D}`, [rec.port]]] });
  guard = new Guard(table, { dnsServers: dns.server });
});

after(() => { mcp.close(); tlsMcp.close(); guard.close(); S.cleanup(); });

test('benign: the SDK client connects, lists tools and calls one through guardedFetch', async () => {
  const r = await session(`http://mcp.${D}:${mcp.port}/mcp`, guardedFetch(guard, 'default'));
  assert.deepEqual(r.tools, ['add']);
  assert.equal(r.text, '5');
});

// The SDK's own redirectPolicy 'same-origin' would stop these redirects
// itself (it passes redirect: 'manual', which guardedFetch honours): with
// 'follow' the redirects are left to the fetch, the guard's to refuse.
// initialize is a POST with a body, so a redirect to another origin is
// redirect_body_cross_origin by default; allowBodyCrossOrigin lets the
// denied name reach its DNS check.
for (const [name, path, reason, opts] of [
  ['a 307 to the metadata address', '/mcp-to-metadata', 'ip_literal', {}],
  ['a 307 to an IP literal', '/mcp-to-literal', 'ip_literal', {}],
  ['a 307 to a name answering 0.0.0.0', '/mcp-to-private-name', 'redirect_body_cross_origin', {}],
  ['a 307 to a name answering 0.0.0.0 (body allowed)', '/mcp-to-private-name', 'denied_address',
    { allowBodyCrossOrigin: true }],
]) {
  test(`hostile: the MCP endpoint answers ${name}: ${reason}`, async () => {
    const before = rec.bytes;
    await assert.rejects(session(`http://mcp.${D}:${mcp.port}${path}`, guardedFetch(guard, 'default', opts), 'follow'),
      (e) => { assert.equal(pinholeReason(e), reason); return true; });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(rec.bytes - before, 0, 'nothing reached the listener');
    if (path === '/mcp-to-metadata') return; // 169.254.169.254 is not reachable here
    // Negative control: the SDK with plain fetch follows to the listener.
    const ctl = session(`http://mcp.${D}:${mcp.port}${path}`,
      (u, init) => plainFetch(u, { ...init, signal: AbortSignal.timeout(1000) }), 'follow');
    await assert.rejects(ctl);
    assert.ok(rec.bytes > before, `plain fetch reached the listener (${rec.bytes - before} bytes)`);
  });
}

test("the SDK's default redirectPolicy keeps its own same-origin check over guardedFetch", async () => {
  const before = rec.bytes;
  await assert.rejects(session(`http://mcp.${D}:${mcp.port}/mcp-to-literal`, guardedFetch(guard, 'default')),
    /redirectPolicy: 'same-origin'/);
  assert.equal(rec.bytes - before, 0);
});

test('hostile: an MCP URL on an unlisted port: port_not_allowed', async () => {
  const before = rec.bytes;
  await assert.rejects(session(`http://mcp.${D}:${rec.port}/mcp`, guardedFetch(guard, 'default')),
    (e) => { assert.equal(pinholeReason(e), 'port_not_allowed'); return true; });
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(rec.bytes - before, 0, 'nothing reached the listener');
  await assert.rejects(session(`http://mcp.${D}:${rec.port}/mcp`,
    (u, init) => plainFetch(u, { ...init, signal: AbortSignal.timeout(1000) })));
  assert.ok(rec.bytes > before, `plain fetch reached the listener (${rec.bytes - before} bytes)`);
});

test('benign over https: the SDK client through guardedFetch, the certificate verified for the decided name', async () => {
  const url = `https://tls.${D}:${tlsMcp.port}/mcp`;
  const r = await session(url, guardedFetch(guard, 'default', { ca: pki.ca }));
  assert.deepEqual(r.tools, ['add']);
  assert.equal(r.text, '5');
  // Without the test CA: the handshake fails, upstream_unreachable.
  await assert.rejects(session(url, guardedFetch(guard, 'default')),
    (e) => { assert.equal(pinholeReason(e), 'upstream_unreachable'); return true; });
});

test('benign: the SDK legacy SSE transport through guardedFetch', async () => {
  const r = await session(`http://mcp.${D}:${mcp.port}/sse`, guardedFetch(guard, 'default'), 'same-origin', { sse: true });
  assert.deepEqual(r.tools, ['add']);
  assert.equal(r.text, '5');
});

test("hostile: an SSE endpoint event on another origin: the SDK's own check refuses it", async () => {
  for (const f of [guardedFetch(guard, 'default'),
    (u, init) => plainFetch(u, { ...init, signal: AbortSignal.timeout(2000) })]) {
    const before = rec.bytes;
    await assert.rejects(session(`http://mcp.${D}:${mcp.port}/sse-other-origin`, f, 'same-origin', { sse: true }),
      /Endpoint origin does not match connection origin: http:\/\/other\./);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(rec.bytes - before, 0, 'nothing reached the other origin');
  }
});

/* Runs a session over url in which rebind.D turns private between two
 * requests (flip() does it); resolves with what the session did. */
async function rebound(url, fetchFn, opts, flip) {
  await dns.set(`rebind.${D}`, ['127.0.0.1']);
  afterFlip = { on: false, bytes: 0 };
  try {
    await session(url, fetchFn, 'same-origin', { ...opts, between: flip });
    return 'completed';
  } catch (e) {
    return e;
  } finally {
    afterFlip.on = false;
  }
}

test('hostile: an SSE endpoint on its own origin whose name turns private: denied_address', async () => {
  // The stream is open on rebind.D; before the endpoint event its name
  // answers 0.0.0.0; the POST needs a new connection (the stream holds the
  // first): refused. Plain fetch posts to 0.0.0.0, which is this host.
  const url = `http://rebind.${D}:${mcp.port}/sse?flip=rebind.${D}`;
  const e = await rebound(url, guardedFetch(guard, 'default'), { sse: true });
  assert.equal(pinholeReason(e), 'denied_address');
  assert.equal(afterFlip.bytes, 0, 'nothing reached the private address');
  const ctl = await rebound(url, (u, init) => plainFetch(u, init), { sse: true });
  assert.equal(ctl, 'completed');
  assert.ok(afterFlip.bytes > 0, `plain fetch reached the private address (${afterFlip.bytes} bytes)`);
});

test('hostile: DNS rebinding between two requests of one session: denied_address', async () => {
  // Streamable HTTP; the server closes each connection after its response,
  // so listTools needs a new connection, made after rebind.D turned private.
  const url = `http://rebind.${D}:${mcp.port}/mcp-close`;
  const flip = async () => { await dns.set(`rebind.${D}`, ['0.0.0.0']); afterFlip.on = true; };
  const e = await rebound(url, guardedFetch(guard, 'default'), {}, flip);
  assert.equal(pinholeReason(e), 'denied_address');
  assert.equal(afterFlip.bytes, 0, 'nothing reached the private address');
  const ctl = await rebound(url, (u, init) => plainFetch(u, init), {}, flip);
  assert.equal(ctl, 'completed');
  assert.ok(afterFlip.bytes > 0, `plain fetch reached the private address (${afterFlip.bytes} bytes)`);
});

test('hostile: an SSE URL on an unlisted port: port_not_allowed', async () => {
  const before = rec.bytes;
  await assert.rejects(session(`http://mcp.${D}:${rec.port}/sse`, guardedFetch(guard, 'default'), 'same-origin', { sse: true }),
    (e) => { assert.equal(pinholeReason(e), 'port_not_allowed'); return true; });
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(rec.bytes - before, 0, 'nothing reached the listener');
  await assert.rejects(session(`http://mcp.${D}:${rec.port}/sse`,
    (u, init) => plainFetch(u, { ...init, signal: AbortSignal.timeout(1000) }), 'same-origin', { sse: true }));
  assert.ok(rec.bytes > before, `plain fetch reached the listener (${rec.bytes - before} bytes)`);
});
