//! `flotilla bench scale` at the reduced size CI runs (1,000 emulated nodes, 10,000 pending and
//! 5,000 running jobs): every step happens as it must — all nodes register, the released jobs
//! all reach their nodes, the counts match, squeue and sacct list every job, and after a
//! controller restart every node registers again with no node marked down, no job requeued
//! and none ended. The figures are printed, never asserted (speed is the benchmark's).

use flotilla_admin::bench::{scale, ScaleOptions};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[test]
fn bench_scale_at_the_reduced_size_runs_correctly() {
    let dir = tempfile::Builder::new().prefix("flt-scale").tempdir_in("/tmp").unwrap();
    let mut opts = ScaleOptions::new(dir.path());
    opts.nodes = 1_000;
    opts.jobs = 10_000;
    opts.running = 5_000;
    opts.sample = Duration::from_secs(2);
    // Shorter than a keepalive period (100 s): the idle figure is printed, never asserted.
    opts.idle = Some(Duration::from_secs(2));
    let never = AtomicBool::new(false);
    let rep = scale(&opts, &never, &|s| eprintln!("{s}")).expect("the benchmark runs");
    println!("{rep}");
    assert!(rep.failures.is_empty(), "{rep}");
    assert_eq!(rep.figures.len(), 9, "{rep}");
    let names: Vec<&str> = rep.figures.iter().map(|f| f.name.split(',').next().unwrap()).collect();
    assert_eq!(
        names,
        [
            "registration storm",
            "steady state",
            "scheduling turn incl. commit",
            "job starts",
            "squeue with 15000 jobs",
            "sinfo with 1000 nodes",
            "sacct listing 15000 jobs",
            "controller memory",
            "recovery from the store"
        ]
    );
}
