//! Bad input never crashes the daemon: random bytes, random frames and random requests each
//! get an error reply (or a closed connection for broken framing) and the daemon keeps
//! serving others.

mod common;

use common::*;
use flotilla_proto::client::Client;
use flotilla_proto::*;
use proptest::prelude::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn alive(env: &Env, ctl: &Ctl) {
    let r = call(env, ctl.addr, 0, Request::Ping);
    assert_eq!(r, Ok(Response::Pong), "daemon stopped serving");
}

fn arb_submit() -> impl Strategy<Value = SubmitJob> {
    (
        (proptest::option::of(".{0,20}"), ".{0,64}", proptest::option::of("[a-z]{0,8}"), proptest::option::of(0u32..10)),
        (proptest::option::of(any::<u32>()), proptest::option::of(any::<u32>()), proptest::option::of(any::<u64>())),
        (proptest::collection::vec(("[a-z]{0,5}", proptest::option::of("[a-z0-9]{0,5}"), any::<u64>()), 0..3), proptest::option::of(any::<u32>())),
        (proptest::option::of(prop_oneof![Just(TimeLimitWire::Unlimited), any::<u32>().prop_map(TimeLimitWire::Minutes)]),
         proptest::option::of((proptest::collection::vec((any::<u32>(), any::<u32>(), any::<u32>()), 0..3), proptest::option::of(any::<u32>())))),
        (proptest::option::of(".{0,30}"), any::<bool>(), proptest::option::of(any::<i64>()), proptest::option::of(any::<i32>()), proptest::option::of("[a-z]{0,6}"), any::<bool>()),
    )
        .prop_map(|((name, script, part, nodes), (ntasks, cpt, mem), (gres, gpus), (time, array), (dep, hold, begin, nice, topo, test_only))| SubmitJob {
            name,
            script,
            partition: part,
            nodes_min: nodes,
            ntasks,
            cpus_per_task: cpt,
            mem_per_node_mib: mem,
            gres: gres.into_iter().map(|(n, t, c)| GresSpec { name: n, gpu_type: t, count: c }).collect(),
            gpus: gpus.map(|c| GpuCount { gpu_type: None, count: c }),
            time_limit: time,
            array: array.map(|(r, m)| ArraySpec { ranges: r.into_iter().map(|(s, e, st)| ArrayRange { start: s, end: e, step: st }).collect(), max_running: m }),
            dependency: dep,
            hold,
            begin,
            nice,
            topology: topo,
            test_only,
            uid: 2001,
            gid: 2001,
            user: "alice".into(),
            ..SubmitJob::default()
        })
}

#[test]
fn random_bytes_and_requests_get_errors_and_the_daemon_survives() {
    let env = Env::new(2);
    let ctl = Ctl::start(&env, 0, &["--max-frame", "65536"]);
    let runner = || proptest::test_runner::TestRunner::new(ProptestConfig { cases: 150, ..ProptestConfig::default() });

    // Raw bytes, before and after a valid handshake.
    runner()
        .run(&(proptest::collection::vec(any::<u8>(), 0..300), any::<bool>()), |(bytes, handshake)| {
            let mut s = TcpStream::connect(ctl.addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            if handshake {
                s.write_all(&encode_frame(&Frame::Hello(Hello::current(Role::Command))).unwrap()).unwrap();
                let _ = read_frame(&mut s, DEFAULT_MAX_FRAME);
            }
            let _ = s.write_all(&bytes);
            let _ = s.shutdown(std::net::Shutdown::Write);
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
            Ok(())
        })
        .unwrap();
    alive(&env, &ctl);

    // An oversized frame is refused before its body is read.
    let mut c = Client::connect_tcp(ctl.addr, Role::Command).unwrap();
    c.stream().write_all(&(1u32 << 30).to_be_bytes()).unwrap();
    match c.recv() {
        Ok(Frame::Response { body: Response::Error(e), .. }) => assert_eq!(e.code, errno::SLURM_PROTOCOL_INSANE_MSG_LENGTH),
        other => panic!("{other:?}"),
    }
    // A peer outside the version range is refused.
    let mut s = TcpStream::connect(ctl.addr).unwrap();
    write_frame(&mut s, &Frame::Hello(Hello { min_version: 99, max_version: 100, role: Role::Command })).unwrap();
    assert!(matches!(read_frame(&mut s, DEFAULT_MAX_FRAME), Ok(Frame::Refused(e)) if e.code == errno::SLURM_PROTOCOL_VERSION_ERROR));

    // Random (valid-frame) submissions: each gets an answer.
    let client = std::cell::RefCell::new(Client::connect_tcp(ctl.addr, Role::Command).unwrap());
    runner()
        .run(&arb_submit(), |j| {
            match client.borrow_mut().call(Some(env.cred(2001)), Request::SubmitJob(Box::new(j))) {
                Ok(Response::Submitted(_) | Response::TestOnly(_) | Response::Error(_)) => Ok(()),
                other => Err(TestCaseError::fail(format!("{other:?}"))),
            }
        })
        .unwrap();
    // Random updates and cancels of those jobs.
    runner()
        .run(&(1u64..200, any::<u32>(), ".{0,20}", any::<i32>()), |(id, t, s, n)| {
            let changes = vec![JobChange::TimeLimit(TimeLimitWire::Minutes(t)), JobChange::Dependency(s.clone()), JobChange::Nice(n), JobChange::Partition(s)];
            let r = client.borrow_mut().call(Some(env.cred(2001)), Request::UpdateJob(UpdateJob { job: JobRef { job_id: id, tasks: Some(vec![t % 7]) }, changes })).unwrap();
            prop_assert!(matches!(r, Response::Error(_) | Response::JobResults(_)));
            Ok(())
        })
        .unwrap();
    alive(&env, &ctl);
    let Ok(Response::Stats(st)) = call(&env, ctl.addr, 0, Request::Stats) else { panic!() };
    assert!(st.rpc_counts.iter().any(|(k, n)| k == "REQUEST_SUBMIT_BATCH_JOB" && *n >= 150), "{st:?}");
}
