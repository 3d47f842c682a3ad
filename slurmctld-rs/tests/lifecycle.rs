//! Job lifecycle against the real binary and fake node agents: start, completion, failure,
//! arrays, dependencies, time limits, hold/release, requeue, node reboot.

mod common;

use common::*;
use flotilla_proto::*;
use std::sync::{Arc, Mutex};

fn submit(env: &Env, ctl: &Ctl, j: SubmitJob) -> u64 {
    match call(env, ctl.addr, j.uid, Request::SubmitJob(Box::new(j))) {
        Ok(Response::Submitted(s)) => s.job_id,
        other => panic!("submit: {other:?}"),
    }
}

fn state_of(env: &Env, ctl: &Ctl, id: u64) -> Option<JobInfo> {
    all_jobs(env, ctl.addr).into_iter().find(|j| j.job_id == id)
}

fn wait_state(env: &Env, ctl: &Ctl, id: u64, want: JobStateWire) -> JobInfo {
    let ok = wait_for(20, || state_of(env, ctl, id).is_some_and(|j| j.state == Some(want)));
    let j = state_of(env, ctl, id);
    assert!(ok, "job {id} never reached {want:?}: {j:?}");
    j.unwrap()
}

fn setup(nodes: usize) -> (Env, Ctl, Arc<Mutex<Ledger>>, Vec<Agent>) {
    let env = Env::new(nodes);
    let ctl = Ctl::start(&env, 0, &["--tick-ms", "100", "--sched-interval-ms", "200", "--debounce-ms", "5", "--minute-s", "1", "--requeue-holdoff", "2"]);
    let addr = Arc::new(Mutex::new(ctl.addr));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let agents = (1..=nodes)
        .map(|i| Agent::spawn(&env, &format!("gpu{i:02}"), addr.clone(), ledger.clone()))
        .collect();
    (env, ctl, ledger, agents)
}

#[test]
fn jobs_run_complete_and_fail() {
    let (env, ctl, _l, _agents) = setup(2);
    let ok = submit(&env, &ctl, job(2001, 100, 0));
    let bad = submit(&env, &ctl, job(2001, 100, 3));
    assert_eq!((ok, bad), (1, 2));
    let j = wait_state(&env, &ctl, ok, JobStateWire::Completed);
    // One node of the two; which one depends on which fake agent registered first.
    assert!(["gpu01", "gpu02"].contains(&j.nodes.as_str()), "ran on {}", j.nodes);
    let j = wait_state(&env, &ctl, bad, JobStateWire::Failed);
    assert_eq!(j.exit_code, 3);
    // Rejected submissions consume ids as in Slurm (goldens 0064-0081).
    let mut r = job(2001, 10, 0);
    r.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: 9 }];
    let e = call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(r))).unwrap();
    assert_eq!(e, Response::Error(SlurmError::new(errno::ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE)));
    let mut r = job(2001, 10, 0);
    r.partition = Some("nosuch".into());
    let e = call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(r))).unwrap();
    let Response::Error(e) = e else { panic!() };
    assert_eq!((e.code, e.text.as_str()), (errno::ESLURM_INVALID_PARTITION_NAME, "Invalid partition name specified"));
    let mut t = job(2001, 10, 0);
    t.test_only = true;
    let Ok(Response::TestOnly(t)) = call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(t))) else { panic!() };
    assert_eq!(t.job_id, 4, "a failed node-config submission and --test-only consume ids");
    assert_eq!(submit(&env, &ctl, job(2001, 10, 0)), 5);
    let f = state_of(&env, &ctl, 3).unwrap();
    assert_eq!((f.state, f.reason.as_str()), (Some(JobStateWire::Failed), "BadConstraints"));
}

#[test]
fn arrays_throttle_and_task_ids() {
    let (env, ctl, _l, _agents) = setup(2);
    let mut a = job(2001, 300, 0);
    a.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 5, step: 1 }], max_running: Some(2) });
    let aid = submit(&env, &ctl, a);
    let mut max_running = 0;
    let ok = wait_for(30, || {
        let jobs: Vec<JobInfo> = all_jobs(&env, ctl.addr).into_iter().filter(|j| j.array_job_id == Some(aid)).collect();
        let running = jobs.iter().filter(|j| j.state == Some(JobStateWire::Running)).count();
        max_running = max_running.max(running);
        jobs.len() == 6 && jobs.iter().all(|j| j.state == Some(JobStateWire::Completed))
    });
    assert!(ok, "array did not complete: {:?}", all_jobs(&env, ctl.addr));
    assert!(max_running <= 2, "throttle %2 exceeded: {max_running}");
    let jobs: Vec<JobInfo> = all_jobs(&env, ctl.addr).into_iter().filter(|j| j.array_job_id == Some(aid)).collect();
    let last = jobs.iter().find(|j| j.job_id == aid).expect("the last task reuses the array id");
    assert_eq!(last.array_task_id, Some(5));
    let mut ids: Vec<u64> = jobs.iter().map(|j| j.job_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![aid, aid + 1, aid + 2, aid + 3, aid + 4, aid + 5]);
}

#[test]
fn dependencies_time_limits_hold_requeue() {
    let (env, ctl, ledger, agents) = setup(2);
    let first = submit(&env, &ctl, job(2001, 400, 1));
    let mut ok_dep = job(2001, 50, 0);
    ok_dep.dependency = Some(format!("afterok:{first}"));
    let never = submit(&env, &ctl, ok_dep);
    let mut notok = job(2001, 50, 0);
    notok.dependency = Some(format!("afternotok:{first}"));
    let runs = submit(&env, &ctl, notok);
    assert!(wait_for(5, || state_of(&env, &ctl, never).unwrap().reason == "Dependency"));
    wait_state(&env, &ctl, runs, JobStateWire::Completed);
    let j = state_of(&env, &ctl, never).unwrap();
    assert_eq!((j.state, j.reason.as_str()), (Some(JobStateWire::Pending), "DependencyNeverSatisfied"));

    // Time limit: 1 "minute" is 1 s in this test; SIGTERM then TIMEOUT.
    let mut long = job(2001, 60_000, 0);
    long.time_limit = Some(TimeLimitWire::Minutes(1));
    let t = submit(&env, &ctl, long);
    wait_state(&env, &ctl, t, JobStateWire::Timeout);
    // Its batch host was told why, before the signals (for slurmstepd's notice).
    assert_eq!(ledger.lock().unwrap().notices, vec![(t, flotilla_proto::StopCause::TimeLimit)]);

    // Hold / release.
    let mut h = job(2001, 50, 0);
    h.hold = true;
    let held = submit(&env, &ctl, h);
    assert_eq!(state_of(&env, &ctl, held).unwrap().reason, "JobHeldUser");
    let r = call(&env, ctl.addr, 2001, Request::HoldRelease(HoldRelease { jobs: vec![JobRef::id(held)], op: HoldOp::Release })).unwrap();
    assert_eq!(r, Response::JobResults(vec![JobResult { job: JobRef::id(held), error: None }]));
    wait_state(&env, &ctl, held, JobStateWire::Completed);

    // Requeue a running job: it runs again as run 1.
    let rq = submit(&env, &ctl, job(2001, 1500, 0));
    wait_state(&env, &ctl, rq, JobStateWire::Running);
    call(&env, ctl.addr, 2001, Request::Requeue(RequeueJob { jobs: vec![JobRef::id(rq)], hold: false })).unwrap();
    // Held back (Slurm: cred_expire + 1 s; here --requeue-holdoff 2) as PENDING BeginTime.
    let j = wait_state(&env, &ctl, rq, JobStateWire::Pending);
    assert_eq!(j.reason, "BeginTime");
    assert!(j.eligible_time.is_some_and(|t| t > now() as i64), "{:?}", j.eligible_time);
    let j = wait_state(&env, &ctl, rq, JobStateWire::Completed);
    assert_eq!(j.restarts, 1);
    assert_eq!(ledger.lock().unwrap().starts.get(&(rq, 1)), Some(&1));
    assert_eq!(ledger.lock().unwrap().notices.last(), Some(&(rq, flotilla_proto::StopCause::Requeued)));

    // Requeue with a hold (`scontrol requeuehold`): PENDING with Slurm's `job requeued in held
    // state` until released, then BeginTime (checked on Slurm 22.05), then it runs again.
    let rh = submit(&env, &ctl, job(2001, 1500, 0));
    wait_state(&env, &ctl, rh, JobStateWire::Running);
    call(&env, ctl.addr, 2001, Request::Requeue(RequeueJob { jobs: vec![JobRef::id(rh)], hold: true })).unwrap();
    assert!(wait_for(5, || state_of(&env, &ctl, rh).unwrap().reason == "job requeued in held state"));
    // A scheduling cycle after the hold showed: one that would start the job has run.
    wait_cycles(&env, ctl.addr, 1);
    assert_eq!(state_of(&env, &ctl, rh).unwrap().state, Some(JobStateWire::Pending), "held: does not run");
    call(&env, ctl.addr, 2001, Request::HoldRelease(HoldRelease { jobs: vec![JobRef::id(rh)], op: HoldOp::Release })).unwrap();
    let j = state_of(&env, &ctl, rh).unwrap();
    assert_eq!((j.state, j.reason.as_str()), (Some(JobStateWire::Pending), "BeginTime"));
    assert_eq!(wait_state(&env, &ctl, rh, JobStateWire::Completed).restarts, 1);

    // Cancelled while it is being stopped for a requeue (it traps SIGTERM, so the stop waits
    // for KillWait): it ends CANCELLED and does not run again.
    let mut t = job(2001, 60_000, 0);
    t.script.push_str("#FAKE_IGNORE_TERM=1\n");
    let rc = submit(&env, &ctl, t);
    wait_state(&env, &ctl, rc, JobStateWire::Running);
    call(&env, ctl.addr, 2001, Request::Requeue(RequeueJob { jobs: vec![JobRef::id(rc)], hold: false })).unwrap();
    let r = call(&env, ctl.addr, 2001, Request::CancelJob(CancelJob { jobs: vec![JobRef::id(rc)], ..CancelJob::default() })).unwrap();
    assert_eq!(r, Response::JobResults(vec![JobResult { job: JobRef::id(rc), error: None }]));
    let j = wait_state(&env, &ctl, rc, JobStateWire::Cancelled);
    assert_eq!(j.restarts, 0, "{j:?}");
    // (Before the fix it went PENDING BeginTime and ran again after the hold-off.)
    wait_cycles(&env, ctl.addr, 1);
    assert_eq!(state_of(&env, &ctl, rc).unwrap().state, Some(JobStateWire::Cancelled));
    assert_eq!(ledger.lock().unwrap().starts.get(&(rc, 1)), None, "the cancelled job ran again");

    // A node reboots (new boot epoch) under a running job: the job is requeued and runs again.
    let victim = submit(&env, &ctl, job(2001, 2000, 0));
    let j = wait_state(&env, &ctl, victim, JobStateWire::Running);
    let idx: usize = j.nodes.trim_start_matches("gpu").parse::<usize>().unwrap() - 1;
    *agents[idx].boot_epoch.lock().unwrap() += 1;
    let j = wait_state(&env, &ctl, victim, JobStateWire::Completed);
    assert_eq!(j.restarts, 1);
}

/// `sbatch --test-only` on a full cluster: the job would start when the first running job
/// reaches its time limit, on that job's node (Slurm's will-run; golden 0168).
#[test]
fn test_only_on_a_busy_cluster_names_the_node_that_frees_first() {
    let (env, ctl, _l, _agents) = setup(2);
    let mut ids = Vec::new();
    for (limit, gpus) in [(30, 8), (10, 8)] {
        let mut j = job(2001, 60_000, 0);
        j.time_limit = Some(TimeLimitWire::Minutes(limit));
        j.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: gpus }];
        let id = submit(&env, &ctl, j);
        ids.push(wait_state(&env, &ctl, id, JobStateWire::Running));
    }
    let mut t = job(2001, 50, 0);
    t.test_only = true;
    t.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: 1 }];
    let Ok(Response::TestOnly(r)) = call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(t))) else {
        panic!("no test-only answer");
    };
    // The 10-minute job ends first (by its limit as planned: 600 s after its start); its node
    // is where the job would go.
    let short = &ids[1];
    assert_eq!(r.nodes, short.nodes);
    let end = short.start_time.unwrap() + 600;
    assert!((end - 1..=end + 1).contains(&r.start_time), "{r:?} {short:?}");
}
