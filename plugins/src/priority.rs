//! Priority plugins.

use flotilla_core::config::PriorityConf;
use flotilla_core::sched::{PriorityFactors, PriorityInput, PriorityPolicy};

/// Weights of the multifactor priority: Slurm's `priority/multifactor` factors (each in
/// [0, 1] times its `PriorityWeight*`, all 0 by default as in Slurm), plus Flotilla's aging
/// per minute waited, per partition tier, per failed placement cycle and per preemption. All
/// terms are added; nice is subtracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultifactorWeights {
    /// Points per minute waited (Flotilla's aging), capped by `age_max_min`.
    pub age_per_min: u64,
    /// Age cap in minutes (7 days).
    pub age_max_min: u64,
    /// Points per partition `PriorityTier` step.
    pub partition: u64,
    /// Points per failed placement cycle (Flotilla aging).
    pub per_failed_cycle: u64,
    /// Cap on the failed-cycle bonus.
    pub failed_cycle_max: u64,
    /// Points per preemption suffered (Flotilla's starvation guard).
    pub per_preemption: u64,
    /// Points per unit of the job's base priority (admin/QOS priority).
    pub base: u64,
    /// Slurm `PriorityWeightAge`.
    pub weight_age: u64,
    /// Slurm `PriorityMaxAge` in seconds: the wait at which the age factor is 1.
    pub max_age_s: u64,
    /// Slurm `PriorityWeightAssoc`.
    pub weight_assoc: u64,
    /// Slurm `PriorityWeightFairshare`.
    pub weight_fairshare: u64,
    /// Slurm `PriorityWeightJobSize`.
    pub weight_job_size: u64,
    /// Slurm `PriorityFavorSmall`.
    pub favor_small: bool,
    /// Slurm `PriorityWeightPartition`.
    pub weight_partition: u64,
    /// Slurm `PriorityWeightQOS`.
    pub weight_qos: u64,
}

impl Default for MultifactorWeights {
    fn default() -> Self {
        MultifactorWeights {
            age_per_min: 1,
            age_max_min: 7 * 24 * 60,
            partition: 100_000,
            per_failed_cycle: 2,
            failed_cycle_max: 200_000,
            per_preemption: 20_000,
            base: 1,
            weight_age: 0,
            max_age_s: 7 * 86_400,
            weight_assoc: 0,
            weight_fairshare: 0,
            weight_job_size: 0,
            favor_small: false,
            weight_partition: 0,
            weight_qos: 0,
        }
    }
}

impl MultifactorWeights {
    /// Flotilla's defaults with Slurm's weights from slurm.conf's `Priority*` keys.
    pub fn from_conf(p: &PriorityConf) -> MultifactorWeights {
        MultifactorWeights {
            weight_age: u64::from(p.weight_age),
            max_age_s: p.max_age_s,
            weight_assoc: u64::from(p.weight_assoc),
            weight_fairshare: u64::from(p.weight_fairshare),
            weight_job_size: u64::from(p.weight_job_size),
            favor_small: p.favor_small,
            weight_partition: u64::from(p.weight_partition),
            weight_qos: u64::from(p.weight_qos),
            ..MultifactorWeights::default()
        }
    }
}

/// Flotilla's multifactor priority: Slurm's weighted factors (`priority_multifactor.c`
/// `_get_priority_internal`: age, association, fair share, job size, partition, QOS), plus
/// base, Flotilla's age, partition tier, aging per failed cycle and per preemption, − nice. The
/// aging terms are strong enough to cross classes: a job failing 50,000 cycles (about 2 days
/// at one cycle per 3 s) or preempted 5 times gains 100,000 points, a partition tier.
#[derive(Debug, Default, Clone, Copy)]
pub struct Multifactor {
    /// The weight of each factor.
    pub weights: MultifactorWeights,
}

impl Multifactor {
    /// Slurm's factors of `i`, each in [0, 1] (`set_priority_factors`): age = wait since
    /// submission or `--begin` over `PriorityMaxAge` (capped at 1); job size = the mean of the
    /// node and CPU fractions of the cluster (their complements with `PriorityFavorSmall`);
    /// the others as the core computed them ([`flotilla_core::sched::FactorInput`]).
    fn slurm_factors(&self, i: &PriorityInput<'_>) -> PriorityFactors {
        let w = &self.weights;
        let f = &i.factors;
        let eligible = i.job.begin_time.unwrap_or(0).max(i.job.submit_time);
        let age = match w.max_age_s {
            0 => 1.0,
            max => (i.now.saturating_sub(eligible) as f64 / max as f64).min(1.0),
        };
        let job_size = if f.cluster_nodes == 0 {
            0.0
        } else {
            let nodes = f64::from(f.job_nodes.min(f.cluster_nodes)) / f64::from(f.cluster_nodes);
            let cpus = if f.cluster_cpus > 0 { (f.job_cpus.min(f.cluster_cpus)) as f64 / f.cluster_cpus as f64 } else { 0.0 };
            let (nodes, cpus) = if w.favor_small { (1.0 - nodes, 1.0 - cpus) } else { (nodes, cpus) };
            if f.job_cpus > 0 { (nodes + cpus) / 2.0 } else { nodes }
        };
        PriorityFactors {
            age: age * w.weight_age as f64,
            assoc: f.assoc * w.weight_assoc as f64,
            fairshare: f.fair_share * w.weight_fairshare as f64,
            job_size: job_size.clamp(0.0, 1.0) * w.weight_job_size as f64,
            partition: f.partition * w.weight_partition as f64,
            qos: f.qos * w.weight_qos as f64,
            nice: i64::from(i.job.nice),
            site: 0.0,
        }
    }

    /// Flotilla's own terms: 1,000,000 + base + age per minute + tier + failed cycles +
    /// preemptions (an operator's `SiteFactor=` is added to them by the caller, with its
    /// sign).
    fn flotilla_terms(&self, i: &PriorityInput<'_>) -> u64 {
        let w = &self.weights;
        let age_min = i.now.saturating_sub(i.job.submit_time) / 60;
        let age = age_min.min(w.age_max_min) * w.age_per_min;
        let tier = u64::from(i.partition.priority_tier) * w.partition;
        let failed = (u64::from(i.failed_cycles) * w.per_failed_cycle).min(w.failed_cycle_max);
        let pre = u64::from(i.job.preempt_count) * w.per_preemption;
        let base = u64::from(i.job.base_priority) * w.base;
        1_000_000 + base + age + tier + failed + pre
    }
}

impl PriorityPolicy for Multifactor {
    fn name(&self) -> &str {
        "priority/multifactor"
    }

    fn priority(&self, i: PriorityInput<'_>) -> u64 {
        let f = self.slurm_factors(&i);
        let slurm = (f.age + f.assoc + f.fairshare + f.job_size + f.partition + f.qos) as u64;
        let total = self.flotilla_terms(&i) + slurm;
        // Slurm 22.05 `_get_priority_internal`: the site factor is added, the nice value
        // taken away, unweighted; never below 0.
        let signed = i64::try_from(total).unwrap_or(i64::MAX) + i64::from(i.job.site_factor) - i64::from(i.job.nice);
        signed.max(0) as u64
    }

    fn factors(&self, i: PriorityInput<'_>) -> Option<PriorityFactors> {
        let mut f = self.slurm_factors(&i);
        f.site = self.flotilla_terms(&i) as f64 + f64::from(i.job.site_factor);
        Some(f)
    }

    fn weights(&self) -> Option<PriorityFactors> {
        let w = &self.weights;
        Some(PriorityFactors {
            age: w.weight_age as f64,
            assoc: w.weight_assoc as f64,
            fairshare: w.weight_fairshare as f64,
            job_size: w.weight_job_size as f64,
            partition: w.weight_partition as f64,
            qos: w.weight_qos as f64,
            nice: 0,
            site: 0.0,
        })
    }
}

/// Slurm's `priority/basic`: first come, first served (older submissions first); the core
/// breaks ties by submit time and job id, so a constant is FIFO.
#[derive(Debug, Default, Clone, Copy)]
pub struct Basic;

impl PriorityPolicy for Basic {
    fn name(&self) -> &str {
        "priority/basic"
    }
    fn priority(&self, i: PriorityInput<'_>) -> u64 {
        u64::from(i.job.base_priority)
    }
    fn uses_factors(&self) -> bool {
        false
    }
    fn is_static(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_core::cluster::Cluster;
    use flotilla_core::config::TopologyKind;
    use flotilla_core::job::{JobSpec, Request};

    #[test]
    fn aging_crosses_priority_classes() {
        let c = Cluster::uniform(1, 8, 1, 64, 1024);
        let mut high_part = c.partitions[0].clone();
        high_part.priority_tier = 2;
        let low = JobSpec::simple(1, 0, Request::gpus(8, TopologyKind::Node), Some(60));
        let high = JobSpec::simple(2, 0, Request::gpus(1, TopologyKind::Node), Some(60));
        let m = Multifactor::default();
        let p = |job: &JobSpec, failed: u32, part: &flotilla_core::cluster::Partition, now: u64| {
            m.priority(PriorityInput { job, failed_cycles: failed, partition: part, now, factors: Default::default() })
        };
        // A fresh job one tier up outranks the low-tier job...
        assert!(p(&high, 0, &high_part, 0) > p(&low, 0, &c.partitions[0], 0));
        // ...until the low-tier job has failed enough placement cycles and waited a day.
        assert!(p(&low, 60_000, &c.partitions[0], 86_400) > p(&high, 0, &high_part, 86_400));
        // Each preemption raises priority too.
        let mut pre = low.clone();
        pre.preempt_count = 3;
        assert!(p(&pre, 0, &c.partitions[0], 0) > p(&low, 0, &c.partitions[0], 0));
        // Nice lowers it.
        let mut nice = low.clone();
        nice.nice = 500;
        assert!(p(&nice, 0, &c.partitions[0], 0) < p(&low, 0, &c.partitions[0], 0));
    }

    #[test]
    fn site_factor_is_added_by_multifactor_only() {
        let c = Cluster::uniform(1, 8, 1, 64, 1024);
        let part = &c.partitions[0];
        let job = JobSpec::simple(1, 0, Request::gpus(1, TopologyKind::Node), Some(60));
        fn input<'a>(job: &'a JobSpec, partition: &'a flotilla_core::cluster::Partition) -> PriorityInput<'a> {
            PriorityInput { job, failed_cycles: 0, partition, now: 0, factors: Default::default() }
        }
        let m = Multifactor::default();
        let base = m.priority(input(&job, part));
        for site in [10, -5, 1_000] {
            let mut j = job.clone();
            j.site_factor = site;
            assert_eq!(m.priority(input(&j, part)) as i64, base as i64 + i64::from(site), "{site}");
            assert_eq!(m.factors(input(&j, part)).unwrap().site, m.factors(input(&job, part)).unwrap().site + f64::from(site));
            assert_eq!(Basic.priority(input(&j, part)), Basic.priority(input(&job, part)), "priority/basic ignores it");
        }
        // Never below 0.
        let mut j = job.clone();
        j.site_factor = i32::MIN + 3;
        assert_eq!(m.priority(input(&j, part)), 0);
    }
}
