#!/usr/bin/env bash
# End-to-end test of the .deb files in a clean Debian 12 root (run as root):
#
#   packaging/test-debootstrap.sh PKG_DIR
#
# 1. debootstrap a minimal bookworm root (or unpack FLOTILLA_CHROOT_TAR, a tarball of one);
# 2. `apt-get install ./flotilla-client_*.deb ./flotilla-controller_*.deb ./flotilla-node_*.deb`;
#    check the slurm user, directory owners and modes, the key, the conffiles;
# 3. in fresh mount, PID and network namespaces (loopback only, so no port of the host is
#    touched, and every process and mount dies with the namespaces), start slurmctld and
#    slurmd exactly as their units would (ExecStart, User/Group, EnvironmentFile,
#    LoadCredential; no systemd), submit a job as an ordinary user with sbatch and wait for
#    COMPLETED;
# 4. `apt-get remove`: only configuration and state may remain; `apt-get purge`: those go too
#    (the slurm user stays);
# 5. when PKG_DIR has .rpm files and `rpm` is installed: the same install, job and erase with
#    the .rpm files in a fresh copy of the root (rpm --root runs their scriptlets chrooted).
# Prints each phase's time. Cleans up whatever happens (trap): namespaces end with their
# processes and mounts, then the root is deleted.
set -euo pipefail

pkgdir=$(cd "${1:?usage: $0 PKG_DIR}" && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
here=$(cd "$(dirname "$0")" && pwd)

[ "$(id -u)" = 0 ] || { echo "SKIPPED: needs root (debootstrap, chroot, namespaces)"; exit 0; }
for t in debootstrap unshare ip; do
  command -v "$t" >/dev/null || { echo "missing $t (apt-get install debootstrap util-linux iproute2)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/flotilla-debtest.XXXXXX")
root=$work/root
cleanup() {
  local rc=$?
  # Nothing of ours outlives the namespaces; this only guards against a mount left by an
  # interrupted run of an older version of this script.
  for m in proc dev/pts; do mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"; done
  rm -rf --one-file-system "$work"
  exit $rc
}
trap cleanup EXIT INT TERM

t0=$(date +%s)
phase_start=$t0
phase() {
  local now; now=$(date +%s)
  echo "=== [deb-test] $1 (previous phase took $((now - phase_start)) s)"
  phase_start=$now
}

# Runs a command chrooted in $root, in its own mount and PID namespaces with /proc mounted;
# with --net, also in its own network namespace with only loopback up.
in_root() {
  local net=()
  if [ "$1" = --net ]; then net=(--net); shift; fi
  unshare --mount --pid --fork --kill-child "${net[@]}" -- /bin/sh -c '
    root=$1; shift
    [ -z "$NETNS" ] || ip link set lo up
    mount -t proc proc "$root/proc"
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive "$@"' sh "$root" "$@"
}

phase "debootstrap bookworm (minbase)"
if [ -n "${FLOTILLA_CHROOT_TAR:-}" ] && [ -f "$FLOTILLA_CHROOT_TAR" ]; then
  mkdir -p "$root" && tar -C "$root" -xf "$FLOTILLA_CHROOT_TAR"
else
  debootstrap --variant=minbase bookworm "$root" "$mirror" > "$work/debootstrap.log" 2>&1 \
    || { tail -30 "$work/debootstrap.log"; exit 1; }
  if [ -n "${FLOTILLA_CHROOT_TAR:-}" ]; then tar -C "$root" -cf "$FLOTILLA_CHROOT_TAR" .; fi
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
grep -qw localhost "$root/etc/hosts" 2>/dev/null || echo "127.0.0.1 localhost" >> "$root/etc/hosts"
# A pristine copy for the .rpm phase.
rpms=("$pkgdir"/flotilla-*.rpm)
if [ -e "${rpms[0]}" ] && command -v rpm > /dev/null; then tar -C "$root" -cf "$work/fresh.tar" .; fi
# Install only: no service may start inside the root (Debian's policy-rc.d convention).
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

# Every path of the root before the packages (to find what they leave behind).
snapshot() {
  (cd "$root" && find . -xdev \( -path ./proc -o -path ./tmp -o -path ./var/cache -o -path ./var/lib/apt \
     -o -path ./var/lib/dpkg -o -path ./var/log -o -path ./home -o -path ./root -o -path ./run \) -prune \
     -o -print | sed 's|^\.||' | sort)
}
snapshot > "$work/before.txt"

phase "apt-get install ./flotilla-*.deb"
mkdir -p "$root/tmp/pkgs"
cp "$pkgdir"/flotilla-client_*.deb "$pkgdir"/flotilla-controller_*.deb "$pkgdir"/flotilla-node_*.deb "$root/tmp/pkgs/"
# Every file the packages ship, to check removal against later.
for d in "$root"/tmp/pkgs/*.deb; do dpkg-deb --fsys-tarfile "$d" | tar -t; done \
  | sed 's|^\./|/|' | grep -v '/$' | sort -u > "$work/shipped.txt"
in_root apt-get update -qq
debs=()
for d in "$root"/tmp/pkgs/*.deb; do debs+=("/tmp/pkgs/$(basename "$d")"); done
in_root apt-get install -y -q "${debs[@]}" > "$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
grep -E '^(Setting up|Unpacking) flotilla' "$work/install.log"

phase "installed state: user, directories, key, conffiles"
fail() { echo "FAIL: $*" >&2; exit 1; }
check_stat() { # path owner:group mode
  local got; got=$(in_root stat -c '%U:%G %a' "$1") || fail "$1 missing"
  [ "$got" = "$2 $3" ] || fail "$1 is $got, expected $2 $3"
  echo "ok $1 $got"
}
in_root getent passwd slurm | grep -q '^slurm:x:[0-9]*:[0-9]*:.*:/nonexistent:' || fail "no slurm system user"
echo "ok user $(in_root getent passwd slurm)"
check_stat /var/spool/slurmctld slurm:slurm 755
check_stat /var/spool/slurmd root:root 755
check_stat /etc/slurm/slurm.key root:root 600
[ "$(stat -c %s "$root/etc/slurm/slurm.key")" = 64 ] || fail "key is not 64 bytes"
key_sum=$(sha256sum < "$root/etc/slurm/slurm.key")
in_root dpkg-query -W -f='${Conffiles}\n' flotilla-client flotilla-controller flotilla-node > "$work/conffiles.txt"
for c in /etc/slurm/slurm.conf /etc/default/slurmctld /etc/default/slurmd; do
  grep -q " $c " "$work/conffiles.txt" || fail "$c is not a conffile"
done
echo "ok conffiles: $(awk '{print $1}' "$work/conffiles.txt" | grep . | tr '\n' ' ')"
for b in sbatch squeue scancel sinfo scontrol flotilla; do
  [ -x "$root/usr/bin/$b" ] || fail "/usr/bin/$b missing"
  [ -f "$root/usr/share/man/man1/$b.1.gz" ] || fail "man page of $b missing"
done
echo "ok commands and man pages"

phase "run: slurmctld and slurmd as their units start them, a job with sbatch"
# The admin's edits: this host's slurmd runs the default slurm.conf's node `localhost`; the
# root has no cgroup file system mounted, so no confinement.
echo 'SLURMD_OPTIONS="-N localhost --cgroup none"' > "$root/etc/default/slurmd"
in_root useradd -m -u 2001 -s /bin/bash alice
mkdir -p "$root/flotilla-test"
cp "$here/test-inside-root.sh" "$root/flotilla-test/inside.sh"
NETNS=1 in_root --net /bin/bash /flotilla-test/inside.sh
first_job=$(cat "$root/flotilla-test/last-job")

phase "upgrade: a newer version over the running install keeps edited conffiles, key and state"
# The same packages as version <v>+upgradetest1, with a changed default slurm.conf, so dpkg
# meets a conffile both the admin and the package changed (it keeps the admin's: confold).
v=$(dpkg-deb -f "$pkgdir"/flotilla-client_*.deb Version)
nv="$v+upgradetest1"
echo "# edited by the admin" >> "$root/etc/slurm/slurm.conf"
conf_sum=$(sha256sum < "$root/etc/slurm/slurm.conf")
mkdir -p "$work/repack" "$root/tmp/pkgs-new"
for d in "$root"/tmp/pkgs/*.deb; do
  x=$work/repack/$(basename "$d" .deb)
  dpkg-deb -R "$d" "$x"
  sed -i "s/^Version: .*/Version: $nv/; s/(= $v)/(= $nv)/g" "$x/DEBIAN/control"
  [ ! -f "$x/etc/slurm/slurm.conf" ] || echo "# a new default" >> "$x/etc/slurm/slurm.conf"
  dpkg-deb -Zgzip -z1 --root-owner-group -b "$x" "$root/tmp/pkgs-new/$(basename "$d")" > /dev/null
done
new_debs=()
for d in "$root"/tmp/pkgs-new/*.deb; do new_debs+=("/tmp/pkgs-new/$(basename "$d")"); done
in_root apt-get install -y -q -o Dpkg::Options::=--force-confold "${new_debs[@]}" > "$work/upgrade.log" 2>&1 \
  || { cat "$work/upgrade.log"; exit 1; }
grep -E '^(Setting up|Unpacking) flotilla' "$work/upgrade.log"
in_root dpkg-query -W -f='${Package} ${Version}\n' flotilla-client flotilla-controller flotilla-node \
  | grep -c "$nv" | grep -qx 3 || fail "not all packages upgraded to $nv"
[ "$(sha256sum < "$root/etc/slurm/slurm.conf")" = "$conf_sum" ] || fail "upgrade replaced the edited slurm.conf"
[ -f "$root/etc/slurm/slurm.conf.dpkg-dist" ] || fail "the new default slurm.conf was not set beside it"
grep -q 'SLURMD_OPTIONS="-N localhost' "$root/etc/default/slurmd" || fail "upgrade replaced the edited /etc/default/slurmd"
[ "$(sha256sum < "$root/etc/slurm/slurm.key")" = "$key_sum" ] || fail "upgrade changed the key"
echo "ok upgraded to $nv: edited conffiles kept (new default as slurm.conf.dpkg-dist), key unchanged"
rm -f "$root/etc/slurm/slurm.conf.dpkg-dist"

phase "run again after the upgrade: the controller resumes from its state"
NETNS=1 in_root --net /bin/bash /flotilla-test/inside.sh
second_job=$(cat "$root/flotilla-test/last-job")
[ "$second_job" -gt "$first_job" ] || fail "job ids restarted ($first_job, then $second_job): state lost"
echo "ok job $second_job after job $first_job: state survived the upgrade"

phase "apt-get remove: only configuration and state remain"
in_root apt-get remove -y -q flotilla-client flotilla-controller flotilla-node > "$work/remove.log" 2>&1 \
  || { cat "$work/remove.log"; exit 1; }
left=()
while read -r f; do
  [ -e "$root$f" ] || continue
  case "$f" in
    /etc/*) ;;  # conffiles stay until purge
    *) left+=("$f") ;;
  esac
done < "$work/shipped.txt"
[ ${#left[@]} = 0 ] || fail "left after remove: ${left[*]}"
# Anything else new since before the install must be configuration or state, or belong to a
# package apt pulled in (adduser, ...), or be debhelper's record of unit states.
snapshot > "$work/after.txt"
unexpected=()
while read -r p; do
  case "$p" in
    /etc/slurm|/etc/slurm/*|/etc/default/slurmctld|/etc/default/slurmrestd|/etc/default/slurmd) continue ;;
    /var/spool/slurmctld|/var/spool/slurmctld/*|/var/spool/slurmd|/var/spool/slurmd/*) continue ;;
    /var/lib/systemd/deb-systemd-helper-*|/var/lib/systemd) continue ;;
    /usr/sbin/policy-rc.d|/flotilla-test|/flotilla-test/*) continue ;;  # this test's own
    # useradd's backups of the account files (the slurm user, and alice of this test).
    /etc/passwd-|/etc/group-|/etc/shadow-|/etc/gshadow-|/etc/subuid-|/etc/subgid-) continue ;;
    # debhelper masks the units of a removed (not purged) package: a link to /dev/null.
    /etc/systemd/system/slurmctld.service|/etc/systemd/system/slurmd.service|/etc/systemd/system/sackd.service|/etc/systemd/system/slurmrestd.service)
      [ "$(readlink "$root$p")" = /dev/null ] && continue ;;
  esac
  owner=$(in_root dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1 || true)
  case "$owner" in ""|flotilla-*) unexpected+=("$p") ;; esac
done < <(comm -13 "$work/before.txt" "$work/after.txt")
[ ${#unexpected[@]} = 0 ] || fail "left after remove, neither configuration nor state: ${unexpected[*]}"
for p in /etc/slurm/slurm.conf /etc/default/slurmctld /etc/default/slurmd /etc/slurm/slurm.key \
         /var/spool/slurmctld /var/spool/slurmd; do
  [ -e "$root$p" ] || fail "$p gone after remove (configuration and state must stay)"
done
[ "$(sha256sum < "$root/etc/slurm/slurm.key")" = "$key_sum" ] || fail "key changed"
grep -q 'SLURMD_OPTIONS="-N localhost' "$root/etc/default/slurmd" || fail "edited conffile lost"
ls "$root/var/spool/slurmctld" | grep -q . || fail "controller state is empty"
echo "ok removed; remaining: config $(ls "$root/etc/slurm" | tr '\n' ' '), state $(ls "$root/var/spool/slurmctld" | tr '\n' ' ')"

phase "apt-get purge: configuration and state go, the slurm user stays"
in_root apt-get purge -y -q flotilla-client flotilla-controller flotilla-node > "$work/purge.log" 2>&1 \
  || { cat "$work/purge.log"; exit 1; }
for p in /etc/slurm/slurm.conf /etc/default/slurmctld /etc/default/slurmrestd /etc/default/slurmd /etc/slurm/slurm.key \
         /var/spool/slurmctld /var/spool/slurmd; do
  [ ! -e "$root$p" ] || fail "$p left after purge"
done
in_root getent passwd slurm > /dev/null || fail "slurm user removed"
snapshot > "$work/purged.txt"
leftover=$(comm -13 "$work/before.txt" "$work/purged.txt" \
  | grep -E '^/(etc/slurm|etc/default/slurm|var/spool/slurm|etc/systemd/system/(slurm|sackd))' || true)
[ -z "$leftover" ] || fail "left after purge: $leftover"
echo "ok purged"

if [ -f "$work/fresh.tar" ]; then
  phase "rpm: the .rpm files into a fresh root (rpm --root: scriptlets run chrooted), a job, erase"
  rm -rf --one-file-system "$root" && mkdir "$root" && tar -C "$root" -xf "$work/fresh.tar"
  rpm --root "$root" --initdb
  # --nodeps: the Debian root's libraries and /bin/sh are not in an rpm database.
  rpm --root "$root" -i --nodeps --nosignature "${rpms[@]}" 2>&1 | grep -v 'use Alien\|know what you are doing' || true
  rpm --root "$root" -q flotilla-client flotilla-controller flotilla-node
  in_root getent passwd slurm | grep -q ':/nonexistent:' || fail "rpm: no slurm system user"
  check_stat /var/spool/slurmctld slurm:slurm 755
  check_stat /var/spool/slurmd root:root 755
  check_stat /etc/slurm/slurm.key root:root 600
  echo 'SLURMD_OPTIONS="-N localhost --cgroup none"' > "$root/etc/default/slurmd"
  in_root useradd -m -u 2001 -s /bin/bash alice
  mkdir -p "$root/flotilla-test"
  cp "$here/test-inside-root.sh" "$root/flotilla-test/inside.sh"
  NETNS=1 in_root --net /bin/bash /flotilla-test/inside.sh
  rpm --root "$root" -e flotilla-node flotilla-controller flotilla-client 2>&1 | grep -v 'use Alien\|know what you are doing' || true
  for f in /usr/bin/sbatch /usr/sbin/slurmctld /usr/sbin/slurmd /usr/lib/systemd/system/slurmctld.service; do
    [ ! -e "$root$f" ] || fail "rpm -e left $f"
  done
  for p in /etc/slurm/slurm.key /etc/default/slurmd.rpmsave /var/spool/slurmctld/flotilla.db; do
    [ -e "$root$p" ] || fail "rpm -e removed $p (the key, an edited config and state stay)"
  done
  echo "ok rpm: installed with scriptlets, job COMPLETED, erased; key, edited config (.rpmsave) and state stay"
fi

phase "done: the package end-to-end test passed in $(( $(date +%s) - t0 )) s"
