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
/// restart; on SQLite the database file gives the space back (PostgreSQL's autovacuum does
/// that on its own time).
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
    let sqlite = !harness::on_postgres();
    assert_eq!(h.ctl().store().auto_vacuum().unwrap(), sqlite.then_some(2), "incremental vacuum");
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
    if sqlite {
        assert!(file_after < file_before / 2, "space given back: {file_before} -> {file_after}");
    }
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

fn acks_to(h: &Harness, node: &str) -> Vec<Vec<u64>> {
    h.sent
        .iter()
        .filter(|(n, _)| n == node)
        .filter_map(|(_, m)| match m {
            CtlToNode::AckExits { job_ids } => Some(job_ids.clone()),
            _ => None,
        })
        .collect()
}

fn cancel(id: u64) -> Request {
    Request::CancelJob(CancelJob { jobs: vec![JobRef::id(id)], ..CancelJob::default() })
}

/// The full-disk scenario on `h` (its store already unable to grow after `fill`, able again
/// after `free`): a submission whose commit fails is refused with `ESLURM_WRITING_TO_FILE`
/// and exists nowhere (not in memory, not after a restart); queries are answered; new work is
/// refused at once; a job's end and a cancel are handled but their acknowledgement and reply
/// wait for the commit; once space returns the held effects go out and submissions are
/// accepted again. `strict`: commits surely fail until `free` (else a small one may pass).
fn full_disk_scenario(h: &mut Harness, strict: bool, fill: &mut dyn FnMut(&Harness), free: &mut dyn FnMut(&Harness)) {
    let run = h.submit(gpu_job(User::Alice, 8, Some(50)));
    let mut held = gpu_job(User::Alice, 8, None);
    held.hold = true;
    let to_cancel = h.submit(held);
    fill(h);
    let r = h.call(User::Alice, Request::SubmitJob(Box::new(big_job(User::Alice, 1 << 20))));
    eprintln!("the client sees: {r:?}");
    assert_eq!(r, Response::Error(SlurmError::new(ESLURM_WRITING_TO_FILE)), "refused when its commit fails");
    let refused = to_cancel + 1;
    assert!(h.jobs().all(|j| j.job_id != refused), "the refused job exists nowhere");
    // Queries are answered (the harness's own job query after every turn is one).
    let Response::Jobs(jobs) = h.call(User::Bob, Request::QueryJobs(JobQuery::default())) else { panic!("query") };
    assert!(jobs.iter().any(|j| j.job_id == run));
    // New work is refused before it changes anything, even a small job.
    let r = h.call(User::Alice, Request::SubmitJob(Box::new(job(User::Alice, None, 0))));
    assert_eq!(r, Response::Error(SlurmError::new(ESLURM_WRITING_TO_FILE)));
    // Ending work goes on in memory; its effects wait for the commit. (On a real full disk
    // a small commit may still fit in the WAL's space: then they go out at once.)
    h.replies_may_wait = true;
    h.rpc(User::Alice, cancel(to_cancel));
    h.advance(50);
    h.turn();
    assert_eq!(h.job(run).state, Some(JobStateWire::Completed));
    let node = h.job(run).nodes.clone();
    let failing = h.ctl().commit_failing().is_some();
    assert!(!strict || failing, "still failing");
    assert_eq!(acks_to(h, &node).is_empty(), failing, "an acknowledgement exactly when committed");
    free(h);
    h.turn();
    assert!(h.ctl().commit_failing().is_none());
    if failing {
        assert_eq!(acks_to(h, &node), vec![vec![run]], "the held acknowledgement goes out after the commit");
        assert!(matches!(h.replies(), [Response::JobResults(_)]), "the held cancel's reply: {:?}", h.replies());
    }
    h.replies_may_wait = false;
    let again = h.submit(job(User::Alice, None, 0));
    assert_eq!(again, refused + 1, "accepted again");
    // The store and the memory agree: after a restart, the same jobs in the same states.
    let before: Vec<(u64, Option<JobStateWire>)> = h.jobs().map(|j| (j.job_id, j.state)).collect();
    h.restart();
    h.turn();
    let after: Vec<(u64, Option<JobStateWire>)> = h.jobs().map(|j| (j.job_id, j.state)).collect();
    assert_eq!(before, after);
    assert_eq!(h.job(to_cancel).state, Some(JobStateWire::Cancelled));
}

/// Every commit fails as on a full disk (`SQLITE_FULL`, injected), then works again: the
/// controller neither panics nor runs ahead of its store.
#[test]
fn full_store_refuses_new_work_and_recovers() {
    let mut h = Harness::two_nodes("state_full_store_refuses_new_work");
    let mut fill = |h: &Harness| h.ctl().store().set_commit_fault(true);
    let mut free = |h: &Harness| h.ctl().store().set_commit_fault(false);
    full_disk_scenario(&mut h, true, &mut fill, &mut free);
    h.check();
}

/// A small tmpfs mounted for a test, unmounted (lazily) on every path out.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes `dir/filler` until the file system is full.
fn fill_up(dir: &std::path::Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).expect("filler");
    let chunk = vec![0u8; 64 << 10];
    loop {
        if let Err(e) = f.write_all(&chunk).and_then(|()| f.sync_all()) {
            assert_eq!(e.raw_os_error(), Some(28), "ENOSPC: {e}");
            break;
        }
    }
    // Smaller pieces until not even one block is left.
    while f.write_all(&[0u8; 512]).and_then(|()| f.sync_all()).is_ok() {}
}

/// Root: the state directory on an 8 MiB tmpfs that fills up. Before: the commit panicked
/// ("cannot commit controller state: ... database or disk is full") and the daemon, restarted
/// by systemd into the same full disk, failed again. After: the scenario above, on a real
/// full file system.
#[test]
fn full_state_disk_refuses_new_work_and_recovers() {
    if std::env::var_os("FLOTILLA_TEST_ROOT").is_none() {
        eprintln!("SKIPPED: full state disk needs root (mount -t tmpfs); set FLOTILLA_TEST_ROOT=1");
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let state = top.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs"])
        .arg(&state)
        .status()
        .expect("mount runs");
    assert!(ok.success(), "mount -t tmpfs failed");
    let _mount = Mount(state.clone());
    let mut h = Harness::new_in("state_full_state_disk", TWO_NODES, CtlOptions::default(), Some(state.clone()));
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    let dir = state.clone();
    let mut fill = move |_: &Harness| fill_up(&dir);
    let dir = state.clone();
    let mut free = move |_: &Harness| std::fs::remove_file(dir.join("filler")).unwrap();
    full_disk_scenario(&mut h, false, &mut fill, &mut free);
    drop(h);
}

/// `MaxSubmitJobs` from `quota.conf` (Slurm's association limit, inherited from the account):
/// alice may have 2 jobs pending or running in `research`; a third, or an array that would
/// take her past it, is refused with Slurm's `ESLURM_ACCOUNTING_POLICY` and the reason
/// `AssocMaxSubmitJobLimit`, using no job id; bob (no limit) and alice after a job ended are
/// not held back, so one user cannot fill the controller's `MaxJobCount` for everyone.
#[test]
fn max_submit_jobs_per_user_refuses_beyond_the_limit() {
    let quotas = flotilla_core::quota::parse_quota_conf(
        "Account=research MaxSubmitJobs=2 Users=alice\nAccount=other Users=bob\n",
        "quota.conf",
    )
    .unwrap();
    let mut opts = CtlOptions::default();
    opts.admission.default_accounts = quotas.default_accounts();
    opts.quotas = quotas;
    let mut h = Harness::new("state_max_submit_jobs", TWO_NODES, opts);
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    let held = |who: User| {
        let mut j = job(who, None, 0);
        j.hold = true;
        j
    };
    let first = h.submit(held(User::Alice));
    h.submit(held(User::Alice));
    let r = h.call(User::Alice, Request::SubmitJob(Box::new(held(User::Alice))));
    let refused = SlurmError::with_message(ESLURM_ACCOUNTING_POLICY, "AssocMaxSubmitJobLimit");
    assert_eq!(r, Response::Error(refused.clone()));
    assert_eq!(
        refused.text,
        "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
    );
    assert_eq!(h.submit(held(User::Bob)), 3, "no id used by the refused one; bob is not limited");
    h.call(User::Alice, cancel(first));
    let mut arr = held(User::Alice);
    arr.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 1, step: 1 }], max_running: None });
    let r = h.call(User::Alice, Request::SubmitJob(Box::new(arr)));
    assert_eq!(r, Response::Error(refused), "an array counts each task");
    assert_eq!(h.submit(held(User::Alice)), 4, "a slot freed by the cancel");
    h.check();
}

/// alice may run 1 job at a time in `research` (`MaxJobs=1`, inherited by her association):
/// of her two 1-GPU jobs the second waits with Slurm's reason `AssocMaxJobsLimit` although
/// GPUs are free, bob's job beside them starts, and hers starts once the first has ended.
#[test]
fn max_jobs_per_user_holds_back_the_running_count() {
    let quotas = flotilla_core::quota::parse_quota_conf(
        "Account=org MaxJobs=1\nAccount=research Parent=org Users=alice\nAccount=other Users=bob\n",
        "quota.conf",
    )
    .unwrap();
    let mut opts = CtlOptions::default();
    opts.admission.default_accounts = quotas.default_accounts();
    opts.quotas = quotas;
    let mut h = Harness::new("state_max_jobs", TWO_NODES, opts);
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    let first = h.submit(gpu_job(User::Alice, 1, Some(60)));
    let second = h.submit(gpu_job(User::Alice, 1, Some(60)));
    let bobs = h.submit(gpu_job(User::Bob, 1, Some(60)));
    h.turn();
    assert_eq!(h.job(first).state, Some(JobStateWire::Running));
    assert_eq!(h.job(bobs).state, Some(JobStateWire::Running), "bob has no limit");
    assert_eq!(h.job(second).state, Some(JobStateWire::Pending));
    assert_eq!(h.job(second).reason, "AssocMaxJobsLimit");
    h.turn_until(10, 30, |h| h.job(first).state != Some(JobStateWire::Running));
    h.turn_until(3, 1, |h| h.job(second).state == Some(JobStateWire::Running));
    h.check();
}
