//! The local-cluster fixture: two clusters at once, each fully stopped on drop.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_commands::dev;

#[test]
fn two_clusters_in_parallel_and_nothing_left() {
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| LocalCluster::start(None));
        let b = s.spawn(|| LocalCluster::start(None));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_ne!(a.ctld_addr(), b.ctld_addr());
    for c in [&a, &b] {
        let nodes = c.query_nodes();
        let names: Vec<&str> = nodes.iter().map(|n| n.0.as_str()).collect();
        assert_eq!(names, ["gpu01", "gpu02", "gpu03", "gpu04"]);
        assert!(nodes.iter().all(|n| n.1 == "IDLE" && !n.2), "{nodes:?}");
        assert_eq!(c.env()[0].1, c.slurm_conf().to_string_lossy());
    }
    let pids: Vec<i32> = a.pids().into_iter().chain(b.pids()).collect();
    assert_eq!(pids.len(), 10);
    let starts: Vec<u64> = pids.iter().map(|p| dev::start_time(*p).expect("running")).collect();
    drop(a);
    drop(b);
    for (p, s) in pids.iter().zip(starts) {
        assert!(!dev::alive(*p, s), "pid {p} still runs");
    }
}
