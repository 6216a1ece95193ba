#!/usr/bin/env node
// url-differential.mjs - the differential campaign for Pinhole's strict URL
// parser (docs/url.md, "The differential campaign").
//
// Generates several thousand hostile URLs by mutation (IP encodings, IPv6
// forms, userinfo and delimiter tricks, percent-encoding, whitespace and
// controls, unicode dots and fullwidth characters, IDN, schemes, ports,
// path-less and slash-confused forms, trailing junk), then for each compares
//   - our verdict (ph_url_parse),
//   - what the WHATWG URL Standard extracts (this Node.js's URL class), and
//   - what libcurl's URL API extracts (curl_url(), default flags),
// the last two through the test binary's oracle mode. An URL we accept where
// WHATWG or curl would reach another host or port (or refuse it) is a bug
// and is listed on stderr; the exit status is 1 when there is one.
//
// Offline and deterministic (fixed seed); the tests never need Node: the
// curated result is written to tests/data/urls/differential.tsv and replayed
// by tests/guard/test_url_differential.c.
//
// usage: node scripts/url-differential.mjs [--oracle BIN] [--full FILE] [--write-corpus FILE]
//   --oracle BIN         the built guard.test_url_differential, from the same
//                        source tree (default build/dev/tests/guard/...; run
//                        from the source root)
//   --full FILE          write every generated URL with the three verdicts (TSV)
//   --write-corpus FILE  write the curated corpus (a few hundred rows, one per trick)
// exit: 0 no bug, 1 bugs found, 2 usage or oracle error.

import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import urlLegacy from 'node:url';

// node:punycode is deprecated as a dependency, but it is the raw RFC 3492
// encoder we need to craft invalid A-labels (url.domainToASCII validates).
process.noDeprecation = true;
const { default: punycode } = await import('node:punycode');

const args = process.argv.slice(2);
const opt = { oracle: 'build/dev/tests/guard/guard.test_url_differential' };
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--help' || a === '-h') {
    console.log('usage: node scripts/url-differential.mjs [--oracle BIN] [--full FILE] [--write-corpus FILE]');
    process.exit(0);
  } else if (a === '--oracle' || a === '--full' || a === '--write-corpus') {
    if (i + 1 >= args.length) { console.error(`${a} needs a value`); process.exit(2); }
    opt[a.slice(2).replace('-corpus', 'Corpus')] = args[++i];
  } else {
    console.error(`unknown argument ${a}`);
    process.exit(2);
  }
}

if (!existsSync(opt.oracle)) {
  console.error(`no oracle at ${opt.oracle}: cmake --build build/dev --target guard.test_url_differential, or pass --oracle BIN`);
  process.exit(2);
}
console.log(`oracle: ${opt.oracle}`);

// ---------------------------------------------------------------- inputs

/** Every generated case: {url, trick, keep}. keep: candidate for the corpus. */
const cases = [];
const seen = new Set();
function add(url, trick, keep = true) {
  if (seen.has(url)) return;
  seen.add(url);
  cases.push({ url, trick, keep });
}

// IPv4 encodings of a dotted quad: every part count (4, 3, 2, 1 parts as
// inet_aton and WHATWG read them) with each part in decimal, octal, hex.
function ipv4Spellings(quad) {
  const b = quad.split('.').map(Number);
  const groups = {
    4: [b[0], b[1], b[2], b[3]],
    3: [b[0], b[1], b[2] * 256 + b[3]],
    2: [b[0], ((b[1] * 256 + b[2]) * 256 + b[3])],
    1: [((b[0] * 256 + b[1]) * 256 + b[2]) * 256 + b[3]],
  };
  const enc = {
    dec: (n) => String(n),
    oct: (n) => '0' + n.toString(8),
    hex: (n) => '0x' + n.toString(16),
    HEX: (n) => '0X' + n.toString(16).toUpperCase(),
    pad: (n) => '000' + String(n),
  };
  const out = [];
  for (const [count, parts] of Object.entries(groups)) {
    for (const [name, f] of Object.entries(enc)) {
      out.push([parts.map(f).join('.'), `ipv4 ${count} parts all ${name}`, true]);
      // mixed: one part in this encoding, the others decimal
      if (count > 1) {
        for (let k = 0; k < parts.length; k++) {
          const mixed = parts.map((p, j) => (j === k ? f(p) : String(p))).join('.');
          out.push([mixed, `ipv4 ${count} parts, part ${k + 1} ${name}`, count === '4' && (name === 'hex' || name === 'oct')]);
        }
      }
    }
  }
  return out;
}

const ipv4Targets = ['127.0.0.1', '169.254.169.254', '10.0.0.1', '0.0.0.0', '192.168.1.1', '8.8.8.8'];
const hosts = [];
// The corpus keeps every "all parts" spelling and the mixed dotted-quad ones
// of 127.0.0.1, and five spellings of each other target.
const otherTargetKept = /^ipv4 (4 parts all (dec|oct|hex)|1 part(s)? all (dec|hex))/;
for (const t of ipv4Targets) {
  for (const [h, trick, keep] of ipv4Spellings(t))
    hosts.push([h, `${trick} (${t})`, t === '127.0.0.1' ? keep : otherTargetKept.test(trick)]);
}
hosts.push(
  // IPv4 edge forms
  ['127.0.0.1.', 'ipv4 trailing dot'], ['127.0.0.1..', 'ipv4 two trailing dots'],
  ['.127.0.0.1', 'ipv4 leading dot'], ['127..0.1', 'ipv4 empty part'],
  ['0', 'ipv4 zero'], ['0x', 'ipv4 bare 0x'], ['0x.0x.0x.0x', 'ipv4 bare 0x parts'],
  ['4294967295', 'ipv4 max integer'], ['4294967296', 'ipv4 integer overflow'],
  ['0x100000000', 'ipv4 hex overflow'], ['256.0.0.1', 'ipv4 part overflow'],
  ['127.0.0.256', 'ipv4 last part overflow'], ['127.0.0.08', 'ipv4 bad octal 08'],
  ['127.0.0.09', 'ipv4 bad octal 09'], ['1.2.3.4.5', 'ipv4 five parts'],
  ['127.0.0.1a', 'ipv4 trailing letter'], ['127.0.0.0x1', 'ipv4 hex last'],
  ['127.0.0.1e1', 'ipv4 exponent'], ['127.0.0.-1', 'ipv4 negative part'],
  ['127.0.0.+1', 'ipv4 plus part'], ['0x7f.0x0.0x0.0x1.', 'ipv4 hex trailing dot'],
  ['0177.0000.0000.0001', 'ipv4 padded octal'], ['1.2.3.0x', 'ipv4 last 0x'],
  ['a.b.c.1', 'name ending in a number'], ['example.123', 'name ending in digits'],
  ['example.0x10', 'name ending in hex'], ['example.0X', 'name ending in 0X'],
  ['example.0x1g', 'name ending in not-hex'], ['example.1a', 'name ending alnum'],
  ['example.08', 'name ending in 08'], ['example.1e3', 'name ending in 1e3'],
  ['127.0.0.1.nip.io', 'numeric labels then a name'], ['0x7f.example.com', 'hex first label'],
  ['1.example', 'digit first label'], ['example.com.127.0.0.1', 'name then an IP'],
  // IPv6
  ['[::1]', 'ipv6 loopback'], ['[::]', 'ipv6 unspecified'], ['[0:0:0:0:0:0:0:1]', 'ipv6 full'],
  ['[0000:0000:0000:0000:0000:0000:0000:0001]', 'ipv6 padded'], ['[00000::1]', 'ipv6 5-digit group'],
  ['[::ffff:127.0.0.1]', 'ipv6 mapped dotted'], ['[::ffff:7f00:1]', 'ipv6 mapped hex'],
  ['[::FFFF:127.0.0.1]', 'ipv6 mapped uppercase'], ['[0:0:0:0:0:ffff:127.0.0.1]', 'ipv6 mapped full'],
  ['[::127.0.0.1]', 'ipv6 compatible'], ['[::ffff:127.1]', 'ipv6 mapped short ipv4'],
  ['[::ffff:0x7f.0.0.1]', 'ipv6 mapped hex ipv4'], ['[::ffff:0177.0.0.1]', 'ipv6 mapped octal ipv4'],
  ['[64:ff9b::127.0.0.1]', 'ipv6 nat64 dotted'], ['[64:ff9b::a9fe:a9fe]', 'ipv6 nat64 metadata'],
  ['[2002:7f00:1::]', 'ipv6 6to4'], ['[2001:0:4136:e378:8000:63bf:80ff:fffe]', 'ipv6 teredo'],
  ['[fd00:ec2::254]', 'ipv6 aws metadata'], ['[fe80::1]', 'ipv6 link-local'],
  ['[fe80::1%25eth0]', 'ipv6 zone %25'], ['[fe80::1%eth0]', 'ipv6 zone raw'],
  ['[fe80::1%2525]', 'ipv6 zone %2525'], ['[::1%00]', 'ipv6 zone nul'], ['[::1%]', 'ipv6 empty zone'],
  ['[v1.x]', 'ipvfuture'], ['[v1.127.0.0.1]', 'ipvfuture dotted'], ['[127.0.0.1]', 'ipv4 in brackets'],
  ['[example.com]', 'name in brackets'], ['[]', 'empty brackets'], ['[::1.2.3]', 'ipv6 short dotted'],
  ['[1::2::3]', 'ipv6 two ::'], ['[1:2:3:4:5:6:7:8:9]', 'ipv6 nine groups'], ['[::g]', 'ipv6 bad hex'],
  ['[::1', 'ipv6 unterminated'], ['::1]', 'ipv6 no opening bracket'], ['[[::1]]', 'ipv6 double brackets'],
  ['[::1]]', 'ipv6 extra ]'], ['[ ::1]', 'ipv6 space inside'], ['[::1 ]', 'ipv6 trailing space inside'],
  ['[::1]x', 'ipv6 junk after ]'], ['[::1].example.com', 'ipv6 then a name'],
  ['::1', 'ipv6 unbracketed'], ['::ffff:127.0.0.1', 'ipv6 mapped unbracketed'],
  ['[%3a%3a1]', 'ipv6 percent-encoded colons'], ['%5b::1%5d', 'ipv6 percent-encoded brackets'],
  ['[::1%2f]', 'ipv6 zone with slash'], ['[0::0:0:1]', 'ipv6 mixed zero runs'],
  // percent-encoding in the host
  ['%31%32%37.0.0.1', 'percent-encoded ipv4 digits'], ['127.0.0.%31', 'percent-encoded last digit'],
  ['ex%61mple.com', 'percent-encoded letter'], ['EX%41MPLE.COM', 'percent-encoded uppercase'],
  ['example%2ecom', 'percent-encoded dot'], ['example.com%2e', 'percent-encoded trailing dot'],
  ['example.com%00', 'percent-encoded nul'], ['ex%00ample.com', 'percent-encoded nul inside'],
  ['example.com%2f', 'percent-encoded slash'], ['example.com%3a80', 'percent-encoded colon'],
  ['good.com%40evil.com', 'percent-encoded at'], ['good.com%23.evil.com', 'percent-encoded hash'],
  ['good.com%3f.evil.com', 'percent-encoded question'], ['good.com%5c.evil.com', 'percent-encoded backslash'],
  ['%E3%80%82example.com', 'percent-encoded ideographic dot'], ['example%E3%80%82com', 'percent-encoded ideographic dot inside'],
  ['ex%C3%A4mple.com', 'percent-encoded U-label'], ['%', 'lone percent'], ['ex%zzample.com', 'invalid percent'],
  ['example.com%', 'trailing percent'], ['xn--bcher-kva%2eexample', 'percent-encoded dot in IDN'],
  // unicode: dots, fullwidth, invisible, IDNA mappings
  ['example\u3002com', 'U+3002 ideographic full stop'], ['example\uff0ecom', 'U+FF0E fullwidth full stop'],
  ['example\uff61com', 'U+FF61 halfwidth ideographic full stop'], ['127\u30020\u30020\u30021', 'U+3002 in ipv4'],
  ['\uff11\uff12\uff17.0.0.1', 'fullwidth digits ipv4'], ['\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.\uff43\uff4f\uff4d', 'fullwidth name'],
  ['EXAMPLE.\uff23\uff2f\uff2d', 'fullwidth uppercase TLD'], ['\u24d4xample.com', 'circled letter'],
  ['exam\u00adple.com', 'soft hyphen'], ['example.com\u200b', 'zero-width space'],
  ['ex\u200dample.com', 'zero-width joiner'], ['\ufeffexample.com', 'byte order mark'],
  ['e\u0301xample.com', 'combining accent'], ['b\u00fccher.example', 'U-label'],
  ['B\u00dcCHER.example', 'U-label uppercase'], ['ex\u212aample.com', 'Kelvin sign'],
  ['\ufb00.example', 'ff ligature'], ['stra\u00dfe.example', 'sharp s'],
  ['\u0131.example', 'dotless i'], ['\u2474.example', 'parenthesized digit'],
  ['127.0.0.\u2460', 'circled digit one'], ['\u0660.example', 'arabic-indic zero'],
  ['example\u2024com', 'one dot leader'], ['example\ufe52com', 'small full stop'],
  ['exa\u0000mple.com', 'raw nul'], ['\u{1f4a9}.example', 'emoji'],
  ['example.com\u3002', 'trailing ideographic dot'], ['\u0435xample.com', 'cyrillic e homograph'],
  // IDN A-labels: valid, invalid punycode, non-canonical
  ['xn--bcher-kva.example', 'IDN A-label'], ['XN--BCHER-KVA.example', 'IDN A-label uppercase'],
  ['xn--bcher-kva.xn--p1ai', 'IDN two A-labels'], ['xn--a.example', 'IDN invalid punycode'],
  ['xn--.example', 'IDN empty punycode'], ['xn--zz.example', 'IDN junk punycode'],
  ['xn--abc-.example', 'IDN punycode of ASCII'], ['xn--ls8h.example', 'IDN emoji'],
  ['xn--bcher-kva-.example', 'IDN trailing hyphen'], ['xn--Bcher-kva.example', 'IDN mixed case'],
  ['xn--bcher-KVA.example', 'IDN uppercase digits'], ['xn--fa-hia.example', 'IDN fass (sharp s)'],
  ['xn--nxasmq6b.example', 'IDN greek'], ['xn--80ak6aa92e.com', 'IDN cyrillic homograph'],
  ['xn--e1afmkfd.xn--p1ai', 'IDN cyrillic'], ['xn--ida.example', 'IDN decodes to uppercase-mapped char'],
  ['xn--53h.example', 'IDN symbol'], ['xn--1ug.example', 'IDN zero-width joiner alone'],
  ['xn--ls8h', 'IDN single label'], ['xn--mnchen-3ya.de', 'IDN muenchen'],
  ['xn--9krt00a.example', 'IDN CJK'], ['xn--mgbh0fb.example', 'IDN arabic'],
  ['xn--4gbrim.example', 'IDN arabic 2'], ['xn--xn--bcher-kva.example', 'IDN double prefix'],
  ['xn--bcher-kva.example.', 'IDN trailing dot'], ['ab--cd.example', 'hyphens in 3-4'],
  ['xn---abc.example', 'xn--- label'], ['xn--zca.example', 'IDN sharp s (nontransitional)'],
  ['xn--strae-oqa.example', 'IDN strasse'], ['xn--i-7iq.example', 'IDN dotted capital I'],
  // names and name syntax
  ['example.com', 'plain name'], ['EXAMPLE.COM', 'uppercase name'], ['a.b.example.com', 'deep name'],
  ['a-b.example', 'hyphen'], ['a_b.example', 'underscore'], ['a..example', 'empty label'],
  ['.example.com', 'leading dot'], ['example.com.', 'trailing dot'], ['example.com..', 'two trailing dots'],
  ['-a.example', 'leading hyphen'], ['a-.example', 'trailing hyphen'], ['localhost', 'single label'],
  ['localhost.', 'single label trailing dot'], ['LOCALHOST', 'single label uppercase'],
  ['localhost.localdomain', 'localdomain'], ['metadata.google.internal', 'metadata name'],
  ['*.example.com', 'wildcard'], ['exa$mple.com', 'dollar'], ['example.com;.evil.com', 'semicolon'],
  ['example.com,evil.com', 'comma'], ['example.com&evil.com', 'ampersand'], ["'example.com'", 'quotes'],
  ['"example.com"', 'double quotes'], ['<example.com>', 'angle brackets'], ['example.com|evil.com', 'pipe'],
  ['exa^mple.com', 'caret'], ['exa`mple.com', 'backtick'], ['ex{a}mple.com', 'braces'],
  ['ex!ample.com', 'bang'], ['ex~ample.com', 'tilde'], ['ex=ample.com', 'equals'],
  ['ex+ample.com', 'plus'], ['ex(ample).com', 'parens'], ['ex*ample.com', 'star'],
  ['a'.repeat(63) + '.com', 'label 63'], ['a'.repeat(64) + '.com', 'label 64'],
  [('a'.repeat(63) + '.').repeat(3) + 'a'.repeat(61), 'host 253'],
  [('a'.repeat(63) + '.').repeat(3) + 'a'.repeat(62), 'host 254'],
  ['', 'empty host'], ['.', 'lone dot'], ['..', 'two dots'],
);
// Raw Punycode A-labels of Unicode labels IDNA treats differently (mapped,
// disallowed, NFD, joiners in and out of context, bidi, CONTEXTO, symbols):
// WHATWG validates what an xn-- label decodes to, curl passes it on.
const uLabels = [
  ['b\u00fccher', 'valid'], ['B\u00dcCHER', 'uppercase (mapped)'], ['be\u0301cher', 'NFD'],
  ['\u200c', 'lone ZWNJ'], ['a\u200cb', 'ZWNJ out of context'], ['\u0915\u094d\u200c\u0937', 'ZWNJ after virama'],
  ['\u200d', 'lone ZWJ'], ['l\u00b7l', 'catalan middle dot'], ['a\u00b7b', 'middle dot out of context'],
  ['\u05e9\u05dc\u05d5\u05dd', 'hebrew'], ['a\u05e9\u05dc', 'bidi mixed'], ['\u0661\u0031', 'arabic-indic and european digits'],
  ['\u01c5', 'titlecase dz'], ['\ufb00', 'ff ligature (mapped)'], ['a\u2028b', 'line separator'],
  ['ab--cd\u00e9', 'hyphens 3-4 in U-label'], ['\u00e9-', 'trailing hyphen in U-label'],
  ['\u0307a', 'leading combining mark'], ['\u216b', 'roman numeral (mapped)'], ['\u2460', 'circled one (mapped)'],
  ['\ufffd', 'replacement character'], ['\u{10fffd}', 'private use'], ['\u{e0001}', 'language tag'],
  ['\u03c2', 'final sigma'], ['\u00df', 'sharp s'], ['a\u3002b', 'ideographic dot inside a label'],
  ['a\uff0eb', 'fullwidth dot inside a label'], ['\u0430\u0440\u0440\u04cf\u0435', 'cyrillic homograph'],
  ['\u{1f4a9}', 'emoji'], ['\u2603', 'snowman'], ['a\u00adb', 'soft hyphen (ignored)'],
  ['\u0130', 'dotted capital I (mapped)'], ['\u1e9e', 'capital sharp s (mapped)'], ['\u0640', 'tatweel'],
  ['\u30fb', 'katakana middle dot alone'], ['\u0375\u03b1', 'greek keraia'], ['\u05f3', 'hebrew geresh alone'],
  ['\u00e4'.repeat(20), 'long U-label'], ['\u0000', 'nul code point'], ['a\u0020b', 'space code point'],
];
for (const [u, trick] of uLabels) {
  const a = 'xn--' + punycode.encode(u);
  hosts.push([`${a}.example`, `IDN crafted A-label: ${trick}`]);
  hosts.push([`${a.toUpperCase()}.example`, `IDN crafted A-label uppercased: ${trick}`, false]);
}
// The same targets with every IPv4 spelling and a trailing dot / uppercase.
for (const [h, trick] of ipv4Spellings('127.0.0.1')) {
  const kept = /^ipv4 [14] parts? all/.test(trick);
  if (/x/i.test(h)) hosts.push([h.toUpperCase(), trick + ' uppercased', kept]);
  hosts.push([h + '.', trick + ' + trailing dot', kept && trick.startsWith('ipv4 4')]);
}

const schemes = [
  ['http', 'http'], ['https', 'https'], ['HTTP', 'HTTP'], ['HtTpS', 'mixed case https'],
  ['http ', 'space before colon'], [' http', 'leading space'], ['\thttp', 'leading tab'],
  ['ht\ttp', 'tab in scheme'], ['ht\ntp', 'LF in scheme'], ['\u0000http', 'leading nul'],
  ['\u000bhttp', 'leading VT'], ['\u00a0http', 'leading nbsp'], ['ftp', 'ftp'], ['ws', 'ws'],
  ['wss', 'wss'], ['file', 'file'], ['gopher', 'gopher'], ['dict', 'dict'], ['ldap', 'ldap'],
  ['http+unix', 'http+unix'], ['hxxp', 'hxxp'], ['httpx', 'httpx'], ['', 'no scheme'],
  ['1http', 'digit first'], ['h%74tp', 'percent in scheme'], ['\uff48ttp', 'fullwidth h'],
];
const seps = [
  ['://', '://'], [':/', ':/'], [':', ':'], [':///', ':///'], [':////', ':////'],
  [':\\\\', ':\\\\'], [':/\\', ':/\\'], [':\\/', ':\\/'], ['://\t', ':// tab'], [':/\t/', ':/tab/'],
  [':%2f%2f', ':%2f%2f'], [': //', ': //'], ['//', 'no colon'], [':/\n/', ':/LF/'],
  ['\\\\', 'backslashes only'], [':\\\\\\', ':\\\\\\'], [':/ /', ':/ /'], [':\uff0f\uff0f', 'fullwidth slashes'],
];
const userinfos = [
  ['', ''], ['user@', 'user@'], ['user:pass@', 'user:pass@'], ['@', 'empty userinfo'],
  [':@', 'colon userinfo'], ['good.com@', 'host-like userinfo'], ['good.com:80@', 'host:port userinfo'],
  ['a@b@', 'two @'], ['u%40@', 'encoded @ in userinfo'], ['u:p@x@', 'two @ with colon'],
  ['good.com#@', '#@'], ['good.com?@', '?@'], ['good.com\\@', '\\@'], ['good.com/@', '/@ (path)'],
  ['good.com%2f@', '%2f@'], ['good.com%23@', '%23@'], ['good.com;@', ';@'], ['good.com&@', '&@'],
  ['good.com @', 'space @'], ['good.com\t@', 'tab @'], ['good.com%00@', '%00@'],
  ['good.com\r\n@', 'CRLF @'], ['good.com:@', ':@ after host'], ['[::1]@', 'ipv6 userinfo'],
  ['good.com%20@', '%20@'], ['good.com.@', 'trailing-dot userinfo'], ['good.com\u3002@', 'unicode dot userinfo'],
  ['good.com:pass:x@', 'colons in userinfo'], ['user@good.com:', 'userinfo then colon'],
];
const ports = [
  ['', ''], [':', 'empty port'], [':80', ':80'], [':443', ':443'], [':8080', ':8080'],
  [':65535', ':65535'], [':65536', ':65536'], [':0', ':0'], [':00', ':00'], [':080', ':080'],
  [':0080', ':0080'], [':08', ':08'], [':+80', ':+80'], [':-80', ':-80'], [':80a', ':80a'],
  [':0x50', ':0x50'], [':1e3', ':1e3'], [': 80', ': 80'], [':80 ', ':80 '], [':8\t0', ':8 tab 0'],
  [':\u0668\u0660', 'arabic-indic port'], [':\uff18\uff10', 'fullwidth port'], [':80:80', ':80:80'],
  ['::80', '::80'], [':4294967376', ':4294967376 (2^32+80)'], [':4294967296', ':2^32'],
  [':18446744073709551696', ':2^64+80'], [':99999999999999999999', 'huge port'], [':%38%30', 'percent port'],
  [':80%00', 'port %00'], [':80.', 'port dot'], [':.80', 'dot port'], [':8_0', 'port underscore'],
  [':1', ':1'], [':00000000000000000080', 'many leading zeros'], [':65535\u0000', 'port nul'],
];
const tails = [
  ['', ''], ['/', '/'], ['/x', '/x'], ['/x?y#z', '/x?y#z'], ['?x', '?x'], ['#x', '#x'],
  ['?', '?'], ['#', '#'], ['/?x', '/?x'], ['/#x', '/#x'], ['\\x', '\\x'], ['\\', '\\'],
  ['/..', '/..'], ['/%2e%2e/', '/%2e%2e/'], ['/./', '/./'], [' /x', ' /x'], ['\t', 'tab'],
  ['\r\n', 'CRLF'], ['\n', 'LF'], ['%00', '%00'], ['/@evil.com', '/@evil.com'],
  ['/\\evil.com', '/\\evil.com'], ['//evil.com', '//evil.com'], ['/;x', '/;x'], [';x', ';x'],
  ['&x', '&x'], ['.', '.'], ['..', '..'], ['%2f', '%2f'], ['%40evil.com', '%40evil.com'],
  ['#@evil.com', '#@evil.com'], ['?@evil.com', '?@evil.com'], ['\u3002', 'ideographic dot'],
  [':', ':'], [':@evil.com', ':@evil.com'], ['/ x', 'space in path'], ['/\u00e4', 'non-ASCII path'],
  ['/%', 'bad percent in path'], ['/[::1]', 'brackets in path'], ['/x\u0000y', 'nul in path'],
  ['/?a=\\b', 'backslash in query'], ['/#\\', 'backslash in fragment'], ['/ ', 'trailing space'],
  ['/\u007f', 'DEL in path'], ['/{}|^`"<>', 'unsafe printable in path'], ['/?#', 'empty query and fragment'],
];

// A: every host, alone and with a port, a path, a query
for (const [h, trick, keep = true] of hosts) {
  add(`http://${h}`, `host: ${trick}`, keep);
  add(`https://${h}:8443/x`, `host: ${trick} (https, port, path)`, false);
  add(`http://${h}/`, `host: ${trick} (slash)`, false);
  add(`http://${h}:80`, `host: ${trick} (port)`, false);
}
// B: schemes x separators, for a name and an IP
for (const [s, st] of schemes) {
  for (const [p, pt] of seps) {
    add(`${s}${p}example.com/`, `scheme ${st}, separator ${pt}`, s === 'http' || s === '' || p === '://');
    add(`${s}${p}127.0.0.1/`, `scheme ${st}, separator ${pt}, ipv4`, false);
  }
}
// C: userinfo x host x port x tail (a subset of each)
const uiHosts = ['example.com', 'evil.com', '127.0.0.1', '[::1]', 'good.com'];
for (const [u, ut] of userinfos) {
  for (const h of uiHosts) {
    add(`http://${u}${h}`, `userinfo ${ut} + ${h}`, h === 'evil.com' || h === '127.0.0.1');
    for (const [p, pt] of [[':80', ':80'], [':', 'empty port'], [':8080', ':8080']])
      add(`http://${u}${h}${p}/`, `userinfo ${ut} + ${h}${pt}`, false);
    for (const [t, tt] of [['#@evil.com', '#@'], ['?x', '?x'], ['/x', '/x'], ['\\', '\\']])
      add(`http://${u}${h}${t}`, `userinfo ${ut} + ${h} + ${tt}`, false);
  }
}
// D: ports and tails on a name and an IP
for (const [p, pt] of ports) {
  add(`http://example.com${p}/`, `port ${pt}`);
  add(`https://example.com${p}`, `port ${pt} (https, end)`, false);
  add(`http://127.0.0.1${p}/`, `port ${pt} (ipv4)`, false);
  add(`http://[::1]${p}/`, `port ${pt} (ipv6)`, false);
}
for (const [t, tt] of tails) {
  add(`http://example.com${t}`, `tail ${tt}`);
  add(`http://example.com:8080${t}`, `tail ${tt} (after port)`, false);
  add(`http://127.0.0.1${t}`, `tail ${tt} (ipv4)`, false);
}
// E: one character inserted at every position / replacing every character
const inserts = ['@', ':', '/', '?', '#', '\\', '[', ']', '%', '.', '%2e', '%40', '%2f', '%00',
  ' ', '\t', '\r', '\n', '\u0000', '\u007f', '\u3002', '\uff0e', '\u00ad', '\u200b', '0x', '@evil.com'];
const insertName = (c) => JSON.stringify(c);
for (const base of ['http://example.com:8080/p?q#f', 'https://a.example.com/', 'http://127.0.0.1/']) {
  for (let i = 0; i <= base.length; i++) {
    for (const c of inserts) {
      const where = i < base.indexOf(':') ? 'scheme' : i <= base.indexOf('//') + 2 ? 'separator'
        : i <= base.indexOf('/', base.indexOf('//') + 2) ? 'authority' : 'path';
      add(base.slice(0, i) + c + base.slice(i), `insert ${insertName(c)} in ${where} of ${base}`, false);
      if (i < base.length)
        add(base.slice(0, i) + c + base.slice(i + 1), `replace with ${insertName(c)} in ${where} of ${base}`, false);
    }
  }
}
// F: random combinations (fixed seed)
let seed = 0x5eed;
const rnd = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
const pick = (list) => list[rnd(list.length)];
for (let i = 0; i < 4000; i++) {
  const [s, st] = rnd(3) ? pick(schemes.slice(0, 4)) : pick(schemes);
  const [p, pt] = rnd(3) ? ['://', '://'] : pick(seps);
  const [u, ut] = rnd(2) ? ['', ''] : pick(userinfos);
  const [h, ht] = pick(hosts);
  const [po, pot] = rnd(2) ? ['', ''] : pick(ports);
  const [t, tt] = rnd(2) ? ['', ''] : pick(tails);
  add(`${s}${p}${u}${h}${po}${t}`, `random: ${st} ${pt} ${ut} | ${ht} | ${pot} | ${tt}`, false);
}

// G: classic SSRF payloads from public write-ups (PayloadsAllTheThings'
// "Server Side Request Forgery" page, Orange Tsai's "A New Era of SSRF"),
// verbatim.
const payloads = String.raw`http://127.0.0.1:22
http://0.0.0.0:80
http://localhost:80
http://[::]:25/
http://[0000::1]:80/
http://[0:0:0:0:0:ffff:127.0.0.1]/thefile
http://\u2460\u2461\u2466.\u24ea.\u24ea.\u2460
http://127.127.127.127
http://3232235521/
http://0xc0a80014/
http://0177.0.0.01
http://localtest.me
http://customer1.app.localhost.my.company.127.0.0.1.nip.io
http://169.254.169.254.nip.io/
http://%32%31%36%2e%35%38%2e%32%31%34%2e%32%32%37
http://127.0.0.1:80\@google.com/
http://google.com:80\\@127.0.0.1/
http://google.com:80#@127.0.0.1/
http://127.1.1.1:80\@127.2.2.2:80/
http://127.1.1.1:80\@@127.2.2.2:80/
http://127.1.1.1:80:\@@127.2.2.2:80/
http://127.1.1.1:80#\@127.2.2.2:80/
http://1.1.1.1 &@2.2.2.2# @3.3.3.3/
http://0:8080
http://foo@evil.com:80@google.com/
http://foo@evil.com:80 @google.com/
http://evil.com:80?@google.com/
http://127.0.0.1/%2561dmin
http://metadata.google.internal/computeMetadata/v1/
http://metadata/computeMetadata/v1/
http://instance-data/latest/meta-data/
http://[fd00:ec2::254]/latest/meta-data/
http://100.100.100.200/latest/meta-data/
http://[::ffff:a9fe:a9fe]
http://[0:0:0:0:0:ffff:169.254.169.254]
http://425.510.425.510/
http://2852039166/
http://7147006462/
http://0xA9.0xFE.0xA9.0xFE/
http://0xA9FEA9FE/
http://0x41414141A9FEA9FE/
http://0251.0376.0251.0376/
http://0251.00376.000251.0000376/
http://169.254.169.254.xip.io/
http://www.owasp.org.1ynrnhl.xip.io/
http://A.8.8.8.8.1time.169.254.169.254.1time.repeat.rebind.network
https://example.com%2f@evil.com
https://evil.c\u2100.example.com
http://\u24d4\u24e7\u24d0\u24dc\u24df\u24db\u24d4.\u24d2\u24de\u24dc
http://[::1%25eth0]
http://0/
http://127.1/
http://127.000000000000000.1/
http://[::ffff:127.0.0.1]:80/
http://google.com\@127.0.0.1/
http://127.0.0.1%09.example.com/
http://127.0.0.1%2523@example.com/
http://example.com%252f@127.0.0.1/
http://example.com\u3002evil.com/
http:/\/\example.com
http://example.com#.evil.com
http://example.com&@evil.com#@other.com/
http://ex\u00e2mple.com/`.split('\n');
for (const p of payloads)
  add(p.replace(/\u([0-9a-f]{4})/g, (_, h) => String.fromCharCode(parseInt(h, 16))), 'payload: public SSRF write-up');

// ---------------------------------------------------------------- verdicts

function whatwg(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    return 'fail';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return `scheme:${u.protocol}`;
  const port = u.port !== '' ? u.port : u.protocol === 'http:' ? '80' : '443';
  return `${u.hostname}:${port}`;
}

const hex = cases.map((c) => Buffer.from(c.url, 'utf8').toString('hex')).join('\n') + '\n';
const run = spawnSync(opt.oracle, ['--oracle'], { input: hex, maxBuffer: 1 << 28 });
if (run.status !== 0) {
  console.error(`oracle ${opt.oracle} failed: ${run.error ?? run.stderr.toString()}`);
  process.exit(2);
}
const lines = run.stdout.toString().split('\n');
for (let i = 0; i < cases.length; i++) {
  const [verdict, hostport, curl] = lines[i].split('\t');
  Object.assign(cases[i], { verdict, hostport, curl, whatwg: whatwg(cases[i].url) });
}

// Extra opinions, offline and optional (not recorded in the corpus): Node's
// legacy url.parse(), Python's urllib.parse.urlsplit() and urllib3's
// parse_url() (what requests uses), when python3 has them.
function legacy(url) {
  try {
    const u = urlLegacy.parse(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return `scheme:${u.protocol}`;
    return `${u.hostname}:${u.port ?? (u.protocol === 'http:' ? 80 : 443)}`;
  } catch {
    return 'fail';
  }
}
const pyCode = `
import sys, binascii, json, urllib.parse
try:
    import urllib3.util
except Exception:
    urllib3 = None
def hp(scheme, host, port):
    if scheme not in ('http', 'https'):
        return 'scheme:%s' % scheme
    if host is None:
        return 'fail'
    if ':' in host and not host.startswith('['):
        host = '[' + host + ']'
    return '%s:%s' % (host, port if port is not None else (80 if scheme == 'http' else 443))
for line in sys.stdin:
    url = binascii.unhexlify(line.strip()).decode('utf-8', 'surrogateescape')
    out = []
    try:
        u = urllib.parse.urlsplit(url)
        out.append(hp(u.scheme, u.hostname, u.port))
    except Exception:
        out.append('fail')
    try:
        if urllib3 is None:
            raise ValueError
        u = urllib3.util.parse_url(url)
        out.append(hp((u.scheme or '').lower(), u.host, u.port))
    except Exception:
        out.append('fail')
    print(json.dumps(out))
`;
const py = spawnSync('python3', ['-c', pyCode], { input: hex, maxBuffer: 1 << 28 });
const pyLines = py.status === 0 ? py.stdout.toString().split('\n') : [];
for (let i = 0; i < cases.length; i++) {
  const [urlsplit, urllib3] = pyLines[i] ? JSON.parse(pyLines[i]) : ['n/a', 'n/a'];
  Object.assign(cases[i], { legacy: legacy(cases[i].url), urlsplit, urllib3 });
}

// ---------------------------------------------------------------- findings

const escape = (s) => {
  let out = '';
  for (const byte of Buffer.from(s, 'utf8')) {
    if (byte === 0x5c) out += '\\\\';
    else if (byte === 0x09) out += '\\t';
    else if (byte === 0x0d) out += '\\r';
    else if (byte === 0x0a) out += '\\n';
    else if (byte < 0x20 || byte >= 0x7f) out += '\\x' + byte.toString(16).padStart(2, '0');
    else out += String.fromCharCode(byte);
  }
  return out;
};

// curl keeps the host's case; DNS and TLS name checks ignore ASCII case.
const sameHost = (a, b) => a.toLowerCase() === b;
const bugs = cases.filter((c) => c.verdict === 'ok' && (c.whatwg !== c.hostport || !sameHost(c.curl, c.hostport)));
const count = (pred) => cases.filter(pred).length;
const isIp = (hp) => /^\[|^[0-9.]+:\d+$/.test(hp);
console.log(`generated ${cases.length} URLs`);
console.log(`  ours: ${count((c) => c.verdict === 'ok')} ok, ${count((c) => c.verdict === 'ip_literal')} ip_literal, ${count((c) => c.verdict === 'parse_error')} parse_error`);
console.log(`  WHATWG: ${count((c) => c.whatwg === 'fail')} fail, ${count((c) => c.whatwg.startsWith('scheme:'))} other scheme, ${count((c) => c.whatwg !== 'fail' && !c.whatwg.startsWith('scheme:'))} http(s)`);
console.log(`  curl: ${count((c) => c.curl.startsWith('fail'))} fail, ${count((c) => !c.curl.startsWith('fail'))} parsed`);
console.log(`  refused by us, an IP to WHATWG or curl: ${count((c) => c.verdict !== 'ok' && (isIp(c.whatwg) || isIp(c.curl)))} ` +
  `(${count((c) => c.verdict === 'parse_error' && (isIp(c.whatwg) || isIp(c.curl)))} of them parse_error)`);
console.log(`  WHATWG and curl disagree with each other: ${count((c) => c.whatwg.replace(/^fail.*/, 'fail') !== c.curl.replace(/^fail.*/, 'fail') && !c.whatwg.startsWith('scheme:'))}`);
console.log(`  accepted by us where WHATWG or curl differ: ${bugs.length}`);
const extra = cases.filter((c) => c.verdict === 'ok' && ['legacy', 'urlsplit', 'urllib3'].some((k) => c[k] !== 'n/a' && !sameHost(c[k], c.hostport)));
console.log(`  accepted by us where Node url.parse, Python urlsplit or urllib3 differ: ${extra.length}` +
  (py.status === 0 ? '' : ' (python3 not run)'));
for (const c of extra.slice(0, 50))
  console.error(`EXTRA\t${escape(c.url)}\tours ${c.hostport}\tlegacy ${c.legacy}\turlsplit ${c.urlsplit}\turllib3 ${c.urllib3}\t${c.trick}`);
for (const c of bugs.slice(0, 200))
  console.error(`BUG\t${escape(c.url)}\tours ${c.hostport}\twhatwg ${c.whatwg}\tcurl ${c.curl}\t${c.trick}`);

if (opt.full) {
  writeFileSync(opt.full, cases.map((c) =>
    [escape(c.url), c.verdict, c.hostport, c.whatwg, c.curl, c.legacy, c.urlsplit, c.urllib3, c.trick].join('\t')).join('\n') + '\n');
}

// ---------------------------------------------------------------- corpus

if (opt.writeCorpus) {
  // One row per trick from the systematic families (keep), plus one row per
  // outcome signature among the rest, so every distinct behaviour is kept.
  const chosen = [];
  const sigs = new Set();
  const sig = (c) => [c.verdict, c.whatwg === 'fail' ? 'fail' : isIp(c.whatwg) ? 'ip' : c.whatwg === c.hostport ? 'same' : 'other',
    c.curl.startsWith('fail') ? 'fail' : isIp(c.curl) ? 'ip' : sameHost(c.curl, c.hostport) ? 'same' : 'other'].join('/');
  for (const c of cases) {
    if (c.keep) { chosen.push(c); sigs.add(sig(c) + c.trick.replace(/ \(.*$/, '')); }
  }
  for (const c of cases) {
    if (c.keep || c.trick.startsWith('random')) continue;
    // insert/replace families by the inserted text; the others by their first word
    const family = /^(insert|replace with) /.test(c.trick)
      ? c.trick.replace(/^replace with/, 'insert').replace(/ in .*$/, '')
      : c.trick.split(/[ :]/)[0];
    const key = sig(c) + family;
    if (!sigs.has(key)) { sigs.add(key); chosen.push(c); }
  }
  const header = [
    '# The differential corpus: hostile URLs, one trick each, with our verdict and what the two',
    '# other well-known parsers extract. Generated by scripts/url-differential.mjs (WHATWG: Node.js',
    `# ${process.version} URL, recorded offline; curl: libcurl curl_url(), default flags), replayed by`,
    '# tests/guard/test_url_differential.c. Format (docs/url.md):',
    '#   input<TAB>expect<TAB>ours<TAB>whatwg<TAB>curl<TAB>trick',
    '#   expect: ok | parse_error | ip_literal;  ours: host:port when ok, else "-";',
    '#   whatwg, curl: the host:port they extract (default port filled in), "fail" (refused),',
    '#   "fail:N" (CURLUcode N) or "scheme:X" (WHATWG read another scheme);',
    '#   input escapes: \\\\ backslash, \\t \\r \\n, \\xHH any byte (UTF-8 for non-ASCII).',
  ];
  writeFileSync(opt.writeCorpus, header.join('\n') + '\n' + chosen.map((c) =>
    // a leading '#' would read as a comment
    [escape(c.url).replace(/^#/, '\\x23'), c.verdict, c.hostport, c.whatwg, c.curl, c.trick.replace(/\t/g, ' ')].join('\t')).join('\n') + '\n');
  console.log(`wrote ${chosen.length} rows to ${opt.writeCorpus}`);
}

process.exit(bugs.length || extra.length ? 1 : 0);
