#!/usr/bin/python3
"""make_wheel.py - a tiny pure-Python wheel and the PEP 503 simple index that
lists it, for the pip client test.

Usage: make_wheel.py ROOT NAME VERSION
Writes ROOT/packages/<dist>-VERSION-py3-none-any.whl, ROOT/simple/index.html
and ROOT/simple/NAME/index.html (the link carries #sha256=), and prints the
wheel's file name and SHA-256.
"""
import base64
import hashlib
import os
import re
import sys
import zipfile


def record_hash(data):
    d = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "sha256=%s,%d" % (d, len(data))


def main():
    root, name, version = sys.argv[1:4]
    dist = re.sub(r"[-_.]+", "_", name)
    files = {
        "%s/__init__.py" % dist: b'"""A package that exists to be downloaded."""\nVALUE = 42\n',
        "%s-%s.dist-info/METADATA" % (dist, version):
            ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: test fixture\n"
             % (name, version)).encode(),
        "%s-%s.dist-info/WHEEL" % (dist, version):
            b"Wheel-Version: 1.0\nGenerator: make_wheel.py\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n",
    }
    rec = "%s-%s.dist-info/RECORD" % (dist, version)
    lines = ["%s,%s" % (n, record_hash(d)) for n, d in files.items()] + ["%s,," % rec]
    files[rec] = ("\n".join(lines) + "\n").encode()
    wheel = "%s-%s-py3-none-any.whl" % (dist, version)
    os.makedirs(os.path.join(root, "packages"), exist_ok=True)
    path = os.path.join(root, "packages", wheel)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            info = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, d)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    norm = re.sub(r"[-_.]+", "-", name).lower()
    os.makedirs(os.path.join(root, "simple", norm), exist_ok=True)
    with open(os.path.join(root, "simple", "index.html"), "w") as f:
        f.write('<!DOCTYPE html><html><body><a href="%s/">%s</a></body></html>\n' % (norm, norm))
    with open(os.path.join(root, "simple", norm, "index.html"), "w") as f:
        f.write('<!DOCTYPE html><html><body><a href="../../packages/%s#sha256=%s">%s</a>'
                "</body></html>\n" % (wheel, digest, wheel))
    print(wheel, digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
