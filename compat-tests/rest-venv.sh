#!/bin/bash
# rest-venv.sh [DIR] - the Python virtual environments of the REST tests: the real clients from
# PyPI, pinned. Two, because their pins conflict (urllib3 < 2.1 for the v0.0.38 client, >= 2.1
# for slurmrestapi):
#   DIR      slurmrestapi (v0.0.41-v0.0.44), slurm-requests, schemathesis
#   DIR-38   openapi-slurm-0-0-38-client (v0.0.38)
# Default DIR: target/rest-venv (what the tests look for; or FLOTILLA_REST_VENV). Idempotent:
# a venv already holding these versions is left alone.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-${FLOTILLA_REST_VENV:-$here/target/rest-venv}}
make_venv() {
  local d=$1; shift
  local stamp="$d/.pins"
  if [ -x "$d/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$*" ]; then
    return 0
  fi
  python3 -m venv "$d"
  "$d/bin/pip" install --quiet --disable-pip-version-check "$@"
  echo "$*" > "$stamp"
  echo "rest-venv: $d"
}
make_venv "$dir" slurmrestapi==25.11.4.0 slurm-requests==2.3.1 schemathesis==4.32.5
make_venv "$dir-38" openapi-slurm-0-0-38-client==1.0.0
