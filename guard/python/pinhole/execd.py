"""pinhole.execd - a Python worker's client of pinhole-execd (docs/execd.md).

The same ports as the C client (pinhole/execd_client.h): ExecutionEnvironment
(create, execute, destroy), WorkspaceFiles (stat, read, write, list) and the
lease lifecycle, over the daemon's unix socket (its SO_PEERCRED decides who may
connect) or TCP with mutual TLS (the certificate subject is the identity).
Byte strings (argv elements, paths, stdin, outputs, file contents, names) are
Python bytes or str; the wire's "text, or <key>_base64" encoding is handled
here. Errors are ExecdError with the stable code of docs/execd.md section 4.

    with Client.unix("/run/pinhole-execd/execd.sock") as c:
        env = c.create("tenant-1", "lease-1")
        r = c.execute("tenant-1", env, ["sh", "-c", "echo hi > out.txt"])
        ws = c.workspace("tenant-1", env)
        data = c.read("tenant-1", ws, "out.txt")
        c.destroy("tenant-1", env)
"""
from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from .errors import ExecdError

MAX_RESPONSE = 256 * 1024 * 1024
__all__ = ["Client", "ExecdError", "get_bytes", "put_bytes"]


def get_bytes(obj: Dict[str, Any], key: str) -> Optional[bytes]:
    """The bytes under key or key_base64 of a response object (None when
    neither is there)."""
    if key in obj:
        return obj[key].encode("utf-8")
    if key + "_base64" in obj:
        return base64.b64decode(obj[key + "_base64"], validate=True)
    return None


def put_bytes(obj: Dict[str, Any], key: str, value: Union[str, bytes]) -> None:
    """Sets key (valid UTF-8) or key_base64 (anything else) in a request."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    try:
        obj[key] = value.decode("utf-8")
    except UnicodeDecodeError:
        obj[key + "_base64"] = base64.b64encode(value).decode("ascii")


def _arg(value):
    if isinstance(value, str):
        return value
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(value).decode("ascii")}


def _check_server(sock: socket.socket, expected_uid: Optional[int]) -> None:
    """The rule of docs/execd.md (the C client's check_server)."""
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    if expected_uid is None and os.environ.get("PINHOLE_EXECD_UID"):
        try:
            expected_uid = int(os.environ["PINHOLE_EXECD_UID"], 10)
        except ValueError:
            raise ExecdError("invalid", "$PINHOLE_EXECD_UID must be a uid") from None
    if expected_uid is not None:
        if uid == expected_uid:
            return
    elif uid in (0, os.geteuid()):
        return
    raise ExecdError("denied", "execd_peer_untrusted: the socket is served by uid %d, not the "
                     "service's ($PINHOLE_EXECD_UID, else root or this process's own uid)"
                     % uid)


class Client:
    """One connection to pinhole-execd. Not for concurrent use by threads:
    one request at a time, as the protocol says."""

    def __init__(self, sock: socket.socket, hard_cap_ms: Optional[int] = None) -> None:
        self._sock = sock
        hello = {"op": "hello"}
        if hard_cap_ms is not None:
            hello["hard_cap_ms"] = hard_cap_ms
        self.hello = self.call(hello)

    @classmethod
    def unix(cls, path: str, hard_cap_ms: Optional[int] = None,
             expected_uid: Optional[int] = None) -> "Client":
        """Connects to the socket at path. Before anything is sent, the
        peer's uid (SO_PEERCRED) must be expected_uid (default:
        $PINHOLE_EXECD_UID when set, else root or this process's own
        effective uid; never a third uid): a socket swapped in by someone
        else never sees a request (a create carries a grant token).
        ExecdError("denied", "execd_peer_untrusted: ...") otherwise."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            _check_server(s, expected_uid)
        except BaseException:
            s.close()
            raise
        return cls(s, hard_cap_ms)

    @classmethod
    def tls(cls, host: str, port: int, ca_file: str, cert_file: str, key_file: str,
            server_name: Optional[str] = None, hard_cap_ms: Optional[int] = None) -> "Client":
        ctx = ssl.create_default_context(cafile=ca_file)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(cert_file, key_file)
        raw = socket.create_connection((host, port))
        return cls(ctx.wrap_socket(raw, server_hostname=server_name or host), hard_cap_ms)

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- frames ----

    def _recv_exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self._sock.recv(n - len(data))
            if not chunk:
                raise ExecdError("io", "the service closed the connection")
            data += chunk
        return data

    def send(self, request: Dict[str, Any]) -> None:
        body = json.dumps(request).encode("utf-8")
        self._sock.sendall(struct.pack(">I", len(body)) + body)

    def recv(self) -> Any:
        (n,) = struct.unpack(">I", self._recv_exact(4))
        if n == 0 or n > MAX_RESPONSE:
            raise ExecdError("protocol", "frame of %d bytes" % n)
        return json.loads(self._recv_exact(n))

    def call(self, request: Dict[str, Any],
             on_frame: Optional[Callable[[Dict[str, Any]], None]] = None) -> Dict[str, Any]:
        """One request, its response; ExecdError for {"ok": false}. Frames
        before the response (streamed output: no "ok" key) go to on_frame."""
        self.send(request)
        resp = self.recv()
        while "ok" not in resp:
            if on_frame is None:
                self.close()
                raise ExecdError("protocol", "an unexpected streamed frame")
            on_frame(resp)
            resp = self.recv()
        if resp.get("ok") is not True:
            raise ExecdError(resp.get("error", "internal"), resp.get("message", ""))
        return resp

    # ---- ExecutionEnvironment ----

    def create(self, tenant: str, lease: str, limits: Optional[Dict[str, Any]] = None,
               grant_token: Optional[str] = None, proxy_port: int = 0) -> Any:
        req = {"op": "environment.create", "tenant": tenant, "lease": lease}
        if limits:
            req["limits"] = limits
        if grant_token:
            req["network"] = {"grant_token": grant_token, "proxy_port": proxy_port}
        return self.call(req)["environment"]

    def execute(self, tenant: str, env: Any, argv: List[Union[str, bytes]],
                cwd: Optional[Union[str, bytes]] = None, timeout_seconds: Optional[float] = None,
                run_budget_ms: Optional[int] = None, stdin: Optional[Union[str, bytes]] = None,
                on_output: Optional[Callable[[str, bytes], None]] = None) -> Dict[str, Any]:
        """The result object, with "stdout" and "stderr" as bytes and every
        files_changed "path" as bytes. With on_output, fn(stream, data) gets
        each piece of output while the command runs ("stdout" or "stderr",
        bytes; docs/execd.md, streamed output)."""
        req = {"op": "environment.execute", "tenant": tenant, "environment": env,
               "argv": [_arg(a) for a in argv]}
        if cwd is not None:
            put_bytes(req, "cwd", cwd)
        if timeout_seconds is not None:
            req["timeout_seconds"] = timeout_seconds
        if run_budget_ms is not None:
            req["run_budget_ms"] = run_budget_ms
        if stdin is not None:
            req["stdin_base64"] = base64.b64encode(
                stdin.encode("utf-8") if isinstance(stdin, str) else stdin).decode("ascii")
        frame = None
        if on_output is not None:
            req["stream_output"] = True

            def frame(f):
                on_output(f["output"], base64.b64decode(f["data_base64"], validate=True))
        r = self.call(req, frame)["result"]
        r["stdout"], r["stderr"] = get_bytes(r, "stdout"), get_bytes(r, "stderr")
        r.pop("stdout_base64", None)
        r.pop("stderr_base64", None)
        for c in r["files_changed"]:
            c["path"] = get_bytes(c, "path")
            c.pop("path_base64", None)
        return r

    def destroy(self, tenant: str, env: Any) -> None:
        self.call({"op": "environment.destroy", "tenant": tenant, "environment": env})

    def workspace(self, tenant: str, env: Any) -> Any:
        return self.call({"op": "environment.workspace", "tenant": tenant,
                          "environment": env})["workspace"]

    # ---- WorkspaceFiles ----

    def _ws(self, op, tenant, ws, path, **more):
        req = {"op": op, "tenant": tenant, "workspace": ws}
        put_bytes(req, "path", path)
        req.update(more)
        return req

    def stat(self, tenant: str, ws: Any, path: Union[str, bytes]) -> Dict[str, Any]:
        return self.call(self._ws("workspace.stat", tenant, ws, path))["stat"]

    def read(self, tenant: str, ws: Any, path: Union[str, bytes], max_bytes: int = 16 * 1024 * 1024,
             chunk_bytes: int = 1024 * 1024) -> bytes:
        """The file's bytes, streamed in chunks of chunk_bytes (4096 to 8 MiB; memory: one
        chunk per frame)."""
        head = self.call(self._ws("workspace.read", tenant, ws, path, max_bytes=max_bytes,
                                  chunk_bytes=chunk_bytes))
        parts = []
        while True:
            frame = self.recv()
            if "ok" in frame:
                if frame["ok"] is not True:
                    raise ExecdError(frame.get("error", "internal"), frame.get("message", ""))
                data = b"".join(parts)
                if frame.get("size") != len(data) or not head.get("stream"):
                    raise ExecdError("protocol", "the stream does not add up")
                return data
            parts.append(base64.b64decode(frame["chunk_base64"], validate=True))

    def write(self, tenant: str, ws: Any, path: Union[str, bytes], data: Union[str, bytes],
              mode: int = 0o644) -> None:
        req = self._ws("workspace.write", tenant, ws, path, mode=mode)
        req["data_base64"] = base64.b64encode(
            data.encode("utf-8") if isinstance(data, str) else data).decode("ascii")
        self.call(req)

    def list(self, tenant: str, ws: Any, path: Union[str, bytes] = "",
             max_entries: int = 10000) -> Tuple[List[Dict[str, Any]], bool]:
        """(entries, truncated); each entry's "name" is bytes."""
        r = self.call(self._ws("workspace.list", tenant, ws, path, max_entries=max_entries))
        for e in r["entries"]:
            e["name"] = get_bytes(e, "name")
            e.pop("name_base64", None)
        return r["entries"], r["truncated"]

    def close_workspace(self, tenant: str, ws: Any) -> None:
        self.call({"op": "workspace.close", "tenant": tenant, "workspace": ws})

    # ---- leases ----

    def lease_open(self, tenant: str, lease: str, approval_hold_seconds: int,
                   limits: Optional[Dict[str, Any]] = None) -> Any:
        req = {"op": "lease.open", "tenant": tenant, "lease": lease,
               "approval_hold_seconds": approval_hold_seconds}
        if limits:
            req["limits"] = limits
        return self.call(req)["handle"]

    def _lease(self, op, tenant, handle, **more):
        req = {"op": op, "tenant": tenant, "handle": handle}
        req.update(more)
        return self.call(req)

    def lease_environment(self, tenant: str, handle: Any) -> Any:
        return self._lease("lease.environment", tenant, handle)["environment"]

    def lease_workspace(self, tenant: str, handle: Any) -> Any:
        return self._lease("lease.workspace", tenant, handle)["workspace"]

    def lease_has_sandbox(self, tenant: str, handle: Any) -> bool:
        return self._lease("lease.status", tenant, handle)["has_sandbox"]

    def hold_begin(self, tenant: str, handle: Any, now_seconds: int) -> None:
        self._lease("lease.hold_begin", tenant, handle, now_seconds=now_seconds)

    def hold_tick(self, tenant: str, handle: Any, now_seconds: int) -> bool:
        return self._lease("lease.hold_tick", tenant, handle, now_seconds=now_seconds)["destroyed"]

    def hold_end(self, tenant: str, handle: Any, now_seconds: int) -> bool:
        return self._lease("lease.hold_end", tenant, handle, now_seconds=now_seconds)["destroyed"]

    def lease_end(self, tenant: str, handle: Any) -> None:
        self._lease("lease.end", tenant, handle)

    # ---- health ----

    def health(self) -> Dict[str, Any]:
        return self.call({"op": "health"})

    def metrics(self) -> str:
        return self.call({"op": "metrics"})["prometheus"]
