//! The controller enforces `quota.conf` (issue: hierarchical quotas): a job that would take its
//! account past `MaxGPUs=` stays pending with Slurm's `AssocGrpGRES` while GPUs are free, and
//! starts when the account's usage falls.

use flotilla_compat_tests::cluster::LocalCluster;
use std::time::{Duration, Instant};

fn out(c: &LocalCluster, args: &[&str], w: &std::path::Path, prog: &str) -> String {
    let o = c.run(prog, args, w);
    assert!(o.status.success(), "{prog} {args:?}: {o:?}");
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn max_gpus_of_quota_conf_holds_a_job_back() {
    flotilla_compat_tests::build_binaries();
    let conf = tempfile::tempdir().unwrap();
    let refconf = flotilla_compat_tests::shared_dir().join("slurm-reference/conf");
    for f in ["slurm.conf", "gres.conf", "topology.conf"] {
        std::fs::copy(refconf.join(f), conf.path().join(f)).unwrap();
    }
    std::fs::write(conf.path().join("quota.conf"), "Account=research MaxGPUs=8 Users=root\n").unwrap();
    let c = LocalCluster::start_with(Some(conf.path()), |_| {});
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    let submit = || out(&c, &["--parsable", "-A", "research", "--gres=gpu:8", "-o", "/dev/null", "--wrap", "sleep 60"], &w, "sbatch").trim().to_string();
    let (a, b) = (submit(), submit());
    let state = |id: &str| out(&c, &["-h", "-j", id, "-o", "%T %r"], &w, "squeue").trim().to_string();
    let t0 = Instant::now();
    while state(&a) != "RUNNING None" || !state(&b).starts_with("PENDING") || state(&b) == "PENDING None" {
        assert!(t0.elapsed() < Duration::from_secs(30), "{a}: {} / {b}: {}", state(&a), state(&b));
        std::thread::sleep(Duration::from_millis(100));
    }
    // Three of four nodes are idle: only the account's ceiling holds it back.
    assert_eq!(state(&b), "PENDING AssocGrpGRES");
    out(&c, &[&a], &w, "scancel");
    let t0 = Instant::now();
    while state(&b) != "RUNNING None" {
        assert!(t0.elapsed() < Duration::from_secs(30), "{b} did not start after {a} ended: {}", state(&b));
        std::thread::sleep(Duration::from_millis(100));
    }
    out(&c, &[&b], &w, "scancel");
}
