#!/bin/sh
# The Debian packages in `make test` (the "deb" stage of scripts/test-all.sh):
# builds them (scripts/deb.sh) and checks what they hold, one line per check:
#   deb <check>: ok [figure]        or        deb <check>: FAILED <why>
#   build        the seven packages are built
#   contents     every binary, library, header, pkg-config file, CMake
#                package, unit, man page and config file in its package
#                (dpkg-deb -c); the postinst scripts start no daemon
#   build_path   the build directory's path is in no file of any package
#                (grep -r over the extracted tree)
#   version      every extracted binary runs --version against the extracted
#                libraries (LD_LIBRARY_PATH), no library is missing (ldd),
#                and the Python package loads the extracted libpinhole
#   units        systemd-analyze verify of both units, with the packages
#                overlaid on /usr in a private mount namespace (so ExecStart
#                and the man: links resolve); pinhole-proxy's exposure from
#                systemd-analyze security --offline=true at most 2.0; the
#                directory of sandbox uid claims (sandbox.h) is writable in
#                the execd unit (ProtectSystem=strict) and made root's 0700
#                by the package's tmpfiles.d; the execd unit runs in the
#                workers' group pinhole-execd (its socket's group)
#   syscalls     every system call the proxy makes (strace: start, /metrics,
#                CONNECT with a grant, reloads, drain) is in its unit's
#                SystemCallFilter
#   execd_env    pinhole-execd starts with the variable its unit adds to
#                its environment (a credential name would refuse it)
#   man          every man page renders without a warning
#                (MANWIDTH=80 man --warnings -l), every binary has one
#   lintian      no error on any package (lintian --fail-on error); the
#                summary of what it says
# Then "deb: N s". Exit status 1 when a check failed.
#
#   sh scripts/deb-check.sh [--no-build] [OUTDIR]     (default build/deb)
# --no-build checks the packages already in OUTDIR.
set -u
cd "$(dirname "$0")/.."
start=$(date +%s)
build=1
[ "${1:-}" = --no-build ] && { build=0; shift; }
out=${1:-build/deb}
tree=$(pwd)
failed=0
ok() { echo "deb $1: ok${2:+ $2}"; }
bad() { echo "deb $1: FAILED $2"; failed=1; }

PKGS="libpinhole1 libpinhole-curl1 libpinhole-dev pinhole-proxy pinhole-execd pinhole-tools python3-pinhole"
if [ $build = 1 ] && ! sh scripts/deb.sh "$out" >/dev/null; then
    bad build "scripts/deb.sh failed (log: $out/build.log)"
    echo "deb: $(($(date +%s) - start)) s"
    exit 1
fi
out=$(cd "$out" && pwd)
missing=""
for p in $PKGS; do
    ls "$out/${p}_"*.deb >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then bad build "not built:$missing"; else ok build "$(ls "$out"/*.deb | wc -l) packages"; fi

x=$(mktemp -d /tmp/pinhole-deb-check.XXXXXX)
trap 'rm -rf "$x"' EXIT
mkdir "$x/root" "$x/ctl"
for d in "$out"/*.deb; do dpkg-deb -x "$d" "$x/root"; done
M=usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)

# contents: "package path" rows; a path ending in / is a directory that
# must hold at least one file.
cat >"$x/want" <<EOT
libpinhole1 $M/libpinhole.so.1
libpinhole1 $M/libpinhole-base.so.1
libpinhole-curl1 $M/libpinhole-curl.so.1
libpinhole-dev $M/libpinhole.so
libpinhole-dev $M/libpinhole-base.so
libpinhole-dev $M/libpinhole-curl.so
libpinhole-dev $M/libpinhole.a
libpinhole-dev $M/libpinhole-base.a
libpinhole-dev $M/libpinhole_sandbox.a
libpinhole-dev $M/libpinhole_artifacts.a
libpinhole-dev $M/libpinhole_execd_client.a
libpinhole-dev $M/pkgconfig/pinhole.pc
libpinhole-dev $M/pkgconfig/pinhole-base.pc
libpinhole-dev $M/pkgconfig/pinhole-curl.pc
libpinhole-dev $M/cmake/pinhole/pinholeConfig.cmake
libpinhole-dev $M/cmake/pinhole/pinholeTargets.cmake
libpinhole-dev usr/include/pinhole/guard.h
libpinhole-dev usr/include/pinhole/version.h
libpinhole-dev usr/include/pinhole/curl.h
libpinhole-dev usr/include/pinhole/sandbox.h
libpinhole-dev usr/include/pinhole/artifact_store.h
pinhole-proxy usr/bin/pinhole-proxy
pinhole-proxy lib/systemd/system/pinhole-proxy.service
pinhole-proxy etc/pinhole/proxy.yaml
pinhole-proxy usr/share/man/man8/pinhole-proxy.8.gz
pinhole-proxy usr/share/man/man5/pinhole-proxy.yaml.5.gz
pinhole-execd usr/bin/pinhole-execd
pinhole-execd usr/libexec/pinhole/pinhole-forwarder
pinhole-execd usr/libexec/pinhole/pinhole-idmap
pinhole-execd lib/systemd/system/pinhole-execd.service
pinhole-execd usr/share/man/man8/pinhole-execd.8.gz
pinhole-execd usr/share/pinhole/schemas/sandbox.run_command.json
pinhole-tools usr/bin/policyc
pinhole-tools usr/bin/pinhole-guard
pinhole-tools usr/bin/pinhole-sandbox
pinhole-tools usr/bin/pinhole-artifacts
pinhole-tools usr/share/man/man1/policyc.1.gz
pinhole-tools usr/share/man/man1/pinhole-guard.1.gz
pinhole-tools usr/share/man/man1/pinhole-sandbox.1.gz
pinhole-tools usr/share/man/man1/pinhole-artifacts.1.gz
pinhole-tools usr/share/man/man5/pinhole-allowlist.5.gz
pinhole-tools usr/share/man/man5/pinhole-grants.5.gz
pinhole-tools usr/share/doc/pinhole/examples/allowlist.yaml
python3-pinhole usr/lib/python3/dist-packages/pinhole/__init__.py
python3-pinhole usr/lib/python3/dist-packages/pinhole/_lib.py
EOT
why=""
for p in $PKGS; do
    dpkg-deb -c "$out/${p}_"*.deb 2>/dev/null | awk '{print $6}' | sed 's|^\./||' >"$x/list.$p"
done
while read -r p f; do
    grep -qxF "$f" "$x/list.$p" 2>/dev/null || why="$why $p:$f"
done <"$x/want"
[ -s "$x/list.libpinhole-dev" ] && n_headers=$(grep -c '^usr/include/pinhole/.*\.h$' "$x/list.libpinhole-dev") || n_headers=0
n_src_headers=$(find guard/include guard/base/include guard/curl/include sandbox/include artifacts/include \
    -name '*.h' | wc -l)
n_src_headers=$((n_src_headers + 1))  # version.h, generated
[ "$n_headers" -eq "$n_src_headers" ] || why="$why headers:$n_headers/$n_src_headers"
for p in pinhole-proxy pinhole-execd; do
    rm -rf "$x/ctl/$p"; dpkg-deb -e "$out/${p}_"*.deb "$x/ctl/$p"
    if grep -qE 'deb-systemd-invoke|invoke-rc.d|systemctl (start|restart)' "$x/ctl/$p/postinst"; then
        why="$why $p:postinst-starts-the-daemon"
    fi
done
if [ -z "$why" ]; then ok contents "$(cat "$x"/list.* | grep -cv '/$') files, $n_headers headers"
else bad contents "missing or wrong:$why"; fi

# build_path: the source tree (the build directory is below it) and the
# build directory itself, in case it was given elsewhere.
hits=$(grep -rlF -e "$tree" -e "$out/src" "$x/root" "$x/ctl" 2>/dev/null | sed "s|^$x/||")
if [ -z "$hits" ]; then ok build_path "none of $(find "$x/root" -type f | wc -l) files holds $out/src"
else bad build_path "$(echo $hits)"; fi

# version
why=""
L="$x/root/$M"
for b in "$x"/root/usr/bin/* "$x"/root/usr/libexec/pinhole/*; do
    v=$(LD_LIBRARY_PATH=$L "$b" --version 2>&1 | head -1)
    case "$v" in *" 0."*|*" 1."*) ;; *) why="$why $(basename "$b"):'$v'" ;; esac
    if LD_LIBRARY_PATH=$L ldd "$b" 2>/dev/null | grep -q "not found"; then why="$why $(basename "$b"):ldd"; fi
done
for l in "$L"/*.so.1; do
    LD_LIBRARY_PATH=$L ldd "$l" | grep -q "not found" && why="$why $(basename "$l"):ldd"
done
py=$(PYTHONPATH=$x/root/usr/lib/python3/dist-packages LD_LIBRARY_PATH=$L /usr/bin/python3 -c '
import pinhole, pinhole._lib as l
l.lib()
maps = [ln.split()[-1] for ln in open("/proc/self/maps") if "/libpinhole.so" in ln]
print(pinhole.__file__, maps[0] if maps else "libpinhole not mapped")' 2>&1)
case "$py" in "$x/root/"*" $L/"*) ;; *) why="$why python3-pinhole:'$py'" ;; esac
if [ -z "$why" ]; then ok version "$(ls "$x"/root/usr/bin "$x"/root/usr/libexec/pinhole | grep -vc ':$\|^$') binaries and the Python package"
else bad version "$why"; fi

# units: /usr of the packages over the host's, in a namespace of our own.
U=$x/root/lib/systemd/system
v=$(unshare -m sh -c 'mount -t overlay overlay -o "lowerdir=$1/usr:/usr" /usr &&
    systemd-analyze verify "$2/pinhole-proxy.service" "$2/pinhole-execd.service"' sh "$x/root" "$U" 2>&1)
rc=$?
sec=$(systemd-analyze security --offline=true --threshold=20 --root="$x/root" pinhole-proxy.service 2>&1)
src=$?
exposure=$(echo "$sec" | sed -n 's/.*Overall exposure level for pinhole-proxy.service: \([0-9.]*\).*/\1/p')
# The daemon makes nothing in /run under ProtectSystem=strict: what it
# writes there must be a ReadWritePaths entry (no "-": a missing one would
# be skipped, read-only) that exists before it starts (tmpfiles.d).
claims=$(sed -n 's/^#define PH_SANDBOX_ID_CLAIM_DIR "\(.*\)"$/\1/p' sandbox/include/pinhole/sandbox.h)
rw=$(sed -n 's/^ReadWritePaths=//p' "$U/pinhole-execd.service")
tmpf=$(cat "$x"/root/usr/lib/tmpfiles.d/pinhole-execd.conf 2>/dev/null)
why=""
case " $rw " in *" $claims "*) ;; *) why="$why ReadWritePaths '$rw' lacks '$claims'" ;; esac
echo "$tmpf" | grep -qxE "d $claims 0700 root root -" || why="$why no tmpfiles.d line makes '$claims'"
# The workers reach execd's socket through its group (make deb-check runs
# it: scripts/deb-chroot-check.sh, "execd").
grep -qx "Group=pinhole-execd" "$U/pinhole-execd.service" || why="$why execd unit: no Group=pinhole-execd"
if [ $rc -eq 0 ] && [ -z "$v" ] && [ $src -eq 0 ] && [ -n "$exposure" ] && [ -n "$claims" ] && [ -z "$why" ]; then
    ok units "verify clean; pinhole-proxy exposure $exposure; $claims writable and made at boot"
else
    bad units "verify rc=$rc '$(echo $v)'; security rc=$src exposure '${exposure:-?}';$why"
fi

# syscalls: the proxy unit's SystemCallFilter (its allow lines less its ~
# lines: @system-service less @privileged) must hold every system call the
# proxy makes. The extracted
# proxy runs under strace as an unprivileged uid (no passwd entry needed),
# with the shipped settings, ports from the kernel and a unix socket: it
# serves /metrics, a CONNECT with a grant (its DNS lookup, whatever the
# answer), a refused plain-HTTP request, a reload by POST /reload and one by
# SIGHUP, then drains on SIGTERM. Every call after its execve must be in the
# filter's set (systemd-analyze syscall-filter, groups expanded). No upstream
# is dialed (the sandbox of the tests has no route out, and a production
# build refuses loopback): connect() is made by the DNS lookup already.
expand() {
    for g; do
        case "$g" in
        @*) systemd-analyze syscall-filter "$g" | sed -n 's/^    \([^#].*\)$/\1/p' |
                while read -r c; do expand "$c"; done ;;
        *) echo "$g" ;;
        esac
    done
}
p=$x/proxy
uid=64999
mkdir -m 0700 "$p"
LD_LIBRARY_PATH=$L "$x/root/usr/bin/policyc" compile -q examples/allowlist.yaml -o "$p/t.ptab" &&
LD_LIBRARY_PATH=$L "$x/root/usr/bin/pinhole-guard" keygen --kid k1 --output "$p/k.key" >/dev/null
token=$(LD_LIBRARY_PATH=$L "$x/root/usr/bin/pinhole-guard" grant issue --keys "$p/k.key" \
    --tenant t --lease l1 --list default --ttl 600)
chown -R "$uid:$uid" "$p"
chmod 0711 "$x"
: >"$p/log"
LD_LIBRARY_PATH=$L strace -f -qq -o "$x/trace" setpriv --reuid=$uid --regid=$uid --clear-groups \
    "$x/root/usr/bin/pinhole-proxy" --config="$x/root/etc/pinhole/proxy.yaml" --table="$p/t.ptab" \
    --grant-key="$p/k.key" --listen=127.0.0.1:0 --admin-listen=127.0.0.1:0 \
    --unix-socket="$p/proxy.sock" --ready-file="$p/ready" >"$p/requests" 2>"$p/log" &
spid=$!
i=0
while [ ! -s "$p/ready" ] && kill -0 $spid 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
admin=$(sed -n 's/^admin //p' "$p/ready" 2>/dev/null)
listen=$(sed -n 's/^listen //p' "$p/ready" 2>/dev/null)
why=""
if [ -n "$admin" ] && [ -n "$listen" ]; then
    curl -s -m 10 "http://$admin/metrics" -o /dev/null || why="$why metrics"
    curl -s -m 10 --proxy "http://l1:$token@$listen" https://api.github.com/ -o /dev/null
    curl -s -m 10 --proxy "http://l1:$token@$listen" http://pypi.org/ -o /dev/null
    [ "$(curl -s -m 10 -X POST "http://$admin/reload" -o /dev/null -w '%{http_code}')" = 200 ] ||
        why="$why reload"
    ppid=$(sed -n 's/^\([0-9]*\) *execve(".*\/pinhole-proxy".*= 0$/\1/p' "$x/trace" | head -1)
    kill -HUP "$ppid"
    i=0
    while [ "$(grep -c '"event":"reload' "$p/log")" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    kill -TERM "$ppid"
    [ "$(grep -c '"event":"reload' "$p/log")" -ge 2 ] || why="$why reloads:'$(grep reload "$p/log")'"
else
    why="$why not-ready:'$(tail -2 "$p/log")'"
fi
wait $spid
rc=$?
[ $rc -eq 0 ] || why="$why exit=$rc"
# The unit's filter: its allow lines, less its ~ lines.
expand $(sed -n 's/^SystemCallFilter=\([^~].*\)$/\1/p' "$U/pinhole-proxy.service") | sort -u >"$x/allow"
expand $(sed -n 's/^SystemCallFilter=~\(.*\)$/\1/p' "$U/pinhole-proxy.service") | sort -u >"$x/deny"
sed -n '/execve(".*\/pinhole-proxy"/,$p' "$x/trace" |
    sed -n 's/^[0-9]* *\([a-z_0-9]*\)(.*/\1/p' | sort -u >"$x/used"
outside=$(comm -23 "$x/allow" "$x/deny" | comm -13 - "$x/used" | tr '\n' ' ')
[ -z "$outside" ] || why="$why outside the filter: $outside"
if [ -z "$why" ]; then ok syscalls "$(wc -l <"$x/used") system calls, all in the unit's SystemCallFilter"
else bad syscalls "$why"; fi

# execd_env: the variable the execd unit takes its options from
# (EnvironmentFile) reaches the daemon's environment, where a credential
# name refuses the start (exit 78): the extracted daemon, given that
# variable as the package writes it and the unit's options (fake mechanism,
# paths of its own), must start listening, then stop on SIGTERM with 0.
var=$(sed -n 's/^ *\$\([A-Za-z_][A-Za-z0-9_]*\)$/\1/p' "$U/pinhole-execd.service" | head -1)
e=$x/execd
mkdir -m 0700 "$e"
: >"$e/log"
env -i PATH=/usr/bin:/bin "${var:-NONE}=--allow-gid=$(id -g)" LD_LIBRARY_PATH="$L" \
    "$x/root/usr/bin/pinhole-execd" --socket="$e/execd.sock" --socket-mode=0660 \
    --state-dir="$e/state" --mechanism=fake --mode=development --allow-gid="$(id -g)" \
    2>"$e/log" &
pid=$!
i=0
while ! grep -q '"listening"' "$e/log" && kill -0 $pid 2>/dev/null && [ $i -lt 300 ]; do
    sleep 0.1; i=$((i + 1))
done
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
if [ -n "$var" ] && [ $rc -eq 0 ] && grep -q '"listening"' "$e/log"; then
    ok execd_env "started with $var in its environment, stopped with 0"
else
    bad execd_env "variable '${var:-none found in the unit}', exit $rc: $(head -c 300 "$e/log")"
fi

# man
why=""
for m in "$x"/root/usr/share/man/man*/*; do
    w=$(MANWIDTH=80 man --warnings -l "$m" 2>&1 >/dev/null)
    [ -z "$w" ] || why="$why $(basename "$m"):'$(echo "$w" | head -1)'"
done
for b in "$x"/root/usr/bin/*; do
    n=$(basename "$b")
    ls "$x/root/usr/share/man/man1/$n.1.gz" "$x/root/usr/share/man/man8/$n.8.gz" 2>/dev/null | grep -q . ||
        why="$why $n:no-man-page"
done
if [ -z "$why" ]; then ok man "$(ls "$x"/root/usr/share/man/man*/* | wc -l) pages"
else bad man "$why"; fi

# lintian
lintian --fail-on error --display-info "$out"/*.changes >"$x/lintian" 2>&1
rc=$?
summary=$(for t in E W I P; do printf '%s %s, ' "$t:" "$(grep -c "^$t: " "$x/lintian")"; done)
if [ $rc -eq 0 ] && ! grep -q '^E: ' "$x/lintian"; then ok lintian "${summary}overrides in debian/*.lintian-overrides"
    grep -E '^[EWIP]: ' "$x/lintian" | sort -u | sed 's/^/  /' 
else bad lintian "rc=$rc: $(grep '^E: ' "$x/lintian" | head -5 | tr '\n' ';')"; fi

echo "deb: $(($(date +%s) - start)) s"
exit $failed
