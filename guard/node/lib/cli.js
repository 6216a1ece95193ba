'use strict';
/*
 * pinhole-node check: the same lines and exit statuses as `pinhole-guard
 * check` and `python3 -m pinhole check` (docs/pinhole-guard.md), through the
 * Node binding.
 *
 *   pinhole-node check [-t FILE] [-l NAME] [-r] [--dns-server S]
 *                      [--dns-timeout MS] [-j] [URL...]
 *
 * One verdict line per URL (one URL a line from stdin when none is given).
 * Exit status: 0 every URL allowed, 1 any refused, 2 usage error or
 * unusable table.
 */
const { Guard, PinholeError, testLoopback, URL_MAX_LEN } = require('./index.js');

const EXIT_ALLOWED = 0;
const EXIT_REFUSED = 1;
const EXIT_USAGE = 2;
const USAGE = 'usage: pinhole-node check [--table FILE] [--list NAME] [--resolve] [--json] [URL...]';
const HELP = `Usage: pinhole-node check [OPTIONS] [URL...]
Prints one verdict line per URL (read one per line from stdin when none is given).

  -t, --table FILE     compiled allowlist (default: $PINHOLE_TABLE)
  -l, --list NAME      allowlist name (default: default)
  -r, --resolve        also resolve the host and check every address
      --dns-server S   DNS servers for --resolve (default: /etc/resolv.conf)
      --dns-timeout MS overall resolution timeout in ms (default: 5000)
  -j, --json           one JSON object per line

Exit status: 0 all allowed, 1 any refused, 2 usage error or unusable table.
`;

class UsageError extends Error {}

function error(out, msg) {
  out.stderr.write(`pinhole: ${msg}\n`);
}

/* The URL as far as it is printable ASCII (as pinhole-guard shows it):
 * hostile input must not forge a second output line. */
function shown(buf) {
  let out = '';
  let i = 0;
  while (i < buf.length && out.length + 4 < 256) {
    const c = buf[i++];
    out += c > 0x20 && c < 0x7f && c !== 0x22 ? String.fromCharCode(c) : '?';
  }
  if (out.length + 4 >= 256 && buf.length > out.length) out += '...';
  return out;
}

function quoted(s) {
  let out = '"';
  for (const c of Buffer.from(s, 'utf8')) {
    if (c === 0x22 || c === 0x5c) out += '\\';
    out += c >= 0x20 && c < 0x7f ? String.fromCharCode(c) : '?';
  }
  return out + '"';
}

function parse(argv, env) {
  const a = { table: env.PINHOLE_TABLE, list: 'default', resolve: false, json: false, urls: [] };
  const value = (i, name) => {
    if (i + 1 >= argv.length) throw new UsageError(`argument ${name}: expected one argument`);
    return argv[i + 1];
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const name = eq > 0 ? arg.slice(0, eq) : arg;
    const take = () => {
      if (eq > 0) return arg.slice(eq + 1);
      const v = value(i, name);
      i++;
      return v;
    };
    if (name === '-t' || name === '--table') a.table = take();
    else if (name === '-l' || name === '--list') a.list = take();
    else if (name === '--dns-server') a.dnsServer = take();
    else if (name === '--dns-timeout') a.dnsTimeout = take();
    else if ((name === '-r' || name === '--resolve') && eq < 0) a.resolve = true;
    else if ((name === '-j' || name === '--json') && eq < 0) a.json = true;
    else if (arg === '--') { a.urls.push(...argv.slice(i + 1)); break; }
    else if (arg.startsWith('-') && arg !== '-') throw new UsageError(`unrecognized arguments: ${arg}`);
    else a.urls.push(arg);
  }
  return a;
}

function printText(out, url, v) {
  if (v.allowed) {
    let line = `ALLOW ${url} host=${v.host} port=${v.port} rule=${v.rule.file}:${v.rule.line}` +
      ` list=${v.rule.list} match=${v.rule.host}`;
    if (v.addresses && v.addresses.length) line += ` addresses=${v.addresses.map((x) => x.address).join(',')}`;
    out.stdout.write(line + '\n');
  } else {
    out.stdout.write(`DENY ${url} reason=${v.reason} detail=${quoted(v.detail)}\n`);
  }
}

function printJson(out, url, v, resolve) {
  const o = { url, allowed: v.allowed, reason: v.reason };
  if (v.host) { o.host = v.host; o.port = v.port; }
  if (v.rule) {
    const r = { list: v.rule.list, host: v.rule.host, file: v.rule.file, line: v.rule.line };
    if (v.rule.reason) r.reason = v.rule.reason;
    o.rule = r;
  }
  if (resolve && v.allowed) o.addresses = v.addresses.map((x) => x.address);
  if (!v.allowed && v.detail) o.detail = v.detail;
  if (v.policyId) o.policy_id = v.policyId;
  // JSON.stringify escapes no non-ASCII; the line stays ASCII as pinhole-guard's does.
  out.stdout.write(JSON.stringify(o).replace(/[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) + '\n');
}

/* One URL (bytes): its verdict line; true when allowed. */
async function checkOne(out, guard, a, raw) {
  const bytes = raw.length > URL_MAX_LEN + 1 ? raw.subarray(0, URL_MAX_LEN + 1) : raw;
  const url = bytes.toString('utf8');
  // The decision; a refusal's line shows its verdict's own message.
  let v = guard.decide(url, a.list);
  if (!v.allowed) v = { ...v, detail: v.verdictDetail };
  if (a.resolve && v.allowed) {
    try {
      v = await guard.resolve(url, a.list);
    } catch (e) {
      if (!(e instanceof PinholeError) || e.reason === 'guard_error') throw e;
      v = { ...v, allowed: false, reason: e.reason, detail: e.detail };
    }
  }
  if (a.json) printJson(out, shown(bytes), v, a.resolve);
  else printText(out, shown(bytes), v);
  return v.allowed;
}

async function readLines(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  const all = Buffer.concat(chunks);
  const lines = [];
  let start = 0;
  for (let i = 0; i <= all.length; i++) {
    if (i === all.length || all[i] === 0x0a) {
      if (i > start) lines.push(all.subarray(start, i));
      start = i + 1;
    }
  }
  return lines;
}

async function check(argv, out, env) {
  let a;
  try {
    a = parse(argv, env);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    out.stderr.write(USAGE + '\n');
    error(out, e.message);
    return EXIT_USAGE;
  }
  let timeout = 0;
  if (a.dnsTimeout !== undefined) {
    if (!/^[0-9]+$/.test(a.dnsTimeout) || Number(a.dnsTimeout) < 1 || Number(a.dnsTimeout) > 600000) {
      error(out, '--dns-timeout takes milliseconds, 1..600000');
      return EXIT_USAGE;
    }
    timeout = Number(a.dnsTimeout);
  }
  if (!a.table) {
    error(out, 'no table: give --table FILE or set PINHOLE_TABLE');
    return EXIT_USAGE;
  }
  if ((a.dnsServer !== undefined || timeout) && !a.resolve) {
    error(out, '--dns-server and --dns-timeout need --resolve');
    return EXIT_USAGE;
  }
  let guard;
  try {
    const opts = { reloadIntervalMs: 0 };
    if (a.dnsServer !== undefined) opts.dnsServers = a.dnsServer;
    if (timeout) opts.dnsTimeoutMs = timeout;
    guard = new Guard(a.table, opts);
  } catch (e) {
    error(out, e.message);
    return EXIT_USAGE;
  }
  try {
    const inputs = a.urls.length ? a.urls.map((u) => Buffer.from(u, 'utf8')) : await readLines(out.stdin);
    let ok = true;
    for (const raw of inputs) ok = (await checkOne(out, guard, a, raw)) && ok;
    return ok ? EXIT_ALLOWED : EXIT_REFUSED;
  } finally {
    guard.close();
  }
}

/* main(argv, io): the exit status; io defaults to the process's streams. */
async function main(argv, io = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr }, env = process.env) {
  try {
    if (!argv.length) {
      error(io, USAGE);
      return EXIT_USAGE;
    }
    if (argv[0] === '-h' || argv[0] === '--help') {
      io.stdout.write(HELP);
      return EXIT_ALLOWED;
    }
    if (testLoopback) {
      error(io, 'warning: TEST BUILD, 127.0.0.0/8 and ::1 are exempt from the address denylist');
    }
    if (argv[0] === 'check') {
      if (argv[1] === '-h' || argv[1] === '--help') {
        io.stdout.write(HELP);
        return EXIT_ALLOWED;
      }
      return await check(argv.slice(1), io, env);
    }
    error(io, `unknown command '${argv[0]}'`);
    return EXIT_USAGE;
  } catch (e) {
    error(io, e && e.message ? e.message : String(e));
    return EXIT_USAGE;
  }
}

module.exports = { main, EXIT_ALLOWED, EXIT_REFUSED, EXIT_USAGE };
