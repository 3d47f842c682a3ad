//! Accounting limits in the cycle (`AccountingStorageEnforce=limits`): a job starts only if
//! its association chain and its QOS stay within their limits; otherwise it waits with
//! Slurm's pending reason.
//!
//! What is counted (Slurm 22.05 `acct_policy.c`): the running jobs (service replicas left
//! out) of every association's subtree (`GrpTRES`, `GrpJobs`), of each user association
//! (`MaxJobs`), of each QOS (`GrpTRES`, `GrpJobs`) and of each (QOS, user) pair
//! (`MaxJobsPerUser`, `MaxTRESPerUser`). [`LimitUsage`] is counted once per cycle, at the
//! first job it is needed for, and kept up to date as the cycle starts jobs: one walk of the
//! running jobs and one walk up the chain per job started, whatever the tree's size.
//!
//! A job's TRES ([`Tres::of`]) are what it asks for (Slurm's `tres_req_cnt`): nodes `-N`,
//! else GPUs over `--gpus-per-node`, else 1; CPUs and memory per node times nodes; GPUs;
//! billing = CPUs (Slurm's billing without `TRESBillingWeights`). Running jobs are counted by
//! the same measure, so a limit holds exactly against it.
//!
//! The order of the checks, hence the reason shown, is Slurm's (`acct_policy_job_runnable_
//! pre_select`, then `_post_select`): QOS `GrpJobs`, `MaxJobsPerUser`, `MaxWall`; each
//! association up to the root `GrpJobs`, then the job's own association `MaxJobs`,
//! `MaxWall`; QOS `GrpTRES`, `MaxTRESPerJob`, `MaxTRESPerUser`; each association up to the
//! root `GrpTRES`, then the job's own `MaxTRESPerJob`. Within one TRES limit Slurm's TRES
//! order: cpu, mem, node, billing, gres/gpu. The job's own association's `MaxJobs`, `MaxWall`
//! and `MaxTRESPerJob` are inherited from the nearest ancestor setting them (Slurm
//! pre-propagates parents' limits); `GrpTRES` and `GrpJobs` count per level.
//!
//! Unlike Slurm, a QOS limit does not replace the association's limit of the same name:
//! both hold (the stricter wins).

use super::{Reason, Scheduler};
use crate::assoc::{Accounting, AssocId, Qos, TresLimits};
use crate::job::{JobId, JobSpec};
use std::collections::HashMap;

/// TRES counts of a job or a sum of jobs. Units: CPUs, MiB, nodes, GPUs, billing units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tres {
    /// CPUs.
    pub cpu: u64,
    /// Memory (MiB).
    pub mem_mb: u64,
    /// Nodes.
    pub node: u64,
    /// GPUs.
    pub gpu: u64,
    /// Billing units.
    pub billing: u64,
}

/// Which TRES a limit stopped a job on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cpu,
    Mem,
    Node,
    Billing,
    Gpu,
}

impl Tres {
    /// What `spec` asks for, as the limits count it (see the module doc).
    pub fn of(spec: &JobSpec) -> Tres {
        let r = &spec.request;
        let nodes = u64::from(
            r.nodes
                .or_else(|| r.gpus_per_node.filter(|g| *g > 0).map(|g| r.gpus.div_ceil(g)))
                .unwrap_or(1)
                .max(1),
        );
        let cpu = r.cpu_milli_per_node.div_ceil(1000) * nodes;
        Tres { cpu, mem_mb: r.mem_mib_per_node * nodes, node: nodes, gpu: u64::from(r.gpus), billing: cpu }
    }

    fn add(&mut self, o: &Tres) {
        self.cpu += o.cpu;
        self.mem_mb += o.mem_mb;
        self.node += o.node;
        self.gpu += o.gpu;
        self.billing += o.billing;
    }

    /// The first TRES, in Slurm's order, for which `self + add` passes `limit`.
    fn over(&self, add: &Tres, limit: &TresLimits) -> Option<Kind> {
        let pass = |used: u64, more: u64, lim: Option<u64>| lim.is_some_and(|l| used + more > l);
        if pass(self.cpu, add.cpu, limit.cpu) {
            Some(Kind::Cpu)
        } else if pass(self.mem_mb, add.mem_mb, limit.mem_mb) {
            Some(Kind::Mem)
        } else if pass(self.node, add.node, limit.node) {
            Some(Kind::Node)
        } else if pass(self.billing, add.billing, limit.billing) {
            Some(Kind::Billing)
        } else if pass(self.gpu, add.gpu, limit.gpu) {
            Some(Kind::Gpu)
        } else {
            None
        }
    }
}

/// Running TRES and jobs of one scope.
#[derive(Debug, Clone, Copy, Default)]
struct Used {
    tres: Tres,
    jobs: u32,
}

impl Used {
    fn add(&mut self, t: &Tres) {
        self.tres.add(t);
        self.jobs += 1;
    }
}

/// What the running jobs use, per association, QOS and (QOS, user); see the module doc.
#[derive(Debug, Default)]
pub(super) struct LimitUsage {
    /// By position in the tree: the subtree's running jobs.
    grp: Vec<Used>,
    /// By position in the tree: the association's own running jobs (`MaxJobs`).
    own_jobs: Vec<u32>,
    /// By QOS (index in the model's QOS, by name).
    qos: Vec<Used>,
    /// By user, then QOS index.
    qos_user: HashMap<String, Vec<Used>>,
}

/// Where a job is charged: its association's position in the tree (if any) and its QOS's
/// index in the model's QOS by name (`None`: a QOS the model does not have).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Charge {
    assoc: Option<usize>,
    qos: Option<usize>,
}

/// One association as the checks read it, by position: its parent's position and the
/// limits it inherits (`MaxJobs`, `MaxWall`, `MaxTRESPerJob`, each from the nearest
/// association up the chain that sets it).
#[derive(Debug, Clone)]
struct Node {
    parent: Option<usize>,
    max_jobs: Option<u32>,
    max_wall_min: Option<u32>,
    max_tres: TresLimits,
}

/// The fields a [`Charge`] was looked up from: user, account, partition, QOS.
type ChargeKey = (String, String, crate::cluster::PartId, String);

/// What the scheduler keeps between cycles for the limits: the tree's [`Node`]s (built at
/// the first cycle after `set_accounting`) and each job's [`Charge`] with the fields it was
/// looked up from, so a cycle looks associations up only for new or changed jobs.
#[derive(Debug, Default)]
pub(super) struct LimitCache {
    nodes: Option<Vec<Node>>,
    charges: HashMap<JobId, (ChargeKey, Charge)>,
}

impl LimitCache {
    /// Forgets everything (the accounting model changed).
    pub(super) fn clear(&mut self) {
        *self = LimitCache::default();
    }
}

impl Accounting {
    /// Whether the cycle checks jobs against the model: an association tree is set and
    /// `AccountingStorageEnforce` has `associations`, `limits`, `qos` or `safe`.
    pub fn checks_jobs(&self) -> bool {
        let e = &self.enforce;
        !self.tree.is_empty() && (e.associations || e.limits || e.qos || e.safe)
    }

    fn limits_on(&self) -> bool {
        self.enforce.limits || self.enforce.safe
    }

    /// The tree's nodes by position (parents come before children).
    fn nodes(&self) -> Vec<Node> {
        let t = &self.tree;
        let mut out: Vec<Node> = Vec::with_capacity(t.len());
        for a in t.assocs() {
            let parent = a.parent.and_then(|p| t.position(p));
            let (pj, pw, pt) = parent.map_or((None, None, TresLimits::default()), |p| (out[p].max_jobs, out[p].max_wall_min, out[p].max_tres));
            let m = &a.limits.max_tres_per_job;
            out.push(Node {
                parent,
                max_jobs: a.limits.max_jobs.or(pj),
                max_wall_min: a.limits.max_wall_min.or(pw),
                max_tres: TresLimits {
                    cpu: m.cpu.or(pt.cpu),
                    mem_mb: m.mem_mb.or(pt.mem_mb),
                    node: m.node.or(pt.node),
                    gpu: m.gpu.or(pt.gpu),
                    billing: m.billing.or(pt.billing),
                },
            });
        }
        out
    }
}

impl Scheduler {
    /// Where `spec` is charged: the association of (user, account, partition) as Slurm picks
    /// it ([`crate::assoc::AssocTree::find`]), and its QOS (its own, else the association's
    /// `DefaultQOS`, else `normal`). Cached per job while those fields stay the same.
    fn charge_of(&mut self, spec: &JobSpec) -> Charge {
        if let Some(c) = self.cached_charge(spec) {
            return c;
        }
        let part = self.cluster.partitions.get(spec.partition.0 as usize).map(|p| p.name.as_str());
        let tree = &self.accounting.tree;
        let assoc = tree.find(&spec.user, &spec.account, part).map(|a| a.id);
        let qos = if !spec.qos.is_empty() {
            spec.qos.clone()
        } else {
            assoc.map_or(crate::job::DEFAULT_QOS, |a| tree.default_qos(a)).to_string()
        };
        let qos = self.accounting.qos.keys().position(|q| *q == qos);
        let c = Charge { assoc: assoc.and_then(|a| tree.position(a)), qos };
        let key = (spec.user.clone(), spec.account.clone(), spec.partition, spec.qos.clone());
        self.limit_cache.charges.insert(spec.id, (key, c));
        c
    }

    /// `spec`'s cached [`Charge`], if its fields are those it was looked up from.
    fn cached_charge(&self, spec: &JobSpec) -> Option<Charge> {
        let ((u, a, p, q), c) = self.limit_cache.charges.get(&spec.id)?;
        (*u == spec.user && *a == spec.account && *p == spec.partition && *q == spec.qos).then_some(*c)
    }

    /// The charge of running or pending job `id` (looked up and cached when new or changed).
    fn charge_of_id(&mut self, id: JobId) -> Option<Charge> {
        let spec = self.pending.get(&id).map(|p| &p.spec).or_else(|| self.running.get(&id).map(|r| &r.spec))?;
        if let Some(c) = self.cached_charge(spec) {
            return Some(c);
        }
        let spec = spec.clone();
        Some(self.charge_of(&spec))
    }

    /// Counts what the running jobs (replicas left out) use: once per cycle. Also builds the
    /// tree's nodes after a new model and forgets the charges of jobs that left.
    pub(super) fn limit_usage(&mut self) -> LimitUsage {
        if self.limit_cache.nodes.is_none() {
            self.limit_cache.nodes = Some(self.accounting.nodes());
        }
        let live = self.pending.len() + self.running.len();
        if self.limit_cache.charges.len() > 2 * live + 1024 {
            let (pending, running) = (&self.pending, &self.running);
            self.limit_cache.charges.retain(|id, _| pending.contains_key(id) || running.contains_key(id));
        }
        let n = self.accounting.tree.len();
        let q = self.accounting.qos.len();
        let mut u = LimitUsage { grp: vec![Used::default(); n], own_jobs: vec![0; n], qos: vec![Used::default(); q], ..LimitUsage::default() };
        let ids: Vec<JobId> = self
            .running
            .iter()
            .filter(|(id, r)| !self.replica_service.contains_key(id) && r.service().is_none())
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(c) = self.charge_of_id(id) {
                self.record_start(&mut u, &c, &self.running[&id].spec);
            }
        }
        u
    }

    /// Adds a started job to `u` (at counting, and for each job the cycle starts).
    pub(super) fn record_start(&self, u: &mut LimitUsage, c: &Charge, spec: &JobSpec) {
        let t = Tres::of(spec);
        let nodes = self.limit_cache.nodes.as_deref().unwrap_or(&[]);
        if let Some(own) = c.assoc.filter(|p| *p < nodes.len()) {
            u.own_jobs[own] += 1;
            let mut cur = Some(own);
            while let Some(p) = cur {
                u.grp[p].add(&t);
                cur = nodes[p].parent;
            }
        }
        if let Some(q) = c.qos.filter(|q| *q < u.qos.len()) {
            u.qos[q].add(&t);
            let n = u.qos.len();
            match u.qos_user.get_mut(&spec.user) {
                Some(v) => v[q].add(&t),
                None => {
                    let mut v = vec![Used::default(); n];
                    v[q].add(&t);
                    u.qos_user.insert(spec.user.clone(), v);
                }
            }
        }
    }

    /// Why `spec` (charged as `c`) may not start now under the accounting limits, in Slurm's
    /// order (module doc); `None` when it may. Also `InvalidAccount` (no association, with
    /// `associations` enforced) and `InvalidQOS` (an unknown QOS, with `qos` enforced).
    fn limit_reason(&self, spec: &JobSpec, c: &Charge, u: &LimitUsage) -> Option<Reason> {
        let acct = &self.accounting;
        let qos = c.qos.and_then(|q| acct.qos.values().nth(q));
        if c.assoc.is_none() && acct.enforce.associations {
            return Some(Reason::InvalidAccount);
        }
        if qos.is_none() && acct.enforce.qos {
            return Some(Reason::InvalidQOS);
        }
        if !acct.limits_on() {
            return None;
        }
        let t = Tres::of(spec);
        let wall_min = spec.time_limit_s.map(|s| s.div_ceil(60));
        let over_wall = |max: Option<u32>| max.is_some_and(|m| wall_min.is_none_or(|w| w > u64::from(m)));
        let none = Used::default();
        let qu = c.qos.and_then(|q| u.qos.get(q)).unwrap_or(&none);
        let quu = c.qos.and_then(|q| u.qos_user.get(&spec.user)?.get(q)).unwrap_or(&none);
        let nodes = self.limit_cache.nodes.as_deref().unwrap_or(&[]);
        let assocs = acct.tree.assocs();
        let own = c.assoc.filter(|p| *p < nodes.len());
        let chain = |start: Option<usize>| {
            let mut cur = start;
            std::iter::from_fn(move || {
                let p = cur?;
                cur = nodes[p].parent;
                Some(p)
            })
        };
        // Pre-select: the QOS, then the chain's job counts and the wall.
        if let Some(r) = qos.and_then(|q| qos_pre_select(q, qu, quu, &over_wall)) {
            return Some(r);
        }
        if chain(own).any(|p| assocs[p].limits.grp_jobs.is_some_and(|m| u.grp[p].jobs >= m)) {
            return Some(Reason::AssocGrpJobsLimit);
        }
        if let Some(o) = own {
            if nodes[o].max_jobs.is_some_and(|m| u.own_jobs[o] >= m) {
                return Some(Reason::AssocMaxJobsLimit);
            }
            if over_wall(nodes[o].max_wall_min) {
                return Some(Reason::AssocMaxWallDurationPerJobLimit);
            }
        }
        // Post-select: the QOS's TRES, then the chain's.
        if let Some(q) = qos {
            if let Some(k) = qu.tres.over(&t, &q.grp_tres) {
                return Some(qos_grp(k));
            }
            if let Some(k) = Tres::default().over(&t, &q.max_tres_per_job) {
                return Some(qos_per_job(k));
            }
            if let Some(k) = quu.tres.over(&t, &q.max_tres_per_user) {
                return Some(qos_per_user(k));
            }
        }
        if let Some(k) = chain(own).find_map(|p| u.grp[p].tres.over(&t, &assocs[p].limits.grp_tres)) {
            return Some(assoc_grp(k));
        }
        if let Some(k) = own.and_then(|o| Tres::default().over(&t, &nodes[o].max_tres)) {
            return Some(assoc_per_job(k));
        }
        None
    }

    /// The accounting-limits gate of the cycle for pending job `id`: `Err(reason)` when it
    /// must wait, else `Ok(charge)` to record once it starts. Service replicas pass.
    pub(super) fn limits_gate(&mut self, id: JobId, u: &LimitUsage) -> Result<Option<Charge>, Reason> {
        if self.replica_service.contains_key(&id) {
            return Ok(None);
        }
        let Some(c) = self.charge_of_id(id) else { return Ok(None) };
        match self.limit_reason(&self.pending[&id].spec, &c, u) {
            Some(r) => Err(r),
            None => Ok(Some(c)),
        }
    }
}

/// Slurm's `_qos_job_runnable_pre_select`: `GrpJobs`, `MaxJobsPerUser`, `MaxWall`.
fn qos_pre_select(q: &Qos, qu: &Used, quu: &Used, over_wall: &dyn Fn(Option<u32>) -> bool) -> Option<Reason> {
    if q.grp_jobs.is_some_and(|m| qu.jobs >= m) {
        Some(Reason::QOSGrpJobsLimit)
    } else if q.max_jobs_per_user.is_some_and(|m| quu.jobs >= m) {
        Some(Reason::QOSMaxJobsPerUserLimit)
    } else if over_wall(q.max_wall_min) {
        Some(Reason::QOSMaxWallDurationPerJobLimit)
    } else {
        None
    }
}

/// The job's own association's `MaxTRESPerJob`, each TRES inherited on its own.
fn inherited_tres(acct: &Accounting, a: AssocId) -> TresLimits {
    let t = &acct.tree;
    TresLimits {
        cpu: t.inherited(a, |x| x.limits.max_tres_per_job.cpu),
        mem_mb: t.inherited(a, |x| x.limits.max_tres_per_job.mem_mb),
        node: t.inherited(a, |x| x.limits.max_tres_per_job.node),
        gpu: t.inherited(a, |x| x.limits.max_tres_per_job.gpu),
        billing: t.inherited(a, |x| x.limits.max_tres_per_job.billing),
    }
}

fn assoc_grp(k: Kind) -> Reason {
    match k {
        Kind::Cpu => Reason::AssocGrpCpuLimit,
        Kind::Mem => Reason::AssocGrpMemLimit,
        Kind::Node => Reason::AssocGrpNodeLimit,
        Kind::Billing => Reason::AssocGrpBilling,
        Kind::Gpu => Reason::AssocGrpGRES,
    }
}

fn assoc_per_job(k: Kind) -> Reason {
    match k {
        Kind::Cpu => Reason::AssocMaxCpuPerJobLimit,
        Kind::Mem => Reason::AssocMaxMemPerJob,
        Kind::Node => Reason::AssocMaxNodePerJobLimit,
        Kind::Billing => Reason::AssocMaxBillingPerJob,
        Kind::Gpu => Reason::AssocMaxGRESPerJob,
    }
}

fn qos_grp(k: Kind) -> Reason {
    match k {
        Kind::Cpu => Reason::QOSGrpCpuLimit,
        Kind::Mem => Reason::QOSGrpMemLimit,
        Kind::Node => Reason::QOSGrpNodeLimit,
        Kind::Billing => Reason::QOSGrpBilling,
        Kind::Gpu => Reason::QOSGrpGRES,
    }
}

fn qos_per_job(k: Kind) -> Reason {
    match k {
        Kind::Cpu => Reason::QOSMaxCpuPerJobLimit,
        Kind::Mem => Reason::QOSMaxMemoryPerJob,
        Kind::Node => Reason::QOSMaxNodePerJobLimit,
        Kind::Billing => Reason::QOSMaxBillingPerJob,
        Kind::Gpu => Reason::QOSMaxGRESPerJob,
    }
}

fn qos_per_user(k: Kind) -> Reason {
    match k {
        Kind::Cpu => Reason::QOSMaxCpuPerUserLimit,
        Kind::Mem => Reason::QOSMaxMemoryPerUser,
        Kind::Node => Reason::QOSMaxNodePerUserLimit,
        Kind::Billing => Reason::QOSMaxBillingPerUser,
        Kind::Gpu => Reason::QOSMaxGRESPerUser,
    }
}

/// Jobs (pending and running, each array task one) already charged where a new submission
/// would be, for [`submit_violation`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubmitCounts {
    /// Of the job's QOS.
    pub qos: u32,
    /// Of the job's QOS and user.
    pub qos_user: u32,
    /// Of each association of the chain's subtree, nearest (the job's own) first.
    pub chain: Vec<u32>,
    /// Of the job's own association.
    pub own: u32,
    /// Jobs the submission adds (an array's task count, else 1).
    pub new: u32,
}

/// Slurm 22.05's submission check (`acct_policy_validate`, from `job_mgr.c` `_job_create`)
/// of `spec` charged to association `assoc` with QOS `qos` (`None`: no such QOS), given
/// `counts`: the reason it is refused with `ESLURM_ACCOUNTING_POLICY`, `None` to accept.
///
/// Job counts always refuse: QOS `GrpSubmitJobs` (`QOSGrpSubmitJobsLimit`) and
/// `MaxSubmitJobsPerUser` (`QOSMaxSubmitJobPerUserLimit`), association `GrpSubmit` at each
/// level (`AssocGrpSubmitJobsLimit`) and the inherited `MaxSubmitJobs`
/// (`AssocMaxSubmitJobLimit`). Size and time (a request alone above a `GrpTRES`, above
/// `MaxTRESPerJob`, a time limit above `MaxWall`) refuse only under strict checking: the QOS
/// has `Flags=DenyOnLimit`, or the job has no QOS; otherwise the job is accepted and pends
/// with the reason ([`Scheduler::cycle`]). Order: the QOS's, then each association's up to
/// the root, as Slurm's `_qos_policy_validate` and the association loop.
pub fn submit_violation(acct: &Accounting, spec: &JobSpec, assoc: AssocId, qos: Option<&Qos>, counts: &SubmitCounts) -> Option<Reason> {
    let strict = qos.is_none_or(|q| q.flags.iter().any(|f| f.eq_ignore_ascii_case("DenyOnLimit")));
    let t = Tres::of(spec);
    let zero = Tres::default();
    let wall_min = spec.time_limit_s.map(|s| s.div_ceil(60));
    let over_wall = |max: Option<u32>| max.is_some_and(|m| wall_min.is_none_or(|w| w > u64::from(m)));
    if let Some(q) = qos {
        if let Some(k) = zero.over(&t, &q.grp_tres).filter(|_| strict) {
            return Some(qos_grp(k));
        }
        if q.grp_submit.is_some_and(|m| counts.qos + counts.new > m) {
            return Some(Reason::QOSGrpSubmitJobsLimit);
        }
        if strict && over_wall(q.max_wall_min) {
            return Some(Reason::QOSMaxWallDurationPerJobLimit);
        }
        if let Some(k) = zero.over(&t, &q.max_tres_per_job).filter(|_| strict) {
            return Some(qos_per_job(k));
        }
        if q.max_submit_jobs_per_user.is_some_and(|m| counts.qos_user + counts.new > m) {
            return Some(Reason::QOSMaxSubmitJobPerUserLimit);
        }
    }
    let tree = &acct.tree;
    for (i, a) in tree.ancestry(assoc).enumerate() {
        if let Some(k) = zero.over(&t, &a.limits.grp_tres).filter(|_| strict) {
            return Some(assoc_grp(k));
        }
        let used = counts.chain.get(i).copied().unwrap_or(0);
        if a.limits.grp_submit.is_some_and(|m| used + counts.new > m) {
            return Some(Reason::AssocGrpSubmitJobsLimit);
        }
    }
    if let Some(k) = zero.over(&t, &inherited_tres(acct, assoc)).filter(|_| strict) {
        return Some(assoc_per_job(k));
    }
    if tree.inherited(assoc, |a| a.limits.max_submit_jobs).is_some_and(|m| counts.own + counts.new > m) {
        return Some(Reason::AssocMaxSubmitJobLimit);
    }
    if strict && over_wall(tree.inherited(assoc, |a| a.limits.max_wall_min)) {
        return Some(Reason::AssocMaxWallDurationPerJobLimit);
    }
    None
}

/// The time limit Slurm gives a job that has none (`_validate_time_limit`, `limit_set`):
/// the smallest `MaxWall` of its QOS and association (inherited), in minutes; `None` when
/// neither sets one.
pub fn default_wall_min(acct: &Accounting, assoc: AssocId, qos: Option<&Qos>) -> Option<u32> {
    let a = acct.tree.inherited(assoc, |x| x.limits.max_wall_min);
    match (a, qos.and_then(|q| q.max_wall_min)) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}
