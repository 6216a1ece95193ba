'use strict';
/*
 * test_mcp.js - the real TypeScript MCP SDK as the client under test
 * (node --test): Client + StreamableHTTPClientTransport with
 * guardedFetch, against the SDK's own McpServer on loopback, named by
 * dnsmasq. Benign: connect, list tools, call one. Hostile: the MCP URL
 * redirected to an IP literal, to a name answering a denied address, and
 * an unlisted port; each refused with its reason, zero bytes at a
 * recording listener, and the same through plain fetch reaches it.
 */
const assert = require('node:assert/strict');
const http = require('node:http');
const { test, before, after } = require('node:test');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { z } = require('zod');
const { Guard, PinholeError, guardedFetch } = require('../../guard/node/lib/index.js');
const S = require('./support.js');

const D = S.DOMAIN;
let dns, mcp, rec, guard;

const plainFetch = (url, init) => S.plainFetch(dns, url, init);

function mcpServer() {
  const server = new McpServer({ name: 'pinhole-test', version: '1.0.0' });
  server.tool('add', { a: z.number(), b: z.number() },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
  return server;
}

/* A client over transport URL url; resolves with the tools and a call's
 * result, rejects like the SDK does. */
async function session(url, fetchFn, redirectPolicy = 'same-origin') {
  const client = new Client({ name: 'pinhole-node-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: fetchFn, redirectPolicy });
  await client.connect(transport);
  try {
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
  const m = /(ip_literal|denied_address|port_not_allowed|not_allowlisted|redirect_\w+)/.exec(String(e && e.message));
  return m ? m[1] : `not a refusal: ${e && e.stack}`;
}

before(async () => {
  rec = await S.recorder('0.0.0.0');
  const srv = http.createServer(async (req, res) => {
    const u = new URL(req.url, 'http://x');
    if (u.pathname === '/mcp') {
      // Stateless: one server and transport per request, the SDK's own pattern.
      const server = mcpServer();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => { transport.close(); server.close(); });
      await server.connect(transport);
      await transport.handleRequest(req, res);
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
  });
  mcp = { port: await new Promise((r) => srv.listen(0, '127.0.0.1', () => r(srv.address().port))) };
  mcp.close = () => { srv.closeAllConnections(); srv.close(); };
  dns = await S.startDnsmasq({ [`mcp.${D}`]: ['127.0.0.1'], [`zero.${D}`]: ['0.0.0.0'] });
  const table = S.compileTable({ default: [[`mcp.${D}`, [mcp.port]], [`zero.${D}`, [rec.port]]] });
  guard = new Guard(table, { dnsServers: dns.server });
});

after(() => { mcp.close(); guard.close(); S.cleanup(); });

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
