//! Microsoft Philly (Jeon et al., USENIX ATC'19) as derived by the Pollux artifact (OSDI'21):
//! `philly/jobs.csv` (82,247 jobs, 15 VCs, 2017-09-04 to 2017-12-22), the official machine list
//! `philly/machines.csv`, and the Helios artifact's VC sizes `philly/vc_nodes_helios.csv`.
//!
//! The job list is a subset of Philly (0.98 M GPU-hours, mean 1.30 GPUs per job); absolute
//! queueing numbers published on other Philly derivatives are not reproducible with it
//! (`ANCHORS.md` A5).

use std::ops::RangeInclusive;
use std::path::Path;

use serde::Deserialize;

use super::reader::{read_file, Fault};
use super::JobKind;
use crate::SimError;

/// The standard analysis window, 2017-10-01 00:00 to 2017-11-30 23:59, as `submit_s` (used by
/// ATC'19 and the Helios artifact): 68,510 jobs.
pub const ANALYSIS_WINDOW_S: RangeInclusive<u64> = 2_332_800..=7_603_140;

/// A job of `philly/jobs.csv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhillyJob {
    /// Submission time, seconds since 2017-09-04 00:00:00 (wall clock, no timezone).
    pub submit_s: u64,
    /// Whole GPUs requested (1–128).
    pub gpus: u32,
    /// Run time in seconds.
    pub duration_s: u64,
    /// Always [`JobKind::Train`].
    pub kind: JobKind,
    /// The Philly virtual cluster (VC) hash, e.g. `6214e9`. Kept as text: some hashes look
    /// like numbers (`6214e9`, `103959`).
    pub user_or_group: Option<String>,
    /// 0-based data row in the upstream (unsorted) Pollux file.
    pub orig_row: u32,
}

impl PhillyJob {
    /// The VC this job ran in (`user_or_group`); empty if the trace has none.
    pub fn vc(&self) -> &str {
        self.user_or_group.as_deref().unwrap_or("")
    }
}

/// Columns `philly/jobs.csv` must have.
pub const JOB_COLUMNS: &[&str] = &[
    "submit_s",
    "gpus",
    "duration_s",
    "kind",
    "user_or_group",
    "orig_row",
];

#[derive(Deserialize)]
struct RawJob {
    submit_s: u64,
    gpus: u32,
    duration_s: u64,
    kind: String,
    user_or_group: Option<String>,
    orig_row: u32,
}

/// Loads `philly/jobs.csv`, in file order (by `submit_s`, then `orig_row`). The 65 rows that
/// duplicate another row exactly are kept.
///
/// Errors: [`SimError::Io`], [`SimError::MissingColumn`], [`SimError::Malformed`].
pub fn load_jobs(path: &Path) -> Result<Vec<PhillyJob>, SimError> {
    read_file(path, JOB_COLUMNS, |raw: RawJob| {
        Ok(PhillyJob {
            submit_s: raw.submit_s,
            gpus: raw.gpus,
            duration_s: raw.duration_s,
            kind: JobKind::parse_column(&raw.kind)?,
            user_or_group: raw.user_or_group,
            orig_row: raw.orig_row,
        })
    })
}

/// A server of `philly/machines.csv` (upstream `cluster_machine_list`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PhillyMachine {
    /// Machine name, `m0` …
    pub machine_id: String,
    /// Whole GPUs: 2 or 8.
    pub gpus: u32,
    /// Memory of each GPU in GB: 12 (2-GPU servers) or 24 (8-GPU servers).
    pub gpu_mem_gb: u32,
}

/// Columns `philly/machines.csv` must have.
pub const MACHINE_COLUMNS: &[&str] = &["machine_id", "gpus", "gpu_mem_gb"];

/// Loads `philly/machines.csv`.
///
/// Errors: [`SimError::Io`], [`SimError::MissingColumn`], [`SimError::Malformed`].
pub fn load_machines(path: &Path) -> Result<Vec<PhillyMachine>, SimError> {
    read_file(path, MACHINE_COLUMNS, Ok::<_, Fault>)
}

/// A VC of the Helios artifact's Philly simulation (`philly/vc_nodes_helios.csv`). This is the
/// simulation's configuration, not a trace fact.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HeliosVc {
    /// VC hash, as in [`PhillyJob::user_or_group`].
    pub vc: String,
    /// Number of 8-GPU nodes the VC is given.
    pub nodes_8gpu: u32,
}

/// Columns `philly/vc_nodes_helios.csv` must have.
pub const VC_COLUMNS: &[&str] = &["vc", "nodes_8gpu"];

/// Loads `philly/vc_nodes_helios.csv`.
///
/// Errors: [`SimError::Io`], [`SimError::MissingColumn`], [`SimError::Malformed`].
pub fn load_vc_nodes_helios(path: &Path) -> Result<Vec<HeliosVc>, SimError> {
    read_file(path, VC_COLUMNS, Ok::<_, Fault>)
}
