#!/bin/bash
# Runs inside the test root of test-debootstrap.sh (chroot, own PID and network namespaces):
# starts slurmctld and slurmd the way systemd would from the installed units, submits a job
# as alice with sbatch, and waits until it is COMPLETED. Prints the daemons' logs on failure.
set -euo pipefail
logs=/var/log/flotilla-test
mkdir -p "$logs"
pids=()

dump() {
  for f in "$logs"/*.log; do echo "--- $f"; tail -40 "$f"; done
}
trap 'rc=$?; [ $rc = 0 ] || dump; for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait || true; exit $rc' EXIT

unit_file() {
  for d in /lib/systemd/system /usr/lib/systemd/system; do
    [ -f "$d/$1.service" ] && { echo "$d/$1.service"; return; }
  done
  echo "no unit $1.service" >&2
  return 1
}

# start_unit NAME: the unit's ExecStart with its User=/Group=, EnvironmentFile= (a leading
# `-` = optional), LoadCredential= (copied into a private directory, %d), `$VAR` words split
# as systemd splits them. Records the pid.
start_unit() {
  local name=$1 unit user group exec creddir
  unit=$(unit_file "$name")
  user=$(sed -n 's/^User=//p' "$unit"); group=$(sed -n 's/^Group=//p' "$unit")
  exec=$(sed -n 's/^ExecStart=//p' "$unit")
  [ -n "$exec" ] || { echo "$unit: no ExecStart" >&2; return 1; }
  local env_file
  while read -r env_file; do
    case "$env_file" in
      -*) env_file=${env_file#-}; [ -f "$env_file" ] || continue ;;
    esac
    set -a; . "$env_file"; set +a
  done < <(sed -n 's/^EnvironmentFile=//p' "$unit")
  creddir=/run/credentials/$name.service
  local cred
  while read -r cred; do
    [ -n "$cred" ] || continue
    install -d -m 0700 -o "${user:-root}" -g "${group:-root}" "$creddir"
    install -m 0400 -o "${user:-root}" -g "${group:-root}" "${cred#*:}" "$creddir/${cred%%:*}"
  done < <(sed -n 's/^LoadCredential=//p' "$unit")
  local rdir
  rdir=$(sed -n 's/^RuntimeDirectory=//p' "$unit")
  if [ -n "$rdir" ]; then
    install -d -m "$(sed -n 's/^RuntimeDirectoryMode=//p' "$unit" | grep . || echo 0755)" \
      -o "${user:-root}" -g "${group:-root}" "/run/$rdir"
  fi
  exec=${exec//%d/$creddir}
  # $VAR (unbraced) is split into words by systemd; ${VAR} would not be.
  local words=() w
  for w in $exec; do
    if [[ $w =~ ^\$([A-Za-z_][A-Za-z0-9_]*)$ ]]; then
      local v=${!BASH_REMATCH[1]:-}
      # shellcheck disable=SC2206
      words+=($v)
    else
      words+=("$w")
    fi
  done
  echo "starting $name: ${user:+setpriv --reuid=$user --regid=${group:-$user} --init-groups} ${words[*]}"
  if [ -n "$user" ]; then
    setpriv --reuid="$user" --regid="${group:-$user}" --init-groups -- "${words[@]}" > "$logs/$name.log" 2>&1 &
  else
    "${words[@]}" > "$logs/$name.log" 2>&1 &
  fi
  pids+=($!)
}

start_unit slurmctld
for _ in $(seq 1 100); do
  [ -S /var/spool/slurmctld/slurmctld.sock ] && break
  sleep 0.1
done
[ -S /var/spool/slurmctld/slurmctld.sock ] || { echo "controller socket never appeared" >&2; exit 1; }
echo "controller runs as: $(stat -c %U /proc/"${pids[0]}")"
start_unit slurmd

as_alice() { setpriv --reuid=alice --regid=alice --init-groups -- env HOME=/home/alice "$@"; }

for _ in $(seq 1 100); do
  sinfo -h -o '%T' 2>/dev/null | grep -qx idle && break
  sleep 0.2
done
sinfo
sinfo -h -o '%T' 2>/dev/null | grep -qx idle || { echo "the node never became idle" >&2; exit 1; }
cd /home/alice
id=$(as_alice sbatch --parsable --wrap 'echo "hello from job $SLURM_JOB_ID as $(id -un) on $(hostname -s)"')
echo "submitted job $id"
state=""
for _ in $(seq 1 150); do
  state=$(squeue -h -t all -j "$id" -o '%T' 2>/dev/null || true)
  [ "$state" = COMPLETED ] && break
  sleep 0.2
done
squeue -t all
scontrol show job "$id" | grep -E 'JobState|UserId' || true
[ "$state" = COMPLETED ] || { echo "job $id is '$state', not COMPLETED" >&2; exit 1; }
grep -q "^hello from job $id as alice" "slurm-$id.out" || { echo "unexpected output:"; cat "slurm-$id.out"; exit 1; }
echo "job output: $(cat "slurm-$id.out")"
[ "$(stat -c %U "slurm-$id.out")" = alice ] || { echo "output file not owned by alice" >&2; exit 1; }
echo "ok job $id COMPLETED as alice"
# A login host: no controller socket (another StateSaveLocation), so the command asks sackd
# (started from its unit) for a credential and reaches the controller over TCP.
start_unit sackd
for _ in $(seq 1 50); do [ -S /run/slurm/sackd.sock ] && break; sleep 0.1; done
[ -S /run/slurm/sackd.sock ] || { echo "sackd socket never appeared" >&2; exit 1; }
sed 's|^StateSaveLocation=.*|StateSaveLocation=/nonexistent|' /etc/slurm/slurm.conf > /tmp/login.conf
via_sackd=$(as_alice env SLURM_CONF=/tmp/login.conf squeue -h -t all -j "$id" -o '%T %u')
[ "$via_sackd" = "COMPLETED alice" ] || { echo "squeue through sackd: '$via_sackd'" >&2; exit 1; }
echo "ok squeue through sackd and TCP: $via_sackd"
# The REST API from its unit (as the slurmrestd user, rest_auth/jwt on 127.0.0.1:6820): alice's
# token from `scontrol token` pings the controller through it; a request without one is 401.
start_unit slurmrestd
rest() { # rest TOKEN: GET /slurm/v0.0.42/ping, the whole answer (bash's /dev/tcp: no curl here)
  local token_header=""
  [ -z "$1" ] || token_header="X-SLURM-USER-TOKEN: $1"$'\r\n'
  exec 3<>/dev/tcp/127.0.0.1/6820 || return 1
  printf 'GET /slurm/v0.0.42/ping HTTP/1.1\r\nHost: localhost\r\nX-SLURM-USER-NAME: alice\r\n%sConnection: close\r\n\r\n' \
    "$token_header" >&3
  cat <&3
  exec 3<&-
}
for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/6820) 2>/dev/null && break; sleep 0.1; done
tok=$(as_alice scontrol token | sed -n 's/^SLURM_JWT=//p')
[ -n "$tok" ] || { echo "scontrol token gave no token" >&2; exit 1; }
answer=$(rest "$tok")
if [[ $answer == "HTTP/1.1 200"* ]] && grep -Eq '"pinged": *"UP"' <<<"$answer"; then
  echo "ok REST ping with alice's token through slurmrestd.service"
else
  echo "REST ping with a token: $answer" >&2; exit 1
fi
case "$(rest "")" in
  "HTTP/1.1 401"*) echo "ok REST without a token: 401" ;;
  *) echo "REST without a token was not refused" >&2; exit 1 ;;
esac
echo "$id" > /flotilla-test/last-job
