//! Steps' usage in the state database (`step_usage`, migration 9): node daemons' reports are
//! kept per (job, step, node), a newer report replaces the older one, and the accounting query
//! hands each step its usage combined over its nodes.

mod backends;

use flotilla_proto::{AcctJobRef, AcctQuery, StepUsage, Usage};
use flotilla_slurmctld::acct;
use flotilla_slurmctld::params;
use flotilla_slurmctld::store::runs::{read_usage, write_usage};
use flotilla_slurmctld::store::Store;

fn report(step: &str, node: &str, cpu: u64, rss: u64, done: bool) -> StepUsage {
    StepUsage {
        job_id: 7,
        run: 0,
        step: step.into(),
        node: node.into(),
        usage: Usage { user_usec: cpu, total_usec: cpu, max_rss: rss, ntasks: 1, ..Usage::default() },
        done,
        at: 100,
        exit: None,
    }
}

#[test]
fn reports_replace_per_node_and_combine_per_step() {
    backends::on_both("reports_replace_per_node_and_combine_per_step", |open| check(&open()));
}

fn check(store: &Store) {
    let c = store.db();
    write_usage(c, &[report("0", "gpu01", 1_000_000, 10 << 20, false)]).unwrap();
    // The end replaces the poll; the second node adds to it.
    write_usage(c, &[report("0", "gpu01", 3_000_000, 50 << 20, true), report("0", "gpu02", 2_000_000, 80 << 20, true)]).unwrap();
    // A poll read before the end and sent after it does not replace the end.
    write_usage(c, &[report("0", "gpu01", 2_000_000, 40 << 20, false)]).unwrap();
    write_usage(c, &[report("batch", "gpu01", 500_000, 5 << 20, false)]).unwrap();
    let u = read_usage(c, 7).unwrap();
    let s0 = &u["0"];
    assert_eq!((s0.total_usec, s0.max_rss, s0.max_rss_node.as_str(), s0.ntasks, s0.done), (5_000_000, 80 << 20, "gpu02", 2, true));
    assert!(!u["batch"].done);
    assert!(read_usage(c, 8).unwrap().is_empty());
    // A later poll (a requeued job's next run) does.
    let mut later = report("0", "gpu01", 100, 1, false);
    later.at = 200;
    let mut u2 = report("0", "gpu02", 100, 1, false);
    u2.at = 200;
    write_usage(c, &[later, u2]).unwrap();
    assert_eq!(read_usage(c, 7).unwrap()["0"].total_usec, 200);
    write_usage(c, &[report("0", "gpu01", 3_000_000, 50 << 20, true), report("0", "gpu02", 2_000_000, 80 << 20, true)]).unwrap();

    // The accounting query attaches it to the job's steps.
    c.exec(
        "INSERT INTO acct_jobs (job_id, name, \"user\", uid, account, partition, state, exit_code, signal, submit_time, \
         start_time, nodes, alloc_cpus, alloc_gpus, alloc_mem_mib, restarts, qos) \
         VALUES (7, 'j', 'alice', 2001, 'a', 'batch', 'RUNNING', 0, 0, 50, 60, 'gpu[01-02]', 2, 0, 0, 0, 'normal')",
        &[],
    )
    .unwrap();
    for step in ["batch", "0"] {
        c.exec(
            "INSERT INTO job_steps (job_id, step, state, exit_code, signal, start_time, nodes) VALUES (7, ?1, 'RUNNING', 0, 0, 60, 'gpu01')",
            &params![step],
        )
        .unwrap();
    }
    let q = AcctQuery { jobs: vec![AcctJobRef { job_id: 7, task: None, step: None }], ..AcctQuery::default() };
    let jobs = acct::query(c, &q).unwrap();
    let steps: Vec<(String, Option<u64>)> = jobs[0].steps.iter().map(|s| (s.step.clone(), s.usage.as_ref().map(|u| u.total_usec))).collect();
    assert_eq!(steps, vec![("batch".into(), Some(500_000)), ("0".into(), Some(5_000_000))]);
    // -q selects by QOS.
    let other = AcctQuery { qos: vec!["high".into()], ..q.clone() };
    assert!(acct::query(c, &other).unwrap().is_empty());
    let normal = AcctQuery { qos: vec!["normal".into()], ..q };
    assert_eq!(acct::query(c, &normal).unwrap().len(), 1);

    // A query over every job reads all jobs' steps and usage in one statement each: each job
    // still gets its own, and a job with none gets none.
    write_usage(c, &[StepUsage { job_id: 8, ..report("batch", "gpu03", 700_000, 1 << 20, true) }]).unwrap();
    for (id, nodes) in [(8i64, "gpu03"), (9, "gpu04")] {
        c.exec(
            "INSERT INTO acct_jobs (job_id, name, \"user\", uid, account, partition, state, exit_code, signal, submit_time, \
             start_time, nodes, alloc_cpus, alloc_gpus, alloc_mem_mib, restarts, qos) \
             VALUES (?1, 'j', 'alice', 2001, 'a', 'batch', 'RUNNING', 0, 0, 50, 60, ?2, 1, 0, 0, 0, 'normal')",
            &params![id, nodes],
        )
        .unwrap();
    }
    c.exec(
        "INSERT INTO job_steps (job_id, step, state, exit_code, signal, start_time, nodes) VALUES (8, 'batch', 'RUNNING', 0, 0, 60, 'gpu03')",
        &[],
    )
    .unwrap();
    type Steps = Vec<(String, Option<u64>)>;
    let all: Vec<(u64, Steps)> = acct::query(c, &AcctQuery::default())
        .unwrap()
        .iter()
        .map(|j| (j.job_id, j.steps.iter().map(|s| (s.step.clone(), s.usage.as_ref().map(|u| u.total_usec))).collect()))
        .collect();
    assert_eq!(
        all,
        vec![
            (7, vec![("batch".into(), Some(500_000)), ("0".into(), Some(5_000_000))]),
            (8, vec![("batch".into(), Some(700_000))]),
            (9, vec![]),
        ]
    );
}
