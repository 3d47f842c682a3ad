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
    /// `Succeeded`: the pod ran to completion.
    Succeeded,
    /// `Failed`: the pod ended in failure.
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::traces::reader::parse;

    const HEADER: &str = "submit_s,gpus,duration_s,kind,user_or_group,pod,gpu_milli,cpu_milli,memory_mib,gpu_spec,qos,phase,scheduled_s,deletion_s\n";

    fn pods(body: &str) -> Result<Vec<OpenbPod>, SimError> {
        let text = format!("{HEADER}{body}");
        parse(
            Path::new("pods_test.csv"),
            text.as_bytes(),
            POD_COLUMNS,
            pod_from_raw,
        )
    }

    /// Unwraps a `Malformed` error into (line, column, message).
    fn malformed(result: Result<Vec<OpenbPod>, SimError>) -> (u64, String, String) {
        match result {
            Err(SimError::Malformed {
                line,
                column,
                message,
                ..
            }) => (line, column, message),
            other => panic!("expected a malformed-row error, got {other:?}"),
        }
    }

    const GOOD: &str = "0,1,12537496,other,,0000,1000,12000,16384,,LS,Running,0,12537496\n";

    #[test]
    fn good_rows_parse_with_units_and_options() {
        let rows = pods(concat!(
            "0,1,12537496,other,,0000,1000,12000,16384,,LS,Running,0,12537496\n",
            "10,1,5,other,,0001,460,6000,12288,V100M16|V100M32,BE,Pending,,15\n",
            ",8,,other,,0002,1000,64000,262144,,,,,\n",
        ))
        .unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].submit_s, Some(0));
        assert_eq!(rows[0].qos, Some(Qos::LatencySensitive));
        assert_eq!(rows[0].gpu_spec, Vec::<String>::new());
        assert!(rows[0].allows_model("T4"));
        assert_eq!(rows[1].pod, 1);
        assert!(rows[1].is_gpu_sharing());
        assert_eq!(rows[1].gpu_demand_milli(), 460);
        assert_eq!(rows[1].gpu_spec, vec!["V100M16", "V100M32"]);
        assert!(rows[1].allows_model("V100M32") && !rows[1].allows_model("T4"));
        assert_eq!(rows[1].phase, Some(Phase::Pending));
        assert_eq!(rows[1].scheduled_s, None);
        // A multigpu-style row: no times, qos or phase.
        assert_eq!(rows[2].submit_s, None);
        assert_eq!(rows[2].duration_s, None);
        assert_eq!((rows[2].qos, rows[2].phase), (None, None));
        assert_eq!(rows[2].user_or_group, None);
        assert_eq!(rows[2].gpu_demand_milli(), 8000);
        assert_eq!(rows[2].kind, JobKind::Other);
    }

    #[test]
    fn header_only_gives_no_rows() {
        assert_eq!(pods("").unwrap(), vec![]);
    }

    #[test]
    fn missing_column_is_an_error_naming_it() {
        let text = "submit_s,gpus,duration_s,kind,user_or_group,pod,gpu_milli,cpu_milli,memory_mib,qos,phase,scheduled_s,deletion_s\n";
        let err = parse(
            Path::new("p.csv"),
            text.as_bytes(),
            POD_COLUMNS,
            pod_from_raw,
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                SimError::MissingColumn {
                    column: "gpu_spec",
                    ..
                }
            ),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "p.csv:1: missing column `gpu_spec`");
    }

    #[test]
    fn empty_file_is_a_missing_column() {
        let err = parse(Path::new("p.csv"), b"", POD_COLUMNS, pod_from_raw).unwrap_err();
        assert!(
            matches!(
                err,
                SimError::MissingColumn {
                    column: "submit_s",
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn columns_may_come_in_any_order_and_extras_are_ignored() {
        let text = "extra,gpus,kind,submit_s,duration_s,user_or_group,pod,gpu_milli,cpu_milli,memory_mib,gpu_spec,qos,phase,scheduled_s,deletion_s\n\
                    x,2,other,7,1,,5,1000,1000,10,,BE,Running,7,8\n";
        let rows = parse(
            Path::new("p.csv"),
            text.as_bytes(),
            POD_COLUMNS,
            pod_from_raw,
        )
        .unwrap();
        assert_eq!(
            (rows[0].gpus, rows[0].submit_s, rows[0].pod),
            (2, Some(7), 5)
        );
    }

    #[test]
    fn not_a_number_names_line_and_column() {
        let result = pods(&format!(
            "{GOOD}0,x,1,other,,0001,1000,12000,16384,,LS,Running,0,1\n"
        ));
        let err = result.unwrap_err();
        assert_eq!(
            err.to_string(),
            "pods_test.csv:3: column `gpus`: invalid value `x`: invalid digit found in string"
        );
    }

    #[test]
    fn negative_time_names_its_column() {
        let (line, column, message) = malformed(pods(&format!(
            "{GOOD}{GOOD}-5,1,1,other,,0001,1000,12000,16384,,LS,Running,0,1\n"
        )));
        assert_eq!((line, column.as_str()), (4, "submit_s"));
        assert!(message.contains("`-5`"), "{message}");
    }

    #[test]
    fn empty_required_field_names_its_column() {
        let (line, column, _) = malformed(pods("0,1,1,other,,0001,1000,,16384,,LS,Running,0,1\n"));
        assert_eq!((line, column.as_str()), (2, "cpu_milli"));
    }

    #[test]
    fn too_few_fields_names_the_first_missing_column() {
        let (line, column, message) = malformed(pods(&format!(
            "{GOOD}0,1,1,other,,0001,1000,12000,16384,,LS,Running,0\n"
        )));
        assert_eq!((line, column.as_str()), (3, "deletion_s"));
        assert_eq!(message, "expected 14 fields, found 13");
    }

    #[test]
    fn too_many_fields_is_an_error() {
        let (line, _, message) = malformed(pods(
            "0,1,1,other,,0001,1000,12000,16384,,LS,Running,0,1,9\n",
        ));
        assert_eq!(line, 2);
        assert_eq!(message, "expected 14 fields, found 15");
    }

    #[test]
    fn line_counts_newlines_inside_quoted_fields() {
        // The quoted gpu_spec spans lines 2-3, so the next row is on line 4.
        let body = "0,1,1,other,,0000,1000,12000,16384,\"T4|\nG2\",LS,Running,0,1\n\
                    0,1,1,other,,0001,1000,12000,16384,,LS,Running,0,bad\n";
        let (line, column, _) = malformed(pods(body));
        assert_eq!((line, column.as_str()), (4, "deletion_s"));
    }

    #[test]
    fn unknown_words_name_their_column() {
        let cases = [
            ("0,1,1,serve,,0,1000,1,1,,LS,Running,0,1\n", "kind"),
            ("0,1,1,other,,0,1000,1,1,,XX,Running,0,1\n", "qos"),
            ("0,1,1,other,,0,1000,1,1,,LS,Done,0,1\n", "phase"),
        ];
        for (row, want) in cases {
            let (line, column, message) = malformed(pods(row));
            assert_eq!((line, column.as_str()), (2, want), "{message}");
        }
    }

    #[test]
    fn gpu_rules_of_the_readme_are_checked() {
        let cases = [
            ("0,1,1,other,,0,1001,1,1,,LS,Running,0,1\n", "gpu_milli"), // above a whole GPU
            ("0,2,1,other,,0,500,1,1,,LS,Running,0,1\n", "gpus"),       // sharing pod with 2 GPUs
            ("0,0,1,other,,0,500,1,1,,LS,Running,0,1\n", "gpu_milli"),  // share without a GPU
            ("0,1,1,other,,0,0,1,1,,LS,Running,0,1\n", "gpu_milli"),    // GPU without a share
            (
                "0,1,1,other,,0,1000,1,1,T4||G2,LS,Running,0,1\n",
                "gpu_spec",
            ),
        ];
        for (row, want) in cases {
            let (line, column, message) = malformed(pods(row));
            assert_eq!((line, column.as_str()), (2, want), "{message}");
        }
    }

    #[test]
    fn node_rows_parse_and_zero_gpus_is_an_error() {
        let text = "node_id,gpus,gpu_model,cpu_milli,memory_mib\nopenb-node-0000,2,P100,64000,262144\nopenb-node-0001,0,P100,64000,262144\n";
        let err = parse(
            Path::new("nodes.csv"),
            text.as_bytes(),
            NODE_COLUMNS,
            check_node,
        )
        .unwrap_err();
        assert!(
            matches!(&err, SimError::Malformed { line: 3, column, .. } if column == "gpus"),
            "{err:?}"
        );
        let good =
            "node_id,gpus,gpu_model,cpu_milli,memory_mib\nopenb-node-0000,2,P100,64000,262144\n";
        let ok = parse(
            Path::new("nodes.csv"),
            good.as_bytes(),
            NODE_COLUMNS,
            check_node,
        )
        .unwrap();
        assert_eq!(
            ok,
            vec![OpenbNode {
                node_id: "openb-node-0000".into(),
                gpus: 2,
                gpu_model: "P100".into(),
                cpu_milli: 64000,
                memory_mib: 262144,
            }]
        );
    }

    #[test]
    fn variant_names_round_trip() {
        for v in OpenbVariant::ALL {
            assert_eq!(v.name().parse::<OpenbVariant>().unwrap(), v);
            assert_eq!(v.file_name(), format!("pods_{v}.csv"));
        }
        assert_eq!(
            OpenbVariant::ALL.iter().filter(|v| !v.has_times()).count(),
            4
        );
        let err = "gpushare20".parse::<OpenbVariant>().unwrap_err();
        assert!(err
            .to_string()
            .starts_with("unknown openb pod list `gpushare20` (expected one of default, cpu050"));
    }
}
