//! Property tests: invariants 1, 2, 3, 5, 6, 8 and 9 of DESIGN.md §4 hold after every cycle
//! of the scheduling core, for random clusters and random workloads (submissions, ends,
//! cancellations, drains, failures and reboots), under every queue discipline and placement
//! policy.

mod support;

use flotilla_core::cluster::{Cluster, NodeAvail, NodeId, NodeSpec, MILLI};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{JobId, JobSpec, Request};
use flotilla_core::sched::{Decision, Event, QueueMode, SchedConfig, Scheduler};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Submit { gpus: u32, topo: u8, limit_min: u64, cpus: u32, gpn: Option<u32>, exclusive: bool, share: Option<u32> },
    End(usize),
    Cancel(usize),
    Requeue(usize),
    Drain(usize),
    Resume(usize),
    Down(usize),
    Reboot(usize),
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (prop::sample::select(vec![0u32, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32]), 0u8..3, 1u64..600, 1u32..8,
              prop::option::weighted(0.15, 1u32..5), prop::bool::weighted(0.05), prop::option::weighted(0.1, 100u32..1000))
            .prop_map(|(gpus, topo, limit_min, cpus, gpn, exclusive, share)| Op::Submit { gpus, topo, limit_min, cpus, gpn, exclusive, share }),
        3 => any::<usize>().prop_map(Op::End),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => any::<usize>().prop_map(Op::Requeue),
        1 => any::<usize>().prop_map(Op::Drain),
        1 => any::<usize>().prop_map(Op::Resume),
        1 => any::<usize>().prop_map(Op::Down),
        1 => any::<usize>().prop_map(Op::Reboot),
        3 => (1u64..4000).prop_map(Op::Tick),
    ]
}

fn cluster() -> impl Strategy<Value = Cluster> {
    (1usize..10, prop::sample::select(vec![4u32, 8]), 1usize..4).prop_map(|(nodes, gpus, per_pod)| {
        let specs: Vec<NodeSpec> = (0..nodes)
            .map(|i| NodeSpec {
                name: format!("n{i}"),
                gpus: if i % 5 == 4 { 0 } else { gpus },
                gpu_type: Some("h100".into()),
                cpu_milli: 32_000,
                mem_mib: 256_000,
                pod: format!("p{}", i / per_pod),
            })
            .collect();
        let mut c = Cluster::from_specs(&specs);
        c.add_partition("batch", (0..nodes as u32).map(NodeId).collect(), true);
        c
    })
}

/// The property test's driver: the scheduler and the transcript of every decision it made.
struct Driver {
    s: Scheduler,
    log: String,
}

impl Driver {
    /// The one path for decisions: each is logged (the determinism property compares the
    /// logs), and a backfill preemption is carried out at once (the job is requeued; that
    /// event's decisions come back here too).
    fn apply(&mut self, d: Vec<Decision>, now: u64) {
        self.log.push_str(&format!("{d:?}\n"));
        for dec in d {
            if let Decision::PreemptBackfill { job, .. } = dec {
                self.event(Event::Requeued(job), now);
            }
        }
    }
    fn event(&mut self, e: Event, now: u64) {
        let d = self.s.handle(e, now);
        self.apply(d, now);
    }
}

fn run(c: Cluster, queue: QueueMode, policy: &str, ops: &[Op]) -> Result<String, TestCaseError> {
    let s = Scheduler::new(
        c,
        flotilla_plugins::placement(policy).unwrap(),
        flotilla_plugins::priority("priority/multifactor").unwrap(),
        SchedConfig { queue, max_reservations: 4, ..SchedConfig::default() },
    );
    let mut drv = Driver { s, log: String::new() };
    let n = drv.s.cluster().nodes.len();
    for i in 0..n {
        drv.event(Event::NodeRegistered { node: NodeId(i as u32), boot_epoch: 1 }, 0);
    }
    let mut now = 0u64;
    let mut next_id = 1u64;
    let mut epochs = vec![1u64; n];
    for op in ops {
        match op {
            Op::Submit { gpus, topo, limit_min, cpus, gpn, exclusive, share } => {
                let topology = [TopologyKind::Node, TopologyKind::Pod, TopologyKind::Any][*topo as usize];
                let mut req = Request { gpus: *gpus, topology, cpu_milli_per_node: u64::from(*cpus) * 1000, exclusive: *exclusive, ..Request::default() };
                if let Some(g) = gpn {
                    req.gpus_per_node = Some(*g);
                    req.gpus = g * 2;
                    req.nodes = Some(2);
                } else if let Some(m) = share {
                    req.gpus = 1;
                    req.gpu_milli = *m;
                } else if topology == TopologyKind::Node && *gpus > 8 && gpus % 8 != 0 {
                    req.gpus = 8;
                }
                let spec = JobSpec::simple(next_id, now, req, Some(limit_min * 60));
                next_id += 1;
                drv.event(Event::Submit(spec), now);
            }
            Op::End(k) | Op::Cancel(k) | Op::Requeue(k) => {
                let running: Vec<JobId> = drv.s.running().keys().copied().collect();
                if running.is_empty() {
                    continue;
                }
                let id = running[k % running.len()];
                let e = match op {
                    Op::End(_) => Event::JobEnded(id),
                    Op::Cancel(_) => Event::Cancel(id),
                    _ => Event::Requeued(id),
                };
                drv.event(e, now);
            }
            Op::Drain(k) => {
                drv.event(Event::NodeAvail { node: NodeId((k % n) as u32), avail: NodeAvail::Drain { reason: "t".into() } }, now);
            }
            Op::Resume(k) => {
                drv.event(Event::NodeAvail { node: NodeId((k % n) as u32), avail: NodeAvail::Up }, now);
            }
            Op::Down(k) => {
                let node = NodeId((k % n) as u32);
                drv.event(Event::NodeAvail { node, avail: NodeAvail::Down { reason: "t".into() } }, now);
                prop_assert!(drv.s.allocations().all(|a| a.part.node != node), "a down node keeps allocations");
            }
            Op::Reboot(k) => {
                let node = (k % n) as u32;
                epochs[node as usize] += 1;
                drv.event(Event::NodeRegistered { node: NodeId(node), boot_epoch: epochs[node as usize] }, now);
                // Invariant 8: a node reporting a new boot epoch has no allocations.
                prop_assert!(drv.s.allocations().all(|a| a.part.node != NodeId(node)), "invariant 8");
                prop_assert!(drv.s.cluster().node(NodeId(node)).gpu_milli_used.iter().all(|&m| m == 0));
            }
            Op::Tick(dt) => {
                now += dt;
                // Jobs past their limit end (the controller's time-limit enforcement).
                let expired: Vec<JobId> = drv.s.running().iter().filter(|(_, r)| r.end.is_some_and(|e| e <= now)).map(|(id, _)| *id).collect();
                for id in expired {
                    drv.event(Event::JobEnded(id), now);
                }
            }
        }
        let d = drv.s.cycle(now);
        drv.apply(d, now);
        let s = &drv.s;
        if let Err(e) = s.check_invariants() {
            return Err(TestCaseError::fail(format!(
                "after {op:?} at t={now}: {e}\nlog:\n{}\nreservations: {:?}\nrunning: {:?}",
                drv.log,
                s.reservations(),
                s.running().values().map(|r| (r.spec.id, r.start, r.end, &r.backfill_for, r.allocs.iter().map(|a| (a.part.node, a.part.gpus)).collect::<Vec<_>>())).collect::<Vec<_>>()
            )));
        }
        for a in s.allocations() {
            prop_assert!(a.part.gpu_milli <= MILLI);
        }
    }
    Ok(drv.log)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).map_or(256, |n: u32| n.min(2000))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn invariants_hold_after_every_cycle(
        c in cluster(),
        ops in prop::collection::vec(op(), 1..60),
        queue in prop::sample::select(vec![QueueMode::HeldReservations, QueueMode::EasyBackfill, QueueMode::StrictFifo]),
        policy in prop::sample::select(flotilla_plugins::PLACEMENT_POLICIES.to_vec()),
    ) {
        run(c, queue, policy, &ops)?;
    }

    /// Invariant 9: the same inputs give the same decisions, bit for bit.
    #[test]
    fn core_is_deterministic(c in cluster(), ops in prop::collection::vec(op(), 1..40)) {
        let a = run(c.clone(), QueueMode::HeldReservations, "topo-bestfit", &ops)?;
        let b = run(c, QueueMode::HeldReservations, "topo-bestfit", &ops)?;
        prop_assert_eq!(a, b);
    }
}
