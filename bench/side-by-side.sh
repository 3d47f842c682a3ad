#!/bin/bash
# side-by-side.sh - Flotilla's commands and controller against real Slurm on the same machine,
# in the same run (issue #6 "Speed"). Prints figures and ratios; asserts nothing.
#
#  1. Sequential submission: one shell loop of N `sbatch --hold --wrap true` (jobs/s), on each
#     system in turn, REPS times, the order alternating (Slurm first, then ours first, ...).
#  2. Fill both queues to Q held (pending) jobs (4 parallel submission loops each).
#  3. squeue latency with Q jobs queued: RUNS runs of each form, one call on Slurm then one on
#     ours (alternating who goes first); median and ratio.
# Besides wall time, CPU time is counted (less sensitive to other load on the machine): the
# clients' (bash `times`, children of the timing shell) and the daemons' that serve the call
# (/proc/PID/stat utime+stime: Slurm's slurmctld, slurmdbd, munged, mariadbd; our slurmctld).
# Every client call runs as one user (alice when run as root, as the reference cluster's
# bench.sh does; else the caller) inside ONE `bash` per phase, each call timed there with
# $EPOCHREALTIME, so that runuser/bash start-up is in neither side's figure.
#
# Real Slurm is the reference cluster (../shared/slurm-reference/setup.sh --fresh; clients in
# /usr/bin, configuration /etc/slurm). When it does not answer, only ours is measured.
# Ours: `flotilla dev up` with the reference cluster's configuration (same nodes, partitions,
# defaults) in a fresh state directory, stopped at the end. Our binaries are always called by
# absolute path from the release build: $FLOTILLA_BIN (default ${CARGO_TARGET_DIR:-target}/release).
#
# Usage: bench/side-by-side.sh [-n N] [-r REPS] [-q Q] [-s RUNS] [-o FILE] [--sync full|normal]
#   -n N       jobs per sequential loop (default 500)
#   -r REPS    sequential loops per system (default 3)
#   -q Q       pending jobs queued for the squeue timing (default 10000)
#   -s RUNS    squeue runs per form and system (default 10)
#   -o FILE    also append the output to FILE
#   --sync M   our controller's SQLite synchronous mode (default: what `flotilla dev up` uses,
#              normal; `full` fsyncs every group commit)
# Both queues must be empty at the start (Slurm's is checked); the jobs submitted are
# cancelled at the end.
set -uo pipefail

N=500 REPS=3 Q=10000 RUNS=10 OUTFILE="" SYNC=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) N=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    -q) Q=$2; shift 2 ;;
    -s) RUNS=$2; shift 2 ;;
    -o) OUTFILE=$2; shift 2 ;;
    --sync) SYNC=$2; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "side-by-side.sh: unknown option $1" >&2; exit 2 ;;
  esac
done

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BIN=${FLOTILLA_BIN:-${CARGO_TARGET_DIR:-$REPO/target}/release}
REF=${SLURM_REFERENCE:-$REPO/../shared/slurm-reference}
for b in flotilla slurmctld slurmd sbatch squeue scancel; do
  [ -x "$BIN/$b" ] || { echo "side-by-side.sh: $BIN/$b missing: cargo build --release -p flotilla-commands -p flotilla-admin -p flotilla-slurmctld -p flotilla-slurmd" >&2; exit 1; }
done
[ -f "$REF/conf/slurm.conf" ] || { echo "side-by-side.sh: $REF/conf/slurm.conf missing (set SLURM_REFERENCE)" >&2; exit 1; }

# The user every client call runs as, and its working directory.
if [ "$(id -u)" = 0 ] && getent passwd alice > /dev/null; then
  RUNAS=alice
else
  RUNAS=$(id -un)
fi
WORK=$(mktemp -d /tmp/flotilla-side-by-side.XXXXXX)
chmod 755 "$WORK"
mkdir -p "$WORK/wd"
[ "$RUNAS" != "$(id -un)" ] && chown "$RUNAS" "$WORK/wd"
DEV="$WORK/dev"
UHOME=$(getent passwd "$RUNAS" | cut -d: -f6)

# as_user SCRIPT: runs SCRIPT in bash as $RUNAS, in $WORK/wd, with a clean environment.
# $OURS (our slurm.conf) and $BIN are passed in; Slurm's clients see no SLURM_CONF.
as_user() {
  local envs=(PATH=/usr/bin:/bin HOME="$UHOME" USER="$RUNAS" LOGNAME="$RUNAS" LANG=C.UTF-8 TZ=UTC
              OURS="$DEV/slurm.conf" BIN="$BIN")
  if [ "$RUNAS" != "$(id -un)" ]; then
    runuser -u "$RUNAS" -- env -i "${envs[@]}" bash -c "cd '$WORK/wd' && $1"
  else
    env -i "${envs[@]}" bash -c "cd '$WORK/wd' && $1"
  fi
}

log() { echo "$*" | tee -a "$WORK/out.txt"; }
py() { python3 - "$@"; }

cleanup() {
  if [ "$SLURM_UP" = 1 ]; then
    as_user "/usr/bin/scancel -u $RUNAS" 2>/dev/null
  fi
  if [ -f "$DEV/daemons" ]; then
    as_user "SLURM_CONF=\$OURS \$BIN/scancel -u $RUNAS" 2>/dev/null
    "$BIN/flotilla" dev down --dir "$DEV" --grace 5 > /dev/null 2>&1
  fi
  if [ -n "$NEW_CTLD" ]; then
    kill "$NEW_CTLD" 2>/dev/null; for _ in $(seq 1 100); do kill -0 "$NEW_CTLD" 2>/dev/null || break; sleep 0.05; done
  fi
  [ -n "$OUTFILE" ] && cat "$WORK/out.txt" >> "$OUTFILE"
  rm -rf "$WORK"
}
SLURM_UP=0 NEW_CTLD=""
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- real Slurm: is it there, and is its queue empty?
if [ -x /usr/bin/sbatch ] && as_user "unset SLURM_CONF; /usr/bin/squeue -h -o %A" > "$WORK/slurmq" 2> /dev/null; then
  if [ -s "$WORK/slurmq" ]; then
    echo "side-by-side.sh: real Slurm's queue is not empty ($(wc -l < "$WORK/slurmq") jobs); cancel them first" >&2
    exit 1
  fi
  SLURM_UP=1
  # Finished jobs stay in slurmctld's memory for MinJobAge (300 s here) and every squeue
  # fetches them: wait until the last run's are purged, or Slurm's squeue would be measured
  # over more jobs than ours.
  for i in $(seq 1 80); do
    left=$(as_user "unset SLURM_CONF; /usr/bin/squeue -h -t all -o %A" | wc -l)
    [ "$left" = 0 ] && break
    [ "$i" = 1 ] && echo "side-by-side.sh: waiting for Slurm to purge $left finished jobs (MinJobAge)" >&2
    sleep 5
  done
  [ "$left" = 0 ] || echo "side-by-side.sh: WARNING: Slurm still holds $left finished jobs" | tee -a "$WORK/out.txt"
fi

# --- ours: a fresh local cluster with the reference configuration.
UP=("$BIN/flotilla" dev up --dir "$DEV" --config "$REF/conf" --cgroup none)
if ! "${UP[@]}" > "$WORK/up.log" 2>&1; then
  echo "side-by-side.sh: flotilla dev up failed:" >&2; cat "$WORK/up.log" >&2; exit 1
fi
if [ -n "$SYNC" ]; then
  # Restart the controller alone with another synchronous mode (same state, same port).
  CTLD_PID=$(awk '$1=="slurmctld"{print $3}' "$DEV/daemons")
  ARGS=$(tr '\0' ' ' < "/proc/$CTLD_PID/cmdline")
  # SIGKILL: daemons started by `flotilla dev up` inherit its blocked SIGTERM, and the
  # controller's state survives kill -9 at any instant (invariant 7).
  kill -9 "$CTLD_PID"; for _ in $(seq 1 100); do kill -0 "$CTLD_PID" 2>/dev/null || break; sleep 0.05; done
  rm -f "$DEV/ctld.addr"
  # shellcheck disable=SC2086
  setsid ${ARGS/--sync normal/--sync $SYNC} >> "$DEV/slurmctld.log" 2>&1 < /dev/null &
  NEW_CTLD=$!   # not in $DEV/daemons: cleanup stops it
  for _ in $(seq 1 200); do [ -s "$DEV/ctld.addr" ] && break; sleep 0.05; done
  sleep 1   # nodes re-register
fi

host_load() { awk '{print $1" "$2" "$3}' /proc/loadavg; }
TCK=$(getconf CLK_TCK)
# daemon_pids SIDE: the daemons that serve a client call.
daemon_pids() {
  if [ "$1" = slurm ]; then
    for f in /run/slurmctld.pid /run/slurmdbd.pid /run/munge/munged.pid /run/mysqld/mysqld.pid; do
      [ -r "$f" ] && cat "$f"
    done
  else
    if [ -n "$NEW_CTLD" ]; then echo "$NEW_CTLD"; else awk '$1=="slurmctld"{print $3}' "$DEV/daemons"; fi
  fi
}
# dcpu SIDE: CPU seconds used so far by those daemons.
dcpu() {
  local t=0 p
  for p in $(daemon_pids "$1"); do
    [ -r "/proc/$p/stat" ] && t=$(( t + $(awk '{print $14+$15}' "/proc/$p/stat") ))
  done
  echo "$t $TCK" | awk '{printf "%.3f", $1/$2}'
}
# CCPU: shell code printing the CPU seconds (user+sys) of the timing shell's children so far
# (`times` must run in that shell itself, not in a subshell, whose counts start at zero).
CCPU='times > .cputimes; awk '"'"'NR==2{split($1,a,"m"); split($2,b,"m"); printf "%.3f\n", a[1]*60+a[2]+b[1]*60+b[2]}'"'"' .cputimes' 
log "# side-by-side  $(date -u +%FT%TZ)  host: $(nproc) cores, $(free -g | awk '/^Mem:/{print $2}') GiB RAM, load $(host_load)"
log "# ours: $BIN (flotilla dev up --config $REF/conf; sync ${SYNC:-normal})   user: $RUNAS"
if [ "$SLURM_UP" = 1 ]; then
  log "# slurm: $(as_user '/usr/bin/sbatch --version')   accounting: $(as_user "/usr/bin/scontrol show config" | awk -F'= ' '/^AccountingStorageType/{print $2}')"
else
  log "# slurm: not running (../shared/slurm-reference/setup.sh --fresh starts it): ours only"
fi

# The client command lines of each side (run inside as_user's shell).
S_ENV="unset SLURM_CONF;"
O_ENV="export SLURM_CONF=\$OURS;"
sides() { if [ "$SLURM_UP" = 1 ]; then echo "$@"; else echo ours; fi; }
cmd_of() {  # cmd_of SIDE NAME -> command prefix
  if [ "$1" = slurm ]; then echo "/usr/bin/$2"; else echo "\$BIN/$2"; fi
}

# --- 1. sequential submission
log ""
log "## 1. sequential 'sbatch --hold --wrap true', $N per loop, $REPS loops per system (interleaved)"
: > "$WORK/seq.tsv"
for r in $(seq 1 "$REPS"); do
  if [ $((r % 2)) = 1 ]; then order=$(sides slurm ours); else order=$(sides ours slurm); fi
  for side in $order; do
    if [ "$side" = slurm ]; then envp=$S_ENV; else envp=$O_ENV; fi
    sb=$(cmd_of "$side" sbatch)
    d0=$(dcpu "$side")
    res=$(as_user "$envp t0=\$EPOCHREALTIME; f=0; for i in \$(seq 1 $N); do $sb --hold --wrap true > /dev/null || f=\$((f+1)); done; t1=\$EPOCHREALTIME; echo -n \$t0 \$t1 \$f ''; $CCPU")
    d1=$(dcpu "$side")
    read -r t0 t1 fails ccpu <<< "$res"
    rate=$(py "$N" "$t0" "$t1" <<< 'import sys; n,a,b=map(float,sys.argv[1:]); print("%.1f" % (n/(b-a)))')
    cpu=$(py "$N" "$ccpu" "$d0" "$d1" <<< 'import sys; n,c,a,b=map(float,sys.argv[1:]); print("%.2f %.2f" % (c/n*1000, (b-a)/n*1000))')
    read -r cms dms <<< "$cpu"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$side" "$r" "$rate" "$fails" "$cms" "$dms" >> "$WORK/seq.tsv"
    log "  loop $r $side: $rate jobs/s; CPU per job: clients $cms ms + daemons $dms ms (failures: $fails; load $(host_load))"
  done
done
py "$WORK/seq.tsv" <<'EOF' | tee -a "$WORK/out.txt"
import sys, statistics as st
rows = [l.split('\t') for l in open(sys.argv[1]).read().splitlines()]
by, cpu = {}, {}
for side, r, rate, f, c, d in rows:
    by.setdefault(side, {})[r] = float(rate)
    cpu.setdefault(side, []).append(float(c) + float(d))
med = {s: st.median(v.values()) for s, v in by.items()}
mcpu = {s: st.median(v) for s, v in cpu.items()}
for s in ("slurm", "ours"):
    if s in med:
        print(f"  median {s}: {med[s]:.1f} jobs/s; {mcpu[s]:.2f} ms CPU per job (clients + daemons)")
if "slurm" in by:
    ratios = [by["ours"][r] / by["slurm"][r] for r in by["slurm"] if r in by["ours"]]
    print(f"  RATIO sequential submit ours/slurm: {med['ours']/med['slurm']:.2f}x (per loop: "
          + ", ".join(f"{x:.2f}" for x in ratios) + ")  target >= 5x")
    print(f"  RATIO CPU per submitted job slurm/ours: {mcpu['slurm']/mcpu['ours']:.2f}x")
EOF

# --- 2. fill to Q pending jobs (4 parallel loops per system)
log ""
log "## 2. fill to $Q pending jobs (4 parallel loops of 'sbatch --hold --wrap true')"
for side in $(sides slurm ours); do
  if [ "$side" = slurm ]; then envp=$S_ENV; else envp=$O_ENV; fi
  have=$(as_user "$envp $(cmd_of "$side" squeue) -h -t PD -o %i | wc -l")
  need=$((Q - have)); [ "$need" -lt 0 ] && need=0
  per=$(( (need + 3) / 4 ))
  sb=$(cmd_of "$side" sbatch)
  res=$(as_user "$envp t0=\$EPOCHREALTIME
    for p in 1 2 3 4; do n=\$(( $need - (p-1)*$per )); [ \$n -gt $per ] && n=$per; [ \$n -le 0 ] && continue
      ( for i in \$(seq 1 \$n); do $sb --hold --wrap true > /dev/null || echo FAIL; done ) & done; wait
    echo \$t0 \$EPOCHREALTIME")
  read -r t0 t1 <<< "$(tail -1 <<< "$res")"
  fails=$(grep -c FAIL <<< "$res")
  have=$(as_user "$envp $(cmd_of "$side" squeue) -h -t PD -o %i | wc -l")
  rate=$(py "$need" "$t0" "$t1" <<< 'import sys; n,a,b=map(float,sys.argv[1:]); print("%.1f" % (n/(b-a)))')
  log "  $side: $need jobs at $rate jobs/s (4 loops; failures: $fails); pending now: $have"
done

# --- 3. squeue latency with Q jobs queued
log ""
log "## 3. squeue with the queues full: median of $RUNS runs per form, interleaved (ms)"
FORMS=("squeue" "squeue -h -o %i" "squeue -u $RUNAS" "squeue -t PD -h")
: > "$WORK/sq.tsv"
for form in "${FORMS[@]}"; do
  for side in $(sides slurm ours); do
    if [ "$side" = slurm ]; then envp=$S_ENV; else envp=$O_ENV; fi
    lines=$(as_user "$envp $(cmd_of "$side" "$form") | wc -l")
    log "  '$form' $side: $lines lines"
  done
  for r in $(seq 1 "$RUNS"); do
    if [ $((r % 2)) = 1 ]; then order=$(sides slurm ours); else order=$(sides ours slurm); fi
    for side in $order; do
      if [ "$side" = slurm ]; then envp=$S_ENV; else envp=$O_ENV; fi
      d0=$(dcpu "$side")
      res=$(as_user "$envp t0=\$EPOCHREALTIME; $(cmd_of "$side" "$form") > /dev/null; t1=\$EPOCHREALTIME; echo -n \$t0 \$t1 ''; $CCPU")
      d1=$(dcpu "$side")
      read -r t0 t1 ccpu <<< "$res"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$form" "$side" "$r" "$t0" "$t1" "$ccpu" "$(py "$d0" "$d1" <<< 'import sys; a,b=map(float,sys.argv[1:]); print("%.3f" % (b-a))')" >> "$WORK/sq.tsv"
    done
  done
done
py "$WORK/sq.tsv" <<'EOF' | tee -a "$WORK/out.txt"
import sys, statistics as st
by, cpu = {}, {}
for l in open(sys.argv[1]).read().splitlines():
    form, side, r, a, b, c, d = l.split('\t')
    by.setdefault(form, {}).setdefault(side, []).append((float(b) - float(a)) * 1000)
    cpu.setdefault(form, {}).setdefault(side, []).append((float(c) + float(d)) * 1000)
for form, d in by.items():
    # CPU: the mean (daemon CPU is read in clock ticks, so single calls are coarse).
    cm = {s: sum(v) / len(v) for s, v in cpu[form].items()}
    o = st.median(d["ours"])
    line = f"  '{form}': ours {o:.1f} ms (min {min(d['ours']):.1f}, CPU {cm['ours']:.1f})"
    if "slurm" in d:
        s = st.median(d["slurm"])
        line += f"; slurm {s:.1f} ms (min {min(d['slurm']):.1f}, CPU {cm['slurm']:.1f}); RATIO slurm/ours {s/o:.2f}x"
        if form == "squeue":
            line += " (target >= 5x)"
        line += f", CPU {cm['slurm']/cm['ours']:.2f}x"
    print(line)
EOF
log ""
log "# end $(date -u +%FT%TZ), load $(host_load)"
