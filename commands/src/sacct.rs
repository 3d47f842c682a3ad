//! `sacct`, as Slurm 22.05's `src/sacct`: options parsed by glibc-style `getopt_long` (so
//! `sacct -nu alice -o Account%256 | tail -1` run without a shell fails with
//! `sacct: invalid option -- '1'`, exit 1, as snakemake expects, CONTRACT.md §A-20), the field
//! table with Slurm's default widths (`-o Name%N` widens, negative = left-aligned, longer values
//! end in `+`), `-p`/`-P`/`--delimiter`, `-n`, `-X`, `-b`, `-l`, `-e`, and the selection:
//!
//! - users: `-u` names; `-a` (or `-u -1`) all users; without `-u`, all users when `-j` or `-N`
//!   is given or when run by root, else the caller's own jobs (Slurm `options.c`);
//! - time window: `-S` defaults to midnight today, or to now with `-s`, and to no bound at all
//!   with `-j`; `-E` defaults to now, or to the start with `-s` (golden 0295: `-s F -S today`
//!   without `-E` selects nothing); the window itself is applied by the controller
//!   ([`flotilla_proto::AcctQuery`]);
//! - `-j` takes repeated, comma-separated `N`, `N_T`, `N.step`, `N_T.step`.
//!
//! Records come from the controller's accounting tables in one request; this module only
//! formats them.

use crate::common::{self, Ctl, Io};
use crate::getopt::{getopt_long, lo, HasArg, LongOpt};
use flotilla_core::time::{fmt_time, mins2time_str, parse_time_spec, secs2time_str};
use crate::usage_fmt::Units;
use flotilla_proto::{AcctJob, AcctJobRef, AcctQuery, AcctStep, Request, Response, StepStats};

const O_DELIMITER: u32 = 1000;
const O_NAME: u32 = 1001;
const O_IGNORED: u32 = 1002;
const O_IGNORED_OPT: u32 = 1004;
const O_YAML: u32 = 1900;
const O_NOCONVERT: u32 = 1005;
const O_UNITS: u32 = 1006;
const O_JSON: u32 = 1007;

const fn c(ch: char) -> u32 {
    ch as u32
}

/// Slurm 22.05's short options for sacct.
pub const SHORTS: &str = "aA:bcC:DeE:f:F:g:hi:I:j:k:K:lLM:nN:o:pPq:r:R:s:S:Ttu:UvVW:x:X";

/// sacct's long options (Slurm 22.05 `sacct/options.c`).
pub const LONGS: &[LongOpt] = &[
    lo("allusers", HasArg::No, c('a')),
    lo("accounts", HasArg::Required, c('A')),
    lo("allocations", HasArg::No, c('X')),
    lo("brief", HasArg::No, c('b')),
    lo("completion", HasArg::No, c('c')),
    lo("constraints", HasArg::Required, c('C')),
    lo("delimiter", HasArg::Required, O_DELIMITER),
    lo("duplicates", HasArg::No, c('D')),
    lo("federation", HasArg::No, O_IGNORED),
    lo("helpformat", HasArg::No, c('e')),
    lo("help-fields", HasArg::No, c('e')),
    lo("endtime", HasArg::Required, c('E')),
    lo("file", HasArg::Required, c('f')),
    lo("flags", HasArg::Required, c('F')),
    lo("gid", HasArg::Required, c('g')),
    lo("group", HasArg::Required, c('g')),
    lo("help", HasArg::No, c('h')),
    lo("local", HasArg::No, O_IGNORED),
    lo("name", HasArg::Required, O_NAME),
    lo("nnodes", HasArg::Required, c('i')),
    lo("ncpus", HasArg::Required, c('I')),
    lo("jobs", HasArg::Required, c('j')),
    lo("json", HasArg::Optional, O_JSON),
    lo("timelimit-min", HasArg::Required, c('k')),
    lo("timelimit-max", HasArg::Required, c('K')),
    lo("long", HasArg::No, c('l')),
    lo("allclusters", HasArg::No, c('L')),
    lo("cluster", HasArg::Required, c('M')),
    lo("clusters", HasArg::Required, c('M')),
    lo("nodelist", HasArg::Required, c('N')),
    lo("noconvert", HasArg::No, O_NOCONVERT),
    lo("units", HasArg::Required, O_UNITS),
    lo("noheader", HasArg::No, c('n')),
    lo("fields", HasArg::Required, c('o')),
    lo("format", HasArg::Required, c('o')),
    lo("parsable", HasArg::No, c('p')),
    lo("parsable2", HasArg::No, c('P')),
    lo("qos", HasArg::Required, c('q')),
    lo("partition", HasArg::Required, c('r')),
    lo("reason", HasArg::Required, c('R')),
    lo("state", HasArg::Required, c('s')),
    lo("starttime", HasArg::Required, c('S')),
    lo("truncate", HasArg::No, c('T')),
    lo("uid", HasArg::Required, c('u')),
    lo("usage", HasArg::No, c('U')),
    lo("user", HasArg::Required, c('u')),
    lo("verbose", HasArg::No, c('v')),
    lo("version", HasArg::No, c('V')),
    lo("wckeys", HasArg::Required, c('W')),
    lo("whole-hetjob", HasArg::Optional, O_IGNORED_OPT),
    lo("associations", HasArg::Required, c('x')),
    lo("yaml", HasArg::Optional, O_YAML),
];

/// Slurm 22.05's sacct field table: name and default width (negative: left-aligned), in the
/// order `--helpformat` lists them (golden 0304).
pub const FIELDS: &[(&str, i32)] = &[
    ("Account", 10),
    ("AdminComment", 15),
    ("AllocCPUS", 10),
    ("AllocNodes", 10),
    ("AllocTRES", 10),
    ("AssocID", 7),
    ("AveCPU", 10),
    ("AveCPUFreq", 10),
    ("AveDiskRead", 14),
    ("AveDiskWrite", 14),
    ("AvePages", 10),
    ("AveRSS", 10),
    ("AveVMSize", 10),
    ("BlockID", 16),
    ("Cluster", 10),
    ("Comment", 14),
    ("Constraints", 19),
    ("ConsumedEnergy", 14),
    ("ConsumedEnergyRaw", 17),
    ("Container", 19),
    ("CPUTime", 10),
    ("CPUTimeRAW", 10),
    ("DBIndex", -21),
    ("DerivedExitCode", 15),
    ("Elapsed", 10),
    ("ElapsedRaw", 10),
    ("Eligible", 19),
    ("End", 19),
    ("ExitCode", 8),
    ("Flags", 19),
    ("GID", 6),
    ("Group", 9),
    ("JobID", -12),
    ("JobIDRaw", -12),
    ("JobName", 10),
    ("Layout", 9),
    ("MaxDiskRead", 12),
    ("MaxDiskReadNode", 15),
    ("MaxDiskReadTask", 15),
    ("MaxDiskWrite", 12),
    ("MaxDiskWriteNode", 16),
    ("MaxDiskWriteTask", 16),
    ("MaxPages", 8),
    ("MaxPagesNode", 12),
    ("MaxPagesTask", 14),
    ("MaxRSS", 10),
    ("MaxRSSNode", 10),
    ("MaxRSSTask", 10),
    ("MaxVMSize", 10),
    ("MaxVMSizeNode", 14),
    ("MaxVMSizeTask", 14),
    ("McsLabel", 12),
    ("MinCPU", 10),
    ("MinCPUNode", 10),
    ("MinCPUTask", 10),
    ("NCPUS", 10),
    ("NNodes", 8),
    ("NodeList", 15),
    ("NTasks", 8),
    ("Partition", 10),
    ("Priority", 10),
    ("QOS", 10),
    ("QOSRAW", 6),
    ("Reason", 22),
    ("ReqCPUFreq", 10),
    ("ReqCPUFreqGov", 13),
    ("ReqCPUFreqMax", 13),
    ("ReqCPUFreqMin", 13),
    ("ReqCPUS", 8),
    ("ReqMem", 10),
    ("ReqNodes", 8),
    ("ReqTRES", 10),
    ("Reservation", 20),
    ("ReservationId", 8),
    ("Reserved", 10),
    ("ResvCPU", 10),
    ("ResvCPURAW", 10),
    ("Start", 19),
    ("State", 10),
    ("Submit", 19),
    ("SubmitLine", 20),
    ("Suspended", 10),
    ("SystemComment", 15),
    ("SystemCPU", 10),
    ("Timelimit", 10),
    ("TimelimitRaw", 10),
    ("TotalCPU", 10),
    ("TRESUsageInAve", 14),
    ("TRESUsageInMax", 14),
    ("TRESUsageInMaxNode", 18),
    ("TRESUsageInMaxTask", 18),
    ("TRESUsageInMin", 14),
    ("TRESUsageInMinNode", 18),
    ("TRESUsageInMinTask", 18),
    ("TRESUsageInTot", 14),
    ("TRESUsageOutAve", 15),
    ("TRESUsageOutMax", 15),
    ("TRESUsageOutMaxNode", 19),
    ("TRESUsageOutMaxTask", 19),
    ("TRESUsageOutMin", 15),
    ("TRESUsageOutMinNode", 19),
    ("TRESUsageOutMinTask", 19),
    ("TRESUsageOutTot", 15),
    ("UID", 6),
    ("User", 9),
    ("UserCPU", 10),
    ("WCKey", 10),
    ("WCKeyID", 10),
    ("WorkDir", 20),
];

/// sacct's default fields (`DEFAULT_FIELDS`).
pub const DEFAULT_FIELDS: &str = "jobid,jobname,partition,account,alloccpus,state,exitcode";
/// `-b` (`BRIEF_FIELDS`).
pub const BRIEF_FIELDS: &str = "jobid,state,exitcode";
/// `-l` (`LONG_FIELDS`).
pub const LONG_FIELDS: &str = "jobid,jobidraw,jobname,partition,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,\
maxrssnode,maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,ntasks,\
alloccpus,elapsed,state,exitcode,avecpufreq,reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,reqmem,consumedenergy,\
maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,\
reqtres,alloctres,tresusageinave,tresusageinmax,tresusageinmaxn,tresusageinmaxt,tresusageinmin,tresusageinminn,\
tresusageinmint,tresusageintot,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,tresusageoutave,tresusageouttot";

/// One output column: a field of [`FIELDS`] and its width (negative: left-aligned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// Field name as Slurm spells it.
    pub name: &'static str,
    /// Width.
    pub width: i32,
}

/// Parses a `-o` list (`JobID%-12,state%20,ALL`): each name matches the first field it is a
/// case-insensitive prefix of (Slurm's `xstrncasecmp(field, name, strlen(name))`); `%N` sets
/// the width. Error: the name, for `Invalid field requested: "NAME"`.
pub fn parse_fields(list: &str) -> Result<Vec<Column>, String> {
    let mut out = Vec::new();
    for item in list.split(',') {
        let item = item.trim_start();
        if item.is_empty() {
            continue;
        }
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => (n, Some(crate::common::atoi(w))),
            None => (item, None),
        };
        let lower = name.to_ascii_lowercase();
        if "all".starts_with(&lower) {
            for &(n, w) in FIELDS {
                out.push(Column {
                    name: n,
                    width: width.unwrap_or(w),
                });
            }
            continue;
        }
        let Some(&(n, w)) = FIELDS.iter().find(|(n, _)| n.to_ascii_lowercase().starts_with(&lower)) else {
            return Err(name.to_string());
        };
        out.push(Column {
            name: n,
            width: width.unwrap_or(w),
        });
    }
    Ok(out)
}

/// How rows are laid out: fixed width, or delimited (`-p`: a delimiter after every field,
/// `-P`: between fields only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// Fixed-width columns, each followed by a space.
    Fixed,
    /// Delimited.
    Parsable {
        /// The delimiter (`|` unless `--delimiter`).
        delimiter: String,
        /// `-p`: a delimiter after the last field too.
        trailing: bool,
    },
}

/// One line: the values of `cols` laid out as Slurm's `print_fields` does. `None` values are
/// blank.
pub fn line(cols: &[Column], values: &[Option<String>], layout: &Layout) -> String {
    let mut s = String::new();
    for (i, (col, v)) in cols.iter().zip(values).enumerate() {
        let last = i + 1 == cols.len();
        match layout {
            Layout::Parsable { delimiter, trailing } => {
                s.push_str(v.as_deref().unwrap_or(""));
                if !last || *trailing {
                    s.push_str(delimiter);
                }
            }
            Layout::Fixed => {
                let w = col.width.unsigned_abs() as usize;
                let mut text: String = v.as_deref().unwrap_or("").to_string();
                if text.chars().count() > w {
                    text = text.chars().take(w.saturating_sub(1)).collect();
                    if w > 0 {
                        text.push('+');
                    }
                }
                s.push_str(&common::field(&text, w, col.width >= 0));
                s.push(' ');
            }
        }
    }
    s.push('\n');
    s
}

/// The header (names, and the dashed line for fixed-width output).
pub fn header(cols: &[Column], layout: &Layout) -> String {
    let names: Vec<Option<String>> = cols
        .iter()
        .map(|c| {
            let w = c.width.unsigned_abs() as usize;
            Some(match layout {
                Layout::Fixed => c.name.chars().take(w).collect(),
                Layout::Parsable { .. } => c.name.to_string(),
            })
        })
        .collect();
    let mut s = line(cols, &names, layout);
    if *layout == Layout::Fixed {
        for c in cols {
            let w = c.width.unsigned_abs() as usize;
            s.push_str(&"-".repeat(w));
            s.push(' ');
        }
        s.push('\n');
    }
    s
}

/// `--helpformat`: the field names, four per line, each in 19 columns (Slurm's
/// `_help_fields_msg`).
pub fn help_fields() -> String {
    let mut s = String::new();
    for (i, (n, _)) in FIELDS.iter().enumerate() {
        if i % 4 != 0 {
            s.push(' ');
        } else if i != 0 {
            s.push('\n');
        }
        s.push_str(&format!("{n:<19}"));
    }
    s.push('\n');
    s
}

/// Slurm's TRES memory: [`crate::jobfmt::mem_str`], but `0M` for none.
fn tres_mem(mib: u64) -> String {
    if mib == 0 {
        "0M".into()
    } else {
        crate::jobfmt::mem_str(mib)
    }
}

/// A TRES string in Slurm's order (`billing=2,cpu=2,gres/gpu=4,mem=2G,node=2`).
fn tres(billing: Option<u32>, cpus: u32, gpus: u32, mem_mib: u64, nodes: u32) -> String {
    let mut v = Vec::new();
    if let Some(b) = billing {
        v.push(format!("billing={b}"));
    }
    v.push(format!("cpu={cpus}"));
    if gpus > 0 {
        v.push(format!("gres/gpu={gpus}"));
    }
    v.push(format!("mem={}", tres_mem(mem_mib)));
    v.push(format!("node={nodes}"));
    v.join(",")
}

fn date(t: Option<i64>) -> String {
    t.map_or_else(|| "Unknown".to_string(), fmt_time)
}

/// The job's id as sacct prints it: `N`, `A_T`, or `A_[2-3,5]` for an array's pending tasks.
pub fn job_id_str(j: &AcctJob) -> String {
    match (j.array_job_id, j.array_task_id, &j.array_task_str) {
        (Some(a), Some(t), _) => format!("{a}_{t}"),
        (Some(a), None, Some(s)) => format!("{a}_[{s}]"),
        _ => j.job_id.to_string(),
    }
}

/// What sacct knows when printing: the time (for running jobs' elapsed time), the
/// cluster's name, how sizes print and the window `-T` truncates to.
#[derive(Debug, Clone, Default)]
pub struct Ctx {
    /// Now (s).
    pub now: i64,
    /// `ClusterName`.
    pub cluster: String,
    /// `--units` / `--noconvert`.
    pub units: Units,
    /// `-T`: the window (start, end) that jobs' start and end times are truncated to.
    pub truncate: Option<(Option<i64>, Option<i64>)>,
}

/// A job's (start, end) as printed: with `-T`, a start before the window's start is the
/// window's start, an end after its end (or no end yet) is the window's end (Slurm's
/// `JOBCOND_FLAG_NO_TRUNC` cleared).
fn truncated(start: Option<i64>, end: Option<i64>, ctx: &Ctx) -> (Option<i64>, Option<i64>) {
    let Some((ws, we)) = ctx.truncate else { return (start, end) };
    let start = match (start, ws) {
        (Some(s), Some(w)) => Some(s.max(w)),
        (s, _) => s,
    };
    let end = match (end, we) {
        (Some(e), Some(w)) => Some(e.min(w)),
        (None, Some(w)) if start.is_some() => Some(w),
        (e, _) => e,
    };
    (start, end)
}

/// Usage fields of a step, from its stats; `None` for fields it has no value of.
fn usage_value(name: &str, u: Option<&StepStats>, units: Units) -> Option<String> {
    use crate::usage_fmt as f;
    let u = u.filter(|u| has_tres(u))?;
    Some(match name {
        "AveCPU" => f::cpu_secs(u.ave_cpu_usec),
        "AveRSS" => f::bytes(u.ave_rss, units),
        "AveVMSize" => f::bytes(u.ave_vmsize, units),
        "MaxRSS" => f::bytes(u.max_rss, units),
        "MaxRSSNode" => u.max_rss_node.clone(),
        "MaxRSSTask" => u.max_rss_task.to_string(),
        "MaxVMSize" => f::bytes(u.max_vmsize, units),
        "MaxVMSizeNode" => u.max_vmsize_node.clone(),
        "MaxVMSizeTask" => u.max_rss_task.to_string(),
        "MinCPU" => f::cpu_secs(u.min_cpu_usec),
        "MinCPUNode" => u.min_cpu_node.clone(),
        "MinCPUTask" => u.min_cpu_task.to_string(),
        "NTasks" => u.ntasks.to_string(),
        _ => return None,
    })
}

/// Whether a step's stats carry TRES usage (memory, per-task values): not for a record with
/// CPU times only (`ntasks` 0), which sacct prints with those fields blank (golden 0214).
fn has_tres(u: &StepStats) -> bool {
    u.ntasks > 0
}

/// The CPU times (user, system, total; µs) of a job: the sum over its steps (Slurm's
/// `tot_cpu_sec` of the job record).
fn job_cpu(j: &AcctJob) -> (u64, u64, u64) {
    j.steps.iter().filter_map(|s| s.usage.as_ref()).fold((0, 0, 0), |(a, b, c), u| {
        (a + u.user_usec, b + u.system_usec, c + u.total_usec)
    })
}

fn elapsed(start: Option<i64>, end: Option<i64>, now: i64) -> i64 {
    match (start, end) {
        (Some(s), Some(e)) => (e - s).max(0),
        (Some(s), None) => (now - s).max(0),
        _ => 0,
    }
}

/// The value of field `name` for a job's line.
pub fn job_value(name: &str, j: &AcctJob, ctx: &Ctx) -> Option<String> {
    let started = j.start_time.is_some();
    let cpus = if started { j.alloc_cpus } else { j.req_cpus };
    // Slurm's database: a job that ended without starting "started" when it ended, except
    // one ended past its deadline (`deadline_ok` logs its end with no start: `None`).
    let (start, end) = truncated(j.start_time.or(j.end_time.filter(|_| j.state != "DEADLINE")), j.end_time, ctx);
    let el = elapsed(start, end, ctx.now);
    let (user, system, total) = job_cpu(j);
    Some(match name {
        "Account" => j.account.clone(),
        "TotalCPU" => crate::usage_fmt::cpu_usec(total),
        "UserCPU" => crate::usage_fmt::cpu_usec(user),
        "SystemCPU" => crate::usage_fmt::cpu_usec(system),
        "AllocCPUS" | "NCPUS" => cpus.to_string(),
        "AllocNodes" => j.alloc_nodes.to_string(),
        "AllocTRES" if started => tres(Some(j.alloc_cpus), j.alloc_cpus, j.alloc_gpus, j.alloc_mem_mib, j.alloc_nodes),
        "Cluster" => ctx.cluster.clone(),
        "Comment" => j.comment.clone(),
        "Constraints" => j.constraints.clone(),
        "CPUTime" => secs2time_str(el.saturating_mul(i64::from(cpus))),
        "CPUTimeRAW" => el.saturating_mul(i64::from(cpus)).to_string(),
        "DerivedExitCode" => format!("{}:{}", j.derived_exit.0, j.derived_exit.1),
        "Elapsed" => secs2time_str(el),
        "ElapsedRaw" => el.to_string(),
        "Eligible" => date(j.eligible_time),
        "End" => date(end),
        "ExitCode" => exit_code_str(j.exit_code, j.signal),
        "GID" => j.gid.to_string(),
        "Group" => common::group_name(j.gid),
        "JobID" => job_id_str(j),
        "JobIDRaw" => j.job_id.to_string(),
        "JobName" => j.name.clone(),
        "NNodes" => if started { j.alloc_nodes } else { j.req_nodes }.to_string(),
        "NodeList" if j.nodes.is_empty() => "None assigned".into(),
        "NodeList" => j.nodes.clone(),
        "Partition" => j.partition.clone(),
        "QOS" => j.qos.clone(),
        // Slurm's `state_reason_prev` (sacct/print.c `PRINT_REASON`, jobs only).
        "Reason" => j.reason_prev.clone().unwrap_or_else(|| "None".into()),
        "ReqCPUS" => j.req_cpus.to_string(),
        "ReqMem" => crate::usage_fmt::mib_in_units(j.req_mem_mib, ctx.units).unwrap_or_else(|| tres_mem(j.req_mem_mib)),
        "ReqNodes" => j.req_nodes.to_string(),
        "ReqTRES" => tres(Some(j.req_cpus), j.req_cpus, j.req_gpus, j.req_mem_mib, j.req_nodes),
        "Start" => match start {
            Some(t) => fmt_time(t),
            None => "Unknown".into(),
        },
        "State" => state_str(&j.state, j.cancelled_by),
        "Submit" => fmt_time(j.submit_time),
        "Suspended" => secs2time_str(0),
        "Timelimit" => j.time_limit_min.map_or_else(|| "UNLIMITED".into(), mins2time_str),
        "TimelimitRaw" => j.time_limit_min.map_or_else(|| "UNLIMITED".into(), |m| m.to_string()),
        "UID" => j.uid.to_string(),
        "User" => j.user.clone(),
        "WorkDir" => j.work_dir.clone(),
        _ => return None,
    })
}

/// The value of field `name` for a step's line.
pub fn step_value(name: &str, j: &AcctJob, s: &AcctStep, ctx: &Ctx) -> Option<String> {
    let start = s.start_time.or(s.end_time);
    let el = elapsed(start, s.end_time, ctx.now);
    let u = s.usage.as_ref();
    let cpu = |f: fn(&StepStats) -> u64| crate::usage_fmt::cpu_usec(u.map_or(0, f));
    if let Some(v) = usage_value(name, u, ctx.units)
        .or_else(|| u.filter(|u| has_tres(u)).and_then(|u| crate::usage_fmt::tres_usage(name, u, ctx.units)))
        .or_else(|| u.filter(|u| has_tres(u)).and_then(|u| crate::usage_fmt::unmeasured(name, u)))
    {
        return Some(v);
    }
    Some(match name {
        "Account" => j.account.clone(),
        "ConsumedEnergy" => crate::usage_fmt::energy(u.map_or(0, |u| u.energy_j), ctx.units),
        "ConsumedEnergyRaw" => u.map_or(0, |u| u.energy_j).to_string(),
        "TotalCPU" => cpu(|u| u.total_usec),
        "UserCPU" => cpu(|u| u.user_usec),
        "SystemCPU" => cpu(|u| u.system_usec),
        "AllocCPUS" | "NCPUS" => s.cpus.to_string(),
        "AllocTRES" => tres(None, s.cpus, s.gpus, s.mem_mib, s.nnodes),
        "Cluster" => ctx.cluster.clone(),
        "CPUTime" => secs2time_str(el.saturating_mul(i64::from(s.cpus))),
        "CPUTimeRAW" => el.saturating_mul(i64::from(s.cpus)).to_string(),
        "Elapsed" => secs2time_str(el),
        "ElapsedRaw" => el.to_string(),
        "Eligible" | "Start" | "Submit" => date(start),
        "End" => date(s.end_time),
        "ExitCode" => exit_code_str(s.exit_code, s.signal),
        "JobID" => format!("{}.{}", job_id_str(j), s.step),
        "JobIDRaw" => format!("{}.{}", j.job_id, s.step),
        "JobName" => match s.step.as_str() {
            "batch" | "extern" => s.step.clone(),
            _ => return None,
        },
        "NNodes" => s.nnodes.to_string(),
        "NodeList" => s.nodes.clone(),
        "QOS" => j.qos.clone(),
        "State" => state_str(&s.state, s.cancelled_by),
        "Suspended" => secs2time_str(0),
        _ => return None,
    })
}

/// The `ExitCode` field of a job or a step, `status:signal`, a status of 128 or more less 128
/// (Slurm 22.05 `sacct/print.c` `PRINT_EXITCODE`: a shell's `128 + signal` shows as the
/// signal's number, in the status place; `DerivedExitCode` is printed as it is).
fn exit_code_str(status: i32, signal: i32) -> String {
    let status = if status >= 128 { status - 128 } else { status };
    format!("{status}:{signal}")
}

/// The `State` field of a job or a step: `CANCELLED by <uid>` when it was cancelled and the
/// canceller is known (Slurm 22.05 `sacct/print.c` `PRINT_STATE`: the job's or the step's
/// `requid`), else the state's name.
fn state_str(state: &str, cancelled_by: Option<u32>) -> String {
    match cancelled_by {
        Some(uid) if state == "CANCELLED" => format!("CANCELLED by {uid}"),
        _ => state.to_string(),
    }
}

/// Formats the records as sacct prints them (header included unless `noheader`).
pub fn render(jobs: &[AcctJob], cols: &[Column], layout: &Layout, noheader: bool, no_steps: bool, ctx: &Ctx) -> String {
    let mut out = String::new();
    if !noheader {
        out.push_str(&header(cols, layout));
    }
    for j in jobs {
        if j.show_job {
            let vals: Vec<Option<String>> = cols.iter().map(|c| job_value(c.name, j, ctx)).collect();
            out.push_str(&line(cols, &vals, layout));
        }
        if !no_steps {
            for s in &j.steps {
                let vals: Vec<Option<String>> = cols.iter().map(|c| step_value(c.name, j, s, ctx)).collect();
                out.push_str(&line(cols, &vals, layout));
            }
        }
    }
    out
}

/// Parses one `-j` element: `N`, `N_T`, `N.S`, `N_T.S`.
pub fn parse_job_ref(s: &str) -> Option<AcctJobRef> {
    let (job, step) = match s.split_once('.') {
        Some((j, st)) if !st.is_empty() => (j, Some(st.to_string())),
        Some(_) => return None,
        None => (s, None),
    };
    let (id, task) = match job.split_once('_') {
        Some((a, t)) => (a.parse().ok()?, Some(t.parse().ok()?)),
        None => (job.parse().ok()?, None),
    };
    Some(AcctJobRef { job_id: id, task, step })
}

/// `sacct --help`.
const HELP: &str = "\
sacct [<OPTION>]
  -a, --allusers          all users' jobs (root, and -j or -N without -u, also see everybody's)
  -A, --accounts=LIST     jobs of these accounts
  -q, --qos=LIST          jobs of these QOS
  -T, --truncate          truncate start and end times to the window
      --units=[KMGTP]     print sizes in this unit
      --noconvert         print sizes in bytes, unconverted
  -b, --brief             jobid,state,exitcode
  -D, --duplicates        also list the earlier runs of requeued jobs
  -e, --helpformat        list the fields -o accepts
  -E, --endtime=TIME      end of the window (default: now; with -s: the start)
  -j, --jobs=LIST         jobs (N, N_T, N.step), repeatable; no time window unless -S/-E
  -l, --long              the long field list
  -L, --allclusters       accepted (one cluster)
  -M, --clusters=LIST     accepted (one cluster)
  -n, --noheader          no header
  -N, --nodelist=HOSTS    jobs that ran on these nodes
      --name=LIST         jobs with these names
  -o, --format=LIST       fields, Name%N for a width (negative: left-aligned)
  -p, --parsable          '|' after every field
  -P, --parsable2         '|' between fields
      --delimiter=STR     the delimiter of -p/-P
  -r, --partition=LIST    jobs of these partitions
  -s, --state=LIST        jobs in these states during the window
  -S, --starttime=TIME    start of the window (default: midnight; with -s: now)
  -u, --user=LIST         these users' jobs (default: your own)
  -V, --version           version
  -X, --allocations       jobs only, no steps
TIME: now[+N{s,m,h,d,w}], today, midnight, noon, tomorrow, HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]],
MMDD[YY], MM/DD[/YY][-HH:MM[:SS]]
";

fn usage() -> &'static str {
    "Usage: sacct [options]\n\tUse --help for help\n"
}

/// What the command line asks for, once parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The selection sent to the controller.
    pub query: AcctQuery,
    /// Output columns.
    pub cols: Vec<Column>,
    /// Fixed or delimited.
    pub layout: Layout,
    /// `-n`.
    pub noheader: bool,
    /// `-X`.
    pub no_steps: bool,
    /// `--units`, `--noconvert`.
    pub units: Units,
    /// `-T/--truncate`.
    pub truncate: bool,
    /// `--json`: the jobs as 22.05's `openapi/dbv0.0.38` answers them ([`json_text`]), not
    /// the columns.
    pub json: bool,
    /// `--yaml`: the same document as `--json`, in 22.05's YAML ([`yaml_text`]). The last
    /// of `--json` and `--yaml` wins, as 22.05's `sacct.c` keeps the last mime type asked.
    pub yaml: bool,
}

/// The outcome of parsing: a query to run, or an answer without one (help, errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// Ask the controller, then print.
    Query(Box<Plan>),
    /// Finished: exit status, stdout, stderr.
    Done(i32, String, String),
}

fn done_err(msg: String) -> Parsed {
    Parsed::Done(1, String::new(), msg)
}

/// Runs `sacct`; returns its exit status.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let plan = match parse(args, io.env, common::my_uid(), common::now()) {
        Parsed::Query(p) => p,
        Parsed::Done(code, out, err) => {
            io.out(&out);
            io.err(&err);
            return code;
        }
    };
    let ctl = match Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("sacct: error: {e}\n"));
            return 1;
        }
    };
    let ctx = Ctx {
        now: plan.query.now,
        cluster: ctl.conf.cluster_name.clone(),
        units: plan.units,
        truncate: plan.truncate.then_some((plan.query.start, plan.query.end)),
    };
    let jobs = match ctl.call(Request::QueryAcct(plan.query.clone())) {
        Ok(Response::Acct(j)) => j,
        Ok(_) => Vec::new(),
        Err(e) => {
            io.err(&format!("sacct: error: Problem talking to the database: {}\n", e.slurm().text));
            return 1;
        }
    };
    if plan.json {
        io.out(&json_text(&jobs, &ctx.cluster, plan.query.now));
        return 0;
    }
    if plan.yaml {
        io.out(&yaml_text(&jobs, &ctx.cluster, plan.query.now));
        return 0;
    }
    io.out(&render(&jobs, &plan.cols, &plan.layout, plan.noheader, plan.no_steps, &ctx));
    0
}

/// `sacct --json` as Slurm 22.05 prints it (`sacct/sacct.c` dumping through the
/// `openapi/dbv0.0.38` plugin): `{meta, errors: [], jobs}`, each job the plugin's
/// `dbv0.0.38_job` with its steps ([`flotilla_rest::v38db::job_model`]), whatever `--format`,
/// `-X` or `-n` say (22.05 ignores them with `--json`). Group and canceller names come from
/// the password and group databases.
pub fn json_text(jobs: &[AcctJob], cluster: &str, now: i64) -> String {
    let mut text = serde_json::to_string_pretty(&jobs_doc(jobs, cluster, now)).unwrap_or_default();
    text.push('\n');
    text
}

/// `sacct --yaml` as Slurm 22.05 prints it: [`json_text`]'s document through 22.05's YAML
/// serializer (libyaml, every node tagged: [`crate::json_out::to_yaml`]), keys in the same
/// order as `--json`'s.
pub fn yaml_text(jobs: &[AcctJob], cluster: &str, now: i64) -> String {
    crate::json_out::to_yaml(&crate::json_out::Doc::from_value(&jobs_doc(jobs, cluster, now)))
}

/// The document `--json` and `--yaml` print.
fn jobs_doc(jobs: &[AcctJob], cluster: &str, now: i64) -> serde_json::Value {
    let mut gids: Vec<u32> = jobs.iter().map(|j| j.gid).collect();
    gids.sort_unstable();
    gids.dedup();
    let mut uids: Vec<u32> = jobs.iter().filter_map(|j| j.cancelled_by).collect();
    uids.sort_unstable();
    uids.dedup();
    let group = |g: u32| {
        nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(g)).ok().flatten().map_or_else(|| g.to_string(), |g| g.name)
    };
    let user = |u: u32| {
        nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(u)).ok().flatten().map_or_else(|| u.to_string(), |u| u.name)
    };
    let ctx = flotilla_rest::dp::db::Ctx {
        cluster: cluster.to_string(),
        now,
        groups: gids.into_iter().map(|g| (g, group(g))).collect(),
        users: uids.into_iter().map(|u| (u, user(u))).collect(),
        data: Default::default(),
    };
    let v = flotilla_rest::ApiVersion::V0038;
    let body = flotilla_rest::v38db::jobs_response(jobs, &ctx);
    let mut doc = flotilla_rest::meta::envelope(v, &flotilla_rest::ClientInfo::default(), cluster, body, &[], &[]);
    doc["meta"]["plugin"] = serde_json::json!({"type": "openapi/dbv0.0.38", "name": "Slurm OpenAPI DB v0.0.38"});
    doc
}

/// Parses sacct's command line (`args[0]` is the program) as user `uid` at time `now`.
pub fn parse(args: &[String], env: &dyn Fn(&str) -> Option<String>, uid: u32, now: i64) -> Parsed {
    let argv = args.get(1..).unwrap_or(&[]);
    let parsed = match getopt_long("sacct", argv, SHORTS, LONGS) {
        Ok(p) => p,
        Err(msg) => return done_err(format!("{msg}\n")),
    };
    let mut q = AcctQuery {
        now,
        ..AcctQuery::default()
    };
    let (mut all_users, mut users_given) = (false, false);
    let (mut noheader, mut no_steps, mut brief, mut long) = (false, false, false, false);
    let mut layout = Layout::Fixed;
    let mut delimiter: Option<String> = None;
    let mut field_list = String::new();
    let mut help = 0;
    let (mut truncate, mut units) = (false, Units::default());
    let (mut json, mut yaml) = (false, false);
    for o in &parsed.opts {
        let a = o.arg.as_deref().unwrap_or("");
        match o.id {
            x if x == c('a') => all_users = true,
            x if x == c('A') => q.accounts.extend(a.split(',').filter(|s| !s.is_empty()).map(str::to_string)),
            x if x == c('b') => brief = true,
            x if x == c('e') => help = 2,
            x if x == c('h') => help = 1,
            x if x == c('U') => help = 3,
            // sacct's `parse_time(optarg, 1)`: its own line, no prefix, exit 1.
            x if x == c('E') => match parse_time_spec(a, now, true) {
                Ok(t) => q.end = Some(t),
                Err(pos) => return done_err(format!("Invalid time specification (pos={pos}): {a}\n")),
            },
            // sacct's `parse_time(optarg, 1)`: its own line, no prefix, exit 1.
            x if x == c('S') => match parse_time_spec(a, now, true) {
                Ok(t) => q.start = Some(t),
                Err(pos) => return done_err(format!("Invalid time specification (pos={pos}): {a}\n")),
            },
            x if x == c('j') => {
                for id in a.split(',').filter(|s| !s.is_empty()) {
                    match parse_job_ref(id) {
                        Some(r) => q.jobs.push(r),
                        None => return done_err(format!("sacct: fatal: Bad job/step specified: {id}\n")),
                    }
                }
            }
            x if x == c('l') => long = true,
            x if x == c('n') => noheader = true,
            x if x == c('N') => q.nodes.push(a.to_string()),
            O_NAME => q.names.extend(a.split(',').filter(|s| !s.is_empty()).map(str::to_string)),
            x if x == c('o') => {
                field_list.push_str(a);
                field_list.push(',');
            }
            x if x == c('p') => layout = Layout::Parsable { delimiter: String::new(), trailing: true },
            x if x == c('P') => layout = Layout::Parsable { delimiter: String::new(), trailing: false },
            O_DELIMITER => delimiter = Some(a.to_string()),
            x if x == c('r') => q.partitions.extend(a.split(',').filter(|s| !s.is_empty()).map(str::to_string)),
            x if x == c('s') => {
                for s in a.split(',').filter(|s| !s.is_empty()) {
                    match crate::jobfmt::STATE_NAMES.iter().find(|(l, c)| l.eq_ignore_ascii_case(s) || c.eq_ignore_ascii_case(s)) {
                        Some((l, _)) => q.states.push((*l).to_string()),
                        None => return done_err("sacct: fatal: unrecognized job state value\n".into()),
                    }
                }
            }
            x if x == c('u') => {
                if a == "-1" {
                    all_users = true;
                    continue;
                }
                all_users = false;
                users_given = true;
                for u in a.split(',').filter(|s| !s.is_empty()) {
                    match common::uid_of(u) {
                        Some(id) => q.uids.push(id),
                        None => return done_err(format!("sacct: fatal: Invalid user id: {u}\n")),
                    }
                }
            }
            x if x == c('V') => return Parsed::Done(0, format!("{}\n", crate::sbatch::VERSION_LINE), String::new()),
            x if x == c('X') || x == c('t') => no_steps = true,
            x if x == c('T') => truncate = true,
            x if x == c('q') => q.qos.extend(a.split(',').filter(|s| !s.is_empty()).map(str::to_string)),
            O_NOCONVERT => units.no_convert = true,
            O_UNITS => match crate::usage_fmt::unit_type(a) {
                Some(t) => units.spec = Some(t),
                None => {
                    return done_err(format!(
                        "sacct: error: Invalid unit type '{a}'. Possible options are 'KMGTP'\nsacct: fatal: Invalid unit type\n"
                    ))
                }
            },
            x if x == c('D') => q.duplicates = true,
            // `--json[=data_parser]`: 22.05 has one shape, whatever is asked.
            O_JSON => (json, yaml) = (true, false),
            // `--yaml[=data_parser]`: likewise.
            O_YAML => (json, yaml) = (false, true),
            _ => {}
        }
    }
    if let Layout::Parsable { delimiter: d, .. } = &mut layout {
        *d = delimiter.unwrap_or_else(|| "|".to_string());
    }
    // Time window defaults (options.c; the end for -s as golden 0295 shows).
    if q.start.is_none() && q.jobs.is_empty() {
        q.start = Some(if q.states.is_empty() { now - now.rem_euclid(86_400) } else { now });
    }
    if q.end.is_none() {
        q.end = match q.start {
            Some(s) if !q.states.is_empty() => Some(s),
            Some(_) => Some(now),
            None => None,
        };
    }
    // Users: -j or -N without -u look at everybody; so does root.
    if !users_given && (!q.jobs.is_empty() || !q.nodes.is_empty()) {
        all_users = true;
    }
    if !users_given && uid == 0 {
        all_users = true;
    }
    if all_users {
        q.uids.clear();
    } else if !users_given {
        q.uids.push(uid);
    }
    if brief {
        field_list.push_str(BRIEF_FIELDS);
        field_list.push(',');
    }
    if long {
        field_list.push_str(LONG_FIELDS);
        field_list.push(',');
    }
    if field_list.is_empty() {
        field_list = env("SACCT_FORMAT").filter(|s| !s.is_empty()).unwrap_or_else(|| DEFAULT_FIELDS.to_string());
    }
    let cols = match parse_fields(&field_list) {
        Ok(c) => c,
        // The two fields 22.05 removed (sacct/options.c): fatal, exit 1.
        Err(name) if name.eq_ignore_ascii_case("AllocGRES") => {
            return done_err("sacct: fatal: AllocGRES has been removed, please use AllocTRES\n".into())
        }
        Err(name) if name.eq_ignore_ascii_case("ReqGRES") => {
            return done_err("sacct: fatal: ReqGRES has been removed, please use ReqTRES\n".into())
        }
        Err(name) => return done_err(format!("sacct: error: Invalid field requested: \"{name}\"\n")),
    };
    if !parsed.operands.is_empty() {
        let mut e = "sacct: error: Unknown arguments:\n".to_string();
        for a in &parsed.operands {
            e.push_str(&format!("sacct: error:  {a}\n"));
        }
        return done_err(e);
    }
    match help {
        1 => Parsed::Done(0, HELP.into(), String::new()),
        2 => Parsed::Done(0, help_fields(), String::new()),
        3 => Parsed::Done(0, usage().into(), String::new()),
        _ => Parsed::Query(Box::new(Plan {
            query: q,
            cols,
            layout,
            noheader,
            no_steps,
            units,
            truncate,
            json,
            yaml,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(v: &[&str]) -> Vec<String> {
        std::iter::once("sacct").chain(v.iter().copied()).map(str::to_string).collect()
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    /// 2026-11-29T09:45:00Z.
    const NOW: i64 = 1_795_945_500;

    fn plan(v: &[&str], uid: u32) -> Plan {
        match parse(&argv(v), &no_env, uid, NOW) {
            Parsed::Query(p) => *p,
            other => panic!("{v:?}: {other:?}"),
        }
    }

    /// `ExitCode` loses 128 from a status of 128 up (a shell's `128 + signal`; goldens-extra
    /// 0341: a batch script ending with srun's 138 shows `10:0`); `State` names the canceller
    /// of a cancelled job or step only.
    #[test]
    fn exit_code_and_state_as_slurm_prints_them() {
        assert_eq!(exit_code_str(138, 0), "10:0");
        assert_eq!(exit_code_str(128, 0), "0:0");
        assert_eq!(exit_code_str(127, 0), "127:0");
        assert_eq!(exit_code_str(0, 9), "0:9");
        assert_eq!(state_str("CANCELLED", Some(2001)), "CANCELLED by 2001");
        assert_eq!(state_str("CANCELLED", None), "CANCELLED");
        assert_eq!(state_str("FAILED", Some(2001)), "FAILED");
    }

    #[test]
    fn snakemake_account_probe_fails_like_slurm() {
        // CONTRACT.md §A-20: snakemake runs `sacct -nu <user> -o Account%256 | tail -1` as an
        // argv without a shell; real sacct exits 1 with getopt's message and prints nothing.
        let got = parse(&argv(&["-nu", "alice", "-o", "Account%256", "|", "tail", "-1"]), &no_env, 2001, NOW);
        assert_eq!(got, Parsed::Done(1, String::new(), "sacct: invalid option -- '1'\n".into()));
        // Golden 0303.
        let got = parse(&argv(&["--bogus"]), &no_env, 2001, NOW);
        assert_eq!(got, Parsed::Done(1, String::new(), "sacct: unrecognized option '--bogus'\n".into()));
        // Operands are refused after the options are read.
        let got = parse(&argv(&["-n", "x"]), &no_env, 2001, NOW);
        assert_eq!(
            got,
            Parsed::Done(1, String::new(), "sacct: error: Unknown arguments:\nsacct: error:  x\n".into())
        );
    }

    #[test]
    fn fields_match_by_case_insensitive_prefix_with_widths() {
        let c = parse_fields("jobid,JobName%20,state%-12,nnodes,node,Sta,ALL%3").unwrap();
        assert_eq!(c[0], Column { name: "JobID", width: -12 });
        assert_eq!(c[1], Column { name: "JobName", width: 20 });
        assert_eq!(c[2], Column { name: "State", width: -12 });
        assert_eq!(c[3], Column { name: "NNodes", width: 8 });
        assert_eq!(c[4], Column { name: "NodeList", width: 15 });
        assert_eq!(c[5], Column { name: "Start", width: 19 }, "first field in table order");
        assert_eq!(c.len(), 6 + FIELDS.len());
        assert!(c[6..].iter().all(|x| x.width == 3));
        assert_eq!(parse_fields("JobID,NoSuchField"), Err("NoSuchField".into()));
        // Golden 0302.
        let got = parse(&argv(&["-o", "NoSuchField"]), &no_env, 2001, NOW);
        assert_eq!(
            got,
            Parsed::Done(1, String::new(), "sacct: error: Invalid field requested: \"NoSuchField\"\n".into())
        );
        // Accounting golden 0181 (vpenso's gpus collector).
        assert_eq!(
            parse(&argv(&["--format=Allocgres", "-P"]), &no_env, 2001, NOW),
            Parsed::Done(1, String::new(), "sacct: fatal: AllocGRES has been removed, please use AllocTRES\n".into())
        );
    }

    #[test]
    fn fixed_width_truncates_with_plus_and_pads() {
        let cols = parse_fields("JobID,JobName,State%12,AllocCPUS").unwrap();
        let v = |s: &[&str]| s.iter().map(|x| Some(x.to_string())).collect::<Vec<_>>();
        assert_eq!(
            line(&cols, &v(&["64_4", "gres_typed3", "CANCELLED by 2001", "1"]), &Layout::Fixed),
            "64_4         gres_type+ CANCELLED b+          1 \n"
        );
        assert_eq!(
            header(&cols, &Layout::Fixed),
            "JobID           JobName        State  AllocCPUS \n------------ ---------- ------------ ---------- \n"
        );
        let p = Layout::Parsable {
            delimiter: "|".into(),
            trailing: true,
        };
        assert_eq!(line(&cols, &[Some("1".into()), None, Some("X".into()), None], &p), "1||X||\n");
        let p2 = Layout::Parsable {
            delimiter: ",".into(),
            trailing: false,
        };
        assert_eq!(header(&cols, &p2), "JobID,JobName,State,AllocCPUS\n");
    }

    #[test]
    fn default_window_user_and_layout() {
        let midnight = NOW - NOW.rem_euclid(86_400);
        // No -j: since midnight, own jobs.
        let p = plan(&[], 2001);
        assert_eq!((p.query.start, p.query.end), (Some(midnight), Some(NOW)));
        assert_eq!(p.query.uids, vec![2001]);
        assert_eq!(p.cols, parse_fields(DEFAULT_FIELDS).unwrap());
        assert_eq!(p.layout, Layout::Fixed);
        // -j: all time, every user (CONTRACT.md §A-6).
        let p = plan(&["-j", "74,75", "-j", "79_1", "--jobs=80.batch"], 2001);
        assert_eq!((p.query.start, p.query.end), (None, None));
        assert!(p.query.uids.is_empty());
        let ids: Vec<(u64, Option<u32>, Option<&str>)> =
            p.query.jobs.iter().map(|r| (r.job_id, r.task, r.step.as_deref())).collect();
        assert_eq!(ids, vec![(74, None, None), (75, None, None), (79, Some(1), None), (80, None, Some("batch"))]);
        // root sees everybody; -a too; -u narrows.
        assert!(plan(&[], 0).query.uids.is_empty());
        assert!(plan(&["-a"], 2001).query.uids.is_empty());
        assert_eq!(plan(&["-u", "0,2002"], 2001).query.uids, vec![0, 2002]);
        // -s: start and end default to now; -S without -E: the end is the start (golden 0295).
        let p = plan(&["-s", "F,cd"], 2001);
        assert_eq!(p.query.states, vec!["FAILED".to_string(), "COMPLETED".to_string()]);
        assert_eq!((p.query.start, p.query.end), (Some(NOW), Some(NOW)));
        let p = plan(&["-s", "F", "-S", "today"], 2001);
        assert_eq!((p.query.start, p.query.end), (Some(midnight), Some(midnight)));
        let p = plan(&["-s", "F", "-S", "today", "-E", "now"], 2001);
        assert_eq!((p.query.start, p.query.end), (Some(midnight), Some(NOW)));
        // -p / -P / --delimiter; -b; -X -n.
        assert_eq!(
            plan(&["-p"], 1).layout,
            Layout::Parsable {
                delimiter: "|".into(),
                trailing: true
            }
        );
        assert_eq!(
            plan(&["-P", "--delimiter=,"], 1).layout,
            Layout::Parsable {
                delimiter: ",".into(),
                trailing: false
            }
        );
        assert_eq!(plan(&["-b"], 1).cols, parse_fields(BRIEF_FIELDS).unwrap());
        let p = plan(&["-nX"], 1);
        assert!(p.noheader && p.no_steps);
        assert!(matches!(parse(&argv(&["-j", "abc"]), &no_env, 1, NOW), Parsed::Done(1, ..)));
        assert!(matches!(parse(&argv(&["-s", "bogus"]), &no_env, 1, NOW), Parsed::Done(1, ..)));
    }

    #[test]
    fn truncate_units_and_qos_options() {
        let p = plan(&["-T", "-S", "2026-11-29T09:00:00", "-E", "2026-11-29T09:30:00", "--units=m", "-q", "normal,high"], 0);
        assert!(p.truncate);
        assert_eq!(p.units.spec, Some(2));
        assert_eq!(p.query.qos, vec!["normal".to_string(), "high".to_string()]);
        assert!(plan(&["--noconvert"], 0).units.no_convert);
        assert_eq!(
            parse(&argv(&["--units=X"]), &no_env, 0, NOW),
            Parsed::Done(1, String::new(), "sacct: error: Invalid unit type 'X'. Possible options are 'KMGTP'\nsacct: fatal: Invalid unit type\n".into())
        );
        // -T: a run from 08:50 to 09:40 printed within the window 09:00-09:30.
        let (ws, we) = (p.query.start, p.query.end);
        let ctx = Ctx { truncate: Some((ws, we)), ..Ctx::default() };
        let (s, e) = truncated(Some(ws.unwrap() - 600), Some(we.unwrap() + 600), &ctx);
        assert_eq!((s, e), (ws, we));
        assert_eq!(truncated(Some(ws.unwrap() + 5), None, &ctx), (Some(ws.unwrap() + 5), we), "still running: the window's end");
        assert_eq!(truncated(Some(1), Some(2), &Ctx::default()), (Some(1), Some(2)), "without -T: as recorded");
    }

    #[test]
    fn tres_strings() {
        assert_eq!(tres(Some(2), 2, 4, 2048, 2), "billing=2,cpu=2,gres/gpu=4,mem=2G,node=2");
        assert_eq!(tres(None, 1, 0, 1500, 1), "cpu=1,mem=1500M,node=1");
        assert_eq!(tres_mem(600 * 1024), "600G");
        assert_eq!(tres_mem(1024 * 1024), "1T");
    }

    #[test]
    fn json_prints_22_05s_job_list() {
        let p = plan(&["--json", "-j", "7", "-o", "JobID"], 2001);
        assert!(p.json);
        assert!(plan(&["--json=v0.0.38"], 2001).json);
        assert!(!plan(&["-j", "7"], 2001).json);
        let j = AcctJob {
            job_id: 7,
            name: "x".into(),
            user: "alice".into(),
            uid: 2001,
            gid: 2001,
            account: "research".into(),
            qos: "normal".into(),
            partition: "batch".into(),
            state: "FAILED".into(),
            exit_code: 3,
            submit_time: 100,
            eligible_time: Some(100),
            start_time: Some(101),
            end_time: Some(105),
            time_limit_min: Some(20),
            nodes: "gpu01".into(),
            alloc_nodes: 1,
            alloc_cpus: 2,
            alloc_mem_mib: 1024,
            req_nodes: 1,
            req_cpus: 2,
            req_mem_mib: 1024,
            work_dir: "/home/alice".into(),
            show_job: true,
            ..AcctJob::default()
        };
        let y = yaml_text(std::slice::from_ref(&j), "oracle", 200);
        let doc: serde_json::Value = serde_json::from_str(&json_text(&[j], "oracle", 200)).unwrap();
        // `--yaml`: the same document, libyaml's tagged block style as 22.05 writes it.
        assert_eq!(y, crate::json_out::to_yaml(&crate::json_out::Doc::from_value(&doc)));
        assert!(y.starts_with("%YAML 1.1\n--- !!map\n"), "{y}");
        assert!(y.ends_with("\n...\n"), "{y}");
        assert!(y.contains("\n!!str errors: !!seq []\n"), "{y}");
        assert!(y.contains("\n!!str jobs: !!seq\n- !!map\n"), "{y}");
        assert!(y.contains("\n  !!str job_id: !!int 7\n"), "{y}");
        assert!(y.contains("\n  !!str cluster: !!str oracle\n"), "{y}");
        let p = plan(&["--yaml", "-j", "7"], 2001);
        assert!(p.yaml && !p.json);
        assert!(plan(&["--yaml=v0.0.38"], 2001).yaml);
        // The last of --json and --yaml wins.
        let p = plan(&["--yaml", "--json"], 2001);
        assert!(p.json && !p.yaml);
        let p = plan(&["--json", "--yaml"], 2001);
        assert!(p.yaml && !p.json);
        assert!(!plan(&["-j", "7"], 2001).yaml);
        assert_eq!(doc["errors"], serde_json::json!([]));
        assert_eq!(doc["meta"]["plugin"]["type"], "openapi/dbv0.0.38");
        let job = &doc["jobs"][0];
        assert_eq!((job["job_id"].as_u64(), job["state"]["current"].as_str(), job["time"]["elapsed"].as_i64()), (Some(7), Some("FAILED"), Some(4)));
        assert_eq!(job["exit_code"], serde_json::json!({"status": "ERROR", "return_code": 3}));
        assert_eq!(job["cluster"], "oracle");
    }
}
