//! `squeue`, as Slurm 22.05's `src/squeue`: the `-o` format engine (`%[.][width]X`, literal
//! text kept, invalid specs printed as text with an error), `-O` fields (`Name[:[.][width]]`,
//! default width 20, values cut to the width), filters (`-j -u --me -t -p -n -w -A -q`), array
//! folding (`64_[0-5%2]`, `-r` to unfold), steps (`-s`), `--start`, `-S` and Slurm's default
//! sort (`P,t,-p`: partition, state name, priority descending; then job id).
//!
//! All jobs are fetched in one request and filtered here; a single `-j ID` unknown to the
//! controller (not even finished) is Slurm's `slurm_load_jobs error: Invalid job id
//! specified`, exit 1.

use crate::common::{self, Ctl, CtlError, Io};
use crate::getopt::{getopt_long, lo, HasArg, LongOpt};
use crate::jobfmt::{self, state};
use flotilla_core::time::{fmt_ctime, fmt_time};
use flotilla_proto::errno::{ESLURM_INVALID_JOB_ID, SLURM_UNEXPECTED_MSG_ERROR};
use flotilla_proto::{JobField, JobQuery, JobRef, JobStateWire, JobView, QueueQuery, QueueRows, Request, Response};
use std::borrow::Cow;
use std::collections::BTreeSet;

const DEFAULT_FMT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
const LONG_FMT: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
const START_FMT: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";
const STEP_FMT: &str = "%.15i %.8j %.9P %.8u %.9M %N";

const O_ME: u32 = 1000;
const O_START: u32 = 1001;
const O_HELP: u32 = 1002;
const O_USAGE: u32 = 1003;
const O_IGNORED: u32 = 1004;
const O_JSON: u32 = 1006;
const O_YAML: u32 = 1007;

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
    lo("json", HasArg::No, O_JSON),
    lo("yaml", HasArg::No, O_YAML),
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
    mime: Option<crate::json_out::Mime>,
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
            O_JSON => p.mime = Some(crate::json_out::Mime::Json),
            O_YAML => p.mime = Some(crate::json_out::Mime::Yaml),
            O_ME => p.users.push(common::my_uid()),
            x if x == c('j') => {
                for id in a.split(',').filter(|s| !s.is_empty()) {
                    match squeue_operand(id) {
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
    // 22.05 (`squeue.c`, `data.c`): with --json/--yaml, squeue prints v0.0.38's `/jobs/`
    // answer for every job; no other option filters or formats it.
    if let Some(mime) = p.mime {
        let (jobs, errs) = crate::json_out::query_jobs(&ctl);
        let gpu_type = |n: &str| crate::json_out::conf_gpu_type(&ctl.conf.nodes, n);
        let doc = crate::json_out::jobs_doc(&jobs, &ctl.conf.cluster_name, &crate::json_out::group_name, &gpu_type);
        io.out(&crate::json_out::render(&crate::json_out::with_errors(doc, &errs), mime));
        return 0;
    }
    let q = JobQuery {
        jobs: p.job_ids.clone(),
        include_finished: true,
        ..JobQuery::default()
    };
    // Only the fields the format, the filters and the sort read travel; each job is decoded
    // into a view borrowing the answer's bytes (no string copied for 10,000 jobs).
    let sort_spec = p.sort.clone().unwrap_or_else(|| if p.start { "S" } else { "P,t,-p" }.into());
    let keys = SortKeys::parse(&sort_spec);
    let fmt = p.format.clone().unwrap_or_else(|| {
        if p.start {
            START_FMT.into()
        } else if p.long {
            LONG_FMT.into()
        } else {
            DEFAULT_FMT.into()
        }
    });
    let fields = needed_fields(&p, &fmt, &keys);
    // One pass decodes, filters and writes each selected job's line into `lines`; a row keeps
    // where its line is and its sort keys (a decoded job is hundreds of bytes, 10,000 of them
    // megabytes of fresh memory). `-s` needs the jobs themselves.
    let now = common::now();
    let mut renderer = match &p.format2 {
        Some(f2) if !p.steps => Some(Renderer::o2(f2, io)),
        _ if !p.steps => Some(Renderer::o(&fmt, io)),
        _ => None,
    };
    let query = QueueQuery { query: q, fields: fields.clone() };
    let load_error = |e: CtlError, io: &mut Io<'_>| {
        io.err(&format!("slurm_load_jobs error: {}\n", e.slurm().text));
        1
    };
    // The elastic ranges of the jobs listed, when a column shows them: every job id first
    // (a controller that does not know the request leaves them out), so the answer comes
    // whole. Otherwise it comes in parts, each taken while the controller encodes the next.
    let mut whole = None;
    if renderer.as_ref().is_none_or(Renderer::needs_sizes) {
        let answer = match ctl.call(Request::QueryQueue(query.clone())) {
            Ok(Response::Queue(rows)) => rows,
            Ok(_) => QueueRows::default(),
            Err(e) => return load_error(e, io),
        };
        if let Some(Renderer::O2(_, sizes)) = renderer.as_mut() {
            let mut ids = Vec::new();
            let (mut reader, mut j) = (answer.reader(&fields), JobView::default());
            while let Some(Ok(())) = reader.next_into(&mut j) {
                ids.push(j.job_id);
            }
            if let Ok(Response::Elastic(e)) = ctl.call(Request::QueryElastic { job_ids: ids }) {
                *sizes = e.into_iter().map(|e| (e.job_id, e)).collect();
            }
        }
        whole = Some(answer);
    }
    let kept = std::cell::OnceCell::new();
    let mut acc = Taken::new(&p, &fields, renderer.as_ref(), &keys, now, &kept);
    match whole {
        Some(answer) => acc.take(answer),
        None => match ctl.call_parts(Request::QueryQueueParts(query.clone()), &mut |part| acc.take(part)) {
            Ok(Response::Queue(rows)) => acc.take(rows),
            Ok(_) => {}
            // A controller older than the request refuses it before any part: asked whole.
            Err(CtlError::Slurm(e)) if e.code == SLURM_UNEXPECTED_MSG_ERROR && kept.get().is_none() => {
                match ctl.call(Request::QueryQueue(query)) {
                    Ok(Response::Queue(rows)) => acc.take(rows),
                    Ok(_) => {}
                    Err(e) => return load_error(e, io),
                }
            }
            Err(e) => return load_error(e, io),
        },
    }
    let Taken { mut rows, key_vals, lines, for_steps, any, failed, .. } = acc;
    if failed {
        io.err(&format!("slurm_load_jobs error: {}\n", CtlError::Connect.slurm().text));
        return 1;
    }
    // Slurm loads the one job named (`slurm_load_job`) and filters its tasks after: a task
    // it does not have shows nothing, with no error (goldens-extra 1211).
    let job_known = |r: &JobRef| {
        let q = QueueQuery {
            query: JobQuery {
                jobs: vec![JobRef::id(r.job_id)],
                include_finished: true,
                ..JobQuery::default()
            },
            fields: Vec::new(),
        };
        matches!(ctl.call(Request::QueryQueue(q)), Ok(Response::Queue(rows)) if rows.count > 0)
    };
    if p.job_id_count == 1 && !any && !p.job_ids.first().is_some_and(|r| r.tasks.is_some() && job_known(r)) {
        io.err(&format!("slurm_load_jobs error: {}\n", flotilla_proto::errno::strerror(ESLURM_INVALID_JOB_ID)));
        return 1;
    }
    let Some(renderer) = renderer.as_ref() else {
        let steps = match ctl.call(Request::QuerySteps(JobQuery::default())) {
            Ok(Response::Steps(s)) => s,
            _ => Vec::new(),
        };
        print_steps(&p, &for_steps, &steps, io, now);
        return 0;
    };
    keys.sort(&mut rows, &key_vals);
    let mut head = String::new();
    if p.long {
        head.push_str(&fmt_ctime(now));
        head.push('\n');
    }
    if !p.noheader {
        renderer.line(&mut head, None, now, &mut String::new());
    }
    io.out(&head);
    // Straight from the lines into the (buffered) output, in sorted order.
    for r in &rows {
        io.out(&lines[r.line.clone()]);
    }
    0
}

/// An answer's parts as they arrive, kept (the rows borrow their strings from them) one
/// after the other: each holds the cell of the next, so that a part is added behind the
/// others while they are borrowed.
struct Kept {
    rows: QueueRows,
    next: std::cell::OnceCell<Box<Kept>>,
}

/// What squeue takes from the answer's parts, in order: each selected job's line and sort
/// keys (or, for `-s`, the job), whether any job came, and whether a part did not decode.
struct Taken<'a, 'p> {
    p: &'p Params,
    fields: &'p [JobField],
    renderer: Option<&'p Renderer>,
    keys: &'p SortKeys,
    now: i64,
    /// The cell the next part goes in.
    tail: &'a std::cell::OnceCell<Box<Kept>>,
    rows: Vec<Row>,
    key_vals: Vec<Key<'a>>,
    lines: String,
    for_steps: Vec<JobView<'a>>,
    any: bool,
    failed: bool,
    /// One view receives every job's fields in turn (only those fields: the rest stay default).
    j: JobView<'a>,
    scratch: String,
}

impl<'a, 'p: 'a> Taken<'a, 'p> {
    fn new(p: &'p Params, fields: &'p [JobField], renderer: Option<&'p Renderer>, keys: &'p SortKeys, now: i64, first: &'a std::cell::OnceCell<Box<Kept>>) -> Self {
        Taken {
            p,
            fields,
            renderer,
            keys,
            now,
            tail: first,
            rows: Vec::new(),
            key_vals: Vec::new(),
            lines: String::new(),
            for_steps: Vec::new(),
            any: false,
            failed: false,
            j: JobView::default(),
            scratch: String::new(),
        }
    }

    /// Keeps `part` behind the others and takes its jobs (nothing after a part that did not
    /// decode).
    fn take(&mut self, part: QueueRows) {
        if self.failed {
            return;
        }
        let cell = self.tail;
        let kept = cell.get_or_init(|| Box::new(Kept { rows: part, next: std::cell::OnceCell::new() }));
        self.tail = &kept.next;
        // Room for the part's rows and lines at once (a line is about as long as a job's
        // fields), as one answer's sizes reserved it before the parts.
        self.rows.reserve(kept.rows.count.min(1 << 20) as usize);
        self.key_vals.reserve(kept.rows.count.min(1 << 20) as usize * self.keys.keys.len());
        self.lines.reserve(kept.rows.bytes.len());
        let (p, keys, now) = (self.p, self.keys, self.now);
        let mut reader = kept.rows.reader(self.fields);
        while let Some(r) = reader.next_into(&mut self.j) {
            if r.is_err() {
                self.failed = true;
                return;
            }
            self.any = true;
            let j = &self.j;
            if !selected(p, j) {
                continue;
            }
            let Some(renderer) = self.renderer else {
                self.for_steps.push(j.clone());
                continue;
            };
            // `--start`: pending jobs only (not even rendered otherwise).
            if p.start && !state(j).is_pending() {
                continue;
            }
            let partial;
            let j = match partial_array(&p.job_ids, j) {
                Some(k) => {
                    partial = k;
                    &partial
                }
                None => j,
            };
            let (lines, key_vals, scratch) = (&mut self.lines, &mut self.key_vals, &mut self.scratch);
            match (&j.array_task_str, j.array_task_id) {
                // `-r`: one row per pending task of an array's remainder.
                (Some(tasks), None) if p.array_unfold && j.array_job_id.is_some() => {
                    for t in jobfmt::expand_task_str(tasks) {
                        let mut k = j.clone();
                        (k.array_task_id, k.array_task_str) = (Some(t), None);
                        self.rows.push(Row::render(&k, renderer, lines, keys, key_vals, now, scratch));
                    }
                }
                _ => self.rows.push(Row::render(j, renderer, lines, keys, key_vals, now, scratch)),
            }
        }
    }
}

/// `123`, `123_4`, `123_[3-4]`.
pub fn parse_job_ref(s: &str) -> Option<JobRef> {
    parse_job_ref_by(s, squeue_job_id)
}

/// One id of `squeue -j` as Slurm 22.05 reads it (`src/squeue/opts.c` `_build_job_list`):
/// the job id by [`squeue_job_id`] (`None`: "Invalid job id"); then, after a `_`, one array
/// task read with `strtol`, so no digits there is task 0 (`12_[1-3]` asks for task 0 of job
/// 12, and matches nothing); anything else after the id is ignored (`12x` is job 12).
pub fn squeue_operand(s: &str) -> Option<JobRef> {
    let id = squeue_job_id(s)?;
    let (_, rest) = flotilla_core::cnum::strtol(s);
    let tasks = rest.strip_prefix('_').map(|t| {
        let task = flotilla_core::cnum::strtol(t).0 as i32;
        u32::try_from(task).map_or_else(|_| Vec::new(), |t| vec![t])
    });
    Some(JobRef { job_id: id, tasks })
}

/// A job reference (`N`, `N_T`, `N_[list]`) whose job id part is read by `job_id` (each
/// command has Slurm's own rule: [`squeue_job_id`], `scancel`'s).
pub fn parse_job_ref_by(s: &str, job_id: fn(&str) -> Option<u64>) -> Option<JobRef> {
    match s.split_once('_') {
        None => Some(JobRef::id(job_id(s)?)),
        Some((id, tasks)) => {
            let job_id = job_id(id)?;
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

/// A job id of `squeue -j` as Slurm 22.05 reads it (`src/squeue/opts.c` `_build_job_list`):
/// `strtol` (leading blanks, a sign, the leading digits; saturated on overflow) stored in a
/// 32-bit `int`, refused when that is not positive. So `4294967295` (-1 as an int) and
/// `4294967296` (0) are invalid, `4294967297` is job 1. `None`: "Invalid job id".
pub fn squeue_job_id(s: &str) -> Option<u64> {
    let int = flotilla_core::cnum::strtol(s).0 as i32;
    (int > 0).then_some(int as u64)
}

/// A job id of `scancel` as Slurm 22.05 reads it (`src/scancel/opt.c`
/// `_xlate_job_step_ids`): `strtol` into a `long`, refused when not positive, then stored in
/// a `uint32_t` (so `4294967296` is job 0, which names no job and is cancelled silently).
pub fn scancel_job_id(s: &str) -> Option<u64> {
    let long = flotilla_core::cnum::strtol(s).0;
    (long > 0).then_some(u64::from(long as u32))
}

fn default_state(s: JobStateWire) -> bool {
    matches!(
        s,
        JobStateWire::Pending
            | JobStateWire::Running
            | JobStateWire::Completing
            | JobStateWire::Suspended
            | JobStateWire::SpecialExit
    )
}

/// The rows squeue's filters keep (`-t`, `-u`, `-n`, `-p`, `-A`, `-q`, `-w`).
fn selected(p: &Params, j: &JobView<'_>) -> bool {
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
        && (p.names.is_empty() || p.names.iter().any(|n| *n == *j.name))
        && (p.partitions.is_empty() || p.partitions.iter().any(|n| *n == *j.partition))
        && (p.accounts.is_empty() || p.accounts.iter().any(|n| *n == *j.account))
        && (p.qos.is_empty() || p.qos.iter().any(|n| *n == *j.qos))
        && (p.nodes.is_empty() || {
            let mine = flotilla_core::hostlist::expand(&j.nodes).unwrap_or_default();
            mine.iter().any(|n| p.nodes.contains(n))
        })
}

/// `-j` naming tasks of an array whose pending remainder is one record (Slurm 22.05
/// `squeue/print.c` `_filter_job`, its `partial_array`): when the first `-j` entry that
/// selects the record names a pending task of it (not the whole array), the record is shown
/// with only the named pending tasks: one task as `A_T` (`-j 64_3` prints `64_3`), several as
/// their ranges without the throttle (`64_[3-4]`). `None`: shown as it is.
fn partial_array<'a>(refs: &[JobRef], j: &JobView<'a>) -> Option<JobView<'a>> {
    let (Some(aid), Some(tasks)) = (j.array_job_id, j.array_task_str.as_deref()) else { return None };
    if refs.is_empty() || j.array_task_id.is_some() {
        return None;
    }
    let pending = jobfmt::expand_task_str(tasks);
    // The first entry that selects the record decides (`_filter_job` stops at it).
    let first = refs.iter().find(|r| match &r.tasks {
        None => r.job_id == aid || r.job_id == j.job_id,
        Some(ts) => r.job_id == aid && ts.iter().any(|t| pending.contains(t)),
    })?;
    first.tasks.as_ref()?;
    let named: BTreeSet<u32> = refs
        .iter()
        .filter(|r| r.job_id == aid)
        .flat_map(|r| r.tasks.iter().flatten().copied())
        .filter(|t| pending.contains(t))
        .collect();
    let mut k = j.clone();
    if named.len() == 1 {
        (k.array_task_id, k.array_task_str) = (named.first().copied(), None);
    } else {
        k.array_task_str = Some(jobfmt::task_ranges(&named.into_iter().collect::<Vec<u32>>()).into());
    }
    Some(k)
}

/// A job squeue lists: where its line is, and where its sort keys are
/// (all rows' keys are in one vector, `SortKeys::keys.len()` per row).
struct Row {
    line: std::ops::Range<usize>,
    /// Job-id order, under every `-S`: (array id or id, task, id).
    base: (u64, u32, u64),
    /// The start time Slurm's squeue orders equal rows by ([`slurm_start`]).
    started: Option<i64>,
    keys_at: usize,
}

/// The start time Slurm 22.05's squeue sorts by before its `-S` keys (`sort.c`
/// `sort_jobs_by_start_time`, on the job records' `start_time`): a started job's start, a job
/// that ended without starting (cancelled pending, failed at submission) its end (Slurm's
/// `_job_signal` and `job_allocate` set both to the moment it ended), a pending job its
/// expected start; `None` (Slurm's 0) when there is none.
fn slurm_start(j: &JobView<'_>) -> Option<i64> {
    let ended = state(j).is_finished() && j.start_time.is_none();
    if ended { j.end_time } else { j.start_time }.filter(|&t| t != 0)
}

impl Row {
    /// Writes `j`'s line at the end of `lines` and its sort keys at the end of `key_vals`; its
    /// row.
    #[allow(clippy::too_many_arguments)]
    fn render<'a>(j: &JobView<'a>, r: &Renderer, lines: &mut String, spec: &SortKeys, key_vals: &mut Vec<Key<'a>>, now: i64, scratch: &mut String) -> Row {
        let start = lines.len();
        r.line(lines, Some(j), now, scratch);
        Row::new(j, start..lines.len(), spec, key_vals)
    }

    fn new<'a>(j: &JobView<'a>, line: std::ops::Range<usize>, spec: &SortKeys, key_vals: &mut Vec<Key<'a>>) -> Row {
        let keys_at = key_vals.len();
        key_vals.extend(spec.keys.iter().map(|(k, _)| Key::of(k, j)));
        Row {
            line,
            base: (j.array_job_id.unwrap_or(j.job_id), j.array_task_id.unwrap_or(0), j.job_id),
            started: slurm_start(j),
            keys_at,
        }
    }
}

/// One sort key's value for one job.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key<'a> {
    None,
    U(u64),
    I(i64),
    S(flotilla_proto::Str<'a>),
    Id(u64, Option<u32>),
    Limit(Option<u32>),
    /// `S`: (no start time, start, then job-id order among jobs without one).
    Start(u8, i64, u64, u32, u64),
}

impl<'a> Key<'a> {
    /// Slurm's `-S` letters (squeue `sort.c`): `i,P,t,p,u,U,j,S,V,e,D,C,N,a,q,r,y,l`; others
    /// leave the order alone.
    fn of(k: &str, j: &JobView<'a>) -> Key<'a> {
        match k {
            "i" | "A" => Key::Id(j.array_job_id.unwrap_or(j.job_id), j.array_task_id),
            "P" => Key::S(j.partition.clone()),
            "t" | "T" => Key::S(state(j).as_str().into()),
            "p" | "Q" => Key::U(j.priority),
            "u" => Key::S(j.user.clone()),
            "U" => Key::U(j.uid.into()),
            "j" => Key::S(j.name.clone()),
            // Slurm's `_sort_job_by_time_start` puts a job without a start time after every
            // other, and says "after" for two of them: the sort reverses them, and so undoes
            // the reversal of the pre-sort (`sort_jobs_by_start_time`, see
            // [`SortKeys::sort`]): such jobs come oldest first (golden 0178: 59, 61, 63 ...).
            "S" => match slurm_start(j) {
                Some(t) => Key::Start(0, t, 0, 0, 0),
                None => Key::Start(1, 0, j.array_job_id.unwrap_or(j.job_id), j.array_task_id.unwrap_or(0), j.job_id),
            },
            "V" => Key::I(j.submit_time),
            "e" => Key::I(j.end_time.unwrap_or(i64::MAX)),
            "D" => Key::U(j.num_nodes.into()),
            "C" => Key::U(j.num_cpus.into()),
            "N" => Key::S(j.nodes.clone()),
            "a" => Key::S(j.account.clone()),
            "q" => Key::S(j.qos.clone()),
            "r" => Key::S(j.reason.clone()),
            "y" => Key::I(j.nice.into()),
            "l" => Key::Limit(jobfmt::limit(j).map(|l| l.to_slurm_u32())),
            _ => Key::None,
        }
    }
}

/// A parsed `-S` (`i,-p,t,...`; a leading `-` reverses a key, `+` is ascending).
struct SortKeys {
    keys: Vec<(String, bool)>,
}

impl SortKeys {
    fn parse(spec: &str) -> SortKeys {
        let keys = spec
            .split(',')
            .map(|key| match key.strip_prefix('-') {
                Some(k) => (k.to_string(), true),
                None => (key.strip_prefix('+').unwrap_or(key).to_string(), false),
            })
            .collect();
        SortKeys { keys }
    }

    /// Sorts by the keys, first key first (Slurm's `sort_job_list`: one stable sort per key
    /// from the last to the first), rows equal in every key in the order Slurm 22.05's squeue
    /// had them before those sorts (`sort_jobs_by_start_time`, glibc's stable merge sort
    /// over the controller's list, oldest job first, with a comparison that puts a job
    /// without a start time after every other): jobs with a start time latest start first,
    /// equal starts oldest job first (golden 0199: held jobs cancelled together, 14..27,
    /// after 41..43 cancelled later); then jobs without one newest first (the comparison
    /// says "after" for two of them, so the merge reverses them: goldens 0135 and 0169, held
    /// jobs 60 before 59), the tasks of one array in task order (`-r` expands a record in
    /// place, 0190).
    fn sort(&self, rows: &mut [Row], key_vals: &[Key<'_>]) {
        rows.sort_by(|a, b| {
            for (i, (_, rev)) in self.keys.iter().enumerate() {
                let (ka, kb) = (&key_vals[a.keys_at + i], &key_vals[b.keys_at + i]);
                let o = if *rev { kb.cmp(ka) } else { ka.cmp(kb) };
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            match (a.started, b.started) {
                (Some(x), Some(y)) => y.cmp(&x).then(a.base.cmp(&b.base)),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => b.base.0.cmp(&a.base.0).then(a.base.1.cmp(&b.base.1)).then(a.base.2.cmp(&b.base.2)),
            }
        });
    }
}

/// The fields squeue needs: the job's id and state always (ids, `-r`, `--start`, states),
/// those its filters, sort keys and format read, everything for `-s`.
fn needed_fields(p: &Params, fmt: &str, keys: &SortKeys) -> Vec<JobField> {
    use JobField as F;
    if p.steps {
        return F::ALL.to_vec();
    }
    // The start and end times always: equal rows are ordered by them (`slurm_start`).
    let mut f = vec![F::JobId, F::ArrayJobId, F::ArrayTaskId, F::ArrayTaskStr, F::State, F::StartTime, F::EndTime];
    for (on, field) in [
        (!p.users.is_empty(), F::Uid),
        (!p.names.is_empty(), F::Name),
        (!p.partitions.is_empty(), F::Partition),
        (!p.accounts.is_empty(), F::Account),
        (!p.qos.is_empty(), F::Qos),
        (!p.nodes.is_empty(), F::Nodes),
    ] {
        if on {
            f.push(field);
        }
    }
    for (k, _) in &keys.keys {
        f.extend_from_slice(key_fields(k));
    }
    match &p.format2 {
        Some(f2) => {
            for spec in f2.split(',') {
                if let Some((_, o2)) = o2_field(spec.split(':').next().unwrap_or("")) {
                    f.extend_from_slice(o2_fields(o2));
                }
            }
        }
        None => {
            // Every `%[.][width]X` of the format (invalid letters need nothing).
            for tok in fmt.split('%').skip(1) {
                if let Some(ch) = tok.trim_start_matches('.').trim_start_matches(|c: char| c.is_ascii_digit()).chars().next() {
                    f.extend_from_slice(letter_fields(ch));
                }
            }
        }
    }
    f.sort();
    f.dedup();
    f
}

/// The fields `-o %X` reads (`o_field`, and the `jobfmt` helpers it calls).
fn letter_fields(ch: char) -> &'static [JobField] {
    use JobField as F;
    match ch {
        'a' => &[F::Account],
        'A' => &[F::JobId],
        'i' | 'F' | 'K' => &[F::JobId, F::ArrayJobId, F::ArrayTaskId, F::ArrayTaskStr],
        'b' => &[F::Gres, F::TresPerNode],
        'B' => &[F::State, F::BatchHost],
        'c' => &[F::NodeShape, F::CpusPerTask],
        'd' | 'I' | 'J' => &[F::NodeShape],
        'H' => &[F::SocketsPerNode],
        'z' => &[F::SocketsPerNode, F::NodeShape],
        'C' => &[F::NumCpus],
        'D' => &[F::NumNodes],
        'e' => &[F::EndTime],
        'E' => &[F::Dependency, F::Reason],
        'f' => &[F::Features],
        'g' | 'G' => &[F::Gid],
        'h' => &[F::Exclusive, F::NodeShape],
        'j' => &[F::Name],
        'k' => &[F::Comment],
        'l' => &[F::TimeLimit],
        'L' => &[F::TimeLimit, F::State, F::StartTime, F::EndTime],
        'm' => &[F::MemPerNodeMib, F::MemPerCpuMib, F::MemWholeNode],
        'M' => &[F::State, F::StartTime, F::EndTime],
        'n' => &[F::RequiredNodes],
        'N' => &[F::Nodes],
        'o' => &[F::Command],
        'p' | 'Q' => &[F::Priority],
        'P' => &[F::Partition],
        'q' => &[F::Qos],
        'r' => &[F::Reason],
        'R' => &[F::State, F::Nodes, F::Reason],
        'S' => &[F::StartTime],
        'V' => &[F::SubmitTime],
        't' | 'T' => &[F::State],
        'u' => &[F::User],
        'U' => &[F::Uid],
        'x' => &[F::ExcludedNodes],
        'y' => &[F::Nice],
        'Y' => &[F::SchedNodes],
        'Z' => &[F::WorkDir],
        _ => &[],
    }
}

/// The fields an `-O` column reads.
fn o2_fields(f: O2) -> &'static [JobField] {
    use JobField as F;
    match f {
        O2::Letter(ch) => letter_fields(ch),
        O2::TresAlloc => &[F::State, F::NumCpus, F::MemPerNodeMib, F::MemPerCpuMib, F::Exclusive, F::NumNodes, F::Gpus],
        O2::NumTasks => &[F::NumTasks],
        O2::ExitCode => &[F::ExitCode, F::ExitSignal],
        O2::StdOut => &[F::Stdout],
        O2::StdErr => &[F::Stderr],
        O2::Restarts => &[F::Restarts],
        O2::Requeue => &[F::Requeue],
        O2::NtPerNode | O2::NtPerCore => &[F::NodeShape],
        O2::Topology => &[F::Topology],
        O2::Preemptible => &[F::Preemptible],
        O2::MaxNodes => &[F::JobId, F::NumNodes, F::MaxNodes],
        O2::MinNodes => &[F::JobId, F::NumNodes],
        O2::Elastic => &[F::JobId],
        O2::TresPerJob => &[F::TresPerJob],
        O2::TresPerSocket => &[F::TresPerSocket],
        O2::TresPerTask => &[F::TresPerTask],
        O2::Deadline => &[F::Deadline],
        O2::TimeMin => &[F::TimeMin],
    }
}

/// The fields a `-S` key reads (`Key::of`).
fn key_fields(k: &str) -> &'static [JobField] {
    use JobField as F;
    match k {
        "i" | "A" => &[F::JobId, F::ArrayJobId, F::ArrayTaskId],
        "P" => &[F::Partition],
        "t" | "T" => &[F::State],
        "p" | "Q" => &[F::Priority],
        "u" => &[F::User],
        "U" => &[F::Uid],
        "j" => &[F::Name],
        "S" => &[F::StartTime],
        "V" => &[F::SubmitTime],
        "e" => &[F::EndTime],
        "D" => &[F::NumNodes],
        "C" => &[F::NumCpus],
        "N" => &[F::Nodes],
        "a" => &[F::Account],
        "q" => &[F::Qos],
        "r" => &[F::Reason],
        "y" => &[F::Nice],
        "l" => &[F::TimeLimit],
        _ => &[],
    }
}

/// One `%` field of `-o`: header and value.
fn o_field<'b>(ch: char, j: Option<&'b JobView<'_>>, now: i64, scratch: &'b mut String) -> Option<(&'static str, Cow<'b, str>)> {
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
    let Some(j) = j else { return Some((title, Cow::Borrowed(""))) };
    let pending = state(j).is_pending();
    let t = |x: Option<i64>| -> Cow<'b, str> { x.filter(|&v| v > 0).map_or(Cow::Borrowed("N/A"), |v| fmt_time(v).into()) };
    // Borrowed where the job holds the text already: 10,000 rows are 80,000 fields.
    let b = |s: &'b str| Cow::Borrowed(s);
    let or_null = |s: &'b Option<flotilla_proto::Str<'_>>| s.as_deref().map_or(Cow::Borrowed("(null)"), Cow::Borrowed);
    // Counts as `convert_num_unit` from `UNIT_NONE`, exact (print.c: 2048 is `2K`).
    let count = |n: u32| crate::usage_fmt::convert(f64::from(n), crate::usage_fmt::Units::default(), 1024.0, true);
    let star = |n: u32| -> Cow<'b, str> { if n == 0 { Cow::Borrowed("*") } else { Cow::Owned(count(n)) } };
    // Computed values are written into the caller's `scratch` (no String per field).
    macro_rules! put {
        ($($arg:tt)*) => {{
            use std::fmt::Write as _;
            scratch.clear();
            let _ = write!(scratch, $($arg)*);
            Cow::Borrowed(scratch.as_str())
        }};
    }
    let v: Cow<'b, str> = match ch {
        'a' => b(&j.account),
        'A' => put!("{}", j.job_id),
        'i' => match (j.array_job_id, j.array_task_id, &j.array_task_str) {
            (Some(_), _, _) => jobfmt::job_id_str(j).into(),
            _ => put!("{}", j.job_id),
        },
        'b' => jobfmt::tres_per_node(j).into(),
        'B' => {
            if pending || j.batch_host.is_empty() {
                b("n/a")
            } else {
                b(&j.batch_host)
            }
        }
        // Slurm's `pn_min_cpus` (print.c `_print_job_min_cpus`), not the CPUs a node holds.
        'c' => count(jobfmt::min_cpus(&j.node_shape, j.cpus_per_task)).into(),
        'C' => put!("{}", j.num_cpus),
        'd' => jobfmt::mem_str(j.node_shape.tmp_disk_mib).into(),
        'D' => put!("{}", j.num_nodes),
        'e' => t(j.end_time),
        'E' => jobfmt::dependency_str(j).into(),
        'f' => or_null(&j.features),
        'F' => put!("{}", j.array_job_id.unwrap_or(j.job_id)),
        'g' => common::group_name(j.gid).into(),
        'G' => put!("{}", j.gid),
        'h' => b(jobfmt::oversubscribe(j)),
        // `--sockets-per-node`, `--cores-per-socket`, `--threads-per-core` (or `-B`), `*`
        // when not given (print.c `_print_job_sockets` and friends).
        'H' => star(j.sockets_per_node),
        'I' => star(j.node_shape.cores_per_socket),
        'J' => star(j.node_shape.threads_per_core),
        'j' => b(&j.name),
        'k' => or_null(&j.comment),
        'K' => match (j.array_task_id, &j.array_task_str) {
            (Some(t), _) => t.to_string().into(),
            (None, Some(s)) => b(s),
            _ => b("N/A"),
        },
        'l' => jobfmt::time_limit_str(j).into(),
        'L' => jobfmt::time_left_str(j, now).into(),
        // Slurm's `pn_min_memory` as asked: per CPU, per node, or 0 for a whole node's
        // (`--mem=0`, `MinMemoryNode=0`; goldens-extra 0923).
        'm' => match (j.mem_whole_node, j.mem_per_cpu_mib) {
            (true, _) => b("0"),
            (false, Some(m)) => jobfmt::mem_str(m).into(),
            (false, None) => jobfmt::mem_str(j.mem_per_node_mib).into(),
        },
        'M' => {
            jobfmt::time_used_into(j, now, scratch);
            Cow::Borrowed(scratch.as_str())
        }
        'n' => jobfmt::node_list_normalized(j.required_nodes.iter().map(|s| s.as_str())).into(),
        'N' => b(&j.nodes),
        'o' => or_null(&j.command),
        'O' => b("0"),
        'p' => format!("{:.14}", j.priority as f64 / f64::from(u32::MAX)).into(),
        'Q' => put!("{}", j.priority),
        'P' => b(&j.partition),
        'q' => b(&j.qos),
        'r' => b(&j.reason),
        // The node list of a running job, `(reason)` of a pending one.
        'R' => {
            if pending || j.nodes.is_empty() {
                put!("({})", j.reason)
            } else {
                b(&j.nodes)
            }
        }
        'S' => t(j.start_time),
        // `_print_job_submit_time`: the submission time as `slurm_make_time_str` writes it.
        'V' => t(Some(j.submit_time)),
        't' => b(state(j).compact()),
        'T' => b(state(j).as_str()),
        'u' => b(&j.user),
        'U' => put!("{}", j.uid),
        'v' | 'w' | 'W' => b("(null)"),
        'x' => jobfmt::node_list_normalized(j.excluded_nodes.iter().map(|s| s.as_str())).into(),
        'X' => b("N/A"),
        'y' => put!("{}", j.nice),
        'Y' => {
            if j.sched_nodes.is_empty() {
                b("(null)")
            } else {
                b(&j.sched_nodes)
            }
        }
        'z' => format!("{}:{}:{}", star(j.sockets_per_node), star(j.node_shape.cores_per_socket), star(j.node_shape.threads_per_core)).into(),
        'Z' => b(&j.work_dir),
        _ => b(""),
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
    parse_pieces(fmt, |ch| o_field(ch, None, 0, &mut String::new()).is_some(), "job", io)
}

/// An `-o` format's pieces: `valid` says which letters are fields; any other is reported
/// (`Invalid WHAT format specification: X`) and kept as text.
fn parse_pieces(fmt: &str, valid: impl Fn(char) -> bool, what: &str, io: &mut Io<'_>) -> Vec<Piece> {
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
        if valid(ch) {
            out.push(Piece::Field { ch, width, right });
            if !rest.is_empty() {
                out.push(Piece::Text(rest));
            }
        } else {
            io.err(&format!("squeue: error: Invalid {what} format specification: {ch}\n"));
            out.push(Piece::Text(format!("%{tok}")));
        }
    }
    out
}

/// `-o`'s table for `rows` (a header first when `header`).
#[cfg(test)]
fn render_o<'a>(fmt: &str, rows: impl Iterator<Item = JobView<'a>>, header: bool, now: i64, io: &mut Io<'_>) -> String {
    let r = Renderer::o(fmt, io);
    let (mut out, mut scratch) = (String::new(), String::new());
    if header {
        r.line(&mut out, None, now, &mut scratch);
    }
    for j in rows {
        r.line(&mut out, Some(&j), now, &mut scratch);
    }
    out
}

/// A parsed `-o` or `-O` format: writes the header and the line of each job.
enum Renderer {
    /// `-o`.
    O(Vec<Piece>),
    /// `-O`, and the elastic ranges its size columns read (by job id; [`Renderer::needs_sizes`]).
    O2(Vec<Col>, Sizes),
}

/// Elastic jobs' ranges (`Request::QueryElastic`) by job id, for `-O MinNodes,MaxNodes,Elastic`.
type Sizes = std::collections::BTreeMap<u64, flotilla_proto::ElasticInfo>;

/// One `-O` column.
struct Col {
    title: &'static str,
    f: O2,
    width: usize,
    right: bool,
    suffix: String,
}

impl Renderer {
    /// `-o FMT` (invalid specs are reported on `io` once, here).
    fn o(fmt: &str, io: &mut Io<'_>) -> Renderer {
        Renderer::O(parse_o(fmt, io))
    }

    /// `-O FMT` (invalid names are reported on `io` once, here).
    fn o2(fmt: &str, io: &mut Io<'_>) -> Renderer {
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
            cols.push(Col { title, f, width, right, suffix });
        }
        Renderer::O2(cols, Sizes::new())
    }

    /// Whether a column reads jobs' elastic ranges (asked of the controller before the lines
    /// are written).
    fn needs_sizes(&self) -> bool {
        matches!(self, Renderer::O2(cols, _) if cols.iter().any(|c| matches!(c.f, O2::MinNodes | O2::MaxNodes | O2::Elastic)))
    }

    /// Appends the line of `j` (the header when `None`) to `out`, fields padded in place (no
    /// String per line or per field: a 10,000-job queue is 80,000 fields).
    fn line(&self, out: &mut String, j: Option<&JobView<'_>>, now: i64, scratch: &mut String) {
        match self {
            Renderer::O(pieces) => {
                for p in pieces {
                    match p {
                        Piece::Text(t) => out.push_str(t),
                        Piece::Field { ch, width, right } => {
                            let (title, v) = o_field(*ch, j, now, scratch).expect("validated");
                            common::push_field(out, if j.is_some() { &v } else { title }, *width, *right);
                        }
                    }
                }
            }
            Renderer::O2(cols, sizes) => {
                for c in cols {
                    match j {
                        Some(j) => common::push_field(out, &o2_value(c.f, j, sizes, now, scratch), c.width, c.right),
                        None => common::push_field(out, c.title, c.width, c.right),
                    }
                    out.push_str(&c.suffix);
                }
            }
        }
        out.push('\n');
    }
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
        "tres-per-job" => ("TRES_PER_JOB", O2::TresPerJob),
        "tres-per-node" => ("TRES_PER_NODE", O2::Letter('b')),
        "tres-per-socket" => ("TRES_PER_SOCKET", O2::TresPerSocket),
        "tres-per-task" => ("TRES_PER_TASK", O2::TresPerTask),
        "userid" => ("UID", O2::Letter('U')),
        "username" => ("USER", O2::Letter('u')),
        "workdir" => ("WORK_DIR", O2::Letter('Z')),
        "restartcnt" => ("RESTARTCNT", O2::Restarts),
        "sockets" => ("SOCKETS_PER_NODE", O2::Letter('H')),
        "cores" => ("CORES_PER_SOCKET", O2::Letter('I')),
        "threads" => ("THREADS_PER_CORE", O2::Letter('J')),
        "ntpernode" => ("NTASKS_PER_NODE", O2::NtPerNode),
        "ntpercore" => ("NTASKS_PER_CORE", O2::NtPerCore),
        "requeue" => ("REQUEUE", O2::Requeue),
        "topology" => ("TOPOLOGY", O2::Topology),
        "preemptible" => ("PREEMPTIBLE", O2::Preemptible),
        "maxnodes" => ("MAX_NODES", O2::MaxNodes),
        "minnodes" => ("MIN_NODES", O2::MinNodes),
        "elastic" => ("ELASTIC", O2::Elastic),
        "deadline" => ("DEADLINE", O2::Deadline),
        "mintime" => ("TIME_MIN", O2::TimeMin),
        _ => return None,
    };
    Some((title, f))
}

#[derive(Debug, Clone, Copy)]
enum O2 {
    Letter(char),
    Deadline,
    TimeMin,
    TresAlloc,
    NumTasks,
    ExitCode,
    StdOut,
    StdErr,
    Restarts,
    Requeue,
    /// `--ntasks-per-node` (0 when not given, print.c `_print_job_ntasks_per_node`).
    NtPerNode,
    /// `--ntasks-per-core` (`N/A` when not given).
    NtPerCore,
    Topology,
    Preemptible,
    /// Slurm's `MaxNodes`; an elastic job's node maximum.
    MaxNodes,
    /// Flotilla's: an elastic job's node minimum.
    MinNodes,
    /// Flotilla's: an elastic job's unit and range (`nodes:2-8`, `gpus:4-16`).
    Elastic,
    TresPerJob,
    TresPerSocket,
    TresPerTask,
}

/// `-O MinNodes` / `MaxNodes` of `j`: an elastic job's node range (`max` for `MaxNodes`),
/// else for `MaxNodes` the job's `-N MIN-MAX` maximum, and its node count for a job without
/// one, as Slurm 22.05's `_print_job_max_nodes` (src/squeue/print.c) prints `max_nodes` or,
/// when 0, `num_nodes`. A GPU-granular elastic job's range is in GPUs, so its node count is
/// printed (its range is in `-O Elastic`).
fn node_bound(j: &JobView<'_>, sizes: &Sizes, max: bool) -> String {
    match sizes.get(&j.job_id) {
        Some(e) if e.unit == "nodes" => if max { e.max } else { e.min }.to_string(),
        _ if max && j.max_nodes != 0 => j.max_nodes.to_string(),
        _ => j.num_nodes.to_string(),
    }
}

/// `-O Elastic` of `j`: `UNIT:MIN-MAX` for an elastic job, `N/A` for a rigid one.
fn elastic_range(j: &JobView<'_>, sizes: &Sizes) -> String {
    match sizes.get(&j.job_id) {
        Some(e) if !e.unit.is_empty() => format!("{}:{}-{}", e.unit, e.min, e.max),
        _ => "N/A".into(),
    }
}

fn o2_value<'b>(f: O2, j: &'b JobView<'_>, sizes: &Sizes, now: i64, scratch: &'b mut String) -> Cow<'b, str> {
    match f {
        O2::Letter(ch) => o_field(ch, Some(j), now, scratch).map(|x| x.1).unwrap_or_default(),
        // `_print_job_tres_alloc`: the allocated TRES, else (pending) the requested ones,
        // `scontrol`'s `TRES=` either way, billing included (golden 0175: a pending job's
        // value cut at 20 characters is `cpu=1,mem=1G,node=1,`).
        O2::TresAlloc => jobfmt::tres_str(j).into(),
        O2::NumTasks => j.num_tasks.to_string().into(),
        O2::ExitCode => format!("{}:{}", j.exit_code, j.exit_signal).into(),
        O2::StdOut => j.stdout.as_deref().map_or(Cow::Borrowed(""), Cow::Borrowed),
        O2::StdErr => j.stderr.as_deref().map_or(Cow::Borrowed(""), Cow::Borrowed),
        O2::Restarts => j.restarts.to_string().into(),
        // `_print_job_deadline` (`_print_time`: `N/A` for none) and `_print_job_min_time`
        // (`_print_secs` of the minutes, `0:00` for none).
        O2::Deadline => j.deadline.map_or(Cow::Borrowed("N/A"), |d| fmt_time(d).into()),
        O2::TimeMin => flotilla_core::time::squeue_secs(i64::from(j.time_min.unwrap_or(0)) * 60).into(),
        O2::Requeue => u8::from(j.requeue).to_string().into(),
        O2::NtPerNode => j.node_shape.ntasks_per_node.to_string().into(),
        O2::NtPerCore => match j.node_shape.ntasks_per_core {
            0 => "N/A".into(),
            n => n.to_string().into(),
        },
        O2::Topology => Cow::Borrowed(&j.topology),
        O2::Preemptible => Cow::Borrowed(if j.preemptible { "YES" } else { "NO" }),
        O2::MaxNodes => node_bound(j, sizes, true).into(),
        O2::MinNodes => node_bound(j, sizes, false).into(),
        O2::Elastic => elastic_range(j, sizes).into(),
        // Slurm 22.05 `squeue/print.c` `_print_job_tres_per_job` (and `_socket`, `_task`):
        // the job's string as submitted, `N/A` without one.
        O2::TresPerJob => Cow::Borrowed(j.tres_per_job.as_deref().unwrap_or("N/A")),
        O2::TresPerSocket => Cow::Borrowed(j.tres_per_socket.as_deref().unwrap_or("N/A")),
        O2::TresPerTask => Cow::Borrowed(j.tres_per_task.as_deref().unwrap_or("N/A")),
    }
}

/// A step as `-s` prints it.
struct StepLine<'a> {
    id: String,
    name: &'a str,
    partition: &'a str,
    user: &'a str,
    uid: u32,
    start: i64,
    used: String,
    nodes: &'a str,
    ntasks: u32,
}

/// The title of step field `ch` of an `-o` format under `-s` (Slurm 22.05 `squeue/opts.c`
/// `parse_format` with `step_flag`, `print.c` `_print_step_*`); `None`: not a step field.
/// (`%b`, vestigial in 22.05, is not offered.)
fn step_title(ch: char) -> Option<&'static str> {
    Some(match ch {
        'A' => "TASKS",
        'i' => "STEPID",
        'j' => "NAME",
        'l' => "TIME_LIMIT",
        'M' => "TIME",
        'N' => "NODELIST",
        'P' => "PARTITION",
        'S' => "START_TIME",
        'U' => "UID",
        'u' => "USER",
        _ => return None,
    })
}

/// The value of step field `ch` ([`step_title`]). A step's own time limit is none
/// (`UNLIMITED`: srun steps here take none of their own).
fn step_value(ch: char, s: &StepLine<'_>) -> String {
    match ch {
        'A' => s.ntasks.to_string(),
        'i' => s.id.clone(),
        'j' => s.name.to_string(),
        'l' => "UNLIMITED".into(),
        'M' => s.used.clone(),
        'N' => s.nodes.to_string(),
        'P' => s.partition.to_string(),
        'S' => flotilla_core::time::fmt_time(s.start),
        'U' => s.uid.to_string(),
        _ => s.user.to_string(),
    }
}

/// `-s`: per running job, its `srun` steps (`N.0`, `N.1`, ... with the step's name and
/// nodes), then its `.batch` step on its batch host, each as `-o` says (else
/// `%.15i %.8j %.9P %.8u %.9M %N`).
fn print_steps(p: &Params, rows: &[JobView<'_>], steps: &[flotilla_proto::step::StepInfo], io: &mut Io<'_>, now: i64) {
    let fmt = p.format.clone().unwrap_or_else(|| STEP_FMT.into());
    let pieces = parse_pieces(&fmt, |ch| step_title(ch).is_some(), "job step", io);
    let mut s = String::new();
    let line = |s: &mut String, st: Option<&StepLine<'_>>| {
        for piece in &pieces {
            match piece {
                Piece::Text(t) => s.push_str(t),
                Piece::Field { ch, width, right } => match st {
                    Some(st) => common::push_field(s, &step_value(*ch, st), *width, *right),
                    // Slurm's START_TIME title is left-justified whatever the format says.
                    None => common::push_field(s, step_title(*ch).unwrap_or(""), *width, *right && *ch != 'S'),
                },
            }
        }
        s.push('\n');
    };
    if !p.noheader {
        line(&mut s, None);
    }
    let mut running: Vec<&JobView<'_>> = rows.iter().filter(|j| state(j) == JobStateWire::Running).collect();
    running.sort_by_key(|j| (j.partition.clone(), j.job_id));
    for j in running {
        let mut mine: Vec<&flotilla_proto::step::StepInfo> = steps.iter().filter(|st| st.job_id == j.job_id).collect();
        mine.sort_by_key(|st| st.step_id);
        for st in mine {
            let l = StepLine {
                id: format!("{}.{}", jobfmt::job_id_str(j), st.step_id),
                name: &st.name,
                partition: &st.partition,
                user: &st.user,
                uid: j.uid,
                start: st.start_time,
                used: flotilla_core::time::squeue_secs((now - st.start_time).max(0)),
                nodes: &st.nodes,
                ntasks: st.ntasks,
            };
            line(&mut s, Some(&l));
        }
        let l = StepLine {
            id: format!("{}.batch", jobfmt::job_id_str(j)),
            name: "batch",
            partition: &j.partition,
            user: &j.user,
            uid: j.uid,
            start: j.start_time.unwrap_or(now),
            used: jobfmt::time_used_str(j, now),
            nodes: &j.batch_host,
            ntasks: 1,
        };
        line(&mut s, Some(&l));
    }
    io.out(&s);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slurm's `_filter_job` `partial_array` (golden 0189: `squeue -j 64_3` prints `64_3`
    /// for a task of the pending remainder `64_[0-5%2]`).
    #[test]
    fn named_tasks_of_a_pending_remainder_show_alone() {
        let mut meta = JobView { job_id: 64, array_job_id: Some(64), ..JobView::default() };
        meta.array_task_str = Some("2-5%2".into());
        let refs = |s: &str| -> Vec<JobRef> { s.split(',').map(|r| parse_job_ref(r).unwrap()).collect() };
        let shown = |s: &str| partial_array(&refs(s), &meta).map(|k| (k.array_task_id, k.array_task_str.map(|t| t.to_string())));
        assert_eq!(shown("64_3"), Some((Some(3), None)));
        assert_eq!(shown("64_3,64_5,64_4"), Some((None, Some("3-5".into()))), "several: their ranges, no throttle");
        assert_eq!(shown("64_2,64_4"), Some((None, Some("2,4".into()))));
        assert_eq!(shown("64_3,64_0"), Some((Some(3), None)), "a task not pending is not shown");
        assert_eq!(shown("64"), None, "the whole array");
        assert_eq!(shown("64,64_3"), None, "the first entry that selects it decides");
        assert_eq!(shown("64_0,64_3"), Some((Some(3), None)), "an entry that does not select it does not decide");
        assert_eq!(shown("65_3"), None);
        let task = JobView { job_id: 70, array_job_id: Some(64), array_task_id: Some(1), ..JobView::default() };
        assert!(partial_array(&refs("64_1"), &task).is_none(), "a task record is shown as it is");
    }

    #[test]
    fn job_ids_read_as_slurm_s_32_bit_int() {
        assert_eq!(squeue_job_id("74"), Some(74));
        assert_eq!(squeue_job_id("4294967295"), None);
        assert_eq!(squeue_job_id("4294967296"), None);
        assert_eq!(squeue_job_id("4294967297"), Some(1));
        assert_eq!(squeue_job_id("2147483648"), None);
        assert_eq!(squeue_job_id("abc"), None);
        assert_eq!(squeue_job_id("0"), None);
        assert_eq!(squeue_job_id("12abc"), Some(12));
        assert_eq!(squeue_job_id("99999999999999999999"), None, "saturated at LONG_MAX, -1 as an int");
        assert_eq!(scancel_job_id("4294967296"), Some(0));
        assert_eq!(scancel_job_id("4294967295"), Some(4294967295));
        assert_eq!(scancel_job_id("-3"), None);
    }
    use flotilla_proto::JobInfo;

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
            render_o(fmt, rows.iter().map(JobView::from), true, 0, &mut io)
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

    /// `-O NumNodes,MinNodes,MaxNodes,Elastic`: the current size beside an elastic job's
    /// range (nodes, or GPUs with the node count for the node columns); a rigid job's node
    /// count in both, `N/A` for its range.
    #[test]
    fn size_columns_show_current_and_elastic_range() {
        let mut grown = job(7, JobStateWire::Running, 5);
        grown.num_nodes = 3;
        let mut pending = job(8, JobStateWire::Pending, 5);
        pending.num_nodes = 2;
        let mut by_gpu = job(9, JobStateWire::Running, 5);
        by_gpu.num_nodes = 2;
        let rigid = job(10, JobStateWire::Running, 5);
        let e = |job_id, unit: &str, min, max| flotilla_proto::ElasticInfo { job_id, unit: unit.into(), min, max, ..Default::default() };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let env = |_: &str| None;
        let mut io = Io { out: &mut out, err: &mut err, env: &env, stdin: None };
        let mut r = Renderer::o2("JobId:5,NumNodes:.6,MinNodes:.10,MaxNodes:.10,Elastic:.14", &mut io);
        assert!(r.needs_sizes());
        assert!(!Renderer::o2("JobId,NumNodes", &mut io).needs_sizes());
        if let Renderer::O2(_, sizes) = &mut r {
            *sizes = [e(7, "nodes", 2, 8), e(8, "nodes", 2, 4), e(9, "gpus", 4, 16)].into_iter().map(|e| (e.job_id, e)).collect();
        }
        let mut text = String::new();
        r.line(&mut text, None, 0, &mut String::new());
        for j in [&grown, &pending, &by_gpu, &rigid] {
            r.line(&mut text, Some(&JobView::from(j)), 0, &mut String::new());
        }
        assert_eq!(
            text,
            "\
JOBID NODES MIN_NODES MAX_NODES       ELASTIC
7         3         2         8     nodes:2-8
8         2         2         4     nodes:2-4
9         2         2         2     gpus:4-16
10        1         1         1           N/A
"
        );
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
        assert_eq!(sorted_ids(&rows, "P,t,-p"), vec![58, 57, 53, 59]);
        // Reversed and unknown keys; ties newest first.
        assert_eq!(sorted_ids(&rows, "-i"), vec![59, 58, 57, 53]);
        assert_eq!(sorted_ids(&rows, "t,Z"), vec![59, 58, 57, 53]);
        assert_eq!(sorted_ids(&rows, "-P,p"), vec![59, 57, 58, 53]);
    }

    /// Rows equal in every key: Slurm's order before its key sorts (golden 0199): jobs with
    /// a start time (a job cancelled pending: its end) latest first, equal times oldest
    /// first, then jobs without one newest first.
    #[test]
    fn ties_by_start_time_then_newest_without_one() {
        let cancelled = |id: u64, at: i64| {
            let mut j = job(id, JobStateWire::Cancelled, 0);
            j.end_time = Some(at);
            j
        };
        let rows = vec![
            cancelled(14, 100),
            cancelled(15, 100),
            cancelled(41, 200),
            cancelled(42, 200),
            job(59, JobStateWire::Pending, 0),
            job(60, JobStateWire::Pending, 0),
        ];
        // The pending ones sort apart by state; inside each state: the order above.
        assert_eq!(sorted_ids(&rows, "P,t,-p"), vec![41, 42, 14, 15, 60, 59]);
        let mut run = job(61, JobStateWire::Running, 0);
        run.start_time = Some(150);
        let mut all = rows.clone();
        all.push(run);
        assert_eq!(sorted_ids(&all, "P"), vec![41, 42, 61, 14, 15, 60, 59]);
    }

    /// `--start`'s sort (`S`, golden 0178): planned starts soonest first, then the jobs
    /// without a start time oldest first (the `S` comparison reverses the pre-sort's order of
    /// those, newest first).
    #[test]
    fn start_sort_puts_jobs_without_a_start_after_oldest_first() {
        let at = |id: u64, t: Option<i64>| {
            let mut j = job(id, JobStateWire::Pending, 0);
            j.start_time = t;
            j
        };
        let rows = vec![at(57, Some(300)), at(58, Some(200)), at(59, None), at(60, Some(900)), at(61, None), at(67, None)];
        assert_eq!(sorted_ids(&rows, "S"), vec![58, 57, 60, 59, 61, 67]);
    }

    /// The job ids of `rows` after squeue's sort by `spec`, through the rows squeue keeps
    /// (line positions and sort keys).
    fn sorted_ids(rows: &[JobInfo], spec: &str) -> Vec<u64> {
        let keys = SortKeys::parse(spec);
        let views: Vec<JobView<'_>> = rows.iter().map(JobView::from).collect();
        let mut key_vals = Vec::new();
        let mut out: Vec<Row> = views.iter().map(|j| Row::new(j, 0..0, &keys, &mut key_vals)).collect();
        keys.sort(&mut out, &key_vals);
        out.iter().map(|r| r.base.2).collect()
    }

    /// Jobs in many states with every field set, for the field-subset tests.
    fn rich_jobs() -> Vec<JobInfo> {
        let mut run = job(61, JobStateWire::Running, 9);
        run.nodes = "gpu[01-02]".into();
        run.batch_host = "gpu01".into();
        run.start_time = Some(1_000);
        run.num_nodes = 2;
        run.num_cpus = 8;
        run.gres = vec![flotilla_proto::GresSpec { name: "gpu".into(), gpu_type: Some("h100".into()), count: 4 }];
        run.gpus = 8;
        run.comment = Some("hello".into());
        run.command = Some("/home/a/train.sh --lr 3".into());
        run.required_nodes = vec!["gpu01".into()];
        run.excluded_nodes = vec!["gpu04".into()];
        run.exclusive = true;
        run.work_dir = "/home/a".into();
        run.stdout = Some("/home/a/out".into());
        run.stderr = Some("/home/a/err".into());
        run.account = "research".into();
        run.qos = "normal".into();
        run.uid = 2001;
        run.gid = 2001;
        run.nice = 5;
        run.num_tasks = 4;
        run.topology = "node".into();
        run.preemptible = true;
        run.restarts = 1;
        run.requeue = true;
        let mut pend = job(62, JobStateWire::Pending, 7);
        pend.array_job_id = Some(62);
        pend.array_task_str = Some("0-5%2".into());
        pend.reason = "Dependency".into();
        pend.dependency = Some("afterok:61".into());
        pend.sched_nodes = "gpu03".into();
        pend.start_time = Some(5_000);
        pend.end_time = Some(5_600);
        let mut done = job(63, JobStateWire::Failed, 0);
        done.array_job_id = Some(62);
        done.array_task_id = Some(3);
        done.start_time = Some(100);
        done.end_time = Some(400);
        done.exit_code = 3;
        done.exit_signal = 9;
        done.time_limit = Some(flotilla_proto::TimeLimitWire::Unlimited);
        done.submit_time = 50;
        vec![run, pend, done]
    }

    /// `squeue` asks for a subset of the fields: every format letter, `-O` column, sort key
    /// and filter reads the same from a job carrying only the fields `needed_fields` names as
    /// from the whole job (a letter missing a field it reads fails here).
    #[test]
    fn needed_fields_read_as_all_fields() {
        let now = 2_000;
        let jobs = rich_jobs();
        let subset = |fields: &[JobField], j: &JobInfo| -> ((), QueueRows) {
            ((), QueueRows::encode(fields, [JobView::from(j)].into_iter()).unwrap())
        };
        let keys = SortKeys::parse("");
        let mut letters = 0;
        for ch in ('a'..='z').chain('A'..='Z') {
            if o_field(ch, None, 0, &mut String::new()).is_none() {
                continue;
            }
            letters += 1;
            let fields = needed_fields(&Params::default(), &format!("%.10{ch}"), &keys);
            for j in &jobs {
                let (_, rows) = subset(&fields, j);
                let (sub, _) = QueueRows::decode_one(&fields, &rows.bytes).unwrap();
                let full = JobView::from(j);
                let (mut s1, mut s2) = (String::new(), String::new());
                assert_eq!(o_field(ch, Some(&sub), now, &mut s1), o_field(ch, Some(&full), now, &mut s2), "%{ch} of job {}", j.job_id);
            }
        }
        assert!(letters > 40, "{letters} letters");
        for name in [
            "account", "arrayjobid", "arraytaskid", "batchhost", "command", "comment", "dependency", "endtime",
            "exit_code", "groupname", "jobarrayid", "jobid", "minmemory", "name", "nodelist", "numcpus",
            "numnodes", "numtasks", "partition", "priority", "qos", "reason", "reasonlist", "reqnodes",
            "exclnodes", "schednodes", "starttime", "state", "stderr", "stdout", "submittime", "timeleft",
            "timelimit", "timeused", "tres-alloc", "tres-per-job", "tres-per-node", "tres-per-socket", "tres-per-task",
            "userid", "username", "workdir",
            "restartcnt", "requeue", "topology", "preemptible", "maxnodes", "minnodes", "elastic", "deadline", "mintime",
        ] {
            // Every job elastic, so that the size columns read their job id too.
            let sizes: Sizes = jobs
                .iter()
                .map(|j| (j.job_id, flotilla_proto::ElasticInfo { job_id: j.job_id, unit: "nodes".into(), min: 1, max: j.job_id as u32, ..Default::default() }))
                .collect();
            let p = Params { format2: Some(format!("{name}:10")), ..Params::default() };
            let fields = needed_fields(&p, "", &keys);
            let (_, o2) = o2_field(name).expect(name);
            for j in &jobs {
                let (_, rows) = subset(&fields, j);
                let (sub, _) = QueueRows::decode_one(&fields, &rows.bytes).unwrap();
                let (mut s1, mut s2) = (String::new(), String::new());
                let full = JobView::from(j);
                assert_eq!(o2_value(o2, &sub, &sizes, now, &mut s1), o2_value(o2, &full, &sizes, now, &mut s2), "-O {name} of job {}", j.job_id);
            }
        }
        for k in ["i", "A", "P", "t", "T", "p", "Q", "u", "U", "j", "S", "V", "e", "D", "C", "N", "a", "q", "r", "y", "l"] {
            let keys = SortKeys::parse(k);
            let fields = needed_fields(&Params::default(), "", &keys);
            for j in &jobs {
                let (_, rows) = subset(&fields, j);
                let (sub, _) = QueueRows::decode_one(&fields, &rows.bytes).unwrap();
                assert_eq!(Key::of(k, &sub), Key::of(k, &JobView::from(j)), "-S {k}");
            }
        }
        let p = Params {
            users: vec![2001],
            names: vec!["j61".into()],
            partitions: vec!["batch".into()],
            accounts: vec!["research".into()],
            qos: vec!["normal".into()],
            nodes: vec!["gpu02".into()],
            all_states: true,
            ..Params::default()
        };
        let fields = needed_fields(&p, "", &SortKeys::parse(""));
        for j in &jobs {
            let (_, rows) = subset(&fields, j);
            let (sub, _) = QueueRows::decode_one(&fields, &rows.bytes).unwrap();
            assert_eq!(selected(&p, &sub), selected(&p, &JobView::from(j)), "filters, job {}", j.job_id);
        }
        assert!(selected(&p, &JobView::from(&jobs[0])), "the filters select the running job");
    }

    #[test]
    fn job_refs() {
        assert_eq!(parse_job_ref("53"), Some(JobRef::id(53)));
        assert_eq!(parse_job_ref("64_3").unwrap().tasks, Some(vec![3]));
        assert_eq!(parse_job_ref("64_[3-4]").unwrap().tasks, Some(vec![3, 4]));
        assert_eq!(parse_job_ref("abc"), None);
        // squeue -j itself reads one task after `_` with strtol (goldens-extra 1211).
        assert_eq!(squeue_operand("64_3").unwrap().tasks, Some(vec![3]));
        assert_eq!(squeue_operand("64_[3-4]").unwrap().tasks, Some(vec![0]));
        assert_eq!(squeue_operand("12_[1-"), Some(JobRef { job_id: 12, tasks: Some(vec![0]) }));
        assert_eq!(squeue_operand("12x"), Some(JobRef::id(12)));
        assert_eq!(squeue_operand("0"), None);
    }

    /// scancel's operands (`_xlate_job_step_ids`; goldens-extra 1212).
    #[test]
    fn scancel_operands() {
        use crate::scancel::scancel_operand;
        assert_eq!(scancel_operand("12.abc"), Err("12.abc".into()));
        assert_eq!(scancel_operand("12.3"), Ok(vec![(JobRef::id(12), Some(3))]));
        assert_eq!(scancel_operand("12x"), Err("12x".into()));
        assert_eq!(scancel_operand("12,13_2.0"), Ok(vec![(JobRef::id(12), None), (JobRef { job_id: 13, tasks: Some(vec![2]) }, Some(0))]));
        assert_eq!(scancel_operand("12,abc"), Err("abc".into()));
        assert_eq!(scancel_operand("12_*"), Ok(vec![(JobRef::id(12), None)]));
        assert_eq!(scancel_operand("12_[1-3]").unwrap()[0].0.tasks, Some(vec![1, 2, 3]));
        assert_eq!(scancel_operand("12_[1-3]x"), Err("12_[1-3]x".into()));
        assert_eq!(scancel_operand("0"), Err("0".into()));
        assert_eq!(scancel_operand("12.-1"), Err("12.-1".into()));
    }
}
