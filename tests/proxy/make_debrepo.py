#!/usr/bin/python3
"""make_debrepo.py - a tiny Debian repository for the apt client test: one
package built with dpkg-deb, its Packages and Packages.gz, and an unsigned
Release listing their SHA-256 (apt verifies those even for a [trusted=yes]
source).

Usage: make_debrepo.py ROOT PACKAGE VERSION ARCH
Layout: ROOT/debian/pool/main/PACKAGE_VERSION_ARCH.deb and
ROOT/debian/dists/pinhole/{Release,main/binary-ARCH/Packages{,.gz}}, the
shape of deb.debian.org's, for a sources line
"deb [trusted=yes] http://HOST:PORT/debian pinhole main".
Prints the .deb's path under ROOT and its SHA-256.
"""
import gzip
import hashlib
import os
import subprocess
import sys
import tempfile


def main():
    root, pkg, version, arch = sys.argv[1:5]
    repo = os.path.join(root, "debian")
    pool = os.path.join(repo, "pool", "main")
    os.makedirs(pool, exist_ok=True)
    control = ("Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: Pinhole tests "
               "<tests@pinhole.invalid>\nSection: misc\nPriority: optional\n"
               "Description: a package that exists to be downloaded\n" % (pkg, version, arch))
    deb_name = "%s_%s_%s.deb" % (pkg, version, arch)
    deb = os.path.join(pool, deb_name)
    with tempfile.TemporaryDirectory() as tree:
        os.makedirs(os.path.join(tree, "DEBIAN"))
        os.makedirs(os.path.join(tree, "usr", "share", pkg))
        with open(os.path.join(tree, "DEBIAN", "control"), "w") as f:
            f.write(control)
        with open(os.path.join(tree, "usr", "share", pkg, "payload"), "wb") as f:
            f.write(os.urandom(65536))  # a payload apt must carry intact
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", tree, deb],
                       check=True, stdout=subprocess.DEVNULL)
    data = open(deb, "rb").read()
    stanza = control + ("Filename: pool/main/%s\nSize: %d\nMD5sum: %s\nSHA256: %s\n"
                        % (deb_name, len(data), hashlib.md5(data).hexdigest(),
                           hashlib.sha256(data).hexdigest()))
    bindir = os.path.join(repo, "dists", "pinhole", "main", "binary-" + arch)
    os.makedirs(bindir, exist_ok=True)
    packages = (stanza + "\n").encode()
    indexes = {"main/binary-%s/Packages" % arch: packages,
               "main/binary-%s/Packages.gz" % arch: gzip.compress(packages, mtime=0)}
    for rel, blob in indexes.items():
        with open(os.path.join(repo, "dists", "pinhole", rel), "wb") as f:
            f.write(blob)
    release = ("Origin: pinhole-tests\nLabel: pinhole-tests\nSuite: pinhole\nCodename: pinhole\n"
               "Date: Thu, 01 Jan 2026 00:00:00 UTC\nArchitectures: %s\nComponents: main\n"
               "SHA256:\n" % arch)
    for rel, blob in indexes.items():
        release += " %s %d %s\n" % (hashlib.sha256(blob).hexdigest(), len(blob), rel)
    with open(os.path.join(repo, "dists", "pinhole", "Release"), "w") as f:
        f.write(release)
    print(os.path.relpath(deb, root), hashlib.sha256(data).hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
