//! What a job asks for, as the scheduling core sees it.
//!
//! The controller's admission turns Slurm options (`-N`, `--gres=gpu:h100:4`, `--gpus`,
//! `--gpus-per-node`, `--exclusive`, `-c`, `--mem`, `-w`, `-x`, Flotilla's `--topology`) into a
//! [`Request`]; the simulator builds them from trace rows. The core never guesses a topology:
//! the job declares one or inherits its partition's `DefaultTopology=`.

use crate::cluster::{NodeId, PartId, Time, MILLI};
use crate::config::TopologyKind;
use crate::features::Constraint;
use serde::{Deserialize, Serialize};

/// Slurm job id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobId(pub u64);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The resources of one job.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Request {
    /// Total GPUs (whole GPUs; 1 for a fractional share).
    pub gpus: u32,
    /// Milli-GPUs held on each GPU: 1000 for whole GPUs, less for a share of one GPU (then
    /// `gpus` must be 1).
    pub gpu_milli: u32,
    /// Exact number of nodes (`-N`), if given; a node range's minimum.
    pub nodes: Option<u32>,
    /// A node range's maximum (`-N MIN-MAX`, Slurm's `max_nodes`), above `nodes`: the job
    /// starts on as many nodes up to it as fit then ([`crate::placement::place_range`]).
    /// Only for requests whose nodes are alike (no GPUs, or GPUs per node); `None`: exactly
    /// `nodes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes_max: Option<u32>,
    /// GPUs on each node (`--gpus-per-node`, or `--gres=gpu:N` with `-N`), if given.
    pub gpus_per_node: Option<u32>,
    /// Milli-CPUs needed on each node used.
    pub cpu_milli_per_node: u64,
    /// MiB needed on each node used.
    pub mem_mib_per_node: u64,
    /// Declared topology (the job's `--topology`, else its partition's default).
    pub topology: TopologyKind,
    /// Allowed GPU models (`--gres=gpu:h100:N`, or a trace's `gpu_spec`); empty = any.
    pub gpu_types: Vec<String>,
    /// Whole nodes only (`--exclusive`).
    pub exclusive: bool,
    /// Nodes the job must use (`-w`).
    pub required_nodes: Vec<NodeId>,
    /// Nodes the job must not use (`-x`).
    pub excluded_nodes: Vec<NodeId>,
    /// Node features every node used must satisfy (`--constraint`; only constraints that
    /// [`Constraint::per_node`] holds for: the controller refuses the others). Boxed: most
    /// jobs have none, and a request is copied and hashed per job.
    pub features: Option<Box<Constraint>>,
}

impl Default for Request {
    fn default() -> Self {
        Request {
            gpus: 0,
            gpu_milli: MILLI,
            nodes: None,
            nodes_max: None,
            gpus_per_node: None,
            cpu_milli_per_node: 1000,
            mem_mib_per_node: 0,
            topology: TopologyKind::Any,
            gpu_types: Vec::new(),
            exclusive: false,
            required_nodes: Vec::new(),
            excluded_nodes: Vec::new(),
            features: None,
        }
    }
}

impl Request {
    /// A request for `gpus` whole GPUs with the given topology and 1 CPU per node.
    pub fn gpus(gpus: u32, topology: TopologyKind) -> Request {
        Request {
            gpus,
            topology,
            ..Request::default()
        }
    }

    /// Whether a node with features `has` satisfies the job's `--constraint` (true without
    /// one).
    pub fn features_ok(&self, has: &[String]) -> bool {
        self.features.as_ref().is_none_or(|c| c.matches(has))
    }

    /// GPU demand in milli-GPUs.
    pub fn gpu_demand_milli(&self) -> u64 {
        u64::from(self.gpus) * u64::from(self.gpu_milli)
    }

    /// True for a fractional share of one GPU.
    pub fn is_share(&self) -> bool {
        self.gpu_milli < MILLI && self.gpus > 0
    }
}

/// A job as the scheduling core tracks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Job id.
    pub id: JobId,
    /// The partition it runs in (`--partition`, else the default one).
    pub partition: PartId,
    /// Account (quota scope) the job charges, e.g. `research`.
    pub account: String,
    /// User name.
    pub user: String,
    /// Submission time (s).
    pub submit_time: Time,
    /// Earliest start (`--begin`), if any.
    pub begin_time: Option<Time>,
    /// Base priority (admin-set or QOS priority; Slurm `Priority=` of `scontrol update`).
    pub base_priority: u32,
    /// `--nice` (positive lowers priority).
    pub nice: i32,
    /// An operator's `scontrol update SiteFactor=` (Slurm's `site_factor` less its
    /// `NICE_OFFSET`): added to the priority by `priority/multifactor`, ignored by
    /// `priority/basic`, as in Slurm 22.05 (`priority_multifactor.c`). 0 when never set.
    pub site_factor: i32,
    /// Time limit in seconds; `None` = unlimited.
    pub time_limit_s: Option<u64>,
    /// The resources asked for (GPUs, shape, topology, CPUs, memory).
    pub request: Request,
    /// May be preempted (Flotilla `--preemptible`).
    pub preemptible: bool,
    /// Checkpoint size in bytes (Flotilla `--checkpoint-bytes`); sets the preemption deadline.
    pub checkpoint_bytes: u64,
    /// Held (`--hold`, `scontrol hold`): never considered until released.
    pub held: Option<HoldKind>,
    /// Dependencies not yet satisfied (`--dependency`); the controller evaluates them.
    pub dependency_pending: bool,
    /// Times the job has been preempted (ages its priority).
    pub preempt_count: u32,
    /// QOS (`--qos`; else the association's `DefaultQOS`; else Slurm's `normal`).
    #[serde(default = "default_qos")]
    pub qos: String,
    /// Elastic sizing (Flotilla `sbatch --elastic`): `request` is then the gang of `min` the
    /// job starts as, and the core grows it up to `max` from capacity nobody else needs
    /// ([`crate::sched`]'s `elastic` module). `None`: a rigid job.
    #[serde(default)]
    pub elastic: Option<Elastic>,
}

/// What an elastic job's size is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ElasticUnit {
    /// Nodes (`sbatch -N MIN-MAX --elastic`): each member is a node with the per-node shape of
    /// the job's request; the job grows by whole members.
    Nodes,
    /// GPUs (`sbatch --gpus=MIN-MAX --elastic`): a GPU-granular job grows by GPUs inside its
    /// topology set (on its node for `node`, in its pod for `pod`).
    Gpus,
}

/// An elastic job's size range (torchrun's `--nnodes=MIN:MAX` is the model).
///
/// The job starts as a gang of `min` (its [`JobSpec::request`]); the part above `min` is
/// borrowed capacity, grown `step` at a time (several steps in one round) and the first
/// thing taken back. Sizes are in `unit`: nodes, or GPUs for a GPU-granular job.
/// Invariants (admission checks them): `1 <= min <= max`, `step >= 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Elastic {
    /// What `min`, `max` and `step` count.
    pub unit: ElasticUnit,
    /// The size the job starts at and is never shrunk below.
    pub min: u32,
    /// The most it grows to (`scontrol update NumNodes=` sets a new one).
    pub max: u32,
    /// Growth granularity (`--elastic-step=K`; default 1): the job grows by multiples of it.
    pub step: u32,
}

/// Slurm's default QOS name, `normal`.
pub const DEFAULT_QOS: &str = "normal";

fn default_qos() -> String {
    DEFAULT_QOS.to_string()
}

/// Who holds a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldKind {
    /// The user (`JobHeldUser`).
    User,
    /// An admin or `--hold` (`JobHeldAdmin`).
    Admin,
}

impl JobSpec {
    /// A minimal job for tests, simulations and benchmarks: partition 0, account `default`.
    pub fn simple(id: u64, submit_time: Time, request: Request, time_limit_s: Option<u64>) -> JobSpec {
        JobSpec {
            id: JobId(id),
            partition: PartId(0),
            account: "default".into(),
            user: "user".into(),
            submit_time,
            begin_time: None,
            base_priority: 0,
            nice: 0,
            site_factor: 0,
            time_limit_s,
            request,
            preemptible: false,
            checkpoint_bytes: 0,
            held: None,
            dependency_pending: false,
            preempt_count: 0,
            qos: default_qos(),
            elastic: None,
        }
    }
}
