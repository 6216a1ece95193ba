'use strict';
/*
 * test_oauth.js - the MCP SDK's own OAuth client (auth() driven by
 * StreamableHTTPClientTransport's authProvider) through guardedFetch
 * (node --test): 401 -> protected resource metadata (RFC 9728) ->
 * authorization server metadata (RFC 8414) -> dynamic registration (RFC
 * 7591) -> token (client_credentials), then the MCP session with the token;
 * and the interactive leg: the authorization URL handed to the user agent,
 * the code exchanged with its PKCE verifier (finishAuth), the session, a
 * refresh when the access token is refused.
 * The servers are the test's own (a resource server in front of the SDK's
 * McpServer, an authorization server, a token endpoint on a third origin),
 * named by dnsmasq. Each hostile document or redirect is refused with its
 * reason and zero bytes reach its target (a recording listener); the same
 * flow over plain fetch reaches it (the negative control).
 */
const assert = require('node:assert/strict');
const { test, before, after } = require('node:test');
// The SDK's server side uses the global crypto (global from Node 19 on).
if (!globalThis.crypto) globalThis.crypto = require('node:crypto').webcrypto;
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { UnauthorizedError } = require('@modelcontextprotocol/sdk/client/auth.js');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { z } = require('zod');
const { Guard, PinholeError, guardedFetch } = require('../../guard/node/lib/index.js');
const S = require('./support.js');

const D = S.DOMAIN;
const TOKEN = 'pinhole-test-access-token';
const SECRET = 'pinhole-test-client-secret';
const REFRESH = 'pinhole-test-refresh-token';
const CODE = 'pinhole-test-authorization-code';
/* The redirect URI a user agent would be sent back to: never dialed here. */
const REDIRECT_URI = 'http://localhost:1/callback';
let dns, rs, as, tok, rec, guard;
/* The authorization server's pending code: its PKCE challenge and redirect URI. */
let pendingCode;
/* Whether the resource server accepts TOKEN (false: it asks for a refresh). */
let tokenValid = true;
let floodSent = -1;

/* What each scenario's resource server advertises: resource_metadata in
 * its 401, authorization_servers in its metadata; the authorization
 * server's token_endpoint. */
const scenarios = {
  ok: () => ({}),
  'prm-metadata-literal': () => ({ prm: 'http://169.254.169.254/latest/meta-data/' }),
  'prm-literal': () => ({ prm: `http://127.0.0.1:${rec.port}/prm` }),
  'prm-metadata-name': () => ({ prm: `http://meta.${D}:${rec.port}/prm` }),
  'prm-private-name': () => ({ prm: `http://zero.${D}:${rec.port}/prm` }),
  'as-private': () => ({ as: `http://zero.${D}:${rec.port}/` }),
  'token-redirect': () => ({ token: `http://token.${D}:${tok.port}/to-private` }),
  'prm-chain': () => ({ prm: `http://mcp.${D}:${rs.port}/chain/0` }),
  'prm-flood': () => ({ prm: `http://mcp.${D}:${rs.port}/flood` }),
};

function json(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/* The resource server: /mcp/<scenario> wants the token; its metadata. */
async function resourceServer(req, res) {
  const u = new URL(req.url, 'http://x');
  const m = /^\/mcp\/([\w-]+)$/.exec(u.pathname);
  if (m && scenarios[m[1]]) {
    if (req.headers.authorization !== `Bearer ${TOKEN}` || !tokenValid) {
      const prm = scenarios[m[1]]().prm || `http://mcp.${D}:${rs.port}/prm/${m[1]}`;
      res.writeHead(401, { 'www-authenticate': `Bearer resource_metadata="${prm}"` });
      return res.end();
    }
    const server = new McpServer({ name: 'pinhole-oauth-test', version: '1.0.0' });
    server.tool('add', { a: z.number(), b: z.number() },
      async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    return transport.handleRequest(req, res);
  }
  const p = /^\/prm\/([\w-]+)$/.exec(u.pathname);
  if (p && scenarios[p[1]]) {
    return json(res, 200, { resource: `http://mcp.${D}:${rs.port}/mcp/${p[1]}`,
      authorization_servers: [scenarios[p[1]]().as || `http://auth.${D}:${as.port}/${p[1]}`] });
  }
  if (u.pathname.startsWith('/chain/')) {
    res.writeHead(302, { location: `/chain/${Number(u.pathname.slice(7)) + 1}` });
    return res.end();
  }
  if (u.pathname === '/flood') {
    // A redirect whose body never ends, to the real metadata.
    return S.floodRedirect(res, '/prm/prm-flood', (n) => { floodSent = n; });
  }
  res.statusCode = 404;
  return res.end();
}

/* The authorization server: /<scenario>'s metadata, registration, token. */
function authServer(req, res) {
  const u = new URL(req.url, 'http://x');
  let body = '';
  req.on('data', (d) => { body += d; });
  req.on('end', () => {
    const m = /^\/\.well-known\/oauth-authorization-server\/([\w-]+)$/.exec(u.pathname);
    if (m && scenarios[m[1]]) {
      const base = `http://auth.${D}:${as.port}`;
      return json(res, 200, { issuer: `${base}/${m[1]}`, authorization_endpoint: `${base}/authorize`,
        token_endpoint: scenarios[m[1]]().token || `${base}/token`, registration_endpoint: `${base}/register`,
        response_types_supported: ['code'], code_challenge_methods_supported: ['S256'],
        grant_types_supported: ['client_credentials', 'authorization_code', 'refresh_token'],
        token_endpoint_auth_methods_supported: ['client_secret_post'] });
    }
    if (u.pathname === '/register' && req.method === 'POST') {
      return json(res, 201, { ...JSON.parse(body), client_id: 'pinhole-client', client_secret: SECRET,
        client_id_issued_at: Math.floor(Date.now() / 1000) });
    }
    if (u.pathname === '/authorize' && req.method === 'GET') {
      // The user approves at once: back to the redirect URI with a code.
      const q = u.searchParams;
      if (q.get('response_type') !== 'code' || q.get('code_challenge_method') !== 'S256') {
        return json(res, 400, { error: 'invalid_request' });
      }
      pendingCode = { challenge: q.get('code_challenge'), redirect: q.get('redirect_uri') };
      const back = new URL(q.get('redirect_uri'));
      back.searchParams.set('code', CODE);
      if (q.has('state')) back.searchParams.set('state', q.get('state'));
      res.writeHead(302, { location: back.href });
      return res.end();
    }
    if (u.pathname === '/token' && req.method === 'POST') {
      const f = new URLSearchParams(body);
      const grant = f.get('grant_type');
      if (f.get('client_secret') !== SECRET) return json(res, 400, { error: 'invalid_client' });
      if (grant === 'authorization_code') {
        const verifier = f.get('code_verifier') || '';
        const s256 = require('node:crypto').createHash('sha256').update(verifier).digest('base64url');
        if (!pendingCode || f.get('code') !== CODE || s256 !== pendingCode.challenge ||
            f.get('redirect_uri') !== pendingCode.redirect) {
          return json(res, 400, { error: 'invalid_grant' });
        }
        pendingCode = undefined;
        return json(res, 200, { access_token: TOKEN, token_type: 'Bearer', expires_in: 3600,
          refresh_token: REFRESH });
      }
      if (grant === 'refresh_token') {
        if (f.get('refresh_token') !== REFRESH) return json(res, 400, { error: 'invalid_grant' });
        tokenValid = true;
        return json(res, 200, { access_token: TOKEN, token_type: 'Bearer', expires_in: 3600,
          refresh_token: REFRESH });
      }
      if (grant !== 'client_credentials') return json(res, 400, { error: 'unsupported_grant_type' });
      return json(res, 200, { access_token: TOKEN, token_type: 'Bearer', expires_in: 3600 });
    }
    res.statusCode = 404;
    return res.end();
  });
}

/* The SDK's OAuthClientProvider for a non-interactive client: registered
 * dynamically, tokens by client_credentials (prepareTokenRequest). */
class Provider {
  constructor() { this.client = undefined; this.saved = undefined; }
  get redirectUrl() { return undefined; }
  get clientMetadata() {
    return { client_name: 'pinhole-node-test', redirect_uris: [], grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'client_secret_post' };
  }
  clientInformation() { return this.client; }
  saveClientInformation(c) { this.client = c; }
  tokens() { return this.saved; }
  saveTokens(t) { this.saved = t; }
  redirectToAuthorization() { throw new Error('no interactive authorization here'); }
  saveCodeVerifier() {}
  codeVerifier() { throw new Error('no code verifier here'); }
  prepareTokenRequest(scope) {
    const p = new URLSearchParams({ grant_type: 'client_credentials' });
    if (scope) p.set('scope', scope);
    return p;
  }
}

/* The SDK's OAuthClientProvider for an interactive client: registered
 * dynamically with a redirect URI; the authorization URL is kept for the
 * test's user agent, the PKCE verifier for the exchange. */
class CodeProvider extends Provider {
  constructor() { super(); this.authUrl = undefined; this.verifier = undefined; }
  get redirectUrl() { return REDIRECT_URI; }
  get clientMetadata() {
    return { client_name: 'pinhole-node-test', redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_post' };
  }
  redirectToAuthorization(url) { this.authUrl = url; }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
}
// The interactive provider must not take the non-interactive token request.
CodeProvider.prototype.prepareTokenRequest = undefined;

/* fetchFn with every rejection's PinholeError reason kept in .refusals
 * (the SDK swallows a failed resource metadata fetch and goes on). */
function spy(fetchFn) {
  const f = (u, init) => Promise.resolve(fetchFn(u, init)).catch((e) => {
    for (let x = e, i = 0; x && i < 8; x = x.cause, i++) {
      if (x instanceof PinholeError) { f.refusals.push(x.reason); break; }
    }
    throw e;
  });
  f.refusals = [];
  return f;
}

/* The SDK's whole flow against scenario: 'connected' (tools listed and one
 * called) or the error. */
async function flow(scenario, fetchFn) {
  return flowWith(scenario, fetchFn, new Provider());
}

async function flowWith(scenario, fetchFn, provider) {
  const client = new Client({ name: 'pinhole-node-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`http://mcp.${D}:${rs.port}/mcp/${scenario}`),
    { fetch: fetchFn, authProvider: provider, redirectPolicy: 'follow' });
  try {
    await client.connect(transport);
    const tools = await client.listTools();
    const r = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
    assert.deepEqual(tools.tools.map((t) => t.name), ['add']);
    assert.equal(r.content[0].text, '5');
    return 'connected';
  } catch (e) {
    return e;
  } finally {
    await client.close().catch(() => {});
  }
}

/* The interactive leg against scenario: the first connect is refused for
 * want of a token (UnauthorizedError) after the provider received the
 * authorization URL; the test's user agent (plain fetch: a browser is not
 * the worker) follows it to the redirect URI's code; finishAuth exchanges
 * the code through fetchFn; a second session uses the token. 'connected'
 * or the error; provider.exchanged says whether finishAuth returned. */
async function codeFlow(scenario, fetchFn, provider) {
  const url = new URL(`http://mcp.${D}:${rs.port}/mcp/${scenario}`);
  const first = new StreamableHTTPClientTransport(url, { fetch: fetchFn, authProvider: provider,
    redirectPolicy: 'follow' });
  const c1 = new Client({ name: 'pinhole-node-test', version: '1.0.0' });
  const e = await c1.connect(first).then(() => 'connected without a token', (x) => x);
  await c1.close().catch(() => {});
  if (!(e instanceof UnauthorizedError)) return e;
  assert.ok(provider.authUrl, 'the provider was handed the authorization URL');
  const ua = await plain(provider.authUrl.href, { redirect: 'manual' });
  const back = new URL(ua.headers.get('location'));
  assert.equal(`${back.origin}${back.pathname}`, REDIRECT_URI);
  assert.equal(back.searchParams.get('state'), provider.authUrl.searchParams.get('state'));
  try {
    await first.finishAuth(back.searchParams.get('code'));
  } catch (x) {
    return x;
  }
  provider.exchanged = true;
  return flowWith(scenario, fetchFn, provider);
}

const plain = (u, init) => S.plainFetch(dns, u, { ...init, signal: AbortSignal.timeout(1000) });
const settle = () => new Promise((r) => setTimeout(r, 100));

before(async () => {
  rec = await S.recorder('0.0.0.0');
  rs = await S.httpServer((req, res) => { resourceServer(req, res); });
  as = await S.httpServer(authServer);
  // The token endpoint on a third origin: a 307 to a private name.
  tok = await S.httpServer((req, res) => {
    req.resume();
    res.writeHead(307, { location: `http://zero.${D}:${rec.port}/token` });
    res.end();
  });
  dns = await S.startDnsmasq({ [`mcp.${D}`]: ['127.0.0.1'], [`auth.${D}`]: ['127.0.0.1'],
    [`token.${D}`]: ['127.0.0.1'], [`zero.${D}`]: ['0.0.0.0'], [`meta.${D}`]: ['169.254.169.254'] });
  const table = S.compileTable({ default: [[`mcp.${D}`, [rs.port]], [`auth.${D}`, [as.port]],
    [`token.${D}`, [tok.port]], [`zero.${D}`, [rec.port]], [`meta.${D}`, [rec.port]]] });
  guard = new Guard(table, { dnsServers: dns.server });
});

after(() => { guard.close(); S.cleanup(); });

test('benign: 401, resource metadata, server metadata, registration, token, session: all through guardedFetch', async () => {
  const f = spy(guardedFetch(guard, 'default'));
  const as0 = as.seen.length;
  const rs0 = rs.seen.length;
  assert.equal(await flow('ok', f), 'connected');
  assert.deepEqual(f.refusals, []);
  const asPaths = as.seen.slice(as0).map((s) => `${s.method} ${s.url}`);
  assert.deepEqual(asPaths, ['GET /.well-known/oauth-authorization-server/ok', 'POST /register', 'POST /token']);
  assert.ok(rs.seen.slice(rs0).some((s) => s.url === '/prm/ok'));
  assert.ok(rs.seen.slice(rs0).some((s) => s.headers.authorization === `Bearer ${TOKEN}`));
});

// [scenario, options of guardedFetch, the refusal, whether plain fetch can
// reach the recording listener (169.254.169.254 is not on this host)].
for (const [scenario, opts, reason, reachable] of [
  ['prm-metadata-literal', {}, 'ip_literal', false],
  ['prm-literal', {}, 'ip_literal', true],
  ['prm-metadata-name', {}, 'denied_address', false],
  ['prm-private-name', {}, 'denied_address', true],
  ['as-private', {}, 'denied_address', true],
  ['token-redirect', {}, 'redirect_body_cross_origin', true],
  ['token-redirect', { allowBodyCrossOrigin: true }, 'denied_address', true],
  ['prm-chain', { maxRedirects: 3 }, 'redirect_limit', true],
]) {
  const what = Object.keys(opts).length ? ` (${JSON.stringify(opts)})` : '';
  test(`hostile: ${scenario}${what}: ${reason}`, async () => {
    const f = spy(guardedFetch(guard, 'default', opts));
    const before = rec.bytes;
    const rs0 = rs.seen.length;
    const r = await flow(scenario, f);
    assert.ok(f.refusals.includes(reason), `refusals ${JSON.stringify(f.refusals)}; flow: ${r && r.stack}`);
    await settle();
    assert.equal(rec.bytes - before, 0, 'nothing reached the listener');
    if (scenario === 'prm-chain') {
      assert.ok(!rs.seen.slice(rs0).some((s) => s.url === '/chain/4'), 'the chain stopped at the limit');
      const mid = rs.seen.length;
      await flow(scenario, plain);
      assert.ok(rs.seen.slice(mid).some((s) => s.url === '/chain/4'), 'plain fetch went past the limit');
      return;
    }
    if (!reachable) return;
    // Negative control: the SDK over plain fetch delivers to the listener.
    const ctl = await flow(scenario, plain);
    assert.notEqual(ctl, 'connected');
    assert.ok(rec.bytes > before, `plain fetch reached the listener (${rec.bytes - before} bytes)`);
  });
}

test('hostile: a body flood on a redirect to the resource metadata: 64 KiB read, the flow completes', async () => {
  const f = spy(guardedFetch(guard, 'default'));
  floodSent = -1;
  const t0 = process.hrtime.bigint();
  assert.equal(await flow('prm-flood', f), 'connected');
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  for (let i = 0; i < 100 && floodSent < 0; i++) await settle();
  console.log(`# oauth flood: flow done in ${ms.toFixed(1)} ms; the server wrote ${floodSent} bytes before the close`);
  assert.ok(floodSent > 0 && floodSent < 16 << 20, `server wrote ${floodSent} bytes`);
});

test('interactive: authorization URL, code and PKCE verifier exchanged through guardedFetch, session, refresh', async () => {
  const f = spy(guardedFetch(guard, 'default'));
  const p = new CodeProvider();
  const as0 = as.seen.length;
  assert.equal(await codeFlow('ok', f, p), 'connected');
  assert.deepEqual(f.refusals, []);
  const asPaths = as.seen.slice(as0).map((s) => `${s.method} ${s.url.split('?')[0]}`);
  assert.deepEqual(asPaths, ['GET /.well-known/oauth-authorization-server/ok', 'POST /register',
    'GET /authorize', 'GET /.well-known/oauth-authorization-server/ok', 'POST /token']);
  assert.equal(p.saved.refresh_token, REFRESH);
  // The resource server stops taking the access token: the SDK refreshes
  // it at the token endpoint, through guardedFetch, and goes on.
  tokenValid = false;
  const as1 = as.seen.length;
  assert.equal(await flowWith('ok', f, p), 'connected');
  assert.deepEqual(f.refusals, []);
  assert.ok(as.seen.slice(as1).some((s) => s.method === 'POST' && s.url === '/token'), 'refreshed');
  assert.equal(tokenValid, true);
});

test('hostile: the code exchange redirected to a private name: refused, the code and verifier never leave', async () => {
  const f = spy(guardedFetch(guard, 'default'));
  const p = new CodeProvider();
  const before = rec.bytes;
  const r = await codeFlow('token-redirect', f, p);
  assert.notEqual(r, 'connected');
  assert.equal(p.exchanged, undefined, 'finishAuth failed');
  assert.ok(f.refusals.includes('redirect_body_cross_origin'), `refusals ${JSON.stringify(f.refusals)}; ${r && r.stack}`);
  await settle();
  assert.equal(rec.bytes - before, 0, 'nothing reached the listener');
  // Negative control: over plain fetch the exchange (code and verifier in
  // its body) follows the 307 to the listener.
  const ctl = await codeFlow('token-redirect', plain, new CodeProvider());
  assert.notEqual(ctl, 'connected');
  await settle();
  assert.ok(rec.bytes > before, `plain fetch delivered the exchange (${rec.bytes - before} bytes)`);
});
