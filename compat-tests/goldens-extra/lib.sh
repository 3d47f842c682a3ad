# lib.sh - helpers the extra goldens' cases source (`. ./lib.sh`). The same file runs against
# real Slurm 22.05 when the cases are recorded (capture.py) and against Flotilla when they are
# replayed (compat-tests/tests/extra_goldens.rs), so a case's output never depends on job ids:
# each submission is named J1, J2, ... in the order the case made it.
J=()

# sb ARGS...: `sbatch --parsable ARGS`; on success prints `J<n>` (and any warning sbatch
# printed) and sets $J<n> to the id; on failure prints sbatch's output and `exit <status>`;
# returns sbatch's status.
sb() {
  local out rc id
  out=$(sbatch --parsable "$@" 2>&1); rc=$?
  if [ $rc -eq 0 ]; then
    id=${out##*$'\n'}; id=${id%%;*}
    J+=("$id"); printf -v "J${#J[@]}" %s "$id"
    [ "$out" != "${out##*$'\n'}" ] && printf '%s\n' "${out%$'\n'*}"
    echo "J${#J[@]}"
  else
    printf '%s\n' "$out"; echo "exit $rc"
  fi
  return $rc
}

# m: stdin to stdout with every number that is one of the case's job ids written as J<n>
# (zero-padded ones as J<n>%0<width>, e.g. an output file name made with %5j). Numbers inside
# a time or a decimal (next to `:` or `.` with a digit beyond) and sizes (`4G`) stay.
m() {
  awk -v ids="${J[*]}" '
    BEGIN { n = split(ids, a, " "); for (i = 1; i <= n; i++) name[a[i] + 0] = "J" i }
    {
      line = $0; out = ""; pos = 1
      while (match(substr(line, pos), /[0-9]+/)) {
        st = pos + RSTART - 1; len = RLENGTH; d = substr(line, st, len); v = d + 0
        b1 = substr(line, st - 1, 1); b2 = substr(line, st - 2, 1)
        a1 = substr(line, st + len, 1); a2 = substr(line, st + len + 1, 1)
        inside = ((b1 == ":" || b1 == ".") && b2 ~ /[0-9]/) || ((a1 == ":" || a1 == ".") && a2 ~ /[0-9]/) || a1 ~ /[KMGTP]/
        r = d
        if ((v in name) && v > 0 && !inside) r = (substr(d, 1, 1) == "0") ? name[v] "%0" len : name[v]
        out = out substr(line, pos, st - pos) r; pos = st + len
      }
      print out substr(line, pos)
    }'
}

# ms: stdin to stdout as m, and a job id before a step's `.` (`5012.0`, `5012.batch`), which m
# leaves as a decimal, written J<n> as well.
ms() {
  local s= i
  for i in "${!J[@]}"; do s+="s/(^|[^0-9])${J[$i]}\\.([0-9]|batch|extern)/\\1J$((i + 1)).\\2/g;"; done
  m | sed -E "$s"
}

# st ID: the job's state as squeue prints it (%T), all states included.
st() { squeue -h -t all -j "$1" -o %T 2>/dev/null | head -1; }

# wst ID STATE...: waits (60 s at most) until job ID is in one of STATEs; prints a line and
# returns 1 when it is not.
wst() {
  local id=$1 i s; shift
  for i in $(seq 600); do
    s=$(st "$id")
    for w in "$@"; do [ "$s" = "$w" ] && return 0; done
    sleep 0.1
  done
  echo "timeout: job $id is ${s:-unknown}, not $*" | m; return 1
}

# wend ID...: waits (120 s at most each) until every job ID has ended (no longer pending,
# running, completing, configuring or suspended; array tasks included).
wend() {
  local id i s
  for id in "$@"; do
    for i in $(seq 1200); do
      s=$(squeue -h -t all -j "$id" -o %T 2>/dev/null | grep -cE '^(PENDING|RUNNING|COMPLETING|CONFIGURING|SUSPENDED|REQUEUED|RESIZING|SIGNALING|STAGE_OUT)$')
      [ "$s" = 0 ] && [ -n "$(st "$id")" ] && continue 2
      sleep 0.1
    done
    echo "timeout: job $id has not ended" | m; return 1
  done
}

# fin: cancels the case's jobs and waits until they ended, so that the next case starts on an
# idle cluster.
fin() {
  [ ${#J[@]} -eq 0 ] && return 0
  scancel "${J[@]}" 2>/dev/null
  wend "${J[@]}" >/dev/null
}
