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
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn alive(env: &Env, ctl: &Ctl) {
    let r = call(env, ctl.addr, 0, Request::Ping);
    assert_eq!(r, Ok(Response::Pong), "daemon stopped serving");
}

fn n32() -> impl Strategy<Value = u32> {
    prop_oneof![9 => 0u32..10, 1 => any::<u32>()]
}

/// An option most jobs leave out.
fn rare<S: Strategy + 'static>(s: S) -> impl Strategy<Value = Option<S::Value>>
where
    S::Value: Clone,
{
    prop_oneof![4 => Just(None), 1 => s.prop_map(Some)]
}

fn gpu_count() -> impl Strategy<Value = Option<GpuCount>> {
    rare(n32().prop_map(|c| GpuCount { gpu_type: None, count: c }))
}

/// Mostly plausible values (so most submissions are accepted and reach the cycle), with
/// garbage and extremes mixed in (so the checks and the arithmetic meet them).
fn n64() -> impl Strategy<Value = u64> {
    prop_oneof![9 => 0u64..100_000, 1 => any::<u64>()]
}

fn arb_submit() -> impl Strategy<Value = SubmitJob> {
    use proptest::option::of;
    let more = (
        (rare(n32()), rare(n32()), rare(n64()), gpu_count(), gpu_count(), gpu_count()),
        (rare(n32().prop_map(TimeLimitWire::Minutes)), rare(any::<i64>()), rare(n32()), any::<bool>()),
        (n32(), n32(), n32(), n32(), n32(), n64()),
        any::<bool>(),
    );
    (
        (of(".{0,20}"), prop_oneof![4 => "#!/bin/sh\n.{0,40}", 1 => ".{0,64}"], of(prop_oneof![3 => "batch", 1 => "[a-z]{0,8}"]), of(0u32..10)),
        (of(n32()), of(n32()), of(n64())),
        (proptest::collection::vec((prop_oneof![3 => "gpu", 1 => "[a-z]{0,5}"], of(prop_oneof![3 => "h100", 1 => "[a-z0-9]{0,5}"]), prop_oneof![9 => 0u64..9, 1 => any::<u64>()]), 0..2), rare(n32())),
        (of(prop_oneof![Just(TimeLimitWire::Unlimited), n32().prop_map(TimeLimitWire::Minutes)]),
         prop_oneof![3 => Just(None), 1 => of((proptest::collection::vec((n32(), n32(), prop_oneof![9 => 1u32..3, 1 => any::<u32>()]), 0..3), of(n32())))]),
        (of(prop_oneof!["afterok:[0-9]{1,3}", "after[a-z]{0,8}:[0-9]{1,3}(:[0-9]{1,3})?", ".{0,30}"]), any::<bool>(), of(any::<i64>()), of(any::<i32>()), of(prop_oneof!["node", "pod", "any", "[a-z]{0,6}"]), any::<bool>()),
        more,
    )
        .prop_map(|((name, script, part, nodes), (ntasks, cpt, mem), (gres, gpus), (time, array), (dep, hold, begin, nice, topo, test_only), more)| {
            let ((nodes_max, ntasks_per_node, mem_per_cpu_mib, gpus_per_node, gpus_per_task, gpus_per_socket), (time_min, deadline, sockets_per_node, exclusive), (tpn, tpc, cps, thr, min_cpus, tmp_disk_mib), tame) = more;
            let j = SubmitJob {
                nodes_max,
                ntasks_per_node,
                mem_per_cpu_mib,
                gpus_per_node,
                gpus_per_task,
                gpus_per_socket,
                time_min,
                deadline,
                sockets_per_node,
                exclusive,
                node_shape: NodeShape { ntasks_per_node: tpn, ntasks_per_core: tpc, cores_per_socket: cps, threads_per_core: thr, min_cpus, tmp_disk_mib, ..NodeShape::default() },
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
            };
            // Half the jobs keep only what most jobs set, so that many are accepted and
            // meet the cycle with their odd counts, limits and times.
            if !tame {
                return j;
            }
            SubmitJob {
                gres: j.gres.into_iter().filter(|g| g.name == "gpu").collect(),
                partition: None,
                dependency: None,
                array: None,
                nodes_max: None,
                gpus: None,
                gpus_per_task: None,
                gpus_per_socket: None,
                sockets_per_node: None,
                topology: None,
                nodes_min: j.nodes_min.map(|n| n % 3),
                node_shape: NodeShape { min_cpus: j.node_shape.min_cpus, ..NodeShape::default() },
                ..j
            }
        })
}

#[test]
fn random_bytes_and_requests_get_errors_and_the_daemon_survives() {
    let env = Env::new(2);
    let ctl = Ctl::start(&env, 0, &["--max-frame", "65536"]);
    // Two fake node daemons, so that accepted jobs are placed, started and ended.
    let (addr, ledger) = (Arc::new(Mutex::new(ctl.addr)), Arc::new(Mutex::new(Ledger::default())));
    let _agents: Vec<Agent> = ["gpu01", "gpu02"].iter().map(|n| Agent::spawn(&env, n, addr.clone(), ledger.clone())).collect();
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
    let accepted = std::cell::Cell::new(0u32);
    runner()
        .run(&arb_submit(), |j| {
            match client.borrow_mut().call(Some(env.cred(2001)), Request::SubmitJob(Box::new(j))) {
                Ok(Response::Submitted(_)) => {
                    accepted.set(accepted.get() + 1);
                    Ok(())
                }
                Ok(Response::TestOnly(_) | Response::Error(_)) => Ok(()),
                other => Err(TestCaseError::fail(format!("{other:?}"))),
            }
        })
        .unwrap();
    eprintln!("fuzz: {} of 150 random submissions accepted", accepted.get());
    assert!(accepted.get() > 0, "no random submission was accepted: the strategy tests only refusals");
    // The cycle meets them (places, starts, plans) before the updates.
    wait_cycles(&env, ctl.addr, 2);
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
    wait_cycles(&env, ctl.addr, 2);
    let l = ledger.lock().unwrap();
    eprintln!("fuzz: {} job runs started on the fake nodes", l.starts.len());
    assert!(l.violations.is_empty(), "{:?}", l.violations);
    drop(l);
    let Ok(Response::Stats(st)) = call(&env, ctl.addr, 0, Request::Stats) else { panic!() };
    assert!(st.rpc_counts.iter().any(|(k, n)| k == "REQUEST_SUBMIT_BATCH_JOB" && *n >= 150), "{st:?}");
}
