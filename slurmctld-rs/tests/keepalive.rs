//! A node session's keepalives (`CtlToNode::Keepalive`) from a real `slurmctld`: one right
//! after the registration, then one only when a keepalive period passed without any other
//! message to the node. A busy node hears none (its messages are its liveness, as slurmd
//! counts them); an idle one hears one a period. The period is slurm.conf's rule
//! (`ClusterConfig::keepalive`): with one `SlurmctldHost` a third of `SlurmdTimeout` (Slurm's
//! node ping cadence), with backups a third of `SlurmctldTimeout` (the lease).

mod common;

use common::{now, Ctl, Env};
use flotilla_proto::client::{Client, ClientError};
use flotilla_proto::{CtlToNode, Frame, JobExit, NodeToCtl, ProtoError, Register, Request, Response, Role};
use std::time::{Duration, Instant};

/// What the node hears, and when.
fn recv(c: &mut Client) -> Option<(Instant, CtlToNode)> {
    match c.recv() {
        Ok(Frame::ToNode(m) | Frame::ToNodeFenced { msg: m, .. }) => Some((Instant::now(), m)),
        Ok(Frame::Response { body: Response::Registered, .. }) => None,
        Ok(other) => panic!("unexpected frame {other:?}"),
        Err(ClientError::Proto(ProtoError::Io(e))) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
            None
        }
        Err(e) => panic!("the node session failed: {e}"),
    }
}

/// One controller: the period is a third of `SlurmdTimeout` (3 s: 1 s); `SlurmctldTimeout`
/// (60 s, a 20 s period if it counted) plays no part. Busy and idle as below.
#[test]
fn one_controller_follows_slurmd_timeout() {
    let env = Env::new(1);
    env.edit_cluster(|c| {
        c.slurmctld_timeout_s = 60;
        c.slurmd_timeout_s = Some(3);
    });
    busy_then_idle(&env, Duration::from_secs(1));
}

/// With a backup controller: the period is a third of the lease, `SlurmctldTimeout` (3 s: 1
/// s), so that nodes leave a leader that lost it quickly; `SlurmdTimeout` (300 s, a 100 s
/// period if it counted) plays no part.
#[test]
fn with_a_backup_the_lease_sets_the_cadence() {
    let env = Env::new(1);
    env.edit_cluster(|c| {
        c.slurmctld_timeout_s = 3;
        c.slurmd_timeout_s = Some(300);
        c.backup_controllers = vec![("b".into(), "127.0.0.1".into())];
    });
    busy_then_idle(&env, Duration::from_secs(1));
}

/// A node registers with a controller of `env` whose keepalive period is `period`: it hears a
/// keepalive right after its registration, none while busy (a message every 50 ms for four
/// periods), then one a period while idle.
fn busy_then_idle(env: &Env, period: Duration) {
    let ctl = Ctl::start(env, 0, &[]);
    let mut c = Client::connect_tcp(ctl.addr, Role::NodeDaemon).unwrap();
    if let flotilla_proto::client::Stream::Tcp(s) = c.stream() {
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    }
    let reg = Register { node: "gpu01".into(), boot_epoch: 1, gpus: 8, cpus: 64, mem_mib: 512_000, running: vec![], finished: vec![] };
    let cred = env.key.sign(0, 0, "gpu01", now(), 300);
    c.send(&Frame::Request { id: 1, auth: Some(cred), body: Request::Register(reg) }).unwrap();

    // The first keepalive comes right after the registration.
    let t0 = Instant::now();
    loop {
        if let Some((_, CtlToNode::Keepalive)) = recv(&mut c) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no keepalive after the registration");
    }

    // Busy: an exit report (of a job the controller does not know) every 50 ms, each
    // acknowledged (`AckExits`), for four periods. A keepalive may come only after a period
    // without a message (the controller slowed down by the load); half a period of slack
    // for frames bunched on the way.
    let (mut acks, mut keepalives, mut last) = (0, 0, Instant::now());
    let busy = Instant::now();
    let mut sent = Instant::now() - period;
    while busy.elapsed() < 4 * period {
        if sent.elapsed() >= Duration::from_millis(50) {
            let exit = JobExit { job_id: 999_999, run: 0, exit_code: 0, signal: 0, oom: false, end_time: now() as i64 };
            c.send(&Frame::FromNode(NodeToCtl::JobExited(exit))).unwrap();
            sent = Instant::now();
        }
        match recv(&mut c) {
            Some((at, CtlToNode::Keepalive)) => {
                keepalives += 1;
                let gap = at - last;
                assert!(gap >= period / 2, "a keepalive {} ms after the last message to a busy node", gap.as_millis());
                last = at;
            }
            Some((at, CtlToNode::AckExits { .. })) => {
                acks += 1;
                last = at;
            }
            Some((_, other)) => panic!("unexpected message {other:?}"),
            None => {}
        }
    }
    assert!(acks >= 20, "the node was busy: {acks} acknowledgements in four periods");
    eprintln!("busy for four periods: {acks} acknowledgements, {keepalives} keepalives");

    // Idle: keepalives again, one a period.
    let idle = Instant::now();
    let mut heard = Vec::new();
    while heard.len() < 3 {
        if let Some((at, CtlToNode::Keepalive)) = recv(&mut c) {
            heard.push(at);
        }
        assert!(idle.elapsed() < 20 * period, "an idle node heard {} keepalives in 20 periods", heard.len());
    }
    let gap = heard[2] - heard[1];
    assert!(gap >= period / 2 && gap <= 4 * period, "idle keepalives {} ms apart", gap.as_millis());
}
