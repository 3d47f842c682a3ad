#!/usr/bin/env bash
# The real client libraries (submitit, dask-jobqueue, parsl, snakemake, simple_slurm, slurmpy,
# hydra; ../shared/clients/HARNESS.md) against Flotilla's binaries on a local cluster.
#
#   compat-tests/clients.sh [BIN_DIR]
#
# BIN_DIR: where sbatch, squeue, sacct, scancel, sinfo, scontrol, srun, slurmctld, slurmd and
# flotilla are (default: $CARGO_TARGET_DIR/debug, else target/debug); nothing is built here.
# Creates the client venv with ../shared/clients/harness/setup-venv.sh unless $CLIENTS_VENV
# (default $HOME/.cache/flotilla-clients-venv) already holds one (needs PyPI), starts a
# `flotilla dev up` cluster in production mode (`--cgroup auto`, or $CLIENTS_CGROUP; dev up's
# cgroup.conf: ConstrainDevices=yes, ConstrainRAMSpace=no), puts BIN_DIR first on PATH, runs
# run_all.sh, and always stops the cluster (trap), so no daemon or job is left behind. Only SLURM_CONF is exported: jobs find
# the cluster through FLOTILLA_CONF, which the node daemon sets (snakemake strips SLURM_*).
# Exit status: 0 when every check passed, else non-zero. Logs of a failed run stay in the
# directory printed at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-${CARGO_TARGET_DIR:-$root/target}/debug}" && pwd)
shared=${FLOTILLA_SHARED_DIR:-$root/../shared}
harness=$shared/clients/harness
venv=${CLIENTS_VENV:-$HOME/.cache/flotilla-clients-venv}
t0=$(date +%s)

for b in slurmctld slurmd flotilla; do
  [ -x "$bin/$b" ] || { echo "clients.sh: $bin/$b is missing (build first)" >&2; exit 2; }
done
if [ ! -f "$venv/bin/activate" ]; then
  bash "$harness/setup-venv.sh" "$venv"
fi
echo "clients.sh: venv ready after $(( $(date +%s) - t0 )) s"

work=$(mktemp -d /tmp/flotilla-clients.XXXXXX)
cleanup() {
  "$bin/flotilla" dev down --dir "$work/cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT
# Production mode: cgroups on (`--cgroup auto`; unconfined, with a warning, when not root).
"$bin/flotilla" dev up --dir "$work/cluster" --cgroup "${CLIENTS_CGROUP:-auto}" > "$work/up.out"
cat "$work/up.out"
eval "$(grep '^export SLURM_CONF=' "$work/up.out")"
export PATH="$bin:$PATH"
for c in sbatch squeue sacct scancel sinfo scontrol srun; do
  w=$(command -v "$c" || true)
  [ "$w" = "$bin/$c" ] || echo "clients.sh: WARNING: $c is ${w:-not on PATH}, not Flotilla's" >&2
done

# run_all.sh in a session of its own, killed whole after $CLIENTS_TIMEOUT s (default 2400):
# a client that ignores SIGTERM (snakemake waiting for a status it cannot get) would
# otherwise outlive run_all's per-check timeouts and hang CI.
rc=0
CLIENTS_VENV=$venv setsid bash "$harness/run_all.sh" "$work/run" &
run_pid=$!
( sleep "${CLIENTS_TIMEOUT:-2400}"
  echo "clients.sh: harness ran past ${CLIENTS_TIMEOUT:-2400} s: killing its session" >&2
  pkill -TERM -s "$run_pid"; sleep 10; pkill -KILL -s "$run_pid" ) &
watchdog=$!
wait "$run_pid" || rc=$?
kill "$watchdog" 2>/dev/null || true
pkill -KILL -s "$run_pid" 2>/dev/null || true
echo "clients.sh: harness took $(( $(date +%s) - t0 )) s in all; exit $rc"
cleanup
trap - EXIT
if [ "$rc" -eq 0 ]; then
  rm -rf "$work"
else
  echo "clients.sh: logs in $work/run, daemon logs in $work/cluster"
fi
exit "$rc"
