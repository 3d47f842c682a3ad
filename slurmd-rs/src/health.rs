//! GPU health: a [`HealthSource`] reports GPU events (XID errors, ECC counts, NVLink errors,
//! retired pages, temperature); the policy that decides which events quarantine a node lives
//! in `flotilla-plugins` (pure). Real implementation: NVML, loaded at run time (absence is a
//! log line, not a crash); fake: driven by tests.
//!
//! Interface only in this file; implementations live in `health/`.

use std::fmt;

/// One GPU health observation.
#[derive(Debug, Clone, PartialEq)]
pub enum HealthEvent {
    /// An XID error (e.g. 79: GPU fell off the bus; 48: double-bit ECC).
    Xid {
        /// GPU index.
        gpu: u32,
        /// XID code.
        xid: u64,
    },
    /// ECC error counters (volatile).
    Ecc {
        /// GPU index.
        gpu: u32,
        /// Corrected errors.
        corrected: u64,
        /// Uncorrected errors.
        uncorrected: u64,
    },
    /// NVLink errors on a link.
    NvLink {
        /// GPU index.
        gpu: u32,
        /// Link.
        link: u32,
        /// Error count.
        errors: u64,
    },
    /// Retired memory pages.
    RetiredPages {
        /// GPU index.
        gpu: u32,
        /// Pages pending retirement.
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

/// A GPU as inventoried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuInfo {
    /// Index.
    pub index: u32,
    /// Model name (e.g. `NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// UUID.
    pub uuid: String,
    /// Memory in MiB.
    pub memory_mib: u64,
}

/// Where GPU inventory and health events come from.
pub trait HealthSource: fmt::Debug + Send {
    /// `nvml` or `fake`.
    fn kind(&self) -> &'static str;
    /// The GPUs of the node.
    fn inventory(&mut self) -> Vec<GpuInfo>;
    /// Events since the last poll (non-blocking; waits at most `timeout_ms` for XID events).
    fn poll(&mut self, timeout_ms: u32) -> Vec<HealthEvent>;
}
