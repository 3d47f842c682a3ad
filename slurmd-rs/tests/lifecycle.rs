//! End-to-end: the real controller and real node daemons on localhost run batch scripts:
//! exit codes and signals as sacct shows them, output file names, restarts of the daemon.

mod common;

use common::*;
use flotilla_proto::JobStateWire;

#[test]
fn exits_and_outputs() {
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(2);
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();

    let ok = c.submit(job("#!/bin/sh\necho hello from $SLURMD_NODENAME\n", &work));
    let j = c.wait_done(ok, 30);
    assert_eq!((j.state, j.exit_code, j.exit_signal), (Some(JobStateWire::Completed), 0, 0));
    let out = std::fs::read_to_string(work.join(format!("slurm-{ok}.out"))).unwrap();
    assert!(out.starts_with("hello from gpu0"), "{out}");

    let mut s = job("#!/bin/sh\necho about to fail\nexit 3\n", &work);
    s.stdout = Some("o-%j-%x.out".into());
    s.stderr = Some("e-%5j.err".into());
    s.name = Some("fail".into());
    let fail = c.submit(s);
    let j = c.wait_done(fail, 30);
    assert_eq!((j.state, j.exit_code, j.exit_signal), (Some(JobStateWire::Failed), 3, 0), "sacct 3:0");
    assert_eq!(std::fs::read_to_string(work.join(format!("o-{fail}-fail.out"))).unwrap(), "about to fail\n");
    assert!(work.join(format!("e-{fail:05}.err")).exists());

    let killed = c.submit(job("#!/bin/sh\necho about to die by SIGKILL\nkill -9 $$\n", &work));
    let j = c.wait_done(killed, 30);
    assert_eq!((j.state, j.exit_code, j.exit_signal), (Some(JobStateWire::Failed), 0, 9), "sacct 0:9");
}

/// A plain restart of a node daemon keeps its boot epoch and re-adopts the running job,
/// which then finishes normally; a restart with a changed kernel boot id is a reboot: the
/// controller invalidates and requeues the allocation, and the old processes are gone.
#[test]
fn restart_readopts_reboot_requeues() {
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(1);
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();

    let id = c.submit(job("#!/bin/sh\necho start\nsleep 3\necho done\n", &work));
    c.wait_running(id, 30);
    let out = work.join(format!("slurm-{id}.out"));
    assert!(wait_for(30, || std::fs::read_to_string(&out).is_ok_and(|o| o == "start\n")), "the script did not start\n{}", c.logs());
    c.kill_node(1);
    assert!(wait_for(10, || c.nodes().iter().any(|n| n.name == "gpu01" && n.not_responding)), "the controller did not see the daemon go\n{}", c.logs());
    c.start_node(1);
    let j = c.wait_done(id, 30);
    assert_eq!((j.state, j.exit_code, j.exit_signal, j.restarts), (Some(JobStateWire::Completed), 0, 0, 0), "{}", c.logs());
    assert_eq!(std::fs::read_to_string(work.join(format!("slurm-{id}.out"))).unwrap(), "start\ndone\n");
    let epoch_before = c.call(0, flotilla_proto::Request::QueryNodes(Default::default()));

    // The daemon may also be away when the job ends: the end is reported on return.
    let marker2 = "1.0161803";
    let id2 = c.submit(job(&format!("#!/bin/sh\nsleep {marker2}\nexit 4\n"), &work));
    c.wait_running(id2, 30);
    assert!(wait_for(10, || !processes_with(marker2).is_empty()), "the script did not start\n{}", c.logs());
    c.kill_node(1);
    assert!(wait_for(10, || c.nodes().iter().any(|n| n.name == "gpu01" && n.not_responding)), "the controller did not see the daemon go\n{}", c.logs());
    assert!(wait_for(30, || processes_with(marker2).is_empty()), "the script did not end while its daemon was away");
    c.start_node(1);
    let j = c.wait_done(id2, 30);
    assert_eq!((j.state, j.exit_code), (Some(JobStateWire::Failed), 4));

    // Reboot: new boot id.
    let marker = "314159.265";
    let id3 = c.submit(job(&format!("#!/bin/sh\nsleep {marker}\n"), &work));
    c.wait_running(id3, 30);
    assert!(wait_for(10, || !processes_with(marker).is_empty()));
    c.kill_node(1);
    c.set_boot_id(1, "boot-2");
    c.start_node(1);
    assert!(
        wait_for(30, || c.job(id3).is_some_and(|j| j.restarts >= 1)),
        "job not requeued after the reboot: {:?}\n{}",
        c.job(id3),
        c.logs()
    );
    let nodes = match c.call(0, flotilla_proto::Request::QueryNodes(Default::default())) {
        Ok(flotilla_proto::Response::Nodes(n)) => n,
        other => panic!("{other:?}"),
    };
    let before = match epoch_before {
        Ok(flotilla_proto::Response::Nodes(n)) => n[0].boot_epoch,
        other => panic!("{other:?}"),
    };
    assert_eq!(nodes[0].boot_epoch, before + 1, "the reboot bumps the epoch; a plain restart does not");
    // The requeued job runs again (run 1); cancel it and check nothing of it survives.
    c.wait_running(id3, 30);
    let r = c.call(0, flotilla_proto::Request::CancelJob(flotilla_proto::CancelJob {
        jobs: vec![flotilla_proto::JobRef::id(id3)],
        ..Default::default()
    }));
    assert!(r.is_ok());
    let j = c.wait_done(id3, 30);
    assert_eq!(j.state, Some(JobStateWire::Cancelled));
    assert!(wait_for(10, || processes_with(marker).is_empty()), "processes survive: {:?}", processes_with(marker));
}

/// A job that ignores SIGTERM, with children in its process group, in another session and
/// daemonized, is SIGKILLed at the deadline with every one of them — every time.
#[test]
fn sigterm_ignored_killed_at_deadline_with_children() {
    // 1 "minute" of time limit = 2 s; KillWait 1 s.
    let mut c = Cluster::start(1, &["--minute-s", "2"]);
    c.start_nodes(2);
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();
    for round in 0..3 {
        let marker = format!("27182{round}.5");
        let script = format!(
            "#!/bin/bash\ntrap '' TERM\n(trap '' TERM; sleep {marker}) &\nsetsid sleep {marker} &\n( setsid sleep {marker} & ) \nnohup sleep {marker} >/dev/null 2>&1 &\necho started\nwhile true; do sleep 0.2; done\n"
        );
        let mut s = job(&script, &work);
        s.time_limit = Some(flotilla_proto::TimeLimitWire::Minutes(1));
        let id = c.submit(s);
        c.wait_running(id, 30);
        assert!(wait_for(10, || processes_with(&marker).len() >= 4), "children did not start: {:?}", processes_with(&marker));
        let j = c.wait_done(id, 30);
        assert_eq!(j.state, Some(JobStateWire::Timeout), "round {round}: {j:?}");
        assert_eq!((j.exit_code, j.exit_signal), (0, 9), "killed by SIGKILL at the deadline: sacct 0:9");
        assert!(processes_with(&marker).is_empty(), "round {round}: processes survive: {:?}", processes_with(&marker));
    }
}

/// A stopped job that acknowledges its checkpoint (touches `$FLOTILLA_CHECKPOINT_ACK`) is
/// killed then, not at the deadline; a job that exits on SIGTERM is reported `0:15`.
#[test]
fn checkpoint_ack_ends_the_wait() {
    // Time limit 2 s; KillWait 60 s: only the acknowledgement can end the job early.
    let mut c = Cluster::start(60, &["--minute-s", "2"]);
    c.start_nodes(1);
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let script = "#!/bin/bash\ntrap 'echo checkpointing; touch \"$FLOTILLA_CHECKPOINT_ACK\"' TERM\nwhile true; do sleep 0.2; done\n";
    let mut s = job(script, &work);
    s.time_limit = Some(flotilla_proto::TimeLimitWire::Minutes(1));
    let id = c.submit(s);
    c.wait_running(id, 30);
    let t0 = std::time::Instant::now();
    let j = c.wait_done(id, 30);
    assert!(t0.elapsed() < std::time::Duration::from_secs(20), "waited for the deadline: {:?}", t0.elapsed());
    assert_eq!((j.state, j.exit_signal), (Some(JobStateWire::Timeout), 9));
    let out = std::fs::read_to_string(work.join(format!("slurm-{id}.out"))).unwrap();
    assert!(out.contains("checkpointing"), "{out}");

    let mut s = job("#!/bin/sh\nsleep 100\n", &work);
    s.time_limit = Some(flotilla_proto::TimeLimitWire::Minutes(1));
    let id = c.submit(s);
    let j = c.wait_done(id, 30);
    assert_eq!((j.state, j.exit_code, j.exit_signal), (Some(JobStateWire::Timeout), 0, 15), "sacct 0:15");
}

/// `--signal=B:USR1@secs`: the node delivers the signal `secs` before the time limit.
#[test]
fn signal_before_time_limit() {
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(1);
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let script = "#!/bin/bash\ntrap 'echo got USR1; exit 0' USR1\nwhile true; do sleep 0.1; done\n";
    let mut s = job(script, &work);
    // 2 minutes, USR1 at 118 s before the end: 1 to 2 s after the start (times are whole
    // seconds: at 119 s a job started late in a second got it within milliseconds, before
    // bash had set its trap, and died of it).
    s.time_limit = Some(flotilla_proto::TimeLimitWire::Minutes(2));
    s.signal = Some(flotilla_proto::SignalSpec { signal: 10, secs_before: 118, batch_only: true });
    let id = c.submit(s);
    let j = c.wait_done(id, 30);
    assert_eq!((j.state, j.exit_code), (Some(JobStateWire::Completed), 0), "{}", c.logs());
    assert_eq!(std::fs::read_to_string(work.join(format!("slurm-{id}.out"))).unwrap(), "got USR1\n");
}

/// A multi-node job's other node reports its part released as soon as it has killed it (a
/// heartbeat at once, as Slurm's slurmd sends epilog-complete at the end of
/// `_rpc_terminate_job`), not at its next heartbeat period. The nodes here beat every 10
/// minutes: without the immediate report the job would stay COMPLETING, and the node
/// allocated, that long, and the 30 s wait fails.
#[test]
fn a_multi_node_jobs_other_node_is_released_at_once() {
    let mut c = Cluster::start(1, &[]);
    c.heartbeat_ms = 600_000;
    c.start_nodes(2);
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut s = job("#!/bin/sh\necho two nodes\n", &work);
    s.nodes_min = Some(2);
    s.nodes_max = Some(2);
    let id = c.submit(s);
    let j = c.wait_done(id, 30);
    assert_eq!((j.state, j.exit_code, j.exit_signal), (Some(JobStateWire::Completed), 0, 0));
    let idle = wait_for(30, || c.nodes().iter().filter(|n| n.state == "IDLE").count() == 2);
    assert!(idle, "both nodes idle after the job: {:?}\n{}", c.nodes(), c.logs());
}
