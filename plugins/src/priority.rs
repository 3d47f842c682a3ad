//! Priority plugins.

use flotilla_core::sched::{PriorityInput, PriorityPolicy};

/// Weights of the multifactor priority (Slurm's `priority/multifactor`, plus Flotilla's aging
/// per failed placement cycle and per preemption). All factors are added; nice is subtracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultifactorWeights {
    /// Points per minute waited (Slurm `PriorityWeightAge`, here per minute), capped by
    /// `age_max_min`.
    pub age_per_min: u64,
    /// Age cap in minutes (Slurm `PriorityMaxAge`, default 7 days).
    pub age_max_min: u64,
    /// Points per partition `PriorityTier` step (Slurm `PriorityWeightPartition`).
    pub partition: u64,
    /// Points per failed placement cycle (Flotilla aging).
    pub per_failed_cycle: u64,
    /// Cap on the failed-cycle bonus.
    pub failed_cycle_max: u64,
    /// Points per preemption suffered (Flotilla's starvation guard).
    pub per_preemption: u64,
    /// Points per unit of the job's base priority (admin/QOS priority).
    pub base: u64,
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
        }
    }
}

/// Flotilla's multifactor priority: base + age + partition tier + aging per failed cycle and
/// per preemption − nice. The aging terms are strong enough to cross classes: a job failing
/// 50,000 cycles (about 2 days at one cycle per 3 s) or preempted 5 times gains 100,000 points,
/// a partition tier.
#[derive(Debug, Default, Clone, Copy)]
pub struct Multifactor {
    /// The weight of each factor.
    pub weights: MultifactorWeights,
}

impl PriorityPolicy for Multifactor {
    fn name(&self) -> &str {
        "priority/multifactor"
    }

    fn priority(&self, i: PriorityInput<'_>) -> u64 {
        let w = &self.weights;
        let age_min = i.now.saturating_sub(i.job.submit_time) / 60;
        let age = age_min.min(w.age_max_min) * w.age_per_min;
        let tier = u64::from(i.partition.priority_tier) * w.partition;
        let failed = (u64::from(i.failed_cycles) * w.per_failed_cycle).min(w.failed_cycle_max);
        let pre = u64::from(i.job.preempt_count) * w.per_preemption;
        let base = u64::from(i.job.base_priority) * w.base;
        let total = 1_000_000 + base + age + tier + failed + pre;
        if i.job.nice >= 0 {
            total.saturating_sub(i.job.nice as u64)
        } else {
            total + i.job.nice.unsigned_abs() as u64
        }
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
            m.priority(PriorityInput { job, failed_cycles: failed, partition: part, now })
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
}
