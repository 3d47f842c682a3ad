//! Admission: a `SubmitJob` checked the way Slurm's controller checks it, and converted into
//! the controller's [`JobRecord`] and the core's [`JobSpec`]/[`Request`].
//!
//! Which checks consume a job id follows the goldens (`shared/slurm-reference/goldens`
//! 0064-0081): a bad partition, a bad GRES name or a bad array spec are refused before a job
//! record exists (no id); a dependency syntax error consumes an id but leaves no record; a
//! request no node of the partition can ever satisfy (too many GPUs per node, an unknown GPU
//! type, too much memory, too many CPUs, temporary disk or sockets/cores/threads beyond every
//! node's: Slurm's `_build_node_list`, [`node_config_test`]) consumes an id and leaves a
//! `FAILED` record with reason `BadConstraints`, unless the job is submitted held (not tested,
//! as in Slurm). Limits Slurm checks only when `EnforcePartLimits` is set (`-N`
//! above the partition's node count, a time limit above `MaxTime`) are accepted and pend.

use crate::deps::{self, Dependency};
use crate::job::{JobRecord, JobState};
use flotilla_core::cluster::{Cluster, NodeId, PartId};
use flotilla_core::config::TopologyKind;
use flotilla_core::features::Constraint;
use flotilla_core::gres;
use flotilla_core::job::{HoldKind, JobId, JobSpec, Request};
use flotilla_proto::errno::*;
use flotilla_proto::{NodeShape, SlurmError, SubmitJob, TimeLimitWire};

/// Site settings admission needs (from slurm.conf).
#[derive(Debug, Clone)]
pub struct AdmissionConf {
    /// `DefMemPerCPU` (MiB).
    pub def_mem_per_cpu_mib: Option<u64>,
    /// `MaxArraySize`: array indices must be below it.
    pub max_array_size: u64,
    /// Each user's default account (`quota.conf` associations,
    /// [`flotilla_core::quota::QuotaTree::default_accounts`]): a job without `-A` is charged
    /// to it, as Slurm charges the user's `DefaultAccount`. Users without one get no account.
    pub default_accounts: std::collections::BTreeMap<String, String>,
    /// `SchedulerParameters=max_script_size` (bytes; [`crate::limits::max_script_size`]).
    pub max_script_size: usize,
    /// The kinds of node slurm.conf describes, in the order first seen ([`node_kinds`]), for
    /// the node-configuration test at submission ([`node_config_test`]). Empty: no test.
    pub node_kinds: Vec<NodeKind>,
}

/// Nodes of one shape (Slurm's `config_record`: the nodes of a `NodeName=` line), as the
/// node-configuration test reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeKind {
    /// The nodes of this shape.
    pub nodes: Vec<NodeId>,
    /// Partitions holding at least one of them.
    pub partitions: Vec<PartId>,
    /// What each of them has.
    pub hw: NodeHardware,
}

/// What a node has, as the node-configuration test compares it (slurm.conf's NodeName keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeHardware {
    /// `CPUs=`.
    pub cpus: u32,
    /// `Sockets=` (all boards).
    pub sockets: u32,
    /// `CoresPerSocket=`.
    pub cores_per_socket: u32,
    /// `ThreadsPerCore=`.
    pub threads_per_core: u32,
    /// `RealMemory=` (MiB).
    pub mem_mib: u64,
    /// `TmpDisk=` (MiB).
    pub tmp_disk_mib: u64,
}

/// The node kinds of `nodes` (slurm.conf's, in order): nodes with the same CPUs, sockets,
/// cores, threads, memory and temporary disk share a kind, listed where the first of them
/// is. Nodes the core `cluster` does not know are left out.
pub fn node_kinds(nodes: &[flotilla_core::config::NodeConfig], cluster: &Cluster) -> Vec<NodeKind> {
    let mut kinds: Vec<NodeKind> = Vec::new();
    for n in nodes {
        let Some(id) = cluster.node_id(&n.name) else { continue };
        let hw = NodeHardware {
            cpus: n.cpus,
            sockets: n.sockets,
            cores_per_socket: n.cores_per_socket,
            threads_per_core: n.threads_per_core,
            mem_mib: n.real_memory_mib,
            tmp_disk_mib: n.tmp_disk_mib,
        };
        let i = kinds.iter().position(|k| k.hw == hw).unwrap_or_else(|| {
            kinds.push(NodeKind { nodes: Vec::new(), partitions: Vec::new(), hw });
            kinds.len() - 1
        });
        let k = &mut kinds[i];
        k.nodes.push(id);
        for p in &cluster.nodes[id.0 as usize].partitions {
            if !k.partitions.contains(p) {
                k.partitions.push(*p);
            }
        }
    }
    kinds
}

/// What a job asks of every node it gets, as the node-configuration test compares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PerNode {
    /// Slurm's `pn_min_cpus` ([`node_shape`]).
    pub min_cpus: u32,
    /// `--cpus-per-task` (1 when not given).
    pub cpus_per_task: u32,
    /// `--ntasks-per-core` (0 when not given).
    pub ntasks_per_core: u32,
    /// Memory per node, or per CPU for `--mem-per-cpu` (MiB; 0 when none).
    pub mem_mib: u64,
    /// `--tmp` (MiB).
    pub tmp_disk_mib: u64,
    /// `--sockets-per-node` / `-B S` (0 when not given).
    pub sockets: u32,
    /// `--cores-per-socket` / `-B *:C` (0 when not given).
    pub cores_per_socket: u32,
    /// `--threads-per-core` / `-B *:*:T` (0 when not given).
    pub threads_per_core: u32,
}

impl PerNode {
    /// What record `rec` asks of each node, as admission built it.
    pub fn of(rec: &JobRecord) -> PerNode {
        PerNode {
            min_cpus: rec.node_shape.min_cpus,
            cpus_per_task: rec.cpus_per_task.max(1),
            ntasks_per_core: rec.node_shape.ntasks_per_core,
            mem_mib: rec.mem_per_cpu_mib.unwrap_or(rec.mem_per_node_mib),
            tmp_disk_mib: rec.node_shape.tmp_disk_mib,
            sockets: rec.sockets_per_node,
            cores_per_socket: rec.node_shape.cores_per_socket,
            threads_per_core: rec.node_shape.threads_per_core,
        }
    }
}

/// Whether pending record `rec` can never run in its partition: the node-configuration test
/// ([`node_config_test`]) or the request's shape ([`check_shape`]) fails. Slurm's scheduling
/// pass sets such a job's reason to `BadConstraints` and its priority to 0
/// (`job_scheduler.c` `schedule`, on `ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE`); it is how a
/// job submitted held without the test (`-H --mincpus=65`) ends once released.
pub fn never_runs(rec: &JobRecord, cluster: &Cluster, conf: &AdmissionConf) -> bool {
    let part = rec.spec.partition;
    node_config_test(&PerNode::of(rec), &conf.node_kinds, part, &usable(&rec.spec.request, cluster)).is_err()
        || check_shape(&rec.spec.request, cluster, part).is_err()
}

/// Whether request `r` may use a node: not excluded (`-x`) and with the features its
/// `--constraint` asks for.
pub fn usable<'a>(r: &'a Request, cluster: &'a Cluster) -> impl Fn(NodeId) -> bool + 'a {
    move |n| !r.excluded_nodes.contains(&n) && r.features_ok(&cluster.node(n).features)
}

/// Slurm 22.05's node-configuration test (`node_scheduler.c` `_build_node_list`, its messages
/// from `_set_err_msg`): a kind of node with nodes in partition `part` (not all of them in
/// `excluded`) can take the job when all four hold — CPUs (`pn_min_cpus` at most the node's
/// CPUs, or cores × `--ntasks-per-core` × `-c` when that is more: `adjust_cpus_nppcu`),
/// memory, temporary disk, and sockets/cores/threads each at most the node's. When no kind
/// can, the error names the first test the last such kind failed, in that order: `CPU count
/// per node`, `Memory specification`, `Temporary disk specification`, `Socket, core and/or
/// thread specification` `can not be satisfied`. Slurm runs it only for a job not held
/// (`select_nodes` returns early for priority 0), so a held job is not tested. A partition
/// none of `kinds` covers passes (other checks decide). Kinds with no node the job may use
/// (`usable`: [`usable`], not excluded, with the features asked for) are skipped.
pub fn node_config_test(
    want: &PerNode,
    kinds: &[NodeKind],
    part: PartId,
    usable: &dyn Fn(NodeId) -> bool,
) -> Result<(), &'static str> {
    let mut failed = None;
    for k in kinds.iter().filter(|k| k.partitions.contains(&part)) {
        if !k.nodes.iter().any(|n| usable(*n)) {
            continue;
        }
        let hw = &k.hw;
        let total_cores = hw.sockets.saturating_mul(hw.cores_per_socket);
        let usable_cpus = if want.ntasks_per_core > 0 && want.ntasks_per_core != u32::from(u16::MAX) {
            total_cores.saturating_mul(want.ntasks_per_core).saturating_mul(want.cpus_per_task).max(hw.cpus)
        } else {
            hw.cpus
        };
        let within = |asked: u32, has: u32| asked == 0 || asked <= has;
        let msg = if want.min_cpus > usable_cpus {
            "CPU count per node can not be satisfied"
        } else if want.mem_mib > hw.mem_mib {
            "Memory specification can not be satisfied"
        } else if want.tmp_disk_mib > hw.tmp_disk_mib {
            "Temporary disk specification can not be satisfied"
        } else if !(within(want.sockets, hw.sockets)
            && within(want.cores_per_socket, hw.cores_per_socket)
            && within(want.threads_per_core, hw.threads_per_core))
        {
            "Socket, core and/or thread specification can not be satisfied"
        } else {
            return Ok(());
        };
        failed = Some(msg);
    }
    failed.map_or(Ok(()), Err)
}

/// An accepted submission, before it gets its id.
#[derive(Debug)]
pub struct Admitted {
    /// The record (id 0 until assigned; state `PENDING`).
    pub record: JobRecord,
    /// Array task indices (sorted, distinct) and throttle.
    pub array: Option<(Vec<u32>, Option<u32>)>,
    /// Parsed dependency.
    pub dependency: Option<Dependency>,
}

/// A refused submission.
#[derive(Debug)]
pub enum Reject {
    /// Refused before a job id is assigned.
    BeforeId(SlurmError),
    /// Refused after: the id is consumed; `failed` is the `FAILED`/`BadConstraints` record
    /// to keep (None: no record).
    AfterId {
        /// The error.
        error: SlurmError,
        /// Record to keep.
        failed: Option<Box<JobRecord>>,
    },
}

fn node_config(msg: Option<&str>) -> SlurmError {
    match msg {
        Some(m) => SlurmError::with_message(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, m),
        None => SlurmError::new(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE),
    }
}

/// A built request: the core request, CPUs per node, tasks, and whether any node of the
/// partition can ever satisfy it (else the message to show).
pub type Built = (Request, u32, u32, Result<(), &'static str>);

/// The GPU demand of a submission, as Slurm 22.05's `gres_job_state_validate` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GpuDemand {
    /// GPUs per node (`--gres=gpu:N`, `--gpus-per-node`, or `--gpus-per-socket` times
    /// `--sockets-per-node`).
    per_node: Option<u32>,
    /// GPUs in all (`--gpus`, or `--gpus-per-task` times the task count).
    total: Option<u32>,
    /// The GPU model asked for.
    ty: Option<String>,
    /// The job's node, task and socket counts as the GPU options fix them
    /// ([`flotilla_core::gres::test_gres_cnt`]).
    shape: gres::Shape,
}

fn gpu_demand(req: &SubmitJob) -> Result<GpuDemand, SlurmError> {
    let invalid = || SlurmError::new(ESLURM_INVALID_GRES);
    let mut per_node: Option<u32> = None;
    let mut ty: Option<String> = None;
    for g in &req.gres {
        if g.name != "gpu" {
            return Err(invalid());
        }
        per_node = Some(u32::try_from(g.count).map_err(|_| invalid())?);
        ty = g.gpu_type.clone();
    }
    if let Some(g) = &req.gpus_per_node {
        per_node = Some(g.count);
        ty = g.gpu_type.clone().or(ty);
    }
    for g in [&req.gpus, &req.gpus_per_socket, &req.gpus_per_task].into_iter().flatten() {
        ty = g.gpu_type.clone().or(ty);
    }
    let counts = gres::GresCounts {
        per_job: req.gpus.as_ref().map(|g| u64::from(g.count)),
        per_node: per_node.map(u64::from),
        per_socket: req.gpus_per_socket.as_ref().map(|g| u64::from(g.count)),
        per_task: req.gpus_per_task.as_ref().map(|g| u64::from(g.count)),
    };
    let min_nodes = req.nodes_min.filter(|&n| n > 0);
    let mut shape = gres::Shape {
        num_tasks: req.ntasks,
        min_nodes,
        max_nodes: req.nodes_max.or(min_nodes),
        ntasks_per_node: req.ntasks_per_node,
        sockets_per_node: req.sockets_per_node,
    };
    let per_job = gres::test_gres_cnt(&counts, &mut shape).map_err(|e| SlurmError::with_message(ESLURM_INVALID_GRES, e.to_string()))?;
    if per_node.is_none() {
        if let (Some(s), Some(k)) = (counts.per_socket.filter(|&s| s > 0), shape.sockets_per_node) {
            per_node = Some(u32::try_from(s.saturating_mul(u64::from(k))).map_err(|_| invalid())?);
        }
    }
    let total = per_job.map(|t| u32::try_from(t).map_err(|_| invalid())).transpose()?;
    Ok(GpuDemand { per_node, total, ty, shape })
}

/// Builds the core request and checks it against the partition's nodes. Returns the request,
/// CPUs per node, tasks and the error message to show when no node can ever satisfy it.
pub fn build_request(
    req: &SubmitJob,
    cluster: &Cluster,
    part: PartId,
    conf: &AdmissionConf,
) -> Result<Built, SlurmError> {
    let partition = &cluster.partitions[part.0 as usize];
    let GpuDemand { per_node, total, ty, shape } = gpu_demand(req)?;
    let cpt = req.cpus_per_task.unwrap_or(1).max(1);
    let gpu_types: Vec<String> = ty.into_iter().collect();
    // The partition's nodes of the models asked for, from the cluster's cache (a scan of a
    // 10,000-node partition per submission was a tenth of the controller's time).
    let cap = cluster.capacity(part, &gpu_types);
    let nodes_min = shape.min_nodes.or_else(|| tasks_nodes(shape.num_tasks, req.ntasks_per_node, cpt, cap.max_cpu_milli));
    let node_count = nodes_min.unwrap_or(1);
    // Without `-n`, one task per node `-N` asked for; a node count only the GPU options
    // fixed (`--gpus=2 --gres=gpu:1`) adds none: Slurm's request stays one CPU (its
    // `min_cpus`, goldens-extra 0407, 0422), a task count they fixed counts (0419).
    let user_nodes = req.nodes_min.filter(|&n| n > 0).unwrap_or(1);
    let ntasks = shape
        .num_tasks
        .unwrap_or_else(|| user_nodes.saturating_mul(req.ntasks_per_node.unwrap_or(1)))
        .max(1);
    let tasks_per_node = match req.ntasks_per_node {
        Some(t) => t.max(1),
        None => ntasks.div_ceil(node_count),
    };
    let min_cpus = node_shape(req, ntasks).min_cpus;
    let cpus_per_node = node_cpus(tasks_per_node, cpt, req.sockets_per_node.unwrap_or(0), min_cpus);
    let topology = match &req.topology {
        Some(t) => TopologyKind::parse(t).ok_or_else(|| {
            SlurmError::with_message(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, format!("invalid topology specified: {t}"))
        })?,
        None => partition.default_topology,
    };
    let resolve = |names: &[String]| -> Result<Vec<NodeId>, SlurmError> {
        names
            .iter()
            .map(|n| cluster.node_id(n).ok_or_else(|| SlurmError::new(ESLURM_INVALID_NODE_NAME)))
            .collect()
    };
    let required_nodes = resolve(&req.required_nodes)?;
    let excluded_nodes = resolve(&req.excluded_nodes)?;
    let max_node_mem = cap.max_mem_mib;
    let mem_per_node = match (req.mem_per_node_mib, req.mem_per_cpu_mib, conf.def_mem_per_cpu_mib) {
        (Some(0), _, _) => max_node_mem,
        (Some(m), _, _) => m,
        (None, Some(m), _) | (None, None, Some(m)) => m.saturating_mul(u64::from(cpus_per_node)),
        (None, None, None) => 0,
    };
    let (gpus, nodes, gpus_per_node) = match (per_node, total) {
        (Some(p), _) if p > 0 => (p.saturating_mul(node_count), Some(node_count), Some(p)),
        (_, Some(t)) if t > 0 => (t, nodes_min, None),
        _ => (0, nodes_min, None),
    };
    let nodes_max = match (nodes, shape.max_nodes) {
        (Some(min), Some(max)) => range_max(min, max, req.ntasks.is_some() && req.ntasks_per_node.is_none(), gpus, gpus_per_node),
        _ => None,
    };
    let request = Request {
        gpus,
        gpu_milli: flotilla_core::cluster::MILLI,
        nodes,
        nodes_max,
        gpus_per_node,
        cpu_milli_per_node: u64::from(cpus_per_node) * 1000,
        mem_mib_per_node: mem_per_node,
        topology,
        gpu_types,
        exclusive: req.exclusive,
        required_nodes,
        excluded_nodes,
        // Set after the dependency ([`constraint`]), in Slurm's order of checks.
        features: None,
    };
    // Can any node of the partition ever satisfy it? (After Slurm's node-configuration
    // test, which [`admit`] runs on the record: the GPUs the select plugin looks for.)
    let satisfiable = (|| {
        if gpus > 0 && cap.nodes == 0 {
            return Err("");
        }
        if gpus_per_node.is_some_and(|p| p > cap.max_gpus) || (gpus_per_node.is_none() && u64::from(gpus) > cap.total_gpus) {
            return Err("");
        }
        if u64::from(cpus_per_node) > cap.max_cpu_milli / 1000 {
            // Slurm names the CPUs only when a node must hold more than it has on its own
            // (`pn_min_cpus`: `-c`, `--ntasks-per-node` times `-c`, `--mincpus`;
            // node_scheduler.c `_set_err_msg`); tasks that do not fit the nodes the job asked
            // for (`-N1 -n 65`) fail the select plugin's test, which adds no message.
            return Err(if u64::from(min_cpus) > cap.max_cpu_milli / 1000 { "CPU count per node can not be satisfied" } else { "" });
        }
        if mem_per_node > max_node_mem {
            return Err("Memory specification can not be satisfied");
        }
        // A partition that starts nothing (`DOWN`, `INACTIVE`) skips the partition limits
        // that let an oversized job wait (Slurm 22.05 `_part_access_check` tests them only
        // with `PARTITION_SCHED`), and the select plugin's test refuses more nodes than it
        // has: `-N 3` or `-n 200` in a down 2-node partition (goldens-extra 1031; up, they
        // wait `PartitionConfig`).
        if !partition.state.schedules() && nodes.is_some_and(|n| n as usize > partition.nodes.len()) {
            return Err("");
        }
        // `--ntasks-per-node` caps each node's tasks: more tasks than the most nodes the job
        // may take hold (`-N 2 -n 10 --ntasks-per-node=4`) fail the select plugin's test
        // (cons_tres `_eval_nodes`: at most that many tasks a node), which adds no message;
        // a range's maximum counts (`-N 2-4 -n 10 --ntasks-per-node=4` runs on 4 nodes).
        if let (Some(p), Some(n)) = (req.ntasks_per_node.filter(|&p| p > 0), req.ntasks) {
            if u64::from(n) > u64::from(p) * u64::from(shape.max_nodes.or(nodes).unwrap_or(1)) {
                return Err("");
            }
        }
        Ok(())
    })();
    Ok((request, cpus_per_node, ntasks, satisfiable))
}

/// The node count of a job that gives a task count and nothing that fixes its nodes (no
/// `-N`, no GPU option that sets it): `None` while the tasks fit one node, else as many
/// nodes as the tasks need at the most tasks a node holds — `--ntasks-per-node` when given,
/// else the tasks of `cpus_per_task` CPUs one node of the partition's largest CPU count
/// (`max_cpu_milli`) holds. Slurm 22.05 spreads such a job over nodes (cons_tres fills a
/// node's CPUs, then the next): `sbatch -n 100` on 64-CPU nodes runs on 2, `-n 3 -c 40` on
/// 3, and `-n 200` in a partition of 2 such nodes waits with `PartitionConfig` on 4, as a
/// `-N 4` would (checked on the reference, goldens-extra 0434). With `--ntasks-per-node=P`
/// the job asks for ceil(n / P) nodes of P tasks each (`-n 10 --ntasks-per-node=4` runs on
/// 3 nodes of 4 CPUs, `-n 100 --ntasks-per-node=50` on 2, goldens-extra 0436; until its
/// first scheduling attempt Slurm shows such a job on floor(n / P) nodes, job_mgr.c
/// `pack_job`, and afterwards on its estimate, which Flotilla shows throughout). Without
/// it the tasks spread evenly here (50 + 50 where Slurm has 64 + 36: 0431, pending).
fn tasks_nodes(num_tasks: Option<u32>, ntasks_per_node: Option<u32>, cpus_per_task: u32, max_cpu_milli: u64) -> Option<u32> {
    let per_node = match ntasks_per_node.filter(|&p| p > 0) {
        Some(p) => p,
        None => u32::try_from(max_cpu_milli / 1000 / u64::from(cpus_per_task.max(1))).unwrap_or(u32::MAX),
    };
    num_tasks.filter(|&n| per_node >= 1 && n > per_node).map(|n| n.div_ceil(per_node))
}

/// A node range's [`Request::nodes_max`]: `max` when the range takes the nodes that fit at
/// its start (Slurm 22.05 cons_tres), i.e. above `min` with nodes alike — no task count to
/// spread over them (`tasks_spread`: `-n` without `--ntasks-per-node`; with it each node
/// runs that many tasks, and `-N 2-4 -n 4 --ntasks-per-node=2` runs on 4 nodes, 8 tasks, on
/// the reference), no GPUs (`gpus` 0) or GPUs on each node. Others start at the minimum
/// (`None`). The rule of submissions and of `NumNodes=` updates.
pub fn range_max(min: u32, max: u32, tasks_spread: bool, gpus: u32, gpus_per_node: Option<u32>) -> Option<u32> {
    (max > min && !tasks_spread && (gpus == 0 || gpus_per_node.is_some())).then_some(max)
}

/// CPUs a node of a job with `tasks` tasks a node of `cpt` CPUs each, `sockets` sockets a
/// node (`--sockets-per-node`, 0 when not given) and Slurm's `pn_min_cpus` `min_cpus`:
/// - `--sockets-per-node=S` takes at least one core on each of S sockets, so at least S CPUs
///   a node (Slurm `_allocate_sc`, cons_common.c: `min_sockets` x `min_cores` = 1;
///   goldens-extra 0433: one task with `--sockets-per-node=2` runs on CPUs 0,32, NumCPUs=2,
///   while pending its request is still one CPU, 0409);
/// - `--mincpus` (or `MinCPUsNode=`) above the tasks' CPUs takes that many CPUs a node, in
///   whole tasks' worth of `-c` (Slurm 22.05 cons_common `job_test.c`: the job's CPUs are at
///   least nodes x `pn_min_cpus`, then handed out `-c` at a time by `dist_tasks.c`; on the
///   reference `--mincpus=4` runs on 4 CPUs, `--mincpus=7 -c 2` on 6, `--mincpus=5 -N 2
///   --ntasks-per-node=2` on 10; goldens-extra 0158).
pub fn node_cpus(tasks: u32, cpt: u32, sockets: u32, min_cpus: u32) -> u32 {
    let cpt = cpt.max(1);
    tasks.saturating_mul(cpt).max(sockets).max(min_cpus / cpt * cpt)
}

/// Re-checks a request changed by `scontrol update` (`Gres=`, `NumNodes=`, `Partition=`)
/// against partition `part`'s nodes, as [`build_request`] checks a submission: GPUs per node
/// (of the type asked) that no node has, or more GPUs in all (no per-node count) than the
/// partition has (`-N` above its node count pends, as at submission), are
/// `ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE`; so are CPUs or memory per node beyond every
/// node's.
pub fn check_shape(r: &Request, cluster: &Cluster, part: PartId) -> Result<(), SlurmError> {
    let cap = cluster.capacity(part, &r.gpu_types);
    let unavailable = (r.gpus > 0 && cap.nodes == 0)
        || r.gpus_per_node.is_some_and(|p| p > cap.max_gpus)
        || (r.gpus_per_node.is_none() && u64::from(r.gpus) > cap.total_gpus)
        || r.cpu_milli_per_node > cap.max_cpu_milli
        || r.mem_mib_per_node > cap.max_mem_mib;
    if unavailable || !features_fit(r, cluster, part) {
        return Err(SlurmError::new(ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE));
    }
    Ok(())
}

/// Whether the nodes of partition `part` with the features request `r`'s `--constraint`
/// asks for (true without one) can hold it: as many as its node count (unless that is more
/// than the partition has, which pends as `PartitionNodeLimit`), its GPUs per node on one of
/// them (of the model asked for), and its GPUs in all. Slurm 22.05's `_build_node_list` and
/// `_pick_best_nodes` refuse a job otherwise with `ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE`
/// (reference: `-N3 -C ib` with 2 `ib` nodes, and `-p debug -C slow` with `slow` only outside
/// `debug`, end `FAILED` at submission).
pub fn features_fit(r: &Request, cluster: &Cluster, part: PartId) -> bool {
    if r.features.is_none() {
        return true;
    }
    let p = &cluster.partitions[part.0 as usize];
    let ok = usable(r, cluster);
    let (mut nodes, mut max_gpus, mut total_gpus) = (0usize, 0u32, 0u64);
    for &id in &p.nodes {
        if !ok(id) {
            continue;
        }
        nodes += 1;
        let n = cluster.node(id);
        if n.gpu_type_ok(&r.gpu_types) {
            max_gpus = max_gpus.max(n.gpus);
            total_gpus += u64::from(n.gpus);
        }
    }
    let want_nodes = r.nodes.unwrap_or(1).max(1) as usize;
    (nodes >= want_nodes || want_nodes > p.nodes.len())
        && nodes > 0
        && r.gpus_per_node.is_none_or(|g| g <= max_gpus)
        && (r.gpus_per_node.is_some() || u64::from(r.gpus) <= total_gpus)
}

/// The job's `--constraint` `text` checked as Slurm 22.05's `build_feature_list` and
/// `_valid_feature_list` check it (after the dependency, before the reservation: an id is
/// used and no record stays): the syntax, and every feature named on some node of the
/// cluster (`_valid_node_feature`, any partition, case-sensitive); else
/// `ESLURM_INVALID_FEATURE`. Node counts (`ib*2`) and matching or (`[a|b]`), which Slurm
/// accepts, are refused with `ESLURM_NOT_SUPPORTED`: Flotilla's placement cannot honour
/// them, and ignoring them would run the job on nodes it did not ask for. `Ok(None)` for a
/// constraint naming nothing (`-C ''`).
pub fn constraint(text: &str, cluster: &Cluster) -> Result<Option<Constraint>, SlurmError> {
    let invalid = || SlurmError::new(ESLURM_INVALID_FEATURE);
    let c = match Constraint::parse(text) {
        Ok(Some(c)) => c,
        Ok(None) => return Ok(None),
        Err(_) => return Err(invalid()),
    };
    if !c.names().all(|f| cluster.nodes.iter().any(|n| n.features.iter().any(|h| h == f))) {
        return Err(invalid());
    }
    if !c.per_node() {
        return Err(SlurmError::new(ESLURM_NOT_SUPPORTED));
    }
    Ok(Some(c))
}

/// The error of a dependency string Slurm refuses: "Job dependency problem", or "Requested
/// operation not supported on this system" for `expand:` (`update_job_dependency`).
pub fn dep_error(e: deps::DepError) -> SlurmError {
    match e {
        deps::DepError::Invalid => SlurmError::new(ESLURM_DEPENDENCY),
        deps::DepError::NotSupported => SlurmError::new(ESLURM_NOT_SUPPORTED),
    }
}

/// Expands and checks an array spec (Slurm 22.05 `job_mgr.c` `_valid_array_inx` and
/// `_parse_array_tok`: every index below `MaxArraySize`, a step between 1 and
/// `MaxArraySize - 1`, no reversed range; a spec without ranges is what sbatch sends for an
/// expression Slurm's parser refuses). Errors: `ESLURM_INVALID_ARRAY`.
pub fn array_indices(spec: &flotilla_proto::ArraySpec, max_array_size: u64) -> Result<Vec<u32>, SlurmError> {
    let bad = || SlurmError::new(ESLURM_INVALID_ARRAY);
    if spec.ranges.is_empty() || max_array_size == 0 {
        return Err(bad());
    }
    let mut out = Vec::new();
    for r in &spec.ranges {
        if r.step == 0 || u64::from(r.step) >= max_array_size || r.end < r.start || u64::from(r.end) >= max_array_size {
            return Err(bad());
        }
        let mut i = r.start;
        loop {
            out.push(i);
            if out.len() as u64 > max_array_size {
                return Err(bad());
            }
            match i.checked_add(r.step) {
                Some(n) if n <= r.end => i = n,
                _ => break,
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The partition a submission names, or the default one. Errors (before an id): an unknown
/// name, `ESLURM_INVALID_PARTITION_NAME` with Slurm's message; none named and no default,
/// `ESLURM_DEFAULT_PARTITION_NOT_SET`; a partition that takes no new jobs (`DRAIN`,
/// `INACTIVE`), `ESLURM_PARTITION_NOT_AVAIL` (Slurm 22.05 `_alt_part_test`, before the job
/// id: on the reference the next submission gets the next id).
fn partition_of(req: &SubmitJob, cluster: &Cluster) -> Result<PartId, Reject> {
    let part = named_partition(req, cluster)?;
    if !cluster.partitions[part.0 as usize].state.accepts() {
        return Err(Reject::BeforeId(SlurmError::new(ESLURM_PARTITION_NOT_AVAIL)));
    }
    Ok(part)
}

fn named_partition(req: &SubmitJob, cluster: &Cluster) -> Result<PartId, Reject> {
    match &req.partition {
        Some(p) => cluster.partition_id(p).ok_or_else(|| {
            Reject::BeforeId(SlurmError::with_message(
                ESLURM_INVALID_PARTITION_NAME,
                format!("invalid partition specified: {p}"),
            ))
        }),
        None => cluster
            .default_partition()
            .ok_or_else(|| Reject::BeforeId(SlurmError::new(ESLURM_DEFAULT_PARTITION_NOT_SET))),
    }
}

/// The pending record of a submission admitted at `now` (s): `spec` (the core's view of it,
/// whose time limit is whole minutes), the partition's name, the task count, and the array's
/// task ids.
fn pending_record(
    req: &SubmitJob,
    conf: &AdmissionConf,
    spec: JobSpec,
    partition: &str,
    ntasks: u32,
    array_tasks: Option<&[u32]>,
    now: i64,
) -> JobRecord {
    let time_limit_min = spec.time_limit_s.map(|s| (s / 60) as u32);
    JobRecord {
        id: 0,
        array_job_id: None,
        array_task_id: None,
        array_pending: Vec::new(),
        array_max_running: None,
        // Slurm 22.05 `job_mgr.c`: a job submitted held has priority 0; the others get the
        // next number when the controller keeps them (`set_job_prio`).
        priority: if req.hold { 0 } else { crate::job::PRIO_UNSET },
        state: JobState::Pending,
        reason: None,
        name: req.name.clone().unwrap_or_else(|| "sbatch".into()),
        user: req.user.clone(),
        uid: req.uid,
        gid: req.gid,
        account: spec.account.clone(),
        qos: spec.qos.clone(),
        partition: partition.to_string(),
        work_dir: req.work_dir.clone(),
        stdout: req.stdout.clone(),
        stderr: req.stderr.clone(),
        argv: req.argv.clone(),
        comment: req.comment.clone(),
        submit_time: now,
        start_time: None,
        end_time: None,
        time_limit_min,
        ntasks,
        cpus_per_task: req.cpus_per_task.unwrap_or(1).max(1),
        num_nodes: spec.request.nodes.unwrap_or(1),
        // `--gpus-per-node` is GRES per node, as in Slurm (`TresPerNode=gres:gpu:2`).
        gres: match (&req.gpus_per_node, req.gres.is_empty()) {
            (Some(g), true) => vec![("gpu".to_string(), g.gpu_type.clone(), u64::from(g.count))],
            _ => req.gres.iter().map(|g| (g.name.clone(), g.gpu_type.clone(), g.count)).collect(),
        },
        dependency: req.dependency.clone(),
        requeue: req.requeue.unwrap_or(true),
        restarts: 0,
        allocs: Vec::new(),
        nodes: Vec::new(),
        completing_nodes: Vec::new(),
        end_state: None,
        exit_code: 0,
        exit_signal: 0,
        stopping: None,
        topology: spec.request.topology.as_str().to_string(),
        exclusive: req.exclusive,
        mem_per_node_mib: spec.request.mem_mib_per_node,
        gpus: spec.request.gpus,
        required_nodes: req.required_nodes.clone(),
        excluded_nodes: req.excluded_nodes.clone(),
        submit_host: req.submit_host.clone(),
        mem_per_cpu_mib: match (req.mem_per_node_mib, req.mem_per_cpu_mib) {
            (Some(_), _) => None,
            (None, m) => m.or(conf.def_mem_per_cpu_mib),
        },
        array_tasks: array_tasks.and_then(flotilla_proto::ArrayTasks::of),
        signal: req.signal.clone(),
        warn_sent: false,
        special_exit: false,
        elastic: None,
        interactive: req.interactive,
        last_checkpoint_ack: None,
        service: None,
        acct: Default::default(),
        tres_per_job: req.gpus.as_ref().map(crate::job::gpu_tres),
        tres_per_task: req.gpus_per_task.as_ref().map(crate::job::gpu_tres),
        tres_per_node: req.tres_per_node.clone(),
        tres_per_socket: req.gpus_per_socket.as_ref().map(crate::job::gpu_tres),
        // Slurm's `max_nodes` as `-N` and the GPU options fix it (`NumNodes=MIN-MAX` while
        // pending); admission already accepted the GPU options.
        max_nodes: gpu_demand(req).ok().and_then(|d| d.shape.max_nodes).unwrap_or(0),
        sockets_per_node: req.sockets_per_node.unwrap_or(0),
        mem_whole_node: req.mem_per_node_mib == Some(0),
        node_shape: node_shape(req, ntasks),
        mail_type: req.mail_type,
        // `job_mgr.c` `_get_mail_user`: the user's name when a type is set without a user.
        mail_user: match (&req.mail_user, req.mail_type) {
            (Some(u), _) if !u.is_empty() => Some(u.clone()),
            (_, 0) => None,
            _ => Some(req.user.clone()),
        },
        job_flags: req.job_flags,
        time_min: None,
        deadline: req.deadline,
        min_cpus_set: None,
        features: None,
        ntasks_given: req.ntasks.is_some(),
        admin_comment: None,
        delay_boot_s: None,
        cores: Default::default(),
        command: req.command.as_ref().map(|c| std::iter::once(c.as_str()).chain(req.argv.iter().map(String::as_str)).collect::<Vec<_>>().join(" ")),
        spec,
    }
}

/// What the record keeps of `req`'s per-node options ([`NodeShape`]): as sent, with
/// `ntasks_per_node` from the request and `min_cpus` Slurm 22.05's `pn_min_cpus`
/// (`job_mgr.c` `_copy_job_desc_to_job_record`): the largest of `--mincpus`, `-c` (1 when not
/// given), and `-c` × `--ntasks-per-node` when the job has more than one task (`ntasks`, as
/// admission counted them). [`build_request`] gives the job at least that many CPUs a node
/// (in whole `-c` units) and [`node_config_test`] refuses it where no node has them.
fn node_shape(req: &SubmitJob, ntasks: u32) -> NodeShape {
    let cpt = req.cpus_per_task.unwrap_or(1).max(1);
    let per_node = req.ntasks_per_node.unwrap_or(0);
    let mut min_cpus = req.node_shape.min_cpus.max(cpt);
    if per_node > 0 && ntasks > 1 {
        min_cpus = min_cpus.max(cpt.saturating_mul(per_node));
    }
    NodeShape { ntasks_per_node: per_node, min_cpus, ..req.node_shape }
}

/// `sbatch --elastic`: the elastic range of an admitted submission `req`, set on `rec`'s spec
/// (and the signal on the record). Before a job id, as a bad `-N` is:
///
/// - node-granular (`-N MIN-MAX --elastic`): MIN..MAX nodes, each with the job's per-node
///   shape; the request's GPUs must split evenly over MIN nodes (the per-node count is then
///   pinned, so every member has the same shape). Without a range, or MIN > MAX:
///   `ESLURM_INVALID_NODE_COUNT` (`Node count specification invalid`).
/// - GPU-granular (`--gpus=MIN-MAX --elastic`): MIN..MAX GPUs, grown on nodes the job does
///   not hold; not with a node range or `--exclusive` (`ESLURM_INVALID_NODE_COUNT`), nor
///   with `--topology=node` (it could never grow: `ESLURM_NOT_SUPPORTED`); MIN > MAX is
///   `ESLURM_INVALID_GRES`.
/// - `--elastic-step` of 0 or above MAX − MIN (when MAX > MIN): `ESLURM_INVALID_NODE_COUNT`.
/// - an array of elastic jobs, or an interactive one: `ESLURM_NOT_SUPPORTED`.
///
/// Without `--elastic`, `-N MIN-MAX` keeps Slurm's meaning (the size is fixed at start).
pub fn elastic_of(req: &SubmitJob, e: &flotilla_proto::ElasticRequest, cluster: &Cluster, rec: &mut JobRecord) -> Result<(), SlurmError> {
    use flotilla_core::job::{Elastic, ElasticUnit};
    let bad_nodes = |m: &str| SlurmError::with_message(ESLURM_INVALID_NODE_COUNT, m.to_string());
    if req.array.is_some() || req.interactive {
        return Err(SlurmError::with_message(ESLURM_NOT_SUPPORTED, "--elastic is for single batch jobs".to_string()));
    }
    let size = flotilla_core::placement::node_size(cluster, rec.spec.partition);
    let r = &mut rec.spec.request;
    // An elastic job starts at its minimum and grows while it runs.
    r.nodes_max = None;
    let (unit, min, max) = match e.gpus_max {
        Some(max) => {
            let min = r.gpus;
            if req.nodes_max.is_some_and(|n| Some(n) != req.nodes_min) || req.exclusive {
                return Err(bad_nodes("a GPU-granular elastic job (--gpus=MIN-MAX) takes no node range or --exclusive"));
            }
            if min == 0 || max < min {
                return Err(SlurmError::with_message(ESLURM_INVALID_GRES, format!("invalid --gpus range {min}-{max}")));
            }
            if r.topology == TopologyKind::Node && max > min {
                return Err(SlurmError::with_message(
                    ESLURM_NOT_SUPPORTED,
                    "a GPU-granular elastic job grows on nodes it does not hold: use --topology=pod or any".to_string(),
                ));
            }
            let _ = size;
            (ElasticUnit::Gpus, min, max)
        }
        None => {
            let (Some(min), Some(max)) = (req.nodes_min.filter(|&n| n > 0), req.nodes_max) else {
                return Err(bad_nodes("--elastic needs -N MIN-MAX or --gpus=MIN-MAX"));
            };
            if max < min {
                return Err(bad_nodes("-N MIN-MAX with MIN above MAX"));
            }
            // Every member has the same per-node shape.
            if !r.exclusive && r.gpus_per_node.is_none() && r.gpus > 0 {
                if r.gpus % min != 0 {
                    return Err(SlurmError::with_message(
                        ESLURM_INVALID_GRES,
                        format!("{} GPUs do not split evenly over {min} nodes", r.gpus),
                    ));
                }
                r.gpus_per_node = Some(r.gpus / min);
            }
            r.nodes = Some(min);
            (ElasticUnit::Nodes, min, max)
        }
    };
    let step = e.step.unwrap_or(1);
    if step == 0 || (max > min && step > max - min) {
        return Err(bad_nodes("--elastic-step must be between 1 and MAX - MIN"));
    }
    rec.spec.elastic = Some(Elastic { unit, min, max, step });
    rec.num_nodes = match unit {
        ElasticUnit::Nodes => min,
        ElasticUnit::Gpus => rec.num_nodes,
    };
    rec.elastic = Some(crate::job::ElasticRecord { signal: e.signal, ..Default::default() });
    Ok(())
}

/// `--time-min` and `--deadline` against the partition, the job's time limit
/// (`time_limit_min`, after the partition's `DefaultTime`; `None`: unlimited) and `now` (s),
/// as Slurm 22.05's `_valid_job_part` checks them, before a job id is taken: a minimum above
/// the partition's `MaxTime` or the job's limit is `ESLURM_INVALID_TIME_MIN_LIMIT`; a
/// deadline already past is `ESLURM_INVALID_TIME_LIMIT` and one sooner than `now` plus the
/// minimum `ESLURM_INVALID_TIME_MIN_LIMIT` (without `--time-min` the time limit is only
/// checked at scheduling, [`deadline_missed`]). Returns the job's `TimeMin` in minutes: as
/// given, or 1 for a job with a deadline, no time limit and no partition `DefaultTime`
/// (`_job_create`).
fn time_min_and_deadline(
    req: &SubmitJob,
    time_limit_min: Option<u32>,
    partition: &flotilla_core::cluster::Partition,
    now: i64,
) -> Result<Option<u32>, SlurmError> {
    let time_min = req.time_min.map(time_min_minutes);
    if let Some(m) = time_min {
        if partition.max_time_min.is_some_and(|max| u64::from(m) > max) || time_limit_min.is_some_and(|l| m > l) {
            return Err(SlurmError::new(ESLURM_INVALID_TIME_MIN_LIMIT));
        }
    }
    // An INFINITE minimum under no limit at all is none.
    let time_min = time_min.filter(|&m| m != u32::MAX);
    if let Some(d) = req.deadline {
        let after = |min: u32| d < now + i64::from(min) * 60;
        if d < now {
            return Err(SlurmError::new(ESLURM_INVALID_TIME_LIMIT));
        }
        if time_min.is_some_and(after) {
            return Err(SlurmError::new(ESLURM_INVALID_TIME_MIN_LIMIT));
        }
        if time_min.is_none() && req.time_limit.is_none() && partition.default_time_min.is_none() {
            return Ok(Some(1));
        }
    }
    Ok(time_min)
}

/// A minimum time (`--time-min`, `scontrol update TimeMin=`) in minutes, Slurm's INFINITE
/// (`UNLIMITED`, `-1`; sbatch's `--time-min=0`, `slurm_opt.c` `arg_set_time_min`) as
/// `u32::MAX`, above any finite time limit.
pub fn time_min_minutes(t: TimeLimitWire) -> u32 {
    match t {
        TimeLimitWire::Minutes(m) => m,
        TimeLimitWire::Unlimited => u32::MAX,
    }
}

/// Slurm 22.05's `deadline_ok` (`job_scheduler.c`), for a pending job at `now` (s): whether
/// its `deadline` can no longer be met, because it falls before `now` plus the job's
/// minimum time (`time_min`, when set and not 0), or else plus its time limit (minutes of
/// `minute_s` seconds; an unlimited job is never late). Such a job is ended `DEADLINE`.
pub fn deadline_missed(deadline: i64, time_min: Option<u32>, time_limit_min: Option<u32>, now: i64, minute_s: i64) -> bool {
    match time_min.filter(|&m| m != 0).or(time_limit_min) {
        Some(m) => deadline < now + i64::from(m) * minute_s,
        None => false,
    }
}

/// The time limit a job with `deadline` starts with at `now` (Slurm 22.05 `schedule()`):
/// the minutes left until the deadline, when fewer than its own limit (or, for an unlimited
/// job, than the partition's `DefaultTime`, else `MaxTime`); otherwise its own limit.
pub fn limit_at_start(
    deadline: i64,
    time_limit_min: Option<u32>,
    partition: &flotilla_core::cluster::Partition,
    now: i64,
    minute_s: i64,
) -> Option<u32> {
    let left = u32::try_from(((deadline - now) / minute_s.max(1)).max(0)).unwrap_or(u32::MAX);
    if left == 0 {
        return time_limit_min;
    }
    let cap = time_limit_min.or_else(|| partition.default_time_min.or(partition.max_time_min).map(|m| m.min(u64::from(u32::MAX)) as u32));
    Some(cap.map_or(left, |c| c.min(left)))
}

/// Admits a submission at `now` (s). The caller has checked the submitter may act as
/// `req.uid`.
pub fn admit(req: &SubmitJob, cluster: &Cluster, conf: &AdmissionConf, now: i64) -> Result<Admitted, Reject> {
    // Before an id: partition, GRES names, array spec.
    let part = partition_of(req, cluster)?;
    let partition = &cluster.partitions[part.0 as usize];
    if req.script.is_empty() && !req.interactive {
        return Err(Reject::BeforeId(SlurmError::new(ESLURM_JOB_SCRIPT_MISSING)));
    }
    crate::limits::check_script(&req.script, conf.max_script_size).map_err(Reject::BeforeId)?;
    let array = match &req.array {
        Some(a) => Some((
            array_indices(a, conf.max_array_size).map_err(Reject::BeforeId)?,
            // A throttle of 0 is none (`_create_job_array` keeps only a positive one).
            a.max_running.filter(|&m| m > 0),
        )),
        None => None,
    };
    let (request, cpus_per_node, ntasks, satisfiable) =
        build_request(req, cluster, part, conf).map_err(Reject::BeforeId)?;
    let time_limit_min = match req.time_limit {
        Some(TimeLimitWire::Unlimited) => None,
        Some(TimeLimitWire::Minutes(m)) => Some(m),
        None => partition
            .default_time_min
            .or(partition.max_time_min)
            .map(|m| m.min(u64::from(u32::MAX - 2)) as u32),
    };
    let time_min = time_min_and_deadline(req, time_limit_min, partition, now).map_err(Reject::BeforeId)?;
    let held = req.hold.then_some(HoldKind::User);
    let account = match req.account.as_deref() {
        Some(a) if !a.is_empty() => a.to_string(),
        _ => conf.default_accounts.get(&req.user).cloned().unwrap_or_default(),
    };
    let spec = JobSpec {
        id: JobId(0),
        partition: part,
        account: account.clone(),
        user: req.user.clone(),
        submit_time: now.max(0) as u64,
        begin_time: req.begin.filter(|&b| b > now).map(|b| b as u64),
        base_priority: 0,
        nice: req.nice.unwrap_or(0),
        site_factor: 0,
        time_limit_s: time_limit_min.map(|m| u64::from(m) * 60),
        request: request.clone(),
        preemptible: req.preemptible,
        checkpoint_bytes: req.checkpoint_bytes.unwrap_or(0),
        held,
        dependency_pending: req.dependency.is_some(),
        preempt_count: 0,
        qos: req.qos.clone().filter(|q| !q.is_empty()).unwrap_or_else(|| flotilla_core::job::DEFAULT_QOS.into()),
        elastic: None,
    };
    let array_tasks = array.as_ref().map(|(tasks, _)| tasks.as_slice());
    let mut record = pending_record(req, conf, spec, &partition.name, ntasks, array_tasks, now);
    record.time_min = time_min;
    let _ = cpus_per_node;
    // After an id: dependency syntax, then node configuration.
    let dependency = match &req.dependency {
        Some(d) => deps::parse(d).map_err(|e| Reject::AfterId { error: dep_error(e), failed: None })?,
        None => None,
    };
    // Then the reservation (Slurm 22.05 `_job_create`'s `validate_job_resv`, after the job id
    // and the dependency, before the nodes are tested: the id is used, no record stays).
    // Flotilla has no advance reservations, so every name is one Slurm does not know; an
    // empty one asks for none.
    if let Some(text) = &req.constraint {
        record.spec.request.features = constraint(text, cluster).map_err(|error| Reject::AfterId { error, failed: None })?.map(Box::new);
        record.features = Some(flotilla_core::features::normalize(text));
    }
    if req.reservation.as_deref().is_some_and(|r| !r.is_empty()) {
        return Err(Reject::AfterId { error: SlurmError::new(ESLURM_RESERVATION_INVALID), failed: None });
    }
    // A job submitted held is not tested against the nodes (Slurm's `select_nodes` returns
    // `ESLURM_JOB_HELD` before `_build_node_list`): `-H --mincpus=65` is accepted and held
    // on the reference (goldens-extra 0159).
    let satisfiable = node_config_test(&PerNode::of(&record), &conf.node_kinds, part, &usable(&record.spec.request, cluster))
        .and(satisfiable)
        .and(if features_fit(&record.spec.request, cluster, part) { Ok(()) } else { Err("") });
    if let (Err(msg), false) = (satisfiable, req.hold) {
        let mut failed = record;
        failed.state = JobState::Failed;
        failed.reason = Some("BadConstraints".into());
        failed.end_time = Some(now);
        return Err(Reject::AfterId {
            error: node_config((!msg.is_empty()).then_some(msg)),
            failed: Some(Box::new(failed)),
        });
    }
    if dependency.is_none() {
        record.spec.dependency_pending = false;
        record.dependency = None;
    }
    Ok(Admitted {
        record,
        array,
        dependency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_core::cluster::PartitionState;
    use flotilla_proto::{ArrayRange, ArraySpec, GpuCount, GresSpec};

    /// The reference cluster of the goldens: gpu[01-04], 64 CPUs, 512000 MiB, 8 h100 each;
    /// partition batch (default, MaxTime 2 days, DefaultTime 1 h) and debug (gpu[01-02]).
    pub(crate) fn oracle() -> Cluster {
        let mut c = Cluster::uniform(4, 8, 2, 64, 512_000);
        for (i, n) in c.nodes.iter_mut().enumerate() {
            n.name = format!("gpu{:02}", i + 1);
        }
        c.partitions[0].max_time_min = Some(2 * 24 * 60);
        c.partitions[0].default_time_min = Some(60);
        let debug = c.add_partition("debug", vec![NodeId(0), NodeId(1)], false);
        c.partitions[debug.0 as usize].max_time_min = Some(30);
        c
    }

    fn conf() -> AdmissionConf {
        AdmissionConf {
            def_mem_per_cpu_mib: Some(1024),
            max_array_size: 1001,
            default_accounts: [("alice".to_string(), "research".to_string())].into(),
            max_script_size: crate::limits::DEFAULT_MAX_SCRIPT_SIZE,
            node_kinds: Vec::new(),
        }
    }

    fn wrap() -> SubmitJob {
        SubmitJob {
            script: "#!/bin/sh\ntrue\n".into(),
            user: "alice".into(),
            uid: 2001,
            gid: 2001,
            work_dir: "/home/alice/g".into(),
            ..SubmitJob::default()
        }
    }

    /// `sbatch --elastic` as admission sees it: the range on the spec, or the refusal's code.
    fn elastic(r: &SubmitJob, e: &flotilla_proto::ElasticRequest) -> Result<flotilla_core::job::Elastic, i32> {
        let c = oracle();
        let Ok(mut a) = admit(r, &c, &conf(), 0) else { panic!("admitted") };
        elastic_of(r, e, &c, &mut a.record).map_err(|e| e.code)?;
        assert_eq!(a.record.elastic.as_ref().unwrap().signal, e.signal);
        Ok(a.record.spec.elastic.unwrap())
    }

    #[test]
    fn elastic_ranges_are_checked_before_an_id() {
        use flotilla_core::job::{Elastic, ElasticUnit};
        use flotilla_proto::ElasticRequest;
        let nodes = |min, max: Option<u32>, gres: u64| SubmitJob {
            nodes_min: Some(min),
            nodes_max: max,
            gres: vec![GresSpec { name: "gpu".into(), gpu_type: None, count: gres }],
            ..wrap()
        };
        let plain = ElasticRequest::default();
        // -N 2-4 --gres=gpu:8 --elastic: 2..4 nodes, step 1.
        assert_eq!(elastic(&nodes(2, Some(4), 8), &plain), Ok(Elastic { unit: ElasticUnit::Nodes, min: 2, max: 4, step: 1 }));
        let stepped = ElasticRequest { step: Some(2), signal: Some(10), ..ElasticRequest::default() };
        assert_eq!(elastic(&nodes(2, Some(4), 8), &stepped).map(|e| e.step), Ok(2));
        assert_eq!(elastic(&nodes(2, None, 8), &plain), Err(ESLURM_INVALID_NODE_COUNT), "no range");
        assert_eq!(elastic(&nodes(2, Some(4), 8), &ElasticRequest { step: Some(3), ..plain.clone() }), Err(ESLURM_INVALID_NODE_COUNT));
        assert_eq!(elastic(&nodes(2, Some(4), 8), &ElasticRequest { step: Some(0), ..plain.clone() }), Err(ESLURM_INVALID_NODE_COUNT));
        // --gpus=12 over -N 2-3: 6 per node, pinned.
        let total = SubmitJob { nodes_min: Some(2), nodes_max: Some(3), gpus: Some(GpuCount { gpu_type: None, count: 12 }), ..wrap() };
        let c = oracle();
        let mut a = admit(&total, &c, &conf(), 0).unwrap();
        elastic_of(&total, &plain, &c, &mut a.record).unwrap();
        assert_eq!(a.record.spec.request.gpus_per_node, Some(6));
        let odd = SubmitJob { gpus: Some(GpuCount { gpu_type: None, count: 5 }), ..total };
        assert_eq!(elastic(&odd, &plain), Err(ESLURM_INVALID_GRES));
        // --gpus=2-8: GPU-granular, grown on other nodes (so never with --topology=node).
        let gpus = |min, topo: &str| SubmitJob { gpus: Some(GpuCount { gpu_type: None, count: min }), topology: Some(topo.into()), ..wrap() };
        let up_to = |max| ElasticRequest { gpus_max: Some(max), ..ElasticRequest::default() };
        assert_eq!(elastic(&gpus(2, "pod"), &up_to(8)), Ok(Elastic { unit: ElasticUnit::Gpus, min: 2, max: 8, step: 1 }));
        assert_eq!(elastic(&gpus(2, "node"), &up_to(8)), Err(ESLURM_NOT_SUPPORTED));
        assert_eq!(elastic(&gpus(2, "any"), &up_to(16)).map(|e| e.max), Ok(16));
        assert_eq!(elastic(&gpus(4, "any"), &up_to(2)), Err(ESLURM_INVALID_GRES));
        let ranged = SubmitJob { nodes_min: Some(1), nodes_max: Some(2), ..gpus(2, "any") };
        assert_eq!(elastic(&ranged, &up_to(8)), Err(ESLURM_INVALID_NODE_COUNT));
        // Arrays are not elastic.
        let array = SubmitJob { array: Some(ArraySpec { ranges: vec![ArrayRange { start: 0, end: 1, step: 1 }], max_running: None }), ..nodes(1, Some(2), 8) };
        assert_eq!(elastic(&array, &plain), Err(ESLURM_NOT_SUPPORTED));
    }

    fn code(r: Result<Admitted, Reject>) -> (i32, bool, Vec<String>) {
        match r {
            Ok(_) => (0, false, vec![]),
            Err(Reject::BeforeId(e)) => (e.code, false, e.messages),
            Err(Reject::AfterId { error, .. }) => (error.code, true, error.messages),
        }
    }

    fn gres(ty: Option<&str>, name: &str, n: u64) -> Vec<GresSpec> {
        vec![GresSpec {
            name: name.into(),
            gpu_type: ty.map(Into::into),
            count: n,
        }]
    }

    /// `--reservation`: Flotilla has no advance reservations, so a name is refused after the
    /// id as Slurm refuses an unknown one (`validate_job_resv`), with no record kept; a
    /// dependency error comes first (`_job_create`'s order), a request the nodes cannot
    /// satisfy after; an empty name asks for none (goldens-extra 0136-0139).
    #[test]
    fn reservation_names_are_refused_after_the_id() {
        let c = oracle();
        let k = conf();
        let resv = |r: &str| SubmitJob { reservation: Some(r.into()), ..wrap() };
        let refused = admit(&resv("r1"), &c, &k, 0);
        assert!(matches!(&refused, Err(Reject::AfterId { failed: None, .. })), "no record kept");
        assert_eq!(code(refused), (ESLURM_RESERVATION_INVALID, true, vec![]));
        assert_eq!(code(admit(&resv(""), &c, &k, 0)).0, 0);
        assert_eq!(code(admit(&wrap(), &c, &k, 0)).0, 0);
        let dep = SubmitJob { dependency: Some("bogus:1".into()), ..resv("r1") };
        assert_eq!(code(admit(&dep, &c, &k, 0)).0, ESLURM_DEPENDENCY);
        let big = SubmitJob { gres: gres(None, "gpu", 9), ..resv("r1") };
        assert_eq!(code(admit(&big, &c, &k, 0)).0, ESLURM_RESERVATION_INVALID);
    }

    /// The reference's nodes as one kind: 2 sockets x 32 cores x 1 thread, 512000 MiB, no
    /// `TmpDisk=` (0), in both partitions.
    fn oracle_kinds(c: &Cluster) -> Vec<NodeKind> {
        vec![NodeKind {
            nodes: (0..4).map(NodeId).collect(),
            partitions: (0..c.partitions.len() as u32).map(PartId).collect(),
            hw: NodeHardware { cpus: 64, sockets: 2, cores_per_socket: 32, threads_per_core: 1, mem_mib: 512_000, tmp_disk_mib: 0 },
        }]
    }

    /// A partition that takes no new jobs (`DRAIN`, `INACTIVE`) refuses them before an id;
    /// one that starts none (`DOWN`, `INACTIVE`) refuses more nodes than it has rather than
    /// letting them wait (goldens-extra 1031, 1032).
    #[test]
    fn partition_state_at_submission() {
        let mut c = oracle();
        let k = AdmissionConf { node_kinds: oracle_kinds(&c), ..conf() };
        let debug = c.partition_id("debug").unwrap();
        let generic = (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, true, vec![]);
        let not_avail = (ESLURM_PARTITION_NOT_AVAIL, false, vec![]);
        for (state, one, three) in [
            (PartitionState::Up, (0, false, vec![]), (0, false, vec![])),
            (PartitionState::Down, (0, false, vec![]), generic.clone()),
            (PartitionState::Drain, not_avail.clone(), not_avail.clone()),
            (PartitionState::Inactive, not_avail.clone(), not_avail.clone()),
        ] {
            c.partitions[debug.0 as usize].state = state;
            let sub = |nodes: u32| {
                let mut r = wrap();
                (r.partition, r.nodes_min, r.time_limit) = (Some("debug".into()), Some(nodes), Some(TimeLimitWire::Minutes(5)));
                code(admit(&r, &c, &k, 0))
            };
            assert_eq!((sub(1), sub(3)), (one, three), "{state:?}");
        }
    }

    /// Slurm's node-configuration test and its messages, as the reference answers them
    /// (goldens-extra 0157, 0159).
    #[test]
    fn node_configuration_test_at_submission() {
        let c = oracle();
        let k = AdmissionConf { node_kinds: oracle_kinds(&c), ..conf() };
        let msg = |f: &dyn Fn(&mut SubmitJob)| {
            let mut r = wrap();
            f(&mut r);
            code(admit(&r, &c, &k, 0))
        };
        let refused = |m: &str| (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, true, vec![m.to_string()]);
        let cpu = refused("CPU count per node can not be satisfied");
        let mem = refused("Memory specification can not be satisfied");
        let disk = refused("Temporary disk specification can not be satisfied");
        let sct = refused("Socket, core and/or thread specification can not be satisfied");
        assert_eq!(msg(&|r| r.node_shape.min_cpus = 65), cpu);
        // Tasks that do not fit the nodes asked for: no message (goldens-extra 0176 `-N1 -n 65`);
        // a node's own minimum over its CPUs: the message (`--ntasks-per-node=65`).
        let generic = (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, true, vec![]);
        assert_eq!(msg(&|r| (r.nodes_min, r.ntasks) = (Some(1), Some(65))), generic);
        assert_eq!(msg(&|r| (r.nodes_min, r.ntasks, r.cpus_per_task) = (Some(1), Some(33), Some(2))), generic);
        assert_eq!(msg(&|r| (r.ntasks_per_node, r.ntasks) = (Some(65), Some(65))), cpu);
        assert_eq!(msg(&|r| (r.nodes_min, r.ntasks_per_node, r.cpus_per_task) = (Some(1), Some(33), Some(2))), cpu);
        // More tasks than --ntasks-per-node on the most nodes the job may take: no message
        // (goldens-extra 0436 `-N 2 -n 10 --ntasks-per-node=4`); a range's maximum counts.
        assert_eq!(msg(&|r| (r.nodes_min, r.ntasks, r.ntasks_per_node) = (Some(2), Some(10), Some(4))), generic);
        assert_eq!(msg(&|r| (r.nodes_min, r.ntasks, r.ntasks_per_node) = (Some(3), Some(10), Some(4))), (0, false, vec![]));
        assert_eq!(msg(&|r| (r.nodes_min, r.nodes_max, r.ntasks, r.ntasks_per_node) = (Some(2), Some(4), Some(10), Some(4))), (0, false, vec![]));
        assert_eq!(msg(&|r| (r.ntasks, r.ntasks_per_node) = (Some(10), Some(4))), (0, false, vec![]));
        assert_eq!(msg(&|r| r.node_shape.min_cpus = 64), (0, false, vec![]));
        assert_eq!(msg(&|r| r.sockets_per_node = Some(3)), sct);
        assert_eq!(msg(&|r| r.node_shape.cores_per_socket = 33), sct);
        assert_eq!(msg(&|r| r.node_shape.threads_per_core = 2), sct);
        assert_eq!(msg(&|r| r.node_shape.tmp_disk_mib = 1), disk);
        // In `_set_err_msg`'s order: CPUs, memory, disk, then sockets/cores/threads.
        assert_eq!(
            msg(&|r| {
                r.node_shape.min_cpus = 65;
                r.mem_per_node_mib = Some(600_000);
            }),
            cpu
        );
        assert_eq!(
            msg(&|r| {
                r.sockets_per_node = Some(3);
                r.node_shape.tmp_disk_mib = 5;
            }),
            disk
        );
        assert_eq!(
            msg(&|r| {
                r.mem_per_node_mib = Some(600_000);
                r.node_shape.tmp_disk_mib = 5;
            }),
            mem
        );
        // `--ntasks-per-core` counts the cores that many times over (`adjust_cpus_nppcu`).
        assert_eq!(
            msg(&|r| {
                r.node_shape.ntasks_per_core = 2;
                r.node_shape.min_cpus = 129;
            }),
            cpu
        );
        // Held: not tested at all, as `select_nodes` returns before `_build_node_list`.
        for f in [
            &(|r: &mut SubmitJob| r.node_shape.min_cpus = 65) as &dyn Fn(&mut SubmitJob),
            &|r| r.sockets_per_node = Some(3),
            &|r| r.mem_per_node_mib = Some(600_000),
            &|r| r.gres = gres(None, "gpu", 9),
            &|r| r.gres = gres(Some("a100"), "gpu", 1),
        ] {
            assert_eq!(
                msg(&|r| {
                    r.hold = true;
                    f(r)
                }),
                (0, false, vec![])
            );
        }
        // A kind whose nodes are all excluded is not looked at; with `TmpDisk=` on a node
        // outside the partition the partition's nodes still fail.
        let mut kinds = oracle_kinds(&c);
        kinds.push(NodeKind { nodes: vec![NodeId(3)], partitions: vec![PartId(0)], hw: NodeHardware { tmp_disk_mib: 100, ..kinds[0].hw } });
        kinds[0].nodes.truncate(3);
        let want = PerNode { tmp_disk_mib: 50, min_cpus: 1, cpus_per_task: 1, ..Default::default() };
        assert_eq!(node_config_test(&want, &kinds, PartId(0), &|_| true), Ok(()));
        assert_eq!(node_config_test(&want, &kinds, PartId(1), &|_| true), Err("Temporary disk specification can not be satisfied"));
        assert_eq!(node_config_test(&want, &kinds, PartId(0), &|n| n != NodeId(3)), Err("Temporary disk specification can not be satisfied"));
    }

    /// `--mincpus` above the tasks' CPUs takes that many CPUs per node, in whole `-c` units
    /// (the reference: `--mincpus=4` 4 CPUs, `--mincpus=7 -c 2` 6, `--mincpus=9 -n 2 -c 2` 8).
    #[test]
    fn mincpus_takes_cpus_in_whole_tasks() {
        let c = oracle();
        let k = conf();
        for (mincpus, cpt, ntasks, want) in [(4, None, None, 4), (7, Some(2), None, 6), (9, Some(2), Some(2), 8), (3, Some(2), None, 2), (0, Some(3), Some(2), 6)] {
            let mut r = wrap();
            r.node_shape.min_cpus = mincpus;
            r.cpus_per_task = cpt;
            r.ntasks = ntasks;
            let (_, cpus, _, _) = build_request(&r, &c, PartId(0), &k).unwrap();
            assert_eq!(cpus, want, "--mincpus={mincpus} -c {cpt:?} -n {ntasks:?}");
        }
    }

    #[test]
    fn goldens_0064_to_0081() {
        let c = oracle();
        let k = conf();
        let mut r = wrap();
        r.partition = Some("nosuch".into());
        assert_eq!(
            code(admit(&r, &c, &k, 0)),
            (ESLURM_INVALID_PARTITION_NAME, false, vec!["invalid partition specified: nosuch".into()])
        );
        let mut r = wrap();
        r.gres = gres(None, "gpu", 9);
        assert_eq!(code(admit(&r, &c, &k, 0)), (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, true, vec![]));
        let mut r = wrap();
        r.gres = gres(Some("a100"), "gpu", 1);
        assert_eq!(code(admit(&r, &c, &k, 0)), (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, true, vec![]));
        let mut r = wrap();
        r.gres = gres(None, "fpga", 1);
        assert_eq!(code(admit(&r, &c, &k, 0)).0, ESLURM_INVALID_GRES);
        let mut r = wrap();
        r.nodes_min = Some(5);
        assert_eq!(code(admit(&r, &c, &k, 0)).0, 0, "-N 5 is accepted and pends");
        let mut r = wrap();
        r.mem_per_node_mib = Some(600 * 1024);
        assert_eq!(
            code(admit(&r, &c, &k, 0)),
            (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, true, vec!["Memory specification can not be satisfied".into()])
        );
        let mut r = wrap();
        r.cpus_per_task = Some(65);
        assert_eq!(
            code(admit(&r, &c, &k, 0)),
            (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, true, vec!["CPU count per node can not be satisfied".into()])
        );
        let mut r = wrap();
        r.time_limit = Some(TimeLimitWire::Minutes(3 * 24 * 60));
        assert_eq!(code(admit(&r, &c, &k, 0)).0, 0, "over MaxTime is accepted (EnforcePartLimits=NO)");
        let arr = |s, e, m| ArraySpec {
            ranges: vec![ArrayRange { start: s, end: e, step: 1 }],
            max_running: m,
        };
        let mut r = wrap();
        r.array = Some(arr(5, 1, None));
        assert_eq!(code(admit(&r, &c, &k, 0)), (ESLURM_INVALID_ARRAY, false, vec![]));
        r.array = Some(arr(0, 20000, None));
        assert_eq!(code(admit(&r, &c, &k, 0)), (ESLURM_INVALID_ARRAY, false, vec![]));
        r.array = Some(arr(0, 5, Some(2)));
        let a = admit(&r, &c, &k, 0).unwrap();
        assert_eq!(a.array, Some(((0..=5).collect(), Some(2))));
        let mut r = wrap();
        r.dependency = Some("foo:1".into());
        assert_eq!(code(admit(&r, &c, &k, 0)), (ESLURM_DEPENDENCY, true, vec![]));
        r.dependency = Some("afterok:999999".into());
        assert_eq!(code(admit(&r, &c, &k, 0)).0, 0);
        let mut r = wrap();
        r.gpus = Some(GpuCount {
            gpu_type: Some("abc".into()),
            count: 1,
        });
        assert_eq!(code(admit(&r, &c, &k, 0)), (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, true, vec![]));
    }

    #[test]
    fn default_account_without_dash_a() {
        let (c, k) = (oracle(), conf());
        let a = admit(&wrap(), &c, &k, 0).unwrap();
        assert_eq!((a.record.account.as_str(), a.record.spec.account.as_str()), ("research", "research"));
        let mut r = wrap();
        r.account = Some("other".into());
        assert_eq!(admit(&r, &c, &k, 0).unwrap().record.account, "other", "-A wins");
        let mut r = wrap();
        r.user = "bob".into();
        assert_eq!(admit(&r, &c, &k, 0).unwrap().record.account, "", "no association: no account");
    }

    #[test]
    fn tres_per_job_node_task_as_asked() {
        let (c, k) = (oracle(), conf());
        let mut r = wrap();
        r.gpus = Some(GpuCount { gpu_type: None, count: 4 });
        let a = admit(&r, &c, &k, 0).unwrap().record;
        assert_eq!((a.tres_per_job.as_deref(), a.tres_per_task.as_deref()), (Some("gres:gpu:4"), None));
        let mut r = wrap();
        r.nodes_min = Some(2);
        r.gpus_per_node = Some(GpuCount { gpu_type: Some("h100".into()), count: 2 });
        let a = admit(&r, &c, &k, 0).unwrap().record;
        assert_eq!(a.gres, vec![("gpu".to_string(), Some("h100".to_string()), 2)], "--gpus-per-node is GRES per node");
        let mut r = wrap();
        r.ntasks = Some(4);
        r.gpus_per_task = Some(GpuCount { gpu_type: None, count: 1 });
        let a = admit(&r, &c, &k, 0).unwrap().record;
        assert_eq!((a.tres_per_job, a.tres_per_task.as_deref()), (None, Some("gres:gpu:1")));
        assert!(a.gres.is_empty());
    }

    /// `-n` alone over one node's CPUs is spread over as many nodes as the tasks need, as
    /// Slurm does (goldens-extra 0434); a task wider than a node stays refused.
    #[test]
    fn task_count_alone_spreads_over_nodes() {
        assert_eq!(tasks_nodes(Some(64), None, 1, 64_000), None);
        assert_eq!(tasks_nodes(Some(100), None, 1, 64_000), Some(2));
        assert_eq!(tasks_nodes(Some(3), None, 40, 64_000), Some(3));
        assert_eq!(tasks_nodes(Some(200), None, 1, 64_000), Some(4));
        assert_eq!(tasks_nodes(Some(100), Some(50), 1, 64_000), Some(2));
        assert_eq!(tasks_nodes(Some(10), Some(4), 1, 64_000), Some(3));
        assert_eq!(tasks_nodes(Some(10), Some(4), 2, 64_000), Some(3), "--ntasks-per-node counts tasks, not CPUs");
        assert_eq!(tasks_nodes(Some(3), Some(4), 1, 64_000), None);
        assert_eq!(tasks_nodes(Some(8), Some(4), 1, 64_000), Some(2));
        assert_eq!(tasks_nodes(Some(2), None, 65, 64_000), None);
        assert_eq!(tasks_nodes(None, None, 1, 64_000), None);
        let c = oracle();
        let k = AdmissionConf { node_kinds: oracle_kinds(&c), ..conf() };
        let mut r = wrap();
        r.ntasks = Some(100);
        let a = admit(&r, &c, &k, 100).unwrap();
        assert_eq!((a.record.spec.request.nodes, a.record.spec.request.cpu_milli_per_node), (Some(2), 50_000));
        r.cpus_per_task = Some(65);
        assert_eq!(
            code(admit(&r, &c, &k, 0)),
            (ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, true, vec!["CPU count per node can not be satisfied".into()])
        );
        // Above the partition's node count (debug: 2 nodes) it is accepted and waits, as `-N 4`.
        let mut r = wrap();
        r.ntasks = Some(200);
        r.partition = Some("debug".into());
        let a = admit(&r, &c, &k, 100).unwrap();
        assert_eq!(a.record.spec.request.nodes, Some(4));
    }

    #[test]
    fn conversions() {
        let c = oracle();
        let k = conf();
        let mut r = wrap();
        r.nodes_min = Some(2);
        r.gres = gres(None, "gpu", 8);
        let a = admit(&r, &c, &k, 100).unwrap();
        assert_eq!(a.record.spec.request.nodes, Some(2));
        assert_eq!(a.record.spec.request.gpus_per_node, Some(8));
        assert_eq!(a.record.spec.request.gpus, 16);
        assert_eq!(a.record.time_limit_min, Some(60), "partition DefaultTime");
        assert_eq!(a.record.spec.request.mem_mib_per_node, 1024, "DefMemPerCPU x 1 CPU");
        let mut r = wrap();
        r.gres = gres(Some("h100"), "gpu", 4);
        r.cpus_per_task = Some(4);
        r.topology = Some("node".into());
        let a = admit(&r, &c, &k, 100).unwrap();
        assert_eq!(a.record.spec.request.gpu_types, vec!["h100".to_string()]);
        assert_eq!(a.record.spec.request.cpu_milli_per_node, 4000);
        assert_eq!(a.record.spec.request.mem_mib_per_node, 4096);
        assert_eq!(a.record.spec.request.topology, TopologyKind::Node);
        let mut r = wrap();
        r.gpus = Some(GpuCount { gpu_type: None, count: 12 });
        let a = admit(&r, &c, &k, 100).unwrap();
        assert_eq!((a.record.spec.request.gpus, a.record.spec.request.nodes), (12, None));
        let mut r = wrap();
        r.hold = true;
        r.time_limit = Some(TimeLimitWire::Unlimited);
        let a = admit(&r, &c, &k, 100).unwrap();
        assert_eq!(a.record.spec.held, Some(HoldKind::User));
        assert_eq!(a.record.spec.time_limit_s, None);
    }
}
