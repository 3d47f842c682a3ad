//! The cluster model the scheduler works on: nodes with a free [`GpuMask`], per-GPU shares,
//! CPUs and memory as consumables (Slurm's `select/cons_tres`), pods, and the per-node
//! allocations.
//!
//! Units: CPUs are counted in milli-CPUs (1000 = one CPU) so that fractional requests of the
//! trace-driven experiments fit the same model; memory in MiB; GPU shares in milli-GPUs
//! (1000 = a whole GPU). A whole-GPU allocation holds 1000 milli of each GPU of its mask.

use crate::config::{ClusterConfig, ConfNodeState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// Seconds since the Unix epoch (controller) or since the trace origin (simulator).
pub type Time = u64;

/// Index of a node in [`Cluster::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeId(pub u32);

/// Index of a pod in [`Cluster::pods`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PodId(pub u32);

/// Index of a partition in [`Cluster::partitions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartId(pub u32);

/// Milli-GPUs in one whole GPU.
pub const MILLI: u32 = 1000;

/// Bitmask over a node's GPUs: bit `i` is GPU index `i` (as `CUDA_VISIBLE_DEVICES` numbers them
/// on that node). At most 64 GPUs per node. The unit of allocation; never a bare count.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct GpuMask(pub u64);

impl GpuMask {
    /// The empty mask.
    pub const EMPTY: GpuMask = GpuMask(0);

    /// All GPUs `0..n` (n ≤ 64).
    pub fn all(n: u32) -> GpuMask {
        if n >= 64 {
            GpuMask(u64::MAX)
        } else {
            GpuMask((1u64 << n) - 1)
        }
    }

    /// The single GPU `i`.
    pub fn single(i: u32) -> GpuMask {
        GpuMask(1u64 << i)
    }

    /// Number of GPUs in the mask.
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// True when no GPU is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True when GPU `i` is set.
    pub fn contains(self, i: u32) -> bool {
        i < 64 && self.0 & (1u64 << i) != 0
    }

    /// True when every GPU of `other` is in `self`.
    pub fn contains_all(self, other: GpuMask) -> bool {
        self.0 & other.0 == other.0
    }

    /// The GPUs in either mask.
    pub fn union(self, other: GpuMask) -> GpuMask {
        GpuMask(self.0 | other.0)
    }

    /// The GPUs in both masks.
    pub fn intersect(self, other: GpuMask) -> GpuMask {
        GpuMask(self.0 & other.0)
    }

    /// GPUs of `self` not in `other`.
    pub fn minus(self, other: GpuMask) -> GpuMask {
        GpuMask(self.0 & !other.0)
    }

    /// GPU indices in increasing order.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                None
            } else {
                let i = bits.trailing_zeros();
                bits &= bits - 1;
                Some(i)
            }
        })
    }

    /// Chooses `n` GPUs out of `self` keeping the rest of the node's free space aligned:
    /// when `n` is a power of two, an aligned block of `n` GPUs (`{0-3}`, `{4-7}`, pairs
    /// `{0,1}`...) is preferred — the block whose surroundings are most used, so that larger
    /// aligned blocks stay whole — else the lowest-index GPUs. `None` if fewer than `n`.
    pub fn choose(self, n: u32, node_gpus: u32) -> Option<GpuMask> {
        if self.count() < n {
            return None;
        }
        if n == 0 {
            return Some(GpuMask::EMPTY);
        }
        if n.is_power_of_two() && n <= node_gpus && node_gpus % n == 0 {
            let block = GpuMask::all(n);
            let mut best: Option<(u32, GpuMask)> = None;
            let mut start = 0;
            while start + n <= node_gpus {
                let cand = GpuMask(block.0 << start);
                if self.contains_all(cand) {
                    // Free GPUs in the enclosing block of twice the size: fewer is better,
                    // it means we fill a half-used block instead of splitting a free one.
                    let parent = 2 * n;
                    let pstart = start - start % parent;
                    let penc = if pstart + parent <= node_gpus {
                        GpuMask(GpuMask::all(parent).0 << pstart)
                    } else {
                        cand
                    };
                    let free_around = self.intersect(penc).count();
                    if best.is_none_or(|(f, _)| free_around < f) {
                        best = Some((free_around, cand));
                    }
                }
                start += n;
            }
            if let Some((_, m)) = best {
                return Some(m);
            }
        }
        self.lowest(n)
    }

    /// The `n` lowest-index GPUs of `self`; `None` if fewer than `n`. Slurm 22.05's choice
    /// for a node whose gres.conf gives no `Links=` (`gres_select_filter.c` `_set_node_bits`
    /// takes free GPUs in index order).
    pub fn lowest(self, n: u32) -> Option<GpuMask> {
        if self.count() < n {
            return None;
        }
        let mut out = 0u64;
        for i in self.iter().take(n as usize) {
            out |= 1u64 << i;
        }
        Some(GpuMask(out))
    }
}

impl fmt::Debug for GpuMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GpuMask({:#b})", self.0)
    }
}

impl fmt::Display for GpuMask {
    /// Slurm's GPU index list, e.g. `0-3,6` (as `scontrol show job -d` prints `IDX:`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let idx: Vec<u32> = self.iter().collect();
        let mut i = 0;
        let mut first = true;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && idx[j + 1] == idx[j] + 1 {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if j > i {
                write!(f, "{}-{}", idx[i], idx[j])?;
            } else {
                write!(f, "{}", idx[i])?;
            }
            i = j + 1;
        }
        Ok(())
    }
}

/// A node's availability for new work (the administrative part of Slurm's node state; the
/// `IDLE`/`MIXED`/`ALLOCATED` part is derived from its allocations).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeAvail {
    /// Up and accepting work.
    Up,
    /// Draining: running work continues, nothing new is placed (`scontrol update state=drain`).
    Drain {
        /// Admin's reason (`Reason=`).
        reason: String,
    },
    /// Down: unreachable or failed; its allocations are gone.
    Down {
        /// Why, as `sinfo -R` shows it (e.g. `Not responding`).
        reason: String,
    },
    /// Quarantined by the GPU health policy (a critical XID, an uncorrectable ECC error): drained
    /// with the reason, never placed on again until an admin resumes it.
    Quarantined {
        /// The health event that caused it.
        reason: String,
    },
    /// Configured but not registered yet (`State=UNKNOWN`/`FUTURE` until the daemon registers).
    Unknown,
    /// Failing (`scontrol update state=FAIL`, Slurm's `NODE_STATE_FAIL` flag): as a drain,
    /// running work continues and nothing new is placed, but shown `FAIL`/`FAILING` rather
    /// than drained. Slurm 22.05 `node_mgr.c` `update_node` keeps DRAIN and FAIL exclusive
    /// (setting one clears the other), so it is a state of its own here.
    Fail {
        /// Admin's reason (`Reason=`).
        reason: String,
    },
}

impl NodeAvail {
    /// True when new work may be placed on the node.
    pub fn schedulable(&self) -> bool {
        matches!(self, NodeAvail::Up)
    }
}

/// One node of the cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Node {
    /// Node name.
    pub name: String,
    /// Pod (leaf switch or block) of the node.
    pub pod: PodId,
    /// GPUs on the node (≤ 64).
    pub gpus: u32,
    /// GPU model (`h100`), if typed.
    pub gpu_type: Option<String>,
    /// CPUs in milli-CPUs.
    pub cpu_milli: u64,
    /// Memory in MiB.
    pub mem_mib: u64,
    /// Scheduling weight (lower is used first), Slurm `Weight=`.
    pub weight: u32,
    /// Features (`Features=`).
    pub features: Vec<String>,
    /// Partitions the node belongs to.
    pub partitions: Vec<PartId>,
    /// The node belongs to a partition dedicated to sub-node shapes (`SubNodePool=YES`).
    pub sub_node_pool: bool,
    /// The node belongs to the inference pool (`InferencePool=YES`).
    #[serde(default)]
    pub inference_pool: bool,
    /// Whether it takes work, and why not.
    pub avail: NodeAvail,
    /// The node daemon's boot epoch last registered (0 = never registered).
    pub boot_epoch: u64,
    /// GPUs with no allocation at all.
    pub free_gpus: GpuMask,
    /// Milli-GPUs used on each GPU (1000 = fully used). Length `gpus`.
    pub gpu_milli_used: Vec<u32>,
    /// Free milli-CPUs.
    pub free_cpu_milli: u64,
    /// Free memory in MiB.
    pub free_mem_mib: u64,
    /// Count of live allocations by whole-GPU size (index = GPUs of the allocation, capped
    /// at 64); the node's shape affinity is derived from it.
    pub alloc_sizes: Vec<u32>,
    /// Bit `s - 1` is set while `alloc_sizes[s] > 0` (`s` in 1..=64), kept by
    /// [`Cluster::take`] and [`Cluster::give_back`]: [`Node::shape_affinity`] is asked for
    /// every candidate node of every placement, and a scan of `alloc_sizes` there was two
    /// thirds of a mass start's time (15,000 jobs on 3,000 nodes).
    #[serde(default)]
    size_mask: u64,
    /// The GPUs are linked unevenly (gres.conf `Links=`): whole GPUs are picked in aligned
    /// blocks ([`GpuMask::choose`]); otherwise the lowest free indices ([`GpuMask::lowest`]),
    /// as Slurm 22.05. Nodes built from [`NodeSpec`]s start `false`.
    #[serde(default)]
    pub gpu_links: bool,
}

impl Node {
    /// The node's shape affinity: the GPU size of the allocations it hosts when they
    /// all have one size; `None` for a node without GPU allocations; `Some(0)` when mixed.
    pub fn shape_affinity(&self) -> Option<u32> {
        match self.size_mask.count_ones() {
            0 => None,
            1 => Some(self.size_mask.trailing_zeros() + 1),
            _ => Some(0),
        }
    }

    /// [`Node::shape_affinity`] from `alloc_sizes` itself (the accounting check compares).
    fn shape_affinity_scan(&self) -> Option<u32> {
        let mut found = None;
        for (size, &n) in self.alloc_sizes.iter().enumerate() {
            if n > 0 && size > 0 {
                if found.is_some() {
                    return Some(0);
                }
                found = Some(size as u32);
            }
        }
        found
    }

    /// True when no allocation at all holds anything on the node.
    pub fn is_idle(&self) -> bool {
        self.free_gpus.count() == self.gpus
            && self.free_cpu_milli == self.cpu_milli
            && self.free_mem_mib == self.mem_mib
    }

    /// True when every GPU is wholly free (a "fully free node" in the fragmentation metrics).
    pub fn gpus_all_free(&self) -> bool {
        self.gpus > 0 && self.free_gpus.count() == self.gpus
    }

    /// True when the node's GPUs may take the given model constraint (`None` = any model).
    pub fn gpu_type_ok(&self, allowed: &[String]) -> bool {
        gpu_model_ok(self.gpu_type.as_deref(), allowed)
    }
}

/// Whether a node of GPU model `model` may run a job that accepts `allowed` (any when empty;
/// names compare without case).
fn gpu_model_ok(model: Option<&str>, allowed: &[String]) -> bool {
    allowed.is_empty() || model.is_some_and(|t| allowed.iter().any(|a| a.eq_ignore_ascii_case(t)))
}

/// A pod: the nodes under one leaf switch (or one block).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pod {
    /// Switch or block name.
    pub name: String,
    /// Nodes of the pod, in config order.
    pub nodes: Vec<NodeId>,
}

/// A partition's `State=` (slurm.conf, `scontrol update PartitionName= State=`; Slurm 22.05's
/// `PARTITION_UP`, `_DOWN`, `_DRAIN`, `_INACTIVE`): `UP` takes and schedules jobs, `DOWN`
/// takes them and schedules none (`PartitionDown`), `DRAIN` schedules the jobs it has and
/// refuses new ones, `INACTIVE` does neither (`PartitionInactive`); a refused submission gets
/// `ESLURM_PARTITION_NOT_AVAIL` (job_mgr.c `_alt_part_test`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PartitionState {
    /// `UP`.
    #[default]
    Up,
    /// `DOWN`.
    Down,
    /// `DRAIN`.
    Drain,
    /// `INACTIVE`.
    Inactive,
}

impl PartitionState {
    /// slurm.conf's word (case-insensitive, whole); `None` for another.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Up, Self::Down, Self::Drain, Self::Inactive].into_iter().find(|st| st.as_str().eq_ignore_ascii_case(s))
    }

    /// `UP`, `DOWN`, `DRAIN`, `INACTIVE`: `scontrol show partition`'s `State=`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "UP",
            Self::Down => "DOWN",
            Self::Drain => "DRAIN",
            Self::Inactive => "INACTIVE",
        }
    }

    /// Whether its pending jobs may start (`UP`, `DRAIN`: Slurm's `PARTITION_SCHED`).
    pub fn schedules(self) -> bool {
        matches!(self, Self::Up | Self::Drain)
    }

    /// Whether it takes new jobs (`UP`, `DOWN`: Slurm's `PARTITION_SUBMIT`).
    pub fn accepts(self) -> bool {
        matches!(self, Self::Up | Self::Down)
    }
}

/// A partition as the scheduler sees it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Partition {
    /// `PartitionName=`.
    pub name: String,
    /// Nodes, in config order.
    pub nodes: Vec<NodeId>,
    /// `Default=YES`.
    pub default: bool,
    /// Maximum time limit in minutes; `None` = unlimited.
    pub max_time_min: Option<u64>,
    /// Default time limit in minutes; `None` = the partition's max.
    pub default_time_min: Option<u64>,
    /// `State=`: whether the partition takes new jobs and schedules its own.
    pub state: PartitionState,
    /// `PriorityTier=`.
    pub priority_tier: u32,
    /// Flotilla `DefaultTopology=`.
    pub default_topology: crate::config::TopologyKind,
    /// Flotilla `SubNodePool=YES`.
    pub sub_node_pool: bool,
}

impl Partition {
    /// Whether a job of `time_limit_s` (seconds; `None`: no limit) is over this partition's
    /// `MaxTime`: above it, or no limit where the partition has one (Slurm's
    /// `job_limits_check`, `WAIT_PART_TIME_LIMIT`).
    pub fn over_max_time(&self, time_limit_s: Option<u64>) -> bool {
        match (time_limit_s, self.max_time_min) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(t), Some(max)) => t > max * 60,
        }
    }
}

/// The whole cluster: nodes, pods, partitions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cluster {
    /// Nodes, indexed by [`NodeId`].
    pub nodes: Vec<Node>,
    /// Pods, indexed by [`PodId`].
    pub pods: Vec<Pod>,
    /// Partitions, indexed by [`PartId`].
    pub partitions: Vec<Partition>,
    /// Nodes ordered by (available whole GPUs, weight, id): the best-fit index.
    #[serde(skip)]
    index: BTreeSet<(u32, u32, u32)>,
    /// Available whole GPUs of each node as currently recorded in `index`.
    #[serde(skip)]
    index_key: Vec<u32>,
    /// Node name -> index, built with `index` ([`Cluster::node_id`] is called for every
    /// message of every node session: a scan of 10,000 names was most of an idle
    /// controller's time). A `BTreeMap`: no hashing seed in the core.
    #[serde(skip)]
    by_name: std::collections::BTreeMap<String, u32>,
    /// The most GPUs on a node of each partition ([`Cluster::node_size`]), built with
    /// `index`: the reserve stage asks it for every blocked job, and a scan of a
    /// 10,000-node partition per job made a cycle over 100,000 pending jobs quadratic.
    #[serde(skip)]
    part_node_size: Vec<u32>,
    /// The [`Capacity`] of each partition's nodes of each GPU model (the node's `gpu_type`
    /// as configured, `None` for untyped), built with `index`: admission bounds every
    /// submission by it, and a scan of a 10,000-node partition per submission was a tenth of
    /// the controller's time in a submission storm.
    #[serde(skip)]
    part_caps: Vec<Vec<(Option<String>, Capacity)>>,
    /// Generation of the free resources and availability: bumped by every [`Cluster::take`],
    /// [`Cluster::give_back`], [`Cluster::set_avail`] and [`Cluster::add_partition`]. The
    /// scheduler's incremental cycle reuses a placement failure only while it is unchanged.
    #[serde(skip)]
    gen: u64,
}

/// What the nodes of a partition (of the GPU models a job accepts) could ever give one job,
/// whatever runs now: the bounds a submission is checked against before it may pend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capacity {
    /// Nodes.
    pub nodes: u32,
    /// The most GPUs on one node.
    pub max_gpus: u32,
    /// GPUs on all of them.
    pub total_gpus: u64,
    /// The most CPUs on one node, in milli-CPUs.
    pub max_cpu_milli: u64,
    /// The most memory on one node, in MiB.
    pub max_mem_mib: u64,
}

impl Capacity {
    fn add(&mut self, n: &Node) {
        self.merge(&Capacity {
            nodes: 1,
            max_gpus: n.gpus,
            total_gpus: u64::from(n.gpus),
            max_cpu_milli: n.cpu_milli,
            max_mem_mib: n.mem_mib,
        });
    }

    fn merge(&mut self, o: &Capacity) {
        self.nodes += o.nodes;
        self.max_gpus = self.max_gpus.max(o.max_gpus);
        self.total_gpus += o.total_gpus;
        self.max_cpu_milli = self.max_cpu_milli.max(o.max_cpu_milli);
        self.max_mem_mib = self.max_mem_mib.max(o.max_mem_mib);
    }
}

/// A description of one node used to build clusters directly (tests, simulator).
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// Node name (`NodeName=`).
    pub name: String,
    /// Whole GPUs (at most 64).
    pub gpus: u32,
    /// GPU model.
    pub gpu_type: Option<String>,
    /// CPUs in milli-CPUs (1000 = one CPU).
    pub cpu_milli: u64,
    /// Memory in MiB.
    pub mem_mib: u64,
    /// Pod name.
    pub pod: String,
}

impl Cluster {
    /// Builds the cluster from the parsed configuration. Nodes start [`NodeAvail::Up`] unless
    /// configured `DOWN`/`DRAIN`/`FAIL`/`FUTURE` (the controller may instead start them
    /// `Unknown` until their daemons register). Nodes in no pod get a pod of their own.
    pub fn from_config(conf: &ClusterConfig) -> Cluster {
        let mut specs = Vec::new();
        let mut pod_of = std::collections::BTreeMap::new();
        for pod in &conf.pods {
            for n in &pod.nodes {
                pod_of.entry(n.clone()).or_insert_with(|| pod.name.clone());
            }
        }
        for n in &conf.nodes {
            specs.push(NodeSpec {
                name: n.name.clone(),
                gpus: n.gpus,
                gpu_type: n.gpu_type.clone(),
                cpu_milli: u64::from(n.cpus) * 1000,
                mem_mib: n.real_memory_mib,
                pod: pod_of.get(&n.name).cloned().unwrap_or_else(|| n.name.clone()),
            });
        }
        let mut c = Cluster::from_specs(&specs);
        for (i, n) in conf.nodes.iter().enumerate() {
            let node = &mut c.nodes[i];
            node.weight = n.weight;
            node.features = n.features.clone();
            node.gpu_links = n.gpu_links;
            node.avail = match n.state {
                ConfNodeState::Down | ConfNodeState::Fail => NodeAvail::Down {
                    reason: "configured down".into(),
                },
                ConfNodeState::Drain => NodeAvail::Drain {
                    reason: "configured drain".into(),
                },
                ConfNodeState::Future | ConfNodeState::Cloud => NodeAvail::Unknown,
                _ => NodeAvail::Up,
            };
        }
        for p in &conf.partitions {
            let nodes: Vec<NodeId> = p.nodes.iter().filter_map(|n| c.node_id(n)).collect();
            let pid = PartId(c.partitions.len() as u32);
            for &n in &nodes {
                c.nodes[n.0 as usize].partitions.push(pid);
                if p.sub_node_pool {
                    c.nodes[n.0 as usize].sub_node_pool = true;
                }
                if p.inference_pool {
                    c.nodes[n.0 as usize].inference_pool = true;
                }
            }
            c.partitions.push(Partition {
                name: p.name.clone(),
                nodes,
                default: p.default,
                max_time_min: p.max_time_min,
                default_time_min: p.default_time_min,
                // Another word is not `UP`: no job of it starts (as before the four states).
                state: PartitionState::parse(&p.state).unwrap_or(PartitionState::Down),
                priority_tier: p.priority_tier,
                default_topology: p.default_topology,
                sub_node_pool: p.sub_node_pool,
            });
        }
        c.rebuild_index();
        c
    }

    /// Builds a cluster from node descriptions, without partitions (add them with
    /// [`Cluster::add_partition`]). Pods are created in order of first appearance.
    pub fn from_specs(specs: &[NodeSpec]) -> Cluster {
        let mut c = Cluster {
            nodes: Vec::with_capacity(specs.len()),
            pods: Vec::new(),
            partitions: Vec::new(),
            index: BTreeSet::new(),
            index_key: Vec::new(),
            by_name: std::collections::BTreeMap::new(),
            part_node_size: Vec::new(),
            part_caps: Vec::new(),
            gen: 0,
        };
        let mut pod_ids = std::collections::BTreeMap::new();
        for (i, s) in specs.iter().enumerate() {
            let pod = *pod_ids.entry(s.pod.clone()).or_insert_with(|| {
                c.pods.push(Pod {
                    name: s.pod.clone(),
                    nodes: Vec::new(),
                });
                PodId(c.pods.len() as u32 - 1)
            });
            c.pods[pod.0 as usize].nodes.push(NodeId(i as u32));
            let gpus = s.gpus.min(64);
            c.nodes.push(Node {
                name: s.name.clone(),
                pod,
                gpus,
                gpu_type: s.gpu_type.clone(),
                cpu_milli: s.cpu_milli,
                mem_mib: s.mem_mib,
                weight: 1,
                features: Vec::new(),
                partitions: Vec::new(),
                sub_node_pool: false,
                inference_pool: false,
                avail: NodeAvail::Up,
                boot_epoch: 0,
                free_gpus: GpuMask::all(gpus),
                gpu_milli_used: vec![0; gpus as usize],
                free_cpu_milli: s.cpu_milli,
                free_mem_mib: s.mem_mib,
                alloc_sizes: vec![0; 65],
                size_mask: 0,
                gpu_links: false,
            });
        }
        c.rebuild_index();
        c
    }

    /// Adds a partition over the given nodes (tests and simulator); returns its id.
    pub fn add_partition(&mut self, name: &str, nodes: Vec<NodeId>, default: bool) -> PartId {
        self.gen += 1;
        let pid = PartId(self.partitions.len() as u32);
        for &n in &nodes {
            self.nodes[n.0 as usize].partitions.push(pid);
        }
        self.partitions.push(Partition {
            name: name.to_string(),
            nodes,
            default,
            max_time_min: None,
            default_time_min: None,
            state: PartitionState::Up,
            priority_tier: 1,
            default_topology: crate::config::TopologyKind::Any,
            sub_node_pool: false,
        });
        if self.part_node_size.len() + 1 == self.partitions.len() {
            self.part_node_size.push(self.scan_node_size(pid));
        }
        if self.part_caps.len() + 1 == self.partitions.len() {
            self.part_caps.push(self.caps_by_type(pid));
        }
        pid
    }

    /// A builder for the regular clusters of tests and benchmarks: `nodes` nodes of `gpus`
    /// GPUs, `nodes_per_pod` per pod, each with `cpus` CPUs and `mem_mib` memory, named
    /// `n0001`…, in one default partition `batch`.
    pub fn uniform(nodes: u32, gpus: u32, nodes_per_pod: u32, cpus: u32, mem_mib: u64) -> Cluster {
        let width = (nodes.max(1) as f64).log10().floor() as usize + 1;
        let width = width.max(4);
        let specs: Vec<NodeSpec> = (0..nodes)
            .map(|i| NodeSpec {
                name: format!("n{:0width$}", i + 1),
                gpus,
                gpu_type: Some("h100".into()),
                cpu_milli: u64::from(cpus) * 1000,
                mem_mib,
                pod: format!("pod{}", i / nodes_per_pod.max(1)),
            })
            .collect();
        let mut c = Cluster::from_specs(&specs);
        let all = (0..nodes).map(NodeId).collect();
        c.add_partition("batch", all, true);
        c
    }

    /// Looks a node up by name: O(log nodes) through the name index, a scan when the index
    /// is not built (a cluster read back with serde).
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        if self.by_name.len() == self.nodes.len() {
            return self.by_name.get(name).map(|&i| NodeId(i));
        }
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| NodeId(i as u32))
    }

    /// Looks a partition up by name.
    pub fn partition_id(&self, name: &str) -> Option<PartId> {
        self.partitions
            .iter()
            .position(|p| p.name == name)
            .map(|i| PartId(i as u32))
    }

    /// The default partition (`Default=YES`, else the first).
    pub fn default_partition(&self) -> Option<PartId> {
        self.partitions
            .iter()
            .position(|p| p.default)
            .or(if self.partitions.is_empty() { None } else { Some(0) })
            .map(|i| PartId(i as u32))
    }

    /// The node.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// Total GPUs of the cluster.
    pub fn total_gpus(&self) -> u64 {
        self.nodes.iter().map(|n| u64::from(n.gpus)).sum()
    }

    /// GPUs in use, in milli-GPUs.
    pub fn used_gpu_milli(&self) -> u64 {
        self.nodes
            .iter()
            .map(|n| n.gpu_milli_used.iter().map(|&m| u64::from(m)).sum::<u64>())
            .sum()
    }

    /// Number of nodes whose GPUs are all free (and that have GPUs and are schedulable).
    pub fn fully_free_gpu_nodes(&self, gpus: u32) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.gpus == gpus && n.gpus_all_free() && n.avail.schedulable())
            .count()
    }

    /// The most GPUs on a node of partition `part` (0 for an empty one): the node size of
    /// whole-node rules. O(1) through the index, a scan when it is not built.
    pub fn node_size(&self, part: PartId) -> u32 {
        if let Some(&n) = self.part_node_size.get(part.0 as usize).filter(|_| self.part_node_size.len() == self.partitions.len()) {
            return n;
        }
        self.scan_node_size(part)
    }

    fn scan_node_size(&self, part: PartId) -> u32 {
        self.partitions[part.0 as usize].nodes.iter().map(|&n| self.node(n).gpus).max().unwrap_or(0)
    }

    /// The [`Capacity`] of partition `part`'s nodes whose GPU model is in `gpu_types` (any
    /// model when empty; [`Node::gpu_type_ok`]). O(GPU models of the partition) through the
    /// index, a scan of the partition when it is not built.
    pub fn capacity(&self, part: PartId, gpu_types: &[String]) -> Capacity {
        let mut cap = Capacity::default();
        match self.part_caps.get(part.0 as usize).filter(|_| self.part_caps.len() == self.partitions.len()) {
            Some(by_type) => {
                for (ty, c) in by_type {
                    // The predicate reads only the node's model: one node stands for its group.
                    if gpu_model_ok(ty.as_deref(), gpu_types) {
                        cap.merge(c);
                    }
                }
            }
            None => {
                for &n in &self.partitions[part.0 as usize].nodes {
                    let node = self.node(n);
                    if node.gpu_type_ok(gpu_types) {
                        cap.add(node);
                    }
                }
            }
        }
        cap
    }

    fn caps_by_type(&self, part: PartId) -> Vec<(Option<String>, Capacity)> {
        let mut by_type: std::collections::BTreeMap<Option<String>, Capacity> = std::collections::BTreeMap::new();
        for &n in &self.partitions[part.0 as usize].nodes {
            let node = self.node(n);
            by_type.entry(node.gpu_type.clone()).or_default().add(node);
        }
        by_type.into_iter().collect()
    }

    fn rebuild_index(&mut self) {
        self.by_name = self.nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i as u32)).collect();
        self.part_node_size = (0..self.partitions.len()).map(|p| self.scan_node_size(PartId(p as u32))).collect();
        self.part_caps = (0..self.partitions.len()).map(|p| self.caps_by_type(PartId(p as u32))).collect();
        self.index.clear();
        self.index_key = vec![0; self.nodes.len()];
        for i in 0..self.nodes.len() {
            let key = self.nodes[i].free_gpus.count();
            self.index_key[i] = key;
            self.index.insert((key, self.nodes[i].weight, i as u32));
        }
    }

    fn reindex(&mut self, id: NodeId) {
        let i = id.0 as usize;
        let old = self.index_key[i];
        let new = self.nodes[i].free_gpus.count();
        if old != new {
            let w = self.nodes[i].weight;
            self.index.remove(&(old, w, id.0));
            self.index.insert((new, w, id.0));
            self.index_key[i] = new;
        }
    }

    /// Nodes with at least `min_free` wholly free GPUs, in best-fit order (fewest free first,
    /// then weight, then id). Does not look at availability, partitions, CPUs or reservations.
    pub fn nodes_by_free(&self, min_free: u32) -> impl Iterator<Item = NodeId> + '_ {
        self.index
            .range((min_free, 0, 0)..)
            .map(|&(_, _, id)| NodeId(id))
    }

    /// Nodes with at least `min_free` wholly free GPUs, most free first (worst-fit order).
    pub fn nodes_by_free_desc(&self, min_free: u32) -> impl Iterator<Item = NodeId> + '_ {
        self.index
            .range((min_free, 0, 0)..)
            .rev()
            .map(|&(_, _, id)| NodeId(id))
    }

    /// The generation of free resources and availability (see the field `gen`): equal
    /// values mean no allocation was taken or given back and no availability set between
    /// them.
    pub fn gen(&self) -> u64 {
        self.gen
    }

    /// Takes the resources of one per-node allocation. Panics if they are not free: callers
    /// check feasibility first, and a violation is a broken invariant (fail stop).
    pub fn take(&mut self, a: &NodeAlloc) {
        self.gen += 1;
        let node = &mut self.nodes[a.node.0 as usize];
        assert!(
            node.free_cpu_milli >= a.cpu_milli && node.free_mem_mib >= a.mem_mib,
            "over-commit of cpu/mem on {}",
            node.name
        );
        for g in a.gpus.iter() {
            let used = &mut node.gpu_milli_used[g as usize];
            assert!(
                *used + a.gpu_milli <= MILLI,
                "over-commit of gpu {g} on {}",
                node.name
            );
            *used += a.gpu_milli;
            node.free_gpus = node.free_gpus.minus(GpuMask::single(g));
        }
        node.free_cpu_milli -= a.cpu_milli;
        node.free_mem_mib -= a.mem_mib;
        if a.gpu_milli == MILLI && !a.gpus.is_empty() {
            let size = a.gpus.count().min(64);
            node.alloc_sizes[size as usize] += 1;
            node.size_mask |= 1 << (size - 1);
        }
        self.reindex(a.node);
    }

    /// Returns the resources of one per-node allocation.
    pub fn give_back(&mut self, a: &NodeAlloc) {
        self.gen += 1;
        let node = &mut self.nodes[a.node.0 as usize];
        for g in a.gpus.iter() {
            let used = &mut node.gpu_milli_used[g as usize];
            assert!(*used >= a.gpu_milli, "release of unused gpu {g} on {}", node.name);
            *used -= a.gpu_milli;
            if *used == 0 {
                node.free_gpus = node.free_gpus.union(GpuMask::single(g));
            }
        }
        node.free_cpu_milli += a.cpu_milli;
        node.free_mem_mib += a.mem_mib;
        assert!(node.free_cpu_milli <= node.cpu_milli && node.free_mem_mib <= node.mem_mib);
        if a.gpu_milli == MILLI && !a.gpus.is_empty() {
            let size = a.gpus.count().min(64);
            let slot = &mut node.alloc_sizes[size as usize];
            *slot = slot.saturating_sub(1);
            if *slot == 0 {
                node.size_mask &= !(1 << (size - 1));
            }
        }
        self.reindex(a.node);
    }

    /// Sets a node's availability.
    pub fn set_avail(&mut self, id: NodeId, avail: NodeAvail) {
        self.gen += 1;
        self.nodes[id.0 as usize].avail = avail;
    }
}

/// The part of one allocation that lies on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAlloc {
    /// The node.
    pub node: NodeId,
    /// The GPUs (for a fractional share, the one GPU shared).
    pub gpus: GpuMask,
    /// Milli-GPUs held on each GPU of the mask (1000 = whole GPUs).
    pub gpu_milli: u32,
    /// CPUs in milli-CPUs (1000 = one CPU).
    pub cpu_milli: u64,
    /// Memory in MiB.
    pub mem_mib: u64,
}

/// Checks invariant 1 of DESIGN.md §4 against a list of live allocations: recomputes every
/// node's usage from the allocations and compares it with the recorded free state. Returns a
/// description of the first violation.
pub fn check_accounting<'a>(
    cluster: &Cluster,
    allocs: impl Iterator<Item = &'a NodeAlloc>,
) -> Result<(), String> {
    // One flat table of milli-GPUs held (node i's GPUs from `first[i]`): the controller
    // checks after every turn, and a table per node was one allocation per node each time.
    let mut first = Vec::with_capacity(cluster.nodes.len() + 1);
    let mut at = 0usize;
    for n in &cluster.nodes {
        first.push(at);
        at += n.gpus as usize;
    }
    first.push(at);
    let mut milli = vec![0u32; at];
    let mut cpu = vec![0u64; cluster.nodes.len()];
    let mut mem = vec![0u64; cluster.nodes.len()];
    for a in allocs {
        let i = a.node.0 as usize;
        let gpus = &mut milli[first[i]..first[i + 1]];
        for g in a.gpus.iter() {
            gpus[g as usize] += a.gpu_milli;
        }
        cpu[i] += a.cpu_milli;
        mem[i] += a.mem_mib;
    }
    for (i, n) in cluster.nodes.iter().enumerate() {
        for (g, &held) in milli[first[i]..first[i + 1]].iter().enumerate() {
            if held > MILLI {
                return Err(format!("gpu {g} of {} over-committed: {held}", n.name));
            }
            if held != n.gpu_milli_used[g] {
                return Err(format!(
                    "gpu {g} of {} recorded {} used, allocations hold {held}",
                    n.name, n.gpu_milli_used[g]
                ));
            }
            if (held == 0) != n.free_gpus.contains(g as u32) {
                return Err(format!("free mask of {} wrong at gpu {g}", n.name));
            }
        }
        if cpu[i] > n.cpu_milli || mem[i] > n.mem_mib {
            return Err(format!("cpu/mem of {} over-committed", n.name));
        }
        if n.cpu_milli - cpu[i] != n.free_cpu_milli || n.mem_mib - mem[i] != n.free_mem_mib {
            return Err(format!("cpu/mem accounting of {} wrong", n.name));
        }
        if n.shape_affinity() != n.shape_affinity_scan() {
            return Err(format!("size mask of {} is {:#x}, allocation sizes {:?}", n.name, n.size_mask, n.alloc_sizes));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_display_is_slurm_idx() {
        assert_eq!(GpuMask(0b1011_0111).to_string(), "0-2,4-5,7");
        assert_eq!(GpuMask::all(8).to_string(), "0-7");
        assert_eq!(GpuMask::EMPTY.to_string(), "");
    }

    #[test]
    fn lowest_takes_the_lowest_free_indices_as_slurm() {
        // Golden 0432 (goldens-extra): J2 holds 3-4, J1's 0-2 are free again; Slurm gives a
        // 4-GPU job 0-2 and 5.
        let free = GpuMask(0b1110_0111);
        assert_eq!(free.lowest(4), Some(GpuMask(0b0010_0111)));
        assert_eq!(free.lowest(0), Some(GpuMask::EMPTY));
        assert_eq!(free.lowest(7), None);
    }

    #[test]
    fn choose_prefers_aligned_block_in_used_half() {
        // GPUs 0,1 used: free = 2..7. A 2-GPU request should take {2,3} (fills the used half),
        // leaving {4-7} whole.
        let free = GpuMask(0b1111_1100);
        assert_eq!(free.choose(2, 8), Some(GpuMask(0b0000_1100)));
        // A 4-GPU request takes {4-7}, the only aligned block.
        assert_eq!(free.choose(4, 8), Some(GpuMask(0b1111_0000)));
        // 3 GPUs: lowest indices.
        assert_eq!(free.choose(3, 8), Some(GpuMask(0b0001_1100)));
        assert_eq!(free.choose(7, 8), None);
    }

    #[test]
    fn node_size_is_cached_per_partition_and_matches_a_scan() {
        let spec = |name: &str, gpus: u32| NodeSpec {
            name: name.into(),
            gpus,
            gpu_type: None,
            cpu_milli: 64_000,
            mem_mib: 1024,
            pod: "p".into(),
        };
        let mut c = Cluster::from_specs(&[spec("a", 4), spec("b", 8), spec("c", 2), spec("d", 0)]);
        let all = c.add_partition("all", (0..4).map(NodeId).collect(), true);
        let small = c.add_partition("small", vec![NodeId(0), NodeId(2)], false);
        let none = c.add_partition("cpu", vec![NodeId(3)], false);
        let empty = c.add_partition("empty", vec![], false);
        assert_eq!(c.part_node_size.len(), c.partitions.len(), "every partition cached");
        for (p, want) in [(all, 8), (small, 4), (none, 0), (empty, 0)] {
            assert_eq!(c.node_size(p), want);
            assert_eq!(c.node_size(p), c.scan_node_size(p));
        }
        // A partition pushed without add_partition, or a cluster without its index (as
        // deserialized), is scanned instead of read from a stale cache.
        c.partitions.push(Partition { name: "raw".into(), nodes: vec![NodeId(1)], ..c.partitions[small.0 as usize].clone() });
        assert_eq!(c.node_size(PartId(4)), 8);
        assert_eq!(c.node_size(small), 4);
        let mut bare = c.clone();
        bare.part_node_size.clear();
        assert_eq!(bare.node_size(all), 8);
    }

    proptest::proptest! {
        /// The cached capacities of every partition, for any GPU models a job accepts, are
        /// what a scan of the partition's nodes gives.
        #[test]
        fn capacity_from_the_cache_matches_a_scan(
            nodes in proptest::collection::vec((0u32..=8, 0usize..4, 1u64..=128, 1u64..=4096), 1..40),
            parts in proptest::collection::vec(proptest::collection::vec(proptest::bool::ANY, 40), 0..4),
            asks in proptest::collection::vec(proptest::collection::vec(0usize..4, 0..3), 1..6),
        ) {
            let models = [None, Some("h100"), Some("H100"), Some("a100")];
            let names = ["h100", "A100", "l4", "H100"];
            let specs: Vec<NodeSpec> = nodes
                .iter()
                .enumerate()
                .map(|(i, &(gpus, m, cpus, mem))| NodeSpec {
                    name: format!("n{i}"),
                    gpus,
                    gpu_type: models[m].map(str::to_string),
                    cpu_milli: cpus * 1000,
                    mem_mib: mem,
                    pod: format!("p{}", i / 8),
                })
                .collect();
            let mut c = Cluster::from_specs(&specs);
            for (k, member) in parts.iter().enumerate() {
                let ids = (0..specs.len()).filter(|&i| member[i]).map(|i| NodeId(i as u32)).collect();
                c.add_partition(&format!("part{k}"), ids, k == 0);
            }
            let mut bare = c.clone();
            bare.part_caps.clear();
            proptest::prop_assert_eq!(c.part_caps.len(), c.partitions.len());
            for p in 0..c.partitions.len() {
                for ask in &asks {
                    let types: Vec<String> = ask.iter().map(|&a| names[a].to_string()).collect();
                    let part = PartId(p as u32);
                    proptest::prop_assert_eq!(c.capacity(part, &types), bare.capacity(part, &types));
                }
            }
        }
    }

    #[test]
    fn shape_affinity_follows_takes_and_give_backs() {
        let mut c = Cluster::uniform(1, 8, 1, 64, 512_000);
        let alloc = |gpus: u64, gpu_milli: u32| NodeAlloc { node: NodeId(0), gpus: GpuMask(gpus), gpu_milli, cpu_milli: 1000, mem_mib: 1 };
        let (a, b, one, share) = (alloc(0b11, MILLI), alloc(0b1100, MILLI), alloc(0b1_0000, MILLI), alloc(0b10_0000, 300));
        let mut held = Vec::new();
        let mut step = |c: &mut Cluster, x: &NodeAlloc, take: bool, want: Option<u32>| {
            if take {
                c.take(x);
                held.push(x.clone());
            } else {
                c.give_back(x);
                held.retain(|h| h != x);
            }
            let n = c.node(NodeId(0));
            assert_eq!((n.shape_affinity(), n.shape_affinity_scan()), (want, want));
            check_accounting(c, held.iter()).unwrap();
        };
        assert_eq!(c.node(NodeId(0)).shape_affinity(), None);
        step(&mut c, &a, true, Some(2));
        step(&mut c, &share, true, Some(2)); // a share has no whole-GPU size
        step(&mut c, &b, true, Some(2));
        step(&mut c, &one, true, Some(0));
        step(&mut c, &a, false, Some(0));
        step(&mut c, &one, false, Some(2));
        step(&mut c, &b, false, None);
        step(&mut c, &share, false, None);
    }

    #[test]
    fn take_and_give_back_keep_accounting() {
        let mut c = Cluster::uniform(2, 8, 2, 64, 512_000);
        let a = NodeAlloc {
            node: NodeId(0),
            gpus: GpuMask(0b11),
            gpu_milli: MILLI,
            cpu_milli: 2000,
            mem_mib: 1024,
        };
        let s = NodeAlloc {
            node: NodeId(0),
            gpus: GpuMask(0b100),
            gpu_milli: 300,
            cpu_milli: 500,
            mem_mib: 10,
        };
        c.take(&a);
        c.take(&s);
        c.take(&s);
        assert_eq!(c.node(NodeId(0)).free_gpus, GpuMask(0b1111_1000));
        assert_eq!(c.node(NodeId(0)).gpu_milli_used[2], 600);
        check_accounting(&c, [&a, &s, &s].into_iter()).unwrap();
        assert_eq!(c.nodes_by_free(5).next(), Some(NodeId(0)));
        assert_eq!(c.nodes_by_free(6).next(), Some(NodeId(1)));
        c.give_back(&s);
        c.give_back(&s);
        c.give_back(&a);
        assert!(c.node(NodeId(0)).is_idle());
        check_accounting(&c, std::iter::empty()).unwrap();
    }

    #[test]
    #[should_panic(expected = "over-commit")]
    fn over_commit_panics() {
        let mut c = Cluster::uniform(1, 8, 1, 64, 512_000);
        let a = NodeAlloc {
            node: NodeId(0),
            gpus: GpuMask(0b1),
            gpu_milli: 700,
            cpu_milli: 0,
            mem_mib: 0,
        };
        c.take(&a);
        c.take(&a);
    }
}
