//! GPU health: a [`HealthSource`] reports GPU events (XID errors, ECC counts, NVLink errors,
//! retired pages, temperature); the policy that decides which events quarantine a node lives
//! in `flotilla-plugins` (pure). Real implementation: NVML, loaded at run time (absence is a
//! log line, not a crash); fake: driven by tests.
//!
//! Implementations: [`nvml::NvmlHealth`] (real), [`fake::FakeHealth`] and [`fake::FileHealth`]
//! (tests).

pub mod fake;
pub mod nvml;

use std::fmt;

/// One GPU health observation (defined in `flotilla-core`, shared with the policy in
/// `flotilla-plugins` and the controller).
pub use flotilla_core::health::HealthEvent;

/// Errors of health sources.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// NVML could not be loaded or initialised: no `libnvidia-ml.so.1`, or no driver.
    #[error("NVML unavailable (libnvidia-ml.so.1 with a loaded NVIDIA driver is needed): {0}")]
    NvmlUnavailable(String),
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
