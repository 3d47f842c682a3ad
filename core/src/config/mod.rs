//! Slurm's configuration files parsed from text into a typed cluster model.
//!
//! Parsing is pure: the functions here take the text of a file (and, for `Include`, already
//! read texts handed in by a loader outside `core`). Reading files, following `Include` and
//! resolving `SLURM_CONF` / `FLOTILLA_CONF` happen in the loader (the `flotilla-conf`
//! crate), never here.
//!
//! The result is a [`ClusterConfig`]: nodes with CPUs, memory and GPUs, pods (leaf switches
//! of `topology/tree`, or blocks of `topology/block`) and partitions.
//!
//! Map:
//! - [`keys`]: the key table (key, type, default, doc) the parsers and
//!   `docs/slurm-conf-keys.md` come from.
//! - `lex`: the line syntax shared by the three files (comments, `\` continuations,
//!   `key=value`, quotes, `Include` through an [`IncludeResolver`]).
//! - [`parse_slurm_conf`], [`apply_gres_conf`], [`apply_topology_conf`], and
//!   [`parse_cluster`] which runs the three in order.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;
use thiserror::Error;

mod gres_conf;
pub mod keys;
mod lex;
mod slurm_conf;
mod topology_conf;

pub use gres_conf::apply_gres_conf;
pub use lex::{no_includes, IncludeResolver, MAX_INCLUDE_DEPTH};
pub use slurm_conf::parse_slurm_conf;
pub use topology_conf::apply_topology_conf;

/// A place in a configuration file, for errors and warnings: `slurm.conf:12`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The file's name as handed to the parser (or returned by the include resolver).
    pub file: String,
    /// 1-based line number (of the physical line where the key is written).
    pub line: u32,
}

impl Location {
    /// A location in `file` at `line`.
    pub fn new(file: &str, line: u32) -> Location {
        Location {
            file: file.to_string(),
            line,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Why a configuration text could not be read. Every variant names file and line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// The line is not a list of `key=value` (or an unterminated quote).
    #[error("{at}: {msg}")]
    Syntax {
        /// File and line of the offending text.
        at: Location,
        /// What is wrong.
        msg: String,
    },
    /// Text Slurm does not read as `key=value` (a word without `=`), or a second pair on
    /// the line of a key that takes the whole line (every key but `NodeName`,
    /// `PartitionName` and the other line keys): Slurm's `Parse error in file F line N:
    /// "TEXT"` (`parse_config.c` `s_p_parse_file`), TEXT the rest of the line from the end
    /// of the last pair read.
    #[error("{at}: Parse error: \"{text}\"")]
    Leftover {
        /// File and first line of the logical line.
        at: Location,
        /// The text not read, as Slurm quotes it.
        text: String,
    },
    /// An error in a pair after the first of a `NodeName=` or `PartitionName=` line: Slurm
    /// reports `error` and then the rest of the line from just after the pair before it
    /// (`s_p_parse_line` stops there; `s_p_parse_file` quotes the leftover).
    #[error("{error}")]
    InLine {
        /// The pair's own error.
        error: Box<ConfigError>,
        /// Where the logical line starts.
        at: Location,
        /// The text Slurm quotes as not read.
        leftover: String,
    },
    /// A key neither Flotilla nor Slurm knows (in this file and kind of line).
    #[error("{at}: unknown key `{key}'")]
    UnknownKey {
        /// File and line of the key.
        at: Location,
        /// The key as written.
        key: String,
    },
    /// A value that does not fit its key's type (see [`keys::ValueType`]).
    #[error("{at}: invalid value `{value}' for {key}: {reason}")]
    InvalidValue {
        /// File and line of the value.
        at: Location,
        /// The key's canonical name.
        key: String,
        /// The value as written.
        value: String,
        /// What the value should look like, e.g. `expected a number`.
        reason: String,
    },
    /// A hostlist that does not expand.
    #[error("{at}: {key}: {source}")]
    Hostlist {
        /// File and line of the hostlist.
        at: Location,
        /// The key holding the hostlist.
        key: String,
        /// The hostlist error.
        source: crate::hostlist::HostlistError,
    },
    /// An `Include` the resolver could not provide, or nested too deep.
    #[error("{at}: cannot include `{path}': {reason}")]
    Include {
        /// Where the `Include` line is.
        at: Location,
        /// The path as written.
        path: String,
        /// The resolver's reason (it names the path it tried).
        reason: String,
    },
    /// Values that are each valid but do not fit together (duplicate names, undefined
    /// nodes, GPU counts that disagree between files, ...).
    #[error("{at}: {msg}")]
    Invalid {
        /// File and line of the value that does not fit.
        at: Location,
        /// What is wrong.
        msg: String,
    },
}

/// Reads a whole cluster from texts: `slurm.conf` (with its includes), then `gres.conf` and
/// `topology.conf` when given, each as `(name for messages, text)`.
///
/// Pods: without `topology.conf` the network is taken as flat and every node is in one pod
/// named `default`; with it, see [`apply_topology_conf`] (nodes in no leaf switch or block
/// each become a pod of their own).
///
/// Slurm 22.05's default `MaxJobId` (`read_config.h` `DEFAULT_MAX_JOB_ID`): job ids stay
/// below it.
pub const DEFAULT_MAX_JOB_ID: u64 = 0x03ff_0000;
/// The largest `MaxJobId` Slurm accepts (`slurm.h` `MAX_JOB_ID`; above it, it is reset to it).
pub const MAX_JOB_ID: u64 = 0x03ff_ffff;

/// Errors: the first [`ConfigError`] of any of the files.
pub fn parse_cluster(
    slurm: (&str, &str),
    gres: Option<(&str, &str)>,
    topology: Option<(&str, &str)>,
    include: &mut IncludeResolver<'_>,
) -> Result<ClusterConfig, ConfigError> {
    let mut cfg = parse_slurm_conf(slurm.1, slurm.0, include)?;
    if let Some((name, text)) = gres {
        apply_gres_conf(&mut cfg, text, name, include)?;
    }
    match topology {
        Some((name, text)) => apply_topology_conf(&mut cfg, text, name, include)?,
        None => {
            if !cfg.nodes.is_empty() {
                let names: Vec<String> = cfg.nodes.iter().map(|n| n.name.clone()).collect();
                cfg.pods = vec![PodConfig {
                    name: "default".to_string(),
                    nodes_expr: names.join(","),
                    nodes: names,
                }];
            }
        }
    }
    Ok(cfg)
}

/// Where a network-level topology set comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TopologyKind {
    /// A job's allocation must fit inside one node (one NVLink domain).
    Node,
    /// A job's allocation must fit inside one pod (one leaf switch or block).
    Pod,
    /// No topology constraint.
    Any,
}

impl TopologyKind {
    /// Parses `node`, `pod` or `any` (case-insensitive), as `sbatch --topology` and the
    /// `DefaultTopology=` partition key spell them.
    pub fn parse(s: &str) -> Option<TopologyKind> {
        match s.to_ascii_lowercase().as_str() {
            "node" => Some(TopologyKind::Node),
            "pod" => Some(TopologyKind::Pod),
            "any" => Some(TopologyKind::Any),
            _ => None,
        }
    }

    /// The lower-case name used on the wire, in config and in output.
    pub fn as_str(self) -> &'static str {
        match self {
            TopologyKind::Node => "node",
            TopologyKind::Pod => "pod",
            TopologyKind::Any => "any",
        }
    }
}

/// A node's administrative state as written in `slurm.conf` (`State=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfNodeState {
    /// `UNKNOWN` (the default): the node joins when its daemon registers.
    Unknown,
    /// `IDLE`: schedulable at once.
    Idle,
    /// `DOWN`: down until resumed (`scontrol update State=RESUME`).
    Down,
    /// `DRAIN`: takes no new work until resumed.
    Drain,
    /// `FAIL`: down, as `DOWN`.
    Fail,
    /// `FUTURE`: configured but not yet present.
    Future,
    /// `CLOUD`: powered off; like `UNKNOWN`, it joins when its daemon registers.
    Cloud,
}

/// One node of `slurm.conf` (`NodeName=` lines, after `DEFAULT` values and hostlist expansion),
/// merged with its `gres.conf` GPU lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeConfig {
    /// Node name (`NodeName=`), e.g. `gpu01`.
    pub name: String,
    /// Address the node daemon listens on (`NodeAddr=`, defaults to the host name).
    pub addr: String,
    /// Host name of the machine (`NodeHostname=`, defaults to the name).
    pub hostname: String,
    /// Port of this node's daemon (`Port=`, else the global `SlurmdPort`, default 6818).
    pub port: u16,
    /// Baseboards (`Boards=`, default 1). Added with the config parser; shown by
    /// `scontrol show node`.
    pub boards: u32,
    /// Sockets per node (`Sockets=`, default 1).
    pub sockets: u32,
    /// Cores per socket (`CoresPerSocket=`, default 1).
    pub cores_per_socket: u32,
    /// Hardware threads per core (`ThreadsPerCore=`, default 1).
    pub threads_per_core: u32,
    /// Schedulable CPUs (`CPUs=`, default sockets × cores × threads).
    pub cpus: u32,
    /// Memory in MiB (`RealMemory=`, default 1).
    pub real_memory_mib: u64,
    /// Temporary disk space in MiB (`TmpDisk=`, default 0): a job's `--tmp` above every
    /// node's is refused at submission (Slurm 22.05 `_build_node_list`).
    #[serde(default)]
    pub tmp_disk_mib: u64,
    /// GPUs on the node (from `Gres=gpu[:type]:N`).
    pub gpus: u32,
    /// GPU model (`Gres=gpu:h100:8` gives `h100`), if typed.
    pub gpu_type: Option<String>,
    /// GPU device files, one per GPU in index order (from gres.conf `File=`); empty when unknown.
    pub gpu_files: Vec<String>,
    /// Cores the node's GPUs are close to (gres.conf `Cores=`), as written; when several
    /// gres.conf lines give different values they are joined with `,` (their union);
    /// `None` when not given.
    pub gpu_cores: Option<String>,
    /// gres.conf gave `Links=` for the node's GPUs: they are linked unevenly (pairs, islands),
    /// and the controller picks a job's GPUs in aligned blocks; otherwise the lowest free
    /// indices, as Slurm 22.05 (`gres_select_filter.c` `_set_node_bits` takes GPUs in index
    /// order, by link count only when `Links=` is given).
    #[serde(default)]
    pub gpu_links: bool,
    /// All GRES of the node as written (`Gres=`), e.g. `gpu:h100:8`.
    pub gres: String,
    /// Scheduling weight (`Weight=`, default 1; lower is used first).
    pub weight: u32,
    /// Features (`Features=` / `Feature=`), in order.
    pub features: Vec<String>,
    /// Initial state (`State=`).
    pub state: ConfNodeState,
}

/// One partition of `slurm.conf` (`PartitionName=` lines, after `DEFAULT` values).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionConfig {
    /// Partition name.
    pub name: String,
    /// Node names, expanded and in config order (`Nodes=`; `ALL` is every node).
    pub nodes: Vec<String>,
    /// The nodes as written (`Nodes=gpu[01-04]`), for display.
    pub nodes_expr: String,
    /// `Default=YES`.
    pub default: bool,
    /// Maximum time limit in minutes (`MaxTime=`); `None` is `UNLIMITED`.
    pub max_time_min: Option<u64>,
    /// Default time limit in minutes (`DefaultTime=`); `None` means the partition's `MaxTime`.
    pub default_time_min: Option<u64>,
    /// The state as written, upper case (`UP`, `DOWN`, `DRAIN`, `INACTIVE`).
    pub state: String,
    /// `PriorityTier=` (default 1).
    pub priority_tier: u32,
    /// `PriorityJobFactor=` (default 1).
    pub priority_job_factor: u32,
    /// Maximum nodes per job (`MaxNodes=`); `None` is `UNLIMITED`.
    pub max_nodes: Option<u32>,
    /// Flotilla: the topology a job gets when it declares none (`DefaultTopology=node|pod|any`,
    /// default `any`).
    pub default_topology: TopologyKind,
    /// Flotilla: nodes of this partition are a pool dedicated to sub-node shapes
    /// (`SubNodePool=YES`): jobs of at most this many GPUs per node only.
    pub sub_node_pool: bool,
    /// Flotilla: nodes of this partition are the inference pool (`InferencePool=YES`):
    /// replicas go there first; training may borrow its idle headroom only as preemptible.
    #[serde(default)]
    pub inference_pool: bool,
    /// Who may use the partition (`AllowGroups=`, `AllowAccounts=`, `DenyAccounts=`,
    /// `AllowQos=`, `DenyQos=`, `RootOnly=`, `DisableRootJobs=`).
    #[serde(default)]
    pub access: PartitionAccess,
    /// `TRESBillingWeights=` as written (`CPU=1.0,Mem=0.25G,GRES/gpu=2.0`, checked by
    /// [`crate::fairshare::BillingWeights::parse`]); `None`: jobs are billed their CPUs.
    #[serde(default)]
    pub tres_billing_weights: Option<String>,
}

/// The `priority/multifactor` keys of `slurm.conf` (slurm.conf(5), Slurm 22.05 defaults).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityConf {
    /// `PriorityDecayHalfLife` in seconds (default `7-0`); 0 = no decay.
    pub decay_half_life_s: u64,
    /// `PriorityCalcPeriod` in seconds (default 5 minutes).
    pub calc_period_s: u64,
    /// `PriorityUsageResetPeriod` (default `NONE`).
    pub usage_reset_period: crate::fairshare::ResetPeriod,
    /// `PriorityMaxAge` in seconds (default `7-0`): the age at which the age factor is 1.
    pub max_age_s: u64,
    /// `PriorityFavorSmall=YES`: the job-size factor favours small jobs.
    pub favor_small: bool,
    /// `PriorityWeightAge`.
    pub weight_age: u32,
    /// `PriorityWeightAssoc`.
    pub weight_assoc: u32,
    /// `PriorityWeightFairshare`.
    pub weight_fairshare: u32,
    /// `PriorityWeightJobSize`.
    pub weight_job_size: u32,
    /// `PriorityWeightPartition`.
    pub weight_partition: u32,
    /// `PriorityWeightQOS`.
    pub weight_qos: u32,
}

impl Default for PriorityConf {
    fn default() -> Self {
        PriorityConf {
            decay_half_life_s: 7 * 86_400,
            calc_period_s: 300,
            usage_reset_period: crate::fairshare::ResetPeriod::None,
            max_age_s: 7 * 86_400,
            favor_small: false,
            weight_age: 0,
            weight_assoc: 0,
            weight_fairshare: 0,
            weight_job_size: 0,
            weight_partition: 0,
            weight_qos: 0,
        }
    }
}

/// The access-control keys of a `PartitionName=` line, as Slurm 22.05 reads them
/// (slurm.conf(5)). A list key absent or `ALL` is `None` (everyone); names are kept as
/// written. The controller enforces them at submission and on `scontrol update`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PartitionAccess {
    /// `AllowGroups=`: Unix groups whose members may use the partition (root and `SlurmUser`
    /// always may).
    pub allow_groups: Option<Vec<String>>,
    /// `AllowAccounts=`: the only accounts whose jobs may use it.
    pub allow_accounts: Option<Vec<String>>,
    /// `DenyAccounts=`: accounts whose jobs may not (ignored when `AllowAccounts` is set).
    pub deny_accounts: Vec<String>,
    /// `AllowQos=`: the only QOS whose jobs may use it.
    pub allow_qos: Option<Vec<String>>,
    /// `DenyQos=`: QOS whose jobs may not (ignored when `AllowQos` is set).
    pub deny_qos: Vec<String>,
    /// `RootOnly=YES`: only root or `SlurmUser` may submit to it.
    pub root_only: bool,
    /// `DisableRootJobs=`: jobs of uid 0 refused; `None`: the global `DisableRootJobs`.
    pub disable_root_jobs: Option<bool>,
}

/// A pod: a set of nodes under one leaf switch (`topology/tree`) or one block (`topology/block`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodConfig {
    /// The switch or block name (`SwitchName=leaf1`, `BlockName=b1`).
    pub name: String,
    /// Node names in the pod, expanded, in config order.
    pub nodes: Vec<String>,
    /// The nodes as written (`Nodes=gpu[01-02]`).
    pub nodes_expr: String,
}

/// A non-leaf switch of `topology/tree` (`SwitchName=spine Switches=leaf[1-2]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchConfig {
    /// Switch name.
    pub name: String,
    /// Child switch names, expanded.
    pub switches: Vec<String>,
    /// Child switches as written.
    pub switches_expr: String,
}

/// Where the controller's state lives (Flotilla's `StateStorage*` keys).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StateStorageConf {
    /// `StateStorageType=`: `state/sqlite` (the default) or `state/postgres`.
    pub storage_type: String,
    /// `StateStorageHost=` (PostgreSQL): a host, or a directory holding the server's socket.
    pub host: String,
    /// `StateStoragePort=` (default 5432).
    pub port: u16,
    /// `StateStorageUser=`; `None`: `SlurmUser`.
    pub user: Option<String>,
    /// `StateStorageLoc=`: the database name (default `flotilla`).
    pub loc: String,
    /// `StateStoragePassFile=`: the password file, if any.
    pub pass_file: Option<String>,
}

impl StateStorageConf {
    /// Whether the state lives in PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.storage_type == "state/postgres"
    }
}

/// The typed cluster model read from `slurm.conf`, `gres.conf` and `topology.conf`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ClusterConfig {
    /// `ClusterName=`.
    pub cluster_name: String,
    /// Controller host (`SlurmctldHost=vm(127.0.0.1)` gives `vm`).
    pub control_host: String,
    /// Controller address (`SlurmctldHost=vm(127.0.0.1)` gives `127.0.0.1`; else the host).
    pub control_addr: String,
    /// `SlurmctldPort=` (default 6817).
    pub slurmctld_port: u16,
    /// `SlurmdPort=` (default 6818).
    pub slurmd_port: u16,
    /// `SlurmUser=` (default `root`).
    pub slurm_user: String,
    /// `StateSaveLocation=`.
    pub state_save_location: String,
    /// `SlurmdSpoolDir=` (may hold `%n`).
    pub slurmd_spool_dir: String,
    /// `DefMemPerCPU=` in MiB, if set.
    pub def_mem_per_cpu_mib: Option<u64>,
    /// `KillWait=` in seconds (default 30).
    pub kill_wait_s: u64,
    /// `MinJobAge=` in seconds (default 300).
    pub min_job_age_s: u64,
    /// `MaxJobCount=` (default 10000).
    pub max_job_count: u64,
    /// `MaxArraySize=` (default 1001).
    pub max_array_size: u64,
    /// `FirstJobId=` (default 1): where job ids start.
    #[serde(default)]
    pub first_job_id: u64,
    /// `MaxJobId=` (default [`DEFAULT_MAX_JOB_ID`]; 0 here means the default): job ids stay
    /// below it and wrap to `FirstJobId` (Slurm's `get_next_job_id`).
    #[serde(default)]
    pub max_job_id: u64,
    /// `SelectType=`, e.g. `select/cons_tres`; chooses the placement plugin.
    pub select_type: String,
    /// `PriorityType=`, e.g. `priority/multifactor`.
    pub priority_type: String,
    /// `PreemptType=`.
    pub preempt_type: String,
    /// `SchedulerType=`, e.g. `sched/backfill`.
    pub scheduler_type: String,
    /// `TopologyPlugin=`, e.g. `topology/tree`.
    pub topology_plugin: String,
    /// `AlertProgram=` (Flotilla): program handed each alert/page decision as JSON.
    pub alert_program: Option<String>,
    /// `PreemptExemptTime=` as written (a Slurm time string in seconds; the controller parses
    /// it and refuses to start on a bad one); `None`: the design's 10 min.
    #[serde(default)]
    pub preempt_exempt_time: Option<String>,
    /// `ElasticGrowInterval=` (Flotilla, seconds): an elastic job grows at most once per this
    /// interval; `None`: the core's default (60 s).
    #[serde(default)]
    pub elastic_grow_interval_s: Option<u64>,
    /// `ElasticRdzvPort=` (Flotilla): first port of elastic jobs' rendezvous endpoints;
    /// `None`: 29400.
    #[serde(default)]
    pub elastic_rdzv_port: Option<u16>,
    /// `ElasticRdzvPortCount=` (Flotilla): how many ports from `elastic_rdzv_port`; `None`:
    /// 1000.
    #[serde(default)]
    pub elastic_rdzv_port_count: Option<u16>,
    /// `DisableRootJobs=YES`: no job may run as uid 0 (partitions may override).
    #[serde(default)]
    pub disable_root_jobs: bool,
    /// `PrivateData=` values, lower case (`jobs`, `nodes`, `partitions`, ...).
    #[serde(default)]
    pub private_data: Vec<String>,
    /// `AuthAltTypes=` values, lower case: `auth/jwt` turns on JSON Web Tokens.
    #[serde(default)]
    pub auth_alt_types: Vec<String>,
    /// `AuthAltParameters=` as written: `jwt_key=PATH`, `disable_token_creation`,
    /// `max_token_lifespan=SECONDS`, comma-separated (read by the controller's token code).
    #[serde(default)]
    pub auth_alt_parameters: String,
    /// `MetricsType=` (Slurm 25.11): `Some("metrics/openmetrics")` serves the metrics.
    #[serde(default)]
    pub metrics_type: Option<String>,
    /// `MetricsAuthUsers=` user names; `None`: unset.
    #[serde(default)]
    pub metrics_auth_users: Option<Vec<String>>,
    /// `MetricsParameters=` values, lower case (`ignore_private_data`).
    #[serde(default)]
    pub metrics_parameters: Vec<String>,
    /// `AccountingStorageEnforce=` values, lower case (`associations`, `limits`, ...).
    #[serde(default)]
    pub accounting_storage_enforce: Vec<String>,
    /// Flotilla `ServiceAccounts=`: accounts whose users may create services (`sdeploy`);
    /// `None`: only root and `SlurmUser`.
    #[serde(default)]
    pub service_accounts: Option<Vec<String>>,
    /// Flotilla `ServiceMaxPriority=`: the highest priority a non-admin's service may have.
    #[serde(default)]
    pub service_max_priority: u32,
    /// Flotilla `ServiceMaxReplicas=`: the most replicas (sum of `max_replicas`) one
    /// non-admin user's services may have.
    #[serde(default)]
    pub service_max_replicas: u32,
    /// Flotilla `ServiceMaxGPUs=`: the most GPUs (sum of `max_replicas` × GPUs per replica)
    /// one non-admin user's services may hold.
    #[serde(default)]
    pub service_max_gpus: u32,
    /// `SchedulerParameters=` as written (comma-separated options; the controller reads
    /// `max_script_size=`); `None`: unset.
    #[serde(default)]
    pub scheduler_parameters: Option<String>,
    /// `DependencyParameters=` as written (the controller reads `kill_invalid_depend`);
    /// `None`: unset.
    #[serde(default)]
    pub dependency_parameters: Option<String>,
    /// `RequeueExit=` as written (exit codes, `3,5-6`): a batch job whose script exits with
    /// one is requeued; `None`: unset.
    #[serde(default)]
    pub requeue_exit: Option<String>,
    /// `RequeueExitHold=` as written: a batch job whose script exits with one is requeued,
    /// held, in state `SPECIAL_EXIT`; `None`: unset.
    #[serde(default)]
    pub requeue_exit_hold: Option<String>,
    /// The `priority/multifactor` keys (`PriorityWeight*`, `PriorityDecayHalfLife`, ...).
    #[serde(default)]
    pub priority: PriorityConf,
    /// `SlurmctldHost=` lines after the first: the backup controllers, `(host, address)`, in
    /// order (the first line is `control_host`/`control_addr`).
    #[serde(default)]
    pub backup_controllers: Vec<(String, String)>,
    /// `SlurmctldTimeout=` in seconds: the leader lease (default 6).
    #[serde(default)]
    pub slurmctld_timeout_s: u64,
    /// `SlurmdTimeout=` in seconds (Slurm's default 300 where slurm.conf omits it; `None`
    /// only in a cluster JSON written without it, read as 300): how long a node daemon may be
    /// silent, and with one controller the keepalive period ([`ClusterConfig::keepalive`]).
    #[serde(default)]
    pub slurmd_timeout_s: Option<u64>,
    /// The `StateStorage*` keys (Flotilla): where the controller's state lives.
    #[serde(default)]
    pub state_storage: StateStorageConf,
    /// Every key=value of the global section as read (keys in canonical case), for
    /// `scontrol show config` and for keys later issues pick up.
    pub raw: Vec<(String, String)>,
    /// Nodes in config order.
    pub nodes: Vec<NodeConfig>,
    /// Partitions in config order.
    pub partitions: Vec<PartitionConfig>,
    /// Pods (leaf switches or blocks) in config order.
    pub pods: Vec<PodConfig>,
    /// Non-leaf switches (tree topology only).
    pub switches: Vec<SwitchConfig>,
    /// `BlockSizes=` of `topology/block`, if given.
    pub block_sizes: Vec<u32>,
    /// Warnings to print once (keys Slurm knows that Flotilla does not use yet, and the
    /// leniencies documented on the parsers), each starting with file and line.
    pub warnings: Vec<String>,
}

/// The leading controller's keepalives to idle nodes ([`ClusterConfig::keepalive`]): both
/// sides derive it from slurm.conf, so a node judges silence by the period its controller
/// keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// The controller sends an idle node a keepalive once this long passed without any other
    /// message to it (any message counts: a busy node hears none).
    pub every: Duration,
    /// A node that heard nothing (no message of any kind) from its controller for this long,
    /// after a first keepalive, leaves the session: for the next `SlurmctldHost` with
    /// backups, to reconnect with one controller.
    pub silence: Duration,
}

impl ClusterConfig {
    /// The keepalive rule, by the number of `SlurmctldHost=` lines:
    ///
    /// - **One controller** (no backup): there is no takeover to detect, so the keepalive
    ///   follows Slurm's node pings: every third of `SlurmdTimeout` (100 s when it is 0), as
    ///   Slurm 22.05's `_slurmctld_background` (controller.c) sets `ping_interval` and
    ///   `ping_nodes` (ping_nodes.c) pings only the nodes that did not answer within that
    ///   time. The node's silence limit is three periods (`SlurmdTimeout`, or 300 s): the
    ///   time after which Slurm's controller gives up on a silent node. At the default 300 s
    ///   an idle node costs one frame every 100 s (10,000 nodes: 100 frames a second).
    /// - **With backups** (a leader lease others wait on): every third of `SlurmctldTimeout`
    ///   (6 s when 0), silence 1.5 `SlurmctldTimeout`, so that a node leaves a leader that
    ///   lost its lease (it stops sending once the lease is stale) soon after a standby can
    ///   have taken it, and failover stays fast.
    ///
    /// Every period is at least 100 ms.
    pub fn keepalive(&self) -> Keepalive {
        let floor = Duration::from_millis(100);
        if self.backup_controllers.is_empty() {
            match self.slurmd_timeout_s.unwrap_or(300) {
                0 => Keepalive { every: Duration::from_secs(100), silence: Duration::from_secs(300) },
                t => Keepalive { every: (Duration::from_secs(t) / 3).max(floor), silence: Duration::from_secs(t).max(3 * floor) },
            }
        } else {
            let lease = Duration::from_secs(if self.slurmctld_timeout_s == 0 { 6 } else { self.slurmctld_timeout_s });
            Keepalive { every: (lease / 3).max(floor), silence: (lease * 3 / 2).max(3 * floor / 2) }
        }
    }

    /// The controllers in slurm.conf's order (its `SlurmctldHost=` lines: the primary, then
    /// the backups), each as `(host name, address)` (the name where no address is given).
    /// Empty when slurm.conf names none.
    pub fn controllers(&self) -> Vec<(String, String)> {
        let primary = (!self.control_host.is_empty() || !self.control_addr.is_empty()).then(|| {
            let addr = if self.control_addr.is_empty() { self.control_host.clone() } else { self.control_addr.clone() };
            (self.control_host.clone(), addr)
        });
        primary.into_iter().chain(self.backup_controllers.iter().cloned()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One controller: Slurm's ping cadence (a third of `SlurmdTimeout`, 100 s when 0),
    /// silence three periods; with backups: a third of `SlurmctldTimeout`, silence 1.5 times it.
    #[test]
    fn keepalive_follows_slurmd_timeout_alone_and_slurmctld_timeout_with_backups() {
        let s = Duration::from_secs;
        let ka = |backups: usize, ctld: u64, slurmd: Option<u64>| {
            let c = ClusterConfig {
                backup_controllers: (0..backups).map(|i| (format!("b{i}"), format!("10.0.0.{i}"))).collect(),
                slurmctld_timeout_s: ctld,
                slurmd_timeout_s: slurmd,
                ..ClusterConfig::default()
            };
            let k = c.keepalive();
            (k.every, k.silence)
        };
        assert_eq!(ka(0, 6, Some(300)), (s(100), s(300)), "Slurm's defaults, one controller");
        assert_eq!(ka(0, 6, None), (s(100), s(300)), "a cluster JSON without SlurmdTimeout: 300");
        assert_eq!(ka(0, 6, Some(0)), (s(100), s(300)), "SlurmdTimeout=0: Slurm pings every 100 s");
        assert_eq!(ka(0, 60, Some(3)), (s(1), s(3)), "SlurmctldTimeout plays no part alone");
        assert_eq!(ka(1, 6, Some(300)), (s(2), s(9)), "with a backup: the lease's third, 1.5 leases");
        assert_eq!(ka(2, 3, Some(300)), (s(1), Duration::from_millis(4500)));
        assert_eq!(ka(1, 0, None), (s(2), s(9)), "SlurmctldTimeout unset: the default 6 s lease");
        assert_eq!(ka(0, 6, Some(1)), (s(1) / 3, s(1)), "SlurmdTimeout=1: a third of a second");
    }

    fn words() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("NodeName=".to_string()),
            Just("PartitionName=".to_string()),
            Just("SwitchName=".to_string()),
            Just("Nodes=".to_string()),
            Just("Name=gpu ".to_string()),
            Just("File=/dev/nvidia[0-3] ".to_string()),
            Just("Gres=gpu:h100:8 ".to_string()),
            Just("DEFAULT ".to_string()),
            Just("ALL ".to_string()),
            Just("Include x ".to_string()),
            Just("MaxTime=1-2:3:4 ".to_string()),
            Just("n[1-4] ".to_string()),
            Just("\\\n".to_string()),
            Just("\n".to_string()),
            Just("# c".to_string()),
            Just("\"".to_string()),
            "[ -~]{0,6}",
        ];
        prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn parsers_never_panic_on_arbitrary_text(text in "(?s).{0,300}") {
            let mut inc = |_: &str| -> Result<(String, String), String> { Ok(("inc".into(), "A=1".into())) };
            let _ = parse_cluster(("s", &text), Some(("g", &text)), Some(("t", &text)), &mut inc);
        }

        #[test]
        fn parsers_never_panic_on_config_like_text(text in words(), gres in words(), topo in words()) {
            let mut inc = |_: &str| -> Result<(String, String), String> { Ok(("inc".into(), "NodeName=i1".into())) };
            let base = format!("GresTypes=gpu\nNodeName=n[1-4] Gres=gpu:8\n{text}");
            if let Ok(c) = parse_slurm_conf(&base, "s", &mut inc) {
                let mut c2 = c.clone();
                let _ = apply_gres_conf(&mut c2, &gres, "g", &mut inc);
                let mut c3 = c;
                if apply_topology_conf(&mut c3, &topo, "t", &mut inc).is_ok() {
                    // Pods partition the nodes.
                    let mut all: Vec<&String> = c3.pods.iter().flat_map(|p| &p.nodes).collect();
                    all.sort();
                    let mut want: Vec<&String> = c3.nodes.iter().map(|n| &n.name).collect();
                    want.sort();
                    prop_assert_eq!(all, want);
                }
            }
        }
    }
}
