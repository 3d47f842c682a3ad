//! The controller's decisions, in process: scenarios driven through [`harness::Harness`]
//! (the real controller, a fake clock, fake node sessions, a store in a temp dir), each
//! written as a transcript compared with its golden in `tests/goldens/`
//! (`UPDATE_GOLDENS=1` re-records; review the diff). The key facts of each scenario are also
//! asserted by hand, so that re-recording a golden cannot hide a regression.
//!
//! Times are Slurm's defaults (`KillWait=30`, `MinJobAge=300`, a requeued job held back
//! 121 s); the clock only moves when a scenario says so.

mod harness;

use flotilla_proto::errno::*;
use flotilla_proto::*;
use flotilla_slurmctld::ctld::{CtlOptions, Due, Reply};
use harness::*;

fn gres(n: u64) -> Vec<GresSpec> {
    vec![GresSpec { name: "gpu".into(), gpu_type: None, count: n }]
}

/// A job of `gpus` GPUs on one node.
fn gpu_job(who: User, gpus: u64, runtime_s: Option<i64>, exit: i32) -> SubmitJob {
    let mut j = job(who, runtime_s, exit);
    j.gres = gres(gpus);
    j
}

fn state(h: &Harness, id: u64) -> JobStateWire {
    h.job(id).state.expect("a state")
}

fn cancel(ids: &[u64]) -> Request {
    Request::CancelJob(CancelJob { jobs: ids.iter().map(|&i| JobRef::id(i)).collect(), ..CancelJob::default() })
}

/// `sbatch --hold` of a 10 s job of `who`.
fn held_job(who: User) -> SubmitJob {
    let mut j = job(who, Some(10), 0);
    j.hold = true;
    j
}

fn hold(op: HoldOp, id: u64) -> Request {
    Request::HoldRelease(HoldRelease { jobs: vec![JobRef::id(id)], op })
}

fn requeue(id: u64, hold: bool) -> Request {
    Request::Requeue(RequeueJob { jobs: vec![JobRef::id(id)], hold })
}

fn sent_to(h: &Harness, node: &str) -> Vec<String> {
    h.sent.iter().filter(|(n, _)| n == node).map(|(_, m)| describe_ctl_msg(m, T0)).collect()
}

/// Submit, run, complete: a job starts in the cycle of its submission's turn (the node is told
/// to launch it), its exit is acknowledged, and it ends COMPLETED (exit 0) or FAILED (exit 3).
#[test]
fn submit_run_complete() {
    let mut h = Harness::two_nodes("ctl_submit_run_complete");
    let ok = h.submit(job(User::Alice, Some(30), 0));
    assert_eq!(state(&h, ok), JobStateWire::Running);
    assert_eq!(sent_to(&h, "gpu01"), vec!["launch job 1 run 0 gpus=none cpus=1 mem=0MiB nodes=gpu01 batch-host"]);
    let bad = h.submit(gpu_job(User::Bob, 2, Some(10), 3));
    h.advance(10);
    h.turn();
    assert_eq!((state(&h, bad), h.job(bad).exit_code), (JobStateWire::Failed, 3));
    h.advance(20);
    h.turn();
    assert_eq!((state(&h, ok), h.job(ok).exit_code), (JobStateWire::Completed, 0));
    // Finished jobs stay visible for MinJobAge (300 s), then leave the table.
    h.advance(301);
    h.turn();
    assert_eq!(h.jobs().count(), 0);
    h.check();
}

/// Rejected submissions consume ids as in Slurm (goldens 0064-0081) when they fail after the
/// id (node configuration: the job is recorded FAILED with `BadConstraints`), not before (an
/// unknown partition); `--test-only` consumes one too.
#[test]
fn submission_errors_and_ids() {
    let mut h = Harness::two_nodes("ctl_submission_errors_and_ids");
    assert_eq!(h.submit(job(User::Alice, Some(5), 0)), 1);
    let r = h.call(User::Alice, Request::SubmitJob(Box::new(gpu_job(User::Alice, 9, None, 0))));
    assert_eq!(r, Response::Error(SlurmError::new(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)));
    let mut p = job(User::Alice, None, 0);
    p.partition = Some("nosuch".into());
    let Response::Error(e) = h.call(User::Alice, Request::SubmitJob(Box::new(p))) else { panic!() };
    assert_eq!((e.code, e.text.as_str()), (ESLURM_INVALID_PARTITION_NAME, "Invalid partition name specified"));
    let mut t = job(User::Alice, None, 0);
    t.test_only = true;
    let Response::TestOnly(t) = h.call(User::Alice, Request::SubmitJob(Box::new(t))) else { panic!() };
    assert_eq!(t.job_id, 3, "a failed node-config submission and --test-only consume ids");
    assert_eq!(h.submit(job(User::Alice, None, 0)), 4);
    let f = h.job(2);
    assert_eq!((f.state, f.reason.as_str()), (Some(JobStateWire::Failed), "BadConstraints"));
    // Another user's submission for alice is refused.
    let r = h.call(User::Bob, Request::SubmitJob(Box::new(job(User::Alice, None, 0))));
    assert_eq!(r, Response::Error(SlurmError::new(ESLURM_USER_ID_MISSING)));
    h.check();
}

/// `FirstJobId` (`CtlOptions::first_job_id`): the first id given; a restart counts on from
/// the stored counter, which is above it.
#[test]
fn first_job_id() {
    let opts = CtlOptions { first_job_id: 5000, ..CtlOptions::default() };
    let mut h = Harness::new("ctl_first_job_id", TWO_NODES, opts);
    assert_eq!(h.submit(job(User::Alice, None, 0)), 5000);
    assert_eq!(h.submit(job(User::Alice, None, 0)), 5001);
    h.restart();
    assert_eq!(h.submit(job(User::Alice, None, 0)), 5002);
    h.check();
}

/// `MaxJobId` (`CtlOptions::max_job_id`, Slurm's `get_next_job_id`): ids stay below it,
/// wrap to `FirstJobId` and skip ids still in use (a finished job's until it is purged, also
/// after a restart); with every id in use a submission is refused with Slurm's `EAGAIN`.
#[test]
fn max_job_id_wraps_and_skips_ids_in_use() {
    let opts = CtlOptions { first_job_id: 100, max_job_id: 103, min_job_age_s: 60, ..CtlOptions::default() };
    let mut h = Harness::new("ctl_max_job_id", TWO_NODES, opts);
    let held = || SubmitJob { hold: true, ..job(User::Alice, None, 0) };
    assert_eq!([h.submit(held()), h.submit(held()), h.submit(held())], [100, 101, 102]);
    let refused = Response::Error(SlurmError::new(EAGAIN));
    assert_eq!(h.call(User::Alice, Request::SubmitJob(Box::new(held()))), refused);
    h.call(User::Alice, cancel(&[101]));
    assert_eq!(h.call(User::Alice, Request::SubmitJob(Box::new(held()))), refused, "a finished job keeps its id");
    h.advance(61);
    h.turn_until(5, 1, |h| h.jobs().all(|j| j.job_id != 101));
    assert_eq!(h.submit(held()), 101, "wrapped to FirstJobId: 100 is in use, 101 free again");
    h.restart();
    assert_eq!(h.call(User::Alice, Request::SubmitJob(Box::new(held()))), refused, "the ids in use are known after a restart");
    h.call(User::Alice, cancel(&[100]));
    h.advance(61);
    h.turn_until(5, 1, |h| h.jobs().all(|j| j.job_id != 100));
    assert_eq!(h.submit(held()), 100);
    h.check();
}

/// `scancel` of a pending job (CANCELLED at once, keeping the reason it waited for, as Slurm
/// shows it), of a running job (stop notice and SIGTERM; CANCELLED when the node reports the
/// end), and of a running job that ignores SIGTERM (SIGKILL after `KillWait`, 30 s).
#[test]
fn cancel_pending_and_running() {
    let mut h = Harness::two_nodes("ctl_cancel_pending_and_running");
    let a = h.submit(gpu_job(User::Alice, 8, None, 0));
    let b = h.submit(on_term(gpu_job(User::Alice, 8, None, 0), OnTerm::Ignore));
    let waiting = h.submit(gpu_job(User::Alice, 8, None, 0));
    assert_eq!(state(&h, waiting), JobStateWire::Pending);
    let reason = h.job(waiting).reason.clone();
    h.call(User::Alice, cancel(&[waiting]));
    assert_eq!((state(&h, waiting), h.job(waiting).reason.as_str()), (JobStateWire::Cancelled, reason.as_str()));
    // Bob may not cancel alice's job.
    let r = h.call(User::Bob, cancel(&[a]));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.as_ref().is_some_and(|e| e.code == ESLURM_ACCESS_DENIED)), "{r:?}");
    h.advance(5);
    h.call(User::Alice, cancel(&[a]));
    assert_eq!(sent_to(&h, "gpu01"), vec!["stop notice job 1 at t=5: cancelled", "signal job 1 SIGTERM"]);
    h.turn();
    assert_eq!((state(&h, a), h.job(a).exit_signal), (JobStateWire::Cancelled, 15));
    h.call(User::Alice, cancel(&[b]));
    assert_eq!(state(&h, b), JobStateWire::Completing, "ignores SIGTERM: being stopped, shown ending");
    h.advance(29);
    h.turn();
    assert!(sent_to(&h, "gpu02").is_empty(), "no SIGKILL before KillWait");
    h.advance(1);
    h.turn();
    assert_eq!(sent_to(&h, "gpu02"), vec!["kill job 2 (SIGKILL)"]);
    h.turn();
    assert_eq!((state(&h, b), h.job(b).exit_signal), (JobStateWire::Cancelled, 9));
    h.check();
}

/// A job cancelled while it is being stopped for `scontrol requeue` (it ignores SIGTERM, so
/// the stop waits for KillWait) ends CANCELLED and never runs again: the cancel used to be
/// dropped, and the job went pending and ran after the requeue's hold-off.
#[test]
fn cancel_during_a_requeue_stop_ends_cancelled() {
    let mut h = Harness::two_nodes("ctl_cancel_during_requeue_stop");
    let j = h.submit(on_term(gpu_job(User::Alice, 8, None, 0), OnTerm::Ignore));
    assert_eq!(state(&h, j), JobStateWire::Running);
    h.advance(5);
    h.call(User::Alice, requeue(j, false));
    h.turn();
    assert_eq!(state(&h, j), JobStateWire::Completing, "ignores SIGTERM: still stopping");
    let r = h.call(User::Alice, cancel(&[j]));
    assert_eq!(r, Response::JobResults(vec![JobResult { job: JobRef::id(j), error: None }]));
    h.advance(30);
    h.turn();
    h.turn();
    assert_eq!((state(&h, j), h.job(j).restarts), (JobStateWire::Cancelled, 0));
    h.advance(200);
    h.turn();
    h.turn();
    assert_eq!(state(&h, j), JobStateWire::Cancelled, "does not come back after the hold-off");
    assert!(h.runs_on("gpu01").is_empty() && h.runs_on("gpu02").is_empty(), "ran again");
    h.check();
}

/// The ids of the jobs `squeue -t all -t <states>` selects.
fn selected(h: &mut Harness, states: &[JobStateWire]) -> Vec<u64> {
    let q = JobQuery {
        filter: JobFilter { states: states.to_vec(), ..JobFilter::default() },
        include_finished: true,
        ..JobQuery::default()
    };
    match h.call(User::Root, Request::QueryJobs(q)) {
        Response::Jobs(v) => v.iter().map(|j| j.job_id).collect(),
        r => panic!("job query failed: {r:?}"),
    }
}

/// A running job that `scancel` or `scontrol requeue` stops shows `COMPLETING` from the
/// request on, as Slurm's `_job_signal` and `_job_requeue_op` give it its end with the
/// completing flag at once (goldens-extra 0312/0313: `squeue` right after either prints
/// COMPLETING); `squeue -t CG` selects it and `-t R` does not. Only the display changes: its
/// node stays taken until the node reports the job gone (a waiting job does not start), then
/// it is CANCELLED, or PENDING for the requeue.
#[test]
fn stopped_running_job_shows_completing_at_once() {
    use JobStateWire::*;
    let mut h = Harness::two_nodes("ctl_stopped_job_shows_completing");
    let a = h.submit(on_term(gpu_job(User::Alice, 8, None, 0), OnTerm::Ignore));
    let b = h.submit(on_term(gpu_job(User::Alice, 8, None, 0), OnTerm::Ignore));
    let waiting = h.submit(gpu_job(User::Alice, 8, None, 0));
    assert_eq!((state(&h, a), state(&h, b), state(&h, waiting)), (Running, Running, Pending));
    h.call(User::Alice, cancel(&[a]));
    assert_eq!(state(&h, a), Completing, "cancelled: ending at once");
    h.call(User::Alice, requeue(b, false));
    assert_eq!((state(&h, a), state(&h, b)), (Completing, Completing), "requeued: ending at once");
    assert_eq!(h.job(b).reason.as_str(), "None");
    // `_job_requeue_op`: the run ended at the requeue (EndTime) while its node ends it.
    assert_eq!(h.job(b).end_time, Some(h.at() + T0));
    assert_eq!(selected(&mut h, &[Completing]), vec![a, b]);
    assert!(selected(&mut h, &[Running]).is_empty());
    h.advance(29);
    h.turn();
    assert_eq!(state(&h, waiting), Pending, "the nodes are still taken");
    h.advance(1);
    h.turn_until(5, 1, |h| state(h, a) == Cancelled && state(h, b) == Pending);
    assert_eq!(h.job(b).restarts, 1);
    h.turn_until(5, 1, |h| state(h, waiting) == Running);
}

fn acct_row(h: &mut Harness, id: u64) -> AcctJob {
    let q = AcctQuery { jobs: vec![AcctJobRef { job_id: id, task: None, step: None }], ..AcctQuery::default() };
    let Response::Acct(rows) = h.call(User::Root, Request::QueryAcct(q)) else { panic!("accounting query failed") };
    rows.into_iter().find(|r| r.job_id == id).expect("an accounting row")
}

/// A running job stopped by `scancel` or by its time limit has ended at the stop, as Slurm's
/// `_job_signal` and `_job_timed_out` end it (`end_time = now`, `job_completion_logger`;
/// goldens-extra 0314-0316): while its node still ends it (it ignores SIGTERM), `sacct` shows
/// it `CANCELLED` (by its canceller) or `TIMEOUT` with the stop as its end, `EndTime` is the
/// stop's time (not start + limit) and a timed-out job's reason is `TimeLimit`; the node's
/// later report of the end moves neither.
#[test]
fn stopped_job_is_accounted_and_ends_at_the_stop() {
    use JobStateWire::*;
    let mut h = Harness::two_nodes("ctl_stopped_job_ends_at_the_stop");
    let mut a = on_term(gpu_job(User::Alice, 8, None, 0), OnTerm::Ignore);
    a.time_limit = Some(TimeLimitWire::Minutes(10));
    let a = h.submit(a);
    let mut b = on_term(gpu_job(User::Alice, 8, None, 0), OnTerm::Ignore);
    b.time_limit = Some(TimeLimitWire::Minutes(1));
    let b = h.submit(b);
    h.advance(5);
    h.call(User::Alice, cancel(&[a]));
    let stop_a = h.at() + T0;
    assert_eq!((state(&h, a), h.job(a).end_time), (Completing, Some(stop_a)), "EndTime: the cancel's time");
    let row = acct_row(&mut h, a);
    assert_eq!((row.state.as_str(), row.end_time, row.exit_code, row.signal), ("CANCELLED", Some(stop_a), 0, 0));
    assert_eq!(row.cancelled_by, Some(2001));
    h.advance(55);
    h.turn();
    let stop_b = h.at() + T0;
    assert_eq!((state(&h, b), h.job(b).reason.as_str(), h.job(b).end_time), (Completing, "TimeLimit", Some(stop_b)));
    let row = acct_row(&mut h, b);
    assert_eq!((row.state.as_str(), row.end_time), ("TIMEOUT", Some(stop_b)));
    // After KillWait the nodes kill them; the end stays the stop's.
    h.turn_until(40, 1, |h| state(h, a) == Cancelled && state(h, b) == Timeout);
    assert_eq!((h.job(a).end_time, h.job(b).end_time), (Some(stop_a), Some(stop_b)));
    let (ra, rb) = (acct_row(&mut h, a), acct_row(&mut h, b));
    assert_eq!((ra.state.as_str(), ra.end_time, ra.cancelled_by), ("CANCELLED", Some(stop_a), Some(2001)));
    assert_eq!((rb.state.as_str(), rb.end_time), ("TIMEOUT", Some(stop_b)));
}

/// `scontrol requeue` of a running job ends its run at the requeue, as Slurm's
/// `_job_requeue_op` does (`end_time = now`, `job_completion_logger(job_ptr, true)`;
/// goldens-extra 0318-0320): while its node still ends it (it ignores SIGTERM), `sacct` shows
/// the run `REQUEUED 0:0` ended at the requeue, its batch step `REQUEUED` too (a step not
/// ended in an ended record); once the node is done the run keeps that end, its batch step
/// the signal that ended it, and the job's next record is `PENDING`. The other forms (0631-
/// 0633, 0630): a pending job or a run already being requeued is refused `Job is pending
/// execution`; a job being cancelled is requeued (its run `REQUEUED`, ended at the cancel);
/// a finished one is pending at once, its run rewritten `REQUEUED`.
#[test]
fn requeued_run_is_accounted_at_the_requeue() {
    use JobStateWire::*;
    let mut h = Harness::two_nodes("ctl_requeued_run_accounted_at_the_requeue");
    let a = h.submit(on_term(gpu_job(User::Alice, 8, None, 0), OnTerm::Ignore));
    let b = h.submit(on_term(gpu_job(User::Alice, 8, None, 0), OnTerm::Ignore));
    h.advance(5);
    let r = h.call(User::Alice, requeue(a, false));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.is_none()), "{r:?}");
    let at = h.at() + T0;
    assert_eq!((state(&h, a), h.job(a).end_time), (Completing, Some(at)));
    let row = acct_row(&mut h, a);
    assert_eq!((row.state.as_str(), row.end_time, row.exit_code, row.signal), ("REQUEUED", Some(at), 0, 0));
    let step = row.steps.iter().find(|s| s.step == "batch").expect("batch step");
    assert_eq!((step.state.as_str(), step.end_time), ("REQUEUED", Some(at)), "a step not ended takes the record's");
    // Requeued again while its node ends it: pending already.
    let r = h.call(User::Alice, requeue(a, false));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.as_ref().is_some_and(|e| e.code == ESLURM_JOB_PENDING)), "{r:?}");
    // A job being cancelled is requeued: its run ended at the cancel, REQUEUED, by no one.
    h.call(User::Alice, cancel(&[b]));
    let cancelled_at = h.at() + T0;
    h.advance(1);
    let r = h.call(User::Alice, requeue(b, false));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.is_none()), "{r:?}");
    let row = acct_row(&mut h, b);
    assert_eq!((row.state.as_str(), row.end_time, row.cancelled_by), ("REQUEUED", Some(cancelled_at), None));
    // After KillWait the node kills both: pending again, the run's end kept.
    h.turn_until(40, 1, |h| state(h, a) == Pending && state(h, b) == Pending);
    let q = |id| AcctQuery { jobs: vec![AcctJobRef { job_id: id, task: None, step: None }], duplicates: true, ..AcctQuery::default() };
    for (id, end) in [(a, at), (b, cancelled_at)] {
        let Response::Acct(rows) = h.call(User::Root, Request::QueryAcct(q(id))) else { panic!("accounting query failed") };
        let states: Vec<(&str, Option<i64>)> = rows.iter().map(|r| (r.state.as_str(), r.end_time)).collect();
        assert_eq!(states, vec![("REQUEUED", Some(end)), ("PENDING", None)], "sacct -D -j {id}");
        let step = rows[0].steps.iter().find(|s| s.step == "batch").expect("the run's batch step");
        assert_eq!((step.state.as_str(), step.signal), ("CANCELLED", 9), "killed after KillWait");
    }
    // A pending job is refused, held or not.
    let r = h.call(User::Alice, requeue(a, false));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.as_ref().is_some_and(|e| e.code == ESLURM_JOB_PENDING)), "{r:?}");
    let r = h.call(User::Alice, requeue(a, true));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.as_ref().is_some_and(|e| e.code == ESLURM_JOB_PENDING)), "{r:?}");
    // A finished job: pending at once; its run REQUEUED, ended at the requeue.
    let c = h.submit(gpu_job(User::Alice, 8, Some(10), 0));
    h.turn_until(30, 1, |h| state(h, c) == Completed);
    h.advance(3);
    let r = h.call(User::Alice, requeue(c, false));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.is_none()), "{r:?}");
    let at = h.at() + T0;
    assert_eq!((state(&h, c), h.job(c).restarts), (Pending, 1));
    let Response::Acct(rows) = h.call(User::Root, Request::QueryAcct(q(c))) else { panic!("accounting query failed") };
    let states: Vec<(&str, Option<i64>)> = rows.iter().map(|r| (r.state.as_str(), r.end_time)).collect();
    assert_eq!(states, vec![("REQUEUED", Some(at)), ("PENDING", None)], "sacct -D -j {c}");
    let step = rows[0].steps.iter().find(|s| s.step == "batch").expect("the run's batch step");
    assert_eq!(step.state.as_str(), "COMPLETED", "the run's batch step as it ended");
}

/// `scancel -t STATE` compares the base state of jobs that have not ended (scancel.c
/// `_filter_job_records`; goldens-extra 0322, 0323): a run being requeued is pending (Slurm's
/// `PENDING|COMPLETING`), so `-t CG` and `-t R` leave it alone and `-t PD` cancels it; `-t CG`
/// names no job, a job being cancelled included.
#[test]
fn scancel_state_filter_compares_the_base_state() {
    use JobStateWire::*;
    let mut h = Harness::two_nodes("ctl_scancel_state_filter");
    let a = h.submit(on_term(gpu_job(User::Alice, 8, None, 0), OnTerm::Ignore));
    let b = h.submit(on_term(gpu_job(User::Alice, 8, None, 0), OnTerm::Ignore));
    h.advance(5);
    h.call(User::Alice, requeue(a, false));
    h.call(User::Alice, cancel(&[b]));
    let by_state = |ids: &[u64], st: JobStateWire| {
        Request::CancelJob(CancelJob {
            jobs: ids.iter().map(|&i| JobRef::id(i)).collect(),
            filter: JobFilter { states: vec![st], ..JobFilter::default() },
            ..CancelJob::default()
        })
    };
    for st in [Completing, Running] {
        let r = h.call(User::Alice, by_state(&[a], st));
        assert!(matches!(&r, Response::JobResults(v) if v[0].error.is_none()), "{r:?}");
        let r = h.call(User::Alice, by_state(&[], st));
        assert!(matches!(&r, Response::JobResults(v) if v.is_empty()), "-t {st:?} names no job: {r:?}");
    }
    let row = acct_row(&mut h, a);
    assert_eq!(row.state.as_str(), "REQUEUED", "left alone");
    let r = h.call(User::Alice, by_state(&[a], Pending));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.is_none()), "{r:?}");
    h.turn_until(40, 1, |h| state(h, a) == Cancelled && state(h, b) == Cancelled);
}

/// `sbatch --hold` shows `JobHeldUser` at once and never starts; `scontrol release` lets it
/// run. An admin hold (`scontrol hold` by root) cannot be released by its user.
#[test]
fn hold_and_release() {
    let mut h = Harness::two_nodes("ctl_hold_and_release");
    let held = h.submit(held_job(User::Alice));
    assert_eq!((state(&h, held), h.job(held).reason.as_str()), (JobStateWire::Pending, "JobHeldUser"));
    h.advance(60);
    h.turn();
    assert_eq!(state(&h, held), JobStateWire::Pending, "held: does not run");
    h.call(User::Alice, hold(HoldOp::Release, held));
    assert_eq!(state(&h, held), JobStateWire::Running);
    // An admin hold on a pending job: its user cannot release it, an admin can.
    h.submit(gpu_job(User::Alice, 8, None, 0));
    h.submit(gpu_job(User::Alice, 8, None, 0));
    let p = h.submit(gpu_job(User::Alice, 8, Some(10), 0));
    h.call(User::Root, hold(HoldOp::Hold, p));
    assert_eq!(h.job(p).reason, "JobHeldAdmin");
    let r = h.call(User::Alice, hold(HoldOp::Release, p));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.as_ref().is_some_and(|e| e.code == ESLURM_ACCESS_DENIED)), "{r:?}");
    h.call(User::Root, hold(HoldOp::Release, p));
    assert_eq!((state(&h, p), h.job(p).reason.as_str()), (JobStateWire::Pending, "Resources"));
    // A running job held keeps running, priority 0 and `JobHeldUser` shown (Slurm 22.05
    // `_update_job`, goldens-extra 0644); released, it is numbered again at once.
    let r = h.call(User::Alice, hold(HoldOp::Hold, held));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.is_none()), "{r:?}");
    h.turn();
    let j = h.job(held);
    assert_eq!((j.state, j.reason.as_str(), j.priority), (Some(JobStateWire::Running), "JobHeldUser", 0));
    h.call(User::Alice, hold(HoldOp::Release, held));
    h.turn();
    let j = h.job(held);
    assert_eq!((j.state, j.reason.as_str()), (Some(JobStateWire::Running), "None"));
    assert!(j.priority > 0, "released: numbered again");
    h.check();
}

/// A job whose partition is `INACTIVE`: a release, an update and a hold are each made and
/// answered "Requested partition configuration not available now" (Slurm 22.05 `_update_job`
/// ends with `job_limits_check`, after the changes); the released job shows
/// `PartitionInactive` at once. With the partition `UP` again the same calls succeed.
#[test]
fn updates_in_an_inactive_partition_are_kept_and_answered_an_error() {
    let mut h = Harness::two_nodes("ctl_inactive_partition_updates");
    let id = h.submit(held_job(User::Alice));
    let state_of = |st: &str| Request::UpdatePartition(UpdatePartition { name: "batch".into(), state: Some(st.into()), ..UpdatePartition::default() });
    let r = h.call(User::Root, state_of("INACTIVE"));
    assert!(matches!(&r, Response::JobResults(v) if v.is_empty()), "{r:?}");
    let refused = |r: &Response| matches!(r, Response::JobResults(v) if v[0].error.as_ref().is_some_and(|e| e.code == ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE));
    let r = h.call(User::Alice, hold(HoldOp::Release, id));
    assert!(refused(&r), "{r:?}");
    let j = h.job(id);
    assert_eq!((j.state, j.reason.as_str()), (Some(JobStateWire::Pending), "PartitionInactive"), "released");
    assert!(j.priority > 0, "released: {}", j.priority);
    let comment = |c: &str| Request::UpdateJob(UpdateJob { job: JobRef::id(id), changes: vec![JobChange::Comment(c.into())] });
    let r = h.call(User::Alice, comment("kept"));
    assert!(matches!(&r, Response::Error(e) if e.code == ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE), "{r:?}");
    assert_eq!(h.job(id).comment.as_deref(), Some("kept"));
    let r = h.call(User::Alice, hold(HoldOp::Hold, id));
    assert!(refused(&r), "{r:?}");
    assert_eq!((h.job(id).reason.as_str(), h.job(id).priority), ("JobHeldUser", 0));
    h.call(User::Root, state_of("UP"));
    let r = h.call(User::Alice, comment("up"));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.is_none()), "{r:?}");
    let r = h.call(User::Alice, hold(HoldOp::Release, id));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.is_none()), "{r:?}");
    h.turn();
    assert_eq!(state(&h, id), JobStateWire::Running);
    h.check();
}

/// `scontrol requeue` of a running job: stop notice (requeued) and SIGTERM; when the node
/// reports the end the job is PENDING again, held back 121 s (Slurm's `cred_expire` + 1,
/// reason `BeginTime`), and then runs again as run 1. `scontrol requeuehold`: pending with
/// Slurm's `job requeued in held state` until released.
#[test]
fn requeue_and_requeuehold() {
    let mut h = Harness::two_nodes("ctl_requeue_and_requeuehold");
    let j = h.submit(gpu_job(User::Alice, 8, Some(100), 0));
    h.advance(10);
    h.call(User::Alice, requeue(j, false));
    assert_eq!(sent_to(&h, "gpu01"), vec!["stop notice job 1 at t=10: requeued", "signal job 1 SIGTERM"]);
    h.turn();
    let info = h.job(j);
    assert_eq!((info.state, info.reason.as_str(), info.restarts), (Some(JobStateWire::Pending), "BeginTime", 1));
    assert_eq!(info.eligible_time, Some(T0 + 10 + 121));
    h.advance(120);
    h.turn();
    assert_eq!(state(&h, j), JobStateWire::Pending, "held back until t=131");
    h.advance(1);
    h.turn();
    assert_eq!(state(&h, j), JobStateWire::Running);
    assert_eq!(h.runs_on("gpu01"), vec![(j, 1)], "run 1");
    h.advance(100);
    h.turn();
    assert_eq!((state(&h, j), h.job(j).restarts), (JobStateWire::Completed, 1));

    let k = h.submit(gpu_job(User::Alice, 8, Some(100), 0));
    h.call(User::Alice, requeue(k, true));
    h.turn();
    assert_eq!((state(&h, k), h.job(k).reason.as_str()), (JobStateWire::Pending, "job requeued in held state"));
    h.advance(60);
    h.turn();
    assert_eq!(state(&h, k), JobStateWire::Pending, "held: does not run");
    // Released within the hold-off of the requeue: BeginTime until it passes (checked on
    // Slurm 22.05), then it runs again.
    h.call(User::Alice, hold(HoldOp::Release, k));
    assert_eq!((state(&h, k), h.job(k).reason.as_str()), (JobStateWire::Pending, "BeginTime"));
    h.advance(61);
    h.turn();
    assert_eq!((state(&h, k), h.job(k).restarts), (JobStateWire::Running, 1));
    // A finished job may be requeued too (Slurm: `scontrol requeue` of a COMPLETED job): pending
    // at once, held back as a requeued run (`batch_requeue_fini`; goldens-extra 0630).
    h.call(User::Alice, requeue(j, false));
    assert_eq!((state(&h, j), h.job(j).restarts), (JobStateWire::Pending, 2));
    assert_eq!(h.job(j).eligible_time, Some(h.at() + T0 + 121));
    h.check();
}

/// `scontrol requeuehold State=SpecialExit` (Slurm's `_job_requeue_op` with
/// `JOB_SPECIAL_EXIT`): the run shows COMPLETING while its node ends it, then the job is
/// `SPECIAL_EXIT` with `job requeued in held state` and priority 0 (goldens-extra 0635);
/// `squeue -t SE` selects it and `-t PD` does not (squeue matches the flag); `scontrol
/// release` clears the flag (`_release_job_rec`): PENDING, and it runs again once the
/// hold-off passes. A finished job requeued so is `SPECIAL_EXIT` at once.
#[test]
fn requeuehold_special_exit_until_released() {
    use JobStateWire::*;
    let mut h = Harness::two_nodes("ctl_requeuehold_special_exit");
    let j = h.submit(gpu_job(User::Alice, 8, None, 0));
    h.advance(5);
    let se = |id: u64| Request::RequeueSpecialExit(RequeueJob { jobs: vec![JobRef::id(id)], hold: true });
    let r = h.call(User::Alice, se(j));
    assert!(matches!(&r, Response::JobResults(v) if v.len() == 1 && v[0].error.is_none()), "{r:?}");
    assert_eq!(state(&h, j), Completing, "the run is being ended");
    h.turn();
    let info = h.job(j);
    assert_eq!((info.state, info.reason.as_str(), info.priority), (Some(SpecialExit), "job requeued in held state", 0));
    assert_eq!(selected(&mut h, &[SpecialExit]), vec![j]);
    assert_eq!(selected(&mut h, &[Pending]), Vec::<u64>::new(), "-t PD does not match a special exit");
    h.advance(200);
    h.turn();
    assert_eq!(state(&h, j), SpecialExit, "held: does not run");
    h.call(User::Alice, hold(HoldOp::Release, j));
    assert_eq!((state(&h, j), h.job(j).restarts), (Running, 1), "released: pending, and its turn starts it");

    // A finished job: pending at once, in the special exit state.
    let k = h.submit(gpu_job(User::Alice, 8, Some(10), 0));
    h.advance(11);
    h.turn();
    assert_eq!(state(&h, k), Completed);
    h.call(User::Alice, se(k));
    assert_eq!((state(&h, k), h.job(k).reason.as_str()), (SpecialExit, "job requeued in held state"));
    // A pending one is refused as for any requeue.
    let r = h.call(User::Alice, se(k));
    assert!(matches!(&r, Response::JobResults(v) if v[0].error.as_ref().is_some_and(|e| e.code == ESLURM_JOB_PENDING)), "{r:?}");
}

/// `RequeueExit=3,5-6` and `RequeueExitHold=4-5` (Slurm 22.05 `job_hold_requeue`, as the
/// reference shows them): a script exiting 3 or 5 is requeued (`PENDING`, `BeginTime` for the
/// hold-off, one restart, `ExitCode=3:0` kept), one exiting 4 is requeued held in state
/// `SPECIAL_EXIT` with reason `JobHeldUser` and priority 0, even submitted `--no-requeue`;
/// one exiting 7 fails; 5, in both lists, is requeued without a hold (`RequeueExit` is tested
/// first in `_set_job_requeue_exit_value`).
#[test]
fn requeue_exit_codes() {
    use JobStateWire::*;
    let conf = format!("{TWO_NODES}RequeueExit=3,5-6\nRequeueExitHold=4-5\n");
    let mut h = Harness::new("ctl_requeue_exit", &conf, CtlOptions::default());
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    let again = h.submit(gpu_job(User::Alice, 1, Some(5), 3));
    let mut j = gpu_job(User::Alice, 1, Some(5), 4);
    j.requeue = Some(false);
    let held = h.submit(j);
    let failed = h.submit(gpu_job(User::Alice, 1, Some(5), 7));
    let five = h.submit(gpu_job(User::Alice, 1, Some(5), 5));
    h.turn_until(5, 1, |h| [again, held, failed, five].iter().all(|&j| state(h, j) == Running));
    h.advance(6);
    h.turn_until(5, 1, |h| state(h, failed) == Failed && state(h, again) == Pending && h.job(again).reason.as_str() == "BeginTime");
    let a = h.job(again);
    assert_eq!((a.state, a.reason.as_str(), a.restarts, a.exit_code), (Some(Pending), "BeginTime", 1, 3));
    assert_eq!(state(&h, five), Pending);
    let b = h.job(held);
    assert_eq!((b.state, b.reason.as_str(), b.priority, b.restarts, b.exit_code), (Some(SpecialExit), "JobHeldUser", 0, 1, 4));
    assert_eq!(h.job(failed).exit_code, 7);
    h.check();
}

/// `--deadline` and `--time-min` (Slurm 22.05 `_valid_job_part`, `deadline_ok`, `schedule()`):
/// a deadline already past, or one sooner than now plus the minimum, is refused before a job id
/// is taken; a pending job that can no longer end by its deadline ends `DEADLINE` (reason
/// `DeadLine`, exit `0:1`) at the next cycle, a held one only once released; one that starts
/// runs at most until the deadline, and `scontrol update TimeMin=` above the limit is refused.
#[test]
fn deadline() {
    use JobStateWire::*;
    let mut h = Harness::two_nodes("ctl_deadline");
    let now = || T0;
    let with = |t: u32, min: Option<u32>, deadline: i64| {
        let mut j = gpu_job(User::Alice, 1, None, 0);
        j.time_limit = Some(TimeLimitWire::Minutes(t));
        j.time_min = min.map(TimeLimitWire::Minutes);
        j.deadline = Some(deadline);
        j
    };
    let refused = |h: &mut Harness, j: SubmitJob| match h.call(User::Alice, Request::SubmitJob(Box::new(j))) {
        Response::Error(e) => e.code,
        other => panic!("accepted: {other:?}"),
    };
    let t = now() + h.at();
    assert_eq!(refused(&mut h, with(30, None, t - 60)), ESLURM_INVALID_TIME_LIMIT);
    assert_eq!(refused(&mut h, with(30, Some(10), t + 300)), ESLURM_INVALID_TIME_MIN_LIMIT);
    assert_eq!(refused(&mut h, with(10, Some(20), t + 3600)), ESLURM_INVALID_TIME_MIN_LIMIT);
    let late = h.submit(with(30, None, t + 300));
    let mut j = with(30, None, t + 300);
    j.hold = true;
    let held = h.submit(j);
    let cut = h.submit(with(30, Some(2), t + 330));
    h.turn_until(5, 1, |h| state(h, late) == Deadline && state(h, cut) == Running);
    let l = h.job(late);
    assert_eq!((l.reason.as_str(), l.exit_code, l.exit_signal, l.deadline), ("DeadLine", 0, 1, Some(t + 300)));
    assert_eq!(l.start_time, l.end_time, "ended without starting: started when it ended");
    assert_eq!((state(&h, held), h.job(held).reason.as_str()), (Pending, "JobHeldUser"));
    let c = h.job(cut);
    assert_eq!((c.time_limit, c.time_min), (Some(TimeLimitWire::Minutes(5)), Some(2)), "cut to the deadline");
    let upd = |id, c| Request::UpdateJob(UpdateJob { job: JobRef::id(id), changes: vec![c] });
    let r = h.call(User::Alice, upd(held, JobChange::TimeMin(TimeLimitWire::Minutes(40))));
    assert_eq!(r, Response::Error(SlurmError::new(ESLURM_INVALID_TIME_MIN_LIMIT)));
    let r = h.call(User::Alice, upd(held, JobChange::Deadline(t + 7200)));
    assert_eq!(r, Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED)), "a deadline is an operator's");
    h.rpc(User::Alice, hold(HoldOp::Release, held));
    h.turn_until(5, 1, |h| state(h, held) == Deadline);
    h.advance(5 * 60);
    h.turn_until(5, 1, |h| state(h, cut) == Timeout);
    h.check();
}

/// A time limit (`-t 1`): at start + 60 s a stop notice (time limit) and SIGTERM; TIMEOUT.
#[test]
fn time_limit() {
    let mut h = Harness::two_nodes("ctl_time_limit");
    let mut j = job(User::Alice, None, 0);
    j.time_limit = Some(TimeLimitWire::Minutes(1));
    let id = h.submit(j);
    h.advance(59);
    h.turn();
    assert!(h.sent.is_empty());
    h.advance(1);
    h.turn();
    assert_eq!(sent_to(&h, "gpu01"), vec!["stop notice job 1 at t=60: time limit", "signal job 1 SIGTERM"]);
    h.turn();
    assert_eq!(state(&h, id), JobStateWire::Timeout);
    h.check();
}

/// `scontrol update EndTime=` (Slurm 22.05 `_update_job`): a job not running refuses it; a
/// user brings a running job's end closer (its 60 min limit becomes 11: the difference
/// rounded to the minute) but not later; an operator moves it later; one in the past is
/// refused; the job then times out at its new limit.
#[test]
fn end_time() {
    let mut h = Harness::two_nodes("ctl_end_time");
    let end = |id: u64, t: i64| Request::UpdateJob(UpdateJob { job: JobRef::id(id), changes: vec![JobChange::EndTime(t)] });
    let code = |r: Response| match r {
        Response::Error(e) => Some(e.code),
        Response::JobResults(v) => v[0].error.as_ref().map(|e| e.code),
        other => panic!("{other:?}"),
    };
    let held = h.submit(held_job(User::Alice));
    let r = h.call(User::Alice, end(held, T0 + 600));
    assert_eq!(code(r), Some(ESLURM_JOB_NOT_RUNNING));
    let mut j = job(User::Alice, None, 0);
    j.time_limit = Some(TimeLimitWire::Minutes(60));
    let id = h.submit(j);
    assert_eq!(state(&h, id), JobStateWire::Running);
    h.advance(10);
    let t = T0 + h.at();
    assert_eq!(code(h.call(User::Alice, end(id, t + 600))), None);
    assert_eq!(h.job(id).time_limit, Some(TimeLimitWire::Minutes(11)));
    assert_eq!(code(h.call(User::Alice, end(id, t + 7200))), Some(ESLURM_ACCESS_DENIED));
    assert_eq!(code(h.call(User::Root, end(id, t - 60))), Some(ESLURM_INVALID_TIME_VALUE));
    assert_eq!(code(h.call(User::Root, end(id, t + 1200))), None);
    assert_eq!(h.job(id).time_limit, Some(TimeLimitWire::Minutes(20)));
    h.advance(20 * 60 - 11);
    h.turn();
    assert_eq!(state(&h, id), JobStateWire::Running);
    h.advance(1);
    h.turn();
    h.turn();
    assert_eq!(state(&h, id), JobStateWire::Timeout);
    h.check();
}

/// An array with a throttle (`--array=0-5%2`): at most two tasks run at once; each started task
/// gets a job id of its own, the last one the array's id.
#[test]
fn array_throttle() {
    let mut h = Harness::two_nodes("ctl_array_throttle");
    let mut a = gpu_job(User::Alice, 1, Some(10), 0);
    a.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 5, step: 1 }], max_running: Some(2) });
    let aid = h.submit(a);
    let mut max_running = 0;
    h.turn_until(20, 5, |h| {
        let tasks: Vec<&JobInfo> = h.jobs().filter(|j| j.array_job_id == Some(aid)).collect();
        max_running = max_running.max(tasks.iter().filter(|j| j.state == Some(JobStateWire::Running)).count());
        tasks.len() == 6 && tasks.iter().all(|j| j.state == Some(JobStateWire::Completed))
    });
    assert_eq!(max_running, 2, "throttle %2");
    let tasks: Vec<(u64, Option<u32>)> =
        h.jobs().filter(|j| j.array_job_id == Some(aid)).map(|j| (j.job_id, j.array_task_id)).collect();
    assert_eq!(tasks, vec![(1, Some(5)), (2, Some(0)), (3, Some(1)), (4, Some(2)), (5, Some(3)), (6, Some(4))]);
    h.check();
}

/// `scontrol update jobid=A_4 TimeLimit=3` on a pending task of a throttled array splits the
/// task off into a record of its own under a new job id (Slurm's `update_job_str` ->
/// `job_array_split`; golden 0236 -> 0252, where 64_4 ran as job 71 before 64_1): only that
/// task's time limit changes, the array keeps its id and other tasks, and the split record
/// counts against the `%2` throttle, taking a free slot before the array's own tasks.
#[test]
fn array_task_update_splits_it_off() {
    let mut h = Harness::two_nodes("ctl_array_task_split");
    let mut a = gpu_job(User::Alice, 1, Some(10), 0);
    a.time_limit = Some(TimeLimitWire::Minutes(5));
    a.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 5, step: 1 }], max_running: Some(2) });
    let aid = h.submit(a);
    let running = |h: &Harness| -> Vec<u32> {
        let mut r: Vec<u32> = h
            .jobs()
            .filter(|j| j.array_job_id == Some(aid) && j.state == Some(JobStateWire::Running))
            .filter_map(|j| j.array_task_id)
            .collect();
        r.sort_unstable();
        r
    };
    h.turn_until(5, 1, |h| running(h) == vec![0, 1]);
    let upd = UpdateJob { job: JobRef { job_id: aid, tasks: Some(vec![4]) }, changes: vec![JobChange::TimeLimit(TimeLimitWire::Minutes(3))] };
    h.rpc(User::Alice, Request::UpdateJob(upd));
    h.turn();
    let split: Vec<&JobInfo> = h.jobs().filter(|j| j.array_job_id == Some(aid) && j.array_task_id == Some(4)).collect();
    assert_eq!(split.len(), 1, "task 4 has a record of its own");
    let sid = split[0].job_id;
    assert_ne!(sid, aid, "the split task takes a new job id, the array keeps its own");
    assert_eq!(split[0].time_limit, Some(TimeLimitWire::Minutes(3)));
    assert_eq!(split[0].reason, "JobArrayTaskLimit");
    assert_eq!(h.job(aid).time_limit, Some(TimeLimitWire::Minutes(5)), "the other tasks keep theirs");
    let mut second = Vec::new();
    let mut max_running = 0;
    h.turn_until(40, 2, |h| {
        let r = running(h);
        max_running = max_running.max(r.len());
        if second.is_empty() && !r.is_empty() && !r.contains(&0) && !r.contains(&1) {
            second = r;
        }
        let tasks: Vec<&JobInfo> = h.jobs().filter(|j| j.array_job_id == Some(aid)).collect();
        tasks.len() == 6 && tasks.iter().all(|j| j.state == Some(JobStateWire::Completed))
    });
    assert_eq!(max_running, 2, "throttle %2 counts the split record");
    assert_eq!(second, vec![2, 4], "the split record takes a free slot before the array's task 3");
    let ids: Vec<(u32, u64)> = h.jobs().filter(|j| j.array_job_id == Some(aid)).filter_map(|j| Some((j.array_task_id?, j.job_id))).collect();
    assert!(ids.contains(&(4, sid)), "the split record keeps its id: {ids:?}");
}

/// The array's tasks that run, by task index.
fn running_tasks(h: &Harness, aid: u64) -> Vec<u32> {
    let mut r: Vec<u32> = h
        .jobs()
        .filter(|j| j.array_job_id == Some(aid) && j.state == Some(JobStateWire::Running))
        .filter_map(|j| j.array_task_id)
        .collect();
    r.sort_unstable();
    r
}

/// An array `0-{last}%{throttle}` of 1-GPU tasks that run `runtime_s` (`None`: until
/// cancelled).
fn throttled_array(h: &mut Harness, last: u32, throttle: u32, runtime_s: Option<i64>) -> u64 {
    let mut a = gpu_job(User::Alice, 1, runtime_s, 0);
    a.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: last, step: 1 }], max_running: Some(throttle) });
    h.submit(a)
}

fn task_ref(aid: u64, tasks: &[u32]) -> JobRef {
    JobRef { job_id: aid, tasks: Some(tasks.to_vec()) }
}

/// Slurm's `job_array_split`: a started task that leaves the array record with one pending
/// task makes the record that task's (`A_T`, the array's id, golden 0259's `64_2`), still
/// under the throttle (`JobArrayTaskLimit`) and, written while the throttle holds it out,
/// with no eligible time (`as_mysql_job_start`: INFINITE), so that sacct's time window
/// leaves it out (golden 0282) while `sacct -j` shows it. A cancel that leaves one task keeps
/// the array record (`job_str_signal` only shrinks it: `A_[T%N]`).
#[test]
fn array_record_left_with_one_task_is_that_tasks_record() {
    let mut h = Harness::two_nodes("ctl_array_last_task");
    let aid = throttled_array(&mut h, 3, 2, None);
    h.turn_until(5, 1, |h| running_tasks(h, aid) == vec![0, 1]);
    assert_eq!(h.job(aid).array_task_str.as_deref(), Some("2-3%2"));
    // Task 0 ends: task 2 starts, and the array record is left with task 3.
    let t0 = h.jobs().find(|j| j.array_job_id == Some(aid) && j.array_task_id == Some(0)).map(|j| j.job_id).expect("task 0");
    h.rpc(User::Alice, cancel(&[t0]));
    h.turn_until(40, 2, |h| running_tasks(h, aid) == vec![1, 2]);
    h.turn();
    let rec = h.job(aid);
    assert_eq!((rec.array_task_id, rec.array_task_str.as_deref()), (Some(3), None), "the array record is task 3's: {rec:?}");
    assert_eq!((rec.state, rec.reason.as_str()), (Some(JobStateWire::Pending), "JobArrayTaskLimit"));
    assert_eq!(h.jobs().filter(|j| j.array_job_id == Some(aid) && j.array_task_id == Some(3)).count(), 1);
    // Cancelled while the throttle holds it out: no row in a time window, one with -j.
    h.rpc(User::Root, cancel(&[aid]));
    h.turn_until(40, 2, |h| h.jobs().filter(|j| j.array_job_id == Some(aid)).all(|j| j.state != Some(JobStateWire::Running)));
    let windowed = AcctQuery { start: Some(T0 - 3600), end: Some(h.at() + T0 + 10), now: h.at() + T0, ..AcctQuery::default() };
    let Response::Acct(rows) = h.call(User::Root, Request::QueryAcct(windowed)) else { panic!("accounting query failed") };
    let tasks: Vec<Option<u32>> = rows.iter().filter(|r| r.array_job_id == Some(aid)).map(|r| r.array_task_id).collect();
    assert_eq!(tasks, vec![Some(0), Some(1), Some(2)], "no row for the task the throttle held out");
    let by_id = AcctQuery { jobs: vec![AcctJobRef { job_id: aid, task: Some(3), step: None }], ..AcctQuery::default() };
    let Response::Acct(rows) = h.call(User::Root, Request::QueryAcct(by_id)) else { panic!("accounting query failed") };
    let row = rows.iter().find(|r| r.job_id == aid).expect("sacct -j shows it");
    assert_eq!((row.array_task_id, row.state.as_str(), row.eligible_time), (Some(3), "CANCELLED", None));

    // A cancel that leaves one pending task keeps the array record.
    let bid = throttled_array(&mut h, 3, 2, None);
    h.turn_until(5, 1, |h| running_tasks(h, bid) == vec![0, 1]);
    h.rpc(User::Alice, Request::CancelJob(CancelJob { jobs: vec![task_ref(bid, &[3])], ..CancelJob::default() }));
    h.turn();
    let rec = h.job(bid);
    assert_eq!((rec.array_task_id, rec.array_task_str.as_deref()), (None, Some("2%2")), "{rec:?}");
}

/// `scontrol hold A_T` of some of an array's pending tasks splits them off (Slurm's
/// `scontrol_hold` is an update, `update_job_str` -> `job_array_split`): only the named task is
/// held; the array record, left with one task, is that task's. A held task takes no throttle
/// slot and runs once released.
#[test]
fn hold_of_a_pending_array_task_splits_it_off() {
    let mut h = Harness::two_nodes("ctl_array_task_hold");
    let aid = throttled_array(&mut h, 3, 2, Some(30));
    h.turn_until(5, 1, |h| running_tasks(h, aid) == vec![0, 1]);
    h.rpc(User::Alice, Request::HoldRelease(HoldRelease { jobs: vec![task_ref(aid, &[3])], op: HoldOp::Hold }));
    h.turn();
    let held: Vec<&JobInfo> = h.jobs().filter(|j| j.array_job_id == Some(aid) && j.array_task_id == Some(3)).collect();
    assert_eq!(held.len(), 1, "task 3 has a record of its own");
    let sid = held[0].job_id;
    assert_ne!(sid, aid);
    assert_eq!(held[0].reason, "JobHeldUser");
    let rec = h.job(aid);
    assert_eq!((rec.array_task_id, rec.reason.as_str()), (Some(2), "JobArrayTaskLimit"), "task 2 is not held: {rec:?}");
    // Tasks 0 and 1 end: task 2 runs; held task 3 does not, though a slot is free.
    h.turn_until(40, 5, |h| state(h, aid) == JobStateWire::Completed);
    assert_eq!(state(&h, sid), JobStateWire::Pending);
    h.rpc(User::Alice, Request::HoldRelease(HoldRelease { jobs: vec![task_ref(aid, &[3])], op: HoldOp::Release }));
    h.turn_until(40, 5, |h| state(h, sid) == JobStateWire::Completed);
}

/// `scontrol requeue A_T` of a pending task: Slurm's `job_requeue2` finds the task in its
/// array record and `_job_requeue_op` refuses that as pending; the answer names the record
/// and all its pending tasks (`A_1-2: Job is pending execution`) and nothing is split.
#[test]
fn requeue_of_a_pending_array_task_is_refused_unsplit() {
    let mut h = Harness::two_nodes("ctl_array_requeue_pending");
    let aid = throttled_array(&mut h, 2, 1, None);
    h.turn_until(5, 1, |h| running_tasks(h, aid) == vec![0]);
    for hold in [false, true] {
        let r = h.call(User::Alice, Request::Requeue(RequeueJob { jobs: vec![task_ref(aid, &[1])], hold }));
        let Response::JobResults(rs) = r else { panic!("{r:?}") };
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0].job, task_ref(aid, &[1, 2]), "the answer names the array record's pending tasks");
        assert_eq!(rs[0].error.as_ref().map(|e| e.code), Some(ESLURM_JOB_PENDING));
    }
    h.turn();
    assert_eq!(h.job(aid).array_task_str.as_deref(), Some("1-2%1"), "nothing split");
    assert_eq!(h.jobs().filter(|j| j.array_job_id == Some(aid)).count(), 2);
}

/// The answers of a requeue, as (job reference, error code).
fn requeue_answers(h: &mut Harness, jobs: Vec<JobRef>, hold: bool) -> Vec<(JobRef, Option<i32>)> {
    let r = h.call(User::Alice, Request::Requeue(RequeueJob { jobs, hold }));
    let Response::JobResults(rs) = r else { panic!("{r:?}") };
    rs.into_iter().map(|r| (r.job, r.error.map(|e| e.code))).collect()
}

/// `scontrol requeue` naming an array (its id or its tasks) is answered per task in Slurm's
/// array-errors form (`job_requeue2`, `_resp_array_add`, `_resp_array_xlate`; goldens-extra
/// 0623-0627): one answer per outcome naming the tasks that had it, ordered by their first
/// task, a success included when there are others; the pending array record answers for all
/// its pending tasks, a task no record holds is an invalid job id; a `--no-requeue` task is
/// refused (`_job_requeue_op`: `ESLURM_DISABLED`) and keeps running. A task named by its own
/// job id is a plain job's answer.
#[test]
fn requeue_of_an_array_answers_per_task() {
    let mut h = Harness::two_nodes("ctl_array_requeue_answers");
    // Tasks that ignore SIGTERM: a requeued task stays stopping (KillWait) while the clock
    // does not move; its slot is free at the requeue (`_job_array_comp`), so task 1 starts.
    let mut a = on_term(gpu_job(User::Alice, 1, None, 0), OnTerm::Ignore);
    a.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 2, step: 1 }], max_running: Some(1) });
    let aid = h.submit(a);
    h.turn_until(5, 1, |h| running_tasks(h, aid) == vec![0]);
    let t0 = h.jobs().find(|j| j.array_job_id == Some(aid) && j.array_task_id == Some(0)).map(|j| j.job_id).expect("task 0");
    assert_ne!(t0, aid);
    assert_eq!(
        requeue_answers(&mut h, vec![JobRef::id(aid)], false),
        vec![(task_ref(aid, &[0]), None), (task_ref(aid, &[1, 2]), Some(ESLURM_JOB_PENDING))]
    );
    h.turn_until(5, 1, |h| running_tasks(h, aid) == vec![1]);
    assert_eq!(
        requeue_answers(&mut h, vec![task_ref(aid, &[2, 7])], false),
        vec![(task_ref(aid, &[2]), Some(ESLURM_JOB_PENDING)), (task_ref(aid, &[7]), Some(ESLURM_INVALID_JOB_ID))]
    );
    assert_eq!(requeue_answers(&mut h, vec![task_ref(aid, &[7])], false), vec![(task_ref(aid, &[7]), Some(ESLURM_INVALID_JOB_ID))]);
    // Task 0 by its own id: a plain answer (it is being requeued already: pending in Slurm,
    // `Job is pending execution`, goldens-extra 0633).
    assert_eq!(requeue_answers(&mut h, vec![JobRef::id(t0)], false), vec![(JobRef::id(t0), Some(ESLURM_JOB_PENDING))]);

    let mut n = gpu_job(User::Alice, 1, None, 0);
    n.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 1, step: 1 }], max_running: None });
    n.requeue = Some(false);
    let nid = h.submit(n);
    h.turn_until(5, 1, |h| running_tasks(h, nid) == vec![0, 1]);
    assert_eq!(requeue_answers(&mut h, vec![task_ref(nid, &[0])], false), vec![(task_ref(nid, &[0]), Some(ESLURM_DISABLED))]);
    assert_eq!(requeue_answers(&mut h, vec![JobRef::id(nid)], true), vec![(task_ref(nid, &[0, 1]), Some(ESLURM_DISABLED))]);
    h.turn();
    assert_eq!(running_tasks(&h, nid), vec![0, 1], "still running");
}

/// A requeued task's record waits for the array's throttle (Slurm's `job_array_start_test`
/// tests every record with a task id): with `%1`, task 1 takes the slot while task 0 is held
/// back after its requeue, and task 0 runs again only once task 1 has ended.
#[test]
fn requeued_array_task_waits_for_the_throttle() {
    let mut h = Harness::two_nodes("ctl_array_requeue_throttle");
    let aid = throttled_array(&mut h, 2, 1, Some(200));
    h.turn_until(5, 1, |h| running_tasks(h, aid) == vec![0]);
    let t0 = h.jobs().find(|j| j.array_job_id == Some(aid) && j.array_task_id == Some(0)).map(|j| j.job_id).expect("task 0");
    h.rpc(User::Alice, requeue(t0, false));
    let mut most = 0;
    let mut order = Vec::new();
    h.turn_until(200, 5, |h| {
        let r = running_tasks(h, aid);
        most = most.max(r.len());
        if let Some(&t) = r.first() {
            if order.last() != Some(&t) {
                order.push(t);
            }
        }
        h.jobs().filter(|j| j.array_job_id == Some(aid)).all(|j| j.state == Some(JobStateWire::Completed))
    });
    assert_eq!(most, 1, "never more than %1 running");
    assert_eq!(order, vec![0, 1, 0, 2], "task 1 runs in task 0's hold-off, task 0 takes the next slot before task 2");
}

/// An array `0-1%1` of 1-GPU tasks that ignore SIGTERM, with task 0 running: returns the
/// array's id and task 0's job id.
fn array_of_two_under_one_slot(h: &mut Harness) -> (u64, u64) {
    let mut a = on_term(gpu_job(User::Alice, 1, None, 0), OnTerm::Ignore);
    a.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 1, step: 1 }], max_running: Some(1) });
    let aid = h.submit(a);
    h.turn_until(5, 1, |h| running_tasks(h, aid) == vec![0]);
    let t0 = h.jobs().find(|j| j.array_job_id == Some(aid) && j.array_task_id == Some(0)).map(|j| j.job_id).expect("task 0");
    (aid, t0)
}

/// A cancelled array task gives its `%N` slot back at the cancel, not when its node is done
/// (Slurm's `_job_signal` -> `job_completion_logger` -> `_job_array_comp` decrements
/// `tot_run_tasks`): with `%1`, task 1 starts while task 0 still ends on its node
/// (`COMPLETING`, it ignores SIGTERM). A second `scancel` of the ending task, by root, leaves
/// its canceller alice (`_job_signal` answers `ESLURM_ALREADY_DONE` to it).
#[test]
fn cancelled_array_task_frees_its_throttle_slot_at_the_cancel() {
    let mut h = Harness::two_nodes("ctl_array_cancel_throttle");
    let (aid, t0) = array_of_two_under_one_slot(&mut h);
    h.call(User::Alice, cancel(&[t0]));
    assert_eq!(state(&h, t0), JobStateWire::Completing);
    h.turn_until(5, 1, |h| running_tasks(h, aid) == vec![1]);
    assert_eq!(state(&h, t0), JobStateWire::Completing, "task 0 still ends on its node");
    h.call(User::Root, cancel(&[t0]));
    h.turn_until(60, 1, |h| state(h, t0) == JobStateWire::Cancelled);
    assert_eq!(acct_row(&mut h, t0).cancelled_by, Some(2001), "the first canceller stays once the node is done");
}

/// A requeued array task gives its `%N` slot back at the requeue as a cancelled one does
/// (`_job_requeue_op` -> `job_completion_logger(job, true)` -> `_job_array_comp`): with `%1`,
/// task 1 starts while task 0 still ends on its node.
#[test]
fn requeued_array_task_frees_its_throttle_slot_at_the_requeue() {
    let mut h = Harness::two_nodes("ctl_array_requeue_frees_slot");
    let (aid, t0) = array_of_two_under_one_slot(&mut h);
    h.call(User::Alice, requeue(t0, false));
    assert_eq!(state(&h, t0), JobStateWire::Completing);
    h.turn_until(5, 1, |h| running_tasks(h, aid) == vec![1]);
    assert_eq!(state(&h, t0), JobStateWire::Completing, "task 0 still ends on its node");
}

/// A dependency chain: `afterok` waits (`Dependency`) and runs after its job completes;
/// `afterok` on a job that fails is never satisfied (`DependencyNeverSatisfied`, pending for
/// ever, as Slurm without `kill_invalid_depend`); `afternotok` on it runs.
#[test]
fn dependency_chain() {
    let mut h = Harness::two_nodes("ctl_dependency_chain");
    let a = h.submit(gpu_job(User::Alice, 1, Some(10), 0));
    let mut b = gpu_job(User::Alice, 1, Some(10), 0);
    b.dependency = Some(format!("afterok:{a}"));
    let b = h.submit(b);
    let mut c = gpu_job(User::Alice, 1, Some(10), 0);
    c.dependency = Some(format!("afterok:{b}"));
    let c = h.submit(c);
    let f = h.submit(gpu_job(User::Alice, 1, Some(5), 1));
    let mut never = gpu_job(User::Alice, 1, Some(5), 0);
    never.dependency = Some(format!("afterok:{f}"));
    let never = h.submit(never);
    let mut notok = gpu_job(User::Alice, 1, Some(5), 0);
    notok.dependency = Some(format!("afternotok:{f}"));
    let notok = h.submit(notok);
    assert_eq!((h.job(b).reason.as_str(), h.job(c).reason.as_str()), ("Dependency", "Dependency"));
    h.turn_until(10, 5, |h| state(h, c) == JobStateWire::Completed);
    let (ea, sb, eb, sc) = (h.job(a).end_time, h.job(b).start_time, h.job(b).end_time, h.job(c).start_time);
    assert!(sb >= ea && sc >= eb, "b after a, c after b");
    assert_eq!((state(&h, notok), h.job(notok).exit_code), (JobStateWire::Completed, 0));
    assert_eq!((state(&h, never), h.job(never).reason.as_str()), (JobStateWire::Pending, "DependencyNeverSatisfied"));
    h.check();
}

/// `DependencyParameters=kill_invalid_depend` (Slurm 22.05 `job_mgr.c` `init_depend_policy`,
/// `handle_invalid_dependency`, `_kill_dependent`): a job whose dependency can never be met is
/// cancelled and keeps `DependencyNeverSatisfied`; one submitted `--kill-on-invalid-dep=no`
/// stays pending; without the parameter `--kill-on-invalid-dep=yes` cancels (goldens-extra
/// 0515, [`dependency_chain`] for neither).
#[test]
fn invalid_dependencies_cancel_as_asked() {
    use flotilla_proto::job_flags::{KILL_INV_DEP, NO_KILL_INV_DEP};
    let conf = format!("{TWO_NODES}DependencyParameters=kill_invalid_depend\n");
    // The reference (22.05) ignores the option in `SchedulerParameters`: a job that did not
    // ask stays pending.
    let ignored = format!("{TWO_NODES}SchedulerParameters=kill_invalid_depend\n");
    for (name, conf, flags) in [
        ("ctl_kill_invalid_depend", conf.as_str(), [0, NO_KILL_INV_DEP]),
        ("ctl_kill_on_invalid_dep", TWO_NODES, [KILL_INV_DEP, 0]),
        ("ctl_kill_invalid_depend_not_scheduler", ignored.as_str(), [KILL_INV_DEP, 0]),
    ] {
        let mut h = Harness::new(name, conf, CtlOptions::default());
        h.register("gpu01");
        h.register("gpu02");
        h.turn();
        let f = h.submit(gpu_job(User::Alice, 1, Some(5), 1));
        let [killed, kept] = flags.map(|bits| {
            let mut j = gpu_job(User::Alice, 1, Some(5), 0);
            j.dependency = Some(format!("afterok:{f}"));
            j.job_flags = bits;
            h.submit(j)
        });
        h.turn_until(10, 5, |h| state(h, killed) == JobStateWire::Cancelled);
        assert_eq!(h.job(killed).reason.as_str(), "DependencyNeverSatisfied", "{name}");
        assert_eq!((state(&h, kept), h.job(kept).reason.as_str()), (JobStateWire::Pending, "DependencyNeverSatisfied"), "{name}");
        h.check();
    }
}

/// A job submitted held is not tested against the nodes (Slurm's `select_nodes` returns
/// before `_build_node_list` for priority 0; goldens-extra 0159); released, one that can never
/// run in its partition gets what Slurm's next pass gives it: `BadConstraints`, priority 0,
/// still pending and never started, again after a second release. A hold then shows the hold.
#[test]
fn held_job_that_never_fits_is_bad_constraints_once_released() {
    let mut h = Harness::two_nodes("ctl_held_never_fits");
    let mut j = gpu_job(User::Alice, 1, Some(5), 0);
    j.hold = true;
    j.node_shape.min_cpus = 65;
    let never = h.submit(j);
    let mut j = gpu_job(User::Alice, 1, Some(5), 0);
    j.hold = true;
    let fits = h.submit(j);
    h.turn();
    assert_eq!((h.job(never).reason.as_str(), h.job(never).priority), ("JobHeldUser", 0));
    h.rpc(User::Alice, hold(HoldOp::Release, fits));
    h.call(User::Alice, hold(HoldOp::Release, never));
    h.turn_until(5, 1, |h| state(h, fits) == JobStateWire::Running);
    for _ in 0..2 {
        let j = h.job(never);
        assert_eq!((state(&h, never), j.reason.as_str(), j.priority), (JobStateWire::Pending, "BadConstraints", 0));
        h.call(User::Alice, hold(HoldOp::Release, never));
        h.turn();
    }
    h.call(User::Alice, hold(HoldOp::Hold, never));
    assert_eq!(h.job(never).reason.as_str(), "JobHeldUser");
    h.check();
}

/// A job cancelled while running has ended for its dependents at once, as Slurm's
/// `_job_signal` makes it `CANCELLED` before its nodes are done: a job waiting `afterok` on
/// it is `DependencyNeverSatisfied` while it is still being stopped (golden 0309: 67 after
/// `scancel -u bob` cancelled 56), and a job waiting `afterany` on it may run.
#[test]
fn cancelled_running_job_ends_for_its_dependents_at_once() {
    let mut h = Harness::two_nodes("ctl_cancel_ends_for_dependents");
    let a = h.submit(on_term(gpu_job(User::Alice, 1, None, 0), OnTerm::Ignore));
    let mut ok = gpu_job(User::Alice, 1, Some(5), 0);
    ok.dependency = Some(format!("afterok:{a}"));
    let ok = h.submit(ok);
    let mut any = gpu_job(User::Alice, 1, Some(5), 0);
    any.dependency = Some(format!("afterany:{a}"));
    let any = h.submit(any);
    h.turn_until(5, 1, |h| state(h, a) == JobStateWire::Running);
    assert_eq!((h.job(ok).reason.as_str(), h.job(any).reason.as_str()), ("Dependency", "Dependency"));
    h.rpc(User::Alice, cancel(&[a]));
    h.turn();
    h.turn();
    assert_eq!(state(&h, a), JobStateWire::Completing, "still being stopped (it ignores SIGTERM)");
    assert_eq!(h.job(ok).reason.as_str(), "DependencyNeverSatisfied");
    assert_ne!(h.job(any).reason.as_str(), "Dependency");
}

/// The setting of both preemption scenarios: a preemptible training job that checkpoints 4 TB
/// (a 60 s deadline at the core's assumed bandwidth) on each node's 8 GPUs, and a 4-GPU
/// service scaled to one replica. The budget's paging limit is 100 % (`--preempt-budget-pct`),
/// so that preempting one of two training jobs is not paged instead.
fn preemption_setup(name: &str, term: OnTerm) -> (Harness, u64, u32) {
    preemption_setup_from(name, term, 1)
}

/// [`preemption_setup`] with job ids from `first_job_id` (`FirstJobId`).
fn preemption_setup_from(name: &str, term: OnTerm, first_job_id: u64) -> (Harness, u64, u32) {
    let opts = CtlOptions { preempt_budget_pct: Some(100), first_job_id, ..CtlOptions::default() };
    let mut h = Harness::new(name, TWO_NODES, opts);
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut t = on_term(gpu_job(User::Alice, 8, None, 0), term);
        t.name = Some("train".into());
        t.preemptible = true;
        t.checkpoint_bytes = Some(4_000_000_000_000);
        ids.push(h.submit(t));
    }
    let create = ServiceCreate {
        name: "llm".into(),
        command: "serve".into(),
        gpus_per_replica: 4,
        topology: Some("node".into()),
        min_replicas: 0,
        max_replicas: 2,
        desired_replicas: 0,
        priority: 10,
        work_dir: "/tmp".into(),
        uid: 2001,
        gid: 2001,
        user: "alice".into(),
        ..ServiceCreate::default()
    };
    // An admin creates the service for alice (services need an admin or `ServiceAccounts`).
    let Response::ServiceCreated { id } = h.call(User::Root, Request::ServiceCreate(Box::new(create))) else { panic!() };
    h.advance(600);
    h.call(User::Alice, Request::ServiceScale { id, replicas: 1 });
    (h, ids[1], id)
}

/// Preemption with the checkpoint acknowledgement: SIGTERM to the batch step, the job saves
/// its checkpoint and acknowledges it, and is killed at once instead of at the deadline; its
/// run is `PREEMPTED`, it is requeued (`PreemptCount=1`) and the replica starts on its GPUs.
#[test]
fn preemption_with_checkpoint_ack() {
    let (mut h, victim, _) = preemption_setup("ctl_preemption_with_checkpoint_ack", OnTerm::AckCheckpoint);
    let node = h.job(victim).nodes.clone();
    let preempting: Vec<String> = sent_to(&h, &node);
    assert_eq!(preempting, vec![format!("signal job {victim} SIGTERM (batch step)")], "only SIGTERM to the batch step");
    h.turn();
    assert_eq!(sent_to(&h, &node), vec![format!("kill job {victim} (SIGKILL)")], "killed at the acknowledgement");
    h.turn();
    let j = h.job(victim);
    assert_eq!((j.state, j.preempt_count, j.restarts), (Some(JobStateWire::Pending), 1, 1));
    assert_eq!(j.last_checkpoint_ack, Some(T0 + 600));
    let replica = h.jobs().find(|j| j.service_id.is_some()).expect("a replica");
    assert_eq!((replica.state, replica.nodes.as_str(), replica.gpus), (Some(JobStateWire::Running), node.as_str(), 4));
    h.check();
}

/// Preemption without the acknowledgement: the job ignores SIGTERM and is killed at the
/// core's deadline (60 s), not at `KillWait` (30 s); then requeued like the other. Scaling
/// the service down again lets it run again (run 1).
#[test]
fn preemption_without_ack_is_killed_at_the_deadline() {
    let (mut h, victim, sid) = preemption_setup("ctl_preemption_without_ack", OnTerm::Ignore);
    let node = h.job(victim).nodes.clone();
    h.advance(30);
    h.turn();
    assert!(sent_to(&h, &node).is_empty(), "KillWait does not apply to a preemption");
    h.advance(29);
    h.turn();
    assert!(sent_to(&h, &node).is_empty(), "the deadline is 60 s after the SIGTERM");
    h.advance(1);
    h.turn();
    assert_eq!(sent_to(&h, &node), vec![format!("kill job {victim} (SIGKILL)")]);
    h.turn();
    let j = h.job(victim);
    assert_eq!((j.state, j.preempt_count, j.restarts, j.last_checkpoint_ack), (Some(JobStateWire::Pending), 1, 1, None));
    h.advance(10);
    h.call(User::Alice, Request::ServiceScale { id: sid, replicas: 0 });
    h.turn_until(5, 1, |h| state(h, victim) == JobStateWire::Running);
    assert_eq!(h.runs_on(&node), vec![(victim, 1)]);
    h.check();
}

/// Slurm's `_load_job_state`: every job keeps its priority across a controller restart (the
/// state file holds `job_ptr->priority`), running and pending, and numbering goes on below the
/// lowest number kept. Job `a` is released after `b` and `c` were numbered, so it ranks below
/// them; numbered again in job id order it would rank above.
#[test]
fn priorities_are_kept_across_a_restart() {
    let mut h = Harness::two_nodes("ctl_priority_restart");
    let mut j = gpu_job(User::Alice, 8, None, 0);
    j.hold = true;
    let a = h.submit(j);
    let b = h.submit(gpu_job(User::Alice, 8, None, 0));
    let c = h.submit(gpu_job(User::Alice, 8, None, 0));
    h.call(User::Alice, hold(HoldOp::Release, a));
    let d = h.submit(gpu_job(User::Alice, 8, None, 0));
    let top: u64 = 0xffff_0000 - 1;
    let prio = |h: &Harness| [a, b, c, d].map(|id| (state(h, id), h.job(id).priority));
    let before = [
        (JobStateWire::Pending, top - 2),
        (JobStateWire::Running, top),
        (JobStateWire::Running, top - 1),
        (JobStateWire::Pending, top - 3),
    ];
    assert_eq!(prio(&h), before);
    h.restart();
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    assert_eq!(prio(&h), before, "kept across the restart");
    let e = h.submit(gpu_job(User::Alice, 8, None, 0));
    assert_eq!(h.job(e).priority, top - 4, "numbered on below the lowest kept");
}

/// A replica's id is a job id of the controller's one sequence (Slurm's `get_next_job_id`:
/// a uint32 from `FirstJobId` up, which tools that parse job ids as 32-bit read), not one of
/// a private range above 2^48: the next id after the training jobs, named so in the budget
/// alert. The state store keeps it across a restart (the replica runs on under the same id
/// and is its service's), and the sequence goes on past it, for jobs and for the next
/// replica alike.
#[test]
fn replica_ids_are_job_ids_kept_across_a_restart() {
    let (mut h, victim, sid) = preemption_setup_from("ctl_replica_ids", OnTerm::AckCheckpoint, 5000);
    assert_eq!(victim, 5001);
    h.turn();
    h.turn();
    let replica = h.jobs().find(|j| j.service_id == Some(sid)).expect("a replica").job_id;
    assert_eq!(replica, 5002, "the next job id after the two training jobs");
    assert_eq!(state(&h, replica), JobStateWire::Running);
    let alerts = match h.call(User::Root, Request::QueryAlerts) {
        Response::Alerts(a) => a,
        other => panic!("{other:?}"),
    };
    assert!(alerts.iter().any(|a| a.kind == "PreemptionBudgetWarn" && a.job_id == Some(replica)), "{alerts:?}");
    assert!(alerts.iter().all(|a| a.job_id.is_none_or(|j| (5000..0x03ff_0000).contains(&j))), "{alerts:?}");
    let services = |h: &mut Harness| match h.call(User::Root, Request::QueryServices { ids: vec![sid] }) {
        Response::Services(s) => s,
        other => panic!("{other:?}"),
    };
    assert_eq!(services(&mut h)[0].replica_ids, vec![replica]);

    h.restart();
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    assert_eq!((state(&h, replica), h.job(replica).service_id), (JobStateWire::Running, Some(sid)), "kept across the restart");
    assert_eq!(services(&mut h)[0].replica_ids, vec![replica]);
    assert_eq!(h.submit(gpu_job(User::Alice, 0, Some(100), 0)), replica + 1, "job ids go on past the replica's");
    h.call(User::Alice, Request::ServiceScale { id: sid, replicas: 2 });
    h.turn_until(5, 1, |h| h.jobs().filter(|j| j.service_id == Some(sid)).count() == 2);
    let mut ids: Vec<u64> = h.jobs().filter(|j| j.service_id == Some(sid)).map(|j| j.job_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![replica, replica + 2], "a new replica takes the next job id");
    assert_eq!(h.submit(gpu_job(User::Alice, 0, Some(100), 0)), replica + 3);
}

/// A node reports a new boot epoch (it rebooted under its jobs): the core takes their
/// allocations back; a job that may be requeued is PENDING again as run 1 and, as the
/// controller does today, may start again at once (no hold-off after a node loss, unlike
/// `scontrol requeue`), while one submitted with `--no-requeue` ends `NODE_FAIL`.
#[test]
fn node_boot_epoch_change() {
    let mut h = Harness::two_nodes("ctl_node_boot_epoch_change");
    let again = h.submit(gpu_job(User::Alice, 4, None, 0));
    let mut nr = gpu_job(User::Alice, 4, None, 0);
    nr.requeue = Some(false);
    let lost = h.submit(nr);
    h.submit(gpu_job(User::Bob, 4, Some(60), 0));
    assert_eq!((h.job(again).nodes.as_str(), h.job(lost).nodes.as_str()), ("gpu01", "gpu01"));
    h.advance(30);
    h.reboot("gpu01");
    h.turn();
    assert_eq!(state(&h, again), JobStateWire::Running, "a lost session alone changes nothing");
    h.advance(30);
    h.register("gpu01");
    h.turn();
    let j = h.job(again);
    assert_eq!((j.state, j.restarts), (Some(JobStateWire::Running), 1));
    let node = j.nodes.clone();
    assert!(h.runs_on(&node).contains(&(again, 1)), "run 1 launched on {node}");
    assert_eq!((state(&h, lost), h.job(lost).nodes.as_str()), (JobStateWire::NodeFail, "gpu01"));
    h.check();
}

fn update_node(name: &str, state: &str, reason: &str) -> Request {
    Request::UpdateNode(UpdateNode { names: vec![name.into()], state: Some(state.into()), reason: Some(reason.into()), ..Default::default() })
}

/// A node's state and reason as `scontrol show node` / `sinfo` get them.
fn node_state(h: &mut Harness, name: &str) -> (String, Option<String>) {
    match h.call(User::Root, Request::QueryNodes(NodeQuery { names: vec![name.into()] })) {
        Response::Nodes(v) => (v[0].state.clone(), v[0].reason.clone()),
        r => panic!("{r:?}"),
    }
}

/// `scontrol update state=FAIL` (Slurm 22.05 `node_mgr.c` `update_node`,
/// `node_state_string`): the failed node keeps its running job and takes no new one; it
/// shows FAIL with the reason (FAILING only with every CPU allocated) until resumed; DRAIN and
/// FAIL replace each other (goldens-extra 0703, 0713-0722).
#[test]
fn failed_node_keeps_its_jobs_and_takes_no_new_ones() {
    use JobStateWire::*;
    let mut h = Harness::two_nodes("ctl_failed_node");
    let a = h.submit(gpu_job(User::Alice, 4, Some(100), 0));
    assert_eq!(h.job(a).nodes, "gpu01");
    let r = h.call(User::Root, update_node("gpu01", "fail", "bad"));
    assert!(matches!(&r, Response::JobResults(v) if v.is_empty()), "{r:?}");
    assert_eq!(node_state(&mut h, "gpu01"), ("FAIL".into(), Some("bad".into())), "MIXED+FAIL shows FAIL");
    assert_eq!(state(&h, a), Running, "a failed node's job runs on");
    let b = h.submit(gpu_job(User::Alice, 4, None, 0));
    assert_eq!(h.job(b).nodes, "gpu02", "nothing new on the failed node");
    let c = h.submit(gpu_job(User::Alice, 8, None, 0));
    h.advance(100);
    h.turn_until(5, 1, |h| state(h, a) == Completed);
    h.turn();
    assert_eq!(state(&h, c), Pending, "the idle failed node takes no new job");
    assert_eq!(node_state(&mut h, "gpu01"), ("FAIL".into(), Some("bad".into())));
    h.call(User::Root, update_node("gpu01", "resume", ""));
    h.turn();
    assert_eq!((state(&h, c), h.job(c).nodes.as_str()), (Running, "gpu01"), "resumed: takes work");
    assert_eq!(node_state(&mut h, "gpu01").1, None, "resume clears the reason");
    // Every CPU allocated: FAILING; a DRAIN replaces the FAIL and a FAIL the DRAIN.
    h.call(User::Alice, cancel(&[b]));
    h.turn_until(5, 1, |h| state(h, b) == Cancelled);
    let mut x = job(User::Alice, None, 0);
    x.exclusive = true;
    let x = h.submit(x);
    assert_eq!(h.job(x).nodes, "gpu02");
    h.call(User::Root, update_node("gpu02", "fail", "bad"));
    assert_eq!(node_state(&mut h, "gpu02"), ("FAILING".into(), Some("bad".into())));
    h.call(User::Root, update_node("gpu02", "drain", "maint"));
    assert_eq!(node_state(&mut h, "gpu02"), ("DRAINING".into(), Some("maint".into())));
    h.call(User::Root, update_node("gpu02", "fail", "bad2"));
    assert_eq!(node_state(&mut h, "gpu02"), ("FAILING".into(), Some("bad2".into())));
    assert_eq!(state(&h, x), Running);
    h.check();
}

/// A node whose daemon stays away for `SlurmdTimeout` (300 s) is marked down; its jobs are
/// requeued as after a reboot (and, as there, may start again at once elsewhere).
#[test]
fn silent_node_is_marked_down() {
    let mut h = Harness::two_nodes("ctl_silent_node_is_marked_down");
    let j = h.submit(gpu_job(User::Alice, 8, None, 0));
    assert_eq!(h.job(j).nodes, "gpu01");
    h.reboot("gpu01");
    h.turn();
    h.advance(299);
    h.turn();
    assert_eq!(state(&h, j), JobStateWire::Running);
    h.advance(1);
    h.turn();
    let info = h.job(j);
    assert_eq!((info.state, info.restarts, info.nodes.as_str()), (Some(JobStateWire::Running), 1, "gpu02"));
    // The daemon comes back: the node takes work again once it registers.
    h.register("gpu01");
    h.turn();
    let k = h.submit(gpu_job(User::Alice, 8, None, 0));
    assert_eq!(h.job(k).nodes, "gpu01");
    h.check();
}

/// `sbatch --test-only` on a full cluster: the job would start when the first running job
/// reaches its time limit, on that job's node (Slurm's will-run; golden 0168).
#[test]
fn test_only_on_a_busy_cluster_names_the_node_that_frees_first() {
    let mut h = Harness::two_nodes("ctl_test_only_busy_cluster");
    let mut ids = Vec::new();
    for limit in [30, 10] {
        let mut j = gpu_job(User::Alice, 8, None, 0);
        j.time_limit = Some(TimeLimitWire::Minutes(limit));
        ids.push(h.submit(j));
        h.advance(5);
    }
    let mut t = gpu_job(User::Alice, 1, None, 0);
    t.test_only = true;
    let Response::TestOnly(r) = h.call(User::Alice, Request::SubmitJob(Box::new(t))) else { panic!("no test-only answer") };
    // The 10-minute job ends first (by its limit as planned: 600 s after its start at t=5).
    let short = h.job(ids[1]);
    assert_eq!(r.nodes, short.nodes);
    assert_eq!(r.start_time, short.start_time.unwrap() + 600);
    h.check();
}

/// `--test-only` of a request no node can hold still gets an answer, even when its CPUs
/// overflow a `u32` (found by the fuzz test: the count saturates, the RPC never panics), and
/// leaves no job record (Slurm purges a will-run job; goldens-extra 0164).
#[test]
fn test_only_of_an_impossible_request_answers_without_overflow() {
    let mut h = Harness::two_nodes("ctl_test_only_overflow");
    for (nodes, ntasks, cpt) in [(Some(9), None, Some(u32::MAX)), (Some(2), Some(u32::MAX), Some(u32::MAX)), (None, None, Some(1 << 31))] {
        let mut t = job(User::Alice, None, 0);
        (t.nodes_min, t.ntasks, t.cpus_per_task, t.test_only) = (nodes, ntasks, cpt, true);
        let r = h.call(User::Alice, Request::SubmitJob(Box::new(t)));
        assert!(matches!(r, Response::TestOnly(_) | Response::Error(_)), "{r:?}");
    }
    // More GPUs on a node than any node has: never (`admission::never_runs`, the rule that
    // ends such a submitted job BadConstraints).
    let mut t = job(User::Alice, None, 0);
    (t.gres, t.test_only) = (gres(9), true);
    let r = h.call(User::Alice, Request::SubmitJob(Box::new(t)));
    assert_eq!(r, Response::Error(SlurmError::new(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)));
    h.check();
}

/// A submission that changes nothing a cycle decides (a held job) triggers no
/// event-triggered cycle; one that does triggers one as soon as the debounce gap allows.
#[test]
fn held_submissions_trigger_no_cycle() {
    let mut h = Harness::two_nodes("ctl_held_submissions_trigger_no_cycle");
    let only_events = Due { debounced: true, ..Due::NONE };
    let mut j = job(User::Alice, None, 0);
    j.hold = true;
    h.rpc(User::Alice, Request::SubmitJob(Box::new(j)));
    assert!(!h.turn_with(only_events), "a held submission: no cycle");
    h.rpc(User::Alice, Request::SubmitJob(Box::new(job(User::Alice, None, 0))));
    assert!(!h.turn_with(Due::NONE), "not before the debounce gap");
    assert!(h.turn_with(only_events), "the change is still waiting for a cycle");
    assert_eq!(state(&h, 2), JobStateWire::Running);
    h.check();
}

/// The controller restarts from its store under running and pending jobs: nothing is lost,
/// the nodes re-register with what they run, and the pending array task goes on.
#[test]
fn restart_recovers_running_and_pending() {
    let mut h = Harness::two_nodes("ctl_restart_recovers");
    let run = h.submit(gpu_job(User::Alice, 8, Some(100), 0));
    let mut a = gpu_job(User::Alice, 8, Some(10), 0);
    a.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 2, step: 1 }], max_running: None });
    let aid = h.submit(a);
    h.advance(20);
    h.restart();
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    assert_eq!((state(&h, run), h.job(run).restarts), (JobStateWire::Running, 0));
    h.turn_until(10, 10, |h| state(h, aid) == JobStateWire::Completed);
    assert_eq!(h.jobs().filter(|j| j.array_job_id == Some(aid)).count(), 3);
    h.check();
}

/// Array jobs reach the core (the cycle finds them without scanning every job), also after
/// a restart: with no node registered the tasks stay pending with the core's reason, not the
/// `JobArrayTaskLimit` shown before a cycle has moved them into the core.
#[test]
fn array_jobs_reach_the_core_before_and_after_a_restart() {
    let mut h = Harness::new("ctl_array_reaches_the_core", TWO_NODES, CtlOptions::default());
    let mut plain = job(User::Alice, None, 0);
    plain.hold = true; // inert jobs beside the array
    for _ in 0..3 {
        h.submit(plain.clone());
    }
    let mut a = job(User::Alice, None, 0);
    a.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 3, step: 1 }], max_running: None });
    let aid = h.submit(a);
    let reason = h.job(aid).reason.clone();
    assert!(!["", "None", "JobArrayTaskLimit"].contains(&reason.as_str()), "array {aid} never reached the core: {reason}");
    h.restart();
    h.turn();
    assert_eq!(h.job(aid).reason, reason, "after a restart");
    h.check();
}

/// A two-node job whose second node confirms the kill more than `MinJobAge` after the batch
/// script ended (a slow node; routine when trace replay runs the controller's clock fast) is
/// accounted `COMPLETED` with its end: the turn that finalizes it does not purge it before its
/// accounting record is written (it did, leaving the record `RUNNING` with no end); it is
/// purged at the next tick.
#[test]
fn a_job_finalized_after_min_job_age_keeps_its_accounting() {
    let mut h = Harness::two_nodes("ctl_late_completion");
    let mut two = gpu_job(User::Alice, 8, Some(100), 0);
    two.nodes_min = Some(2);
    two.nodes_max = Some(2);
    let id = h.submit(two);
    h.advance(5);
    h.turn();
    assert_eq!(state(&h, id), JobStateWire::Running);
    assert_eq!(h.runs_on("gpu02").len(), 1);
    // The batch script ends; the controller kills the part on gpu02, which forgets it.
    h.advance(100);
    h.turn();
    let ended = h.at();
    assert_eq!(state(&h, id), JobStateWire::Completing);
    assert!(h.runs_on("gpu02").is_empty());
    // gpu02 says so only 400 s later (MinJobAge is 300 s).
    h.advance(400);
    h.heartbeat("gpu02");
    h.turn();
    let q = AcctQuery { jobs: vec![AcctJobRef { job_id: id, task: None, step: None }], ..AcctQuery::default() };
    let Response::Acct(rows) = h.call(User::Root, Request::QueryAcct(q.clone())) else { panic!("accounting query failed") };
    let row = rows.iter().find(|r| r.job_id == id).expect("accounted");
    assert_eq!((row.state.as_str(), row.end_time), ("COMPLETED", Some(T0 + ended)), "{row:?}");
    h.advance(1);
    h.turn();
    assert!(h.jobs().all(|j| j.job_id != id), "purged at the next tick");
    let Response::Acct(rows) = h.call(User::Root, Request::QueryAcct(q)) else { panic!("accounting query failed") };
    assert_eq!(rows.iter().find(|r| r.job_id == id).map(|r| r.state.as_str()), Some("COMPLETED"));
}

/// `squeue`'s query (`QueueQuery`: only the fields asked for) answers every field as the full
/// job query does, for jobs running, pending on resources, held, waiting on a dependency and
/// array remainders: the controller skips the work of the fields not asked for, never the
/// work of those asked for. Both queries are answered in one turn without a cycle, so they
/// see the same state.
#[test]
fn queue_query_answers_each_field_as_the_job_query() {
    let mut h = Harness::two_nodes("ctl_queue_query");
    let mut big = gpu_job(User::Alice, 8, None, 0);
    big.nodes_min = Some(2);
    big.nodes_max = Some(2);
    let running = h.submit(big.clone());
    let waiting = h.submit(big);
    let mut held = job(User::Bob, None, 0);
    held.hold = true;
    held.comment = Some("later".into());
    h.submit(held);
    let mut dep = job(User::Alice, None, 0);
    dep.dependency = Some(format!("afterok:{running}"));
    h.submit(dep);
    let mut a = job(User::Alice, None, 0);
    a.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 5, step: 1 }], max_running: Some(2) });
    h.submit(a);
    h.advance(5);
    h.turn();
    assert_eq!(state(&h, running), JobStateWire::Running);
    assert_ne!(h.job(waiting).reason, "None");
    let query = JobQuery { include_finished: true, ..JobQuery::default() };
    h.rpc(User::Root, Request::QueryJobs(query.clone()));
    for f in JobField::ALL {
        let fields = vec![JobField::JobId, *f];
        h.rpc(User::Root, Request::QueryQueue(QueueQuery { query: query.clone(), fields }));
    }
    h.turn_with(Due::NONE);
    let replies = h.replies();
    let Response::Jobs(full) = &replies[0] else { panic!("job query: {:?}", replies[0]) };
    for (f, r) in JobField::ALL.iter().zip(&replies[1..]) {
        let fields = vec![JobField::JobId, *f];
        let Response::Queue(rows) = r else { panic!("queue query: {r:?}") };
        let got: Vec<JobView<'_>> = rows.iter(&fields).collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), full.len(), "{f:?}");
        for (g, j) in got.iter().zip(full) {
            let want = f.encode(&JobView::from(j), Vec::new()).unwrap();
            assert_eq!(g.job_id, j.job_id);
            assert_eq!(f.encode(g, Vec::new()).unwrap(), want, "{f:?} of job {}: {g:?} vs {j:?}", j.job_id);
        }
    }
}

/// `squeue`'s answer in parts (`QueryQueueParts`) is the whole answer (`QueryQueue`) cut where
/// the rows pass the part's size: the parts' rows, in order, are the whole answer's bytes and
/// jobs, every part but the last is a `QueuePart` (none empty), and an answer this large
/// (300 jobs of 1000-byte comments, every field: about 320 KiB) comes in three or more.
#[test]
fn queue_answer_in_parts_is_the_whole_answer_cut() {
    let mut h = Harness::two_nodes("ctl_queue_parts");
    for i in 0..300u64 {
        let mut j = job(if i % 2 == 0 { User::Alice } else { User::Bob }, None, 0);
        j.hold = true;
        j.comment = Some(format!("{i:0>1000}"));
        h.submit(j);
    }
    let q = QueueQuery { query: JobQuery { include_finished: true, ..JobQuery::default() }, fields: JobField::ALL.to_vec() };
    let Reply::Msg(Response::Queue(whole)) = h.raw_reply(User::Root, Request::QueryQueue(q.clone())) else { panic!("whole answer") };
    assert_eq!(whole.count, 300);
    let Reply::Parts(mut parts) = h.raw_reply(User::Root, Request::QueryQueueParts(q)) else { panic!("not in parts") };
    let (mut cut, mut last) = (Vec::new(), None);
    while let Ok(r) = parts.try_recv() {
        assert!(last.is_none(), "nothing after the last part");
        match r {
            Response::QueuePart(rows) => cut.push(rows),
            Response::Queue(rows) => last = Some(rows),
            other => panic!("part: {other:?}"),
        }
    }
    assert!(cut.len() >= 2, "{} parts before the last", cut.len());
    assert!(cut.iter().all(|p| p.count > 0), "no empty part");
    cut.push(last.expect("the last part"));
    assert_eq!(cut.iter().map(|p| p.count).sum::<u64>(), whole.count);
    assert_eq!(cut.iter().flat_map(|p| p.bytes.iter().copied()).collect::<Vec<u8>>(), whole.bytes);
}

/// An answer over many jobs walks the pending jobs' states beside the job table instead of
/// looking each up (`ViewCtx::walk`): every job, pending on resources or held, an array
/// remainder or running, shows the same alone (`scontrol show job ID`: looked up) as in the
/// answer over all of them, and `squeue`'s answer with every field is the same again.
#[test]
fn answers_over_many_jobs_show_each_job_as_alone() {
    let mut h = Harness::two_nodes("ctl_walk_pending");
    let mut ids = Vec::new();
    for i in 0..90u64 {
        let mut j = gpu_job(if i % 2 == 0 { User::Alice } else { User::Bob }, 1 + i % 8, None, 0);
        j.hold = i % 7 == 3;
        if i % 11 == 5 {
            j.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 3, step: 1 }], max_running: Some(1) });
        }
        ids.push(h.submit(j));
    }
    h.advance(5);
    h.turn();
    assert!(ids.iter().any(|&id| state(&h, id) == JobStateWire::Running));
    assert!(ids.iter().any(|&id| state(&h, id) == JobStateWire::Pending && !matches!(h.job(id).reason.as_str(), "None" | "JobHeldUser")));
    let all = JobQuery { include_finished: true, ..JobQuery::default() };
    let Response::Jobs(listed) = h.call(User::Root, Request::QueryJobs(all.clone())) else { panic!("job query") };
    h.rpc(User::Root, Request::QueryJobs(all.clone()));
    h.rpc(User::Root, Request::QueryQueue(QueueQuery { query: all.clone(), fields: JobField::ALL.to_vec() }));
    let mut alone = Vec::new();
    for j in &listed {
        let one = JobQuery { jobs: vec![JobRef::id(j.array_job_id.unwrap_or(j.job_id))], include_finished: true, ..JobQuery::default() };
        h.rpc(User::Root, Request::QueryJobs(one));
    }
    h.turn_with(Due::NONE);
    let replies = h.replies();
    let Response::Jobs(full) = &replies[0] else { panic!("job query: {:?}", replies[0]) };
    assert!(full.len() > 64, "enough jobs to walk: {}", full.len());
    let Response::Queue(rows) = &replies[1] else { panic!("queue query: {:?}", replies[1]) };
    let queued: Vec<JobInfo> = rows.iter(JobField::ALL).map(|v| v.unwrap().into_owned()).collect();
    assert_eq!(&queued, full);
    for r in &replies[2..] {
        let Response::Jobs(some) = r else { panic!("job query: {r:?}") };
        alone.extend(some.iter().cloned());
    }
    for j in full {
        let same: Vec<&JobInfo> = alone.iter().filter(|a| a.job_id == j.job_id && a.array_task_id == j.array_task_id).collect();
        assert!(!same.is_empty(), "job {} alone", j.job_id);
        for a in same {
            assert_eq!(a, j, "job {} alone vs among all", j.job_id);
        }
    }
}

/// A query that arrives while a turn runs is answered between the turn's phases (before its
/// cycle), not after the turn's commit, and reads what the turn has handled so far: this
/// turn's submission (pending: the cycle has not run), but not a cancellation that arrived
/// before the query and is held for the next turn (no reply yet). Once that cancellation
/// is replied to, a query answered during a later turn shows it (read-your-writes: an answer
/// from a state older than a sent reply fails here).
#[test]
fn queries_answered_between_the_turns_phases() {
    let mut h = Harness::two_nodes("ctl_answers_between_phases");
    let k = h.submit(on_term(gpu_job(User::Alice, 8, None, 0), OnTerm::Ignore));
    assert_eq!(state(&h, k), JobStateWire::Running);
    h.rpc(User::Bob, Request::SubmitJob(Box::new(gpu_job(User::Bob, 8, None, 0))));
    let all = || Request::QueryJobs(JobQuery { include_finished: true, ..JobQuery::default() });
    let shown = |r: &Option<Response>| -> Vec<(u64, JobStateWire)> {
        match r {
            Some(Response::Jobs(v)) => v.iter().map(|j| (j.job_id, j.state.expect("a state"))).collect(),
            other => panic!("job query: {other:?}"),
        }
    };
    let during = h.turn_with_arrivals(vec![(User::Root, all()), (User::Alice, cancel(&[k])), (User::Root, all())]);
    let Response::Submitted(s) = &h.replies()[0] else { panic!("submission: {:?}", h.replies()) };
    let j = s.job_id;
    assert_eq!(state(&h, j), JobStateWire::Running, "the turn's cycle started the submission");
    let before_cycle = vec![(k, JobStateWire::Running), (j, JobStateWire::Pending)];
    assert_eq!(shown(&during[0]), before_cycle, "answered before the cycle, with this turn's submission");
    assert!(during[1].is_none(), "a change waits for the next turn: {:?}", during[1]);
    assert_eq!(shown(&during[2]), before_cycle, "answered ahead of the held cancellation");
    assert_eq!(state(&h, k), JobStateWire::Running);
    // The next turn handles the held cancellation first and replies after its commit.
    h.rpc(User::Root, all());
    h.turn();
    let replies = h.replies();
    assert!(matches!(&replies[0], Response::JobResults(v) if v.iter().all(|r| r.error.is_none())), "{replies:?}");
    assert_eq!(state(&h, k), JobStateWire::Completing, "ignores SIGTERM: being stopped, shown ending");
    let after = h.turn_with_arrivals(vec![(User::Alice, all())]);
    assert_eq!(shown(&after[0]), vec![(k, JobStateWire::Completing), (j, JobStateWire::Running)], "no answer older than a sent reply");
}

/// The cores a job's CPUs are (`CPU_IDs=`) as Slurm's select/cons_tres picks them on the
/// harness's 2 x 32-core nodes (`flotilla_core::cores`): one-CPU tasks round-robin over the
/// sockets, skipping the cores other jobs hold (goldens-extra 0413, 0429); several CPUs per
/// task packed on a socket (0426); kept across a restart; a finished job's cores free again.
#[test]
fn cores_are_picked_as_slurm_and_kept() {
    let mut h = Harness::two_nodes("ctl_cores_picked");
    let on_gpu01 = |ntasks: u32, cpt: u32| {
        let mut j = job(User::Alice, None, 0);
        j.ntasks = Some(ntasks);
        j.cpus_per_task = Some(cpt);
        j.required_nodes = vec!["gpu01".into()];
        j
    };
    let a = h.submit(on_gpu01(3, 1));
    let b = h.submit(on_gpu01(2, 1));
    assert_eq!(h.job(a).cpu_ids, ["0-1,32"]);
    assert_eq!(h.job(b).cpu_ids, ["2,33"]);
    h.restart();
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    assert_eq!(h.job(b).cpu_ids, ["2,33"], "kept across a restart");
    let c = h.submit(on_gpu01(1, 4));
    assert_eq!(h.job(c).cpu_ids, ["3-6"]);
    h.call(User::Alice, cancel(&[a]));
    h.turn();
    assert_eq!(state(&h, a), JobStateWire::Cancelled);
    let d = h.submit(on_gpu01(2, 1));
    assert_eq!(h.job(d).cpu_ids, ["0,32"], "the cancelled job's cores are free again");
    h.check();
}

/// Two partitions of one node each, for [`submission_reason_priority_matches_slurms_rule`].
const TWO_PARTITIONS: &str = "\
ClusterName=harness
SlurmctldHost=localhost
GresTypes=gpu
PreemptExemptTime=0
NodeName=gpu[01-02] Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 State=UNKNOWN
PartitionName=batch Nodes=gpu01 Default=YES DefaultTime=01:00:00 MaxTime=2-00:00:00 State=UP
PartitionName=other Nodes=gpu02 DefaultTime=01:00:00 MaxTime=2-00:00:00 State=UP
";

/// The reason a submission shows until the next cycle (Slurm 22.05's `_top_priority` in
/// `job_allocate`): `Priority` exactly when a pending job of any partition (neither has a
/// reservation, so Slurm compares priorities before partitions) that may be considered (not
/// held, no dependency or begin time to wait for, not over its partition's limits) has a
/// higher priority, else `None`. The controller reads only the jobs ranked above the new
/// one (an index kept across turns); this checks it against
/// that rule applied to everything `squeue` shows, after random histories of submissions
/// (two partitions, nice values, holds, begin times, dependencies), holds and releases,
/// operator priority and partition updates, cancels and cycles. Seeded, so a failure names
/// its seed and step.
#[test]
fn submission_reason_priority_matches_slurms_rule() {
    use rand::{Rng, SeedableRng};
    // Reasons of a pending job that may be considered (`may_start`, not over its
    // partition's limits): what a cycle or a submission's own test shows for it.
    let considered = |r: &str| matches!(r, "None" | "Priority" | "Resources" | "PartitionConfig");
    let mut checked = (0, 0);
    for seed in 0..6u64 {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut h = Harness::new(&format!("ctl_submit_reason_{seed}"), TWO_PARTITIONS, CtlOptions::default());
        h.register("gpu01");
        h.register("gpu02");
        h.turn();
        let mut ids: Vec<u64> = Vec::new();
        for step in 0..70 {
            let pick = |rng: &mut rand_chacha::ChaCha8Rng, ids: &[u64]| ids[rng.random_range(0..ids.len())];
            let op = if ids.is_empty() { 0 } else { rng.random_range(0..12) };
            match op {
                0..=4 => {
                    let who = if rng.random_bool(0.3) { User::Root } else { User::Alice };
                    let mut j = gpu_job(who, 8, Some(600), 0);
                    j.partition = rng.random_bool(0.5).then(|| "other".to_string());
                    j.nice = match rng.random_range(0..6) {
                        0 => Some(5000),
                        1 => Some(40),
                        2 if who == User::Root => Some(-5000),
                        _ => None,
                    };
                    j.hold = rng.random_bool(0.15);
                    if rng.random_bool(0.1) {
                        j.begin = Some(h.at() + 3600);
                    }
                    if !ids.is_empty() && rng.random_bool(0.1) {
                        j.dependency = Some(format!("afterok:{}", pick(&mut rng, &ids)));
                    }
                    // Before the submission: what the rule sees.
                    let others: Vec<(String, u64, String)> = h
                        .jobs()
                        .filter(|o| o.state == Some(JobStateWire::Pending) && o.array_task_str.is_none())
                        .map(|o| (o.partition.clone(), o.priority, o.reason.clone()))
                        .collect();
                    h.rpc(who, Request::SubmitJob(Box::new(j)));
                    h.turn_with(Due::NONE);
                    let id = match h.replies().last() {
                        Some(Response::Submitted(s)) => s.job_id,
                        other => panic!("seed {seed} step {step}: submission refused: {other:?}"),
                    };
                    ids.push(id);
                    let me = h.job(id);
                    if considered(&me.reason) {
                        let higher = others.iter().any(|(_, prio, r)| *prio > me.priority && considered(r));
                        let want = if higher { "Priority" } else { "None" };
                        assert_eq!(me.reason, want, "seed {seed} step {step}: job {id} ({} prio {}); pending before: {others:?}", me.partition, me.priority);
                        checked.0 += usize::from(higher);
                        checked.1 += 1;
                    }
                }
                5 | 6 => {
                    let op = if rng.random_bool(0.5) { HoldOp::Release } else { HoldOp::Hold };
                    h.rpc(User::Root, hold(op, pick(&mut rng, &ids)));
                    h.turn_with(Due::NONE);
                }
                7 => {
                    let change = if rng.random_bool(0.5) {
                        JobChange::Priority(rng.random_range(1..u32::MAX - 2))
                    } else {
                        JobChange::Partition(if rng.random_bool(0.5) { "batch" } else { "other" }.into())
                    };
                    let upd = UpdateJob { job: JobRef::id(pick(&mut rng, &ids)), changes: vec![change] };
                    h.rpc(User::Root, Request::UpdateJob(upd));
                    h.turn_with(Due::NONE);
                }
                8 => {
                    h.rpc(User::Root, cancel(&[pick(&mut rng, &ids)]));
                    h.turn_with(Due::NONE);
                }
                _ => {
                    h.advance(rng.random_range(1..400));
                    h.turn();
                }
            }
        }
    }
    // Both answers were reached often enough for the comparison to mean something.
    assert!(checked.0 >= 20 && checked.1 - checked.0 >= 20, "checked (Priority, all): {checked:?}");
}

/// `--constraint` as Slurm 22.05 takes it (goldens-extra a01 `constraint_*`, recorded with
/// node features set on the reference): a feature no node has, or bad syntax, is
/// `ESLURM_INVALID_FEATURE` after the id (no record); no node of the partition (or too few)
/// with the features is `ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE` with a `FAILED` record; the
/// job runs only on nodes with its features (`,` read as `&`, left to right), waits while they
/// are busy, and `scontrol update Features=` changes a pending job's only.
#[test]
fn constraints_choose_nodes_by_feature() {
    let conf = "\
ClusterName=harness
SlurmctldHost=localhost
GresTypes=gpu
NodeName=gpu01 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 Features=ib,fast State=UNKNOWN
NodeName=gpu02 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 Features=ib State=UNKNOWN
NodeName=gpu03 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 Features=slow State=UNKNOWN
PartitionName=batch Nodes=gpu[01-03] Default=YES MaxTime=2-00:00:00 State=UP
PartitionName=debug Nodes=gpu[01-02] MaxTime=30 State=UP
";
    let mut h = Harness::new("ctl_constraints", conf, CtlOptions::default());
    for n in ["gpu01", "gpu02", "gpu03"] {
        h.register(n);
    }
    h.turn();
    let with = |c: &str, nodes: Option<u32>, part: Option<&str>, gpus: u64| {
        let mut j = gpu_job(User::Alice, gpus, Some(100), 0);
        (j.constraint, j.nodes_min, j.partition) = (Some(c.to_string()), nodes, part.map(str::to_string));
        Request::SubmitJob(Box::new(j))
    };
    let err = |code| Response::Error(SlurmError::new(code));
    for bad in ["foo", "ib|foo", "IB", "((ib))", "&ib", "(ib", "ib)"] {
        assert_eq!(h.call(User::Alice, with(bad, None, None, 0)), err(ESLURM_INVALID_FEATURE), "{bad}");
    }
    assert_eq!(h.call(User::Alice, with("ib*2", None, None, 0)), err(ESLURM_NOT_SUPPORTED));
    assert_eq!(h.call(User::Alice, with("[ib|fast]", None, None, 0)), err(ESLURM_NOT_SUPPORTED));
    assert_eq!(h.call(User::Alice, with("ib", Some(3), None, 0)), err(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE));
    assert_eq!(h.call(User::Alice, with("slow", None, Some("debug"), 0)), err(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE));
    assert_eq!(h.call(User::Alice, with("slow&fast", None, None, 0)), err(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE));
    // Every refusal used an id (12 so far); the three unavailable ones are kept FAILED.
    let Response::Submitted(s) = h.call(User::Alice, with("ib,fast", None, None, 8)) else { panic!() };
    let both = s.job_id;
    assert_eq!(both, 13, "every refusal above used an id");
    let Response::Submitted(s) = h.call(User::Alice, with("", None, None, 0)) else { panic!() };
    let empty = s.job_id;
    h.turn();
    assert_eq!(h.job(11).state, Some(JobStateWire::Failed));
    assert_eq!(h.job(11).features.as_deref(), Some("slow"));
    assert!(h.jobs().all(|j| j.job_id > 9), "no record of the invalid or unsupported ones");
    assert_eq!(h.job(both).nodes, "gpu01");
    assert_eq!(h.job(both).features.as_deref(), Some("ib&fast"), "`,` is kept as `&`");
    assert_eq!(h.job(empty).features.as_deref(), Some(""));
    // gpu01's GPUs are taken: a `fast` job waits instead of running elsewhere, an
    // `fast|slow&ib` one (left to right: (fast|slow)&ib) too, a `slow|fast` one runs on gpu03.
    let Response::Submitted(s) = h.call(User::Alice, with("fast", None, None, 1)) else { panic!() };
    let fast = s.job_id;
    let Response::Submitted(s) = h.call(User::Alice, with("fast|slow&ib", None, None, 1)) else { panic!() };
    let left = s.job_id;
    let Response::Submitted(s) = h.call(User::Alice, with("slow|fast", None, None, 1)) else { panic!() };
    let either = s.job_id;
    let Response::Submitted(s) = h.call(User::Alice, with("ib", Some(2), None, 1)) else { panic!() };
    let two = s.job_id;
    h.turn();
    assert_eq!(state(&h, fast), JobStateWire::Pending);
    assert_eq!(state(&h, left), JobStateWire::Pending);
    assert_eq!(h.job(either).nodes, "gpu03");
    assert_eq!(state(&h, two), JobStateWire::Pending, "gpu01 has no GPU left for a 2-node ib job");
    // Updates: a feature no node has is refused, an empty one clears, the same one on a
    // running job changes nothing, another one on a running job is refused.
    let upd = |id: u64, f: &str| Request::UpdateJob(UpdateJob { job: JobRef::id(id), changes: vec![JobChange::Features(f.into())] });
    let refused = |r: Response| match r {
        Response::JobResults(v) => v[0].error.clone().map(|e| e.code),
        Response::Error(e) => Some(e.code),
        _ => None,
    };
    assert_eq!(refused(h.call(User::Alice, upd(fast, "nope"))), Some(ESLURM_INVALID_FEATURE));
    assert_eq!(refused(h.call(User::Alice, upd(both, "ib&fast"))), None);
    assert_eq!(refused(h.call(User::Alice, upd(both, "ib"))), Some(ESLURM_JOB_NOT_PENDING));
    assert_eq!(refused(h.call(User::Alice, upd(fast, "slow"))), None);
    h.turn();
    assert_eq!(h.job(fast).features.as_deref(), Some("slow"));
    assert_eq!(h.job(fast).nodes, "gpu03", "runs once its constraint names a node with room");
    assert_eq!(refused(h.call(User::Alice, upd(left, ""))), None);
    h.turn();
    assert_eq!(h.job(left).features, None);
    assert_ne!(h.job(left).nodes, "", "no constraint left: runs anywhere");
    h.check();
}
