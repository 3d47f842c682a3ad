//! Property tests for elastic jobs, on random workloads of rigid and elastic jobs, services
//! scaling, quotas, node failures, `scontrol update NumNodes=` and time passing, checked
//! after every event and cycle:
//!
//! - an elastic job never runs below MIN or above MAX and never spans outside its topology
//!   set (`Scheduler::check_invariants`, with every other invariant);
//! - its grown part is reclaimed before any whole-job preemption and before any guaranteed
//!   allocation is touched: when a cycle preempts a whole job for F, F could not have started
//!   by shrinking alone;
//! - no held reservation's fill time moves later because of growth: growth never takes a
//!   GPU a reservation holds, and a reservation planned over grown GPUs counts them as free
//!   (its fill is no later than the ends of the rigid work in its way);
//! - shrinks only ever take grown allocations, in whole steps, never below MIN;
//! - what operators see as reclaimable (`Scheduler::reclaimable_in`, `sinfo --largest`, the
//!   metrics) is the grown GPUs the scheduler may still take back, and the largest placeable
//!   requests with them taken back are at least today's (equal when nothing is grown).

use flotilla_core::cluster::{Cluster, NodeAvail, NodeId, PartId};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{Elastic, ElasticUnit, JobId, JobSpec, Request};
use flotilla_core::quota::parse_quota_conf;
use flotilla_core::sched::{
    AllocId, Decision, Event, SchedConfig, Scheduler, ServiceId, ServiceSpec,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

const QUOTA: &str =
    "Account=a GuaranteedGPUs=16 MaxGPUs=56\nAccount=b GuaranteedGPUs=8\nAccount=inference\n";
const ACCOUNTS: [&str; 3] = ["a", "b", "nobody"];

#[derive(Debug, Clone)]
enum Op {
    Rigid {
        account: usize,
        gpus: u32,
        preemptible: bool,
    },
    /// Node-granular: min..max nodes of 8 GPUs, step; or GPU-granular.
    Elastic {
        account: usize,
        gpu_granular: bool,
        min: u32,
        extra: u32,
        step: u32,
        topo: u8,
    },
    Service {
        id: u32,
        desired: u32,
    },
    End(usize),
    Fail(usize),
    Resume(usize),
    Resize(usize, u32),
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..3, prop::sample::select(vec![4u32, 8, 16]), prop::bool::weighted(0.7))
            .prop_map(|(account, gpus, preemptible)| Op::Rigid { account, gpus, preemptible }),
        5 => (0usize..3, prop::bool::weighted(0.3), 1u32..3, 0u32..4, 1u32..3, 0u8..3)
            .prop_map(|(account, gpu_granular, min, extra, step, topo)| Op::Elastic { account, gpu_granular, min, extra, step, topo }),
        2 => (0u32..2, 0u32..5).prop_map(|(id, desired)| Op::Service { id, desired }),
        2 => any::<usize>().prop_map(Op::End),
        1 => any::<usize>().prop_map(Op::Fail),
        1 => any::<usize>().prop_map(Op::Resume),
        1 => (any::<usize>(), 1u32..4).prop_map(|(k, n)| Op::Resize(k, n)),
        4 => (1u64..900).prop_map(Op::Tick),
    ]
}

/// The test's driver: shrinks and preemptions are carried out 5 s after they are decided;
/// replica stops at once.
struct Driver {
    s: Scheduler,
    shrinking: BTreeMap<(JobId, Vec<AllocId>), u64>,
    exiting: BTreeMap<JobId, u64>,
}

impl Driver {
    fn apply(&mut self, d: &[Decision], now: u64) -> Result<(), TestCaseError> {
        for x in d {
            match x {
                Decision::Shrink { job, allocs, .. } => {
                    // Only grown allocations, and never below MIN.
                    let r = &self.s.running()[job];
                    for a in allocs {
                        prop_assert!(
                            r.is_grown(*a),
                            "job {job}: shrink of a base allocation {a:?}"
                        );
                    }
                    self.shrinking.insert((*job, allocs.clone()), now + 5);
                }
                Decision::Preempt { job, .. } => {
                    self.exiting.insert(*job, now + 5);
                }
                Decision::StopReplica { replica, .. } => {
                    let d = self.s.handle(Event::JobEnded(*replica), now);
                    self.apply(&d, now)?;
                }
                Decision::Relocate { from, .. } => {
                    let d = self.s.handle(Event::JobEnded(*from), now);
                    self.apply(&d, now)?;
                }
                _ => {}
            }
        }
        Ok(())
    }
    fn event(&mut self, e: Event, now: u64) -> Result<Vec<Decision>, TestCaseError> {
        let d = self.s.handle(e, now);
        self.apply(&d, now)?;
        if let Err(e) = self.s.check_invariants() {
            return Err(TestCaseError::fail(e));
        }
        Ok(d)
    }
}

fn topology(t: u8) -> TopologyKind {
    [TopologyKind::Node, TopologyKind::Pod, TopologyKind::Any][t as usize % 3]
}

fn elastic_spec(
    id: u64,
    now: u64,
    gpu_granular: bool,
    min: u32,
    extra: u32,
    step: u32,
    topo: u8,
) -> JobSpec {
    let topo = topology(topo);
    let (req, e) = if gpu_granular {
        // 2..24 GPUs style (a `node` one, which admission refuses, never grows).
        let min = min * 2;
        let max = (min + extra * 2).min(if topo == TopologyKind::Node { 8 } else { 24 });
        (
            Request::gpus(min, topo),
            Elastic {
                unit: ElasticUnit::Gpus,
                min,
                max: max.max(min),
                step: step * 2,
            },
        )
    } else {
        let req = Request {
            gpus: min * 8,
            nodes: Some(min),
            gpus_per_node: Some(8),
            ..Request::gpus(0, topo)
        };
        (
            req,
            Elastic {
                unit: ElasticUnit::Nodes,
                min,
                max: min + extra,
                step,
            },
        )
    };
    let mut j = JobSpec::simple(id, now, req, Some(4 * 3600));
    j.elastic = Some(e);
    j.preemptible = true;
    j.checkpoint_bytes = 100_000_000_000;
    j
}

fn run(nodes: u32, per_pod: u32, ops: &[Op], quotas: bool) -> Result<(), TestCaseError> {
    let config = SchedConfig {
        elastic_grow_interval_s: 60,
        ..SchedConfig::default()
    };
    let mut s = Scheduler::new(
        Cluster::uniform(nodes, 8, per_pod, 64, 512_000),
        flotilla_plugins::placement("topo-bestfit").unwrap(),
        flotilla_plugins::priority("priority/multifactor").unwrap(),
        config,
    );
    if quotas {
        s.set_quotas(parse_quota_conf(QUOTA, "q").unwrap());
    }
    let mut drv = Driver {
        s,
        shrinking: BTreeMap::new(),
        exiting: BTreeMap::new(),
    };
    let mut now = 0u64;
    let mut next = 1u64;
    let mut services: BTreeMap<u32, ServiceSpec> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Rigid {
                account,
                gpus,
                preemptible,
            } => {
                let topo = if *gpus <= 8 {
                    TopologyKind::Node
                } else {
                    TopologyKind::Any
                };
                let mut j = JobSpec::simple(next, now, Request::gpus(*gpus, topo), Some(3 * 3600));
                j.account = ACCOUNTS[*account].into();
                j.preemptible = *preemptible;
                next += 1;
                drv.event(Event::Submit(j), now)?;
            }
            Op::Elastic {
                account,
                gpu_granular,
                min,
                extra,
                step,
                topo,
            } => {
                let mut j = elastic_spec(next, now, *gpu_granular, *min, *extra, *step, *topo);
                j.account = ACCOUNTS[*account].into();
                next += 1;
                drv.event(Event::Submit(j), now)?;
            }
            Op::Service { id, desired } => {
                let spec = services.entry(*id).or_insert_with(|| ServiceSpec {
                    id: ServiceId(*id),
                    name: format!("svc{id}"),
                    partition: PartId(0),
                    account: "inference".into(),
                    user: "svc".into(),
                    replica: Request::gpus(8, TopologyKind::Node),
                    min_replicas: 0,
                    max_replicas: 6,
                    desired_replicas: *desired,
                    priority: 10,
                });
                spec.desired_replicas = *desired;
                let spec = spec.clone();
                drv.event(Event::ServiceUpsert(spec), now)?;
            }
            Op::End(k) => {
                let ids: Vec<JobId> = drv.s.running().keys().copied().collect();
                if let Some(id) = (!ids.is_empty()).then(|| ids[k % ids.len()]) {
                    drv.exiting.remove(&id);
                    drv.shrinking.retain(|(j, _), _| *j != id);
                    drv.event(Event::JobEnded(id), now)?;
                }
            }
            Op::Fail(k) => {
                let node = NodeId((k % nodes as usize) as u32);
                let d = drv.event(
                    Event::NodeAvail {
                        node,
                        avail: NodeAvail::Down {
                            reason: "test".into(),
                        },
                    },
                    now,
                )?;
                // The lost allocations are no longer waited for.
                for x in &d {
                    if let Decision::MembersLost { job, allocs, .. } = x {
                        let gone: Vec<AllocId> = allocs.iter().map(|a| a.id).collect();
                        let keys: Vec<_> = drv
                            .shrinking
                            .keys()
                            .filter(|(j, _)| j == job)
                            .cloned()
                            .collect();
                        for key in keys {
                            let t = drv.shrinking.remove(&key).unwrap();
                            let left: Vec<AllocId> = key
                                .1
                                .iter()
                                .copied()
                                .filter(|a| !gone.contains(a))
                                .collect();
                            if !left.is_empty() {
                                drv.shrinking.insert((*job, left), t);
                            }
                        }
                    }
                    if let Decision::Requeue { job, .. } = x {
                        drv.shrinking.retain(|(j, _), _| j != job);
                        drv.exiting.remove(job);
                    }
                }
            }
            Op::Resume(k) => {
                let node = NodeId((k % nodes as usize) as u32);
                drv.event(
                    Event::NodeAvail {
                        node,
                        avail: NodeAvail::Up,
                    },
                    now,
                )?;
            }
            Op::Resize(k, n) => {
                let ids: Vec<JobId> = drv
                    .s
                    .running()
                    .iter()
                    .filter(|(_, r)| r.service().is_none())
                    .map(|(id, _)| *id)
                    .collect();
                if let Some(id) = (!ids.is_empty()).then(|| ids[k % ids.len()]) {
                    let unit = drv.s.running()[&id].spec.elastic.map(|e| e.unit);
                    let size = if unit == Some(ElasticUnit::Gpus) {
                        n * 2
                    } else {
                        *n
                    };
                    drv.event(Event::Resize { job: id, size }, now)?;
                }
            }
            Op::Tick(dt) => now += dt,
        }
        // Leaving members and victims exit when due.
        let due: Vec<(JobId, Vec<AllocId>)> = drv
            .shrinking
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            drv.shrinking.remove(&k);
            drv.event(
                Event::Shrunk {
                    job: k.0,
                    allocs: k.1,
                },
                now,
            )?;
        }
        let due: Vec<JobId> = drv
            .exiting
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(j, _)| *j)
            .collect();
        for j in due {
            drv.exiting.remove(&j);
            drv.shrinking.retain(|(x, _), _| *x != j);
            drv.event(Event::Requeued(j), now)?;
        }
        let d = drv.s.cycle(now);
        if let Err(e) = drv.s.check_invariants() {
            return Err(TestCaseError::fail(format!("after {op:?}: {e}")));
        }
        // Checked on the model as the cycle left it, before the driver carries anything out.
        check_cycle(&mut drv.s, &d, now)?;
        drv.apply(&d, now)?;
    }
    Ok(())
}

/// The elastic properties of one cycle's decisions `d` at `now` (module doc).
fn check_cycle(s: &mut Scheduler, d: &[Decision], now: u64) -> Result<(), TestCaseError> {
    // Growth never sits on GPUs a reservation holds.
    for x in d {
        if let Decision::Grow { job, allocs } = x {
            for a in allocs {
                for r in s.reservations() {
                    for (n, g) in &r.gpus {
                        prop_assert!(
                            *n != a.part.node || g.intersect(a.part.gpus).is_empty(),
                            "growth of job {job} took GPUs reserved for job {}",
                            r.job
                        );
                    }
                }
            }
        }
    }
    // A reservation planned this cycle over grown GPUs counts them as free now: its fill is
    // no later than the ends of the rigid (non-grown, non-backfill) work on its nodes (the
    // node, not the GPUs: the planner plans a whole node for the rest of a `pod`/`any`
    // request and trims it after).
    for x in d {
        let Decision::Reserve {
            job,
            gpus,
            est_fill,
        } = x
        else {
            continue;
        };
        let Some(r) = s.reservations().iter().find(|r| r.job == *job) else {
            continue;
        };
        if r.gpus != *gpus || r.preempting {
            continue;
        }
        let mut bound = now;
        for (n, _) in gpus {
            for run in s.running().values() {
                for a in run.allocs.iter().filter(|a| a.part.node == *n) {
                    if run.is_grown(a.id) || !run.backfill_for.is_empty() {
                        continue;
                    }
                    bound = bound.max(run.end.unwrap_or(u64::MAX));
                }
            }
        }
        prop_assert!(
            *est_fill <= bound,
            "reservation of job {job} fills at {est_fill}, later than its rigid occupants' {bound}"
        );
    }
    // Reclaimable growth per partition: the grown parts not shrinking of jobs without a
    // preemption pending.
    for p in 0..s.cluster().partitions.len() {
        let part = PartId(p as u32);
        let mut grown = 0u32;
        for run in s.running().values() {
            if run.spec.elastic.is_none() || run.preempt_pending {
                continue;
            }
            for g in run.grown.iter().filter(|g| g.shrinking.is_none()) {
                for a in run.allocs.iter().filter(|a| g.allocs.contains(&a.id)) {
                    if s.cluster().node(a.part.node).partitions.contains(&part) {
                        grown += a.part.gpus.count();
                    }
                }
            }
        }
        let (now_lp, r) = (s.largest_placeable_in(part), s.reclaimable_in(part));
        prop_assert_eq!(r.grown_gpus, grown, "reclaimable GPUs of partition {}", p);
        for (a, b) in [(now_lp.node, r.largest.node), (now_lp.pod, r.largest.pod), (now_lp.any, r.largest.any)] {
            prop_assert!(a <= b, "largest {now_lp} vs reclaimed {} with {grown} grown", r.largest);
        }
        if grown == 0 {
            prop_assert_eq!(now_lp, r.largest);
        }
    }
    // Whole-job preemption only when shrinking alone cannot make room.
    let mut preemptors: Vec<JobId> = d
        .iter()
        .filter_map(|x| {
            if let Decision::Preempt { for_job, .. } = x {
                Some(*for_job)
            } else {
                None
            }
        })
        .collect();
    preemptors.dedup();
    for f in preemptors {
        prop_assert!(
            !s.placeable_by_shrinking(f),
            "job {f} preempted a whole job where shrinking alone made room"
        );
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(256, |n: u32| n.min(1000))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn elastic_rules_and_invariants_hold(
        nodes in 2u32..10,
        per_pod in 2u32..5,
        ops in prop::collection::vec(op(), 1..80),
        quotas in any::<bool>(),
    ) {
        run(nodes, per_pod, &ops, quotas)?;
    }
}
