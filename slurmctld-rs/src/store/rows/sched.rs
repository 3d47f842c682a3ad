//! Rows of the scheduling core's types the store keeps: a job's [`JobSpecRow`] (with its
//! [`RequestRow`]), its allocations ([`AllocationRow`]) and a node's availability
//! ([`NodeAvailRow`], a `nodes.avail`).

use flotilla_core::features::Constraint;
use flotilla_core::cluster::{GpuMask, NodeAlloc, NodeAvail, NodeId, PartId};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{Elastic, ElasticUnit, HoldKind, JobId, JobSpec, Request};
use flotilla_core::sched::{AllocId, Allocation, Owner, ServiceId};
use serde::{Deserialize, Serialize};

/// Whether an `i32` field is 0 (left out of a row).
fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// The core's view of a job ([`JobSpec`]). `partition` is the partition's index when the
/// record was written; the controller re-resolves it by the record's partition name. The
/// spec's `qos` is not a field here: it is the record's `qos` ([`super::JobRow`] sets it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpecRow {
    /// Core job id.
    #[serde(rename = "id")]
    pub id: u64,
    /// Partition index.
    #[serde(rename = "partition")]
    pub partition: u32,
    /// Account.
    #[serde(rename = "account")]
    pub account: String,
    /// User name.
    #[serde(rename = "user")]
    pub user: String,
    /// Submission time (s).
    #[serde(rename = "submit_time")]
    pub submit_time: u64,
    /// `--begin` (s).
    #[serde(rename = "begin_time")]
    pub begin_time: Option<u64>,
    /// Base priority.
    #[serde(rename = "base_priority")]
    pub base_priority: u32,
    /// `--nice`.
    #[serde(rename = "nice")]
    pub nice: i32,
    /// An operator's `SiteFactor=` (absent when 0).
    #[serde(rename = "site_factor", default, skip_serializing_if = "is_zero")]
    pub site_factor: i32,
    /// Time limit (s); `None`: unlimited.
    #[serde(rename = "time_limit_s")]
    pub time_limit_s: Option<u64>,
    /// Resources.
    #[serde(rename = "request")]
    pub request: RequestRow,
    /// May be preempted.
    #[serde(rename = "preemptible")]
    pub preemptible: bool,
    /// Checkpoint size (bytes).
    #[serde(rename = "checkpoint_bytes")]
    pub checkpoint_bytes: u64,
    /// Who holds it.
    #[serde(rename = "held")]
    pub held: Option<HoldRow>,
    /// Dependencies not yet satisfied.
    #[serde(rename = "dependency_pending")]
    pub dependency_pending: bool,
    /// Times preempted.
    #[serde(rename = "preempt_count")]
    pub preempt_count: u32,
    /// Elastic sizing (`sbatch --elastic`); absent for a rigid job (and in rows written
    /// before elastic jobs).
    #[serde(rename = "elastic", default, skip_serializing_if = "Option::is_none")]
    pub elastic: Option<ElasticRow>,
}

/// An elastic job's size range ([`Elastic`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElasticRow {
    /// `Nodes` or `Gpus`.
    #[serde(rename = "unit")]
    pub unit: ElasticUnitRow,
    /// Smallest size.
    #[serde(rename = "min")]
    pub min: u32,
    /// Largest size.
    #[serde(rename = "max")]
    pub max: u32,
    /// Growth step.
    #[serde(rename = "step")]
    pub step: u32,
}

/// What an elastic size counts ([`ElasticUnit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ElasticUnitRow {
    /// Nodes.
    #[serde(rename = "Nodes")]
    Nodes,
    /// GPUs.
    #[serde(rename = "Gpus")]
    Gpus,
}

impl From<Elastic> for ElasticRow {
    fn from(e: Elastic) -> Self {
        let Elastic { unit, min, max, step } = e;
        let unit = match unit {
            ElasticUnit::Nodes => ElasticUnitRow::Nodes,
            ElasticUnit::Gpus => ElasticUnitRow::Gpus,
        };
        ElasticRow { unit, min, max, step }
    }
}

impl From<ElasticRow> for Elastic {
    fn from(e: ElasticRow) -> Self {
        let ElasticRow { unit, min, max, step } = e;
        let unit = match unit {
            ElasticUnitRow::Nodes => ElasticUnit::Nodes,
            ElasticUnitRow::Gpus => ElasticUnit::Gpus,
        };
        Elastic { unit, min, max, step }
    }
}

/// Who holds a job ([`HoldKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HoldRow {
    /// The user.
    #[serde(rename = "User")]
    User,
    /// An admin or `--hold`.
    #[serde(rename = "Admin")]
    Admin,
}

/// A job's resources ([`Request`]). `required_nodes`/`excluded_nodes` are node indices in
/// the configuration the record was written under (the record's name lists say the same by
/// name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRow {
    /// Total GPUs.
    #[serde(rename = "gpus")]
    pub gpus: u32,
    /// Milli-GPUs held on each GPU.
    #[serde(rename = "gpu_milli")]
    pub gpu_milli: u32,
    /// `-N`.
    #[serde(rename = "nodes")]
    pub nodes: Option<u32>,
    /// A node range's maximum (absent: exactly `nodes`).
    #[serde(rename = "nodes_max", default, skip_serializing_if = "Option::is_none")]
    pub nodes_max: Option<u32>,
    /// GPUs on each node.
    #[serde(rename = "gpus_per_node")]
    pub gpus_per_node: Option<u32>,
    /// Milli-CPUs per node.
    #[serde(rename = "cpu_milli_per_node")]
    pub cpu_milli_per_node: u64,
    /// MiB per node.
    #[serde(rename = "mem_mib_per_node")]
    pub mem_mib_per_node: u64,
    /// Declared topology.
    #[serde(rename = "topology")]
    pub topology: TopologyRow,
    /// Allowed GPU models.
    #[serde(rename = "gpu_types")]
    pub gpu_types: Vec<String>,
    /// Whole nodes only.
    #[serde(rename = "exclusive")]
    pub exclusive: bool,
    /// `-w` node indices.
    #[serde(rename = "required_nodes")]
    pub required_nodes: Vec<u32>,
    /// `-x` node indices.
    #[serde(rename = "excluded_nodes")]
    pub excluded_nodes: Vec<u32>,
    /// `--constraint` as the job keeps it (absent: none).
    #[serde(rename = "features", default, skip_serializing_if = "Option::is_none")]
    pub features: Option<String>,
}

/// A declared topology ([`TopologyKind`]), by variant name (`"Node"`, `"Pod"`, `"Any"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TopologyRow {
    /// One node.
    #[serde(rename = "Node")]
    Node,
    /// One pod.
    #[serde(rename = "Pod")]
    Pod,
    /// Anywhere.
    #[serde(rename = "Any")]
    Any,
}

/// One allocation ([`Allocation`]). `part.node` is the node's index when written; the
/// controller re-resolves it from the record's node names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationRow {
    /// Allocation id.
    #[serde(rename = "id")]
    pub id: u64,
    /// Owner.
    #[serde(rename = "owner")]
    pub owner: OwnerRow,
    /// What it holds on which node.
    #[serde(rename = "part")]
    pub part: NodeAllocRow,
    /// When made (s).
    #[serde(rename = "created_at")]
    pub created_at: u64,
    /// May be preempted.
    #[serde(rename = "preemptible")]
    pub preemptible: bool,
    /// Exceeds its quota guarantee.
    #[serde(rename = "borrowed")]
    pub borrowed: bool,
    /// Backfill for the reservation of this core job id.
    #[serde(rename = "backfill_for")]
    pub backfill_for: Option<u64>,
}

/// An allocation's owner ([`Owner`]): `{"Job":N}` or `{"Replica":{"service":S,"replica":N}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OwnerRow {
    /// A batch job, by core job id.
    #[serde(rename = "Job")]
    Job(u64),
    /// A service replica.
    #[serde(rename = "Replica")]
    Replica {
        /// Service id.
        #[serde(rename = "service")]
        service: u32,
        /// Replica (core job) id.
        #[serde(rename = "replica")]
        replica: u64,
    },
}

/// An allocation's part on one node ([`NodeAlloc`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAllocRow {
    /// Node index.
    #[serde(rename = "node")]
    pub node: u32,
    /// GPU bitmask (bit `i`: GPU `i`).
    #[serde(rename = "gpus")]
    pub gpus: u64,
    /// Milli-GPUs on each GPU of the mask.
    #[serde(rename = "gpu_milli")]
    pub gpu_milli: u32,
    /// Milli-CPUs.
    #[serde(rename = "cpu_milli")]
    pub cpu_milli: u64,
    /// MiB.
    #[serde(rename = "mem_mib")]
    pub mem_mib: u64,
}

/// A `nodes.avail`: a node's availability ([`NodeAvail`]): `"Up"`, `"Unknown"`, or
/// `{"Drain":{"reason":...}}` (likewise `Down`, `Quarantined`, `Fail`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeAvailRow {
    /// Up.
    #[serde(rename = "Up")]
    Up,
    /// Draining.
    #[serde(rename = "Drain")]
    Drain {
        /// Admin's reason.
        #[serde(rename = "reason")]
        reason: String,
        /// When and by whom the reason was set ([`ReasonSetRow`]); absent in records
        /// written before it was kept.
        #[serde(rename = "set", default, skip_serializing_if = "Option::is_none")]
        set: Option<ReasonSetRow>,
    },
    /// Down.
    #[serde(rename = "Down")]
    Down {
        /// Why.
        #[serde(rename = "reason")]
        reason: String,
        /// When and by whom the reason was set ([`ReasonSetRow`]); absent in records
        /// written before it was kept.
        #[serde(rename = "set", default, skip_serializing_if = "Option::is_none")]
        set: Option<ReasonSetRow>,
    },
    /// Quarantined by the GPU health policy.
    #[serde(rename = "Quarantined")]
    Quarantined {
        /// The health event.
        #[serde(rename = "reason")]
        reason: String,
        /// When and by whom the reason was set ([`ReasonSetRow`]); absent in records
        /// written before it was kept.
        #[serde(rename = "set", default, skip_serializing_if = "Option::is_none")]
        set: Option<ReasonSetRow>,
    },
    /// Not registered yet.
    #[serde(rename = "Unknown")]
    Unknown,
    /// Failing (`scontrol update state=FAIL`).
    #[serde(rename = "Fail")]
    Fail {
        /// Admin's reason.
        #[serde(rename = "reason")]
        reason: String,
        /// When and by whom the reason was set ([`ReasonSetRow`]).
        #[serde(rename = "set", default, skip_serializing_if = "Option::is_none")]
        set: Option<ReasonSetRow>,
    },
}

impl From<HoldKind> for HoldRow {
    fn from(h: HoldKind) -> Self {
        match h {
            HoldKind::User => HoldRow::User,
            HoldKind::Admin => HoldRow::Admin,
        }
    }
}

impl From<HoldRow> for HoldKind {
    fn from(h: HoldRow) -> Self {
        match h {
            HoldRow::User => HoldKind::User,
            HoldRow::Admin => HoldKind::Admin,
        }
    }
}

impl From<TopologyKind> for TopologyRow {
    fn from(t: TopologyKind) -> Self {
        match t {
            TopologyKind::Node => TopologyRow::Node,
            TopologyKind::Pod => TopologyRow::Pod,
            TopologyKind::Any => TopologyRow::Any,
        }
    }
}

impl From<TopologyRow> for TopologyKind {
    fn from(t: TopologyRow) -> Self {
        match t {
            TopologyRow::Node => TopologyKind::Node,
            TopologyRow::Pod => TopologyKind::Pod,
            TopologyRow::Any => TopologyKind::Any,
        }
    }
}

impl From<&Request> for RequestRow {
    fn from(r: &Request) -> Self {
        let Request {
            gpus,
            gpu_milli,
            nodes,
            nodes_max,
            gpus_per_node,
            cpu_milli_per_node,
            mem_mib_per_node,
            topology,
            gpu_types,
            exclusive,
            required_nodes,
            excluded_nodes,
            features,
        } = r;
        RequestRow {
            gpus: *gpus,
            gpu_milli: *gpu_milli,
            nodes: *nodes,
            nodes_max: *nodes_max,
            gpus_per_node: *gpus_per_node,
            cpu_milli_per_node: *cpu_milli_per_node,
            mem_mib_per_node: *mem_mib_per_node,
            topology: (*topology).into(),
            gpu_types: gpu_types.clone(),
            exclusive: *exclusive,
            required_nodes: required_nodes.iter().map(|n| n.0).collect(),
            excluded_nodes: excluded_nodes.iter().map(|n| n.0).collect(),
            features: features.as_ref().map(|c| c.text.clone()),
        }
    }
}

impl From<RequestRow> for Request {
    fn from(r: RequestRow) -> Self {
        let RequestRow {
            gpus,
            gpu_milli,
            nodes,
            nodes_max,
            gpus_per_node,
            cpu_milli_per_node,
            mem_mib_per_node,
            topology,
            gpu_types,
            exclusive,
            required_nodes,
            excluded_nodes,
            features,
        } = r;
        Request {
            gpus,
            gpu_milli,
            nodes,
            nodes_max,
            gpus_per_node,
            cpu_milli_per_node,
            mem_mib_per_node,
            topology: topology.into(),
            gpu_types,
            exclusive,
            required_nodes: required_nodes.into_iter().map(NodeId).collect(),
            excluded_nodes: excluded_nodes.into_iter().map(NodeId).collect(),
            // Written from a parsed constraint, so it parses again.
            features: features.and_then(|t| Constraint::parse(&t).ok().flatten()).map(Box::new),
        }
    }
}

impl From<&JobSpec> for JobSpecRow {
    fn from(s: &JobSpec) -> Self {
        let JobSpec {
            id,
            partition,
            account,
            user,
            submit_time,
            begin_time,
            base_priority,
            nice,
            site_factor,
            time_limit_s,
            request,
            preemptible,
            checkpoint_bytes,
            held,
            dependency_pending,
            preempt_count,
            // Stored once, as the record's `qos` ([`super::JobRow`]), which sets it back.
            qos: _,
            elastic,
        } = s;
        JobSpecRow {
            id: id.0,
            partition: partition.0,
            account: account.clone(),
            user: user.clone(),
            submit_time: *submit_time,
            begin_time: *begin_time,
            base_priority: *base_priority,
            nice: *nice,
            site_factor: *site_factor,
            time_limit_s: *time_limit_s,
            request: request.into(),
            preemptible: *preemptible,
            checkpoint_bytes: *checkpoint_bytes,
            held: held.map(HoldRow::from),
            dependency_pending: *dependency_pending,
            preempt_count: *preempt_count,
            elastic: elastic.map(ElasticRow::from),
        }
    }
}

impl From<JobSpecRow> for JobSpec {
    fn from(s: JobSpecRow) -> Self {
        let JobSpecRow {
            id,
            partition,
            account,
            user,
            submit_time,
            begin_time,
            base_priority,
            nice,
            site_factor,
            time_limit_s,
            request,
            preemptible,
            checkpoint_bytes,
            held,
            dependency_pending,
            preempt_count,
            elastic,
        } = s;
        JobSpec {
            id: JobId(id),
            partition: PartId(partition),
            account,
            user,
            submit_time,
            begin_time,
            base_priority,
            nice,
            site_factor,
            time_limit_s,
            request: request.into(),
            preemptible,
            checkpoint_bytes,
            held: held.map(HoldKind::from),
            dependency_pending,
            preempt_count,
            qos: flotilla_core::job::DEFAULT_QOS.to_string(),
            elastic: elastic.map(Elastic::from),
        }
    }
}

impl From<Owner> for OwnerRow {
    fn from(o: Owner) -> Self {
        match o {
            Owner::Job(j) => OwnerRow::Job(j.0),
            Owner::Replica { service, replica } => OwnerRow::Replica {
                service: service.0,
                replica: replica.0,
            },
        }
    }
}

impl From<OwnerRow> for Owner {
    fn from(o: OwnerRow) -> Self {
        match o {
            OwnerRow::Job(j) => Owner::Job(JobId(j)),
            OwnerRow::Replica { service, replica } => Owner::Replica {
                service: ServiceId(service),
                replica: JobId(replica),
            },
        }
    }
}

impl From<&NodeAlloc> for NodeAllocRow {
    fn from(p: &NodeAlloc) -> Self {
        let NodeAlloc {
            node,
            gpus,
            gpu_milli,
            cpu_milli,
            mem_mib,
        } = *p;
        NodeAllocRow {
            node: node.0,
            gpus: gpus.0,
            gpu_milli,
            cpu_milli,
            mem_mib,
        }
    }
}

impl From<NodeAllocRow> for NodeAlloc {
    fn from(p: NodeAllocRow) -> Self {
        let NodeAllocRow {
            node,
            gpus,
            gpu_milli,
            cpu_milli,
            mem_mib,
        } = p;
        NodeAlloc {
            node: NodeId(node),
            gpus: GpuMask(gpus),
            gpu_milli,
            cpu_milli,
            mem_mib,
        }
    }
}

impl From<&Allocation> for AllocationRow {
    fn from(a: &Allocation) -> Self {
        let Allocation {
            id,
            owner,
            part,
            created_at,
            preemptible,
            borrowed,
            backfill_for,
        } = a;
        AllocationRow {
            id: id.0,
            owner: (*owner).into(),
            part: part.into(),
            created_at: *created_at,
            preemptible: *preemptible,
            borrowed: *borrowed,
            backfill_for: backfill_for.map(|j| j.0),
        }
    }
}

impl From<AllocationRow> for Allocation {
    fn from(a: AllocationRow) -> Self {
        let AllocationRow {
            id,
            owner,
            part,
            created_at,
            preemptible,
            borrowed,
            backfill_for,
        } = a;
        Allocation {
            id: AllocId(id),
            owner: owner.into(),
            part: part.into(),
            created_at,
            preemptible,
            borrowed,
            backfill_for: backfill_for.map(JobId),
        }
    }
}

/// When a node's reason was set and by whom (Slurm's `reason_time` and `reason_uid`, kept
/// in its node state file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasonSetRow {
    /// Unix seconds.
    #[serde(rename = "time")]
    pub time: i64,
    /// User id.
    #[serde(rename = "uid")]
    pub uid: u32,
}

impl From<&NodeAvail> for NodeAvailRow {
    fn from(a: &NodeAvail) -> Self {
        NodeAvailRow::with_set(a, None)
    }
}

impl NodeAvailRow {
    /// `a` with when and by whom its reason was set (ignored for a state without a reason).
    pub fn with_set(a: &NodeAvail, set: Option<ReasonSetRow>) -> Self {
        match a {
            NodeAvail::Up => NodeAvailRow::Up,
            NodeAvail::Drain { reason } => NodeAvailRow::Drain { reason: reason.clone(), set },
            NodeAvail::Down { reason } => NodeAvailRow::Down { reason: reason.clone(), set },
            NodeAvail::Quarantined { reason } => NodeAvailRow::Quarantined { reason: reason.clone(), set },
            NodeAvail::Unknown => NodeAvailRow::Unknown,
            NodeAvail::Fail { reason } => NodeAvailRow::Fail { reason: reason.clone(), set },
        }
    }

    /// When and by whom the reason was set, where the record says.
    pub fn reason_set(&self) -> Option<ReasonSetRow> {
        match self {
            NodeAvailRow::Drain { set, .. }
            | NodeAvailRow::Down { set, .. }
            | NodeAvailRow::Quarantined { set, .. }
            | NodeAvailRow::Fail { set, .. } => *set,
            NodeAvailRow::Up | NodeAvailRow::Unknown => None,
        }
    }
}

impl From<NodeAvailRow> for NodeAvail {
    fn from(a: NodeAvailRow) -> Self {
        match a {
            NodeAvailRow::Up => NodeAvail::Up,
            NodeAvailRow::Drain { reason, .. } => NodeAvail::Drain { reason },
            NodeAvailRow::Down { reason, .. } => NodeAvail::Down { reason },
            NodeAvailRow::Quarantined { reason, .. } => NodeAvail::Quarantined { reason },
            NodeAvailRow::Unknown => NodeAvail::Unknown,
            NodeAvailRow::Fail { reason, .. } => NodeAvail::Fail { reason },
        }
    }
}
