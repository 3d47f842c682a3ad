//! `flotilla bench trace` at the reduced size CI runs: the first 300 jobs of ITP `cluster04`
//! replayed through a real `slurmctld --time-scale` and emulated nodes, and in the simulator.
//! Checks the driver end to end — every job is submitted (over several connections), starts
//! and ends on the controller and in the three simulations, the end latency is split, and the
//! distributions are computed from all of them — never a time or how closely the runs agree
//! (that is the benchmark's report, bench/results/trace-replay.md).

use flotilla_admin::trace::{trace, write, TraceOptions};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

#[test]
fn bench_trace_replays_300_jobs_through_the_daemons_and_the_simulator() {
    let dir = tempfile::Builder::new()
        .prefix("flt-trace")
        .tempdir_in("/tmp")
        .unwrap();
    let mut opts = TraceOptions::new(dir.path().join("run"));
    opts.traces = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("shared")
        .join("traces");
    opts.jobs = Some(300);
    // Jobs up to 517,490 s: some seconds of real time.
    opts.time_scale = 100_000.0;
    opts.submitters = 4;
    let never = AtomicBool::new(false);
    let rep = trace(&opts, &never, &|s| eprintln!("{s}")).expect("the replay runs");
    println!("{rep}");
    assert!(rep.failures.is_empty(), "{rep}");
    assert_eq!(rep.jobs.len(), 300);
    for (i, j) in rep.jobs.iter().enumerate() {
        let (Some(s), Some(e)) = (j.ctl_start, j.ctl_end) else {
            panic!("job {} did not run on the controller: {j:?}", i + 1)
        };
        assert!(j.ctl_submit <= s && s <= e, "job {}: {j:?}", i + 1);
        assert!(
            j.sim_start.is_some()
                && j.sim_end.is_some()
                && j.held_start.is_some()
                && j.held_sub_start.is_some(),
            "job {} did not run in a simulation: {j:?}",
            i + 1
        );
        assert!(
            j.ctl_overrun().is_some(),
            "job {}: no hold time: {j:?}",
            i + 1
        );
        assert!(
            j.ctl_state == "COMPLETED" || j.ctl_state == "TIMEOUT",
            "job {}: {j:?}",
            i + 1
        );
    }
    // Every job got its own id (several connections: not necessarily in arrival order).
    let mut ids: Vec<u64> = rep.jobs.iter().map(|j| j.job_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 300);
    // The end latency was split with the emulator's instants for the completed jobs.
    let completed = rep
        .jobs
        .iter()
        .filter(|j| j.ctl_state == "COMPLETED")
        .count();
    let split = format!("end latency split over {completed} jobs");
    assert!(
        rep.notes.iter().any(|n| n.starts_with(&split)),
        "{split}: {:?}",
        rep.notes
    );
    assert!(
        rep.notes
            .iter()
            .any(|n| n.starts_with("idle GPUs while a job is pending")),
        "{:?}",
        rep.notes
    );
    assert!(
        rep.idle_gpus(None) >= 0.0,
        "some job waited on the controller"
    );
    let d = rep.distributions();
    assert_eq!(d[0].0, "all");
    assert_eq!((d[0].1.n, d[0].2.n, d[0].3.n), (300, 300, 300));
    assert_eq!(
        d[1..].iter().map(|b| b.2.n).sum::<usize>(),
        300,
        "the gang buckets cover every job"
    );
    let out = dir.path().join("out");
    write(&rep, &out).unwrap();
    let csv = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 301);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert_eq!(md.matches("| all | 300 / 300 |").count(), 3, "{md}");
    assert!(md.contains("simulator with the controller's hold and submit times"));
}
