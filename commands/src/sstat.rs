//! `sstat`, as Slurm 22.05's `src/sstat`: the usage of *running* steps (`-j JOB[.STEP]`,
//! repeatable and comma-separated, or the first operand), with `-a` (every running step of a
//! job named without a step: `batch` and `extern` too), `-o/--format` (sstat's own field
//! table, case-insensitive prefixes, `%N` widths), `-p`, `-P`, `-n`, `-e/--helpformat`,
//! `-i/--pidformat`, `--noconvert`, `-V`.
//!
//! Where the values come from: Slurm's sstat asks each node's slurmd for the step's live
//! counters. Here the node daemons report every running step's counters on the poll interval
//! (`JobAcctGatherFrequency`, 30 s by default) to the controller, which keeps the latest report
//! per step and node in its accounting tables; sstat reads them with the accounting query
//! (`Request::QueryAcct`), so it shows the step as of the last poll (at most one interval old),
//! and nothing for a step not yet polled but its zeros. A job named without a step shows its
//! lowest-numbered running `srun` step, as Slurm's; `sstat -j N.batch` the batch step.
//!
//! Errors (on stderr, exit status 0 as Slurm's): `couldn't get steps for job N` (unknown),
//! `No steps running for job N`, `StepId=N.S not found running.`, another user's step (Slurm's
//! two `Invalid user id` lines); no job at all: `You didn't give me any jobs to stat.`
//! (exit 1).

use crate::common::{self, Ctl, Io};
use crate::getopt::{getopt_long, lo, HasArg, LongOpt};
use crate::sacct::{header, line, Column, Layout};
use crate::usage_fmt::{self as f, Units};
use flotilla_proto::{AcctJob, AcctJobRef, AcctQuery, AcctStep, Request, Response, StepStats};

const O_NOCONVERT: u32 = 1000;
const O_USAGE: u32 = 1001;

/// sstat's short options (Slurm 22.05 `sstat/options.c`).
pub const SHORTS: &str = "aehij:no:pPvV";

/// sstat's long options.
pub const LONGS: &[LongOpt] = &[
    lo("allsteps", HasArg::No, 'a' as u32),
    lo("helpformat", HasArg::No, 'e' as u32),
    lo("help", HasArg::No, 'h' as u32),
    lo("jobs", HasArg::Required, 'j' as u32),
    lo("noheader", HasArg::No, 'n' as u32),
    lo("fields", HasArg::Required, 'o' as u32),
    lo("format", HasArg::Required, 'o' as u32),
    lo("noconvert", HasArg::No, O_NOCONVERT),
    lo("pidformat", HasArg::No, 'i' as u32),
    lo("parsable", HasArg::No, 'p' as u32),
    lo("parsable2", HasArg::No, 'P' as u32),
    lo("usage", HasArg::No, O_USAGE),
    lo("verbose", HasArg::No, 'v' as u32),
    lo("version", HasArg::No, 'V' as u32),
];

/// sstat's field table (name, default width), in `--helpformat` order.
pub const FIELDS: &[(&str, i32)] = &[
    ("AveCPU", 10),
    ("AveCPUFreq", 10),
    ("AveDiskRead", 12),
    ("AveDiskWrite", 12),
    ("AvePages", 10),
    ("AveRSS", 10),
    ("AveVMSize", 10),
    ("ConsumedEnergy", 14),
    ("ConsumedEnergyRaw", 17),
    ("JobID", -12),
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
    ("MinCPU", 10),
    ("MinCPUNode", 10),
    ("MinCPUTask", 10),
    ("Nodelist", 20),
    ("NTasks", 8),
    ("Pids", 20),
    ("ReqCPUFreq", 10),
    ("ReqCPUFreqMin", 13),
    ("ReqCPUFreqMax", 13),
    ("ReqCPUFreqGov", 13),
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
];

/// sstat's default fields (`STAT_FIELDS`).
pub const STAT_FIELDS: &str = "jobid,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,averss,\
maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,ntasks,avecpufreq,reqcpufreqmin,\
reqcpufreqmax,reqcpufreqgov,consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,\
maxdiskwritenode,maxdiskwritetask,avediskwrite,tresusageinave,tresusageinmax,tresusageinmaxn,tresusageinmaxt,\
tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot,tresusageoutave,tresusageoutmax,tresusageoutmaxn,\
tresusageoutmaxt,tresusageoutmin,tresusageoutminn,tresusageoutmint,tresusageouttot";

/// `-i` (`STAT_FIELDS_PID`).
pub const STAT_FIELDS_PID: &str = "jobid,nodelist,pids";

/// Parses a field list over sstat's table: the first field each name is a case-insensitive
/// prefix of, `%N` a width. Error: the name.
pub fn parse_fields(list: &str) -> Result<Vec<Column>, String> {
    let mut out = Vec::new();
    for item in list.split(',') {
        let item = item.trim_start();
        if item.is_empty() {
            continue;
        }
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => (n, w.trim().parse::<i32>().ok().filter(|&w| w != 0)),
            None => (item, None),
        };
        let lower = name.to_ascii_lowercase();
        let Some(&(n, w)) = FIELDS.iter().find(|(n, _)| n.to_ascii_lowercase().starts_with(&lower)) else {
            return Err(name.to_string());
        };
        out.push(Column { name: n, width: width.unwrap_or(w) });
    }
    Ok(out)
}

/// `--helpformat`: four names a line, 19 columns each.
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

/// The value of field `name` for running step `s` of job `j`.
pub fn value(name: &str, j: &AcctJob, s: &AcctStep, units: Units) -> Option<String> {
    let zero = StepStats {
        max_rss_node: first_node(&s.nodes),
        max_vmsize_node: first_node(&s.nodes),
        min_cpu_node: first_node(&s.nodes),
        ..StepStats::default()
    };
    let u = s.usage.as_ref().unwrap_or(&zero);
    if let Some(v) = f::tres_usage(name, u, units).or_else(|| f::unmeasured(name, u)) {
        return Some(v);
    }
    Some(match name {
        "JobID" => format!("{}.{}", j.job_id, s.step),
        "AveCPU" => f::cpu_secs(u.ave_cpu_usec),
        "AveRSS" => f::bytes(u.ave_rss, units),
        "AveVMSize" => f::bytes(u.ave_vmsize, units),
        "ConsumedEnergy" => f::energy(u.energy_j, units),
        "ConsumedEnergyRaw" => u.energy_j.to_string(),
        "MaxRSS" => f::bytes(u.max_rss, units),
        "MaxRSSNode" => u.max_rss_node.clone(),
        "MaxRSSTask" => u.max_rss_task.to_string(),
        "MaxVMSize" => f::bytes(u.max_vmsize, units),
        "MaxVMSizeNode" => u.max_vmsize_node.clone(),
        "MaxVMSizeTask" => u.max_rss_task.to_string(),
        "MinCPU" => f::cpu_secs(u.min_cpu_usec),
        "MinCPUNode" => u.min_cpu_node.clone(),
        "MinCPUTask" => u.min_cpu_task.to_string(),
        "Nodelist" => s.nodes.clone(),
        "NTasks" => u.ntasks.to_string(),
        _ => return None,
    })
}

fn first_node(list: &str) -> String {
    flotilla_core::hostlist::expand(list).ok().and_then(|v| v.into_iter().next()).unwrap_or_else(|| list.to_string())
}

/// The steps of `j` that `r` selects among its running ones (Slurm's sstat main loop): the
/// named step; without one, every running step with `-a`, else the lowest-numbered running
/// `srun` step. `Err`: the error line.
pub fn select<'a>(j: &'a AcctJob, r: &AcctJobRef, all: bool) -> Result<Vec<&'a AcctStep>, String> {
    let running: Vec<&AcctStep> =
        if j.state == "RUNNING" { j.steps.iter().filter(|s| s.state == "RUNNING").collect() } else { Vec::new() };
    match &r.step {
        Some(name) => match running.iter().find(|s| &s.step == name) {
            Some(s) => Ok(vec![*s]),
            None => Err(format!("sstat: error: StepId={}.{name} not found running.\n", j.job_id)),
        },
        None if running.is_empty() => Err(format!("sstat: error: No steps running for job {}\n", j.job_id)),
        None if all => Ok(running),
        None => Ok(running.into_iter().filter(|s| s.step.parse::<u32>().is_ok()).min_by_key(|s| s.step.parse::<u32>().unwrap_or(u32::MAX)).into_iter().collect()),
    }
}

/// Formats what was asked for user `uid`: header, then each reference's steps; errors
/// separately. Another user's steps are refused as Slurm's slurmd refuses them (golden 0201),
/// root sees every job.
pub fn render(jobs: &[AcctJob], refs: &[AcctJobRef], plan: &Plan, uid: u32) -> (String, String) {
    let (mut out, mut err) = (String::new(), String::new());
    if !plan.noheader {
        out.push_str(&header(&plan.cols, &plan.layout));
    }
    for r in refs {
        let found = jobs.iter().find(|j| match r.task {
            None => j.job_id == r.job_id,
            Some(t) => j.array_job_id == Some(r.job_id) && j.array_task_id == Some(t),
        });
        let Some(j) = found else {
            err.push_str(&format!("sstat: error: couldn't get steps for job {}\n", r.job_id));
            continue;
        };
        match select(j, r, plan.all_steps) {
            Ok(steps) => {
                for s in steps {
                    if uid != 0 && uid != j.uid {
                        err.push_str(&format!(
                            "sstat: error: slurm_job_step_stat: there was an error with the request to {} rc = Invalid user id\n\
                             sstat: error: problem getting step_layout for StepId={}.{}: Invalid user id\n",
                            first_node(&s.nodes),
                            j.job_id,
                            s.step
                        ));
                        continue;
                    }
                    let vals: Vec<Option<String>> = plan.cols.iter().map(|c| value(c.name, j, s, plan.units)).collect();
                    out.push_str(&line(&plan.cols, &vals, &plan.layout));
                }
            }
            Err(e) => err.push_str(&e),
        }
    }
    (out, err)
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Jobs and steps, in order.
    pub refs: Vec<AcctJobRef>,
    /// Columns.
    pub cols: Vec<Column>,
    /// Layout.
    pub layout: Layout,
    /// `-n`.
    pub noheader: bool,
    /// `-a`.
    pub all_steps: bool,
    /// `--noconvert`.
    pub units: Units,
}

const HELP: &str = "\
sstat [<OPTION>] -j <job(.stepid)>
  -a, --allsteps          every running step of a job given without a step (batch, extern too)
  -e, --helpformat        list the fields -o accepts
  -h, --help              this help
  -i, --pidformat         the fields JobID,Nodelist,Pids
  -j, --jobs=LIST         jobs or steps (N, N.S, N.batch), comma-separated; required
  -n, --noheader          no header
      --noconvert         sizes in bytes, unconverted
  -o, --format=LIST       fields, Name%N for a width
  -p, --parsable          '|' after every field
  -P, --parsable2         '|' between fields
      --usage             a short usage line
  -V, --version           version
Values are the node daemons' latest reports (every JobAcctGatherFrequency seconds).
";

/// Parses sstat's command line: a plan, or `Err((status, stdout, stderr))`.
pub fn parse(args: &[String]) -> Result<Plan, (i32, String, String)> {
    let argv = args.get(1..).unwrap_or(&[]);
    let parsed = getopt_long("sstat", argv, SHORTS, LONGS).map_err(|m| (1, String::new(), format!("{m}\n")))?;
    let (mut refs, mut fields, mut help) = (Vec::new(), String::new(), 0);
    let mut plan = Plan {
        refs: Vec::new(),
        cols: Vec::new(),
        layout: Layout::Fixed,
        noheader: false,
        all_steps: false,
        units: Units::default(),
    };
    let add_jobs = |list: &str, refs: &mut Vec<AcctJobRef>| -> Result<(), (i32, String, String)> {
        for id in list.split(',').filter(|s| !s.is_empty()) {
            match crate::sacct::parse_job_ref(id) {
                Some(r) => refs.push(r),
                None => return Err((1, String::new(), format!("sstat: fatal: Bad job/step specified: {id}\n"))),
            }
        }
        Ok(())
    };
    for o in &parsed.opts {
        let a = o.arg.as_deref().unwrap_or("");
        match o.id {
            x if x == 'a' as u32 => plan.all_steps = true,
            x if x == 'e' as u32 => help = 2,
            x if x == 'h' as u32 => help = 1,
            O_USAGE => help = 3,
            x if x == 'i' as u32 => {
                fields.push_str(STAT_FIELDS_PID);
                fields.push(',');
            }
            x if x == 'j' as u32 => add_jobs(a, &mut refs)?,
            x if x == 'n' as u32 => plan.noheader = true,
            O_NOCONVERT => plan.units.no_convert = true,
            x if x == 'o' as u32 => {
                fields.push_str(a);
                fields.push(',');
            }
            x if x == 'p' as u32 => plan.layout = Layout::Parsable { delimiter: "|".into(), trailing: true },
            x if x == 'P' as u32 => plan.layout = Layout::Parsable { delimiter: "|".into(), trailing: false },
            x if x == 'V' as u32 => return Err((0, format!("{}\n", crate::sbatch::VERSION_LINE), String::new())),
            _ => {}
        }
    }
    match help {
        1 => return Err((0, HELP.into(), String::new())),
        2 => return Err((0, help_fields(), String::new())),
        3 => return Err((0, "Usage: sstat [options] -j <job(.stepid)>\n\tUse --help for help\n".into(), String::new())),
        _ => {}
    }
    if let Some(first) = parsed.operands.first() {
        add_jobs(first, &mut refs)?;
    }
    if fields.is_empty() {
        fields = STAT_FIELDS.to_string();
    }
    plan.cols = parse_fields(&fields).map_err(|n| (1, String::new(), format!("sstat: error: Invalid field requested: \"{n}\"\n")))?;
    if refs.is_empty() {
        return Err((1, String::new(), "sstat: error: You didn't give me any jobs to stat.\n".into()));
    }
    plan.refs = refs;
    Ok(plan)
}

/// Runs `sstat`; returns its exit status.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let plan = match parse(args) {
        Ok(p) => p,
        Err((code, out, err)) => {
            io.out(&out);
            io.err(&err);
            return code;
        }
    };
    let ctl = match Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("sstat: error: {e}\n"));
            return 1;
        }
    };
    let uid = common::my_uid();
    // Every user's jobs (the controller hides what PrivateData hides); another user's steps
    // are then refused in `render`, as Slurm's slurmd refuses them.
    let q = AcctQuery {
        jobs: plan.refs.iter().map(|r| AcctJobRef { step: None, ..r.clone() }).collect(),
        now: common::now(),
        ..AcctQuery::default()
    };
    let jobs = match ctl.call(Request::QueryAcct(q)) {
        Ok(Response::Acct(j)) => j,
        Ok(_) => Vec::new(),
        Err(e) => {
            io.err(&format!("sstat: error: {}\n", e.slurm().text));
            return 1;
        }
    };
    let (out, err) = render(&jobs, &plan.refs, &plan, uid);
    io.out(&out);
    io.err(&err);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(v: &[&str]) -> Vec<String> {
        std::iter::once("sstat").chain(v.iter().copied()).map(str::to_string).collect()
    }

    fn step(name: &str, state: &str, usage: Option<StepStats>) -> AcctStep {
        AcctStep {
            step: name.into(),
            state: state.into(),
            exit_code: 0,
            signal: 0,
            start_time: Some(1),
            end_time: None,
            nodes: "gpu[01-02]".into(),
            cpus: 2,
            gpus: 0,
            mem_mib: 0,
            nnodes: 2,
            usage,
            cancelled_by: None,
        }
    }

    fn job(steps: Vec<AcctStep>) -> AcctJob {
        AcctJob {
            job_id: 42,
            array_job_id: None,
            array_task_id: None,
            array_task_str: None,
            name: "j".into(),
            user: "alice".into(),
            uid: 2001,
            gid: 2001,
            account: "a".into(),
            qos: "normal".into(),
            partition: "p".into(),
            state: "RUNNING".into(),
            cancelled_by: None,
            exit_code: 0,
            signal: 0,
            submit_time: 0,
            eligible_time: Some(0),
            start_time: Some(1),
            end_time: None,
            time_limit_min: None,
            nodes: "gpu[01-02]".into(),
            alloc_nodes: 2,
            alloc_cpus: 2,
            alloc_gpus: 0,
            alloc_mem_mib: 0,
            req_nodes: 2,
            req_cpus: 2,
            req_gpus: 0,
            req_mem_mib: 0,
            restarts: 0,
            work_dir: "/".into(),
            comment: String::new(),
            steps,
            show_job: true,
            constraints: String::new(),
            derived_exit: (0, 0),
            reason_prev: None,
        }
    }

    #[test]
    fn options_fields_and_errors() {
        let p = parse(&argv(&["-j", "42,43.batch", "-o", "JobID,maxrss%12,AveC", "-P", "-n", "-a"])).unwrap();
        assert_eq!(p.refs.len(), 2);
        assert_eq!(p.refs[1].step.as_deref(), Some("batch"));
        assert_eq!(p.cols[1], Column { name: "MaxRSS", width: 12 });
        assert_eq!(p.cols[2].name, "AveCPU");
        assert!(p.noheader && p.all_steps);
        assert_eq!(p.layout, Layout::Parsable { delimiter: "|".into(), trailing: false });
        assert_eq!(parse(&argv(&["42"])).unwrap().refs[0].job_id, 42, "the first operand is a job");
        assert_eq!(parse(&argv(&[])).unwrap_err(), (1, String::new(), "sstat: error: You didn't give me any jobs to stat.\n".into()));
        assert_eq!(
            parse(&argv(&["-j", "1", "-o", "Bogus"])).unwrap_err().2,
            "sstat: error: Invalid field requested: \"Bogus\"\n"
        );
        assert_eq!(parse(&argv(&["-i", "-j", "1"])).unwrap().cols.iter().map(|c| c.name).collect::<Vec<_>>(), ["JobID", "Nodelist", "Pids"]);
        assert!(help_fields().starts_with("AveCPU              AveCPUFreq          AveDiskRead         AveDiskWrite       \n"));
        let def = parse(&argv(&["-j", "1"])).unwrap().cols;
        assert_eq!(def.len(), 47);
        assert_eq!(def[0], Column { name: "JobID", width: -12 });
    }

    #[test]
    fn selects_running_steps_like_slurm() {
        let u = StepStats { max_rss: 200 << 20, max_rss_node: "gpu02".into(), total_usec: 4_000_000, ave_cpu_usec: 2_000_000, ntasks: 2, ..StepStats::default() };
        let j = job(vec![step("batch", "RUNNING", None), step("0", "COMPLETED", None), step("3", "RUNNING", Some(u)), step("5", "RUNNING", None)]);
        let r = |s: Option<&str>| AcctJobRef { job_id: 42, task: None, step: s.map(str::to_string) };
        let names = |v: Vec<&AcctStep>| v.iter().map(|s| s.step.clone()).collect::<Vec<_>>();
        assert_eq!(names(select(&j, &r(None), false).unwrap()), ["3"], "lowest running srun step");
        assert_eq!(names(select(&j, &r(None), true).unwrap()), ["batch", "3", "5"]);
        assert_eq!(names(select(&j, &r(Some("batch")), false).unwrap()), ["batch"]);
        assert_eq!(select(&j, &r(Some("0")), false).unwrap_err(), "sstat: error: StepId=42.0 not found running.\n");
        let mut done = j.clone();
        done.state = "COMPLETED".into();
        assert_eq!(select(&done, &r(None), false).unwrap_err(), "sstat: error: No steps running for job 42\n");
        let plan = parse(&argv(&["-j", "42", "-P", "-o", "JobID,MaxRSS,MaxRSSNode,AveCPU,NTasks,ConsumedEnergy,Nodelist"])).unwrap();
        let (out, err) = render(std::slice::from_ref(&j), &plan.refs, &plan, 2001);
        assert_eq!(out, "JobID|MaxRSS|MaxRSSNode|AveCPU|NTasks|ConsumedEnergy|Nodelist\n42.3|200M|gpu02|00:00:02|2|0|gpu[01-02]\n");
        assert_eq!(err, "");
        // A step not polled yet: zeros on its first node.
        let plan = parse(&argv(&["-j", "42.5", "-p", "-n", "-o", "JobID,MaxRSS,MaxRSSNode,TRESUsageInAve"])).unwrap();
        let (out, _) = render(std::slice::from_ref(&j), &plan.refs, &plan, 0);
        // Golden 0201: another user's step.
        let (out2, err2) = render(std::slice::from_ref(&j), &plan.refs, &plan, 2002);
        assert_eq!(out2, "");
        assert_eq!(err2, "sstat: error: slurm_job_step_stat: there was an error with the request to gpu01 rc = Invalid user id\nsstat: error: problem getting step_layout for StepId=42.5: Invalid user id\n");
        let (_, err3) = render(&[], &plan.refs, &plan, 0);
        assert_eq!(err3, "sstat: error: couldn't get steps for job 42\n");
        assert_eq!(out, "42.5|0|gpu01|cpu=00:00:00,energy=0,fs/disk=0,mem=0,pages=0,vmem=0|\n");
    }
}
