//! The controller's shortcuts for speed (issue #6) keep its behaviour: a held submission does
//! not trigger a scheduling cycle (a non-held one does), and array jobs are still found by the
//! cycle without scanning every job — also after a restart.

mod common;

use common::*;
use flotilla_proto::*;

fn submit(env: &Env, ctl: &Ctl, j: SubmitJob) -> u64 {
    match call(env, ctl.addr, j.uid, Request::SubmitJob(Box::new(j))) {
        Ok(Response::Submitted(s)) => s.job_id,
        other => panic!("submit: {other:?}"),
    }
}

fn cycles(env: &Env, ctl: &Ctl) -> u64 {
    match call(env, ctl.addr, 0, Request::Stats) {
        Ok(Response::Stats(s)) => s.cycles,
        other => panic!("stats: {other:?}"),
    }
}

fn reason_of(env: &Env, ctl: &Ctl, id: u64) -> String {
    all_jobs(env, ctl.addr).into_iter().find(|j| j.job_id == id).map(|j| j.reason).unwrap_or_default()
}

#[test]
fn held_submissions_do_not_trigger_a_cycle() {
    let env = Env::new(1);
    // Periodic cycles far apart; an event-triggered cycle runs in the turn of its event (no
    // debounce), so a submission that triggers one has it counted before its answer comes.
    let ctl = Ctl::start(&env, 0, &["--sched-interval-ms", "600000", "--debounce-ms", "0"]);
    // The start-up cycle runs in the first turn.
    wait_until("the start-up cycle", 10, || turns(&env, ctl.addr).cycles >= 1);
    let c0 = wait_turns(&env, ctl.addr, 1).cycles;
    let mut ids = Vec::new();
    for _ in 0..5 {
        let mut h = job(2001, 50, 0);
        h.hold = true;
        ids.push(submit(&env, &ctl, h));
        // A whole turn after the submission's.
        assert_eq!(wait_turns(&env, ctl.addr, 1).cycles, c0, "a held submission triggered a cycle");
    }
    assert_eq!(cycles(&env, &ctl), c0, "a held submission triggered a cycle");
    for id in ids {
        assert_eq!(reason_of(&env, &ctl, id), "JobHeldUser", "the hold shows without a cycle");
    }
    // The same submission without --hold triggers one, in its own turn.
    submit(&env, &ctl, job(2001, 50, 0));
    assert_eq!(turns(&env, ctl.addr).cycles, c0 + 1, "a submission did not trigger a cycle");
}

#[test]
fn array_jobs_reach_the_core_before_and_after_a_restart() {
    // No node agents: the array's tasks stay pending, with the core's reason once a cycle
    // has moved them into the core (`JobArrayTaskLimit` before).
    let env = Env::new(1);
    let fast = ["--tick-ms", "100", "--sched-interval-ms", "200", "--debounce-ms", "5"];
    let mut ctl = Ctl::start(&env, 0, &fast);
    let mut plain = job(2001, 50, 0);
    plain.hold = true; // many inert jobs beside the array
    for _ in 0..3 {
        submit(&env, &ctl, plain.clone());
    }
    let mut a = job(2001, 50, 0);
    a.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 3, step: 1 }], max_running: None });
    let aid = submit(&env, &ctl, a);
    assert!(
        wait_for(10, || !["", "JobArrayTaskLimit"].contains(&reason_of(&env, &ctl, aid).as_str())),
        "array {aid} never reached the core: {}",
        reason_of(&env, &ctl, aid)
    );
    let port = ctl.addr.port();
    ctl.kill9();
    let ctl = Ctl::start(&env, port, &fast);
    assert!(
        wait_for(10, || !["", "JobArrayTaskLimit"].contains(&reason_of(&env, &ctl, aid).as_str())),
        "after a restart, array {aid} never reached the core: {}",
        reason_of(&env, &ctl, aid)
    );
}

/// `squeue`'s query (`QueueQuery`: only the fields asked for) answers every field as the full
/// job query does, for jobs running, pending on resources, held, waiting on a dependency and
/// array remainders: the controller skips the work of the fields not asked for, never the
/// work of those asked for.
#[test]
fn queue_query_answers_each_field_as_the_job_query() {
    let env = Env::new(2);
    let ctl = Ctl::start(&env, 0, &["--tick-ms", "100", "--sched-interval-ms", "200", "--debounce-ms", "5"]);
    let addr = std::sync::Arc::new(std::sync::Mutex::new(ctl.addr));
    let ledger = std::sync::Arc::new(std::sync::Mutex::new(Ledger::default()));
    let _agents: Vec<Agent> = (1..=2).map(|i| Agent::spawn(&env, &format!("gpu{i:02}"), addr.clone(), ledger.clone())).collect();
    let mut big = job(2001, 600_000, 0);
    big.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: 8 }];
    big.nodes_min = Some(2);
    big.nodes_max = Some(2);
    let running = submit(&env, &ctl, big.clone());
    let waiting = submit(&env, &ctl, big);
    let mut held = job(2002, 50, 0);
    held.hold = true;
    held.comment = Some("later".into());
    submit(&env, &ctl, held);
    let mut dep = job(2001, 50, 0);
    dep.dependency = Some(format!("afterok:{running}"));
    submit(&env, &ctl, dep);
    let mut a = job(2001, 50, 0);
    a.array = Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 5, step: 1 }], max_running: Some(2) });
    submit(&env, &ctl, a);
    let state_of = |id: u64| all_jobs(&env, ctl.addr).into_iter().find(|j| j.job_id == id).and_then(|j| j.state);
    assert!(wait_for(10, || state_of(running) == Some(JobStateWire::Running)), "job {running} never ran");
    assert!(wait_for(10, || all_jobs(&env, ctl.addr).iter().any(|j| j.job_id == waiting && j.reason != "None")));
    let query = JobQuery { include_finished: true, ..JobQuery::default() };
    // A scheduling cycle between the two queries may change a reason or a priority: compare
    // again until one pair agrees on every field (a field the queue query gets wrong never
    // agrees).
    let mut last = String::new();
    let agreed = wait_for(10, || {
        let full: Vec<JobInfo> = all_jobs(&env, ctl.addr);
        for f in JobField::ALL {
            let fields = vec![JobField::JobId, *f];
            let rows = match call(&env, ctl.addr, 0, Request::QueryQueue(QueueQuery { query: query.clone(), fields: fields.clone() })) {
                Ok(Response::Queue(r)) => r,
                other => panic!("queue query: {other:?}"),
            };
            let got: Vec<JobView<'_>> = rows.iter(&fields).collect::<Result<_, _>>().unwrap();
            if got.len() != full.len() {
                last = format!("{f:?}: {} rows for {} jobs", got.len(), full.len());
                return false;
            }
            for (g, j) in got.iter().zip(&full) {
                let want = f.encode(&JobView::from(j), Vec::new()).unwrap();
                if g.job_id != j.job_id || f.encode(g, Vec::new()).unwrap() != want {
                    last = format!("{f:?} of job {}: {g:?} vs {j:?}", j.job_id);
                    return false;
                }
            }
        }
        true
    });
    assert!(agreed, "{last}");
}
