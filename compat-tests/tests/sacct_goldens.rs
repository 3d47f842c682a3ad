//! Real Slurm 22.05's sacct goldens (0282-0308) against our `sacct`.
//!
//! - Cases answered without the controller (bad field, bad option, `--helpformat`, `-e`) run
//!   the real binary under `/bin/bash -c` with the case's environment, byte for byte.
//! - The format engine: the accounting records of the goldens' finished jobs 74-80 (values
//!   from golden 0285/0289: times, nodes, allocations, exit codes) are rendered with each
//!   case's own command line ([`sacct::parse`]) and compared byte for byte with Slurm's
//!   output. Which records a query selects is the controller's part, tested in
//!   `slurmctld-rs` (`acct::tests`, `tests/acct.rs`) and end to end by the golden replay.

use flotilla_commands::sacct::{self, Ctx, Parsed};
use flotilla_compat_tests::{goldens_dir, load_goldens, GoldenCase};
use flotilla_proto::{AcctJob, AcctStep};

fn case(name: &str) -> Option<GoldenCase> {
    if !goldens_dir().is_dir() {
        eprintln!("SKIPPED: no goldens at {} (set FLOTILLA_SHARED_DIR)", goldens_dir().display());
        return None;
    }
    Some(load_goldens().expect("goldens load").into_iter().find(|c| c.case == name).expect("case exists"))
}

#[test]
fn goldens_without_the_controller() {
    flotilla_compat_tests::build_binaries();
    let bin_dir = flotilla_compat_tests::bin_dir_with(&["sacct"]);
    let bin_dir = bin_dir.as_path();
    let cwd = std::env::temp_dir();
    let mut n = 0;
    for name in ["sacct_bad_field", "sacct_bad_option", "sacct_helpformat", "sacct_e"] {
        let Some(c) = case(name) else { return };
        let got = c.run_with_path(&[bin_dir], &cwd).expect("bash runs");
        if let Err(diff) = c.compare(&got) {
            panic!("{diff}");
        }
        n += 1;
    }
    assert_eq!(n, 4);
}

/// 2026-11-29T09:MM:SS.
fn t(min: i64, sec: i64) -> i64 {
    flotilla_core::time::days_from_civil(2026, 11, 29) * 86_400 + 9 * 3600 + min * 60 + sec
}

fn job(id: u64, name: &str, state: &str, (ec, sig): (i32, i32), start: i64, end: i64) -> AcctJob {
    AcctJob {
        job_id: id,
        array_job_id: None,
        array_task_id: None,
        array_task_str: None,
        name: name.into(),
        user: "alice".into(),
        uid: 2001,
        gid: 2001,
        account: "research".into(),
        qos: "normal".into(),
        partition: "batch".into(),
        state: state.into(),
        cancelled_by: None,
        exit_code: ec,
        signal: sig,
        submit_time: t(41, 16),
        eligible_time: Some(t(41, 16)),
        start_time: Some(start),
        end_time: Some(end),
        time_limit_min: Some(60),
        nodes: "gpu01".into(),
        alloc_nodes: 1,
        alloc_cpus: 1,
        alloc_gpus: 0,
        alloc_mem_mib: 1024,
        req_nodes: 1,
        req_cpus: 1,
        req_gpus: 0,
        req_mem_mib: 1024,
        restarts: 0,
        work_dir: "/home/alice/g".into(),
        comment: String::new(),
        steps: vec![step(state_of_batch(ec, sig), (ec, sig), start, end)],
        show_job: true,
        constraints: String::new(),
        derived_exit: (0, 0),
        reason_prev: None,
    }
}

fn state_of_batch(ec: i32, sig: i32) -> &'static str {
    if sig != 0 {
        "CANCELLED"
    } else if ec != 0 {
        "FAILED"
    } else {
        "COMPLETED"
    }
}

fn step(state: &str, (ec, sig): (i32, i32), start: i64, end: i64) -> AcctStep {
    AcctStep {
        step: "batch".into(),
        state: state.into(),
        exit_code: ec,
        signal: sig,
        start_time: Some(start),
        end_time: Some(end),
        nodes: "gpu01".into(),
        cpus: 1,
        gpus: 0,
        mem_mib: 1024,
        nnodes: 1,
        usage: None,
        cancelled_by: None,
    }
}

/// The records of jobs 74-80 as Slurm accounted them (goldens 0284, 0285, 0289).
fn records() -> Vec<AcctJob> {
    let mut v = Vec::new();
    v.push(job(74, "ok", "COMPLETED", (0, 0), t(41, 19), t(41, 21)));
    v.push(job(75, "fail3", "FAILED", (3, 0), t(41, 19), t(41, 19)));
    v.push(job(76, "sigkill", "FAILED", (0, 9), t(41, 19), t(41, 19)));
    let mut j = job(77, "tocancel", "CANCELLED", (0, 0), t(41, 19), t(41, 20));
    j.cancelled_by = Some(2001);
    j.steps = vec![step("CANCELLED", (0, 15), t(41, 19), t(41, 20))];
    v.push(j);
    let mut j = job(78, "tmo", "TIMEOUT", (0, 0), t(41, 19), t(42, 38));
    j.time_limit_min = Some(1);
    j.steps = vec![step("CANCELLED", (0, 15), t(41, 19), t(42, 38))];
    v.push(j);
    let mut j = job(80, "twonode", "COMPLETED", (0, 0), t(41, 19), t(41, 20));
    j.nodes = "gpu[01-02]".into();
    (j.alloc_nodes, j.alloc_cpus, j.alloc_gpus, j.alloc_mem_mib) = (2, 2, 4, 2048);
    (j.req_nodes, j.req_cpus, j.req_gpus, j.req_mem_mib) = (2, 2, 4, 2048);
    j.steps[0].gpus = 2;
    v.push(j);
    for (task, raw, ec) in [(0, 82, 0), (1, 83, 2), (2, 79, 0)] {
        let state = if ec == 0 { "COMPLETED" } else { "FAILED" };
        let mut j = job(raw, "arrf", state, (ec, 0), t(41, 19), t(41, 19));
        j.array_job_id = Some(79);
        j.array_task_id = Some(task);
        v.push(j);
    }
    v
}

/// Renders `ids` (raw job ids, or array ids selecting their tasks) with the case's command line.
fn render(c: &GoldenCase, ids: &[u64]) -> String {
    let args: Vec<String> = c.cmd.split_whitespace().map(str::to_string).collect();
    let Parsed::Query(plan) = sacct::parse(&args, &|_| None, 2001, t(45, 0)) else {
        panic!("{} does not parse to a query", c.cmd);
    };
    let jobs: Vec<AcctJob> = records()
        .into_iter()
        .filter(|j| ids.contains(&j.job_id) || j.array_job_id.is_some_and(|a| ids.contains(&a)))
        .collect();
    let ctx = Ctx {
        now: t(45, 0),
        cluster: "oracle".into(),
        ..Ctx::default()
    };
    sacct::render(&jobs, &plan.cols, &plan.layout, plan.noheader, plan.no_steps, &ctx)
}

#[test]
fn format_engine_matches_slurm_goldens() {
    let cases: &[(&str, &[u64])] = &[
        ("sacct_j_ok", &[74]),
        ("sacct_j_array", &[79]),
        ("sacct_j_N2", &[80]),
        ("sacct_j_timeout", &[78]),
        ("sacct_j_unknown", &[]),
        ("sacct_XnP_finished_jobs", &[74, 75, 76, 77, 78, 79, 80]),
        ("sacct_steps_finished_jobs", &[74, 75, 76, 77, 78, 80]),
        ("sacct_name", &[74, 75]),
        ("sacct_parsable_trailing", &[74]),
        ("sacct_delimiter", &[74]),
    ];
    let mut failures = Vec::new();
    for (name, ids) in cases {
        let Some(c) = case(name) else { return };
        let got = render(&c, ids);
        if got != c.stdout {
            failures.push(format!("--- {name}\nwant:\n{}got:\n{got}", c.stdout));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
