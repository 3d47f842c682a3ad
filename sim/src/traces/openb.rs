//! Alibaba `cluster-trace-gpu-v2023`, the "openb" trace of FGD (Weng et al., USENIX ATC'23):
//! the 1,213-node GPU cluster and the 17 pod lists of the FGD artifact.
//!
//! Do not replay these pods by their timestamps: the FGD protocol ignores times, samples pods
//! with replacement up to 130 % of capacity and places them with no departures (`ANCHORS.md` A1).

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::Deserialize;

use super::reader::{read_file, Fault};
use super::JobKind;
use crate::SimError;

/// A GPU node of `openb/nodes.csv`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OpenbNode {
    /// Node name, `openb-node-NNNN`.
    pub node_id: String,
    /// Whole GPUs on the node: 1, 2, 4 or 8.
    pub gpus: u32,
    /// GPU model (`G2`, `T4`, `V100M32`, ...; `G1`–`G3` are undisclosed models).
    pub gpu_model: String,
    /// CPU capacity in milli-CPUs (1000 = one core).
    pub cpu_milli: u32,
    /// Memory capacity in MiB.
    pub memory_mib: u64,
}

/// Columns `openb/nodes.csv` must have.
pub const NODE_COLUMNS: &[&str] = &["node_id", "gpus", "gpu_model", "cpu_milli", "memory_mib"];

/// Loads `openb/nodes.csv`.
///
/// Errors: [`SimError::Io`], [`SimError::MissingColumn`], [`SimError::Malformed`] (a GPU count of
/// 0: this is the GPU-node list).
pub fn load_nodes(path: &Path) -> Result<Vec<OpenbNode>, SimError> {
    read_file(path, NODE_COLUMNS, check_node)
}

pub(crate) fn check_node(node: OpenbNode) -> Result<OpenbNode, Fault> {
    if node.gpus == 0 {
        return Err(Fault::new("gpus", "a gpu node must have at least 1 gpu"));
    }
    Ok(node)
}

/// The quality-of-service class of a pod (upstream `qos`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Qos {
    /// `LS`: latency-sensitive. Treating it as service-like is an assumption, not trace data.
    LatencySensitive,
    /// `BE`: best-effort.
    BestEffort,
    /// `Burstable` (Kubernetes QoS class).
    Burstable,
    /// `Guaranteed` (Kubernetes QoS class).
    Guaranteed,
}

impl Qos {
    fn parse(value: &str) -> Result<Qos, Fault> {
        match value {
            "LS" => Ok(Qos::LatencySensitive),
            "BE" => Ok(Qos::BestEffort),
            "Burstable" => Ok(Qos::Burstable),
            "Guaranteed" => Ok(Qos::Guaranteed),
            _ => Err(Fault::new(
                "qos",
                format!("unknown qos `{value}` (expected LS, BE, Burstable or Guaranteed)"),
            )),
        }
    }
}

/// The last Kubernetes phase of a pod (upstream `pod_phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// `Running` at the end of the trace.
    Running,
    /// `Succeeded`.
    Succeeded,
    /// `Failed`.
    Failed,
    /// `Pending`: never scheduled, so `scheduled_s` is empty.
    Pending,
}

impl Phase {
    fn parse(value: &str) -> Result<Phase, Fault> {
        match value {
            "Running" => Ok(Phase::Running),
            "Succeeded" => Ok(Phase::Succeeded),
            "Failed" => Ok(Phase::Failed),
            "Pending" => Ok(Phase::Pending),
            _ => Err(Fault::new(
                "phase",
                format!("unknown phase `{value}` (expected Running, Succeeded, Failed or Pending)"),
            )),
        }
    }
}

/// A pod of `openb/pods_<variant>.csv`.
///
/// The `multigpu*` lists have no times, `qos` or `phase` (all `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenbPod {
    /// Creation time, seconds from the trace origin (upstream `creation_time`).
    pub submit_s: Option<u64>,
    /// Whole GPUs requested, 0–8 (upstream `num_gpu`); 0 for a CPU-only pod.
    pub gpus: u32,
    /// Seconds from scheduling (or creation, for a pod never scheduled) to deletion.
    pub duration_s: Option<u64>,
    /// Always [`JobKind::Other`]: the trace does not say train or inference.
    pub kind: JobKind,
    /// Always `None`: the trace has no tenant.
    pub user_or_group: Option<String>,
    /// The numeric part of `openb-pod-NNNN`.
    pub pod: u32,
    /// Share of each GPU in milli-GPUs (1/1000 of a GPU): 1000 = whole GPUs; 1–999 = a
    /// GPU-sharing pod, which always asks for exactly 1 GPU; 0 for a CPU-only pod.
    pub gpu_milli: u32,
    /// CPU request in milli-CPUs (1000 = one core).
    pub cpu_milli: u32,
    /// Memory request in MiB.
    pub memory_mib: u64,
    /// GPU models the pod may run on (upstream `|`-separated list, in trace order, duplicates
    /// kept); empty = any model.
    pub gpu_spec: Vec<String>,
    /// Quality-of-service class; `None` where the list has none.
    pub qos: Option<Qos>,
    /// Last phase; `None` where the list has none.
    pub phase: Option<Phase>,
    /// Time the pod was scheduled, seconds from the trace origin; `None` if never scheduled.
    pub scheduled_s: Option<u64>,
    /// Time the pod was deleted, seconds from the trace origin.
    pub deletion_s: Option<u64>,
}

impl OpenbPod {
    /// The GPU demand in milli-GPUs: `gpus × gpu_milli` (what FGD sums to fill the cluster).
    pub fn gpu_demand_milli(&self) -> u64 {
        u64::from(self.gpus) * u64::from(self.gpu_milli)
    }

    /// A fractional pod: it takes a share (below 1000 milli) of one GPU.
    pub fn is_gpu_sharing(&self) -> bool {
        self.gpu_milli > 0 && self.gpu_milli < 1000
    }

    /// Whether the pod may run on a GPU of `model` (true for every model when `gpu_spec` is empty).
    pub fn allows_model(&self, model: &str) -> bool {
        self.gpu_spec.is_empty() || self.gpu_spec.iter().any(|m| m == model)
    }
}

/// Columns `openb/pods_<variant>.csv` must have.
pub const POD_COLUMNS: &[&str] = &[
    "submit_s",
    "gpus",
    "duration_s",
    "kind",
    "user_or_group",
    "pod",
    "gpu_milli",
    "cpu_milli",
    "memory_mib",
    "gpu_spec",
    "qos",
    "phase",
    "scheduled_s",
    "deletion_s",
];

#[derive(Deserialize)]
struct RawPod {
    submit_s: Option<u64>,
    gpus: u32,
    duration_s: Option<u64>,
    kind: String,
    user_or_group: Option<String>,
    pod: u32,
    gpu_milli: u32,
    cpu_milli: u32,
    memory_mib: u64,
    gpu_spec: String,
    qos: String,
    phase: String,
    scheduled_s: Option<u64>,
    deletion_s: Option<u64>,
}

/// Loads one `openb/pods_<variant>.csv`.
///
/// Errors: [`SimError::Io`], [`SimError::MissingColumn`], [`SimError::Malformed`], including
/// for `gpu_milli` above 1000, a sharing pod with other than 1 GPU, `gpus` and `gpu_milli`
/// not both zero or both non-zero, an empty model in `gpu_spec`, or an unknown `qos`/`phase`.
pub fn load_pods(path: &Path) -> Result<Vec<OpenbPod>, SimError> {
    read_file(path, POD_COLUMNS, pod_from_raw)
}

fn pod_from_raw(raw: RawPod) -> Result<OpenbPod, Fault> {
    if raw.gpu_milli > 1000 {
        return Err(Fault::new(
            "gpu_milli",
            format!("{} is above 1000 milli-gpus", raw.gpu_milli),
        ));
    }
    if (raw.gpus == 0) != (raw.gpu_milli == 0) {
        return Err(Fault::new(
            "gpu_milli",
            format!(
                "gpu_milli {} with {} gpus: both must be zero or neither",
                raw.gpu_milli, raw.gpus
            ),
        ));
    }
    if raw.gpu_milli > 0 && raw.gpu_milli < 1000 && raw.gpus != 1 {
        return Err(Fault::new(
            "gpus",
            format!(
                "a gpu-sharing pod ({} milli) must ask for 1 gpu, not {}",
                raw.gpu_milli, raw.gpus
            ),
        ));
    }
    let gpu_spec = if raw.gpu_spec.is_empty() {
        Vec::new()
    } else {
        let models: Vec<String> = raw.gpu_spec.split('|').map(str::to_owned).collect();
        if models.iter().any(String::is_empty) {
            return Err(Fault::new(
                "gpu_spec",
                format!("empty model in `{}`", raw.gpu_spec),
            ));
        }
        models
    };
    Ok(OpenbPod {
        submit_s: raw.submit_s,
        gpus: raw.gpus,
        duration_s: raw.duration_s,
        kind: JobKind::parse_column(&raw.kind)?,
        user_or_group: raw.user_or_group,
        pod: raw.pod,
        gpu_milli: raw.gpu_milli,
        cpu_milli: raw.cpu_milli,
        memory_mib: raw.memory_mib,
        gpu_spec,
        qos: non_empty(&raw.qos).map(Qos::parse).transpose()?,
        phase: non_empty(&raw.phase).map(Phase::parse).transpose()?,
        scheduled_s: raw.scheduled_s,
        deletion_s: raw.deletion_s,
    })
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// The 17 pod lists of the FGD artifact experiments shipped in `openb/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpenbVariant {
    /// The production pod list (FGD Figs. 7, 9).
    Default,
    /// More CPU-only pods (Fig. 14).
    Cpu050,
    /// More CPU-only pods (Fig. 14).
    Cpu100,
    /// More CPU-only pods (Fig. 14).
    Cpu200,
    /// More CPU-only pods (Fig. 14).
    Cpu250,
    /// More fractional-GPU pods (Fig. 11).
    Gpushare40,
    /// More fractional-GPU pods (Fig. 11).
    Gpushare60,
    /// More fractional-GPU pods (Fig. 11).
    Gpushare80,
    /// More fractional-GPU pods (Fig. 11).
    Gpushare100,
    /// 10 % of GPU pods constrained to GPU models (Fig. 13).
    Gpuspec10,
    /// 20 % of GPU pods constrained to GPU models (Fig. 13).
    Gpuspec20,
    /// 25 % of GPU pods constrained to GPU models (Fig. 13).
    Gpuspec25,
    /// 33 % of GPU pods constrained to GPU models (Fig. 13).
    Gpuspec33,
    /// 20 % of the GPU request from 2/4/8-GPU pods (Fig. 12); no times, qos or phase.
    Multigpu20,
    /// 30 % of the GPU request from 2/4/8-GPU pods (Fig. 12); no times, qos or phase.
    Multigpu30,
    /// 40 % of the GPU request from 2/4/8-GPU pods (Fig. 12); no times, qos or phase.
    Multigpu40,
    /// 50 % of the GPU request from 2/4/8-GPU pods (Fig. 12); no times, qos or phase.
    Multigpu50,
}

impl OpenbVariant {
    /// All 17, in the order of the traces README table.
    pub const ALL: [OpenbVariant; 17] = [
        OpenbVariant::Default,
        OpenbVariant::Cpu050,
        OpenbVariant::Cpu100,
        OpenbVariant::Cpu200,
        OpenbVariant::Cpu250,
        OpenbVariant::Gpushare40,
        OpenbVariant::Gpushare60,
        OpenbVariant::Gpushare80,
        OpenbVariant::Gpushare100,
        OpenbVariant::Gpuspec10,
        OpenbVariant::Gpuspec20,
        OpenbVariant::Gpuspec25,
        OpenbVariant::Gpuspec33,
        OpenbVariant::Multigpu20,
        OpenbVariant::Multigpu30,
        OpenbVariant::Multigpu40,
        OpenbVariant::Multigpu50,
    ];

    /// The name used in file names and by the FGD artifact, e.g. `gpushare40`.
    pub fn name(self) -> &'static str {
        match self {
            OpenbVariant::Default => "default",
            OpenbVariant::Cpu050 => "cpu050",
            OpenbVariant::Cpu100 => "cpu100",
            OpenbVariant::Cpu200 => "cpu200",
            OpenbVariant::Cpu250 => "cpu250",
            OpenbVariant::Gpushare40 => "gpushare40",
            OpenbVariant::Gpushare60 => "gpushare60",
            OpenbVariant::Gpushare80 => "gpushare80",
            OpenbVariant::Gpushare100 => "gpushare100",
            OpenbVariant::Gpuspec10 => "gpuspec10",
            OpenbVariant::Gpuspec20 => "gpuspec20",
            OpenbVariant::Gpuspec25 => "gpuspec25",
            OpenbVariant::Gpuspec33 => "gpuspec33",
            OpenbVariant::Multigpu20 => "multigpu20",
            OpenbVariant::Multigpu30 => "multigpu30",
            OpenbVariant::Multigpu40 => "multigpu40",
            OpenbVariant::Multigpu50 => "multigpu50",
        }
    }

    /// The file name inside `openb/`: `pods_<name>.csv`.
    pub fn file_name(self) -> String {
        format!("pods_{}.csv", self.name())
    }

    /// Whether the list carries times, `qos` and `phase` (all but `multigpu*`).
    pub fn has_times(self) -> bool {
        !matches!(
            self,
            OpenbVariant::Multigpu20
                | OpenbVariant::Multigpu30
                | OpenbVariant::Multigpu40
                | OpenbVariant::Multigpu50
        )
    }

    /// The 17 names, comma-separated (for messages and `--help`).
    pub fn names() -> String {
        OpenbVariant::ALL.map(OpenbVariant::name).join(", ")
    }
}

impl fmt::Display for OpenbVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for OpenbVariant {
    type Err = SimError;

    /// Parses a variant name such as `default` or `multigpu50`.
    fn from_str(s: &str) -> Result<Self, SimError> {
        OpenbVariant::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| SimError::UnknownOpenbVariant { name: s.to_owned() })
    }
}
