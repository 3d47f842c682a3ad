//! `seff JOBID`: the efficiency report of Slurm's contrib script (`contribs/seff/seff`,
//! version 2.1, a Perl script over the accounting database), reimplemented over our accounting
//! query (`Request::QueryAcct`, what `sacct -j` reads): CPU utilized (the sum of the steps'
//! TotalCPU, rounded to the second) against allocated cores × wall time, and memory utilized
//! (the largest step peak RSS times that step's tasks) against the requested memory.
//!
//! Options as the script's: `-h` (usage, exit 1), `-v` (`seff Version 2.1`, exit 1), `-d`
//! (the raw values first). Exactly one job id, else the usage (exit 1); an unknown job: `Job
//! not found.` on stderr, exit 2.

use crate::common::{self, Ctl, Io};
use crate::getopt::LongOpt;
use flotilla_proto::{AcctJob, AcctQuery, Request, Response};

/// The script's options (Perl `getopts('hvdf:')`; `-f` is accepted and unused).
pub const SHORTS: &str = "hvdf:";
/// It has no long options.
pub const LONGS: &[LongOpt] = &[];

const USAGE: &str = "Usage: seff [Options] <Jobid>
       Options:
       -h    Help menu
       -v    Version
       -d    Debug mode: display raw Slurm data
";

/// The script's `time2str`: `[D-]HH:MM:SS`.
pub fn time2str(t: u64) -> String {
    let (d, h, m, s) = (t / 86_400, (t % 86_400) / 3600, (t % 3600) / 60, t % 60);
    let days = if d < 1 { String::new() } else { format!("{d}-") };
    format!("{days}{h:02}:{m:02}:{s:02}")
}

/// The script's `kbytes2str`: `%.2f` in the largest binary unit not above the value
/// (`0.00 MB` for zero).
pub fn kbytes2str(kb: f64) -> String {
    if kb == 0.0 {
        return "0.00 MB".into();
    }
    let exp = (kb.ln() / 1024f64.ln()).floor().max(0.0) as i32;
    let pre = ["K", "M", "G", "T", "P", "E"].get(exp as usize).copied().unwrap_or("");
    format!("{:.2} {pre}B", kb / 1024f64.powi(exp))
}

/// What the report is computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Allocated cores (1 when unknown).
    pub ncpus: u64,
    /// Allocated nodes (1 when unknown).
    pub nnodes: u64,
    /// Tasks of the step with the largest peak.
    pub ntasks: u64,
    /// Requested memory (KiB), all nodes.
    pub reqmem_kb: f64,
    /// CPU utilized (s).
    pub cput: u64,
    /// Wall time (s).
    pub walltime: u64,
    /// Memory utilized (KiB).
    pub mem_kb: f64,
    /// The job's exit status.
    pub exit_status: i32,
}

/// The script's arithmetic over one job record at time `now`.
pub fn figures(j: &AcctJob, now: i64) -> Figures {
    let started = j.start_time.is_some();
    let one = |v: u64| if v == 0 { 1 } else { v };
    let ncpus = one(u64::from(if started { j.alloc_cpus } else { j.req_cpus }));
    let nnodes = one(u64::from(if started { j.alloc_nodes } else { j.req_nodes }));
    let (mut sec, mut usec, mut mem_kb, mut ntasks) = (0u64, 0u64, 0f64, 0u64);
    for s in &j.steps {
        let Some(u) = &s.usage else { continue };
        sec += u.total_usec / 1_000_000;
        usec += u.total_usec % 1_000_000;
        let l = u.max_rss as f64 / 1024.0;
        if mem_kb < l {
            mem_kb = l;
            ntasks = u64::from(u.ntasks);
        }
    }
    let cput = sec + (usec as f64 / 1e6 + 0.5) as u64;
    let walltime = match (j.start_time, j.end_time) {
        (Some(s), Some(e)) => (e - s).max(0) as u64,
        (Some(s), None) => (now - s).max(0) as u64,
        _ => 0,
    };
    Figures {
        ncpus,
        nnodes,
        ntasks,
        reqmem_kb: j.req_mem_mib as f64 * 1024.0,
        cput,
        walltime,
        mem_kb: mem_kb * ntasks as f64,
        exit_status: j.exit_code,
    }
}

/// The report for `j` (`group`: its group's name; `debug`: `-d`).
pub fn report(j: &AcctJob, cluster: &str, group: &str, now: i64, debug: bool) -> String {
    let f = figures(j, now);
    let mut o = String::new();
    let array = match (j.array_job_id, j.array_task_id) {
        (Some(a), Some(t)) => format!("{a}_{t}"),
        _ => String::new(),
    };
    let state = j.state.as_str();
    if debug {
        o.push_str("Slurm data: JobID ArrayJobID User Group State Clustername Ncpus Nnodes Ntasks Reqmem PerNode Cput Walltime Mem ExitStatus\n");
        o.push_str(&format!(
            "Slurm data: {} {array} {} {group} {state} {cluster} {} {} {} {} 1 {} {} {} {}\n\n",
            j.job_id, j.user, f.ncpus, f.nnodes, f.ntasks, f.reqmem_kb, f.cput, f.walltime, f.mem_kb, f.exit_status
        ));
    }
    o.push_str(&format!("Job ID: {}\n", j.job_id));
    if !array.is_empty() {
        o.push_str(&format!("Array Job ID: {array}\n"));
    }
    o.push_str(&format!("Cluster: {cluster}\nUser/Group: {}/{group}\n", j.user));
    if state == "PENDING" || state == "RUNNING" {
        o.push_str(&format!("State: {state}\n"));
    } else {
        o.push_str(&format!("State: {state} (exit code {})\n", f.exit_status));
    }
    if f.ncpus == 1 {
        o.push_str("Cores: 1\n");
    } else {
        o.push_str(&format!("Nodes: {}\nCores per node: {}\n", f.nnodes, f.ncpus / f.nnodes));
    }
    if state == "PENDING" {
        o.push_str("Efficiency not available for jobs in the PENDING state.\n");
        return o;
    }
    let core_wall = f.walltime * f.ncpus;
    let cpu_eff = if core_wall != 0 { f.cput as f64 / core_wall as f64 * 100.0 } else { 0.0 };
    o.push_str(&format!("CPU Utilized: {}\n", time2str(f.cput)));
    o.push_str(&format!("CPU Efficiency: {cpu_eff:.2}% of {} core-walltime\n", time2str(core_wall)));
    o.push_str(&format!("Job Wall-clock time: {}\n", time2str(f.walltime)));
    if f.ntasks == 1 {
        o.push_str(&format!("Memory Utilized: {}\n", kbytes2str(f.mem_kb)));
    } else {
        o.push_str(&format!("Memory Utilized: {} (estimated maximum)\n", kbytes2str(f.mem_kb)));
    }
    let mem_eff = if f.reqmem_kb != 0.0 { f.mem_kb / f.reqmem_kb * 100.0 } else { 0.0 };
    if f.ntasks == 1 {
        o.push_str(&format!("Memory Efficiency: {mem_eff:.2}% of {}\n", kbytes2str(f.reqmem_kb)));
    } else {
        // Flotilla records requested memory per node.
        o.push_str(&format!(
            "Memory Efficiency: {mem_eff:.2}% of {} ({}/node)\n",
            kbytes2str(f.reqmem_kb),
            kbytes2str(f.reqmem_kb / f.nnodes as f64)
        ));
    }
    if state == "RUNNING" {
        o.push_str(&format!("WARNING: Efficiency statistics may be misleading for {state} jobs.\n"));
    }
    o
}

/// Runs `seff`; returns its exit status.
pub fn run(args: &[String], io: &mut Io<'_>) -> i32 {
    let (mut debug, mut operands) = (false, Vec::new());
    let mut help = false;
    let mut it = args.iter().skip(1);
    // Getopt::Std's getopts('hvdf:'): bundled flags, `-f` takes an argument, `--` ends them.
    while let Some(a) = it.next() {
        if a == "--" {
            operands.extend(it.by_ref().cloned());
            break;
        }
        let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) else {
            operands.push(a.clone());
            operands.extend(it.by_ref().cloned());
            break;
        };
        for (i, c) in flags.char_indices() {
            match c {
                'v' => {
                    io.out("seff Version 2.1\n");
                    return 1;
                }
                'h' => help = true,
                'd' => debug = true,
                'f' => {
                    if i + 1 == flags.len() {
                        it.next();
                    }
                    break;
                }
                other => io.err(&format!("Unknown option: {other}\n")),
            }
        }
    }
    if help || operands.len() != 1 {
        io.out(USAGE);
        return 1;
    }
    let ctl = match Ctl::new(io.env) {
        Ok(c) => c,
        Err(e) => {
            io.err(&format!("seff: error: {e}\n"));
            return 1;
        }
    };
    let Some(r) = crate::sacct::parse_job_ref(&operands[0]) else {
        io.err("Job not found.\n");
        return 2;
    };
    let now = common::now();
    let q = AcctQuery { jobs: vec![r], now, ..AcctQuery::default() };
    let jobs = match ctl.call(Request::QueryAcct(q)) {
        Ok(Response::Acct(j)) => j,
        Ok(_) => Vec::new(),
        Err(e) => {
            io.err(&format!("seff: error: {}\n", e.slurm().text));
            return 1;
        }
    };
    let Some(j) = jobs.first() else {
        io.err("Job not found.\n");
        return 2;
    };
    io.out(&report(j, &ctl.conf.cluster_name, &common::group_name(j.gid), now, debug));
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_proto::{AcctStep, StepStats};

    fn job(state: &str, steps: Vec<AcctStep>) -> AcctJob {
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
            state: state.into(),
            cancelled_by: None,
            exit_code: 0,
            signal: 0,
            submit_time: 0,
            eligible_time: Some(0),
            start_time: Some(1000),
            end_time: Some(1100),
            time_limit_min: None,
            nodes: "gpu01".into(),
            alloc_nodes: 1,
            alloc_cpus: 2,
            alloc_gpus: 0,
            alloc_mem_mib: 2048,
            req_nodes: 1,
            req_cpus: 2,
            req_gpus: 0,
            req_mem_mib: 2048,
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

    fn step(name: &str, total_usec: u64, max_rss: u64) -> AcctStep {
        AcctStep {
            step: name.into(),
            state: "COMPLETED".into(),
            exit_code: 0,
            signal: 0,
            start_time: Some(1000),
            end_time: Some(1100),
            nodes: "gpu01".into(),
            cpus: 2,
            gpus: 0,
            mem_mib: 2048,
            nnodes: 1,
            usage: Some(StepStats { total_usec, max_rss, ntasks: 1, ..StepStats::default() }),
            cancelled_by: None,
        }
    }

    #[test]
    fn formatters_match_the_script() {
        assert_eq!(time2str(0), "00:00:00");
        assert_eq!(time2str(3661), "01:01:01");
        assert_eq!(time2str(86_400 * 2 + 5), "2-00:00:05");
        assert_eq!(kbytes2str(0.0), "0.00 MB");
        assert_eq!(kbytes2str(512.0), "512.00 KB");
        assert_eq!(kbytes2str(205_128.0), "200.32 MB");
        assert_eq!(kbytes2str(2_097_152.0), "2.00 GB");
    }

    #[test]
    fn report_of_a_completed_job() {
        let j = job("COMPLETED", vec![step("batch", 50_600_000, 210_051_072), step("0", 20_000_000, 1 << 20)]);
        assert_eq!(
            report(&j, "flotilla", "alice", 0, false),
            "Job ID: 42\nCluster: flotilla\nUser/Group: alice/alice\nState: COMPLETED (exit code 0)\nNodes: 1\n\
             Cores per node: 2\nCPU Utilized: 00:01:11\nCPU Efficiency: 35.50% of 00:03:20 core-walltime\n\
             Job Wall-clock time: 00:01:40\nMemory Utilized: 200.32 MB\nMemory Efficiency: 9.78% of 2.00 GB\n"
        );
        let mut p = job("PENDING", Vec::new());
        (p.start_time, p.end_time, p.req_cpus) = (None, None, 1);
        assert_eq!(
            report(&p, "c", "g", 0, false),
            "Job ID: 42\nCluster: c\nUser/Group: alice/g\nState: PENDING\nCores: 1\nEfficiency not available for jobs in the PENDING state.\n"
        );
        let mut r = job("RUNNING", vec![step("batch", 1_000_000, 0)]);
        r.end_time = None;
        let out = report(&r, "c", "g", 1010, false);
        assert!(out.contains("Job Wall-clock time: 00:00:10\n"), "{out}");
        assert!(out.ends_with("WARNING: Efficiency statistics may be misleading for RUNNING jobs.\n"), "{out}");
    }
}
