#!/usr/bin/env bash
# Checks the packages packaging/build.sh made (CI runs it):
#
#   packaging/check.sh PKG_DIR
#
# - .deb: control fields (dpkg-deb --info), contents and modes (dpkg-deb --contents):
#   every command of commands/src/bin and admin/src/bin with its man page, the daemons, units, conffiles;
#   unpack all three into a temporary root with `dpkg --root` and list what dpkg recorded;
#   lintian: no errors (warnings are printed).
# - .rpm (when present and `rpm` is installed): rpm -qip / -qlp, config files, scriptlets.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgdir=$(cd "${1:?usage: $0 PKG_DIR}" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

client_bins=()
for f in commands/src/bin/*.rs commands/src/bin/*/main.rs admin/src/bin/*.rs admin/src/bin/*/main.rs; do
  [ -e "$f" ] || continue
  case "$f" in */main.rs) client_bins+=("$(basename "$(dirname "$f")")") ;; *) client_bins+=("$(basename "$f" .rs)") ;; esac
done

deb() { local f; f=$(ls "$pkgdir"/"$1"_*.deb 2>/dev/null | head -1); [ -n "$f" ] || fail "no $1 .deb in $pkgdir"; echo "$f"; }
client=$(deb flotilla-client); controller=$(deb flotilla-controller); node=$(deb flotilla-node)

field() { dpkg-deb -f "$1" "$2"; }
expect_field() { # deb field regex
  local v; v=$(field "$1" "$2")
  [[ $v =~ $3 ]] || fail "$(basename "$1"): $2 is '$v', expected /$3/"
  echo "ok $(basename "$1") $2: $v"
}
contents() { dpkg-deb --contents "$1" | awk '{o = ($2 == "0/0") ? "root/root" : $2; print $1, o, $6}' | sed 's| \./| /|'; }
expect_file() { # deb path mode owner
  local line; line=$(contents "$1" | awk -v p="$2" '$3 == p') || true
  [ -n "$line" ] || fail "$(basename "$1") lacks $2"
  [ "$(awk '{print $1, $2}' <<<"$line")" = "$3 $4" ] || fail "$(basename "$1"): $2 is '$line', expected $3 $4"
}

echo "--- .deb metadata"
version=$(field "$client" Version)
for d in "$client" "$controller" "$node"; do
  dpkg-deb --info "$d" > /dev/null
  expect_field "$d" Version "^$version\$"
  expect_field "$d" Architecture '^amd64$|^arm64$'
done
expect_field "$client" Conflicts '(^|, )slurm-client(,|$)'
expect_field "$client" Conflicts '(^|, )slurm-wlm(,|$)'
expect_field "$controller" Conflicts '(^|, )slurmctld(,|$)'
expect_field "$node" Conflicts '(^|, )slurmd(,|$)'
expect_field "$client" Depends 'libc6'
expect_field "$controller" Depends "flotilla-client \\(= $version\\)"
expect_field "$controller" Depends '(^|, )adduser(,|$)'
expect_field "$node" Depends "flotilla-client \\(= $version\\)"

echo "--- .deb contents"
for b in "${client_bins[@]}"; do
  expect_file "$client" "/usr/bin/$b" -rwxr-xr-x root/root
  expect_file "$client" "/usr/share/man/man1/$b.1.gz" -rw-r--r-- root/root
done
expect_file "$client" /etc/slurm/slurm.conf -rw-r--r-- root/root
expect_file "$controller" /usr/sbin/slurmctld -rwxr-xr-x root/root
expect_file "$controller" /usr/sbin/sackd -rwxr-xr-x root/root
expect_file "$controller" /usr/sbin/slurmrestd -rwxr-xr-x root/root
for s in sql/*.sql; do
  expect_file "$controller" "/usr/share/flotilla/sql/$(basename "$s")" -rw-r--r-- root/root
  expect_file "$controller" "/usr/share/flotilla/sql/postgres/$(basename "$s")" -rw-r--r-- root/root
done
expect_file "$controller" /etc/default/slurmctld -rw-r--r-- root/root
expect_file "$controller" /etc/default/slurmrestd -rw-r--r-- root/root
expect_file "$node" /usr/sbin/slurmd -rwxr-xr-x root/root
expect_file "$node" /etc/default/slurmd -rw-r--r-- root/root
expect_file "$node" /etc/slurm/cgroup.conf -rw-r--r-- root/root
unit_of() { contents "$1" | awk -v u="$2" '$3 ~ "/systemd/system/" u "$" {print $3}'; }
[ -n "$(unit_of "$controller" slurmctld.service)" ] || fail "controller has no slurmctld.service"
[ -n "$(unit_of "$node" slurmd.service)" ] || fail "node has no slurmd.service"
[ -n "$(unit_of "$controller" sackd.service)" ] || fail "controller has no sackd.service"
[ -n "$(unit_of "$controller" slurmrestd.service)" ] || fail "controller has no slurmrestd.service"
echo "ok files: ${#client_bins[@]} commands with man pages, daemons, units, defaults, migrations"

tmp=$(mktemp -d)
trap 'rm -rf --one-file-system "$tmp"' EXIT
for d in "$client" "$controller" "$node"; do
  dpkg-deb --ctrl-tarfile "$d" | tar -x -C "$tmp" ./conffiles 2>/dev/null || true
  mv "$tmp/conffiles" "$tmp/$(field "$d" Package).conffiles" 2>/dev/null || true
done
grep -qx /etc/slurm/slurm.conf "$tmp/flotilla-client.conffiles" || fail "slurm.conf is not a conffile"
grep -qx /etc/default/slurmctld "$tmp/flotilla-controller.conffiles" || fail "/etc/default/slurmctld is not a conffile"
grep -qx /etc/default/slurmrestd "$tmp/flotilla-controller.conffiles" || fail "/etc/default/slurmrestd is not a conffile"
grep -qx /etc/default/slurmd "$tmp/flotilla-node.conffiles" || fail "/etc/default/slurmd is not a conffile"
grep -qx /etc/slurm/cgroup.conf "$tmp/flotilla-node.conffiles" || fail "/etc/slurm/cgroup.conf is not a conffile"
echo "ok conffiles"
for s in postinst postrm; do
  dpkg-deb --ctrl-tarfile "$controller" | tar -xO "./$s" | grep -c 'slurm.key' >/dev/null || fail "controller $s does not handle the key"
done
dpkg-deb --ctrl-tarfile "$controller" | tar -xO ./postinst | grep -c 'deb-systemd-helper' >/dev/null || fail "no systemd snippet in postinst"
dpkg-deb --ctrl-tarfile "$controller" | tar -xO ./postinst | grep -c 'jwt_hs256.key' >/dev/null || fail "controller postinst does not make the auth/jwt key"

echo "--- unpack into a temporary root (dpkg --root)"
r=$tmp/root
mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates"
touch "$r/var/lib/dpkg/status"
# --unpack runs no maintainer script (they need a shell in the root); the root has no other
# packages, hence --force-depends.
dpkg --root="$r" --force-depends --log=/dev/null --unpack "$client" "$controller" "$node" > "$tmp/unpack.log"
for b in "${client_bins[@]}"; do [ -x "$r/usr/bin/$b" ] || fail "$b not unpacked"; done
[ -x "$r/usr/sbin/slurmctld" ] && [ -x "$r/usr/sbin/slurmd" ] && [ -x "$r/usr/sbin/slurmrestd" ] || fail "daemons not unpacked"
dpkg --root="$r" -l 'flotilla-*' | grep '^iU' || fail "dpkg --root did not record the packages"
n=$(cat "$r"/var/lib/dpkg/info/flotilla-*.list | wc -l)
echo "ok unpacked: $n paths recorded"
if command -v systemd-analyze > /dev/null && [ -f /lib/systemd/system/sysinit.target ]; then
  # The units against the unpacked root (ExecStart binaries, keys, values); the host's
  # targets stand in for the ones the root lacks. Any message fails.
  cp -an /lib/systemd/system/*.target /lib/systemd/system/*.slice "$r/usr/lib/systemd/system/" 2>/dev/null || true
  for u in slurmctld sackd slurmrestd slurmd; do
    msg=$(cd / && systemd-analyze verify --man=no --root="$r" "/usr/lib/systemd/system/$u.service" 2>&1) \
      || fail "systemd-analyze verify $u.service: $msg"
    [ -z "$msg" ] || fail "systemd-analyze verify $u.service: $msg"
  done
  echo "ok systemd-analyze verify: slurmctld.service sackd.service slurmrestd.service slurmd.service"
else
  echo "SKIPPED: systemd-analyze verify (no systemd on this host)"
fi
dpkg --root="$r" --force-depends --force-remove-reinstreq --log=/dev/null --purge flotilla-node flotilla-controller flotilla-client > /dev/null 2>&1 \
  || true # prerm/postrm need a shell in the root; the full install/remove test is test-debootstrap.sh

if command -v lintian > /dev/null; then
  echo "--- lintian"
  lintian --tag-display-limit 0 "$client" "$controller" "$node" > "$tmp/lintian.txt" 2>&1 || true
  cat "$tmp/lintian.txt"
  if grep -q '^E:' "$tmp/lintian.txt"; then fail "lintian reported errors"; fi
  echo "ok lintian: $(grep -c '^W:' "$tmp/lintian.txt" || true) warnings, no errors"
else
  echo "SKIPPED: lintian not installed (apt-get install lintian)"
fi

shopt -s nullglob
rpms=("$pkgdir"/*.rpm)
if [ ${#rpms[@]} -gt 0 ]; then
  command -v rpm > /dev/null || fail "rpm files but no rpm tool (apt-get install rpm)"
  echo "--- .rpm"
  [ ${#rpms[@]} = 3 ] || fail "expected 3 rpm files, found ${#rpms[@]}"
  rq() { rpm -qp --nosignature "$@" 2>/dev/null; }
  rclient=$(ls "$pkgdir"/flotilla-client-*.rpm); rctl=$(ls "$pkgdir"/flotilla-controller-*.rpm); rnode=$(ls "$pkgdir"/flotilla-node-*.rpm)
  for p in "$rclient" "$rctl" "$rnode"; do rpm -qip --nosignature "$p" 2>/dev/null | grep -E '^(Name|Version|Release|Architecture) ' | tr -s ' ' | tr '\n' ' '; echo; done
  for b in "${client_bins[@]}"; do
    rq -l "$rclient" | grep -cx "/usr/bin/$b" >/dev/null || fail "rpm client lacks /usr/bin/$b"
    rq -l "$rclient" | grep -cx "/usr/share/man/man1/$b.1.gz" >/dev/null || fail "rpm client lacks man page of $b"
  done
  rq -c "$rclient" | grep -cx /etc/slurm/slurm.conf >/dev/null || fail "rpm: slurm.conf not %config"
  rq -c "$rctl" | grep -cx /etc/default/slurmctld >/dev/null || fail "rpm: /etc/default/slurmctld not %config"
  rq -l "$rctl" | grep -cx /usr/lib/systemd/system/slurmctld.service >/dev/null || fail "rpm: no slurmctld.service"
  rq -l "$rctl" | grep -cx /usr/lib/systemd/system/sackd.service >/dev/null || fail "rpm: no sackd.service"
  rq -l "$rctl" | grep -cx /usr/lib/systemd/system/slurmrestd.service >/dev/null || fail "rpm: no slurmrestd.service"
  rq -l "$rctl" | grep -cx /usr/sbin/slurmrestd >/dev/null || fail "rpm: no /usr/sbin/slurmrestd"
  rq -c "$rctl" | grep -cx /etc/default/slurmrestd >/dev/null || fail "rpm: /etc/default/slurmrestd not %config"
  rq --scripts "$rctl" | grep -c 'jwt_hs256.key' >/dev/null || fail "rpm controller does not make the auth/jwt key"
  rq -l "$rnode" | grep -cx /usr/lib/systemd/system/slurmd.service >/dev/null || fail "rpm: no slurmd.service"
  rq --conflicts "$rclient" | grep -cx slurm >/dev/null || fail "rpm client does not conflict with slurm"
  rq --conflicts "$rctl" | grep -cx slurm-slurmctld >/dev/null || fail "rpm controller does not conflict with slurm-slurmctld"
  rq --conflicts "$rnode" | grep -cx slurm-slurmd >/dev/null || fail "rpm node does not conflict with slurm-slurmd"
  rq --requires "$rctl" | grep -c '^flotilla-client = ' >/dev/null || fail "rpm controller does not require the client"
  rq --scripts "$rctl" | grep -c 'useradd' >/dev/null || fail "rpm controller does not create the slurm user"
  rq --scripts "$rctl" | grep -c 'slurm.key' >/dev/null || fail "rpm controller does not make the key"
  for p in "$rctl" "$rnode"; do
    rm -f "$tmp"/scriptlet.*
    rq --scripts "$p" | awk -v d="$tmp" '/^[a-z]+ scriptlet( \(using [^)]*\))?:$/ {f = d "/scriptlet." $1; next} f {print > f}'
    n=0
    for s in "$tmp"/scriptlet.*; do sh -n "$s" || fail "$(basename "$p"): ${s##*.} scriptlet: syntax error"; n=$((n + 1)); done
    [ "$n" = 4 ] || fail "$(basename "$p"): expected 4 scriptlets, found $n"
  done
  echo "ok rpm: names, files, %config, units, conflicts, requires, scriptlets (sh -n)"
fi
echo "packaging checks passed"
