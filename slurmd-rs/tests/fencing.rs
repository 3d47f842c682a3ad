//! Fencing on the data plane: a real `slurmd` remembers the highest controller lease epoch it
//! has seen (in its spool, across restarts) and refuses every message of a lower one — a
//! launch, a kill, an acknowledgement — from a paused or cut-off old leader. The test plays
//! the controllers itself on one socket (the frames a controller sends, each with the epoch
//! the test chooses), so that old and new leaders can be interleaved at will; the node daemon
//! and the jobs are real (cgroups on as root with `FLOTILLA_TEST_ROOT=1`). And a node with
//! two `SlurmctldHost=` lines registers with the one that leads, past a standby, and follows a
//! failover with its running job.

mod common;

use common::*;
use flotilla_proto::{
    negotiate, read_frame, write_frame, Bind, CtlToNode, Frame, NodeJob, NodeToCtl, Register, Request, Response,
    DEFAULT_MAX_FRAME,
};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Accepts the node daemon's session: its hello, its registration (answered `Registered`).
fn accept_session(l: &TcpListener) -> (TcpStream, Register) {
    let (mut s, _) = l.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let Frame::Hello(h) = read_frame(&mut s, DEFAULT_MAX_FRAME).unwrap() else { panic!("no hello") };
    write_frame(&mut s, &Frame::HelloOk { version: negotiate(&h).unwrap() }).unwrap();
    match read_frame(&mut s, DEFAULT_MAX_FRAME).unwrap() {
        Frame::Request { id, body: Request::Register(reg), .. } => {
            write_frame(&mut s, &Frame::Response { id, body: Response::Registered }).unwrap();
            (s, reg)
        }
        other => panic!("expected a registration, got {other:?}"),
    }
}

/// The command line of job `id`'s process (unique to this test run).
fn marker(id: u64) -> String {
    format!("sleep 30{id}.{}", std::process::id())
}

/// A batch job of `gpu_mask` that sleeps ([`marker`] finds its process).
fn bind(c: &Cluster, job_id: u64, gpu_mask: u64) -> Bind {
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();
    Bind {
        job_id,
        run: 0,
        array: None,
        name: "fenced".into(),
        gpu_mask,
        cpus: 1,
        mem_mib: 1024,
        batch_host: true,
        nodes: "gpu01".into(),
        uid: 0,
        gid: 0,
        user: "root".into(),
        script: format!("#!/bin/sh\nexec {}\n", marker(job_id)),
        argv: Vec::new(),
        environment: vec![("PATH".into(), "/usr/bin:/bin".into())],
        work_dir: work.display().to_string(),
        stdout: None,
        stderr: None,
        time_limit_s: None,
        partition: "batch".into(),
    }
}

fn fenced(epoch: u64, msg: CtlToNode) -> Frame {
    Frame::ToNodeFenced { epoch, msg }
}

/// Reads the node's frames until a heartbeat whose running jobs satisfy `f`; returns them.
fn heartbeat_until(s: &mut TcpStream, f: impl Fn(&[NodeJob]) -> bool) -> Vec<u64> {
    let t0 = Instant::now();
    loop {
        assert!(t0.elapsed() < Duration::from_secs(30), "no heartbeat as awaited");
        if let Frame::FromNode(NodeToCtl::Heartbeat { running, .. }) = read_frame(s, DEFAULT_MAX_FRAME).unwrap() {
            if f(&running) {
                let mut ids: Vec<u64> = running.iter().map(|j| j.job_id).collect();
                ids.sort_unstable();
                return ids;
            }
        }
    }
}

fn runs(running: &[NodeJob], id: u64) -> bool {
    running.iter().any(|j| j.job_id == id)
}

#[test]
fn a_node_refuses_every_message_of_an_older_controller_epoch_across_restarts() {
    let mut c = Cluster::configure(1, "");
    let ctl = TcpListener::bind("127.0.0.1:0").unwrap();
    c.addr = ctl.local_addr().unwrap();
    c.start_node(1);
    let (mut s, reg) = accept_session(&ctl);
    assert!(reg.running.is_empty());
    let log = "slurmd-gpu01.log";

    // The leader of epoch 3 launches job 7.
    write_frame(&mut s, &fenced(3, CtlToNode::Bind(Box::new(bind(&c, 7, 0b1))))).unwrap();
    heartbeat_until(&mut s, |r| runs(r, 7));
    // The old leader of epoch 2 (resumed after a pause) launches job 8 and kills job 7; a
    // controller without an epoch kills job 7 too. Then the leader of epoch 3 launches job 9:
    // the first heartbeat that shows it was sent after all four were handled, in order.
    write_frame(&mut s, &fenced(2, CtlToNode::Bind(Box::new(bind(&c, 8, 0b10))))).unwrap();
    write_frame(&mut s, &fenced(2, CtlToNode::Kill { job_id: 7 })).unwrap();
    write_frame(&mut s, &Frame::ToNode(CtlToNode::Kill { job_id: 7 })).unwrap();
    write_frame(&mut s, &fenced(3, CtlToNode::Bind(Box::new(bind(&c, 9, 0b100))))).unwrap();
    let running = heartbeat_until(&mut s, |r| runs(r, 9));
    assert_eq!(running, vec![7, 9], "job 8 never launched, job 7 never killed");
    assert_eq!(c.log_lines(log, "refused a message from controller epoch"), 3, "{}", c.logs());
    assert_eq!(c.log_lines(log, "kill of job 7 (3 refused since start)"), 1, "the third refusal counted: {}", c.logs());
    assert!(processes_with(&marker(8)).is_empty(), "job 8 has no process");
    assert_eq!(processes_with(&marker(7)).len(), 1, "job 7's process lives");
    assert_eq!(std::fs::read_to_string(c.path("spool/gpu01/ctld_epoch")).unwrap(), "3\n");

    // A plain restart of the daemon (same boot): it re-adopts 7 and 9 and still refuses
    // epoch 2 — the epoch was kept in its spool.
    drop(s);
    c.kill_node(1);
    c.start_node(1);
    let (mut s, reg) = accept_session(&ctl);
    let mut adopted: Vec<u64> = reg.running.iter().map(|j| j.job_id).collect();
    adopted.sort_unstable();
    assert_eq!(adopted, vec![7, 9], "job 7 lived through the refused kills");
    write_frame(&mut s, &fenced(2, CtlToNode::Kill { job_id: 7 })).unwrap();
    // A new leader (epoch 4) kills job 9: acted on, and the epoch rises.
    write_frame(&mut s, &fenced(4, CtlToNode::Kill { job_id: 9 })).unwrap();
    let running = heartbeat_until(&mut s, |r| !runs(r, 9));
    assert_eq!(running, vec![7], "job 7 survived the old leader's kill");
    assert_eq!(c.log_lines(log, "refused a message from controller epoch 2"), 3, "{}", c.logs());
    assert_eq!(std::fs::read_to_string(c.path("spool/gpu01/ctld_epoch")).unwrap(), "4\n");
    // Now epoch 3 is old as well: its kill is refused, and two heartbeats later (0.4 s) job
    // 7 still runs.
    write_frame(&mut s, &fenced(3, CtlToNode::Kill { job_id: 7 })).unwrap();
    assert!(
        wait_for(30, || c.log_lines(log, "refused a message from controller epoch 3") == 1),
        "epoch 3 refused after epoch 4: {}",
        c.logs()
    );
    for _ in 0..2 {
        assert_eq!(heartbeat_until(&mut s, |_| true), vec![7]);
    }
    assert_eq!(processes_with(&marker(7)).len(), 1, "job 7's process lives");
    // The leader's kill ends it.
    write_frame(&mut s, &fenced(4, CtlToNode::Kill { job_id: 7 })).unwrap();
    assert_eq!(heartbeat_until(&mut s, |r| r.is_empty()), Vec::<u64>::new());
}

/// A node daemon with two `SlurmctldHost=` lines registers with the controller that leads: the
/// first answers its registration as a standby (Slurm's `ESLURM_IN_STANDBY_MODE`), so it goes
/// on to the second; when that one goes away (a failover), it comes back to the first, now
/// leading, with its running job.
#[test]
fn a_node_registers_with_the_controller_that_leads() {
    let first = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = first.local_addr().unwrap().port();
    let second = TcpListener::bind(("127.0.0.5", port)).unwrap();
    let mut c = Cluster::configure(1, &format!("SlurmctldHost=backup(127.0.0.5)\nSlurmctldPort={port}\n"));
    c.addr = first.local_addr().unwrap();
    c.start_node(1);
    // The first controller is a standby.
    {
        let (mut s, _) = first.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let Frame::Hello(h) = read_frame(&mut s, DEFAULT_MAX_FRAME).unwrap() else { panic!("no hello") };
        write_frame(&mut s, &Frame::HelloOk { version: negotiate(&h).unwrap() }).unwrap();
        let Frame::Request { id, body: Request::Register(_), .. } = read_frame(&mut s, DEFAULT_MAX_FRAME).unwrap() else {
            panic!("no registration")
        };
        let standby = flotilla_proto::SlurmError::new(flotilla_proto::errno::ESLURM_IN_STANDBY_MODE);
        write_frame(&mut s, &Frame::Response { id, body: Response::Error(standby) }).unwrap();
    }
    // It registers with the second, which launches a job.
    let (mut s, reg) = accept_session(&second);
    assert!(reg.running.is_empty());
    write_frame(&mut s, &fenced(1, CtlToNode::Bind(Box::new(bind(&c, 7, 0b1))))).unwrap();
    heartbeat_until(&mut s, |r| runs(r, 7));
    // The second goes away; the first now leads: the node registers there with its job.
    drop(s);
    drop(second);
    let (mut s, reg) = accept_session(&first);
    assert_eq!(reg.running.iter().map(|j| j.job_id).collect::<Vec<_>>(), vec![7], "{}", c.logs());
    assert_eq!(c.log_lines("slurmd-gpu01.log", "the controller is a standby"), 1, "{}", c.logs());
    write_frame(&mut s, &fenced(2, CtlToNode::Kill { job_id: 7 })).unwrap();
    assert_eq!(heartbeat_until(&mut s, |r| r.is_empty()), Vec::<u64>::new());
}
