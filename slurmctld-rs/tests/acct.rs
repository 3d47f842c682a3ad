//! Job accounting (`sacct`) against the real binary and fake node agents: a job is in the
//! accounting from the moment its submission is answered (CONTRACT.md §A-7), records carry
//! Slurm's end states, exit codes and batch steps, `CANCELLED by <uid>` is the canceller's
//! uid, and finished records survive a `kill -9` of the controller.

mod common;

use common::*;
use flotilla_proto::*;
use std::sync::{Arc, Mutex};

fn submit(env: &Env, addr: std::net::SocketAddr, j: SubmitJob) -> u64 {
    match call(env, addr, j.uid, Request::SubmitJob(Box::new(j))) {
        Ok(Response::Submitted(s)) => s.job_id,
        other => panic!("submit: {other:?}"),
    }
}

fn acct(env: &Env, addr: std::net::SocketAddr, uid: u32, q: AcctQuery) -> Vec<AcctJob> {
    match call(env, addr, uid, Request::QueryAcct(q)) {
        Ok(Response::Acct(j)) => j,
        other => panic!("accounting query: {other:?}"),
    }
}

fn by_id(ids: &[u64]) -> AcctQuery {
    AcctQuery {
        jobs: ids.iter().map(|&job_id| AcctJobRef { job_id, task: None, step: None }).collect(),
        ..AcctQuery::default()
    }
}

fn one(env: &Env, addr: std::net::SocketAddr, id: u64) -> Option<AcctJob> {
    acct(env, addr, 2001, by_id(&[id])).into_iter().find(|j| j.job_id == id)
}

fn wait_acct(env: &Env, addr: std::net::SocketAddr, id: u64, state: &str) -> AcctJob {
    let ok = wait_for(20, || one(env, addr, id).is_some_and(|j| j.state == state));
    let j = one(env, addr, id);
    assert!(ok, "job {id} never accounted {state}: {j:?}");
    j.unwrap()
}

/// Waits until a job is accounted `state` and its batch step has ended too: a job stopped by
/// `scancel` or its time limit is accounted as ended at the stop, its batch step once the node
/// reports the script's end (Slurm's `_job_signal`/`_job_timed_out`).
fn wait_acct_ended(env: &Env, addr: std::net::SocketAddr, id: u64, state: &str) -> AcctJob {
    // Until the node reports the batch step's end, sacct shows it with the job's end state and
    // no signal (a step not ended in a record that has ended, as_mysql `_cluster_get_jobs`).
    let ended = |j: &AcctJob| j.state == state && j.steps.iter().any(|s| s.step == "batch" && s.state != "RUNNING" && s.signal != 0);
    let ok = wait_for(20, || one(env, addr, id).is_some_and(|j| ended(&j)));
    let j = one(env, addr, id);
    assert!(ok, "job {id} never accounted {state} with its batch step ended: {j:?}");
    j.unwrap()
}

/// A controller started with `extra` and one fake node agent, `gpu01`.
fn one_node(env: &Env, extra: &[&str]) -> (Ctl, Agent) {
    let ctl = Ctl::start(env, 0, extra);
    let addr = Arc::new(Mutex::new(ctl.addr));
    let agent = Agent::spawn(env, "gpu01", addr, Arc::new(Mutex::new(Ledger::default())));
    (ctl, agent)
}

/// (state, exit code, signal) of a job's batch step.
fn batch(j: &AcctJob) -> (&str, i32, i32) {
    let s = j.steps.iter().find(|s| s.step == "batch").expect("batch step");
    (s.state.as_str(), s.exit_code, s.signal)
}

#[test]
fn accounted_from_submission_with_slurm_end_states_and_kept_across_restart() {
    let env = Env::new(2);
    let extra = ["--tick-ms", "100", "--sched-interval-ms", "200", "--debounce-ms", "5", "--minute-s", "1", "--sync", "normal"];
    let mut ctl = Ctl::start(&env, 0, &extra);
    let port = ctl.addr.port();
    let addr = Arc::new(Mutex::new(ctl.addr));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let agents: Vec<Agent> =
        ["gpu01", "gpu02"].iter().map(|n| Agent::spawn(&env, n, addr.clone(), ledger.clone())).collect();
    let a = ctl.addr;

    // §A-7: in the accounting as soon as sbatch has its answer, even while held.
    let mut h = job(2001, 100, 0);
    h.hold = true;
    let held = submit(&env, a, h);
    let j = one(&env, a, held).expect("held job accounted right after submission");
    assert_eq!((j.state.as_str(), j.eligible_time, j.start_time), ("PENDING", None, None));
    assert!(j.steps.is_empty());

    let ok = submit(&env, a, job(2001, 100, 0));
    assert!(one(&env, a, ok).is_some(), "accounted right after submission");
    let fail = submit(&env, a, job(2001, 100, 3));
    let mut t = job(2002, 60_000, 0);
    t.time_limit = Some(TimeLimitWire::Minutes(1)); // one "minute" is 1 s here
    let tmo = submit(&env, a, t);
    let long = submit(&env, a, job(2001, 60_000, 0));

    let j = wait_acct(&env, a, ok, "COMPLETED");
    assert_eq!((j.exit_code, j.signal), (0, 0));
    assert_eq!(batch(&j), ("COMPLETED", 0, 0));
    assert!(j.eligible_time.is_some() && j.start_time.is_some() && j.end_time.is_some());
    assert_eq!((j.alloc_nodes, j.alloc_cpus, j.alloc_mem_mib), (1, 1, 1024), "allocation kept after release");

    let j = wait_acct(&env, a, fail, "FAILED");
    assert_eq!((j.exit_code, j.signal), (3, 0));
    assert_eq!(batch(&j), ("FAILED", 3, 0));

    // scancel of a running job by its owner: CANCELLED by 2001, job 0:0, batch 0:15.
    wait_acct(&env, a, long, "RUNNING");
    let j = one(&env, a, long).unwrap();
    assert_eq!(batch(&j), ("RUNNING", 0, 0), "batch step written when the script starts");
    let r = call(&env, a, 2001, Request::CancelJob(CancelJob { jobs: vec![JobRef::id(long)], ..CancelJob::default() }));
    assert!(matches!(r, Ok(Response::JobResults(_))), "{r:?}");
    let j = wait_acct_ended(&env, a, long, "CANCELLED");
    assert_eq!((j.cancelled_by, j.exit_code, j.signal), (Some(2001), 0, 0));
    assert_eq!(batch(&j), ("CANCELLED", 0, 15));

    // Time limit: TIMEOUT 0:0, batch CANCELLED 0:15 (CONTRACT.md §A-17).
    let j = wait_acct_ended(&env, a, tmo, "TIMEOUT");
    assert_eq!((j.exit_code, j.signal, j.time_limit_min), (0, 0, Some(1)));
    assert_eq!(batch(&j), ("CANCELLED", 0, 15));

    // A held job cancelled by root: never eligible, so outside any time window, but there
    // for -j.
    let r = call(&env, a, 0, Request::CancelJob(CancelJob { jobs: vec![JobRef::id(held)], ..CancelJob::default() }));
    assert!(matches!(r, Ok(Response::JobResults(_))), "{r:?}");
    let j = wait_acct(&env, a, held, "CANCELLED");
    assert_eq!((j.cancelled_by, j.eligible_time), (Some(0), None));

    // Users and windows (sacct's defaults): alice's jobs since a minute ago.
    let now = now() as i64;
    let window = AcctQuery {
        uids: vec![2001],
        start: Some(now - 60),
        end: Some(now + 1),
        now,
        ..AcctQuery::default()
    };
    let ids: Vec<u64> = acct(&env, a, 2001, window.clone()).iter().map(|j| j.job_id).collect();
    assert_eq!(ids, vec![ok, fail, long], "bob's job and the never-eligible held job are left out");
    let failed = AcctQuery {
        states: vec!["FAILED".into()],
        ..window.clone()
    };
    let ids: Vec<u64> = acct(&env, a, 2001, failed).iter().map(|j| j.job_id).collect();
    assert_eq!(ids, vec![fail]);
    let steps_only = AcctQuery {
        jobs: vec![AcctJobRef { job_id: ok, task: None, step: Some("batch".into()) }],
        ..AcctQuery::default()
    };
    let r = acct(&env, a, 2001, steps_only);
    assert_eq!(r.len(), 1);
    assert!(!r[0].show_job && r[0].steps.len() == 1);

    // kill -9 and restart: every record is still there, unchanged.
    let all = [held, ok, fail, tmo, long];
    let before = acct(&env, a, 0, by_id(&all));
    assert_eq!(before.len(), 5);
    ctl.kill9();
    let ctl2 = Ctl::start(&env, port, &extra);
    *addr.lock().unwrap() = ctl2.addr;
    let after = acct(&env, ctl2.addr, 0, by_id(&all));
    assert_eq!(after, before, "finished records persist across controller restarts");
    drop(agents);
}

#[test]
fn requeued_run_is_accounted_requeued_until_it_runs_again() {
    let env = Env::new(1);
    // No hold-off after the requeue (Slurm's is 121 s): the released job may run at once.
    let extra = ["--tick-ms", "100", "--sched-interval-ms", "200", "--debounce-ms", "5", "--minute-s", "1", "--requeue-holdoff", "0"];
    let (ctl, _agent) = one_node(&env, &extra);
    let a = ctl.addr;
    // Fill the node so that the requeued job cannot start again at once.
    let mut j = job(2001, 60_000, 0);
    j.exclusive = true;
    let id = submit(&env, a, j);
    wait_acct(&env, a, id, "RUNNING");
    let r = call(&env, a, 2001, Request::Requeue(RequeueJob { jobs: vec![JobRef::id(id)], hold: true }));
    assert!(matches!(r, Ok(Response::JobResults(_))), "{r:?}");
    // `sacct -j`: the job's new record, pending (goldens-extra 1016); sacct's default window
    // (no `-j`): the REQUEUED run, as the new record was never eligible.
    wait_acct(&env, a, id, "PENDING");
    let window = AcctQuery { start: Some(0), ..AcctQuery::default() };
    let j = acct(&env, a, 2001, window.clone()).into_iter().find(|j| j.job_id == id).expect("the REQUEUED run in the window");
    assert_eq!((j.state.as_str(), j.exit_code, j.signal, j.restarts), ("REQUEUED", 0, 0, 0));
    assert!(j.end_time.is_some() && j.start_time.is_some());
    assert_eq!(batch(&j), ("CANCELLED", 0, 15));
    let dup = acct(&env, a, 2001, AcctQuery { duplicates: true, ..window });
    assert_eq!(dup.iter().filter(|j| j.job_id == id).count(), 1, "-D: only the run in the window: {dup:#?}");
    // Released, it runs again: the new run is the record.
    let r = call(&env, a, 2001, Request::HoldRelease(HoldRelease { jobs: vec![JobRef::id(id)], op: HoldOp::Release }));
    assert!(matches!(r, Ok(Response::JobResults(_))), "{r:?}");
    let j = wait_acct(&env, a, id, "RUNNING");
    assert_eq!(j.restarts, 1);
    assert_eq!(batch(&j), ("RUNNING", 0, 0));
}

#[test]
fn each_run_keeps_its_own_batch_step_when_the_job_runs_again_at_once() {
    // Slurm keeps steps per job record: `sacct -D` shows a requeued run's batch step
    // (`CANCELLED 0:15`, golden 0284) and the new run's own, even when the new run starts in
    // the second the old one ended (the demo's preempted array tasks showed the new run's
    // batch step, with no TRES, under the old run).
    let env = Env::new(1);
    let extra = ["--tick-ms", "100", "--sched-interval-ms", "200", "--debounce-ms", "5", "--minute-s", "1", "--requeue-holdoff", "0"];
    let (ctl, _agent) = one_node(&env, &extra);
    let a = ctl.addr;
    let id = submit(&env, a, job(2001, 60_000, 0));
    wait_acct(&env, a, id, "RUNNING");
    let r = call(&env, a, 2001, Request::Requeue(RequeueJob { jobs: vec![JobRef::id(id)], hold: false }));
    assert!(matches!(r, Ok(Response::JobResults(_))), "{r:?}");
    let again = wait_for(20, || one(&env, a, id).is_some_and(|j| j.state == "RUNNING" && j.restarts == 1));
    assert!(again, "job {id} never ran again: {:?}", one(&env, a, id));
    let q = AcctQuery { duplicates: true, ..by_id(&[id]) };
    let mut runs = acct(&env, a, 2001, q);
    runs.retain(|r| r.job_id == id);
    assert_eq!(runs.len(), 2, "{runs:#?}");
    let (old, new) = (&runs[0], &runs[1]);
    assert_eq!((old.state.as_str(), old.restarts, new.restarts), ("REQUEUED", 0, 1), "{runs:#?}");
    for r in [old, new] {
        assert_eq!(r.steps.iter().filter(|s| s.step == "batch").count(), 1, "one batch step per run: {r:#?}");
    }
    assert_eq!(batch(old), ("CANCELLED", 0, 15));
    assert_eq!(batch(new), ("RUNNING", 0, 0));
    let old_batch = old.steps.iter().find(|s| s.step == "batch").unwrap();
    assert!(old_batch.cpus >= 1 && old_batch.end_time.is_some(), "{old_batch:?}");
    assert!(old_batch.start_time <= old.end_time && old.end_time <= new.start_time, "{runs:#?}");
}

#[test]
fn requeued_job_not_held_is_accounted_pending_at_once() {
    // Real Slurm 22.05: after `scontrol requeue` (no hold) sacct shows the job PENDING; the
    // REQUEUED run is an earlier record (`sacct -D`).
    let env = Env::new(1);
    let extra = ["--tick-ms", "100", "--sched-interval-ms", "200", "--debounce-ms", "5", "--minute-s", "1"];
    let (ctl, _agent) = one_node(&env, &extra);
    let a = ctl.addr;
    let id = submit(&env, a, job(2001, 60_000, 0));
    wait_acct(&env, a, id, "RUNNING");
    let r = call(&env, a, 2001, Request::Requeue(RequeueJob { jobs: vec![JobRef::id(id)], hold: false }));
    assert!(matches!(r, Ok(Response::JobResults(_))), "{r:?}");
    // Slurm's hold-off (121 s) keeps it pending for the rest of the test.
    let j = wait_acct(&env, a, id, "PENDING");
    assert_eq!(j.restarts, 1);
    // Cancelled before it was eligible again (goldens-extra 1015, golden 0282 jobs 54 and
    // 57): `sacct -j` shows the cancelled record, sacct's default window the REQUEUED run.
    let r = call(&env, a, 2001, Request::CancelJob(CancelJob { jobs: vec![JobRef::id(id)], ..CancelJob::default() }));
    assert!(matches!(r, Ok(Response::JobResults(_))), "{r:?}");
    let j = wait_acct(&env, a, id, "CANCELLED");
    assert_eq!(j.steps.iter().filter(|s| s.step == "batch").count(), 0, "the cancelled record ran no step: {j:#?}");
    let window = AcctQuery { start: Some(0), ..AcctQuery::default() };
    let w: Vec<AcctJob> = acct(&env, a, 2001, window).into_iter().filter(|j| j.job_id == id).collect();
    assert_eq!(w.len(), 1, "{w:#?}");
    assert_eq!((w[0].state.as_str(), w[0].restarts), ("REQUEUED", 0));
    assert_eq!(batch(&w[0]), ("CANCELLED", 0, 15));
}

#[test]
fn array_tasks_accounted_from_the_pending_remainder_to_their_own_records() {
    let env = Env::new(1);
    let extra = ["--tick-ms", "100", "--sched-interval-ms", "200", "--debounce-ms", "5", "--minute-s", "1"];
    let (ctl, _agent) = one_node(&env, &extra);
    let a = ctl.addr;
    let mut j = job(2001, 400, 0);
    j.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 2, step: 1 }], max_running: Some(1) });
    let aid = submit(&env, a, j);
    // Right after submission: the remainder `A_[0-2%1]`, or already task 0 and `A_[1-2%1]`
    // when the scheduling cycle of the same turn started it.
    let r = acct(&env, a, 2001, by_id(&[aid]));
    let rows: Vec<(Option<u64>, Option<u32>, Option<&str>)> =
        r.iter().map(|j| (j.array_job_id, j.array_task_id, j.array_task_str.as_deref())).collect();
    assert!(
        rows == [(Some(aid), None, Some("0-2%1"))] || rows == [(Some(aid), Some(0), None), (Some(aid), None, Some("1-2%1"))],
        "{rows:?}"
    );
    // While task 0 runs, the remainder is `A_[1-2%1]`.
    let ok = wait_for(20, || {
        acct(&env, a, 2001, by_id(&[aid])).iter().any(|j| j.array_task_str.as_deref() == Some("1-2%1"))
    });
    assert!(ok, "{:?}", acct(&env, a, 2001, by_id(&[aid])));
    // All done: one record per task, the last one reusing the array's id, each with its step.
    let ok = wait_for(30, || {
        let r = acct(&env, a, 2001, by_id(&[aid]));
        r.len() == 3 && r.iter().all(|j| j.state == "COMPLETED")
    });
    let r = acct(&env, a, 2001, by_id(&[aid]));
    assert!(ok, "{r:?}");
    let tasks: Vec<(Option<u32>, bool)> = r.iter().map(|j| (j.array_task_id, j.steps.len() == 1)).collect();
    assert_eq!(tasks, vec![(Some(0), true), (Some(1), true), (Some(2), true)]);
    assert_eq!(r[2].job_id, aid);
    // `A_T` selects one task.
    let one = acct(&env, a, 2001, AcctQuery {
        jobs: vec![AcctJobRef { job_id: aid, task: Some(1), step: None }],
        ..AcctQuery::default()
    });
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].array_task_id, Some(1));
}
