//! Accounting limits in the cycle (`AccountingStorageEnforce=associations,limits,qos`): one
//! scenario per Slurm pending reason, Slurm's order between reasons, and a property test that
//! no cycle of a random workload over a random association tree and random QOS ever passes a
//! limit (checked by an oracle of its own, counting the running jobs again).

mod support;

use flotilla_core::assoc::{Accounting, AssocId, AssocLimits, AssocTree, Association, Enforce, Qos, TresLimits};
use flotilla_core::cluster::{Cluster, NodeId, NodeSpec};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{JobId, JobSpec, Request};
use flotilla_core::sched::{Event, QueueMode, Reason, Scheduler};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn assoc(id: u32, parent: Option<u32>, account: &str, user: Option<&str>) -> Association {
    Association { qos: vec!["normal".into(), "high".into()], ..Association::new(AssocId(id), parent.map(AssocId), account, user) }
}

/// root(1) → org(2) → research(3) → alice(10), bob(11); root → other(4) → carol(12).
fn base_assocs() -> Vec<Association> {
    vec![
        assoc(1, None, "root", None),
        assoc(2, Some(1), "org", None),
        assoc(3, Some(2), "research", None),
        assoc(4, Some(1), "other", None),
        assoc(10, Some(3), "research", Some("alice")),
        assoc(11, Some(3), "research", Some("bob")),
        assoc(12, Some(4), "other", Some("carol")),
    ]
}

fn all_enforced() -> Enforce {
    Enforce { associations: true, limits: true, qos: true, safe: false }
}

fn accounting(assocs: Vec<Association>, qos: Vec<Qos>) -> Accounting {
    let mut q: BTreeMap<String, Qos> = qos.into_iter().map(|q| (q.name.clone(), q)).collect();
    q.entry("normal".into()).or_insert_with(|| Qos::new("normal"));
    Accounting { tree: AssocTree::new(assocs).unwrap(), qos: q, enforce: all_enforced() }
}

/// 4 nodes of 8 GPUs, 32 CPUs, 256000 MiB, partition `batch`.
fn cluster(nodes: usize) -> Cluster {
    let specs: Vec<NodeSpec> = (0..nodes)
        .map(|i| NodeSpec {
            name: format!("n{i}"),
            gpus: 8,
            gpu_type: Some("h100".into()),
            cpu_milli: 32_000,
            mem_mib: 256_000,
            pod: "p0".into(),
        })
        .collect();
    let mut c = Cluster::from_specs(&specs);
    c.add_partition("batch", (0..nodes as u32).map(NodeId).collect(), true);
    c
}

fn sched(acct: Accounting, nodes: usize) -> Scheduler {
    let mut s = support::scheduler(cluster(nodes), QueueMode::HeldReservations);
    for i in 0..nodes {
        let _ = s.handle(Event::NodeRegistered { node: NodeId(i as u32), boot_epoch: 1 }, 0);
    }
    s.set_accounting(acct);
    s
}

/// A 1-node job of `user` in `account` with `qos`: `gpus` GPUs, `cpus` CPUs, `mem` MiB, a
/// time limit of `limit_min` minutes.
fn job(id: u64, user: &str, account: &str, qos: &str, (gpus, cpus, mem): (u32, u64, u64), limit_min: u64) -> JobSpec {
    let req = Request { gpus, cpu_milli_per_node: cpus * 1000, mem_mib_per_node: mem, topology: TopologyKind::Node, ..Request::default() };
    let mut j = JobSpec::simple(id, 0, req, Some(limit_min * 60));
    j.user = user.into();
    j.account = account.into();
    j.qos = qos.into();
    j
}

fn small(id: u64, user: &str) -> JobSpec {
    job(id, user, "research", "normal", (1, 1, 100), 60)
}

/// Submits `jobs` one cycle each (so the earlier ones run), then `probe`, and returns the
/// probe's reason after one more cycle (`None` when it started).
fn probe_reason(acct: Accounting, fill: Vec<JobSpec>, probe: JobSpec) -> Option<Reason> {
    let mut s = sched(acct, 4);
    let mut now = 0;
    for j in fill {
        let id = j.id;
        let _ = s.handle(Event::Submit(j), now);
        let _ = s.cycle(now);
        assert!(s.running().contains_key(&id), "filler job {id} runs");
        now += 1;
    }
    let id = probe.id;
    let _ = s.handle(Event::Submit(probe), now);
    let _ = s.cycle(now);
    s.check_invariants().unwrap();
    s.pending_info(id).map(|i| i.reason)
}

fn with_assoc_limits(f: impl Fn(&mut Association)) -> Accounting {
    let mut a = base_assocs();
    for x in &mut a {
        f(x);
    }
    accounting(a, vec![Qos::new("high")])
}

fn on(account: &'static str, user: Option<&'static str>, set: impl Fn(&mut AssocLimits)) -> impl Fn(&mut Association) {
    move |a: &mut Association| {
        if a.account == account && a.user.as_deref() == user {
            set(&mut a.limits);
        }
    }
}

fn with_qos(set: impl Fn(&mut Qos)) -> Accounting {
    let mut q = Qos::new("normal");
    set(&mut q);
    accounting(base_assocs(), vec![q, Qos::new("high")])
}

#[test]
fn association_group_tres_limits_give_slurms_reasons() {
    let cpu = with_assoc_limits(on("research", None, |l| l.grp_tres.cpu = Some(4)));
    let fill = vec![job(1, "alice", "research", "normal", (0, 4, 0), 60)];
    assert_eq!(probe_reason(cpu, fill, job(2, "bob", "research", "normal", (0, 1, 0), 60)), Some(Reason::AssocGrpCpuLimit));
    let mem = with_assoc_limits(on("org", None, |l| l.grp_tres.mem_mb = Some(1000)));
    let fill = vec![job(1, "alice", "research", "normal", (0, 1, 800), 60)];
    assert_eq!(probe_reason(mem, fill, job(2, "bob", "research", "normal", (0, 1, 300), 60)), Some(Reason::AssocGrpMemLimit));
    let node = with_assoc_limits(on("research", None, |l| l.grp_tres.node = Some(1)));
    assert_eq!(probe_reason(node, vec![small(1, "alice")], small(2, "bob")), Some(Reason::AssocGrpNodeLimit));
    let billing = with_assoc_limits(on("research", None, |l| l.grp_tres.billing = Some(3)));
    let fill = vec![job(1, "alice", "research", "normal", (0, 2, 0), 60)];
    assert_eq!(probe_reason(billing, fill, job(2, "alice", "research", "normal", (0, 2, 0), 60)), Some(Reason::AssocGrpBilling));
    // An ancestor's GPU limit holds its whole subtree; another subtree is not held.
    let gpu = with_assoc_limits(on("org", None, |l| l.grp_tres.gpu = Some(8)));
    let fill = vec![job(1, "alice", "research", "normal", (8, 1, 0), 60)];
    assert_eq!(probe_reason(gpu.clone(), fill.clone(), small(2, "bob")), Some(Reason::AssocGrpGRES));
    assert_eq!(probe_reason(gpu, fill, job(2, "carol", "other", "normal", (1, 1, 0), 60)), None, "another subtree");
    // In Slurm's TRES order: cpu before gres/gpu.
    let both = with_assoc_limits(on("research", None, |l| l.grp_tres = TresLimits { cpu: Some(1), gpu: Some(1), ..TresLimits::default() }));
    assert_eq!(probe_reason(both, vec![small(1, "alice")], small(2, "bob")), Some(Reason::AssocGrpCpuLimit));
}

#[test]
fn association_job_counts_and_per_job_limits_give_slurms_reasons() {
    let grp_jobs = with_assoc_limits(on("research", None, |l| l.grp_jobs = Some(1)));
    assert_eq!(probe_reason(grp_jobs, vec![small(1, "alice")], small(2, "bob")), Some(Reason::AssocGrpJobsLimit));
    // MaxJobs is per user, inherited from the account.
    let max_jobs = with_assoc_limits(on("org", None, |l| l.max_jobs = Some(1)));
    assert_eq!(probe_reason(max_jobs.clone(), vec![small(1, "alice")], small(2, "alice")), Some(Reason::AssocMaxJobsLimit));
    assert_eq!(probe_reason(max_jobs, vec![small(1, "alice")], small(2, "bob")), None, "bob's own count");
    let wall = with_assoc_limits(on("research", None, |l| l.max_wall_min = Some(60)));
    assert_eq!(probe_reason(wall.clone(), vec![], job(1, "alice", "research", "normal", (1, 1, 0), 61)), Some(Reason::AssocMaxWallDurationPerJobLimit));
    assert_eq!(probe_reason(wall, vec![], job(1, "alice", "research", "normal", (1, 1, 0), 60)), None);
    let per_job = with_assoc_limits(on("research", Some("alice"), |l| {
        l.max_tres_per_job = TresLimits { cpu: Some(2), gpu: Some(2), ..TresLimits::default() }
    }));
    assert_eq!(probe_reason(per_job.clone(), vec![], job(1, "alice", "research", "normal", (1, 3, 0), 60)), Some(Reason::AssocMaxCpuPerJobLimit));
    assert_eq!(probe_reason(per_job.clone(), vec![], job(1, "alice", "research", "normal", (4, 1, 0), 60)), Some(Reason::AssocMaxGRESPerJob));
    assert_eq!(probe_reason(per_job, vec![], job(1, "bob", "research", "normal", (4, 3, 0), 60)), None, "alice's limit only");
    let mem = with_assoc_limits(on("research", None, |l| l.max_tres_per_job.mem_mb = Some(100)));
    assert_eq!(probe_reason(mem, vec![], job(1, "alice", "research", "normal", (0, 1, 101), 60)), Some(Reason::AssocMaxMemPerJob));
    let node = with_assoc_limits(on("research", None, |l| l.max_tres_per_job.node = Some(1)));
    let mut two = job(1, "alice", "research", "normal", (2, 1, 0), 60);
    two.request.nodes = Some(2);
    two.request.gpus_per_node = Some(1);
    two.request.topology = TopologyKind::Any;
    assert_eq!(probe_reason(node, vec![], two), Some(Reason::AssocMaxNodePerJobLimit));
}

#[test]
fn qos_limits_give_slurms_reasons() {
    let grp = with_qos(|q| q.grp_tres = TresLimits { cpu: Some(2), ..TresLimits::default() });
    assert_eq!(probe_reason(grp, vec![job(1, "alice", "research", "normal", (0, 2, 0), 60)], job(2, "carol", "other", "normal", (0, 1, 0), 60)), Some(Reason::QOSGrpCpuLimit));
    let grp = with_qos(|q| q.grp_tres.gpu = Some(1));
    assert_eq!(probe_reason(grp.clone(), vec![small(1, "alice")], small(2, "bob")), Some(Reason::QOSGrpGRES));
    assert_eq!(probe_reason(grp, vec![small(1, "alice")], job(2, "bob", "research", "high", (1, 1, 0), 60)), None, "another QOS");
    let grp_mem = with_qos(|q| q.grp_tres.mem_mb = Some(150));
    assert_eq!(probe_reason(grp_mem, vec![small(1, "alice")], small(2, "bob")), Some(Reason::QOSGrpMemLimit));
    let grp_node = with_qos(|q| q.grp_tres.node = Some(1));
    assert_eq!(probe_reason(grp_node, vec![small(1, "alice")], small(2, "bob")), Some(Reason::QOSGrpNodeLimit));
    let jobs = with_qos(|q| q.grp_jobs = Some(1));
    assert_eq!(probe_reason(jobs, vec![small(1, "alice")], small(2, "bob")), Some(Reason::QOSGrpJobsLimit));
    let per_user = with_qos(|q| q.max_jobs_per_user = Some(1));
    assert_eq!(probe_reason(per_user.clone(), vec![small(1, "alice")], small(2, "alice")), Some(Reason::QOSMaxJobsPerUserLimit));
    assert_eq!(probe_reason(per_user, vec![small(1, "alice")], small(2, "bob")), None);
    let gres_user = with_qos(|q| q.max_tres_per_user.gpu = Some(2));
    let fill = vec![job(1, "alice", "research", "normal", (2, 1, 0), 60)];
    assert_eq!(probe_reason(gres_user.clone(), fill.clone(), small(2, "alice")), Some(Reason::QOSMaxGRESPerUser));
    assert_eq!(probe_reason(gres_user, fill, small(2, "bob")), None);
    let cpu_user = with_qos(|q| q.max_tres_per_user.cpu = Some(2));
    let fill = vec![job(1, "alice", "research", "normal", (0, 2, 0), 60)];
    assert_eq!(probe_reason(cpu_user, fill, small(2, "alice")), Some(Reason::QOSMaxCpuPerUserLimit));
    let wall = with_qos(|q| q.max_wall_min = Some(30));
    assert_eq!(probe_reason(wall, vec![], small(1, "alice")), Some(Reason::QOSMaxWallDurationPerJobLimit));
    let per_job = with_qos(|q| q.max_tres_per_job.gpu = Some(1));
    assert_eq!(probe_reason(per_job, vec![], job(1, "alice", "research", "normal", (2, 1, 0), 60)), Some(Reason::QOSMaxGRESPerJob));
    let per_job = with_qos(|q| q.max_tres_per_job.cpu = Some(1));
    assert_eq!(probe_reason(per_job, vec![], job(1, "alice", "research", "normal", (0, 2, 0), 60)), Some(Reason::QOSMaxCpuPerJobLimit));
}

#[test]
fn reasons_come_in_slurms_order() {
    // QOS pre-select (GrpJobs) before the association's MaxJobs; the association's MaxJobs
    // (pre-select) before the QOS's GrpTRES (post-select).
    let mut a = base_assocs();
    a[2].limits.max_jobs = Some(1);
    let mut q = Qos::new("normal");
    q.grp_jobs = Some(1);
    q.grp_tres.gpu = Some(1);
    assert_eq!(probe_reason(accounting(a.clone(), vec![q]), vec![small(1, "alice")], small(2, "alice")), Some(Reason::QOSGrpJobsLimit));
    let mut q = Qos::new("normal");
    q.grp_tres.gpu = Some(1);
    assert_eq!(probe_reason(accounting(a, vec![q]), vec![small(1, "alice")], small(2, "alice")), Some(Reason::AssocMaxJobsLimit));
}

#[test]
fn invalid_association_or_qos_and_enforcement_flags() {
    let acct = accounting(base_assocs(), vec![]);
    assert_eq!(probe_reason(acct.clone(), vec![], small(1, "mallory")), Some(Reason::InvalidAccount));
    assert_eq!(probe_reason(acct.clone(), vec![], job(1, "alice", "research", "nope", (1, 1, 0), 60)), Some(Reason::InvalidQOS));
    // Without `associations`/`qos` those jobs run; without `limits` no limit holds.
    let mut loose = acct.clone();
    loose.enforce = Enforce { associations: false, limits: true, qos: false, safe: false };
    assert_eq!(probe_reason(loose.clone(), vec![], small(1, "mallory")), None);
    assert_eq!(probe_reason(loose, vec![], job(1, "alice", "research", "nope", (1, 1, 0), 60)), None);
    let mut a = base_assocs();
    a[2].limits.grp_jobs = Some(1);
    let mut no_limits = accounting(a, vec![]);
    no_limits.enforce = Enforce { associations: true, limits: false, qos: true, safe: false };
    assert_eq!(probe_reason(no_limits.clone(), vec![small(1, "alice")], small(2, "bob")), None);
    no_limits.enforce.safe = true;
    assert_eq!(probe_reason(no_limits, vec![small(1, "alice")], small(2, "bob")), Some(Reason::AssocGrpJobsLimit), "safe implies limits");
}

#[test]
fn jobs_started_in_one_cycle_count_at_once() {
    let mut a = base_assocs();
    a[2].limits.grp_jobs = Some(2);
    let mut s = sched(accounting(a, vec![]), 4);
    for id in 1..=4 {
        let _ = s.handle(Event::Submit(small(id, if id % 2 == 0 { "bob" } else { "alice" })), 0);
    }
    let _ = s.cycle(0);
    assert_eq!(s.running().len(), 2, "GrpJobs=2 in one cycle");
    assert_eq!(s.pending_info(JobId(3)).unwrap().reason, Reason::AssocGrpJobsLimit);
    let _ = s.handle(Event::JobEnded(JobId(1)), 10);
    let _ = s.cycle(10);
    assert!(s.running().contains_key(&JobId(3)), "a slot freed by an end");
    assert_eq!(s.running().len(), 2);
}

#[test]
fn the_default_qos_comes_from_the_association() {
    let mut a = base_assocs();
    a[2].default_qos = Some("high".into());
    let mut high = Qos::new("high");
    high.grp_jobs = Some(1);
    let mut s = sched(accounting(a, vec![high]), 4);
    for id in 1..=2 {
        let mut j = small(id, "alice");
        j.qos = String::new();
        let _ = s.handle(Event::Submit(j), 0);
    }
    let _ = s.cycle(0);
    assert_eq!(s.pending_info(JobId(2)).unwrap().reason, Reason::QOSGrpJobsLimit);
}

// ---- the property: no cycle passes a limit ----

#[derive(Debug, Clone)]
struct World {
    acct: Accounting,
    /// (user, account) of every user association.
    users: Vec<(String, String)>,
    qos: Vec<String>,
}

fn opt(max: u64) -> impl Strategy<Value = Option<u64>> {
    prop::option::weighted(0.4, 0..=max)
}

fn tres(max_cpu: u64, max_gpu: u64) -> impl Strategy<Value = TresLimits> {
    (opt(max_cpu), opt(40_000), opt(4), opt(max_gpu), opt(max_cpu))
        .prop_map(|(cpu, mem_mb, node, gpu, billing)| TresLimits { cpu, mem_mb, node, gpu, billing })
}

fn assoc_limits() -> impl Strategy<Value = AssocLimits> {
    (tres(24, 24), prop::option::weighted(0.3, 0u32..6), prop::option::weighted(0.3, 0u32..4), tres(12, 12), prop::option::weighted(0.2, 1u32..120))
        .prop_map(|(grp_tres, grp_jobs, max_jobs, max_tres_per_job, max_wall_min)| AssocLimits {
            grp_tres,
            grp_jobs,
            max_jobs,
            max_tres_per_job,
            max_wall_min,
            ..AssocLimits::default()
        })
}

fn qos_strategy(name: &'static str) -> impl Strategy<Value = Qos> {
    (tres(24, 24), prop::option::weighted(0.3, 0u32..6), prop::option::weighted(0.3, 0u32..4), tres(12, 12), tres(16, 16))
        .prop_map(move |(grp_tres, grp_jobs, max_jobs_per_user, max_tres_per_job, max_tres_per_user)| {
            let mut q = Qos::new(name);
            q.grp_tres = grp_tres;
            q.grp_jobs = grp_jobs;
            q.max_jobs_per_user = max_jobs_per_user;
            q.max_tres_per_job = max_tres_per_job;
            q.max_tres_per_user = max_tres_per_user;
            q
        })
}

/// A random tree: root, 1..6 accounts each under root or an earlier account, 1..3 of the
/// users u0..u3 under each account; random limits everywhere; QOS `normal` and `high`.
fn world() -> impl Strategy<Value = World> {
    (1usize..6)
        .prop_flat_map(|n| {
            (
                prop::collection::vec(any::<prop::sample::Index>(), n),
                prop::collection::vec(prop::collection::btree_set(0usize..4, 1..3), n),
                prop::collection::vec(assoc_limits(), n * 4 + 1),
                qos_strategy("normal"),
                qos_strategy("high"),
            )
        })
        .prop_map(|(parents, users, limits, normal, high)| {
            let mut assocs = vec![assoc(1, None, "root", None)];
            assocs[0].limits = limits[0].clone();
            let mut li = 1;
            let mut all_users = Vec::new();
            for (i, p) in parents.iter().enumerate() {
                let id = 2 + i as u32;
                let parent = if i == 0 { 1 } else { 1 + p.index(i + 1) as u32 };
                let account = format!("a{i}");
                let mut a = assoc(id, Some(parent), &account, None);
                a.limits = limits[li].clone();
                li += 1;
                assocs.push(a);
                for (k, u) in users[i].iter().enumerate() {
                    let user = format!("u{u}");
                    let mut ua = assoc(100 + 10 * id + k as u32, Some(id), &account, Some(&user));
                    ua.limits = limits[li].clone();
                    li += 1;
                    assocs.push(ua);
                    all_users.push((user, account.clone()));
                }
            }
            World { acct: accounting(assocs, vec![normal, high]), users: all_users, qos: vec!["normal".into(), "high".into()] }
        })
}

#[derive(Debug, Clone)]
enum Op {
    Submit { who: prop::sample::Index, qos: bool, gpus: u32, cpus: u64, mem: u64, limit_min: u64, nodes: u32 },
    End(prop::sample::Index),
    /// A pending job's QOS flips (`scontrol update job qos=`): its charge changes.
    Requalify(prop::sample::Index),
    Tick,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (any::<prop::sample::Index>(), any::<bool>(), 0u32..9, 1u64..9, 0u64..20_000, 1u64..150, 1u32..3)
            .prop_map(|(who, qos, gpus, cpus, mem, limit_min, nodes)| Op::Submit { who, qos, gpus, cpus, mem, limit_min, nodes }),
        2 => any::<prop::sample::Index>().prop_map(Op::End),
        1 => any::<prop::sample::Index>().prop_map(Op::Requalify),
        1 => Just(Op::Tick),
    ]
}

/// The oracle's TRES of a job: counted again from the request (module doc of the core's
/// limits: nodes `-N`, else 1; CPUs and memory per node times nodes; billing = CPUs).
fn oracle_tres(j: &JobSpec) -> [u64; 5] {
    let n = u64::from(j.request.nodes.unwrap_or(1));
    let cpu = j.request.cpu_milli_per_node.div_ceil(1000) * n;
    [cpu, j.request.mem_mib_per_node * n, n, u64::from(j.request.gpus), cpu]
}

fn limits_array(l: &TresLimits) -> [Option<u64>; 5] {
    [l.cpu, l.mem_mb, l.node, l.gpu, l.billing]
}

/// Every limit against the running jobs, counted from scratch. Errors: the first limit passed.
fn check_limits(s: &Scheduler, w: &World) -> Result<(), String> {
    let t = &w.acct.tree;
    let running: Vec<&JobSpec> = s.running().values().map(|r| &r.spec).collect();
    let assoc_of = |j: &JobSpec| t.find(&j.user, &j.account, Some("batch")).map(|a| a.id);
    let sum = |jobs: &[&&JobSpec]| -> ([u64; 5], u32) {
        let mut tot = [0u64; 5];
        for j in jobs {
            for (x, y) in tot.iter_mut().zip(oracle_tres(j)) {
                *x += y;
            }
        }
        (tot, jobs.len() as u32)
    };
    let within = |used: [u64; 5], lim: [Option<u64>; 5]| used.iter().zip(lim).all(|(u, l)| l.is_none_or(|l| *u <= l));
    for a in t.assocs() {
        let sub: Vec<&&JobSpec> = running.iter().filter(|j| assoc_of(j).is_some_and(|x| t.ancestry(x).any(|y| y.id == a.id))).collect();
        let (used, n) = sum(&sub);
        if !within(used, limits_array(&a.limits.grp_tres)) {
            return Err(format!("assoc {} GrpTRES {:?} used {used:?}", a.id.0, a.limits.grp_tres));
        }
        if a.limits.grp_jobs.is_some_and(|m| n > m) {
            return Err(format!("assoc {} GrpJobs {:?} running {n}", a.id.0, a.limits.grp_jobs));
        }
        if a.user.is_some() {
            let own = running.iter().filter(|j| assoc_of(j) == Some(a.id)).count() as u32;
            let max = t.inherited(a.id, |x| x.limits.max_jobs);
            if max.is_some_and(|m| own > m) {
                return Err(format!("assoc {} MaxJobs {max:?} running {own}", a.id.0));
            }
        }
    }
    for j in &running {
        let a = assoc_of(j).ok_or("a running job without association")?;
        let q = &w.acct.qos[&j.qos];
        let tr = oracle_tres(j);
        let per_job = |f: fn(&TresLimits) -> Option<u64>| t.inherited(a, |x| f(&x.limits.max_tres_per_job));
        let assoc_max = [per_job(|l| l.cpu), per_job(|l| l.mem_mb), per_job(|l| l.node), per_job(|l| l.gpu), per_job(|l| l.billing)];
        if !within(tr, assoc_max) || !within(tr, limits_array(&q.max_tres_per_job)) {
            return Err(format!("job {} over MaxTRESPerJob: {tr:?}", j.id));
        }
        let wall = t.inherited(a, |x| x.limits.max_wall_min);
        if wall.is_some_and(|m| j.time_limit_s.is_none_or(|s| s > u64::from(m) * 60)) {
            return Err(format!("job {} over MaxWall {wall:?}", j.id));
        }
    }
    for name in &w.qos {
        let q = &w.acct.qos[name];
        let of_q: Vec<&&JobSpec> = running.iter().filter(|j| j.qos == *name).collect();
        let (used, n) = sum(&of_q);
        if !within(used, limits_array(&q.grp_tres)) || q.grp_jobs.is_some_and(|m| n > m) {
            return Err(format!("QOS {name} GrpTRES/GrpJobs passed: {used:?} {n}"));
        }
        for u in 0..4 {
            let user = format!("u{u}");
            let mine: Vec<&&JobSpec> = of_q.iter().copied().filter(|j| j.user == user).collect();
            let (used, n) = sum(&mine);
            if !within(used, limits_array(&q.max_tres_per_user)) || q.max_jobs_per_user.is_some_and(|m| n > m) {
                return Err(format!("QOS {name} user {user} MaxTRESPerUser/MaxJobsPerUser passed: {used:?} {n}"));
            }
        }
    }
    Ok(())
}

fn run(w: &World, ops: &[Op]) -> Result<usize, TestCaseError> {
    let mut s = sched(w.acct.clone(), 4);
    let mut now = 0u64;
    let mut started = 0usize;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Submit { who, qos, gpus, cpus, mem, limit_min, nodes } => {
                let (user, account) = &w.users[who.index(w.users.len())];
                let q = &w.qos[usize::from(*qos)];
                let mut j = job(i as u64 + 1, user, account, q, (*gpus, *cpus, *mem), *limit_min);
                if *nodes > 1 {
                    j.request.nodes = Some(*nodes);
                    j.request.gpus_per_node = Some(gpus.div_ceil(*nodes).max(1));
                    j.request.gpus = j.request.gpus_per_node.unwrap() * nodes;
                    j.request.topology = TopologyKind::Any;
                }
                let _ = s.handle(Event::Submit(j), now);
            }
            Op::End(k) => {
                let ids: Vec<JobId> = s.running().keys().copied().collect();
                if !ids.is_empty() {
                    let _ = s.handle(Event::JobEnded(ids[k.index(ids.len())]), now);
                }
            }
            Op::Requalify(k) => {
                let ids: Vec<JobId> = s.pending_ids().collect();
                if !ids.is_empty() {
                    let mut spec = s.pending_spec(ids[k.index(ids.len())]).unwrap().clone();
                    spec.qos = if spec.qos == "normal" { "high".into() } else { "normal".into() };
                    let _ = s.handle(Event::Update(spec), now);
                }
            }
            Op::Tick => now += 60,
        }
        let before = s.running().len();
        let _ = s.cycle(now);
        started += s.running().len().saturating_sub(before);
        s.check_invariants().map_err(TestCaseError::fail)?;
        check_limits(&s, w).map_err(|e| TestCaseError::fail(format!("after {op:?}: {e}")))?;
    }
    Ok(started)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).map_or(256, |n: u32| n.min(2000))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// No cycle ever passes GrpTRES (per TRES), GrpJobs, MaxJobs, MaxTRESPerJob, MaxWall of
    /// any association, nor GrpTRES, GrpJobs, MaxJobsPerUser, MaxTRESPerUser, MaxTRESPerJob
    /// of any QOS.
    #[test]
    fn no_cycle_passes_an_accounting_limit(w in world(), ops in prop::collection::vec(op(), 1..50)) {
        run(&w, &ops)?;
    }
}

/// The property's checker catches a passed limit: the same world without enforcement
/// starts jobs past a limit, and the checker says so (the property can fail).
#[test]
fn the_checker_sees_a_passed_limit() {
    let mut a = base_assocs();
    a[2].limits.grp_jobs = Some(1);
    let mut acct = accounting(a, vec![]);
    let w = World { acct: acct.clone(), users: vec![("alice".into(), "research".into())], qos: vec!["normal".into()] };
    acct.enforce.limits = false;
    let mut s = sched(acct, 4);
    for id in 1..=2 {
        let _ = s.handle(Event::Submit(small(id, "alice")), 0);
    }
    let _ = s.cycle(0);
    assert_eq!(s.running().len(), 2);
    assert!(check_limits(&s, &w).unwrap_err().contains("GrpJobs"));
}

// ---- QOS preemption: Preempt= and PreemptExemptTime ----

/// Five 8-GPU nodes, all busy; QOS `low` and `high`, `high` with `Preempt=low`; a
/// preemptible 8-GPU job of `victim_qos` started at 0, then at `at` an 8-GPU job of `qos`:
/// the preemptions decided.
fn qos_preemption(victim_qos: &str, qos: &str, exempt_s: Option<u64>, at: u64) -> Vec<JobId> {
    let mut high = Qos::new("high");
    high.preempt = vec!["low".into()];
    let mut low = Qos::new("low");
    low.preempt_exempt_time_s = exempt_s;
    let mut s = sched(accounting(base_assocs(), vec![high, low]), 5);
    // Four nodes of other training keep the preemption within the budget (8 of 40 GPUs).
    for id in 11..15 {
        let _ = s.handle(Event::Submit(job(id, "carol", "other", "normal", (8, 1, 0), 600)), 0);
    }
    let mut first = job(1, "alice", "research", victim_qos, (8, 1, 0), 600);
    first.preemptible = true;
    let _ = s.handle(Event::Submit(first), 0);
    let _ = s.cycle(0);
    assert!(s.running().contains_key(&JobId(1)));
    let mut second = job(2, "bob", "research", qos, (8, 1, 0), 60);
    second.preemptible = true;
    let _ = s.handle(Event::Submit(second), at);
    let d = s.cycle(at);
    s.check_invariants().unwrap();
    d.iter()
        .filter_map(|d| match d {
            flotilla_core::sched::Decision::Preempt { job, for_job, .. } => {
                assert_eq!(*for_job, JobId(2));
                Some(*job)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_qos_preempt_list_lets_training_preempt_the_qos_listed_only() {
    assert_eq!(qos_preemption("low", "high", None, 1000), vec![JobId(1)], "high preempts low");
    assert!(qos_preemption("high", "low", None, 1000).is_empty(), "never the reverse");
    assert!(qos_preemption("normal", "high", None, 1000).is_empty(), "normal is not listed");
    assert!(qos_preemption("low", "high", None, 100).is_empty(), "within min_runtime_s (600 s)");
}

#[test]
fn preempt_exempt_time_of_the_qos_protects_a_young_job() {
    assert!(qos_preemption("low", "high", Some(2000), 1000).is_empty(), "1000 s < PreemptExemptTime=2000");
    assert_eq!(qos_preemption("low", "high", Some(2000), 2000), vec![JobId(1)]);
    // Shorter than min_runtime_s: the core's floor holds.
    assert!(qos_preemption("low", "high", Some(10), 100).is_empty());
}

/// A pending job's changed QOS (or account) is charged anew: held by `normal`'s
/// `GrpJobs=0`, it starts once moved to `high`; a new model (`set_accounting`) applies at the
/// next cycle.
#[test]
fn a_changed_job_or_model_is_charged_anew() {
    let mut normal = Qos::new("normal");
    normal.grp_jobs = Some(0);
    let mut s = sched(accounting(base_assocs(), vec![normal, Qos::new("high")]), 1);
    let _ = s.handle(Event::Submit(small(1, "alice")), 0);
    let _ = s.cycle(0);
    assert_eq!(s.pending_info(JobId(1)).unwrap().reason, Reason::QOSGrpJobsLimit);
    let mut moved = small(1, "alice");
    moved.qos = "high".into();
    let _ = s.handle(Event::Update(moved), 1);
    let _ = s.cycle(1);
    assert!(s.running().contains_key(&JobId(1)), "charged to high now");
    let _ = s.handle(Event::Submit(small(2, "bob")), 2);
    let _ = s.cycle(2);
    assert_eq!(s.pending_info(JobId(2)).unwrap().reason, Reason::QOSGrpJobsLimit);
    s.set_accounting(accounting(base_assocs(), vec![Qos::new("high")]));
    let _ = s.cycle(3);
    assert!(s.running().contains_key(&JobId(2)), "the new model has no GrpJobs");
}
