#!/bin/bash
# rest-reference.sh [N] - GET /slurm/v0.0.38/jobs on real slurmrestd 22.05 with N held jobs,
# beside Flotilla's GET /slurm/v0.0.42/jobs with as many, in one run (compat-tests/benches/rest.rs).
#
# Needs root and the reference cluster up with an empty queue (../shared/slurm-reference/
# setup.sh). Installs Debian's slurmrestd if missing, runs it as alice on a Unix socket
# (rest_auth/local: only alice may call it), submits N held jobs as alice through it (8
# parallel curl loops), times `GET /slurm/v0.0.38/jobs` 5 times with curl as alice (median),
# then runs the Flotilla benchmark with that figure in SLURM_REFERENCE_JOBS_MS, which times
# ours the same way (a fresh connection, the whole answer read) and prints the ratio.
# Cancels the jobs at the end. Usage: sudo bench/rest-reference.sh [N]   (default 10000)
set -euo pipefail
n=${1:-10000}
here=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
command -v slurmrestd >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurmrestd >/dev/null
unset SLURM_CONF
[ -z "$(squeue -h -o %A)" ] || { echo "the reference queue must be empty" >&2; exit 1; }
sock=/tmp/slurmrestd-bench.sock
rm -f "$sock"
runuser -u alice -- env SLURM_CONF=/etc/slurm/slurm.conf slurmrestd -a rest_auth/local "unix:$sock" > /tmp/slurmrestd-bench.log 2>&1 &
restd=$!
trap 'scancel -u alice 2>/dev/null || true; kill $restd 2>/dev/null || true; rm -f "$sock"' EXIT
for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
body='{"script":"#!/bin/bash\ntrue\n","job":{"name":"b","hold":true,"current_working_directory":"/home/alice","environment":{"PATH":"/bin"}}}'
t0=$(date +%s.%N)
loops=()
for w in $(seq 1 8); do
  (for _ in $(seq 1 $((n / 8))); do
     runuser -u alice -- curl -s -o /dev/null --unix-socket "$sock" -H 'Content-Type: application/json' \
       --data-binary "$body" http://localhost/slurm/v0.0.38/job/submit
   done) &
  loops+=($!)
done
wait "${loops[@]}"   # not slurmrestd, which runs in the background too
t1=$(date +%s.%N)
have=$(squeue -h -u alice -o %A | wc -l)
echo "reference: $have held jobs submitted through slurmrestd 22.05 in $(python3 -c "print('%.1f' % ($t1 - $t0))") s"
times=()
for _ in 1 2 3 4 5; do
  times+=("$(runuser -u alice -- curl -s -o /tmp/rest-bench-jobs.json -w '%{time_total}' --unix-socket "$sock" http://localhost/slurm/v0.0.38/jobs/)")
done
bytes=$(stat -c %s /tmp/rest-bench-jobs.json)
med=$(printf '%s\n' "${times[@]}" | sort -g | sed -n 3p)
ms=$(python3 -c "print('%.1f' % ($med * 1000))")
echo "reference: GET /slurm/v0.0.38/jobs with $have jobs: median $ms ms of (${times[*]}) s, $bytes bytes"
cd "$here"
FLOTILLA_TEST_ROOT=1 SLURM_REFERENCE_JOBS_MS=$ms cargo bench -q -p flotilla-compat-tests --bench rest --profile dev -- "$have" 1000 "$have"
