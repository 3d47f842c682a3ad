//! Property tests for preemption with quotas and services: invariant 4 of DESIGN.md (nothing
//! preempts a service replica, a non-preemptible job, or an allocation inside its quota
//! guarantee), LIFO reclaim of borrowed capacity, minimum runtime, the preemption budget
//! (never exceeded except to reach a service's floor), checkpoints that always fit their
//! deadline, and every invariant `Scheduler::check_invariants` checks, after every cycle.

use flotilla_core::cluster::{Cluster, PartId};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{JobId, JobSpec, Request};
use flotilla_core::quota::parse_quota_conf;
use flotilla_core::sched::{Decision, Event, SchedConfig, Scheduler, ServiceId, ServiceSpec};
use proptest::prelude::*;
use std::collections::BTreeMap;

const QUOTA: &str = "Account=a GuaranteedGPUs=16 MaxGPUs=48\nAccount=b GuaranteedGPUs=8\nAccount=inference\n";
const ACCOUNTS: [&str; 3] = ["a", "b", "nobody"];

#[derive(Debug, Clone)]
enum Op {
    Train { account: usize, gpus: u32, preemptible: bool, ckpt_gb: u64 },
    Service { id: u32, gpus: u32, min: u32, desired: u32 },
    End(usize),
    Ack(usize),
    Bandwidth(u64),
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0usize..3, prop::sample::select(vec![4u32, 8, 16]), prop::bool::weighted(0.8), 0u64..3000)
            .prop_map(|(account, gpus, preemptible, ckpt_gb)| Op::Train { account, gpus, preemptible, ckpt_gb }),
        2 => (0u32..2, prop::sample::select(vec![4u32, 8]), 0u32..3, 0u32..6)
            .prop_map(|(id, gpus, min, desired)| Op::Service { id, gpus, min, desired }),
        2 => any::<usize>().prop_map(Op::End),
        1 => any::<usize>().prop_map(Op::Ack),
        1 => prop::sample::select(vec![5_000_000_000u64, 50_000_000_000, 200_000_000_000]).prop_map(Op::Bandwidth),
        3 => (1u64..1200).prop_map(Op::Tick),
    ]
}

struct Checker {
    min_runtime: u64,
    page_pct: u32,
}

/// The property test's driver: the scheduler and the preemptions being carried out.
struct Driver {
    s: Scheduler,
    /// Preemptions being carried out: victim -> when it exits (its checkpoint done, before
    /// the deadline).
    exiting: BTreeMap<JobId, u64>,
}

impl Driver {
    /// The one path for decisions. A preemption's victim exits 5 s later; replica stops and
    /// the old replica of a relocation are carried out at once (the replica ends; that
    /// event's decisions come back here). Returns the decisions for the test to check.
    fn apply(&mut self, d: Vec<Decision>, now: u64) -> Vec<Decision> {
        for x in &d {
            match x {
                Decision::Preempt { job, .. } => {
                    self.exiting.insert(*job, now + 5);
                }
                Decision::StopReplica { replica, .. } => self.event(Event::JobEnded(*replica), now),
                Decision::Relocate { from, .. } => self.event(Event::JobEnded(*from), now),
                _ => {}
            }
        }
        d
    }
    fn event(&mut self, e: Event, now: u64) {
        let d = self.s.handle(e, now);
        self.apply(d, now);
    }
    fn cycle(&mut self, now: u64) -> Vec<Decision> {
        let d = self.s.cycle(now);
        self.apply(d, now)
    }
}

fn run(nodes: u32, ops: &[Op], floors: bool) -> Result<(), TestCaseError> {
    let config = SchedConfig::default();
    let check = Checker { min_runtime: config.min_runtime_s, page_pct: config.budget_page_pct };
    let mut s = Scheduler::new(
        Cluster::uniform(nodes, 8, 4, 64, 512_000),
        flotilla_plugins::placement("topo-bestfit").unwrap(),
        flotilla_plugins::priority("priority/multifactor").unwrap(),
        config.clone(),
    );
    s.set_quotas(parse_quota_conf(QUOTA, "q").unwrap());
    let mut drv = Driver { s, exiting: BTreeMap::new() };
    let mut now = 0u64;
    let mut next = 1u64;
    let mut services: BTreeMap<u32, ServiceSpec> = BTreeMap::new();
    let mut bw = config.storage_bw_bytes_per_s;
    for op in ops {
        match op {
            Op::Train { account, gpus, preemptible, ckpt_gb } => {
                let topo = if *gpus <= 8 { TopologyKind::Node } else { TopologyKind::Any };
                let mut j = JobSpec::simple(next, now, Request::gpus(*gpus, topo), Some(4 * 3600));
                j.account = ACCOUNTS[*account].into();
                j.preemptible = *preemptible;
                j.checkpoint_bytes = ckpt_gb * 1_000_000_000;
                next += 1;
                drv.event(Event::Submit(j), now);
            }
            Op::Service { id, gpus, min, desired } => {
                let spec = services.entry(*id).or_insert_with(|| ServiceSpec {
                    id: ServiceId(*id),
                    name: format!("svc{id}"),
                    partition: PartId(0),
                    account: "inference".into(),
                    user: "svc".into(),
                    replica: Request::gpus(*gpus, TopologyKind::Node),
                    min_replicas: if floors { *min } else { 0 },
                    max_replicas: 6,
                    desired_replicas: *desired,
                    priority: 10,
                });
                spec.desired_replicas = *desired;
                drv.event(Event::ServiceUpsert(spec.clone()), now);
            }
            Op::End(k) | Op::Ack(k) => {
                let ids: Vec<JobId> = drv.s.running().keys().copied().collect();
                if ids.is_empty() {
                    continue;
                }
                let id = ids[k % ids.len()];
                if matches!(op, Op::End(_)) {
                    drv.exiting.remove(&id);
                    drv.event(Event::JobEnded(id), now);
                } else {
                    drv.event(Event::CheckpointAck { job: id, at: now }, now);
                }
            }
            Op::Bandwidth(b) => {
                bw = *b;
                drv.event(Event::StorageBandwidth(*b), now);
            }
            Op::Tick(dt) => now += dt,
        }
        // Victims exit when their checkpoint is done (before the deadline).
        let due: Vec<JobId> = drv.exiting.iter().filter(|(_, t)| **t <= now).map(|(j, _)| *j).collect();
        for j in due {
            drv.exiting.remove(&j);
            drv.event(Event::Requeued(j), now);
        }
        let before: BTreeMap<JobId, (bool, u64, bool, bool)> = drv
            .s
            .running()
            .iter()
            .map(|(id, r)| (*id, (r.service().is_some(), r.start, r.spec.preemptible, drv.s.borrow_ledger().contains_key(id))))
            .collect();
        let d = drv.cycle(now);
        let s = &drv.s;
        if let Err(e) = s.check_invariants() {
            return Err(TestCaseError::fail(format!("after {op:?}: {e}")));
        }
        let mut victims: Vec<JobId> = Vec::new();
        let mut inflight_bytes = 0u64;
        for x in &d {
            if let Decision::Preempt { job, deadline, checkpoint_bytes, bandwidth, .. } = x {
                let (replica, start, preemptible, _) = before[job];
                // The ledger as the cycle saw it (refreshed at its start; binds in the cycle
                // only add newer jobs).
                let borrowed = s.borrow_ledger().contains_key(job);
                // Invariant 4.
                prop_assert!(!replica, "a service replica was preempted");
                prop_assert!(preemptible, "a non-preemptible job was preempted");
                let spec = &s.running()[job].spec;
                let scoped = s.quotas().scope_of(&spec.user, &spec.account).is_some();
                prop_assert!(borrowed || !scoped, "job {job} inside its guarantee was preempted");
                // Minimum runtime.
                prop_assert!(now - start >= check.min_runtime, "job {job} preempted {}s after start", now - start);
                // The checkpoint fits the deadline at the measured bandwidth.
                inflight_bytes += checkpoint_bytes;
                prop_assert_eq!(*bandwidth, bw);
                prop_assert!(
                    (inflight_bytes as u128) * 3 <= u128::from(deadline - now) * u128::from(*bandwidth),
                    "checkpoint of {checkpoint_bytes} B cannot fit a {}s deadline", deadline - now
                );
                prop_assert!(bw >= 10_000_000_000, "preemption while storage is degraded");
                victims.push(*job);
            }
        }
        // The budget: with no service floor in play, a preemption never takes the preempted
        // share past the paging limit (ends of other jobs may raise the share later).
        if !floors && !victims.is_empty() {
            let share = s.preempted_share_pct(now);
            prop_assert!(share <= check.page_pct, "budget exceeded: {share}% after {op:?}");
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).map_or(256, |n: u32| n.min(1000))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn preemption_rules_and_invariants_hold(nodes in 2u32..10, ops in prop::collection::vec(op(), 1..70), floors in any::<bool>()) {
        run(nodes, &ops, floors)?;
    }

    /// Borrowed capacity is reclaimed in exact LIFO order when every victim would serve
    /// equally well (whole-node jobs, whole-node replicas, equal priority).
    #[test]
    fn borrowed_capacity_is_reclaimed_lifo(nodes in 2u32..12, gaps in prop::collection::vec(1u64..3600, 12), k in 1u32..12) {
        let config = SchedConfig { budget_warn_pct: 100, budget_page_pct: 100, ..SchedConfig::default() };
        let mut s = Scheduler::new(
            Cluster::uniform(nodes, 8, 4, 64, 512_000),
            flotilla_plugins::placement("topo-bestfit").unwrap(),
            flotilla_plugins::priority("priority/basic").unwrap(),
            config,
        );
        s.set_quotas(parse_quota_conf("Account=a GuaranteedGPUs=0\nAccount=inference\n", "q").unwrap());
        let mut drv = Driver { s, exiting: BTreeMap::new() };
        let mut now = 0;
        for i in 0..nodes as usize {
            now += gaps[i % gaps.len()];
            let mut j = JobSpec::simple(i as u64 + 1, now, Request::gpus(8, TopologyKind::Node), None);
            j.account = "a".into();
            j.preemptible = true;
            drv.event(Event::Submit(j), now);
            drv.cycle(now);
        }
        now += 3600;
        let k = k.min(nodes);
        drv.event(Event::ServiceUpsert(ServiceSpec {
            id: ServiceId(1), name: "svc".into(), partition: PartId(0), account: "inference".into(), user: "svc".into(),
            replica: Request::gpus(8, TopologyKind::Node), min_replicas: 0, max_replicas: 64, desired_replicas: k, priority: 1,
        }), now);
        let mut ledger: Vec<(u64, JobId)> = drv.s.borrow_ledger().iter().map(|(j, t)| (*t, *j)).collect();
        ledger.sort_by(|a, b| b.cmp(a));
        let d = drv.cycle(now);
        let got: Vec<JobId> = d.iter().filter_map(|x| match x { Decision::Preempt { job, .. } => Some(*job), _ => None }).collect();
        let want: Vec<JobId> = ledger.iter().take(k as usize).map(|(_, j)| *j).collect();
        prop_assert_eq!(got, want);
    }
}
