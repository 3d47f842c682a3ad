//! Fair-share usage in the scheduler: running allocations accrue usage to their association
//! and its ancestors at each order stage, the Fair Tree is recomputed over it, and each
//! pending job's multifactor inputs ([`FactorInput`]) are read from it.

use super::{FactorInput, PriorityFactors, PriorityInput, RunningJob, Scheduler};
use crate::assoc::{Accounting, AssocId};
use crate::cluster::{Cluster, Time};
use crate::fairshare::{self, FairTree, TresAlloc, Usage, UsageConfig};
use crate::job::{JobId, JobSpec};

/// The totals the factors divide by, taken once per order stage: the cluster's nodes and
/// CPUs (job size) and the largest association priority (association factor).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Totals {
    nodes: u32,
    cpus: u64,
    max_assoc_priority: u32,
}

impl Totals {
    pub(super) fn of(cluster: &Cluster, acct: &Accounting) -> Totals {
        Totals {
            nodes: u32::try_from(cluster.nodes.len()).unwrap_or(u32::MAX),
            cpus: cluster.nodes.iter().map(|n| n.cpu_milli / 1000).sum(),
            max_assoc_priority: acct.tree.assocs().iter().filter_map(|a| a.priority).max().unwrap_or(0),
        }
    }
}

/// The association a job runs under (Slurm `assoc_mgr_fill_in_assoc`), if accounting has
/// one for it.
pub(super) fn job_assoc(acct: &Accounting, cluster: &Cluster, spec: &JobSpec) -> Option<AssocId> {
    let part = cluster.partitions.get(spec.partition.0 as usize).map(|p| p.name.as_str());
    acct.tree.find(&spec.user, &spec.account, part).map(|a| a.id)
}

/// The QOS priority factor and usage factor of a job of QOS `name` (`JobSpec::qos`: its
/// `--qos`, else its association's default QOS, else `normal`, resolved at submission);
/// (0, 1) when that QOS is not known.
fn job_qos(acct: &Accounting, name: &str) -> (f64, f64) {
    let max = acct.qos.values().map(|q| q.priority).max().unwrap_or(0);
    match acct.qos.get(name) {
        Some(q) if max > 0 => (f64::from(q.priority) / f64::from(max), q.usage_factor),
        Some(q) => (0.0, q.usage_factor),
        None => (0.0, 1.0),
    }
}

/// What a job's multifactor inputs read of accounting: its association, that association's
/// inherited `Priority` and its QOS priority factor. They move only with the accounting in
/// force ([`Scheduler::set_accounting`]) or the job's spec (user, account, partition, QOS), so
/// the order stage keeps them per pending job, stamped with the accounting's generation
/// (`PendingJob::acct`), instead of resolving the association again every cycle (two lookups
/// of owned string keys per job in a tree that is not empty).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct JobAcct {
    /// `Scheduler::acct_gen` when resolved.
    pub(super) gen: u64,
    /// The job's association ([`job_assoc`]).
    pub(super) assoc: Option<AssocId>,
    /// Its inherited `Priority` (0 when unset or without association).
    pub(super) assoc_prio: u32,
    /// The QOS priority factor in [0, 1] ([`job_qos`]).
    pub(super) qos: f64,
}

impl JobAcct {
    /// Resolves `spec`'s accounting inputs against `acct` (generation `gen`).
    pub(super) fn of(acct: &Accounting, cluster: &Cluster, spec: &JobSpec, gen: u64) -> JobAcct {
        let assoc = job_assoc(acct, cluster, spec);
        JobAcct {
            gen,
            assoc,
            assoc_prio: assoc.and_then(|id| acct.tree.inherited(id, |a| a.priority)).unwrap_or(0),
            qos: job_qos(acct, &spec.qos).0,
        }
    }
}

/// The multifactor inputs of `spec` (see [`FactorInput`]).
pub(super) fn factor_input(
    acct: &Accounting,
    fair: &FairTree,
    config: &UsageConfig,
    cluster: &Cluster,
    totals: Totals,
    spec: &JobSpec,
) -> FactorInput {
    factor_input_with(JobAcct::of(acct, cluster, spec, 0), fair, config, totals, spec)
}

/// The multifactor inputs of `spec`, whose accounting inputs are `ja` (see [`FactorInput`]).
pub(super) fn factor_input_with(ja: JobAcct, fair: &FairTree, config: &UsageConfig, totals: Totals, spec: &JobSpec) -> FactorInput {
    let max_assoc = totals.max_assoc_priority;
    let nodes = spec.request.nodes.unwrap_or(1).max(1);
    FactorInput {
        fair_share: ja.assoc.map_or(0.0, |id| fair.factor(id)),
        assoc: if max_assoc > 0 { f64::from(ja.assoc_prio) / f64::from(max_assoc) } else { 0.0 },
        qos: ja.qos,
        partition: config.partition_factor(spec.partition.0 as usize),
        job_nodes: nodes,
        job_cpus: spec.request.cpu_milli_per_node.div_ceil(1000) * u64::from(nodes),
        cluster_nodes: totals.nodes,
        cluster_cpus: totals.cpus,
    }
}

impl Scheduler {
    /// Sets the usage settings (`PriorityDecayHalfLife`, `PriorityUsageResetPeriod`,
    /// billing weights per partition); see [`UsageConfig::from_config`].
    pub fn set_usage_config(&mut self, config: UsageConfig) {
        self.usage_config = config;
    }

    /// The usage settings in force.
    pub fn usage_config(&self) -> &UsageConfig {
        &self.usage_config
    }

    /// Decayed raw usage per association, as of the last order stage (what the controller
    /// persists).
    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    /// Restores usage saved before a restart, then applies `PriorityUsageResetPeriod=NOW`
    /// and recomputes the Fair Tree. Time since the saved update decays it at the next cycle.
    pub fn restore_usage(&mut self, usage: Usage, now: Time) {
        self.usage = usage;
        self.usage.on_start(&self.usage_config, now);
        self.fair = fairshare::fair_tree(&self.accounting.tree, &self.usage);
    }

    /// The Fair Tree over the current usage (`sshare`), as of the last order stage.
    pub fn fair_tree(&self) -> &FairTree {
        &self.fair
    }

    /// The association a running job charges and its rate: billing per second (partition
    /// `TRESBillingWeights`, else CPUs) × its QOS `UsageFactor`; `None` without association.
    fn usage_rate(&self, r: &RunningJob) -> Option<(AssocId, f64)> {
        let assoc = job_assoc(&self.accounting, &self.cluster, &r.spec)?;
        let mut alloc = TresAlloc::default();
        for a in &r.allocs {
            alloc.cpus += a.part.cpu_milli as f64 / 1000.0;
            alloc.mem_mib += a.part.mem_mib as f64;
            alloc.nodes += 1.0;
            alloc.gpus += f64::from(a.part.gpus.count()) * f64::from(a.part.gpu_milli) / 1000.0;
        }
        let weights = self.usage_config.billing.get(r.spec.partition.0 as usize).and_then(Option::as_ref);
        let (_, usage_factor) = job_qos(&self.accounting, &r.spec.qos);
        Some((assoc, fairshare::billing(weights, &alloc) * usage_factor))
    }

    /// Brings usage up to `now` (reset, decay, then each running job charged its billing ×
    /// QOS `UsageFactor` × the seconds it ran since the last update) and recomputes the Fair
    /// Tree. Charges go to the job's association and its ancestors; a job without an
    /// association accrues nothing.
    pub(super) fn update_usage(&mut self, now: Time) {
        let since = self.usage.last_update;
        let dt = self.usage.advance(&self.usage_config, now);
        if dt > 0 && !self.accounting.tree.is_empty() {
            let since = since.unwrap_or(now);
            let charges: Vec<(AssocId, f64)> = self
                .running
                .values()
                .filter_map(|r| {
                    let ran = now.saturating_sub(since.max(r.start));
                    let (assoc, rate) = self.usage_rate(r)?;
                    (ran > 0).then_some((assoc, rate * ran as f64))
                })
                .collect();
            for (assoc, amount) in charges {
                self.usage.charge(&self.accounting.tree, assoc, amount);
            }
        }
        if dt > 0 || self.fair_stale || self.fair.rows.len() != self.accounting.tree.len() {
            self.fair = fairshare::fair_tree(&self.accounting.tree, &self.usage);
            self.fair_stale = false;
        }
    }

    /// Before running job `id` leaves at `now` (ended, cancelled, requeued): charges the run
    /// time since the last update, which the next order stage no longer sees. The amount is
    /// put in the frame of the last update (× `2^(Δt/half_life)`), so that the next update's
    /// decay over the whole interval leaves it undecayed at `now`.
    pub(super) fn charge_ending(&mut self, id: JobId, now: Time) {
        let Some(last) = self.usage.last_update else { return };
        if self.accounting.tree.is_empty() || now <= last {
            return;
        }
        let Some(r) = self.running.get(&id) else { return };
        let ran = now.saturating_sub(last.max(r.start));
        let Some((assoc, rate)) = self.usage_rate(r) else { return };
        if ran == 0 {
            return;
        }
        let mut amount = rate * ran as f64;
        if self.usage_config.half_life_s > 0 {
            amount /= fairshare::decay_factor(now - last, self.usage_config.half_life_s);
        }
        self.usage.charge(&self.accounting.tree, assoc, amount);
        self.fair_stale = true;
    }

    /// The priority a pending job would have at `now` and, for a policy with factors, the
    /// weighted factors (`sprio`); `None` for a job that is not pending. The same numbers
    /// the order stage ranks with.
    pub fn priority_of(&self, job: JobId, now: Time) -> Option<(u64, Option<PriorityFactors>)> {
        let p = self.pending.get(&job)?;
        if self.replica_service.contains_key(&job) {
            return Some((p.priority, None));
        }
        let part = self.cluster.partitions.get(p.spec.partition.0 as usize)?;
        let input = PriorityInput {
            job: &p.spec,
            failed_cycles: self.failed_cycles_of(job, p),
            partition: part,
            now,
            factors: factor_input(
                &self.accounting,
                &self.fair,
                &self.usage_config,
                &self.cluster,
                Totals::of(&self.cluster, &self.accounting),
                &p.spec,
            ),
        };
        Some((self.priority.priority(input), self.priority.factors(input)))
    }

    /// The priority policy's name (`PriorityType`).
    pub fn priority_name(&self) -> &str {
        self.priority.name()
    }

    /// The priority policy's weights (`sprio -w`).
    pub fn priority_weights(&self) -> Option<PriorityFactors> {
        self.priority.weights()
    }
}
