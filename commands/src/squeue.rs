//! `squeue`, as Slurm 22.05's `src/squeue`: the `-o` format engine (`%[.][width]X`, literal
//! text kept, invalid specs printed as text with an error), `-O` fields (`Name[:[.][width]]`,
//! default width 20, values cut to the width), filters (`-j -u --me -t -p -n -w -A -q`), array
//! folding (`64_[0-5%2]`, `-r` to unfold), steps (`-s`), `--start`, `-S` and Slurm's default
//! sort (`P,t,-p`: partition, state name, priority descending; then job id).
//!
//! All jobs are fetched in one request and filtered here; a single `-j ID` unknown to the
//! controller (not even finished) is Slurm's `slurm_load_jobs error: Invalid job id
//! specified`, exit 1.

use crate::common::{self, field, Ctl, Io};
use crate::getopt::{getopt_long, lo, HasArg, LongOpt};
use crate::jobfmt::{self, state};
use flotilla_proto::errno::ESLURM_INVALID_JOB_ID;
use flotilla_proto::{JobInfo, JobQuery, JobRef, JobStateWire, Request, Response};

const DEFAULT_FMT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
const LONG_FMT: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
const START_FMT: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";
const STEP_FMT: &str = "%.15i %.8j %.9P %.8u %.9M %N";

const O_ME: u32 = 1000;
const O_START: u32 = 1001;
const O_HELP: u32 = 1002;
const O_USAGE: u32 = 1003;
const O_IGNORED: u32 = 1004;
const O_IGNORED_ARG: u32 = 1005;

const fn c(ch: char) -> u32 {
    ch as u32
}

/// squeue's getopt string (Slurm 22.05 `opts.c`).
pub const SHORTS: &str = "A:ahi:j::lL:n:M:O:o:p:P::q:R:rs::S:t:u:U:vVw:";

/// squeue's long options; ids are the short letter or an `O_*`.
pub const LONGS: &[LongOpt] = &[
    lo("accounts", HasArg::Required, c('A')),
    lo("all", HasArg::No, c('a')),
    lo("array", HasArg::No, c('r')),
    lo("array-unique", HasArg::No, O_IGNORED),
    lo("Format", HasArg::Required, c('O')),
    lo("format", HasArg::Required, c('o')),
    lo("federation", HasArg::No, O_IGNORED),
    lo("help", HasArg::No, O_HELP),
    lo("hide", HasArg::No, O_IGNORED),
    lo("iterate", HasArg::Required, c('i')),
    lo("jobs", HasArg::Optional, c('j')),
    lo("local", HasArg::No, O_IGNORED),
    lo("long", HasArg::No, c('l')),
    lo("licenses", HasArg::Required, c('L')),
    lo("cluster", HasArg::Required, c('M')),
    lo("clusters", HasArg::Required, c('M')),
    lo("me", HasArg::No, O_ME),
    lo("name", HasArg::Required, c('n')),
    lo("noconvert", HasArg::No, O_IGNORED),
    lo("node", HasArg::Required, c('w')),
    lo("nodes", HasArg::Required, c('w')),
    lo("nodelist", HasArg::Required, c('w')),
    lo("noheader", HasArg::No, c('h')),
    lo("partitions", HasArg::Required, c('p')),
    lo("priority", HasArg::No, c('P')),
    lo("qos", HasArg::Required, c('q')),
    lo("reservation", HasArg::Required, c('R')),
    lo("sib", HasArg::No, O_IGNORED),
    lo("sibling", HasArg::No, O_IGNORED),
    lo("sort", HasArg::Required, c('S')),
    lo("start", HasArg::No, O_START),
    lo("steps", HasArg::Optional, c('s')),
    lo("states", HasArg::Required, c('t')),
    lo("usage", HasArg::No, O_USAGE),
    lo("user", HasArg::Required, c('u')),
    lo("users", HasArg::Required, c('u')),
    lo("verbose", HasArg::No, c('v')),
    lo("version", HasArg::No, c('V')),
    lo("json", HasArg::Optional, O_IGNORED_ARG),
    lo("yaml", HasArg::Optional, O_IGNORED_ARG),
];

#[derive(Debug, Default)]
struct Params {
    noheader: bool,
    long: bool,
    format: Option<String>,
    format2: Option<String>,
    sort: Option<String>,
    array_unfold: bool,
    steps: bool,
    start: bool,
    job_ids: Vec<JobRef>,
    job_id_count: usize,
    users: Vec<u32>,
    names: Vec<String>,
    states: Option<Vec<JobStateWire>>,
    all_states: bool,
    partitions: Vec<String>,
    accounts: Vec<String>,
    qos: Vec<String>,
    nodes: Vec<String>,
}

/// Runs `squeue`; returns its exit status.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let argv = args.get(1..).unwrap_or(&[]);
    let parsed = match getopt_long("squeue", argv, SHORTS, LONGS) {
        Ok(p) => p,
        Err(msg) => {
            io.err(&format!("{msg}\nTry \"squeue --help\" for more information\n"));
            return 1;
        }
    };
    let mut p = Params {
        format: (io.env)("SQUEUE_FORMAT").filter(|s| !s.is_empty()),
        format2: (io.env)("SQUEUE_FORMAT2").filter(|s| !s.is_empty()),
        sort: (io.env)("SQUEUE_SORT").filter(|s| !s.is_empty()),
        ..Params::default()
    };
    // `-j`/`-s` take an optional argument; without a glued one, squeue reads the list from
    // the first operand.
    let mut operands = parsed.operands.clone().into_iter();
    let opts: Vec<crate::getopt::Opt> = parsed
        .opts
        .iter()
        .map(|o| {
            let mut o = o.clone();
            if o.id == c('j') && o.arg.is_none() {
                o.arg = operands.next();
            }
            o
        })
        .collect();
    for o in &opts {
        let a = o.arg.as_deref().unwrap_or("");
        match o.id {
            x if x == c('h') => p.noheader = true,
            x if x == c('l') => p.long = true,
            x if x == c('o') => {
                p.format = Some(a.into());
                p.format2 = None;
            }
            x if x == c('O') => {
                p.format2 = Some(a.into());
                p.format = None;
            }
            x if x == c('S') => p.sort = Some(a.into()),
            x if x == c('r') => p.array_unfold = true,
            x if x == c('s') => p.steps = true,
            x if x == c('V') => {
                io.out(&format!("{}\n", crate::sbatch::VERSION_LINE));
                return 0;
            }
            O_HELP | O_USAGE => {
                io.out("Usage: squeue [OPTIONS]\n");
                return 0;
            }
            O_START => p.start = true,
            O_ME => p.users.push(common::my_uid()),
            x if x == c('j') => {
                for id in a.split(',').filter(|s| !s.is_empty()) {
                    match parse_job_ref(id) {
                        Some(r) => {
                            p.job_ids.push(r);
                            p.job_id_count += 1;
                        }
                        None => {
                            io.err(&format!("squeue: error: Invalid job id: {id}\n"));
                            return 1;
                        }
                    }
                }
            }
            x if x == c('u') => {
                for u in a.split(',').filter(|s| !s.is_empty()) {
                    match common::uid_of(u) {
                        Some(uid) => p.users.push(uid),
                        None => {
                            io.err(&format!("squeue: error: Invalid user: {u}\n\n"));
                            // Slurm keeps going and matches nobody.
                            p.users.push(u32::MAX);
                        }
                    }
                }
            }
            x if x == c('n') => p.names.extend(a.split(',').map(str::to_string)),
            x if x == c('p') => p.partitions.extend(a.split(',').map(str::to_string)),
            x if x == c('A') => p.accounts.extend(a.split(',').map(str::to_string)),
            x if x == c('q') => p.qos.extend(a.split(',').map(str::to_string)),
            x if x == c('w') => {
                for part in flotilla_core::hostlist::expand(a).unwrap_or_else(|_| vec![a.to_string()]) {
                    p.nodes.push(part);
                }
            }
            x if x == c('t') => {
                let mut v = Vec::new();
                for s in a.split(',') {
                    if s.eq_ignore_ascii_case("all") {
                        p.all_states = true;
                        continue;
                    }
                    match jobfmt::parse_state(s) {
                        Ok(Some(w)) => v.push(w),
                        Ok(None) => {}
                        Err(_) => {
                            let list: Vec<&str> = jobfmt::STATE_NAMES.iter().map(|(l, _)| *l).collect();
                            io.err(&format!(
                                "squeue: error: Invalid job state specified: {s}\nsqueue: error: Valid job states include: {}\n\n",
                                list.join(",")
                            ));
                            return 1;
                        }
                    }
                }
                p.states = Some(v);
            }
            _ => {}
        }
    }
    let ctl = match Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("slurm_load_jobs error: {}\n", e.slurm().text));
            return 1;
        }
    };
    let q = JobQuery {
        jobs: p.job_ids.clone(),
        include_finished: true,
        ..JobQuery::default()
    };
    let jobs = match ctl.call(Request::QueryJobs(q)) {
        Ok(Response::Jobs(j)) => j,
        Ok(_) => Vec::new(),
        Err(e) => {
            io.err(&format!("slurm_load_jobs error: {}\n", e.slurm().text));
            return 1;
        }
    };
    if p.job_id_count == 1 && jobs.is_empty() {
        io.err(&format!("slurm_load_jobs error: {}\n", flotilla_proto::errno::strerror(ESLURM_INVALID_JOB_ID)));
        return 1;
    }
    let now = common::now();
    let rows = select(&p, jobs);
    if p.steps {
        let steps = match ctl.call(Request::QuerySteps(JobQuery::default())) {
            Ok(Response::Steps(s)) => s,
            _ => Vec::new(),
        };
        print_steps(&p, &rows, &steps, io, now);
        return 0;
    }
    let rows = if p.start {
        rows.into_iter().filter(|j| state(j) == JobStateWire::Pending).collect()
    } else {
        rows
    };
    let mut rows = if p.array_unfold { unfold(rows) } else { rows };
    sort_jobs(&mut rows, p.sort.as_deref().unwrap_or(if p.start { "S" } else { "P,t,-p" }));
    let out = if let Some(f2) = &p.format2 {
        render_o2(f2, &rows, !p.noheader, now, io)
    } else {
        let f = p.format.clone().unwrap_or_else(|| {
            if p.start {
                START_FMT.into()
            } else if p.long {
                LONG_FMT.into()
            } else {
                DEFAULT_FMT.into()
            }
        });
        let mut s = String::new();
        if p.long {
            s.push_str(&format!("{}\n", common::fmt_ctime(now)));
        }
        s.push_str(&render_o(&f, &rows, !p.noheader, now, io));
        s
    };
    io.out(&out);
    0
}

/// `123`, `123_4`, `123_[3-4]`.
pub fn parse_job_ref(s: &str) -> Option<JobRef> {
    match s.split_once('_') {
        None => Some(JobRef::id(s.trim().parse().ok().filter(|&n| n > 0)?)),
        Some((id, tasks)) => {
            let job_id = id.parse().ok().filter(|&n: &u64| n > 0)?;
            let t = tasks.trim_start_matches('[').trim_end_matches(']');
            let list = jobfmt::expand_task_str(t);
            if list.is_empty() {
                return None;
            }
            Some(JobRef {
                job_id,
                tasks: Some(list),
            })
        }
    }
}

fn default_state(s: JobStateWire) -> bool {
    matches!(
        s,
        JobStateWire::Pending | JobStateWire::Running | JobStateWire::Completing | JobStateWire::Suspended
    )
}

fn select(p: &Params, jobs: Vec<JobInfo>) -> Vec<JobInfo> {
    jobs.into_iter()
        .filter(|j| {
            let s = state(j);
            let state_ok = if p.all_states {
                true
            } else {
                match &p.states {
                    Some(v) => v.contains(&s),
                    None => default_state(s),
                }
            };
            state_ok
                && (p.users.is_empty() || p.users.contains(&j.uid))
                && (p.names.is_empty() || p.names.contains(&j.name))
                && (p.partitions.is_empty() || p.partitions.contains(&j.partition))
                && (p.accounts.is_empty() || p.accounts.contains(&j.account))
                && (p.qos.is_empty() || p.qos.contains(&j.qos))
                && (p.nodes.is_empty() || {
                    let mine = flotilla_core::hostlist::expand(&j.nodes).unwrap_or_default();
                    mine.iter().any(|n| p.nodes.contains(n))
                })
        })
        .collect()
}

/// `-r`: one row per pending array task.
fn unfold(rows: Vec<JobInfo>) -> Vec<JobInfo> {
    let mut out = Vec::new();
    for j in rows {
        match (&j.array_task_str, j.array_task_id) {
            (Some(s), None) if j.array_job_id.is_some() => {
                for t in jobfmt::expand_task_str(s) {
                    let mut k = j.clone();
                    k.array_task_id = Some(t);
                    k.array_task_str = None;
                    out.push(k);
                }
            }
            _ => out.push(j),
        }
    }
    out
}

/// Sorts by Slurm's `-S` keys (`i,-p,t,...`; a leading `-` reverses); equal rows keep job-id
/// order.
pub fn sort_jobs(rows: &mut [JobInfo], spec: &str) {
    rows.sort_by_key(|j| (j.array_job_id.unwrap_or(j.job_id), j.array_task_id.unwrap_or(0), j.job_id));
    for key in spec.split(',').rev() {
        let (rev, k) = match key.strip_prefix('-') {
            Some(k) => (true, k),
            None => (false, key.strip_prefix('+').unwrap_or(key)),
        };
        let cmp = |a: &JobInfo, b: &JobInfo| -> std::cmp::Ordering {
            match k {
                "i" | "A" => (a.array_job_id.unwrap_or(a.job_id), a.array_task_id).cmp(&(b.array_job_id.unwrap_or(b.job_id), b.array_task_id)),
                "P" => a.partition.cmp(&b.partition),
                "t" | "T" => state(a).as_str().cmp(state(b).as_str()),
                "p" | "Q" => a.priority.cmp(&b.priority),
                "u" => a.user.cmp(&b.user),
                "U" => a.uid.cmp(&b.uid),
                "j" => a.name.cmp(&b.name),
                "S" => a.start_time.unwrap_or(i64::MAX).cmp(&b.start_time.unwrap_or(i64::MAX)),
                "V" => a.submit_time.cmp(&b.submit_time),
                "e" => a.end_time.unwrap_or(i64::MAX).cmp(&b.end_time.unwrap_or(i64::MAX)),
                "D" => a.num_nodes.cmp(&b.num_nodes),
                "C" => a.num_cpus.cmp(&b.num_cpus),
                "N" => a.nodes.cmp(&b.nodes),
                "a" => a.account.cmp(&b.account),
                "q" => a.qos.cmp(&b.qos),
                "r" => a.reason.cmp(&b.reason),
                "y" => a.nice.cmp(&b.nice),
                "l" => jobfmt::limit(a).map(|l| l.to_slurm_u32()).cmp(&jobfmt::limit(b).map(|l| l.to_slurm_u32())),
                _ => std::cmp::Ordering::Equal,
            }
        };
        if rev {
            rows.sort_by(|a, b| cmp(b, a));
        } else {
            rows.sort_by(cmp);
        }
    }
}

/// One `%` field of `-o`: header and value.
fn o_field(ch: char, j: Option<&JobInfo>, now: i64) -> Option<(&'static str, String)> {
    let title = match ch {
        'a' => "ACCOUNT",
        'A' | 'i' => "JOBID",
        'b' => "TRES_PER_NODE",
        'B' => "EXEC_HOST",
        'c' => "MIN_CPUS",
        'C' => "CPUS",
        'd' => "MIN_TMP_DISK",
        'D' => "NODES",
        'e' => "END_TIME",
        'E' => "DEPENDENCY",
        'f' => "FEATURES",
        'F' => "ARRAY_JOB_ID",
        'g' | 'G' => "GROUP",
        'h' => "OVER_SUBSCRIBE",
        'H' => "SOCKETS_PER_NODE",
        'I' => "CORES_PER_SOCKET",
        'j' => "NAME",
        'J' => "THREADS_PER_CORE",
        'k' => "COMMENT",
        'K' => "ARRAY_TASK_ID",
        'l' => "TIME_LIMIT",
        'L' => "TIME_LEFT",
        'm' => "MIN_MEMORY",
        'M' => "TIME",
        'n' => "REQ_NODES",
        'N' => "NODELIST",
        'o' => "COMMAND",
        'O' => "CONTIGUOUS",
        'p' | 'Q' => "PRIORITY",
        'P' => "PARTITION",
        'q' => "QOS",
        'r' => "REASON",
        'R' => "NODELIST(REASON)",
        'S' => "START_TIME",
        't' => "ST",
        'T' => "STATE",
        'u' => "USER",
        'U' => "UID",
        'v' => "RESERVATION",
        'V' => "SUBMIT_TIME",
        'w' => "WCKEY",
        'W' => "LICENSES",
        'x' => "EXC_NODES",
        'X' => "CORE_SPEC",
        'y' => "NICE",
        'Y' => "SCHEDNODES",
        'z' => "S:C:T",
        'Z' => "WORK_DIR",
        _ => return None,
    };
    let Some(j) = j else { return Some((title, String::new())) };
    let pending = state(j) == JobStateWire::Pending;
    let t = |x: Option<i64>| x.filter(|&v| v > 0).map_or_else(|| "N/A".to_string(), common::fmt_time);
    let v = match ch {
        'a' => j.account.clone(),
        'A' => j.job_id.to_string(),
        'i' => jobfmt::job_id_str(j),
        'b' => jobfmt::tres_per_node(j),
        'B' => {
            if pending || j.batch_host.is_empty() {
                "n/a".into()
            } else {
                j.batch_host.clone()
            }
        }
        'c' => (j.num_cpus / j.num_nodes.max(1)).max(1).to_string(),
        'C' => j.num_cpus.to_string(),
        'd' => "0".into(),
        'D' => j.num_nodes.to_string(),
        'e' => t(j.end_time),
        'E' => jobfmt::dependency_str(j),
        'f' => "(null)".into(),
        'F' => j.array_job_id.unwrap_or(j.job_id).to_string(),
        'g' => common::group_name(j.gid),
        'G' => j.gid.to_string(),
        'h' => if j.exclusive { "NO" } else { "OK" }.into(),
        'H' | 'I' | 'J' => "*".into(),
        'j' => j.name.clone(),
        'k' => j.comment.clone().unwrap_or_else(|| "(null)".into()),
        'K' => match (j.array_task_id, &j.array_task_str) {
            (Some(t), _) => t.to_string(),
            (None, Some(s)) => s.clone(),
            _ => "N/A".into(),
        },
        'l' => jobfmt::time_limit_str(j),
        'L' => jobfmt::time_left_str(j, now),
        'm' => jobfmt::mem_str(j.mem_per_node_mib / u64::from((j.num_cpus / j.num_nodes.max(1)).max(1))),
        'M' => jobfmt::time_used_str(j, now),
        'n' => j.required_nodes.join(","),
        'N' => j.nodes.clone(),
        'o' => j.command.clone().unwrap_or_else(|| "(null)".into()),
        'O' => "0".into(),
        'p' => format!("{:.14}", j.priority as f64 / f64::from(u32::MAX)),
        'Q' => j.priority.to_string(),
        'P' => j.partition.clone(),
        'q' => j.qos.clone(),
        'r' => j.reason.clone(),
        'R' => jobfmt::nodelist_reason(j),
        'S' => t(j.start_time),
        't' => state(j).compact().into(),
        'T' => state(j).as_str().into(),
        'u' => j.user.clone(),
        'U' => j.uid.to_string(),
        'v' => "(null)".into(),
        'V' => common::fmt_time(j.submit_time),
        'w' => "(null)".into(),
        'W' => "(null)".into(),
        'x' => j.excluded_nodes.join(","),
        'X' => "N/A".into(),
        'y' => j.nice.to_string(),
        'Y' => {
            if j.sched_nodes.is_empty() {
                "(null)".into()
            } else {
                j.sched_nodes.clone()
            }
        }
        'z' => "*:*:*".into(),
        'Z' => j.work_dir.clone(),
        _ => String::new(),
    };
    Some((title, v))
}

enum Piece {
    Text(String),
    Field { ch: char, width: usize, right: bool },
}

/// Parses an `-o` format as squeue's `_parse_format`; invalid specs become text and are
/// reported once each.
fn parse_o(fmt: &str, io: &mut Io<'_>) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut tokens = fmt.split('%');
    if let Some(first) = tokens.next() {
        if !first.is_empty() {
            out.push(Piece::Text(first.into()));
        }
    }
    for tok in tokens {
        let mut chars = tok.chars().peekable();
        let mut right = false;
        if chars.peek() == Some(&'.') {
            right = true;
            chars.next();
        }
        let mut width = 0usize;
        while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
            width = width * 10 + d as usize;
            chars.next();
        }
        let Some(ch) = chars.next() else {
            out.push(Piece::Text("%".into()));
            continue;
        };
        let rest: String = chars.collect();
        if o_field(ch, None, 0).is_some() {
            out.push(Piece::Field { ch, width, right });
            if !rest.is_empty() {
                out.push(Piece::Text(rest));
            }
        } else {
            io.err(&format!("squeue: error: Invalid job format specification: {ch}\n"));
            out.push(Piece::Text(format!("%{tok}")));
        }
    }
    out
}

fn render_o(fmt: &str, rows: &[JobInfo], header: bool, now: i64, io: &mut Io<'_>) -> String {
    let pieces = parse_o(fmt, io);
    // Every line is written straight into `out` (no String per line or per padded field: a
    // 10,000-job queue is 80,000 fields).
    let line = |out: &mut String, j: Option<&JobInfo>| {
        for p in &pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Field { ch, width, right } => {
                    let (title, v) = o_field(*ch, j, now).expect("validated");
                    common::push_field(out, if j.is_some() { &v } else { title }, *width, *right);
                }
            }
        }
        out.push('\n');
    };
    let mut out = String::with_capacity((rows.len() + 1) * 80);
    if header {
        line(&mut out, None);
    }
    for j in rows {
        line(&mut out, Some(j));
    }
    out
}

/// `-O` field names (case-insensitive) and the `-o` letter or header they stand for.
fn o2_field(name: &str) -> Option<(&'static str, O2)> {
    let n = name.to_ascii_lowercase();
    let (title, f) = match n.as_str() {
        "account" => ("ACCOUNT", O2::Letter('a')),
        "arrayjobid" => ("ARRAY_JOB_ID", O2::Letter('F')),
        "arraytaskid" => ("ARRAY_TASK_ID", O2::Letter('K')),
        "batchhost" => ("EXEC_HOST", O2::Letter('B')),
        "command" => ("COMMAND", O2::Letter('o')),
        "comment" => ("COMMENT", O2::Letter('k')),
        "contiguous" => ("CONTIGUOUS", O2::Letter('O')),
        "dependency" => ("DEPENDENCY", O2::Letter('E')),
        "endtime" => ("END_TIME", O2::Letter('e')),
        "exit_code" => ("EXIT_CODE", O2::ExitCode),
        "feature" => ("FEATURES", O2::Letter('f')),
        "groupid" => ("GROUP", O2::Letter('G')),
        "groupname" => ("GROUP", O2::Letter('g')),
        "jobarrayid" => ("JOBID", O2::Letter('i')),
        "jobid" => ("JOBID", O2::Letter('A')),
        "mincpus" => ("MIN_CPUS", O2::Letter('c')),
        "minmemory" => ("MIN_MEMORY", O2::Letter('m')),
        "mintmpdisk" => ("MIN_TMP_DISK", O2::Letter('d')),
        "name" => ("NAME", O2::Letter('j')),
        "nice" => ("NICE", O2::Letter('y')),
        "nodelist" => ("NODELIST", O2::Letter('N')),
        "numcpus" => ("CPUS", O2::Letter('C')),
        "numnodes" => ("NODES", O2::Letter('D')),
        "numtasks" => ("TASKS", O2::NumTasks),
        "oversubscribe" => ("OVER_SUBSCRIBE", O2::Letter('h')),
        "partition" => ("PARTITION", O2::Letter('P')),
        "priority" => ("PRIORITY", O2::Letter('p')),
        "prioritylong" => ("PRIORITY", O2::Letter('Q')),
        "qos" => ("QOS", O2::Letter('q')),
        "reason" => ("REASON", O2::Letter('r')),
        "reasonlist" => ("NODELIST(REASON)", O2::Letter('R')),
        "reqnodes" => ("REQ_NODES", O2::Letter('n')),
        "exclnodes" => ("EXC_NODES", O2::Letter('x')),
        "schednodes" => ("SCHEDNODES", O2::Letter('Y')),
        "sct" => ("S:C:T", O2::Letter('z')),
        "starttime" => ("START_TIME", O2::Letter('S')),
        "state" => ("STATE", O2::Letter('T')),
        "statecompact" => ("ST", O2::Letter('t')),
        "stderr" => ("STDERR", O2::StdErr),
        "stdout" => ("STDOUT", O2::StdOut),
        "submittime" => ("SUBMIT_TIME", O2::Letter('V')),
        "timeleft" => ("TIME_LEFT", O2::Letter('L')),
        "timelimit" => ("TIME_LIMIT", O2::Letter('l')),
        "timeused" => ("TIME", O2::Letter('M')),
        "tres-alloc" => ("TRES_ALLOC", O2::TresAlloc),
        "tres-per-node" => ("TRES_PER_NODE", O2::Letter('b')),
        "userid" => ("UID", O2::Letter('U')),
        "username" => ("USER", O2::Letter('u')),
        "workdir" => ("WORK_DIR", O2::Letter('Z')),
        "restartcnt" => ("RESTARTCNT", O2::Restarts),
        "requeue" => ("REQUEUE", O2::Requeue),
        "topology" => ("TOPOLOGY", O2::Topology),
        "preemptible" => ("PREEMPTIBLE", O2::Preemptible),
        _ => return None,
    };
    Some((title, f))
}

#[derive(Debug, Clone, Copy)]
enum O2 {
    Letter(char),
    TresAlloc,
    NumTasks,
    ExitCode,
    StdOut,
    StdErr,
    Restarts,
    Requeue,
    Topology,
    Preemptible,
}

fn o2_value(f: O2, j: &JobInfo, now: i64) -> String {
    match f {
        O2::Letter(ch) => o_field(ch, Some(j), now).map(|x| x.1).unwrap_or_default(),
        O2::TresAlloc => {
            if state(j) == JobStateWire::Pending {
                // Slurm shows the requested TRES while pending, without billing.
                let nodes = j.num_nodes.max(1);
                format!(
                    "cpu={},mem={},node={}",
                    j.num_cpus,
                    jobfmt::mem_str(j.mem_per_node_mib * u64::from(nodes)),
                    nodes
                )
            } else {
                jobfmt::tres_str(j)
            }
        }
        O2::NumTasks => j.num_tasks.to_string(),
        O2::ExitCode => format!("{}:{}", j.exit_code, j.exit_signal),
        O2::StdOut => j.stdout.clone().unwrap_or_default(),
        O2::StdErr => j.stderr.clone().unwrap_or_default(),
        O2::Restarts => j.restarts.to_string(),
        O2::Requeue => u8::from(j.requeue).to_string(),
        O2::Topology => j.topology.clone(),
        O2::Preemptible => if j.preemptible { "YES" } else { "NO" }.into(),
    }
}

fn render_o2(fmt: &str, rows: &[JobInfo], header: bool, now: i64, io: &mut Io<'_>) -> String {
    struct Col {
        title: &'static str,
        f: O2,
        width: usize,
        right: bool,
        suffix: String,
    }
    let mut cols = Vec::new();
    for spec in fmt.split(',') {
        let (name, rest) = match spec.split_once(':') {
            Some((n, r)) => (n, Some(r)),
            None => (spec, None),
        };
        let Some((title, f)) = o2_field(name) else {
            io.err(&format!("squeue: error: Invalid job format specification: {name}\n"));
            continue;
        };
        let (mut width, mut right, mut suffix) = (20usize, false, String::new());
        if let Some(r) = rest {
            let mut chars = r.chars().peekable();
            if chars.peek() == Some(&'.') {
                right = true;
                chars.next();
            }
            let mut w = 0usize;
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                w = w * 10 + d as usize;
                chars.next();
            }
            width = w;
            suffix = chars.collect();
        }
        cols.push(Col {
            title,
            f,
            width,
            right,
            suffix,
        });
    }
    let mut out = String::new();
    if header {
        for c in &cols {
            out.push_str(&field(c.title, c.width, c.right));
            out.push_str(&c.suffix);
        }
        out.push('\n');
    }
    for j in rows {
        for c in &cols {
            out.push_str(&field(&o2_value(c.f, j, now), c.width, c.right));
            out.push_str(&c.suffix);
        }
        out.push('\n');
    }
    out
}

/// `-s`: per running job, its `srun` steps (`N.0`, `N.1`, ... with the step's name and
/// nodes), then its `.batch` step on its batch host.
fn print_steps(p: &Params, rows: &[JobInfo], steps: &[flotilla_proto::step::StepInfo], io: &mut Io<'_>, now: i64) {
    let mut s = String::new();
    let fmt = p.format.clone().unwrap_or_else(|| STEP_FMT.into());
    let _ = fmt;
    if !p.noheader {
        s.push_str(&format!(
            "{} {} {} {} {} {}\n",
            field("STEPID", 15, true),
            field("NAME", 8, true),
            field("PARTITION", 9, true),
            field("USER", 8, true),
            field("TIME", 9, true),
            "NODELIST"
        ));
    }
    let mut running: Vec<&JobInfo> = rows.iter().filter(|j| state(j) == JobStateWire::Running).collect();
    running.sort_by_key(|j| (j.partition.clone(), j.job_id));
    for j in running {
        let mut mine: Vec<&flotilla_proto::step::StepInfo> = steps.iter().filter(|st| st.job_id == j.job_id).collect();
        mine.sort_by_key(|st| st.step_id);
        for st in mine {
            s.push_str(&format!(
                "{} {} {} {} {} {}\n",
                field(&format!("{}.{}", jobfmt::job_id_str(j), st.step_id), 15, true),
                field(&st.name, 8, true),
                field(&st.partition, 9, true),
                field(&st.user, 8, true),
                field(&flotilla_core::time::squeue_secs((now - st.start_time).max(0)), 9, true),
                st.nodes
            ));
        }
        s.push_str(&format!(
            "{} {} {} {} {} {}\n",
            field(&format!("{}.batch", jobfmt::job_id_str(j)), 15, true),
            field("batch", 8, true),
            field(&j.partition, 9, true),
            field(&j.user, 8, true),
            field(&jobfmt::time_used_str(j, now), 9, true),
            j.batch_host
        ));
    }
    io.out(&s);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u64, state: JobStateWire, prio: u64) -> JobInfo {
        JobInfo {
            job_id: id,
            name: format!("j{id}"),
            user: "alice".into(),
            partition: "batch".into(),
            state: Some(state),
            reason: if state == JobStateWire::Pending { "Priority".into() } else { "None".into() },
            priority: prio,
            num_nodes: 1,
            num_cpus: 1,
            mem_per_node_mib: 1024,
            time_limit: Some(flotilla_proto::TimeLimitWire::Minutes(10)),
            nodes: if state == JobStateWire::Running { "gpu01".into() } else { String::new() },
            ..JobInfo::default()
        }
    }

    fn render(fmt: &str, rows: &[JobInfo]) -> (String, String) {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let env = |_: &str| None;
        let s = {
            let mut io = Io { out: &mut out, err: &mut err, env: &env, stdin: None };
            render_o(fmt, rows, true, 0, &mut io)
        };
        (s, String::from_utf8(err).unwrap())
    }

    #[test]
    fn format_engine() {
        // CONTRACT.md §A-9: literal text kept, natural width, `.` right-justifies.
        let rows = vec![job(53, JobStateWire::Running, 5)];
        assert_eq!(render("%i,%t", &rows).0, "JOBID,ST\n53,R\n");
        assert_eq!(render("%.5i|%T", &rows).0, "JOBID|STATE\n   53|RUNNING\n");
        // Golden 0174: an invalid spec is printed as text, with one error.
        let (s, e) = render("%10i %-10j %.5t", &rows);
        assert_eq!(s, "JOBID      %-10j    ST\n53         %-10j     R\n");
        assert_eq!(e, "squeue: error: Invalid job format specification: -\n");
        assert_eq!(render(DEFAULT_FMT, &[]).0, "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n");
    }

    #[test]
    fn default_sort_pending_first_then_priority() {
        let mut rows = vec![
            job(53, JobStateWire::Running, 9),
            job(57, JobStateWire::Pending, 5),
            job(58, JobStateWire::Pending, 7),
            job(59, JobStateWire::Pending, 0),
        ];
        rows[3].partition = "debug".into();
        sort_jobs(&mut rows, "P,t,-p");
        let ids: Vec<u64> = rows.iter().map(|j| j.job_id).collect();
        assert_eq!(ids, vec![58, 57, 53, 59]);
    }

    #[test]
    fn job_refs() {
        assert_eq!(parse_job_ref("53"), Some(JobRef::id(53)));
        assert_eq!(parse_job_ref("64_3").unwrap().tasks, Some(vec![3]));
        assert_eq!(parse_job_ref("64_[3-4]").unwrap().tasks, Some(vec![3, 4]));
        assert_eq!(parse_job_ref("abc"), None);
    }
}
