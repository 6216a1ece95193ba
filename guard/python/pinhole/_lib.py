"""Loading libpinhole and the ctypes mirror of the structs the binding uses.

Where the library comes from, the first candidate that loads and matches
wins:
  1. the PINHOLE_LIBRARY environment variable (a path to libpinhole.so*): an
     explicit setting, the only candidate when set;
  2. the install prefix: the directory setup.py recorded in pinhole._config
     when the package was built, then a lib/ directory up to four levels
     above the package (a package installed into the same prefix as the
     library);
  3. the dynamic loader's own search (ld.so.cache, LD_LIBRARY_PATH).

A candidate matches when it has every function the package calls and every
struct mirrored here has the library's size and field offsets
(ph_abi_struct_size / ph_abi_field_offset): a library built from other
headers (a stale install prefix, an older system package) is passed over
for the next candidate instead of corrupting memory at the first call. When
none matches, LibraryError names every candidate tried and why it failed.

ctypes.CDLL releases the GIL around every foreign call, so calls into the
(thread-safe) guard run in parallel from several threads.
"""
import ctypes
import ctypes.util
import os
import threading

from . import _config
from .errors import LibraryError

SONAME = "libpinhole.so.1"

PH_HOST_MAX = 253
PH_VERDICT_FILE_MAX = 128
PH_VERDICT_TEXT_MAX = 200
PH_TABLE_ID_HEX_LEN = 64
PH_DIAG_MESSAGE_MAX = 256
PH_PINNED_MAX = 16
PH_URL_MAX_LEN = 8192
PH_ABI_UNKNOWN = ctypes.c_size_t(-1).value

# ph_status values (pinhole/status.h).
PH_OK = 0
PH_E_INVAL = 1
PH_E_NOMEM = 2
PH_E_IO = 3
PH_E_FORMAT = 4
PH_E_LIMIT = 5
PH_E_NOT_FOUND = 6
PH_E_DENIED = 7
PH_E_TIMEOUT = 8
PH_E_INTERNAL = 9
PH_E_UNSUPPORTED = 10

STATUS_NAMES = {
    PH_OK: "ok", PH_E_INVAL: "invalid", PH_E_NOMEM: "no_memory", PH_E_IO: "io",
    PH_E_FORMAT: "format", PH_E_LIMIT: "limit", PH_E_NOT_FOUND: "not_found",
    PH_E_DENIED: "denied", PH_E_TIMEOUT: "timeout", PH_E_INTERNAL: "internal",
    PH_E_UNSUPPORTED: "unsupported",
}


class Diag(ctypes.Structure):
    _fields_ = [
        ("status", ctypes.c_int),
        ("offset", ctypes.c_size_t),
        ("message", ctypes.c_char * PH_DIAG_MESSAGE_MAX),
    ]


class GuardOptions(ctypes.Structure):
    _fields_ = [
        ("dns_servers", ctypes.c_char_p),
        ("dns_timeout_ms", ctypes.c_uint),
        ("reload_interval_ms", ctypes.c_uint),
        ("grant_keys_path", ctypes.c_char_p),
        ("dns_cache_entries", ctypes.c_uint),
        ("dns_cache_max_ttl_s", ctypes.c_uint),
        ("dns_negative_ttl_s", ctypes.c_uint),
        ("dns_cache_off", ctypes.c_bool),
        ("revocations_path", ctypes.c_char_p),
    ]


class SockaddrStorage(ctypes.Structure):
    # glibc: sa_family_t, padding, unsigned long (128 bytes, aligned 8).
    _fields_ = [
        ("ss_family", ctypes.c_ushort),
        ("_padding", ctypes.c_ubyte * (128 - ctypes.sizeof(ctypes.c_ushort)
                                       - ctypes.sizeof(ctypes.c_ulong))),
        ("_align", ctypes.c_ulong),
    ]


class PinnedAddrs(ctypes.Structure):
    _fields_ = [
        ("count", ctypes.c_size_t),
        ("addr", SockaddrStorage * PH_PINNED_MAX),
        ("addr_len", ctypes.c_uint32 * PH_PINNED_MAX),
    ]


class CVerdict(ctypes.Structure):
    _fields_ = [
        ("allowed", ctypes.c_bool),
        ("reason", ctypes.c_int),
        ("scheme", ctypes.c_int),
        ("host", ctypes.c_char * (PH_HOST_MAX + 1)),
        ("port", ctypes.c_uint16),
        ("has_rule", ctypes.c_bool),
        ("rule_index", ctypes.c_uint32),
        ("rule_list", ctypes.c_char * (PH_VERDICT_TEXT_MAX + 1)),
        ("rule_host", ctypes.c_char * (PH_HOST_MAX + 3)),
        ("rule_file", ctypes.c_char * (PH_VERDICT_FILE_MAX + 1)),
        ("rule_line", ctypes.c_uint32),
        ("rule_reason", ctypes.c_char * (PH_VERDICT_TEXT_MAX + 1)),
        ("policy_id", ctypes.c_char * (PH_TABLE_ID_HEX_LEN + 1)),
        ("detail", ctypes.c_char * PH_DIAG_MESSAGE_MAX),
        ("rule_protocol", ctypes.c_int),
    ]


PH_GRANT_KID_MAX = 32
PH_GRANT_FIELD_MAX = 64
PH_KEYRING_ID_HEX_LEN = 64


class Grant(ctypes.Structure):
    _fields_ = [
        ("kid", ctypes.c_char * (PH_GRANT_KID_MAX + 1)),
        ("tenant", ctypes.c_char * (PH_GRANT_FIELD_MAX + 1)),
        ("lease", ctypes.c_char * (PH_GRANT_FIELD_MAX + 1)),
        ("list", ctypes.c_char * (PH_GRANT_FIELD_MAX + 1)),
        ("not_before", ctypes.c_int64),
        ("expires", ctypes.c_int64),
    ]


class ConnectRequest(ctypes.Structure):
    _fields_ = [
        ("authority", ctypes.c_char_p),
        ("authority_len", ctypes.c_size_t),
        ("proxy_authorization", ctypes.c_char_p),
        ("proxy_authorization_len", ctypes.c_size_t),
        ("list", ctypes.c_char_p),
        ("now", ctypes.c_int64),
    ]


class UrlRequest(ctypes.Structure):
    _fields_ = [
        ("url", ctypes.c_char_p),
        ("url_len", ctypes.c_size_t),
        ("proxy_authorization", ctypes.c_char_p),
        ("proxy_authorization_len", ctypes.c_size_t),
        ("list", ctypes.c_char_p),
        ("now", ctypes.c_int64),
    ]


# ph_next_step (pinhole/guard.h).
PH_NEXT_NONE = 0
PH_NEXT_RESOLVE = 1


class CDecision(ctypes.Structure):
    _fields_ = [
        ("allowed", ctypes.c_bool),
        ("reason", ctypes.c_int),
        ("http_status", ctypes.c_int),
        ("next", ctypes.c_int),
        ("client_detail", ctypes.c_char * PH_DIAG_MESSAGE_MAX),
        ("log_detail", ctypes.c_char * PH_DIAG_MESSAGE_MAX),
        ("has_grant", ctypes.c_bool),
        ("grant", Grant),
        ("has_authority", ctypes.c_bool),
        ("verdict", CVerdict),
        ("generation", ctypes.c_uint64),
        ("keyring_id", ctypes.c_char * (PH_KEYRING_ID_HEX_LEN + 1)),
        ("path_offset", ctypes.c_size_t),
        ("path_len", ctypes.c_size_t),
    ]


PH_DIAL_ADDR_TEXT_MAX = 46


class DialOptions(ctypes.Structure):
    _fields_ = [("timeout_ms", ctypes.c_uint), ("stagger_ms", ctypes.c_uint)]


class CDialResult(ctypes.Structure):
    _fields_ = [
        ("verdict", CVerdict),
        ("addr", SockaddrStorage),
        ("addr_len", ctypes.c_uint32),
        ("addr_text", ctypes.c_char * PH_DIAL_ADDR_TEXT_MAX),
        ("checked", PinnedAddrs),
        ("resolve_ms", ctypes.c_uint),
        ("elapsed_ms", ctypes.c_uint),
    ]


class RedirectOptions(ctypes.Structure):
    _fields_ = [("max_hops", ctypes.c_uint), ("allow_downgrade", ctypes.c_bool),
                ("resend_body", ctypes.c_bool), ("allow_body_cross_origin", ctypes.c_bool)]


class CRedirect(ctypes.Structure):
    _fields_ = [
        ("url", ctypes.c_char * (PH_URL_MAX_LEN + 1)),
        ("same_origin", ctypes.c_bool),
        ("drop_credentials", ctypes.c_bool),
        ("verdict", CVerdict),
    ]


# pinhole/resolve.h: an event loop's resolver (ph_guard_resolver_new).
PH_RESOLVER_READ = 1
PH_RESOLVER_WRITE = 2
WATCH_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint)
TIMER_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_long)


class ResolverLoop(ctypes.Structure):
    _fields_ = [("watch", WATCH_CB), ("timer", TIMER_CB), ("arg", ctypes.c_void_p)]


class ResolveAnswer(ctypes.Structure):
    _fields_ = [
        ("st", ctypes.c_int),
        ("reason", ctypes.c_int),
        ("addrs", PinnedAddrs),
        ("detail", ctypes.c_char * PH_DIAG_MESSAGE_MAX),
        ("from_cache", ctypes.c_bool),
        ("elapsed_us", ctypes.c_uint64),
    ]


RESOLVE_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ResolveAnswer))

# C name -> ctypes mirror, checked at load.
MIRRORED = {
    "ph_diag": Diag,
    "ph_guard_options": GuardOptions,
    "ph_pinned_addrs": PinnedAddrs,
    "ph_verdict": CVerdict,
    "ph_grant": Grant,
    "ph_connect_request": ConnectRequest,
    "ph_url_request": UrlRequest,
    "ph_decision": CDecision,
    "ph_dial_options": DialOptions,
    "ph_dial_result": CDialResult,
    "ph_redirect_options": RedirectOptions,
    "ph_redirect": CRedirect,
    "ph_resolver_loop": ResolverLoop,
    "ph_resolve_answer": ResolveAnswer,
}


def _candidates():
    env = os.environ.get("PINHOLE_LIBRARY")
    if env:
        return [("PINHOLE_LIBRARY", env)]
    out = []
    if _config.LIBDIR:
        out.append(("recorded install prefix", os.path.join(_config.LIBDIR, SONAME)))
    here = os.path.dirname(os.path.abspath(__file__))
    d = here
    for _ in range(4):
        d = os.path.dirname(d)
        for sub in ("lib", "lib64"):
            p = os.path.join(d, sub, SONAME)
            if os.path.isfile(p):
                out.append(("prefix of the package", p))
    out.append(("loader path", SONAME))
    found = ctypes.util.find_library("pinhole")
    if found:
        out.append(("loader path", found))
    return out


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _file_of(loaded, name):
    """The file the loader mapped for loaded (dladdr of one of its
    functions): a name found on the loader path becomes a path."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        info = _DlInfo()
        addr = ctypes.cast(loaded.ph_guard_open, ctypes.c_void_p).value
        if dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return os.path.abspath(os.fsdecode(info.dli_fname))
    except (AttributeError, OSError):
        pass
    return name


def _load():
    """The first candidate that loads, has every function and the same
    struct layouts, with its path; LibraryError naming what was tried."""
    tried = []
    for origin, path in _candidates():
        if origin != "loader path" and not os.path.exists(path):
            tried.append("%s %s: does not exist" % (origin, path))
        else:
            try:
                loaded = ctypes.CDLL(path, use_errno=True)
                _declare(loaded)
                _check_abi(loaded)
                return loaded, _file_of(loaded, path)
            except (OSError, LibraryError) as e:
                tried.append("%s %s: %s" % (origin, path, e))
        if origin == "PINHOLE_LIBRARY":
            break
    raise LibraryError("no usable libpinhole; tried, in order: %s. Install libpinhole "
                       "(cmake --install) or set PINHOLE_LIBRARY to its path" % "; ".join(tried))


def _declare(lib):
    c_void_p, c_char_p, c_size_t, c_int = (ctypes.c_void_p, ctypes.c_char_p,
                                           ctypes.c_size_t, ctypes.c_int)
    P = ctypes.POINTER
    sigs = {
        "ph_abi_struct_size": (c_size_t, [c_char_p]),
        "ph_abi_field_offset": (c_size_t, [c_char_p, c_char_p]),
        "ph_strerror": (c_char_p, [c_int]),
        "ph_sockaddr_addr_text": (None, [c_void_p, c_char_p, c_size_t]),
        "ph_reason_code": (c_char_p, [c_int]),
        "ph_reason_http_status": (c_int, [c_int]),
        "ph_build_is_test_loopback": (ctypes.c_bool, []),
        "ph_guard_open": (c_int, [c_char_p, P(GuardOptions), P(c_void_p), P(Diag)]),
        "ph_guard_close": (None, [P(c_void_p)]),
        "ph_guard_reload": (c_int, [c_void_p, P(ctypes.c_bool), P(Diag)]),
        "ph_decide_url": (c_int, [c_void_p, P(UrlRequest), P(CDecision)]),
        "ph_decide_connect": (c_int, [c_void_p, P(ConnectRequest), P(CDecision)]),
        "ph_decision_resolve": (c_int, [c_void_p, P(CDecision), P(PinnedAddrs)]),
        "ph_dial_url": (c_int, [c_void_p, c_char_p, c_char_p, c_size_t, P(DialOptions),
                                P(c_int), P(CDialResult), P(Diag)]),
        "ph_dial_authority": (c_int, [c_void_p, c_char_p, c_char_p, c_size_t, P(DialOptions),
                                      P(c_int), P(CDialResult), P(Diag)]),
        "ph_redirect_check": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, ctypes.c_uint,
                                      P(RedirectOptions), P(CRedirect), P(Diag)]),
        "ph_redirect_cross_origin_header": (c_char_p, [c_size_t]),
        "ph_redirect_body_header": (c_char_p, [c_size_t]),
        "ph_redirect_next_method": (c_char_p, [c_int, c_char_p]),
        "ph_guard_resolver_new": (c_int, [c_void_p, P(ResolverLoop), P(c_void_p), P(Diag)]),
        "ph_resolver_free": (None, [P(c_void_p)]),
        "ph_resolver_start": (c_int, [c_void_p, c_char_p, ctypes.c_uint16, RESOLVE_CB, c_void_p,
                                      P(c_void_p), P(Diag)]),
        "ph_resolver_cancel": (None, [c_void_p]),
        "ph_resolver_process": (None, [c_void_p, c_int, ctypes.c_uint]),
    }
    for name, (res, args) in sigs.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryError("libpinhole has no %s: too old for this package" % name) from None
        fn.restype = res
        fn.argtypes = args


def _check_abi(lib):
    bad = []
    for cname, mirror in MIRRORED.items():
        size = lib.ph_abi_struct_size(cname.encode())
        if size != ctypes.sizeof(mirror):
            bad.append("%s: library %s bytes, binding %d" % (
                cname, "unknown" if size == PH_ABI_UNKNOWN else size, ctypes.sizeof(mirror)))
            continue
        for fname, *_ in mirror._fields_:
            if fname.startswith("_"):
                continue
            off = lib.ph_abi_field_offset(cname.encode(), fname.encode())
            mine = getattr(mirror, fname).offset
            if off != mine:
                bad.append("%s.%s: library offset %s, binding %d" % (
                    cname, fname, "unknown" if off == PH_ABI_UNKNOWN else off, mine))
    if bad:
        raise LibraryError("libpinhole's structs differ from this binding's: " + "; ".join(bad))


_lock = threading.Lock()
_lib = None
_path = None


def lib():
    """The loaded, checked library (loaded once, on first use)."""
    global _lib, _path
    with _lock:
        if _lib is None:
            _lib, _path = _load()
        return _lib


def library_path():
    lib()
    return _path


_reason_codes = None


def reason_code(reason):
    """The stable code of a ph_reason value (cached: the table never changes
    while the library is loaded)."""
    global _reason_codes
    codes = _reason_codes
    if codes is None:
        loaded = lib()
        codes = _reason_codes = tuple(loaded.ph_reason_code(i).decode("ascii")
                                      for i in range(64))
    if 0 <= reason < len(codes):
        return codes[reason]
    return "unknown"


def strerror(status):
    return lib().ph_strerror(status).decode("ascii", "replace")


def text(buf):
    """A C char array field's text (ctypes already cut it at the NUL;
    undecodable bytes replaced)."""
    return buf.decode("utf-8", "replace")
