//! Job steps in the controller, against the real binary and fake node agents: step creation
//! and layout, what each node is told to launch, CPUs and GPUs held by running steps
//! (`ESLURM_NODES_BUSY`, `--overlap`), refusals, the `job_steps` rows (RUNNING, then the
//! step's end, CANCELLED with its job), step ids across a `kill -9` of the controller, and
//! interactive allocations given back.

mod common;

use common::*;
use flotilla_proto::errno::*;
use flotilla_proto::step::{ReleaseAllocation, StepComplete, StepLayout, StepRequest};
use flotilla_proto::*;
use std::sync::{Arc, Mutex};

fn setup(env: &Env) -> (Ctl, Arc<Mutex<Ledger>>, Vec<Agent>) {
    let ctl = Ctl::start(env, 0, &["--tick-ms", "100", "--sched-interval-ms", "200", "--debounce-ms", "5"]);
    let addr = Arc::new(Mutex::new(ctl.addr));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let agents = (1..=2).map(|i| Agent::spawn(env, &format!("gpu{i:02}"), addr.clone(), ledger.clone())).collect();
    (ctl, ledger, agents)
}

fn running(env: &Env, ctl: &Ctl, id: u64) {
    let ok = wait_for(20, || {
        all_jobs(env, ctl.addr).iter().any(|j| j.job_id == id && j.state == Some(JobStateWire::Running))
    });
    assert!(ok, "job {id} did not start");
}

fn step(env: &Env, ctl: &Ctl, uid: u32, r: StepRequest) -> Result<StepLayout, SlurmError> {
    match call(env, ctl.addr, uid, Request::CreateStep(Box::new(r))).unwrap() {
        Response::StepCreated(l) => Ok(l),
        Response::Error(e) => Err(e),
        other => panic!("{other:?}"),
    }
}

fn rows(env: &Env, job: u64) -> Vec<(String, String, i32, i32, String)> {
    let db = rusqlite::Connection::open(state_dir_db(env)).unwrap();
    let mut st = db
        .prepare("SELECT step, state, exit_code, signal, nodes FROM job_steps WHERE job_id = ?1 AND step != 'batch' ORDER BY CAST(step AS INTEGER)")
        .unwrap();
    st.query_map([job as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn steps_are_laid_out_launched_recorded_and_numbered() {
    let env = Env::new(2);
    let (mut ctl, ledger, _agents) = setup(&env);
    let mut j = job(2001, 600_000, 0);
    j.nodes_min = Some(2);
    j.ntasks_per_node = Some(4);
    j.gpus_per_node = Some(GpuCount { gpu_type: None, count: 8 });
    let Response::Submitted(s) = call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(j))).unwrap() else { panic!() };
    let id = s.job_id;
    running(&env, &ctl, id);
    let req = StepRequest {
        job_id: id,
        gpus_per_task: Some(2),
        name: "train".into(),
        argv: vec!["python".into()],
        srun_addr: "127.0.0.1:9".into(),
        ..StepRequest::default()
    };
    // The job's 8 tasks (4 per node), 2 GPUs each.
    let l = step(&env, &ctl, 2001, req.clone()).unwrap();
    assert_eq!((l.step_id, l.tasks.clone()), (0, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]));
    assert!(wait_for(10, || ledger.lock().unwrap().launches.len() == 2));
    {
        let led = ledger.lock().unwrap();
        for (node, m) in &led.launches {
            let k = m.node_index as usize;
            assert_eq!(&l.nodes[k], node);
            assert_eq!(m.task_gpus, [0b11, 0b1100, 0b11_0000, 0b1100_0000], "{node}");
            assert_eq!((m.argv.clone(), m.uid), (vec!["python".to_string()], 2001));
        }
    }
    // Its CPUs and GPUs are held: another step waits, unless it overlaps.
    assert_eq!(step(&env, &ctl, 2001, StepRequest { ntasks: Some(1), ..req.clone() }).unwrap_err().code, ESLURM_NODES_BUSY);
    let l1 = step(&env, &ctl, 2001, StepRequest { ntasks: Some(1), overlap: true, ..req.clone() }).unwrap();
    assert_eq!((l1.step_id, l1.nodes.len()), (1, 1));
    // Refusals: more than the job has, another user's job, no such job.
    let e = step(&env, &ctl, 2001, StepRequest { ntasks: Some(200), ..req.clone() }).unwrap_err();
    assert_eq!((e.code, e.text.as_str()), (ESLURM_TOO_MANY_REQUESTED_CPUS, "More processors requested than permitted"));
    assert_eq!(step(&env, &ctl, 2002, req.clone()).unwrap_err().code, ESLURM_ACCESS_DENIED);
    assert_eq!(step(&env, &ctl, 2001, StepRequest { job_id: 999, ..req.clone() }).unwrap_err().code, ESLURM_INVALID_JOB_ID);
    // squeue -s sees both.
    let Response::Steps(st) = call(&env, ctl.addr, 2001, Request::QuerySteps(JobQuery::default())).unwrap() else { panic!() };
    assert_eq!(st.iter().map(|s| (s.step_id, s.name.as_str(), s.ntasks)).collect::<Vec<_>>(), [(0, "train", 8), (1, "train", 1)]);
    // scancel's filters go with a step's signal: a job they leave out is passed over (no
    // result), one they admit is signalled.
    let user = all_jobs(&env, ctl.addr).into_iter().find(|j| j.job_id == id).unwrap().user;
    let sig = |users: Vec<String>| {
        let filter = JobFilter { users, ..JobFilter::default() };
        let s = SignalStep { job: JobRef::id(id), step_id: 1, signal: Some(10), filter };
        call(&env, ctl.addr, 2001, Request::SignalStep(s)).unwrap()
    };
    assert_eq!(sig(vec!["nobody-else".into()]), Response::JobResults(Vec::new()));
    let Response::JobResults(r) = sig(vec![user]) else { panic!() };
    assert_eq!((r.len(), r[0].error.clone()), (1, None));
    // Step 0 ends with its worst task's status; its resources are free again.
    let done = StepComplete { job_id: id, step_id: 0, exit_code: 2, signal: 0 };
    call(&env, ctl.addr, 2001, Request::StepComplete(done)).unwrap();
    let r = rows(&env, id);
    assert_eq!(r[0], ("0".into(), "FAILED".into(), 2, 0, "gpu[01-02]".into()));
    assert_eq!((r[1].0.as_str(), r[1].1.as_str()), ("1", "RUNNING"));
    // Step ids continue after a crash of the controller.
    ctl.kill9();
    let ctl = Ctl::start(&env, ctl.addr.port(), &["--tick-ms", "100", "--sched-interval-ms", "200", "--debounce-ms", "5"]);
    running(&env, &ctl, id);
    let l2 = step(&env, &ctl, 2001, StepRequest { ntasks: Some(2), ..req.clone() }).unwrap();
    assert_eq!(l2.step_id, 2);
    // The job ends: its running steps are recorded CANCELLED.
    let c = CancelJob { jobs: vec![JobRef::id(id)], ..CancelJob::default() };
    call(&env, ctl.addr, 2001, Request::CancelJob(c)).unwrap();
    assert!(wait_for(20, || rows(&env, id).iter().any(|r| r.0 == "2" && r.1 == "CANCELLED")), "{:?}", rows(&env, id));
    let step2 = |env: &Env| rows(env, id).into_iter().find(|r| r.0 == "2").unwrap();
    assert_eq!((step2(&env).2, step2(&env).3), (0, 9), "recorded at the job's end, before any report");
    let derived = |env: &Env| all_jobs(env, ctl.addr).into_iter().find(|j| j.job_id == id).unwrap().derived_exit;
    assert_eq!(derived(&env), (2, 0), "step 0's");
    // srun's report after the job's end (the node daemon's report of the job's end came
    // first): it replaces the record, as Slurm's step completion does before its
    // cleanup_completing, and counts in the job's derived exit code (3:0 ranks above 2:0).
    let late = StepComplete { job_id: id, step_id: 2, exit_code: 3, signal: 0 };
    call(&env, ctl.addr, 2001, Request::StepComplete(late)).unwrap();
    assert_eq!(step2(&env), ("2".into(), "CANCELLED".into(), 3, 0, step2(&env).4), "its job's scancel killed it");
    assert_eq!(derived(&env), (3, 0));
    // A second report for it is too late: nothing changes.
    let again = StepComplete { job_id: id, step_id: 2, exit_code: 4, signal: 0 };
    call(&env, ctl.addr, 2001, Request::StepComplete(again)).unwrap();
    assert_eq!((step2(&env).2, derived(&env)), (3, (3, 0)));
    // A report for a step the controller never had changes nothing.
    let unknown = StepComplete { job_id: id, step_id: 7, exit_code: 3, signal: 0 };
    call(&env, ctl.addr, 2001, Request::StepComplete(unknown)).unwrap();
    assert!(rows(&env, id).iter().all(|r| r.0 != "7"));
    assert_eq!(derived(&env), (3, 0));
}

#[test]
fn an_interactive_allocation_ends_when_given_back() {
    let env = Env::new(2);
    let (ctl, ledger, _agents) = setup(&env);
    let mut j = job(2001, 0, 0);
    j.script = String::new();
    j.interactive = true;
    // Without a script only an interactive allocation is accepted.
    let e = call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(SubmitJob { interactive: false, ..j.clone() }))).unwrap();
    assert_eq!(e, Response::Error(SlurmError::new(ESLURM_JOB_SCRIPT_MISSING)));
    let Response::Submitted(s) = call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(j))).unwrap() else { panic!() };
    running(&env, &ctl, s.job_id);
    // A batch job is not given back this way.
    let Response::Submitted(b) = call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(job(2001, 600_000, 0)))).unwrap() else { panic!() };
    running(&env, &ctl, b.job_id);
    let r = ReleaseAllocation { job_id: b.job_id, exit_code: 0, signal: 0 };
    assert_eq!(call(&env, ctl.addr, 2001, Request::ReleaseAllocation(r)).unwrap(), Response::Error(SlurmError::new(ESLURM_NOT_SUPPORTED)));
    let r = ReleaseAllocation { job_id: s.job_id, exit_code: 3, signal: 0 };
    call(&env, ctl.addr, 2001, Request::ReleaseAllocation(r)).unwrap();
    let ok = wait_for(20, || {
        all_jobs(&env, ctl.addr).iter().any(|x| x.job_id == s.job_id && x.state == Some(JobStateWire::Failed) && x.exit_code == 3)
    });
    assert!(ok, "{:?}", all_jobs(&env, ctl.addr));
    assert!(ledger.lock().unwrap().violations.is_empty());
}

/// The node daemons' reports of a step's end (`StepUsage::exit`, each node's part of Slurm's
/// `REQUEST_STEP_COMPLETE`): a step ends once every node it runs on has reported, with the
/// worst of them; a report from a node it does not run on changes nothing; `srun`'s report
/// after that changes nothing; a step its job's end recorded takes them as `srun`'s report.
#[test]
fn a_step_ends_when_every_node_of_it_reported() {
    let env = Env::new(2);
    let (ctl, ledger, _agents) = setup(&env);
    let mut j = job(2001, 600_000, 0);
    j.nodes_min = Some(2);
    j.ntasks_per_node = Some(2);
    let Response::Submitted(s) = call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(j))).unwrap() else { panic!() };
    let id = s.job_id;
    running(&env, &ctl, id);
    let req = StepRequest { job_id: id, argv: vec!["true".into()], srun_addr: "127.0.0.1:9".into(), ..StepRequest::default() };
    let l0 = step(&env, &ctl, 2001, req.clone()).unwrap();
    let l1 = step(&env, &ctl, 2001, StepRequest { ntasks: Some(1), overlap: true, ..req.clone() }).unwrap();
    let l2 = step(&env, &ctl, 2001, StepRequest { overlap: true, ..req.clone() }).unwrap();
    assert_eq!((l0.nodes.len(), l1.nodes.len(), l2.nodes.len()), (2, 1, 2));
    let report = |node: &str, step: u32, exit: (i32, i32)| {
        let u = StepUsage {
            job_id: id,
            run: 0,
            step: step.to_string(),
            node: node.into(),
            usage: Usage::default(),
            done: true,
            at: now() as i64,
            exit: Some(exit),
        };
        ledger.lock().unwrap().to_send.push((node.to_string(), NodeToCtl::StepUsage(u)));
    };
    // The report's usage row, written in the same commit as the step's end if it ended one.
    let usage_seen = |step: u32, node: &str| {
        let db = rusqlite::Connection::open(state_dir_db(&env)).unwrap();
        let n: i64 = db
            .query_row(
                "SELECT COUNT(*) FROM step_usage WHERE job_id = ?1 AND step = ?2 AND node = ?3",
                rusqlite::params![id as i64, step.to_string(), node],
                |r| r.get(0),
            )
            .unwrap();
        n > 0
    };
    let row = |step: u32| rows(&env, id).into_iter().find(|r| r.0 == step.to_string()).unwrap();
    // One of step 0's two nodes: it still runs.
    report(&l0.nodes[0], 0, (1, 0));
    assert!(wait_for(20, || usage_seen(0, &l0.nodes[0])), "the first node's report");
    assert_eq!(row(0).1, "RUNNING");
    // Step 1 runs on one node: the other's report is not its end.
    let other = l0.nodes.iter().find(|n| **n != l1.nodes[0]).unwrap().clone();
    report(&other, 1, (0, 0));
    assert!(wait_for(20, || usage_seen(1, &other)), "the other node's report");
    assert_eq!(row(1).1, "RUNNING");
    // The second node: step 0 ends with the worst of the two.
    report(&l0.nodes[1], 0, (3, 0));
    assert!(wait_for(20, || row(0).1 != "RUNNING"), "{:?}", rows(&env, id));
    assert_eq!(row(0), ("0".into(), "FAILED".into(), 3, 0, "gpu[01-02]".into()));
    // srun's report, after that: nothing changes.
    let late = StepComplete { job_id: id, step_id: 0, exit_code: 4, signal: 0 };
    call(&env, ctl.addr, 2001, Request::StepComplete(late)).unwrap();
    let derived = || all_jobs(&env, ctl.addr).into_iter().find(|j| j.job_id == id).unwrap().derived_exit;
    assert_eq!((row(0).2, derived()), (3, (3, 0)));
    report(&l1.nodes[0], 1, (0, 0));
    assert!(wait_for(20, || row(1).1 == "COMPLETED"), "{:?}", rows(&env, id));
    // Step 2 still runs when the job is cancelled: recorded CANCELLED 0:9 at the job's end,
    // then its nodes' reports (its tasks killed by the cancel's SIGTERM) replace that.
    let c = CancelJob { jobs: vec![JobRef::id(id)], ..CancelJob::default() };
    call(&env, ctl.addr, 2001, Request::CancelJob(c)).unwrap();
    assert!(wait_for(20, || row(2).1 == "CANCELLED"), "{:?}", rows(&env, id));
    assert_eq!((row(2).2, row(2).3), (0, 9));
    report(&l2.nodes[0], 2, (0, 15));
    assert!(wait_for(20, || usage_seen(2, &l2.nodes[0])), "the first node's report");
    assert_eq!((row(2).2, row(2).3), (0, 9), "one node of two");
    report(&l2.nodes[1], 2, (0, 15));
    assert!(wait_for(20, || row(2).3 == 15), "{:?}", rows(&env, id));
    assert_eq!(row(2), ("2".into(), "CANCELLED".into(), 0, 15, "gpu[01-02]".into()));
    assert_eq!(derived(), (3, 0), "0:15 ranks below 3:0");
}
