//! Typed loaders for the real GPU-cluster traces in `../shared/traces`.
//!
//! Each dataset has a submodule with its row types and loader; [`TraceDir`] ties them to a
//! directory. The datasets and their columns are described in `../shared/traces/README.md`;
//! the docs here repeat the units. Common to every job, pod or instance file are the leading
//! columns `submit_s` (arrival, seconds from the dataset's own origin), `gpus` (whole GPUs,
//! the total over all workers of a gang), `duration_s` (seconds held in the original cluster,
//! from start to end, without queueing), `kind` ([`JobKind`]) and `user_or_group` (tenant key,
//! `None` when the trace has none).
//!
//! Every loader checks that the header names every column it needs (extra columns are ignored)
//! and reports a malformed row as [`SimError::Malformed`] with file, 1-based line (header = 1)
//! and column name. Loaders read whole files into memory; the largest is under 3 MB.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::SimError;

pub mod dlrm;
pub mod itp;
pub mod nodes;
pub mod openb;
pub mod philly;
mod reader;
pub mod topology;

pub(crate) use reader::Fault;

/// What the trace says a job is: the `kind` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    /// Training (`train`): ITP and Philly jobs.
    Train,
    /// Inference (`infer`): DLRM instances.
    Infer,
    /// The trace does not say (`other`): openb pods.
    Other,
}

impl JobKind {
    /// The word used in the `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Train => "train",
            JobKind::Infer => "infer",
            JobKind::Other => "other",
        }
    }

    pub(crate) fn parse_column(value: &str) -> Result<JobKind, Fault> {
        value.parse().map_err(|()| {
            Fault::new(
                "kind",
                format!("unknown kind `{value}` (expected train, infer or other)"),
            )
        })
    }
}

impl FromStr for JobKind {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "train" => Ok(JobKind::Train),
            "infer" => Ok(JobKind::Infer),
            "other" => Ok(JobKind::Other),
            _ => Err(()),
        }
    }
}

/// The trace directory: `../shared/traces` from the workspace root, passed in by the caller
/// (the CLI's `--traces <dir>`; see [`TraceDir::DEFAULT`]). Cheap to create; nothing is read
/// until a loader is called, and each call reads its file anew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceDir {
    root: PathBuf,
}

impl TraceDir {
    /// The default location, relative to the workspace root: the shared folder beside the
    /// repository.
    pub const DEFAULT: &'static str = "../shared/traces";

    /// A trace directory rooted at `root` (the folder holding `openb/`, `itp/`, ...).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        TraceDir { root: root.into() }
    }

    /// The folder this reads from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path of a file relative to the root, e.g. `"philly/jobs.csv"`.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// `openb/nodes.csv`: 1,213 GPU nodes of the FGD cluster.
    pub fn openb_nodes(&self) -> Result<Vec<openb::OpenbNode>, SimError> {
        openb::load_nodes(&self.path("openb/nodes.csv"))
    }

    /// `openb/pods_<variant>.csv`: one of the 17 FGD pod lists.
    pub fn openb_pods(
        &self,
        variant: openb::OpenbVariant,
    ) -> Result<Vec<openb::OpenbPod>, SimError> {
        openb::load_pods(&self.path(&format!("openb/{}", variant.file_name())))
    }

    /// The openb pod-list variants whose file is present, in [`openb::OpenbVariant::ALL`] order.
    pub fn openb_variants(&self) -> Vec<openb::OpenbVariant> {
        openb::OpenbVariant::ALL
            .into_iter()
            .filter(|v| self.path(&format!("openb/{}", v.file_name())).is_file())
            .collect()
    }

    /// `itp/jobs.csv`: 69,351 training jobs over 10 ITP clusters.
    pub fn itp_jobs(&self) -> Result<Vec<itp::ItpJob>, SimError> {
        itp::load_jobs(&self.path("itp/jobs.csv"))
    }

    /// The jobs of one ITP cluster (`cluster01` … `cluster10`), in submission order.
    ///
    /// Errors: [`SimError::UnknownItpCluster`] when no job has that cluster.
    pub fn itp_cluster_jobs(&self, cluster: &str) -> Result<Vec<itp::ItpJob>, SimError> {
        let jobs = itp::select_cluster(self.itp_jobs()?, cluster);
        if jobs.is_empty() {
            return Err(SimError::UnknownItpCluster {
                cluster: cluster.to_owned(),
            });
        }
        Ok(jobs)
    }

    /// `philly/jobs.csv`: 82,247 Philly jobs (the Pollux derivative).
    pub fn philly_jobs(&self) -> Result<Vec<philly::PhillyJob>, SimError> {
        philly::load_jobs(&self.path("philly/jobs.csv"))
    }

    /// `philly/machines.csv`: the 552 Philly servers.
    pub fn philly_machines(&self) -> Result<Vec<philly::PhillyMachine>, SimError> {
        philly::load_machines(&self.path("philly/machines.csv"))
    }

    /// `philly/vc_nodes_helios.csv`: the Helios artifact's 11 VC sizes (simulation config).
    pub fn philly_vc_nodes_helios(&self) -> Result<Vec<philly::HeliosVc>, SimError> {
        philly::load_vc_nodes_helios(&self.path("philly/vc_nodes_helios.csv"))
    }

    /// `dlrm_inference/instances.csv`: 7,386 one-GPU DLRM inference instances.
    pub fn dlrm_instances(&self) -> Result<Vec<dlrm::DlrmInstance>, SimError> {
        dlrm::load_instances(&self.path("dlrm_inference/instances.csv"))
    }

    /// `nodes/pai_v2020_machines.csv`: 1,897 Alibaba PAI machines (no jobs).
    pub fn pai_v2020_machines(&self) -> Result<Vec<nodes::PaiMachine>, SimError> {
        nodes::load_pai_v2020_machines(&self.path("nodes/pai_v2020_machines.csv"))
    }

    /// `nodes/spot_v2026_nodes.csv`: 4,278 Alibaba spot-GPU nodes (no jobs).
    pub fn spot_v2026_nodes(&self) -> Result<Vec<nodes::SpotNode>, SimError> {
        nodes::load_spot_v2026_nodes(&self.path("nodes/spot_v2026_nodes.csv"))
    }

    /// `topology/crux_lingjun_topo.csv`: 847 hosts and their switches in a 3-tier Clos.
    pub fn crux_topology(&self) -> Result<Vec<topology::CruxHost>, SimError> {
        topology::load_crux_topology(&self.path("topology/crux_lingjun_topo.csv"))
    }
}
