//! Bounded controller state (issue #17), in process through [`harness::Harness`]: batch
//! scripts have Slurm's size limit (`SchedulerParameters=max_script_size`, default 4 MiB) and
//! leave the state database with the job record after `MinJobAge`; a job the store has running
//! on a node slurm.conf no longer names ends `NODE_FAIL` (and is requeued) instead of stopping
//! the controller at every start. Each scenario's transcript is compared with its golden in
//! `tests/goldens/`, and its key facts are asserted by hand.

mod harness;

use flotilla_proto::errno::*;
use flotilla_proto::*;
use flotilla_slurmctld::ctld::CtlOptions;
use harness::*;

fn gpu_job(who: User, gpus: u64, runtime_s: Option<i64>) -> SubmitJob {
    let mut j = job(who, runtime_s, 0);
    j.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: gpus }];
    j
}

/// A job whose script is padded with a comment to `bytes` bytes.
fn big_job(who: User, bytes: usize) -> SubmitJob {
    let mut j = job(who, None, 0);
    let pad = bytes.saturating_sub(j.script.len() + 2);
    j.script.push('#');
    j.script.push_str(&"x".repeat(pad));
    j.script.push('\n');
    assert_eq!(j.script.len(), bytes);
    j
}

/// The state database's files on disk (bytes): the database and its WAL.
fn db_bytes(h: &Harness) -> u64 {
    ["flotilla.db", "flotilla.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(h.state_dir().join(f)).ok())
        .map(|m| m.len())
        .sum()
}

/// Twelve held submissions of 1 MiB scripts, cancelled: their scripts stay while the jobs are
/// visible (`MinJobAge`, 300 s), then leave the database with the job records, also after a
/// restart; the database file gives the space back.
#[test]
fn scripts_leave_the_store_with_the_job_after_min_job_age() {
    let mut h = Harness::two_nodes("state_scripts_purged_after_min_job_age");
    let mut ids = Vec::new();
    for _ in 0..12 {
        let mut j = big_job(User::Alice, 1 << 20);
        j.hold = true;
        ids.push(h.submit(j));
    }
    let req = Request::CancelJob(CancelJob { jobs: ids.iter().map(|&i| JobRef::id(i)).collect(), ..CancelJob::default() });
    h.call(User::Alice, req);
    assert!(h.jobs().all(|j| j.state == Some(JobStateWire::Cancelled)));
    assert_eq!(h.ctl().store().auto_vacuum().unwrap(), 2, "incremental vacuum");
    let held = h.ctl().store().script_bytes().unwrap();
    let file_before = db_bytes(&h);
    assert!(held >= 12 << 20, "scripts kept while the jobs are visible: {held}");
    h.advance(301);
    h.turn();
    assert_eq!(h.jobs().count(), 0, "finished jobs leave after MinJobAge");
    let left = h.ctl().store().script_bytes().unwrap();
    assert_eq!(left, 0, "scripts and environments purged with the job records");
    let file_after = db_bytes(&h);
    eprintln!("script bytes: {held} before the purge, {left} after; database files: {file_before} -> {file_after} bytes");
    assert!(file_after < file_before / 2, "space given back: {file_before} -> {file_after}");
    h.restart();
    assert_eq!(h.ctl().store().script_bytes().unwrap(), 0);
    // Accounting stays (sacct still knows the jobs).
    h.check();
}

/// A finished job past `MinJobAge` while the controller is down leaves the store at start.
#[test]
fn scripts_of_jobs_that_aged_while_down_are_purged_at_start() {
    let mut h = Harness::two_nodes("state_scripts_purged_at_start");
    let mut j = big_job(User::Alice, 100_000);
    j.hold = true;
    let id = h.submit(j);
    h.call(User::Alice, Request::CancelJob(CancelJob { jobs: vec![JobRef::id(id)], ..CancelJob::default() }));
    assert!(h.ctl().store().script_bytes().unwrap() >= 100_000);
    h.advance(400);
    h.restart();
    assert_eq!(h.ctl().store().script_bytes().unwrap(), 0);
    h.check();
}

/// A script over `max_script_size` is refused with Slurm's `ESLURM_PATHNAME_TOO_LONG` before a
/// job id is used (Slurm's `_test_job_desc_fields`); the default limit is 4 MiB.
#[test]
fn scripts_over_max_script_size_are_refused() {
    let conf = format!("{TWO_NODES}SchedulerParameters=bf_continue,max_script_size=1000\n");
    let mut h = Harness::new("state_max_script_size", &conf, CtlOptions::default());
    let r = h.call(User::Alice, Request::SubmitJob(Box::new(big_job(User::Alice, 1001))));
    let Response::Error(e) = r else { panic!("accepted: {r:?}") };
    assert_eq!(
        (e.code, e.text.as_str()),
        (ESLURM_PATHNAME_TOO_LONG, "Pathname of a file, directory or other parameter too long")
    );
    assert_eq!(h.submit(big_job(User::Alice, 1000)), 1, "no id consumed by the refused one");
    let mut d = Harness::new("state_max_script_size_default", TWO_NODES, CtlOptions::default());
    let r = d.call(User::Alice, Request::SubmitJob(Box::new(big_job(User::Alice, (4 << 20) + 1))));
    assert_eq!(r, Response::Error(SlurmError::new(ESLURM_PATHNAME_TOO_LONG)));
    assert_eq!(d.submit(big_job(User::Alice, 4 << 20)), 1);
    h.check();
}

const THREE_NODES: &str = "\
ClusterName=harness
SlurmctldHost=localhost
GresTypes=gpu
PreemptExemptTime=0
NodeName=gpu[01-03] Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 State=UNKNOWN
PartitionName=batch Nodes=gpu[01-03] Default=YES DefaultTime=01:00:00 MaxTime=2-00:00:00 State=UP
";

/// Running jobs on nodes removed from slurm.conf across a restart: the controller starts
/// (it panicked at every start), the job that may be requeued is requeued (`NODE_FAIL` run in
/// the accounting) and runs on the node that is left, the one that may not ends `NODE_FAIL`.
#[test]
fn running_job_on_a_removed_node_is_requeued_with_node_fail() {
    let mut h = Harness::new("state_node_removed_under_running_job", THREE_NODES, CtlOptions::default());
    for n in ["gpu01", "gpu02", "gpu03"] {
        h.register(n);
    }
    h.turn();
    let requeued = h.submit(gpu_job(User::Alice, 8, None));
    let mut nr = gpu_job(User::Alice, 8, None);
    nr.requeue = Some(false);
    let failed = h.submit(nr);
    assert_eq!(h.job(requeued).state, Some(JobStateWire::Running));
    assert_eq!(h.job(failed).state, Some(JobStateWire::Running));
    let used: Vec<String> = [requeued, failed].iter().map(|&j| h.job(j).nodes.clone()).collect();
    let left = ["gpu01", "gpu02", "gpu03"].into_iter().find(|n| !used.iter().any(|u| u == n)).unwrap();
    let conf = format!(
        "ClusterName=harness\nSlurmctldHost=localhost\nGresTypes=gpu\nPreemptExemptTime=0\n\
         NodeName={left} Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 State=UNKNOWN\n\
         PartitionName=batch Nodes={left} Default=YES DefaultTime=01:00:00 MaxTime=2-00:00:00 State=UP\n"
    );
    h.advance(10);
    h.restart_with(&conf);
    h.register(left);
    h.turn();
    assert_eq!(h.job(failed).state, Some(JobStateWire::NodeFail));
    let r = h.job(requeued);
    assert_eq!((r.state, r.restarts), (Some(JobStateWire::Running), 1), "requeued and started again");
    assert_eq!(r.nodes, left);
    // And again: the store holds no job on a vanished node any more.
    h.restart();
    h.register(left);
    h.turn();
    assert_eq!(h.job(requeued).state, Some(JobStateWire::Running));
    h.check();
}
