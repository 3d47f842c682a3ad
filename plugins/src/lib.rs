//! Flotilla's policies behind the core's extension points: placement scorers, queue order and
//! priority, GPU health policies (which GPU errors quarantine a node), and the baselines we
//! compare against.
//!
//! Pure like `core`: no clock, no I/O. Registered statically by name and chosen with
//! slurm.conf keys (`SelectType`, `PriorityType`, `SchedulerType`, ...). No dlopen.

pub mod health;
pub mod placement;
pub mod priority;

use flotilla_core::health::HealthPolicy;
use flotilla_core::placement::PlacementPolicy;
use flotilla_core::sched::{PriorityPolicy, QueueMode, SchedConfig};

/// Names of the registered placement policies, default first.
pub const PLACEMENT_POLICIES: &[&str] = &["topo-bestfit", "first-fit", "worst-fit", "best-fit", "random"];

/// Looks a placement policy up by name. Slurm's `select/cons_tres` and `select/linear` map to
/// Flotilla's default, `topo-bestfit`. `random` is seeded with 0 here (the simulator seeds it
/// per run); FGD needs its target workload and is built with [`placement::Fgd::new`].
pub fn placement(name: &str) -> Option<Box<dyn PlacementPolicy>> {
    Some(match name {
        "topo-bestfit" | "select/cons_tres" | "select/cons_res" | "select/linear" | "" => {
            Box::new(placement::TopoBestFit::new())
        }
        "first-fit" => Box::new(placement::FirstFit),
        "worst-fit" => Box::new(placement::WorstFit),
        "best-fit" => Box::new(placement::PlainBestFit),
        "random" => Box::new(placement::RandomFit::new(0)),
        _ => return None,
    })
}

/// Names of the registered priority policies.
pub const PRIORITY_POLICIES: &[&str] = &["priority/multifactor", "priority/basic"];

/// Looks a priority policy up by name (`PriorityType=`); unset means multifactor.
pub fn priority(name: &str) -> Option<Box<dyn PriorityPolicy>> {
    Some(match name {
        "priority/multifactor" | "" => Box::new(priority::Multifactor::default()),
        "priority/basic" => Box::new(priority::Basic),
        _ => return None,
    })
}

/// The priority policy of a parsed slurm.conf: `PriorityType=` with, for multifactor, the
/// `PriorityWeight*`, `PriorityMaxAge` and `PriorityFavorSmall` keys; `None` for an unknown
/// `PriorityType`.
pub fn priority_from_conf(conf: &flotilla_core::config::ClusterConfig) -> Option<Box<dyn PriorityPolicy>> {
    Some(match conf.priority_type.as_str() {
        "priority/multifactor" | "" => Box::new(priority::Multifactor {
            weights: priority::MultifactorWeights::from_conf(&conf.priority),
        }),
        other => return priority(other),
    })
}

/// Names of the registered queue policies.
pub const QUEUE_POLICIES: &[&str] = &["flotilla", "fifo", "easy"];

/// Looks a queue policy up by name: `flotilla` (held reservations + backfill, also
/// `sched/backfill`), `fifo` (strict FIFO, also `sched/builtin`), `easy` (EASY backfill).
pub fn queue(name: &str) -> Option<SchedConfig> {
    let queue = match name {
        "flotilla" | "sched/backfill" | "" => QueueMode::HeldReservations,
        "fifo" | "sched/builtin" => QueueMode::StrictFifo,
        "easy" => QueueMode::EasyBackfill,
        _ => return None,
    };
    Some(SchedConfig {
        queue,
        ..SchedConfig::default()
    })
}

/// Names of the registered GPU health policies, default first.
pub const HEALTH_POLICIES: &[&str] = &["health/nvidia", "health/none"];

/// Looks a GPU health policy up by name: `health/nvidia` (default: critical Xids, uncorrectable
/// ECC, NVLink errors, pending retired pages and temperature quarantine the node) or
/// `health/none` (never quarantines).
pub fn health(name: &str) -> Option<Box<dyn HealthPolicy>> {
    Some(match name {
        "health/nvidia" | "nvidia" | "" => Box::new(health::NvidiaHealth::default()),
        "health/none" | "none" => Box::new(health::NoHealth),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn health_policies_are_registered_by_name() {
        for name in super::HEALTH_POLICIES {
            let policy = super::health(name).expect("registered");
            assert_eq!(policy.name(), *name);
        }
        assert_eq!(
            super::health("").map(|p| p.name().to_string()).as_deref(),
            Some("health/nvidia")
        );
        assert!(super::health("health/bogus").is_none());
    }
}
