//! Scheduling core II end to end, with the real `slurmctld` and real `slurmd`s (fake 8-GPU
//! inventories, cgroups on as root with `FLOTILLA_TEST_ROOT=1`): an inference service scaled up preempts a preemptible
//! training job, which acknowledges its checkpoint (touches `$FLOTILLA_CHECKPOINT_ACK`) and is
//! killed then, not at the core's deadline; its run is recorded `PREEMPTED`, it is requeued
//! (`PENDING`, `Restarts=1`, `PreemptCount=1`) and, once the service scales down, runs again to
//! `COMPLETED`. The budget warning the preemption raises reaches `AlertProgram` as JSON and
//! `scontrol show alerts`; `largest_placeable` is reported per partition.

mod common;

use common::*;
use flotilla_proto::{JobStateWire, LargestPlaceableWire, Request, Response, ServiceCreate, ServiceInfo};
use std::time::{Duration, Instant};

fn service(c: &Cluster, id: u32) -> ServiceInfo {
    match c.call(0, Request::QueryServices { ids: vec![id] }) {
        Ok(Response::Services(mut s)) if s.len() == 1 => s.remove(0),
        other => panic!("service query failed: {other:?}"),
    }
}

fn runs(c: &Cluster, job: u64) -> Vec<(u32, String, i32)> {
    // The controller's database (StateSaveLocation/flotilla.db), read beside it (WAL).
    let db = rusqlite::Connection::open_with_flags(c.path("state/flotilla.db"), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let mut st = db.prepare("SELECT run, state, signal FROM job_runs WHERE job_id = ?1 ORDER BY run").unwrap();
    st.query_map([job as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap()
}

#[test]
fn service_scale_up_preempts_training_which_checkpoints_requeues_and_completes() {
    let side = tempfile::Builder::new().prefix("fltalert").tempdir_in("/tmp").unwrap();
    let prog = side.path().join("alert.sh");
    let sink = side.path().join("alerts.jsonl");
    std::fs::write(&prog, format!("#!/bin/sh\ncat >> {}\n", sink.display())).unwrap();
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // KillWait 60 s and a 60 s preemption deadline: only the acknowledgement ends the wait early.
    let mut c = Cluster::start_with(60, &format!("AlertProgram={}\nPreemptExemptTime=0\n", prog.display()), &[]);
    c.start_nodes(4);
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();

    // largest_placeable per partition on the idle cluster (pods: gpu[01-02], gpu[03-04]).
    let lp = |c: &Cluster| -> Vec<(String, Option<LargestPlaceableWire>)> {
        match c.call(0, Request::QueryPartitions) {
            Ok(Response::Partitions(p)) => p.into_iter().map(|p| (p.name, p.largest_placeable)).collect(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        lp(&c),
        vec![
            ("batch".to_string(), Some(LargestPlaceableWire { node: 8, pod: 16, any: 32 })),
            ("debug".to_string(), Some(LargestPlaceableWire { node: 8, pod: 16, any: 16 })),
        ]
    );

    // Three non-preemptible whole-node jobs and one preemptible training job fill the cluster.
    let whole_node = |script: &str| {
        let mut s = job(script, &work);
        s.nodes_min = Some(1);
        s.gpus_per_node = Some(flotilla_proto::GpuCount { gpu_type: None, count: 8 });
        s
    };
    let fillers: Vec<u64> = (0..3).map(|_| c.submit(whole_node("#!/bin/sh\nsleep 600\n"))).collect();
    for &f in &fillers {
        c.wait_running(f, 30);
    }
    let script = "#!/bin/bash\n\
        if [ \"${SLURM_RESTART_COUNT:-0}\" -ge 1 ]; then echo \"resumed run $SLURM_RESTART_COUNT\"; exit 0; fi\n\
        trap 'echo checkpointing; touch \"$FLOTILLA_CHECKPOINT_ACK\"' TERM\n\
        echo training\n\
        while true; do sleep 0.2; done\n";
    let mut t = whole_node(script);
    t.name = Some("train".into());
    t.preemptible = true;
    // 4 TB at the assumed 200 GB/s, × 3: a 60 s deadline.
    t.checkpoint_bytes = Some(4_000_000_000_000);
    let train = c.submit(t);
    c.wait_running(train, 30);
    // RUNNING comes before the script has set its trap: a SIGTERM then would end it unacked.
    // Its first line comes after the trap.
    let out_path = work.join(format!("slurm-{train}.out"));
    assert!(
        wait_for(30, || std::fs::read_to_string(&out_path).is_ok_and(|o| o.contains("training"))),
        "the training job never reached its trap\n{}",
        c.logs()
    );
    assert_eq!(lp(&c)[0].1, Some(LargestPlaceableWire { node: 0, pod: 0, any: 0 }));

    // A 4-GPU service with no replica; the autoscaler scales it to one.
    let uid = nix::unistd::getuid().as_raw();
    let create = ServiceCreate {
        name: "llm".into(),
        command: "echo serving; exec sleep 600".into(),
        gpus_per_replica: 4,
        topology: Some("node".into()),
        min_replicas: 0,
        max_replicas: 2,
        desired_replicas: 0,
        priority: 10,
        work_dir: work.to_string_lossy().into_owned(),
        environment: vec![("PATH".into(), "/usr/bin:/bin".into())],
        uid,
        gid: nix::unistd::getgid().as_raw(),
        user: job("", &work).user,
        ..ServiceCreate::default()
    };
    let sid = match c.call(uid, Request::ServiceCreate(Box::new(create))) {
        Ok(Response::ServiceCreated { id }) => id,
        other => panic!("create failed: {other:?}\n{}", c.logs()),
    };
    // A scheduling cycle after the creation: no replica wanted, none made, nothing preempted
    // (a preemption decision raises its budget alert at once).
    c.wait_cycles(1);
    let s = service(&c, sid);
    assert_eq!((s.running_replicas, s.pending_replicas, s.replica_ids.len()), (0, 0, 0), "{s:?}");
    assert!(matches!(c.call(0, Request::QueryAlerts), Ok(Response::Alerts(a)) if a.is_empty()), "no replica wanted: nothing preempted");
    assert_eq!(c.job(train).unwrap().state, Some(JobStateWire::Running), "no replica wanted: nothing preempted");
    let t0 = Instant::now();
    assert!(matches!(c.call(uid, Request::ServiceScale { id: sid, replicas: 1 }), Ok(Response::JobResults(_))));

    // Preempted: SIGTERM, checkpoint acknowledged, killed well before the 60 s deadline.
    let ok = wait_for(40, || c.job(train).is_some_and(|j| j.state == Some(JobStateWire::Pending)));
    assert!(ok, "training job not requeued: {:?}\n{}", c.job(train), c.logs());
    assert!(t0.elapsed() < Duration::from_secs(40), "waited for the deadline: {:?}", t0.elapsed());
    let j = c.job(train).unwrap();
    assert_eq!((j.restarts, j.preempt_count), (1, 1), "{j:?}");
    assert!(j.last_checkpoint_ack.is_some(), "the acknowledgement was recorded: {j:?}");
    assert_eq!(runs(&c, train), vec![(0, "PREEMPTED".to_string(), 9)], "run 0 preempted and SIGKILLed after its ack");
    let out = std::fs::read_to_string(work.join(format!("slurm-{train}.out"))).unwrap();
    assert!(out.contains("checkpointing"), "{out}");

    // The replica runs on the freed GPUs, as a job named after the service.
    let ok = wait_for(30, || service(&c, sid).running_replicas == 1);
    assert!(ok, "replica did not start: {:?}\n{}", service(&c, sid), c.logs());
    let s = service(&c, sid);
    let replica = c.job(s.replica_ids[0]).expect("replica visible as a job");
    assert_eq!((replica.name.as_str(), replica.service_id, replica.gpus), ("llm", Some(sid), 4));
    // A replica's id is a Slurm job id of the controller's sequence (a uint32 that 32-bit
    // tools parse), after the training job's, not one of a private range.
    assert!(replica.job_id > train && replica.job_id < 0x03ff_0000, "replica id {} after job {train}", replica.job_id);
    assert_eq!(replica.state, Some(JobStateWire::Running));

    // The preemption took 25 % of running training: the budget warning reached AlertProgram
    // and `scontrol show alerts`.
    let ok = wait_for(10, || std::fs::read_to_string(&sink).is_ok_and(|t| !t.is_empty()));
    assert!(ok, "AlertProgram got nothing\n{}", c.logs());
    let text = std::fs::read_to_string(&sink).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["kind"], "PreemptionBudgetWarn", "{first}");
    assert_eq!(first["job_id"], serde_json::json!(replica.job_id), "the alert names the replica by its job id: {first}");
    assert!(first["decision"]["Alert"].is_object(), "{first}");
    match c.call(0, Request::QueryAlerts) {
        Ok(Response::Alerts(a)) => assert!(a.iter().any(|a| a.kind == "PreemptionBudgetWarn" && a.message.contains("25%")), "{a:?}"),
        other => panic!("{other:?}"),
    }

    // Scaled down, the replica stops and the training job runs again, to completion.
    assert!(matches!(c.call(uid, Request::ServiceScale { id: sid, replicas: 0 }), Ok(Response::JobResults(_))));
    let j = c.wait_done(train, 60);
    assert_eq!(j.state, Some(JobStateWire::Completed), "{j:?}");
    assert_eq!(
        runs(&c, train),
        vec![(0, "PREEMPTED".to_string(), 9), (1, "COMPLETED".to_string(), 0)]
    );
    let out = std::fs::read_to_string(work.join(format!("slurm-{train}.out"))).unwrap();
    assert!(out.contains("resumed run 1"), "{out}");
    let r = c.job(s.replica_ids[0]).unwrap();
    assert_eq!(r.state, Some(JobStateWire::Cancelled), "a replica stopped by scale-down: {r:?}");

    assert!(matches!(c.call(uid, Request::ServiceDelete { id: sid }), Ok(Response::JobResults(_))));
    assert!(matches!(c.call(0, Request::QueryServices { ids: vec![] }), Ok(Response::Services(s)) if s.is_empty()));
    for f in fillers {
        let _ = c.call(0, Request::CancelJob(flotilla_proto::CancelJob { jobs: vec![flotilla_proto::JobRef::id(f)], ..Default::default() }));
        assert_eq!(c.wait_done(f, 30).state, Some(JobStateWire::Cancelled));
    }
}

/// Services and their running replicas survive a controller `kill -9`: the replica is
/// re-adopted (not started twice), and replica ids are never reused.
#[test]
fn services_and_replicas_survive_a_controller_restart() {
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(1);
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let uid = nix::unistd::getuid().as_raw();
    // Unique per run: processes of an earlier failed run must not count.
    let marker = format!("271828.{}", std::process::id());
    let create = ServiceCreate {
        name: "embed".into(),
        command: format!("exec sleep {marker}"),
        gpus_per_replica: 2,
        min_replicas: 1,
        max_replicas: 3,
        desired_replicas: 1,
        work_dir: work.to_string_lossy().into_owned(),
        uid,
        gid: nix::unistd::getgid().as_raw(),
        user: job("", &work).user,
        ..ServiceCreate::default()
    };
    let sid = match c.call(uid, Request::ServiceCreate(Box::new(create))) {
        Ok(Response::ServiceCreated { id }) => id,
        other => panic!("create failed: {other:?}"),
    };
    assert!(wait_for(30, || service(&c, sid).running_replicas == 1), "{}", c.logs());
    let first = service(&c, sid).replica_ids.clone();
    assert!(wait_for(10, || processes_with(&marker).len() == 1), "{:?}", processes_with(&marker).iter().map(|p| std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default()).collect::<Vec<_>>());

    c.restart_ctld(&[]);
    c.kill_node(1);
    c.start_node(1);
    assert!(wait_for(30, || c.nodes().iter().any(|n| n.name == "gpu01" && !n.not_responding)), "{}", c.logs());
    // The registration was reconciled in its turn; a scheduling cycle after it would start a
    // second replica if the controller had lost the first.
    c.wait_cycles(1);
    let s = service(&c, sid);
    assert_eq!((s.running_replicas, s.pending_replicas, &s.replica_ids), (1, 0, &first), "{s:?}\n{}", c.logs());
    assert_eq!(processes_with(&marker).len(), 1, "the replica was re-adopted, not started twice");

    assert!(matches!(c.call(uid, Request::ServiceScale { id: sid, replicas: 2 }), Ok(Response::JobResults(_))));
    assert!(wait_for(30, || service(&c, sid).running_replicas == 2), "{}", c.logs());
    let ids = service(&c, sid).replica_ids;
    assert!(
        ids.len() == 2 && ids.contains(&first[0]) && ids.iter().filter(|&&i| i != first[0]).all(|&i| i > first[0]),
        "the first replica kept, the new one with a fresh id: {ids:?}"
    );
    // A replica is not requeued by hand (its service replaces it).
    let rq = c.call(uid, Request::Requeue(flotilla_proto::RequeueJob { jobs: vec![flotilla_proto::JobRef::id(first[0])], hold: false }));
    assert!(matches!(&rq, Ok(Response::JobResults(r)) if r[0].error.is_some()), "{rq:?}");
    // Another user may not scale it; an unknown id is an error.
    let other = uid.wrapping_add(4242);
    assert!(matches!(c.call(other, Request::ServiceScale { id: sid, replicas: 0 }), Ok(Response::Error(_))));
    assert!(matches!(c.call(uid, Request::ServiceScale { id: 99, replicas: 0 }), Ok(Response::Error(_))));

    assert!(matches!(c.call(uid, Request::ServiceDelete { id: sid }), Ok(Response::JobResults(_))));
    assert!(wait_for(30, || processes_with(&marker).is_empty()), "replicas of a deleted service stop");
}

/// Past the preemption budget (25 % of running training GPUs in the trailing hour), a scale-up
/// above the service's floor preempts nothing: it pages, through `AlertProgram` and `scontrol
/// show alerts`, with the jobs it would preempt.
#[test]
fn scale_up_past_the_budget_pages_instead_of_preempting() {
    let side = tempfile::Builder::new().prefix("fltpage").tempdir_in("/tmp").unwrap();
    let prog = side.path().join("alert.sh");
    let sink = side.path().join("alerts.jsonl");
    std::fs::write(&prog, format!("#!/bin/sh\ncat >> {}\n", sink.display())).unwrap();
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut c = Cluster::start_with(5, &format!("AlertProgram={}\nPreemptExemptTime=0\n", prog.display()), &[]);
    c.start_nodes(4);
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let whole_node = |preemptible: bool| {
        let mut s = job("#!/bin/bash\ntrap 'touch \"$FLOTILLA_CHECKPOINT_ACK\"' TERM\nwhile true; do sleep 0.2; done\n", &work);
        s.nodes_min = Some(1);
        s.gpus_per_node = Some(flotilla_proto::GpuCount { gpu_type: None, count: 8 });
        s.preemptible = preemptible;
        s
    };
    // Two non-preemptible and two preemptible whole-node jobs.
    let jobs: Vec<u64> = [false, false, true, true].iter().map(|&p| c.submit(whole_node(p))).collect();
    for &j in &jobs {
        c.wait_running(j, 30);
    }
    let uid = nix::unistd::getuid().as_raw();
    let create = ServiceCreate {
        name: "chat".into(),
        command: "exec sleep 600".into(),
        gpus_per_replica: 8,
        min_replicas: 0,
        max_replicas: 2,
        desired_replicas: 1,
        work_dir: work.to_string_lossy().into_owned(),
        uid,
        gid: nix::unistd::getgid().as_raw(),
        user: job("", &work).user,
        ..ServiceCreate::default()
    };
    let sid = match c.call(uid, Request::ServiceCreate(Box::new(create))) {
        Ok(Response::ServiceCreated { id }) => id,
        other => panic!("create failed: {other:?}"),
    };
    // The first replica preempts one training job: 8 of 32 GPUs, 25 %, a warning.
    assert!(wait_for(30, || service(&c, sid).running_replicas == 1), "{}", c.logs());
    let preempted: Vec<u64> = jobs[2..].iter().copied().filter(|&j| c.job(j).unwrap().preempt_count == 1).collect();
    assert_eq!(preempted.len(), 1, "{:?}", c.jobs());
    let survivor = if preempted[0] == jobs[2] { jobs[3] } else { jobs[2] };
    // The second would take the trailing hour to 16 of 32: 50 % > 25 %, above the floor (0).
    assert!(matches!(c.call(uid, Request::ServiceScale { id: sid, replicas: 2 }), Ok(Response::JobResults(_))));
    let page = |c: &Cluster| match c.call(0, Request::QueryAlerts) {
        Ok(Response::Alerts(a)) => a.into_iter().find(|a| a.kind == "Page"),
        other => panic!("{other:?}"),
    };
    assert!(wait_for(30, || page(&c).is_some()), "no page\n{}", c.logs());
    let p = page(&c).unwrap();
    assert_eq!(p.service_id, Some(sid));
    assert!(p.message.contains("50% (page limit 25%)"), "{}", p.message);
    // A whole scheduling cycle after the one that paged: none preempts instead.
    c.wait_cycles(1);
    let s = c.job(survivor).unwrap();
    assert_eq!((s.state, s.preempt_count), (Some(JobStateWire::Running), 0), "nothing preempted past the budget");
    assert_eq!(service(&c, sid).running_replicas, 1);
    let ok = wait_for(10, || std::fs::read_to_string(&sink).is_ok_and(|t| t.contains("\"kind\":\"Page\"")));
    assert!(ok, "AlertProgram got no page: {:?}", std::fs::read_to_string(&sink));
    let text = std::fs::read_to_string(&sink).unwrap();
    let line = text.lines().find(|l| l.contains("\"kind\":\"Page\"")).unwrap();
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["service_id"], serde_json::json!(sid));
    assert_eq!(v["decision"]["Page"]["would_preempt"][0]["job"], serde_json::json!(survivor), "{v}");
    assert_eq!(v["decision"]["Page"]["rate_pct"], serde_json::json!(50));

    assert!(matches!(c.call(uid, Request::ServiceDelete { id: sid }), Ok(Response::JobResults(_))));
    let replicas_done = || c.jobs().iter().filter(|j| j.service_id == Some(sid)).all(|j| j.state.is_some_and(|s| s.is_finished()));
    assert!(wait_for(30, replicas_done), "replicas of a deleted service stop");
    for j in jobs {
        let _ = c.call(0, Request::CancelJob(flotilla_proto::CancelJob { jobs: vec![flotilla_proto::JobRef::id(j)], ..Default::default() }));
        assert!(c.wait_done(j, 30).state.is_some_and(|s| s.is_finished()));
    }
}
