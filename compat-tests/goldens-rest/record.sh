#!/bin/bash
# record.sh [OUT] - record real slurmrestd 22.05's v0.0.38 answers (and the commands' --json)
# on the reference cluster, as goldens of the REST API.
#
# Needs the reference up and idle right after a fresh start (../shared/slurm-reference/setup.sh
# --fresh: job ids start at 1) and root. Installs Debian's slurmrestd (22.05.8) if missing,
# runs it as alice (slurmrestd refuses root and SlurmUser) with rest_auth/local on a Unix
# socket, submits a few jobs as alice, and writes one JSON file per request into OUT
# (default: compat-tests/goldens-rest/v0.0.38):
#   {"name", "method", "path", "user", "body" (request, or null), "status", "response" (JSON
#    or the raw text)}
# and one per command (`squeue --json` ...): {"name", "cmd", "user", "exit_code", "stdout"}.
# Times, job ids and the host name vary between recordings: normalise before comparing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/v0.0.38}
[ "$(id -u)" = 0 ] || { echo "record.sh: needs root" >&2; exit 1; }
command -v slurmrestd >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurmrestd >/dev/null
scontrol ping >/dev/null || { echo "record.sh: the reference controller does not answer" >&2; exit 1; }
mkdir -p "$out"
sock=/tmp/slurmrestd-golden.sock
rm -f "$sock"
pkill -u alice -x slurmrestd 2>/dev/null || true
runuser -u alice -- env SLURM_CONF=/etc/slurm/slurm.conf slurmrestd -a rest_auth/local "unix:$sock" \
  > /tmp/slurmrestd-golden.log 2>&1 &
restd=$!
trap 'kill $restd 2>/dev/null || true; rm -f "$sock"' EXIT
for _ in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || { echo "slurmrestd did not start:"; cat /tmp/slurmrestd-golden.log; exit 1; } >&2

as_alice() { runuser -u alice -- env -i PATH=/usr/bin:/bin HOME=/home/alice USER=alice TZ=UTC LANG=C.UTF-8 "$@"; }

# One request, as alice (the socket is hers): NAME METHOD PATH [BODY].
req() {
  local name=$1 method=$2 path=$3 body=${4:-}
  local args=(-s -o /tmp/rest-body -w '%{http_code}' --unix-socket "$sock" -X "$method")
  [ -n "$body" ] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
  local status
  status=$(as_alice curl "${args[@]}" "http://localhost$path")
  python3 - "$out/$name.json" "$name" "$method" "$path" "$body" "$status" <<'PY'
import json, sys
f, name, method, path, body, status = sys.argv[1:]
raw = open('/tmp/rest-body', 'rb').read().decode('utf-8', 'replace')
try:
    resp = json.loads(raw)
except ValueError:
    resp = raw
json.dump({"name": name, "method": method, "path": path, "user": "alice",
           "body": json.loads(body) if body else None, "status": int(status),
           "response": resp}, open(f, 'w'), indent=1, sort_keys=True)
open(f, 'a').write('\n')
PY
  echo "$status $method $path"
}

# One command as alice: NAME CMD...
cmd() {
  local name=$1; shift
  local rc=0 stdout
  stdout=$(cd /home/alice && as_alice "$@" 2>/tmp/rest-cmd-err) || rc=$?
  python3 - "$out/$name.json" "$name" "$rc" "$*" "$stdout" <<'PY'
import json, sys
f, name, rc, cmd, stdout = sys.argv[1:]
try:
    parsed = json.loads(stdout)
except ValueError:
    parsed = stdout
json.dump({"name": name, "cmd": cmd, "user": "alice", "exit_code": int(rc),
           "stderr": open('/tmp/rest-cmd-err').read(), "stdout": parsed},
          open(f, 'w'), indent=1, sort_keys=True)
open(f, 'a').write('\n')
PY
  echo "$rc $*"
}

v=/slurm/v0.0.38
db=/slurmdb/v0.0.38
req ping GET $v/ping/
# (/openapi/v3 is not recorded: it is Slurm's own openapi.json, GPL text.)
req diag GET $v/diag/
req licenses GET $v/licenses/
req reservations GET $v/reservations/
req nodes GET $v/nodes/
req node_gpu01 GET $v/node/gpu01
req node_missing GET $v/node/nosuch
req partitions GET $v/partitions/
req partition_batch GET $v/partition/batch
req partition_missing GET $v/partition/nosuch
req jobs_empty GET $v/jobs/
# Submissions: a held job, a running one, a pending one behind a dependency, an invalid one.
req submit_held POST $v/job/submit \
  '{"script":"#!/bin/bash\nsleep 300\n","job":{"name":"held","hold":true,"current_working_directory":"/home/alice","environment":{"PATH":"/bin:/usr/bin"},"nodes":1,"tasks":1}}'
req submit_running POST $v/job/submit \
  '{"script":"#!/bin/bash\nsleep 300\n","job":{"name":"runner","partition":"batch","current_working_directory":"/home/alice","environment":{"PATH":"/bin:/usr/bin"},"tasks":2,"gpus":"2","time_limit":30}}'
req submit_dependent POST $v/job/submit \
  '{"script":"#!/bin/bash\ntrue\n","job":{"name":"after","dependency":"afterok:2","current_working_directory":"/home/alice","environment":{"PATH":"/bin:/usr/bin"}}}'
req submit_no_script POST $v/job/submit '{"job":{"name":"noscript","current_working_directory":"/home/alice","environment":{"PATH":"/bin"}}}'
req submit_bad_partition POST $v/job/submit \
  '{"script":"#!/bin/bash\ntrue\n","job":{"partition":"nosuch","current_working_directory":"/home/alice","environment":{"PATH":"/bin"}}}'
sleep 3
req jobs GET $v/jobs/
req job_2 GET $v/job/2
req job_missing GET $v/job/999999
req job_update POST $v/job/1 '{"comment":"updated","time_limit":20}'
req job_1_after_update GET $v/job/1
req job_signal DELETE "$v/job/3?signal=SIGKILL"
req job_cancel_missing DELETE $v/job/999999
req jobs_after_cancel GET $v/jobs/
req db_diag GET $db/diag/
req db_config GET $db/config
req db_tres GET $db/tres/
req db_qos GET $db/qos/
req db_qos_normal GET $db/qos/normal
req db_accounts GET $db/accounts/
req db_account_research GET $db/account/research
req db_associations GET $db/associations/
req db_users GET $db/users/
req db_user_alice GET $db/user/alice
req db_clusters GET $db/clusters/
req db_jobs GET $db/jobs/
req db_job_3 GET $db/job/3
req db_job_missing GET $db/job/999999
cmd squeue_json squeue --json
cmd sinfo_json sinfo --json
cmd sacct_json sacct --json -j 1,2,3
cmd scontrol_show_job_json scontrol --json show job 2
cmd scontrol_show_node_json scontrol --json show node gpu01
cmd scontrol_show_partition_json scontrol --json show partition batch
cmd sdiag_json sdiag --json
cmd sshare_json sshare --json
cmd squeue_yaml squeue --yaml
scancel -u alice || true
echo "recorded $(ls "$out" | wc -l) goldens in $out"
