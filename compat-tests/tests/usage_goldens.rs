//! sacct's usage fields and sstat against real Slurm 22.05 (goldens of
//! `goldens/accounting/`, recorded by s18-ref on the reference): the records Slurm printed
//! are rebuilt as accounting records with the usage Slurm measured, and our formatting must
//! reproduce its output byte for byte (headers, widths, the `MM:SS.mmm` CPU times, `K`
//! sizes, blanks on job lines, `--units`, the errors).
//!
//! What cannot be rebuilt is left out, by name: the reference's CPU frequency and disk
//! counters (sstat's default fields, golden 0193: only its header is compared).

use flotilla_commands::sacct::{self, Ctx, Parsed};
use flotilla_commands::sstat;
use flotilla_compat_tests::{load_goldens_from, GoldenCase};
use flotilla_proto::{AcctJob, AcctStep, StepStats};
use std::path::PathBuf;

fn golden(name: &str) -> GoldenCase {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("goldens/accounting");
    load_goldens_from(&dir).unwrap().into_iter().find(|c| c.case == name).unwrap_or_else(|| panic!("golden {name}"))
}

fn argv(c: &GoldenCase) -> Vec<String> {
    c.command().split_whitespace().map(str::to_string).collect()
}

fn no_env(_: &str) -> Option<String> {
    None
}

fn job(id: u64, state: &str, steps: Vec<AcctStep>) -> AcctJob {
    AcctJob {
        job_id: id,
        array_job_id: None,
        array_task_id: None,
        array_task_str: None,
        name: "wrap".into(),
        user: "root".into(),
        uid: 0,
        gid: 0,
        account: "research".into(),
        qos: "normal".into(),
        partition: "batch".into(),
        state: state.into(),
        cancelled_by: None,
        exit_code: 0,
        signal: 0,
        submit_time: 1_796_185_600,
        eligible_time: Some(1_796_185_600),
        start_time: Some(1_796_185_606),
        end_time: Some(1_796_185_608),
        time_limit_min: None,
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
        work_dir: "/".into(),
        comment: String::new(),
        steps,
        show_job: true,
        constraints: String::new(),
        derived_exit: (0, 0),
        reason_prev: None,
    }
}

fn step(name: &str, state: &str, usage: Option<StepStats>) -> AcctStep {
    AcctStep {
        step: name.into(),
        state: state.into(),
        exit_code: 0,
        signal: 0,
        start_time: Some(1_796_185_606),
        end_time: Some(1_796_185_608),
        nodes: "gpu01".into(),
        cpus: 1,
        gpus: 0,
        mem_mib: 1024,
        nnodes: 1,
        usage,
        cancelled_by: None,
    }
}

/// What Slurm measured of a step with one task: total CPU (µs) and peak RSS (KiB).
fn measured(total_usec: u64, rss_kib: u64) -> StepStats {
    StepStats {
        total_usec,
        max_rss: rss_kib * 1024,
        max_rss_node: "gpu01".into(),
        ave_rss: rss_kib * 1024,
        min_cpu_node: "gpu01".into(),
        max_vmsize_node: "gpu01".into(),
        ntasks: 1,
        ..StepStats::default()
    }
}

fn sacct_out(c: &GoldenCase, jobs: &[AcctJob]) -> (i32, String, String) {
    match sacct::parse(&argv(c), &no_env, 0, 1_796_189_000) {
        Parsed::Query(p) => {
            let ctx = Ctx { units: p.units, ..Ctx::default() };
            (0, sacct::render(jobs, &p.cols, &p.layout, p.noheader, p.no_steps, &ctx), String::new())
        }
        Parsed::Done(code, out, err) => (code, out, err),
    }
}

fn check(c: &GoldenCase, got: (i32, String, String)) {
    assert_eq!(got.0, c.exit_code, "{}: exit code", c.case);
    assert_eq!(got.1, c.stdout, "{}: stdout", c.case);
    assert_eq!(got.2, c.stderr, "{}: stderr", c.case);
}

/// Job 11 of the reference: a batch job whose batch step has CPU times but no TRES usage.
fn job11() -> AcctJob {
    let cpu_only = StepStats { user_usec: 1_973_000, system_usec: 137_000, total_usec: 2_110_000, ..StepStats::default() };
    job(11, "COMPLETED", vec![step("batch", "COMPLETED", Some(cpu_only))])
}

#[test]
fn sacct_usage_fields_as_slurm_prints_them() {
    for name in ["sacct_usage_fields", "sacct_usage_fields_P", "sacct_units_M", "sacct_units_G"] {
        let c = golden(name);
        check(&c, sacct_out(&c, &[job11()]));
    }
    // Job 10: cancelled by root, a batch step and an srun step with their peaks; the job's
    // TotalCPU is the sum of the steps' microseconds (3.6 + 2.4 ms).
    let mut j = job(10, "CANCELLED", vec![step("batch", "CANCELLED", Some(measured(3_600, 12_352))), step("0", "CANCELLED", Some(measured(2_400, 1_564)))]);
    j.cancelled_by = Some(0);
    let c = golden("sacct_steps_usage");
    check(&c, sacct_out(&c, &[j]));
    let c = golden("sacct_units_bad");
    check(&c, sacct_out(&c, &[]));
    let c = golden("sacct_q_normal");
    let Parsed::Query(p) = sacct::parse(&argv(&c), &no_env, 0, 0) else { panic!("{}", c.cmd) };
    assert_eq!(p.query.qos, vec!["normal".to_string()]);
    check(&c, sacct_out(&c, &[job11()]));
}

/// Job 10 running on the reference: batch step and step 0, one task each.
fn job10_running() -> AcctJob {
    let mut j = job(
        10,
        "RUNNING",
        vec![step("batch", "RUNNING", Some(measured(3_000, 12_352))), step("0", "RUNNING", Some(measured(2_000, 1_564)))],
    );
    j.end_time = None;
    for s in &mut j.steps {
        s.end_time = None;
    }
    j
}

fn sstat_out(c: &GoldenCase, jobs: &[AcctJob], uid: u32) -> (i32, String, String) {
    match sstat::parse(&argv(c)) {
        Ok(p) => {
            let (out, err) = sstat::render(jobs, &p.refs, &p, uid);
            (0, out, err)
        }
        Err(e) => e,
    }
}

#[test]
fn sstat_as_slurm_prints_it() {
    let running = [job10_running()];
    for name in ["sstat_j_step", "sstat_j_batch", "sstat_a", "sstat_o_p", "sstat_n", "sstat_P_n", "sstat_no_job", "sstat_bad_field", "sstat_helpformat", "sstat_e"] {
        let c = golden(name);
        check(&c, sstat_out(&c, &running, 0));
    }
    let mut alice = job10_running();
    alice.uid = 2001;
    let c = golden("sstat_alice");
    check(&c, sstat_out(&c, std::slice::from_ref(&alice), 2001));
    let c = golden("sstat_bob_other_user");
    check(&c, sstat_out(&c, std::slice::from_ref(&alice), 2002));
    let c = golden("sstat_unknown_job");
    check(&c, sstat_out(&c, &running, 0));
    let mut pending = job(4, "PENDING", Vec::new());
    (pending.start_time, pending.end_time) = (None, None);
    let c = golden("sstat_pending_job");
    check(&c, sstat_out(&c, &[pending], 0));
    // The default fields: the header byte for byte, and the values we measure too.
    let c = golden("sstat_j");
    let (code, out, err) = sstat_out(&c, &running, 0);
    assert_eq!((code, err.as_str()), (0, ""));
    let want: Vec<&str> = c.stdout.lines().collect();
    let got: Vec<&str> = out.lines().collect();
    assert_eq!(got[..2], want[..2], "header");
    let cols = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    let (w, g) = (cols(want[2]), cols(got[2]));
    assert_eq!(w.len(), g.len());
    // All but what the reference measured that we do not: virtual sizes, CPU frequency.
    for i in [0, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 19, 20, 21, 22] {
        assert_eq!(g[i], w[i], "column {i} of {got:?}");
    }
}
