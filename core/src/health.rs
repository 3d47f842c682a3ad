//! GPU health: the events a node daemon's health source reports (XID errors, ECC counters,
//! NVLink errors, retired pages, temperature) and the [`HealthPolicy`] extension point that
//! decides which of them quarantine (drain) a node. Pure: the events are read by the node
//! daemon (NVML, in `flotilla-slurmd`), the policies live in `flotilla-plugins`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One GPU health observation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HealthEvent {
    /// An XID error (e.g. 79: GPU fell off the bus; 48: double-bit ECC).
    Xid {
        /// GPU index.
        gpu: u32,
        /// XID code.
        xid: u64,
    },
    /// ECC error counters (volatile: since the last driver load or GPU reset).
    Ecc {
        /// GPU index.
        gpu: u32,
        /// Corrected (single-bit) errors.
        corrected: u64,
        /// Uncorrected (double-bit) errors.
        uncorrected: u64,
    },
    /// NVLink errors on a link (sum of the link's CRC, replay and recovery counters).
    NvLink {
        /// GPU index.
        gpu: u32,
        /// NVLink link index on the GPU (0-based).
        link: u32,
        /// Error count.
        errors: u64,
    },
    /// Retired memory pages.
    RetiredPages {
        /// GPU index.
        gpu: u32,
        /// Pages pending retirement (retired on the next driver reload or GPU reset).
        pending: u64,
    },
    /// Temperature in degrees Celsius.
    Temperature {
        /// GPU index.
        gpu: u32,
        /// Degrees C.
        celsius: u32,
    },
}

impl HealthEvent {
    /// The GPU the event concerns.
    pub fn gpu(&self) -> u32 {
        match *self {
            HealthEvent::Xid { gpu, .. }
            | HealthEvent::Ecc { gpu, .. }
            | HealthEvent::NvLink { gpu, .. }
            | HealthEvent::RetiredPages { gpu, .. }
            | HealthEvent::Temperature { gpu, .. } => gpu,
        }
    }
}

/// What a health policy decides about one event (or a batch of them), most severe last.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum HealthVerdict {
    /// Nothing to do.
    Ignore,
    /// Log and report, keep the node schedulable.
    Warn {
        /// Why, e.g. `gpu 2 at 88 C (warn at 85 C)`.
        reason: String,
    },
    /// Quarantine the node: drain it with `reason` (becomes the node's drain reason, as
    /// `scontrol show node` `Reason=`), never place on it again until an admin resumes it.
    Quarantine {
        /// Why, e.g. `Xid 79 on gpu 3: GPU has fallen off the bus`.
        reason: String,
    },
}

impl HealthVerdict {
    /// 0 = ignore, 1 = warn, 2 = quarantine.
    pub fn severity(&self) -> u8 {
        match self {
            HealthVerdict::Ignore => 0,
            HealthVerdict::Warn { .. } => 1,
            HealthVerdict::Quarantine { .. } => 2,
        }
    }

    /// The reason text, empty for [`HealthVerdict::Ignore`].
    pub fn reason(&self) -> &str {
        match self {
            HealthVerdict::Ignore => "",
            HealthVerdict::Warn { reason } | HealthVerdict::Quarantine { reason } => reason,
        }
    }
}

/// A health policy: which GPU events quarantine a node, which only warn. Pure (no I/O, no
/// clock).
pub trait HealthPolicy: fmt::Debug + Send + Sync {
    /// Registered name.
    fn name(&self) -> &str;

    /// Verdict on one event.
    fn evaluate(&self, event: &HealthEvent) -> HealthVerdict;

    /// Verdict on a batch (one poll of a node): the most severe verdict, the first of equal
    /// severity (so the drain reason names the first critical event seen).
    fn evaluate_all(&self, events: &[HealthEvent]) -> HealthVerdict {
        let mut worst = HealthVerdict::Ignore;
        for event in events {
            let verdict = self.evaluate(event);
            if verdict.severity() > worst.severity() {
                worst = verdict;
            }
        }
        worst
    }
}
