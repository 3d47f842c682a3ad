//! Scenario goldens for sharing GPUs between training and inference services: quotas with
//! borrowing, preemption (who yields, minimum runtime, checkpoint deadlines, the budget and
//! its pages), service replicas (pairing, scale-down, the inference pool) and
//! defragmentation (relocation, the swap pool). Each golden is reviewed as a diff; each key
//! fact is also asserted by hand.

mod support;

use flotilla_core::cluster::{Cluster, NodeId, Time};
use flotilla_core::config::TopologyKind::{Any, Node};
use flotilla_core::job::{JobId, JobSpec, Request};
use flotilla_core::quota::parse_quota_conf;
use flotilla_core::sched::{AlertKind, Decision, Event, SchedConfig, Scheduler, ServiceId, ServiceSpec};
use support::{check_golden, job, render};

struct Run {
    s: Scheduler,
    log: String,
    /// Preemptions decided and not yet carried out (see [`Run::carry_out`]).
    preempting: Vec<JobId>,
    /// Replicas relocated away from and not yet drained (see [`Run::drain_relocated`]).
    relocated: Vec<JobId>,
}

impl Run {
    fn new(c: Cluster, config: SchedConfig) -> Run {
        let s = Scheduler::new(
            c,
            flotilla_plugins::placement("topo-bestfit").unwrap(),
            flotilla_plugins::priority("priority/basic").unwrap(),
            config,
        );
        Run { s, log: String::new(), preempting: Vec::new(), relocated: Vec::new() }
    }
    fn note(&mut self, t: Time, what: &str) {
        self.log.push_str(&format!("t={t} {what}\n"));
    }
    /// The scenario's one path for decisions: each goes into the transcript; a preemption or
    /// a relocation is remembered until the scenario carries it out (later, as a driver's
    /// victims take time to checkpoint and new replicas to serve). Returns the decisions for
    /// the scenario to check.
    fn apply(&mut self, d: Vec<Decision>, now: Time) -> Vec<Decision> {
        self.log.push_str(&render(&self.s, &d, now));
        self.preempting.extend(preempted(&d));
        for x in &d {
            if let Decision::Relocate { from, .. } = x {
                self.relocated.push(*from);
            }
        }
        d
    }
    fn ev(&mut self, e: Event, now: Time) -> Vec<Decision> {
        let d = self.s.handle(e, now);
        self.apply(d, now)
    }
    fn cycle(&mut self, now: Time) -> Vec<Decision> {
        let d = self.s.cycle(now);
        self.log.push_str(&format!("t={now} cycle\n"));
        let d = self.apply(d, now);
        self.s.check_invariants().unwrap();
        d
    }
    /// Carries out the preemptions decided so far: each victim acknowledges its checkpoint
    /// and exits at `now`.
    fn carry_out(&mut self, now: Time) {
        for job in std::mem::take(&mut self.preempting) {
            self.note(now, &format!("job {job} acknowledges its checkpoint and exits"));
            self.ev(Event::CheckpointAck { job, at: now }, now);
            self.ev(Event::Requeued(job), now);
        }
    }
    /// Drains the replicas relocated away from so far: each old replica ends at `now`.
    fn drain_relocated(&mut self, now: Time) {
        for from in std::mem::take(&mut self.relocated) {
            self.note(now, &format!("old replica {} drained", from.0 - flotilla_core::sched::REPLICA_ID_BASE));
            self.ev(Event::JobEnded(from), now);
        }
    }
}

fn preempted(d: &[Decision]) -> Vec<JobId> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Preempt { job, .. } => Some(*job),
            _ => None,
        })
        .collect()
}

fn replicas_bound(d: &[Decision]) -> usize {
    d.iter().filter(|d| matches!(d, Decision::BindReplica { .. })).count()
}

fn service(id: u32, gpus: u32, min: u32, max: u32, desired: u32) -> ServiceSpec {
    ServiceSpec {
        id: ServiceId(id),
        name: format!("svc{id}"),
        partition: flotilla_core::cluster::PartId(0),
        account: "inference".into(),
        user: "svc".into(),
        replica: Request::gpus(gpus, Node),
        min_replicas: min,
        max_replicas: max,
        desired_replicas: desired,
        priority: 1000,
    }
}

fn training(id: u64, t: Time, gpus: u32, account: &str, ckpt: u64) -> JobSpec {
    let mut j = job(id, t, gpus, if gpus <= 8 { Node } else { Any }, 24 * 60);
    j.account = account.into();
    j.user = format!("u{id}");
    j.preemptible = true;
    j.checkpoint_bytes = ckpt;
    j
}

/// An inference surge preempts the newest borrowed training first (LIFO), never a job inside
/// its guarantee, never within 10 minutes of its start.
#[test]
fn inference_surge_preempts_newest_borrowed_first() {
    // The budget is tested on its own below; here it is wide open.
    let open = SchedConfig { budget_warn_pct: 100, budget_page_pct: 100, ..SchedConfig::default() };
    let mut r = Run::new(Cluster::uniform(4, 8, 4, 64, 512_000), open);
    r.s.set_quotas(parse_quota_conf("Account=research GuaranteedGPUs=8\nAccount=inference GuaranteedGPUs=0\n", "q").unwrap());
    // research: job 1 (inside the 8-GPU guarantee), then 2 and 3 borrow, 3 the newest.
    for (id, t) in [(1u64, 0u64), (2, 100), (3, 200)] {
        r.ev(Event::Submit(training(id, t, 8, "research", 980_000_000_000)), t);
        r.cycle(t);
    }
    assert_eq!(r.s.borrow_ledger().keys().copied().collect::<Vec<_>>(), vec![JobId(2), JobId(3)]);
    // Two 8-GPU replicas at t=1000: one fits on the free node, one needs a preemption.
    r.note(1000, "service svc1 (8-GPU replicas, min 1, desired 2)");
    r.ev(Event::ServiceUpsert(service(1, 8, 1, 4, 2)), 1000);
    r.ev(Event::StorageBandwidth(200_000_000_000), 1000);
    let d = r.cycle(1000);
    assert_eq!(replicas_bound(&d), 1);
    assert_eq!(preempted(&d), vec![JobId(3)], "the newest borrowed job goes first");
    // Deadline = 980 GB / 200 GB/s × 3 = 14.7 s → 15 s.
    assert!(d.iter().any(|x| matches!(x, Decision::Preempt { deadline, .. } if *deadline == 1015)));
    r.carry_out(1005);
    let d = r.cycle(1005);
    assert_eq!(replicas_bound(&d), 1, "the replica takes the freed node");
    // One more replica: job 2 is the only borrowed one left; job 1 is guaranteed.
    r.ev(Event::ServiceScale { service: ServiceId(1), desired: 3 }, 1100);
    let d = r.cycle(1100);
    assert_eq!(preempted(&d), vec![JobId(2)]);
    r.carry_out(1101);
    r.cycle(1101);
    r.ev(Event::ServiceScale { service: ServiceId(1), desired: 4 }, 1200);
    let d = r.cycle(1200);
    assert!(preempted(&d).is_empty(), "job 1 is inside its guarantee");
    // The requeued jobs are pending again with their preemption counted.
    assert_eq!(r.s.pending_spec(JobId(3)).unwrap().preempt_count, 1);
    check_golden("surge_lifo", &r.log);
}

#[test]
fn nothing_is_preempted_within_its_minimum_runtime() {
    let mut r = Run::new(Cluster::uniform(1, 8, 1, 64, 512_000), SchedConfig::default());
    r.ev(Event::Submit(training(1, 0, 8, "x", 0)), 0);
    r.cycle(0);
    r.ev(Event::ServiceUpsert(service(1, 8, 1, 1, 1)), 300);
    let d = r.cycle(300);
    assert!(preempted(&d).is_empty(), "5 minutes in: protected");
    let d = r.cycle(600);
    assert_eq!(preempted(&d), vec![JobId(1)], "10 minutes in: preemptible");
    check_golden("min_runtime", &r.log);
}

/// The preemption deadline comes from checkpoint bytes and measured
/// bandwidth; degraded storage stops preemption with an alert; concurrent preemptions are
/// bounded so their checkpoints fit.
#[test]
fn checkpoint_bandwidth_bounds_preemption() {
    // Budget wide open: only bandwidth limits what happens here.
    let open = SchedConfig { budget_warn_pct: 100, budget_page_pct: 100, ..SchedConfig::default() };
    let mut r = Run::new(Cluster::uniform(3, 8, 3, 64, 512_000), open);
    for id in 1..=3 {
        r.ev(Event::Submit(training(id, 0, 8, "x", 4_000_000_000_000)), 0);
    }
    r.cycle(0);
    r.note(1000, "storage measured at 5 GB/s (below the 10 GB/s floor)");
    let d = r.ev(Event::StorageBandwidth(5_000_000_000), 1000);
    assert!(matches!(&d[..], [Decision::Alert { kind: AlertKind::StorageDegraded, .. }]));
    r.ev(Event::ServiceUpsert(service(1, 8, 1, 3, 3)), 1000);
    let d = r.cycle(1000);
    assert!(preempted(&d).is_empty(), "no preemption while storage is degraded");
    r.note(1100, "storage back at 200 GB/s");
    let d = r.ev(Event::StorageBandwidth(200_000_000_000), 1100);
    assert!(matches!(&d[..], [Decision::Alert { kind: AlertKind::StorageRecovered, .. }]));
    // 4 TB checkpoints: one takes 4e12×3/2e11 = 60 s; two in flight would need 120 s (the
    // limit); three would need 180 s > 120 s, so at most two preemptions are in flight.
    let d = r.cycle(1100);
    let p = preempted(&d);
    assert_eq!(p.len(), 2, "{p:?}");
    for x in &d {
        if let Decision::Preempt { deadline, .. } = x {
            assert!(*deadline - 1100 <= 120);
        }
    }
    check_golden("checkpoint_bandwidth", &r.log);
}

/// Above 25 % of running training preempted in the trailing hour,
/// scale-ups above the floor page a human with the jobs and costs; the floor is never
/// throttled.
#[test]
fn budget_pages_above_the_floor_and_never_throttles_it() {
    let mut r = Run::new(Cluster::uniform(8, 8, 8, 64, 512_000), SchedConfig::default());
    for id in 1..=8 {
        r.ev(Event::Submit(training(id, 0, 8, &format!("team{}", id % 3), 100_000_000_000)), 0);
    }
    r.cycle(0);
    r.ev(Event::CheckpointAck { job: JobId(5), at: 3000 }, 3000);
    r.ev(Event::ServiceUpsert(service(1, 8, 1, 8, 1)), 3600);
    let d = r.cycle(3600);
    assert_eq!(preempted(&d).len(), 1, "13 %: under the page limit");
    assert!(d.iter().any(|x| matches!(x, Decision::Alert { kind: AlertKind::PreemptionBudgetWarn, .. })), "over 10 %: warn");
    r.carry_out(3601);
    r.cycle(3601);
    // Two more replicas: the first preemption takes the share to 25 % (allowed, not above); the next
    // would pass 25 % above the floor, so it pages instead.
    r.ev(Event::ServiceScale { service: ServiceId(1), desired: 3 }, 3700);
    let d = r.cycle(3700);
    assert_eq!(preempted(&d).len(), 1, "25 %: still allowed");
    let page = d
        .iter()
        .find_map(|x| match x {
            Decision::Page(p) => Some(p.clone()),
            _ => None,
        })
        .expect("over 25 %: page");
    assert_eq!((page.wanted, page.have, page.min), (3, 1, 1));
    assert_eq!(page.gpus_blocked, 16);
    assert_eq!(page.would_preempt.len(), 1);
    assert!(page.rate_pct > 25 && page.limit_pct == 25);
    assert!(page.preempt_cost_gpu_hours > 0.0 && page.degraded_cost_gpu_hours == 16.0);
    assert_eq!(page.actions.len(), 3);
    r.carry_out(3701);
    let d = r.cycle(3701);
    assert!(preempted(&d).is_empty());
    // The page is not repeated every cycle.
    assert!(!r.cycle(3702).iter().any(|x| matches!(x, Decision::Page(_))));
    // A second service below its floor preempts even now.
    r.ev(Event::ServiceUpsert(service(2, 8, 1, 1, 1)), 3800);
    let d = r.cycle(3800);
    assert_eq!(preempted(&d).len(), 1, "the floor is never throttled");
    check_golden("budget_page", &r.log);
}

/// A waiting TP8 job gets a whole node by relocating service
/// replicas off a partly used node (start new, drain old), without preempting training.
#[test]
fn relocation_frees_a_whole_node_for_a_tp8_job() {
    let mut r = Run::new(Cluster::uniform(3, 8, 3, 64, 512_000), SchedConfig::default());
    // n0001: one 2-GPU replica (6 free); n0002: training, full; n0003: training on 6 GPUs.
    r.ev(Event::ServiceUpsert(service(1, 2, 1, 1, 1)), 0);
    let mut a = job(1, 0, 8, Node, 600);
    a.preemptible = false;
    let mut b = job(2, 0, 6, Node, 600);
    b.preemptible = false;
    b.request.required_nodes = vec![NodeId(2)];
    r.ev(Event::Submit(a), 0);
    r.ev(Event::Submit(b), 0);
    r.cycle(0);
    let lp = r.s.largest_placeable();
    assert!(lp.node < 8, "no whole node free: {lp}");
    r.note(10, "a TP8 job arrives");
    r.ev(Event::Submit(job(9, 10, 8, Node, 600)), 10);
    let d = r.cycle(10);
    let relocs: Vec<_> = d.iter().filter(|x| matches!(x, Decision::Relocate { .. })).collect();
    assert!(!relocs.is_empty(), "replicas move");
    assert!(preempted(&d).is_empty(), "training is never touched");
    r.drain_relocated(20);
    let d = r.cycle(20);
    assert!(d.iter().any(|x| matches!(x, Decision::Bind { job, allocs, .. } if *job == JobId(9) && allocs[0].part.gpus.count() == 8)));
    assert_eq!(r.s.service_replicas(ServiceId(1)).0.len(), 1, "the service kept its replica");
    check_golden("relocation", &r.log);
}

/// 4-GPU replicas pair up on nodes; scale-down
/// releases the newest replicas first.
#[test]
fn four_gpu_replicas_pair_and_scale_down_newest_first() {
    let mut r = Run::new(Cluster::uniform(4, 8, 4, 64, 512_000), SchedConfig::default());
    r.ev(Event::ServiceUpsert(service(1, 4, 1, 8, 4)), 0);
    let d = r.cycle(0);
    assert_eq!(replicas_bound(&d), 4);
    assert_eq!(r.s.cluster().fully_free_gpu_nodes(8), 2, "four halves fill two nodes");
    r.ev(Event::ServiceScale { service: ServiceId(1), desired: 5 }, 100);
    r.cycle(100);
    let (running, _) = r.s.service_replicas(ServiceId(1));
    let newest = *running.iter().max().unwrap();
    r.ev(Event::ServiceScale { service: ServiceId(1), desired: 4 }, 200);
    let d = r.cycle(200);
    assert!(matches!(&d[..], [Decision::StopReplica { replica, .. }] if *replica == newest));
    // Below min is clamped: desired 0 keeps the floor of 1.
    r.ev(Event::ServiceScale { service: ServiceId(1), desired: 0 }, 300);
    r.ev(Event::JobEnded(newest), 300);
    let d = r.cycle(300);
    assert_eq!(d.iter().filter(|x| matches!(x, Decision::StopReplica { .. })).count(), 3);
    check_golden("replica_pairs", &r.log);
}

#[test]
fn quota_ceiling_holds_jobs_with_assoc_grp_gres() {
    let mut r = Run::new(Cluster::uniform(4, 8, 4, 64, 512_000), SchedConfig::default());
    r.s.set_quotas(parse_quota_conf("Account=small MaxGPUs=8\n", "q").unwrap());
    let mut a = job(1, 0, 8, Node, 60);
    a.account = "small".into();
    let mut b = job(2, 0, 4, Node, 60);
    b.account = "small".into();
    r.ev(Event::Submit(a), 0);
    r.ev(Event::Submit(b), 0);
    r.cycle(0);
    assert_eq!(r.s.pending_info(JobId(2)).unwrap().reason, flotilla_core::sched::Reason::AssocGrpGRES);
    let _ = NodeId(0);
}

/// The inference pool: replicas go to it first; training may borrow the
/// pool's idle headroom only as preemptible capacity, and that is reclaimed first.
#[test]
fn inference_pool_lends_headroom_only_as_preemptible() {
    let mut c = Cluster::uniform(4, 8, 4, 64, 512_000);
    for n in [2usize, 3] {
        c.nodes[n].inference_pool = true;
    }
    // Budget wide open: the pool rule alone decides here.
    let open = SchedConfig { budget_warn_pct: 100, budget_page_pct: 100, ..SchedConfig::default() };
    let mut r = Run::new(c, open);
    for id in 1..=3 {
        let mut j = job(id, 0, 8, Node, 600);
        j.preemptible = false;
        r.ev(Event::Submit(j), 0);
    }
    r.cycle(0);
    assert_eq!(r.s.running().len(), 2, "non-preemptible training stays out of the pool");
    let mut borrower = job(4, 1, 8, Node, 600);
    borrower.preemptible = true;
    r.ev(Event::Submit(borrower), 1);
    r.cycle(1);
    let a = &r.s.running()[&JobId(4)].allocs[0];
    assert!(r.s.cluster().node(a.part.node).inference_pool && a.borrowed, "preemptible training borrows the pool");
    r.ev(Event::ServiceUpsert(service(1, 8, 0, 2, 2)), 700);
    let d = r.cycle(700);
    assert_eq!(replicas_bound(&d), 1, "the first replica takes the free pool node");
    assert_eq!(preempted(&d), vec![JobId(4)], "the pool's borrower is reclaimed for the second");
    check_golden("inference_pool", &r.log);
}

/// The swap pool: whole nodes held back from normal work as relocation scratch.
#[test]
fn swap_pool_holds_whole_nodes_back() {
    let config = SchedConfig { swap_pool_nodes: 1, ..SchedConfig::default() };
    let mut r = Run::new(Cluster::uniform(3, 8, 3, 64, 512_000), config);
    for id in 1..=3 {
        r.ev(Event::Submit(job(id, 0, 8, Node, 60)), 0);
    }
    let d = r.cycle(0);
    assert_eq!(d.iter().filter(|x| matches!(x, Decision::Bind { .. })).count(), 2);
    assert_eq!(r.s.largest_placeable().node, 0, "the swap node is not placeable");
    assert_eq!(flotilla_core::sched::default_swap_pool(128), 2);
    assert_eq!(flotilla_core::sched::default_swap_pool(10), 1);
}
