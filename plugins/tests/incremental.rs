//! The incremental cycle against the full scan: two schedulers, one with
//! `Scheduler::set_full_scan(true)`, are fed the same random workload and event sequence
//! (submissions to two partitions, ends, cancellations of running and pending jobs, requeues,
//! drains, failures, resumes and reboots of nodes, priority changes, holds and releases,
//! dependencies and begin times that resolve, time passing and quiet cycles where nothing
//! happened) under every queue discipline, placement policy and both priority policies, the
//! multifactor one also with an association tree, QOS and nonzero association, fair-share
//! and QOS weights (jobs of users with and without an association, a per-partition
//! association, account and QOS updates of pending jobs, the accounting replaced: the
//! incremental cycle resolves a job's association once per accounting in force, the full
//! scan every cycle). Every
//! decision of every event and every cycle, and every pending job's reason, detail, expected
//! start and planned nodes, its priority and its failed-cycle count, must be the same in
//! both. Under `priority/basic` the incremental twin also keeps its order and skips the
//! tail of unchanged jobs (the `cycle` module doc, "Skipping unchanged jobs"); the test
//! asserts that it did skip jobs, so the comparison covers the replay.

use flotilla_core::assoc::{Accounting, AssocId, AssocTree, Association, Qos};
use flotilla_core::cluster::{Cluster, NodeAvail, NodeId, NodeSpec, PartId};
use flotilla_core::fairshare::{BillingWeights, UsageConfig};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{HoldKind, JobId, JobSpec, Request};
use flotilla_core::sched::{Decision, Event, QueueMode, SchedConfig, Scheduler};
use flotilla_plugins::priority::{Multifactor, MultifactorWeights};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

#[derive(Debug, Clone)]
enum Op {
    Submit { gpus: u32, topo: u8, limit_min: u64, part: u8, prio: u32, preemptible: bool, gate: u8, who: u8 },
    End(usize),
    Cancel(usize),
    CancelPending(usize),
    Requeue(usize),
    Drain(usize),
    Resume(usize),
    Down(usize),
    Reboot(usize),
    Priority(usize, u32),
    Hold(usize),
    Release(usize),
    /// A pending job's account and QOS change (`scontrol update Account= QOS=`).
    Account(usize, u8),
    /// The accounting database changes (`sacctmgr`): variant k of [`accounting`].
    Accounting(u8),
    Tick(u64),
    Quiet,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (prop::sample::select(vec![1u32, 1, 2, 3, 4, 6, 8, 12, 16, 24]), 0u8..3, 1u64..300, 0u8..2, 0u32..4, prop::bool::weighted(0.2), 0u8..8, 0u8..12)
            .prop_map(|(gpus, topo, limit_min, part, prio, preemptible, gate, who)| Op::Submit { gpus, topo, limit_min, part, prio, preemptible, gate, who }),
        3 => any::<usize>().prop_map(Op::End),
        1 => any::<usize>().prop_map(Op::Cancel),
        1 => any::<usize>().prop_map(Op::CancelPending),
        1 => any::<usize>().prop_map(Op::Requeue),
        1 => any::<usize>().prop_map(Op::Drain),
        1 => any::<usize>().prop_map(Op::Resume),
        1 => any::<usize>().prop_map(Op::Down),
        1 => any::<usize>().prop_map(Op::Reboot),
        2 => (any::<usize>(), 0u32..6).prop_map(|(k, p)| Op::Priority(k, p)),
        1 => any::<usize>().prop_map(Op::Hold),
        2 => any::<usize>().prop_map(Op::Release),
        1 => (any::<usize>(), 0u8..12).prop_map(|(k, w)| Op::Account(k, w)),
        1 => (0u8..3).prop_map(Op::Accounting),
        3 => (1u64..3000).prop_map(Op::Tick),
        3 => Just(Op::Quiet),
    ]
}

fn cluster() -> impl Strategy<Value = Cluster> {
    (2usize..12, prop::sample::select(vec![4u32, 8]), 1usize..4, prop::bool::weighted(0.3)).prop_map(|(nodes, gpus, per_pod, pool)| {
        let specs: Vec<NodeSpec> = (0..nodes)
            .map(|i| NodeSpec {
                name: format!("n{i}"),
                gpus,
                gpu_type: Some("h100".into()),
                cpu_milli: 32_000,
                mem_mib: 256_000,
                pod: format!("p{}", i / per_pod),
            })
            .collect();
        let mut c = Cluster::from_specs(&specs);
        if pool {
            // The last node is an inference-pool node: only preemptible training may borrow it.
            c.nodes[nodes - 1].inference_pool = true;
        }
        c.add_partition("batch", (0..nodes as u32).map(NodeId).collect(), true);
        c.add_partition("half", (0..nodes.div_ceil(2) as u32).map(NodeId).collect(), false);
        c
    })
}

/// The priority choice that runs `priority/multifactor` with accounting ([`accounting`]).
const ACCOUNTING: &str = "multifactor+accounting";

/// The users and accounts jobs are submitted as (`who` % 6): carol has no association.
const WHO: [(&str, &str); 6] = [("alice", "research"), ("bob", "research"), ("bob", "ops"), ("dave", "ops"), ("carol", "research"), ("alice", "ops")];

/// The QOS jobs ask for (`who` / 6 % 2 picks one of each pair): `high`, `normal`, or one the
/// database does not know.
const QOS: [&str; 3] = ["high", "normal", "ghost"];

/// Variant `k` of the accounting database: `research` and `ops` under root, with their users,
/// a per-partition association of bob in `half`, association priorities and QOS; the
/// variants move priorities, shares and which users have an association.
fn accounting(k: u8) -> Accounting {
    let a = |id: u32, parent: Option<u32>, account: &str, user: Option<&str>, prio: Option<u32>, shares: u32| {
        let mut x = Association::new(AssocId(id), parent.map(AssocId), account, user);
        x.priority = prio;
        x.shares = shares;
        x
    };
    let mut assocs = vec![
        a(1, None, "root", None, None, 1),
        a(2, Some(1), "research", None, Some([10, 1, 0][k as usize % 3]), 3),
        a(3, Some(1), "ops", None, Some(5), [1, 4, 1][k as usize % 3]),
        a(4, Some(2), "research", Some("alice"), None, 1),
        a(5, Some(2), "research", Some("bob"), Some([0, 20, 3][k as usize % 3]), 2),
        a(6, Some(3), "ops", Some("bob"), None, 1),
        a(7, Some(3), "ops", Some("dave"), Some(7), 1),
    ];
    if k % 3 != 1 {
        let mut half = a(8, Some(3), "ops", Some("bob"), Some(30), 1);
        half.partition = Some("half".into());
        assocs.push(half);
    }
    if k % 3 == 2 {
        assocs.push(a(9, Some(2), "research", Some("carol"), Some(2), 1));
        assocs.push(a(10, Some(3), "ops", Some("alice"), None, 5));
    }
    let mut qos = std::collections::BTreeMap::new();
    for (name, prio) in [("normal", 0), ("high", [100, 50, 100][k as usize % 3])] {
        let mut q = Qos::new(name);
        q.priority = prio;
        qos.insert(name.to_string(), q);
    }
    Accounting { tree: AssocTree::new(assocs).unwrap(), qos, ..Accounting::default() }
}

/// One scheduler and the transcript of what it decided and showed.
struct Twin {
    s: Scheduler,
    log: Vec<String>,
}

impl Twin {
    fn new(c: Cluster, queue: QueueMode, policy: &str, priority: &str, full: bool) -> Twin {
        let prio = if priority == ACCOUNTING {
            let w = MultifactorWeights { weight_assoc: 5_000, weight_fairshare: 5_000, weight_qos: 5_000, ..MultifactorWeights::default() };
            Box::new(Multifactor { weights: w })
        } else {
            flotilla_plugins::priority(priority).unwrap()
        };
        let mut s = Scheduler::new(
            c,
            flotilla_plugins::placement(policy).unwrap(),
            prio,
            SchedConfig { queue, max_reservations: 3, ..SchedConfig::default() },
        );
        s.set_full_scan(full);
        if priority == ACCOUNTING {
            s.set_accounting(accounting(0));
            // Billing one unit per GPU in both partitions, so fair share moves as jobs run.
            let gpu = || Some(BillingWeights::parse("GRES/gpu=1.0").unwrap());
            s.set_usage_config(UsageConfig { billing: vec![gpu(), gpu()], half_life_s: 3_600, ..UsageConfig::default() });
        }
        Twin { s, log: Vec::new() }
    }

    /// Logs decisions; a backfill preemption is carried out at once (the job is requeued).
    fn apply(&mut self, d: Vec<Decision>, now: u64) {
        self.log.push(format!("{d:?}"));
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

    fn cycle(&mut self, now: u64) {
        let d = self.s.cycle(now);
        self.apply(d, now);
        let infos: Vec<_> = self
            .s
            .pending_ids()
            .map(|id| (id, self.s.pending_state(id).map(|(i, p)| (i.clone(), p)), self.s.failed_cycles(id)))
            .collect();
        self.log.push(format!("{infos:?}"));
    }
}

/// The event `op` stands for at `now`, chosen from `s`'s state (the same in both twins while
/// they agree); `None` when it does not apply.
fn event_of(op: &Op, s: &Scheduler, now: u64, next_id: &mut u64, epochs: &mut [u64]) -> Option<Event> {
    let n = s.cluster().nodes.len();
    let running: Vec<JobId> = s.running().keys().copied().collect();
    let pending: Vec<JobId> = s.pending_ids().collect();
    let pick = |v: &[JobId], k: usize| (!v.is_empty()).then(|| v[k % v.len()]);
    let update = |k: usize, f: &dyn Fn(&mut JobSpec)| {
        let id = pick(&pending, k)?;
        let mut spec = s.pending_spec(id)?.clone();
        f(&mut spec);
        Some(Event::Update(spec))
    };
    Some(match *op {
        Op::Submit { gpus, topo, limit_min, part, prio, preemptible, gate, who } => {
            let topology = [TopologyKind::Node, TopologyKind::Pod, TopologyKind::Any][topo as usize];
            let size = s.cluster().nodes[0].gpus;
            let gpus = if topology == TopologyKind::Node && gpus > size && gpus % size != 0 { size } else { gpus };
            let req = Request { gpus, topology, cpu_milli_per_node: 1000, ..Request::default() };
            let mut spec = JobSpec::simple(*next_id, now, req, Some(limit_min * 60));
            *next_id += 1;
            spec.partition = PartId(u32::from(part));
            spec.base_priority = prio;
            spec.preemptible = preemptible;
            let (user, account) = WHO[who as usize % 6];
            (spec.user, spec.account, spec.qos) = (user.into(), account.into(), QOS[(who as usize / 6) % 2 + usize::from(who % 5 == 0)].into());
            match gate {
                0 => spec.held = Some(HoldKind::User),
                1 => spec.dependency_pending = true,
                2 => spec.begin_time = Some(now + 600),
                _ => {}
            }
            Event::Submit(spec)
        }
        Op::End(k) => Event::JobEnded(pick(&running, k)?),
        Op::Cancel(k) => Event::Cancel(pick(&running, k)?),
        Op::CancelPending(k) => Event::Cancel(pick(&pending, k)?),
        Op::Requeue(k) => Event::Requeued(pick(&running, k)?),
        Op::Drain(k) => Event::NodeAvail { node: NodeId((k % n) as u32), avail: NodeAvail::Drain { reason: "t".into() } },
        Op::Resume(k) => Event::NodeAvail { node: NodeId((k % n) as u32), avail: NodeAvail::Up },
        Op::Down(k) => Event::NodeAvail { node: NodeId((k % n) as u32), avail: NodeAvail::Down { reason: "t".into() } },
        Op::Reboot(k) => {
            let node = k % n;
            epochs[node] += 1;
            Event::NodeRegistered { node: NodeId(node as u32), boot_epoch: epochs[node] }
        }
        Op::Priority(k, p) => update(k, &|spec| spec.base_priority = p)?,
        Op::Hold(k) => update(k, &|spec| spec.held = Some(HoldKind::Admin))?,
        Op::Release(k) => update(k, &|spec| {
            spec.held = None;
            spec.dependency_pending = false;
        })?,
        Op::Account(k, w) => update(k, &|spec| {
            spec.account = WHO[w as usize % 6].1.into();
            spec.qos = QOS[w as usize % 3].into();
        })?,
        Op::Accounting(_) | Op::Tick(_) | Op::Quiet => return None,
    })
}

/// What the incremental twin saved in one case.
#[derive(Debug, Default, Clone, Copy)]
struct Saved {
    /// Placement searches reused.
    searches: u64,
    /// Reservation plans reused.
    plans: u64,
    /// Pending jobs visited and skipped by the per-job stages.
    visited: u64,
    skipped: u64,
}

/// Runs `ops` through both twins; fails at the first event or cycle where they differ.
/// Returns what the incremental twin saved.
fn compare(c: Cluster, queue: QueueMode, policy: &str, priority: &str, ops: &[Op]) -> Result<Saved, TestCaseError> {
    let mut full = Twin::new(c.clone(), queue, policy, priority, true);
    let mut inc = Twin::new(c, queue, policy, priority, false);
    let n = full.s.cluster().nodes.len();
    for i in 0..n {
        let e = Event::NodeRegistered { node: NodeId(i as u32), boot_epoch: 1 };
        full.event(e.clone(), 0);
        inc.event(e, 0);
    }
    let (mut now, mut next_id, mut epochs) = (0u64, 1u64, vec![1u64; n]);
    for (step, op) in ops.iter().enumerate() {
        let mut events = Vec::new();
        if let Op::Tick(dt) = op {
            now += dt;
            // Jobs past their limit end (the controller's time-limit enforcement).
            let expired = full.s.running().iter().filter(|(_, r)| r.end.is_some_and(|e| e <= now)).map(|(id, _)| *id);
            events.extend(expired.map(Event::JobEnded));
        } else if let (Op::Accounting(k), true) = (op, priority == ACCOUNTING) {
            full.s.set_accounting(accounting(*k));
            inc.s.set_accounting(accounting(*k));
        } else if let Some(e) = event_of(op, &full.s, now, &mut next_id, &mut epochs) {
            events.push(e);
        }
        for e in events {
            full.event(e.clone(), now);
            inc.event(e, now);
        }
        full.cycle(now);
        inc.cycle(now);
        if full.log != inc.log {
            let at = full.log.iter().zip(&inc.log).position(|(a, b)| a != b).unwrap_or(full.log.len().min(inc.log.len()));
            return Err(TestCaseError::fail(format!(
                "step {step} ({op:?}) at t={now}: the incremental cycle differs from the full scan\nfull: {:?}\nincr: {:?}",
                full.log.get(at),
                inc.log.get(at)
            )));
        }
        inc.s.check_invariants().map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
    }
    prop_assert_eq!(full.s.placement_counts().1, 0, "the full scan reused a search");
    prop_assert_eq!(full.s.plan_counts().1, 0, "the full scan reused a reservation plan");
    prop_assert_eq!(full.s.visit_counts().1, 0, "the full scan skipped a job");
    let (visited, skipped) = inc.s.visit_counts();
    Ok(Saved { searches: inc.s.placement_counts().1, plans: inc.s.plan_counts().1, visited, skipped })
}

#[test]
fn incremental_cycle_decides_exactly_as_the_full_scan() {
    // An explicit runner: PROPTEST_CASES does not apply (CI sets it to 10,000).
    // 240 cases: a third of them `priority/basic`, the only choice that skips whole jobs.
    let mut runner = TestRunner::new(Config { cases: 240, failure_persistence: None, ..Config::default() });
    let total = std::cell::Cell::new(Saved::default());
    let strategy = (
        cluster(),
        prop::collection::vec(op(), 1..70),
        prop::sample::select(vec![QueueMode::HeldReservations, QueueMode::EasyBackfill, QueueMode::StrictFifo]),
        prop::sample::select(flotilla_plugins::PLACEMENT_POLICIES.to_vec()),
        prop::sample::select(vec!["priority/basic", "priority/multifactor", ACCOUNTING]),
    );
    runner
        .run(&strategy, |(c, ops, queue, policy, priority)| {
            let saved = compare(c, queue, policy, priority, &ops)?;
            let t = total.get();
            total.set(Saved {
                searches: t.searches + saved.searches,
                plans: t.plans + saved.plans,
                visited: t.visited + saved.visited,
                skipped: t.skipped + saved.skipped,
            });
            Ok(())
        })
        .unwrap();
    // The comparison means something only if the incremental cycle did skip searches, plans
    // and whole jobs.
    let t = total.get();
    eprintln!(
        "reused: {} searches, {} reservation plans; jobs visited {}, skipped {}",
        t.searches, t.plans, t.visited, t.skipped
    );
    assert!(t.searches > 100, "the incremental cycle reused only {} searches", t.searches);
    assert!(t.plans > 20, "the incremental cycle reused only {} reservation plans", t.plans);
    assert!(t.skipped > 50, "the incremental cycle skipped only {} jobs", t.skipped);
}
