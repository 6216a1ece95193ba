'use strict';
/*
 * @pinhole/guard: Pinhole's egress guard for Node.js workers (docs/worker.md,
 * "Node.js").
 *
 *   Guard          the policy (a compiled allowlist table) and its resolver:
 *                  decide(url, list), resolve(url, list), reload(), close()
 *   guardedFetch   a fetch whose every connection is decided and pinned at
 *                  connect time, and whose redirects follow libpinhole's
 *                  rules (pinhole/redirect.h), never fetch's own
 *   guardedAgent   an http.Agent / https.Agent whose every connection is
 *                  decided and pinned the same way (http.get, axios, got)
 *   PinholeError   every refusal: .reason (the stable code), .detail
 *
 * The addon (src/addon.c) is found at $PINHOLE_NODE_ADDON, else beside the
 * package in build/pinhole.node.
 */
const http = require('node:http');
const https = require('node:https');
const net = require('node:net');
const path = require('node:path');
const tls = require('node:tls');
const undici = require('undici');

class PinholeError extends Error {
  constructor(message, reason, detail) {
    super(message);
    this.name = 'PinholeError';
    this.reason = reason;
    this.detail = detail === undefined ? '' : detail;
  }
}

function loadAddon() {
  const file = process.env.PINHOLE_NODE_ADDON || path.join(__dirname, '..', 'build', 'pinhole.node');
  const addon = require(file);
  addon.setErrorClass(PinholeError);
  return addon;
}
const addon = loadAddon();

function refused(reason, detail) {
  return new PinholeError(detail ? `${reason}: ${detail}` : reason, reason, detail || '');
}

class Guard {
  /**
   * tablePath: a table compiled by policyc. options: dnsServers
   * ("ip[:port],..."; default resolv.conf), dnsTimeoutMs, reloadIntervalMs
   * (default 1000; 0: only reload()), dnsCache (default true),
   * dnsCacheEntries, dnsCacheMaxTtlS, dnsNegativeTtlS, maxPending
   * (resolutions in flight on this guard, default 256).
   */
  constructor(tablePath, options) {
    this._native = new addon.Guard(String(tablePath), options === undefined ? {} : options);
  }

  /** The one decision for url against list (ph_decide_url); no DNS. */
  decide(url, list = 'default') {
    return this._native.decide(String(url), list);
  }

  /** The decision, then exactly the decided name resolved with every
   * address checked: {host, port, addresses: [{address, family}], ...} or
   * a rejection with a PinholeError. Runs on the event loop. */
  resolve(url, list = 'default') {
    return this._native.resolve(String(url), list);
  }

  redirectCheck(fromUrl, location, hop, list = 'default', options = {}) {
    return this._native.redirectCheck(String(fromUrl), String(location), hop, list, options);
  }

  /** Reloads the table (and grant keys) if replaced: {reloaded, generation, policyId}. */
  reload() {
    return this._native.reload();
  }

  close() {
    this._native.close();
  }
}

/* ---- redirects: the library's rules --------------------------------------- */

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const DEFAULT_MAX_REDIRECTS = 10;            // PH_REDIRECT_MAX_HOPS_DEFAULT
const BODY_DISCARD_MAX = 65536;              // PH_REDIRECT_BODY_DISCARD_MAX
const DEFAULT_TIMEOUT_MS = 30000;            // PH_REDIRECT_CHAIN_TIMEOUT_MS_DEFAULT
const DEFAULT_CONNECT_TIMEOUT_MS = 10000;

let headerLists = null;
function lists() {
  if (!headerLists) {
    const h = addon.redirectHeaders();
    headerLists = {
      cross: new Set(h.crossOrigin.map((n) => n.toLowerCase())),
      body: new Set(h.body.map((n) => n.toLowerCase())),
    };
  }
  return headerLists;
}

/** ph_redirect_header_follows over the lists read from libpinhole. */
function headerFollows(name, sameOrigin, bodyFollows) {
  const { cross, body } = lists();
  const n = name.toLowerCase();
  if (body.has(n)) return bodyFollows;
  return sameOrigin || cross.has(n);
}

/* Reads and throws away at most BODY_DISCARD_MAX bytes of a redirect's
 * body; past that (or on any error) the stream is cancelled, which closes
 * its connection instead of reading a flood. */
async function discardBody(res) {
  if (!res.body) return;
  const reader = res.body.getReader();
  let seen = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      seen += value.byteLength;
      if (seen > BODY_DISCARD_MAX) {
        await reader.cancel().catch(() => {});
        return;
      }
    }
  } catch {
    await reader.cancel().catch(() => {});
  }
}

/* ---- connections: decided and pinned at connect time ---------------------- */

/* A socket to exactly the address the guard checked for scheme://host:port:
 * the decision, then exactly the decided name resolved with every address
 * checked, then net/tls handed a lookup that answers only those addresses
 * for only that name (https: SNI and the certificate verified for the
 * decided host against conn.secureContext). callback(err, socket) once
 * connected (https: once the handshake is done). */
function pinnedSocket(guard, list, conn, scheme, host, port, callback) {
  const connectTimeoutMs = conn.connectTimeoutMs;
  const origin = `${scheme}://${host}${port ? ':' + port : ''}/`;
  let resolution;
  try {
    resolution = guard.resolve(origin, list);
  } catch (err) {
    callback(err);
    return;
  }
  resolution.then((res) => {
    const addrs = res.addresses;
    const lookup = (hostname, lopts, cb) => {
      if (typeof lopts === 'function') { cb = lopts; lopts = {}; }
      if (hostname !== res.host) {
        cb(refused('denied_address', `lookup of ${hostname} on a connection pinned to ${res.host}`));
        return;
      }
      if (lopts && lopts.all) cb(null, addrs.map((a) => ({ address: a.address, family: a.family })));
      else cb(null, addrs[0].address, addrs[0].family);
    };
    const common = { host: res.host, port: res.port, lookup };
    let socket;
    if (res.scheme === 'https') {
      socket = tls.connect({
        ...common,
        servername: res.host,
        ALPNProtocols: ['http/1.1'],
        secureContext: conn.secureContext,
        rejectUnauthorized: true,
      });
    } else {
      socket = net.connect(common);
    }
    socket.setNoDelay(true);
    let settled = false;
    const timer = setTimeout(() => {
      socket.destroy(refused('upstream_timeout',
        `no connection to ${res.host}:${res.port} within ${connectTimeoutMs} ms`));
    }, connectTimeoutMs);
    const done = (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.removeListener('error', done);
      if (err) {
        socket.destroy();
        callback(err instanceof PinholeError ? err : refused('upstream_unreachable',
          `${res.host}:${res.port}: ${err.message}`));
      } else {
        callback(null, socket);
      }
    };
    socket.once(res.scheme === 'https' ? 'secureConnect' : 'connect', () => done(null));
    socket.once('error', done);
  }, (err) => callback(err));
}

/* What pinnedSocket needs from a caller's options, made once: the connect
 * timeout and the TLS context trusting Node's CAs (tls.rootCertificates)
 * plus options.ca. */
function connectOptions(options) {
  return {
    connectTimeoutMs: options.connectTimeoutMs || DEFAULT_CONNECT_TIMEOUT_MS,
    secureContext: tls.createSecureContext({
      ca: options.ca === undefined ? undefined : [...tls.rootCertificates, ...[].concat(options.ca)],
    }),
  };
}

/* undici's connect hook over pinnedSocket. */
function pinnedConnector(guard, list, options) {
  const conn = connectOptions(options);
  return function connect(o, callback) {
    pinnedSocket(guard, list, conn, o.protocol.replace(/:$/, ''), o.hostname, o.port, callback);
  };
}

function causeReason(err) {
  for (let e = err, i = 0; e && i < 8; e = e.cause, i++) {
    if (e instanceof PinholeError) return e;
  }
  return null;
}

/* The deadline of one guarded request: every hop up to the final response
 * head. When it passes, the hop in flight is aborted through the abort
 * undici handed its dispatch (onConnect: the socket's request, a redirect
 * body being read too), and a hop still waiting for its connection is
 * rejected at once (its request is aborted when the connection comes).
 * The Deadline is the dispatcher fetch is given for the request's hops: it
 * hands each hop to the guarded agent with a handler that learns the
 * hop's abort. An AbortSignal per request would do the same at a cost
 * above the decision's (undici ties every signal to its Request with a
 * listener and a FinalizationRegistry), and so would a timer per request
 * (Node makes and drops a timer list each time). */
class Deadline {
  constructor(deadlines) {
    this.deadlines = deadlines;
    this.expires = performance.now() + deadlines.ms;
    this.prev = this.next = null;
    this.error = null;   // the refusal once the deadline passed
    this.abort = null;   // the abort of the hop on a socket
    this.reject = null;  // rejects the hop being awaited
  }

  expire() {
    this.error = refused('upstream_timeout',
      `the guarded request's deadline of ${this.deadlines.ms} ms passed`);
    if (this.abort) this.abort(this.error);
    if (this.reject) this.reject(this.error);
  }

  /* undici's dispatcher interface: what fetch calls once per hop. */
  dispatch(opts, handler) {
    return this.deadlines.agent.dispatch(opts, new DeadlineHandler(handler, this));
  }

  /* fetch(url, init) of one hop under this deadline. */
  hop(url, init) {
    if (this.error) return Promise.reject(this.error);
    init.dispatcher = this;
    return new Promise((resolve, reject) => {
      this.reject = reject;
      undici.fetch(url, init).then(resolve, reject);
    });
  }

  /* The request is done with its deadline (its final response head came,
   * or it failed). */
  finish() {
    this.abort = this.reject = null;
    this.deadlines.unlink(this);
  }
}

/* The deadlines of one guardedFetch's requests, all of the same length:
 * they pass in the order the requests began, so one queue (oldest first)
 * and one timer, armed for the oldest and re-armed only when it fires,
 * serve them all; a request that finishes only leaves the queue. The
 * timer holds the process open only while a request is in the queue. */
class Deadlines {
  constructor(agent, ms) {
    this.agent = agent;
    this.ms = ms;
    this.head = this.tail = null;
    this.timer = null;
  }

  start() {
    const d = new Deadline(this);
    if (this.tail) {
      d.prev = this.tail;
      this.tail.next = d;
    } else {
      this.head = d;
      if (this.timer) this.timer.ref();
      else this.timer = setTimeout(Deadlines.fire, this.ms, this);
    }
    this.tail = d;
    return d;
  }

  unlink(d) {
    if (d.prev) d.prev.next = d.next;
    else if (this.head === d) this.head = d.next;
    else return; // already out of the queue
    if (d.next) d.next.prev = d.prev;
    else this.tail = d.prev;
    d.prev = d.next = null;
    if (!this.head && this.timer) this.timer.unref();
  }

  static fire(self) {
    self.timer = null;
    const now = performance.now();
    while (self.head && self.head.expires <= now) {
      const d = self.head;
      self.unlink(d);
      d.expire();
    }
    if (self.head) {
      self.timer = setTimeout(Deadlines.fire, Math.max(1, Math.ceil(self.head.expires - now)), self);
    }
  }
}

/* fetch's dispatch handler, its hop's abort told to the Deadline. */
class DeadlineHandler {
  constructor(handler, deadline) {
    this.handler = handler;
    this.deadline = deadline;
  }

  onConnect(abort, context) {
    this.deadline.abort = abort;
    this.handler.onConnect(abort, context);
    if (this.deadline.error) abort(this.deadline.error);
  }

  onResponseStarted() { return this.handler.onResponseStarted?.(); }
  onHeaders(status, headers, resume, text) { return this.handler.onHeaders(status, headers, resume, text); }
  onData(chunk) { return this.handler.onData(chunk); }
  onComplete(trailers) { return this.handler.onComplete(trailers); }
  onError(err) { return this.handler.onError(err); }
  onUpgrade(status, headers, socket) { return this.handler.onUpgrade(status, headers, socket); }
  onBodySent(chunk) { return this.handler.onBodySent?.(chunk); }
  onRequestSent() { return this.handler.onRequestSent?.(); }
}

/* Whether init is a plain object holding headers and signal only. fetch
 * reads a member wherever init has it (its prototype's accessors too: a
 * class's, which for...in does not list), so anything but a plain object
 * is read through a Request. */
function onlyHeadersAndSignal(init) {
  const proto = Object.getPrototypeOf(init);
  if (proto !== Object.prototype && proto !== null) return false;
  for (const k of Reflect.ownKeys(init)) {
    if (k !== 'headers' && k !== 'signal') return false;
  }
  return true;
}

/* fetch's init for one hop: redirects are the package's; a member that
 * would be fetch's default is left out (fetch reads each one given). */
function hopInit(method, headers, body, signal) {
  const init = { redirect: 'manual' };
  if (method !== 'GET') init.method = method;
  if (headers !== undefined) init.headers = headers;
  if (body !== null) {
    init.body = body;
    init.duplex = 'half';
  }
  if (signal !== undefined && signal !== null) init.signal = signal;
  return init;
}

/**
 * guardedFetch(guard, list, options) -> fetch(input, init)
 * options: maxRedirects (10; at least 1), timeoutMs (30000: every hop up to the final
 * response head), connectTimeoutMs (10000), allowDowngrade (false),
 * allowBodyCrossOrigin (false), ca (extra trusted CA, PEM).
 */
function guardedFetch(guard, list = 'default', options = {}) {
  if (!(guard instanceof Guard)) throw new TypeError('guardedFetch: guard must be a Guard');
  const maxRedirects = options.maxRedirects === undefined ? DEFAULT_MAX_REDIRECTS : options.maxRedirects;
  // The library reads a hop limit of 0 as its default: a caller's 0 would
  // follow 10 redirects, so it is refused here.
  if (!Number.isInteger(maxRedirects) || maxRedirects < 1) {
    throw new TypeError("guardedFetch: maxRedirects must be an integer of at least 1 (redirect: 'manual' or 'error' follows none)");
  }
  const timeoutMs = options.timeoutMs || DEFAULT_TIMEOUT_MS;
  const agent = new undici.Agent({ connect: pinnedConnector(guard, list, options), maxRedirections: 0 });
  const deadlines = new Deadlines(agent, timeoutMs);
  const native = guard._native;

  async function fetchGuarded(input, init) {
    if (init === undefined || init === null) init = {};
    if (init.dispatcher !== undefined) {
      throw refused('proxy_refused', 'init.dispatcher would route around the guard');
    }
    // A GET of a URL with at most headers and a signal needs no Request
    // (the common case, and a Request costs as much as the decision);
    // anything else is read through one, as fetch reads it. Headers are
    // copied only when given (a redirect edits the copy).
    let url, method, headers, body, redirectMode, signal;
    if ((typeof input === 'string' || input instanceof URL) && onlyHeadersAndSignal(init)) {
      url = new URL(input).href;
      method = 'GET';
      headers = init.headers === undefined ? undefined : new undici.Headers(init.headers);
      body = null;
      redirectMode = 'follow';
      signal = init.signal;
    } else {
      const first = new undici.Request(input, init);
      url = first.url;
      method = first.method;
      headers = new undici.Headers(first.headers);
      body = first.body ? Buffer.from(await first.arrayBuffer()) : null;
      redirectMode = first.redirect;
      // The caller's signal, which fetch follows on every hop and on the
      // final response's body.
      signal = init.signal || (input instanceof undici.Request ? input.signal : undefined);
    }

    const deadline = deadlines.start();
    try {
      for (let hop = 0; ; hop++) {
        native.admit(url, list);
        let res;
        try {
          res = await deadline.hop(url, hopInit(method, headers, body, signal));
        } catch (err) {
          throw causeReason(err) || err;
        }
        if (!REDIRECT_STATUSES.has(res.status)) return res;
        const location = res.headers.get('location');
        if (location === null) return res;
        // The caller's own redirect mode is stricter than following: 'manual'
        // hands it the redirect (a request it then makes is decided again),
        // 'error' fails as fetch does.
        if (redirectMode === 'manual') return res;
        if (redirectMode === 'error') {
          await discardBody(res);
          throw new TypeError(`fetch: a redirect (${res.status}) with redirect mode "error"`);
        }
        const next = addon.nextMethod(res.status, method);
        const resendBody = body !== null && next === method;
        const rc = guard.redirectCheck(url, location.trim(), hop, list, {
          maxHops: maxRedirects, allowDowngrade: !!options.allowDowngrade, resendBody,
          allowBodyCrossOrigin: !!options.allowBodyCrossOrigin,
        });
        await discardBody(res);
        if (!rc.allowed) throw refused(rc.reason, rc.detail);
        if (headers !== undefined) {
          for (const name of [...headers.keys()]) {
            if (!headerFollows(name, rc.sameOrigin, resendBody)) headers.delete(name);
          }
        }
        method = next;
        body = resendBody ? body : null;
        url = rc.url;
      }
    } catch (err) {
      throw deadline.error || err;
    } finally {
      deadline.finish();
    }
  }
  fetchGuarded.agent = agent;
  return fetchGuarded;
}

/**
 * guardedAgent(guard, list, options) -> an http.Agent, or with options.https
 * an https.Agent, for clients built on node:http/node:https: every socket it
 * makes is decided for its host:port and pinned to the checked addresses,
 * as guardedFetch's are. Redirects are the client's (axios and got follow
 * them on new requests through the same agent, each connection decided
 * again; the header rules of guardedFetch are not the agent's to apply).
 * options: https, ca, connectTimeoutMs, and the Agent's own keepAlive,
 * keepAliveMsecs, maxSockets, maxFreeSockets, timeout.
 */
function guardedAgent(guard, list = 'default', options = {}) {
  if (!(guard instanceof Guard)) throw new TypeError('guardedAgent: guard must be a Guard');
  const conn = connectOptions(options);
  const scheme = options.https ? 'https' : 'http';
  const Base = options.https ? https.Agent : http.Agent;
  const agentOptions = {};
  for (const k of ['keepAlive', 'keepAliveMsecs', 'maxSockets', 'maxFreeSockets', 'timeout']) {
    if (options[k] !== undefined) agentOptions[k] = options[k];
  }
  class PinnedAgent extends Base {
    // The request's own lookup, servername, ca or rejectUnauthorized are
    // not used: the decided host, its checked addresses and the agent's CAs are.
    createConnection(o, callback) {
      pinnedSocket(guard, list, conn, scheme, o.host, o.port, callback);
      return undefined;
    }
  }
  return new PinnedAgent(agentOptions);
}

module.exports = {
  Guard,
  PinholeError,
  guardedFetch,
  guardedAgent,
  testLoopback: addon.testLoopback,
  URL_MAX_LEN: addon.urlMaxLen,
  headerFollows,
  nextMethod: (status, method) => addon.nextMethod(status, method),
  REDIRECT_STATUSES,
  BODY_DISCARD_MAX,
};
