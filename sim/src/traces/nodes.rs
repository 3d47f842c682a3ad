//! Node lists without jobs: Alibaba PAI v2020 machines (MLaaS in the Wild, NSDI'22) and the
//! Alibaba spot-GPU v2026 nodes (GFS, ASPLOS'26). Useful as cluster shapes for synthetic runs.

use std::path::Path;

use serde::Deserialize;

use super::reader::{read_file, Fault};
use crate::SimError;

/// A machine of `nodes/pai_v2020_machines.csv`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PaiMachine {
    /// Anonymised machine name.
    pub machine: String,
    /// GPU model: `P100`, `T4`, `V100`, `V100M32`, `MISC`, or `CPU` for a CPU-only machine.
    pub gpu_type: String,
    /// CPU cores.
    pub cpu: u32,
    /// Memory in GB.
    pub mem_gb: u32,
    /// Whole GPUs: 0, 2 or 8.
    pub gpus: u32,
}

/// Columns `nodes/pai_v2020_machines.csv` must have.
pub const PAI_COLUMNS: &[&str] = &["machine", "gpu_type", "cpu", "mem_gb", "gpus"];

/// Loads `nodes/pai_v2020_machines.csv`.
///
/// Errors: [`SimError::Io`], [`SimError::MissingColumn`], [`SimError::Malformed`].
pub fn load_pai_v2020_machines(path: &Path) -> Result<Vec<PaiMachine>, SimError> {
    read_file(path, PAI_COLUMNS, Ok::<_, Fault>)
}

/// A node of `nodes/spot_v2026_nodes.csv`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SpotNode {
    /// Numeric node id (not contiguous).
    pub node_id: u32,
    /// GPU model, e.g. `A10`, `A100-SXM4-80GB`, `H800`, `GPU-series-1`.
    pub gpu_model: String,
    /// Whole GPUs: 1, 4 or 8.
    pub gpus: u32,
    /// CPU cores.
    pub cpu: u32,
}

/// Columns `nodes/spot_v2026_nodes.csv` must have.
pub const SPOT_COLUMNS: &[&str] = &["node_id", "gpu_model", "gpus", "cpu"];

/// Loads `nodes/spot_v2026_nodes.csv`.
///
/// Errors: [`SimError::Io`], [`SimError::MissingColumn`], [`SimError::Malformed`].
pub fn load_spot_v2026_nodes(path: &Path) -> Result<Vec<SpotNode>, SimError> {
    read_file(path, SPOT_COLUMNS, Ok::<_, Fault>)
}
