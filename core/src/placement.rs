//! Placement over topology sets, behind an extension point modelled on the Kubernetes
//! scheduling framework: the engine here *filters* nodes (partition, state, GPU model, CPUs,
//! memory, reservations, required and excluded nodes), a [`PlacementPolicy`] *scores* them
//! and chooses GPUs inside a node, and the engine assembles a gang all-or-nothing (the
//! *permit* step): a job gets every per-node part or none.
//!
//! Shapes (DESIGN.md §2):
//! - `node`: all GPUs inside one node; a multiple of the node size takes that many whole nodes
//!   (each node-sized group inside one NVLink domain); anything else larger than a node cannot
//!   be placed with `node` (admission rejects it).
//! - `pod`: all nodes inside one pod; the tightest pod that fits, whole nodes first.
//! - `any`: whole nodes first for the node-multiple part, then best-fit for the rest, else
//!   spread over the nodes with most free GPUs (fewest nodes).
//!
//! A job whose GPU count is a multiple of the node size always takes whole nodes.

use crate::cluster::{Cluster, GpuMask, Node, NodeAlloc, NodeId, PartId, PodId, Time, MILLI};
use crate::config::TopologyKind;
use crate::job::Request;
use std::fmt;

/// One node's share of a request: what a single node must provide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDemand<'a> {
    /// Whole GPUs wanted on the node (1 for a share).
    pub gpus: u32,
    /// Milli-GPUs per GPU (1000 = whole).
    pub gpu_milli: u32,
    /// CPUs wanted on the node, in milli-CPUs (1000 = one CPU).
    pub cpu_milli: u64,
    /// Memory wanted on the node, in MiB.
    pub mem_mib: u64,
    /// Allowed GPU models (empty = any).
    pub gpu_types: &'a [String],
    /// The node must be otherwise empty and is taken whole.
    pub whole_node: bool,
}

/// A node's score for a request (higher is better). 128 bits so that policies can pack many
/// lexicographic keys into one number.
pub type Score = i128;

/// The order in which the engine offers candidate nodes to a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateOrder {
    /// Fewest available GPUs first (best-fit index); a policy may stop at its perfect score.
    FewestFreeFirst,
    /// Most available GPUs first (worst-fit).
    MostFreeFirst,
    /// Node id order (first-fit).
    NodeOrder,
}

/// Read-only view a policy scores against.
#[derive(Clone, Copy)]
pub struct PlaceCtx<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// GPUs of a node this request may not use (held by reservations ranked above it).
    pub blocked: &'a dyn Fn(NodeId) -> GpuMask,
    /// Per-node rank used to break score ties (a seeded permutation in the simulator);
    /// `None` = node id order.
    pub tie_rank: Option<&'a [u32]>,
    /// Partition the job runs in.
    pub partition: PartId,
    /// When the job being placed ends by its time limit (s); `None` = unknown or unlimited.
    pub job_end: Option<Time>,
    /// Per node, when its current allocations end by their time limits (s; 0 = idle,
    /// `u64::MAX` = an allocation without limit); `None` when the driver has no times.
    pub busy_until: Option<&'a [Time]>,
}

impl fmt::Debug for PlaceCtx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlaceCtx").field("partition", &self.partition).finish()
    }
}

impl PlaceCtx<'_> {
    /// True when placing the job on `node` would make the node busy for longer than its
    /// current allocations do (lifetime alignment); false when times are unknown.
    pub fn extends_busy(&self, node: NodeId) -> bool {
        match (self.busy_until, self.job_end) {
            (Some(b), Some(end)) => end > b[node.0 as usize],
            (Some(b), None) => b[node.0 as usize] != Time::MAX,
            _ => false,
        }
    }

    /// GPUs of `node` wholly free and usable by this request.
    pub fn avail(&self, node: NodeId) -> GpuMask {
        self.cluster.node(node).free_gpus.minus((self.blocked)(node))
    }
}

/// A placement policy: scores feasible nodes and picks GPUs inside a node. Pure.
pub trait PlacementPolicy: fmt::Debug + Send + Sync {
    /// Registered name (`SelectType=` value or `flotilla sim --policy`).
    fn name(&self) -> &str;

    /// In which order the engine offers candidates.
    fn order(&self) -> CandidateOrder {
        CandidateOrder::FewestFreeFirst
    }

    /// Score of a feasible node for `demand` (higher is better). `avail` is the node's usable
    /// wholly free GPUs.
    fn score(&self, ctx: &PlaceCtx<'_>, node: NodeId, avail: GpuMask, demand: &NodeDemand<'_>) -> Score;

    /// A score no node can beat: the engine stops at the first node reaching it.
    fn perfect_score(&self) -> Option<Score> {
        None
    }

    /// True when scoring changes the policy's own state (a random generator advanced by every
    /// draw). The scheduler's incremental cycle then runs every placement search, as the full
    /// scan does: a search it skipped would change every later draw.
    fn is_stateful(&self) -> bool {
        false
    }

    /// Chooses `n` whole GPUs among `avail` on `node`: aligned blocks on a node whose GPUs
    /// are linked unevenly ([`Node::gpu_links`]), else the lowest free indices, as Slurm.
    fn pick_gpus(&self, node: &Node, avail: GpuMask, n: u32) -> Option<GpuMask> {
        if node.gpu_links {
            avail.choose(n, node.gpus)
        } else {
            avail.lowest(n)
        }
    }

    /// Chooses the GPU for a fractional share of `milli`: by default the tightest GPU that
    /// still fits (most used), lowest index on ties.
    fn pick_share_gpu(&self, node: &Node, blocked: GpuMask, milli: u32) -> Option<u32> {
        (0..node.gpus)
            .filter(|&g| !blocked.contains(g) && node.gpu_milli_used[g as usize] + milli <= MILLI)
            .max_by_key(|&g| (node.gpu_milli_used[g as usize], std::cmp::Reverse(g)))
    }

    /// Chooses the GPU for the fractional share of `demand` (`demand.gpu_milli` < 1000) on
    /// `node`, seeing the whole per-node demand (CPUs, memory) for policies whose choice
    /// depends on it (FGD). By default [`PlacementPolicy::pick_share_gpu`].
    fn pick_share_gpu_for(&self, node: &Node, blocked: GpuMask, demand: &NodeDemand<'_>) -> Option<u32> {
        self.pick_share_gpu(node, blocked, demand.gpu_milli)
    }
}

/// Why a request cannot be placed now (the topology detail shown next to Slurm's reason).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoFit {
    /// Human-readable detail, e.g. `needs 2 whole nodes in one pod; largest_placeable pod=12`.
    pub detail: String,
}

/// Largest requests of each topology that could start now (DESIGN.md §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct LargestPlaceable {
    /// Most usable whole GPUs on one node.
    pub node: u32,
    /// Largest GPU request that fits inside one pod.
    pub pod: u32,
    /// Largest GPU request that fits anywhere.
    pub any: u32,
}

impl fmt::Display for LargestPlaceable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node={},pod={},any={}", self.node, self.pod, self.any)
    }
}

/// Computes [`LargestPlaceable`] over schedulable nodes with at least one free CPU, skipping
/// GPUs in `blocked` and leaving out every node for which it is `None` (outside the partition
/// asked about, in the swap pool): such a node counts for nothing, not even for the node size.
/// A request that is a multiple of the node size needs whole nodes, so the pod and `any`
/// figures are the largest N that really fits: the free total F, or F − 1 when F is a node
/// multiple that the whole free nodes cannot hold. O(nodes).
pub fn largest_placeable(cluster: &Cluster, blocked: &dyn Fn(NodeId) -> Option<GpuMask>) -> LargestPlaceable {
    largest_placeable_reclaiming(cluster, &|n| blocked(n).map(|b| (b, Reclaimed::default())))
}

/// What a node would get back if some of its allocations were released (the grown parts of
/// elastic jobs: [`crate::sched::Scheduler::reclaimable_in`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reclaimed {
    /// Whole GPUs the released allocations hold.
    pub gpus: GpuMask,
    /// Milli-CPUs they hold.
    pub cpu_milli: u64,
}

/// [`largest_placeable`] as it would be if each node got back what `view` says besides its
/// free GPUs and CPUs: `view` gives a node's blocked GPUs and what it would get back, `None`
/// leaving the node out. Blocked GPUs stay out even when reclaimed. O(nodes).
pub fn largest_placeable_reclaiming(cluster: &Cluster, view: &dyn Fn(NodeId) -> Option<(GpuMask, Reclaimed)>) -> LargestPlaceable {
    let mut lp = LargestPlaceable::default();
    let mut pod_free = vec![0u32; cluster.pods.len()];
    let mut pod_whole = vec![0u32; cluster.pods.len()];
    let mut size = 0u32;
    let (mut all_free, mut all_whole) = (0u32, 0u32);
    for (i, n) in cluster.nodes.iter().enumerate() {
        if !n.avail.schedulable() || n.gpus == 0 {
            continue;
        }
        let Some((blocked, back)) = view(NodeId(i as u32)) else { continue };
        if n.free_cpu_milli + back.cpu_milli == 0 {
            continue;
        }
        size = size.max(n.gpus);
        let free = n.free_gpus.union(back.gpus).minus(blocked).count();
        lp.node = lp.node.max(free);
        pod_free[n.pod.0 as usize] += free;
        all_free += free;
        if free == n.gpus {
            pod_whole[n.pod.0 as usize] += 1;
            all_whole += 1;
        }
    }
    let fit = |f: u32, whole: u32| -> u32 {
        if size == 0 || f % size != 0 || f / size <= whole {
            f
        } else {
            f - 1
        }
    };
    lp.pod = pod_free
        .iter()
        .zip(&pod_whole)
        .map(|(&f, &w)| fit(f, w))
        .max()
        .unwrap_or(0);
    lp.any = fit(all_free, all_whole);
    lp
}

fn node_feasible(ctx: &PlaceCtx<'_>, req: &Request, id: NodeId, d: &NodeDemand<'_>) -> Option<GpuMask> {
    let n = ctx.cluster.node(id);
    if !n.avail.schedulable() || !n.partitions.contains(&ctx.partition) {
        return None;
    }
    if req.excluded_nodes.contains(&id) || !req.features_ok(&n.features) {
        return None;
    }
    if !req.required_nodes.is_empty() && !req.required_nodes.contains(&id) {
        return None;
    }
    if n.free_cpu_milli < d.cpu_milli || n.free_mem_mib < d.mem_mib {
        return None;
    }
    if d.gpus > 0 && !n.gpu_type_ok(d.gpu_types) {
        return None;
    }
    // Sub-node pools take sub-node shapes only: nothing of more than half a node.
    if n.sub_node_pool && n.gpus > 0 && (d.whole_node || d.gpus * 2 > n.gpus) {
        return None;
    }
    let blocked = (ctx.blocked)(id);
    let avail = n.free_gpus.minus(blocked);
    if d.whole_node {
        if avail.count() != n.gpus || !n.is_idle() {
            return None;
        }
        return Some(avail);
    }
    if d.gpu_milli < MILLI {
        // A share: some GPU must have room.
        let ok = (0..n.gpus).any(|g| !blocked.contains(g) && n.gpu_milli_used[g as usize] + d.gpu_milli <= MILLI);
        return ok.then_some(avail);
    }
    (avail.count() >= d.gpus).then_some(avail)
}

/// Best feasible node for one node's demand, among `candidates` (all nodes when `None`).
fn best_node(
    ctx: &PlaceCtx<'_>,
    policy: &dyn PlacementPolicy,
    req: &Request,
    d: &NodeDemand<'_>,
    skip: &dyn Fn(NodeId) -> bool,
) -> Option<NodeId> {
    let perfect = policy.perfect_score();
    let mut best: Option<(Score, u32, NodeId)> = None;
    let mut consider = |id: NodeId| -> bool {
        if skip(id) {
            return false;
        }
        let Some(avail) = node_feasible(ctx, req, id, d) else {
            return false;
        };
        let s = policy.score(ctx, id, avail, d);
        let tie = ctx.tie_rank.map_or(id.0, |r| r[id.0 as usize]);
        let better = match best {
            None => true,
            Some((bs, bt, _)) => s > bs || (s == bs && tie < bt),
        };
        if better {
            best = Some((s, tie, id));
        }
        perfect.is_some_and(|p| s >= p)
    };
    let min_free = if d.gpu_milli < MILLI { 0 } else { d.gpus };
    if !req.required_nodes.is_empty() {
        for &id in &req.required_nodes {
            if consider(id) {
                break;
            }
        }
    } else {
        match policy.order() {
            CandidateOrder::FewestFreeFirst => {
                for id in ctx.cluster.nodes_by_free(min_free) {
                    if consider(id) {
                        break;
                    }
                }
            }
            CandidateOrder::MostFreeFirst => {
                for id in ctx.cluster.nodes_by_free_desc(min_free) {
                    if consider(id) {
                        break;
                    }
                }
            }
            CandidateOrder::NodeOrder => {
                for &id in &ctx.cluster.partitions[ctx.partition.0 as usize].nodes {
                    if consider(id) {
                        break;
                    }
                }
            }
        }
    }
    best.map(|(_, _, id)| id)
}

fn alloc_on(
    ctx: &PlaceCtx<'_>,
    policy: &dyn PlacementPolicy,
    id: NodeId,
    d: &NodeDemand<'_>,
) -> Option<NodeAlloc> {
    let n = ctx.cluster.node(id);
    let blocked = (ctx.blocked)(id);
    let (gpus, gpu_milli, cpu, mem) = if d.whole_node {
        (GpuMask::all(n.gpus), MILLI, n.cpu_milli, n.mem_mib)
    } else if d.gpu_milli < MILLI && d.gpus > 0 {
        let g = policy.pick_share_gpu_for(n, blocked, d)?;
        (GpuMask::single(g), d.gpu_milli, d.cpu_milli, d.mem_mib)
    } else {
        let avail = n.free_gpus.minus(blocked);
        (policy.pick_gpus(n, avail, d.gpus)?, MILLI, d.cpu_milli, d.mem_mib)
    };
    Some(NodeAlloc {
        node: id,
        gpus,
        gpu_milli,
        cpu_milli: cpu,
        mem_mib: mem,
    })
}

/// The node size used for whole-node rules: the most GPUs on a node of the partition.
pub fn node_size(cluster: &Cluster, part: PartId) -> u32 {
    cluster.node_size(part)
}

/// How a request breaks down into per-node parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `count` nodes, each with `gpus_each` GPUs (whole nodes when `whole`).
    Uniform { count: u32, gpus_each: u32, whole: bool },
    /// `whole` whole nodes plus `rest` GPUs wherever they fit (spread allowed when `spread`).
    WholePlusRest { whole: u32, rest: u32, spread: bool },
}

pub(crate) fn shape_of(req: &Request, size: u32) -> Result<Shape, String> {
    if req.exclusive {
        let count = req
            .nodes
            .unwrap_or(if size == 0 { 1 } else { req.gpus.div_ceil(size).max(1) });
        return Ok(Shape::Uniform { count, gpus_each: size, whole: true });
    }
    if let Some(gpn) = req.gpus_per_node {
        let count = req
            .nodes
            .unwrap_or(if gpn == 0 { 1 } else { req.gpus.div_ceil(gpn).max(1) });
        let whole = gpn == size && size > 0;
        return Ok(Shape::Uniform { count, gpus_each: gpn, whole });
    }
    if req.gpus == 0 {
        return Ok(Shape::Uniform { count: req.nodes.unwrap_or(1), gpus_each: 0, whole: false });
    }
    if size > 0 && req.gpus % size == 0 && !req.is_share() {
        return Ok(Shape::Uniform { count: req.gpus / size, gpus_each: size, whole: true });
    }
    if let Some(nodes) = req.nodes {
        if nodes > 1 {
            let each = req.gpus.div_ceil(nodes);
            return Ok(Shape::Uniform { count: nodes, gpus_each: each, whole: false });
        }
    }
    match req.topology {
        TopologyKind::Node => {
            if req.gpus > size {
                Err(format!("{} GPUs with topology node need a multiple of {size}", req.gpus))
            } else {
                Ok(Shape::Uniform { count: 1, gpus_each: req.gpus, whole: false })
            }
        }
        TopologyKind::Pod | TopologyKind::Any => {
            let whole = req.gpus.checked_div(size).unwrap_or(0);
            Ok(Shape::WholePlusRest { whole, rest: req.gpus - whole * size, spread: true })
        }
    }
}

/// Places `req` in partition `ctx.partition` with `policy`: all per-node parts or none.
/// Nothing is taken from the cluster; the caller commits the result with [`Cluster::take`].
///
/// Errors: [`NoFit`] with the topology detail when no placement exists now.
pub fn place(ctx: &PlaceCtx<'_>, policy: &dyn PlacementPolicy, req: &Request) -> Result<Vec<NodeAlloc>, NoFit> {
    let size = node_size(ctx.cluster, ctx.partition);
    let shape = shape_of(req, size).map_err(|detail| NoFit { detail })?;
    let pods: Vec<Option<PodId>> = match req.topology {
        TopologyKind::Pod => pod_order(ctx, req, &shape, size),
        _ => vec![None],
    };
    for pod in &pods {
        if let Some(parts) = place_in(ctx, policy, req, &shape, size, *pod) {
            return Ok(parts);
        }
    }
    Err(NoFit {
        detail: describe_shape(req, &shape, size),
    })
}

/// [`place`] for a node range (`-N MIN-MAX`: [`Request::nodes_max`] above `nodes`): the
/// placement on the most nodes up to the maximum that fit now, never fewer than the minimum.
/// Slurm 22.05's select/cons_tres grows a selection that meets `min_nodes` toward
/// `max_nodes` while nodes have room (`job_test.c` `_eval_nodes`; on the reference `-N2-5`
/// runs on all 4 idle nodes, on 3 with the fourth held: goldens-extra 0166, 0171–0173).
/// More nodes are never easier to place than fewer, so the count is found by bisection:
/// at most ⌈log2(MAX−MIN+1)⌉ placements beyond [`place`]'s, and only for a range that fits.
/// Where a placement policy breaks that order, a smaller count than possible is taken,
/// never an invalid one. Errors: [`place`]'s at the minimum.
pub fn place_range(ctx: &PlaceCtx<'_>, policy: &dyn PlacementPolicy, req: &Request) -> Result<Vec<NodeAlloc>, NoFit> {
    let at_min = place(ctx, policy, req)?;
    let (Some(min), Some(max)) = (req.nodes, req.nodes_max) else { return Ok(at_min) };
    let (mut lo, mut hi, mut best) = (min, max, at_min);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        match place(ctx, policy, &with_nodes(req, mid)) {
            Ok(p) => (lo, best) = (mid, p),
            Err(_) => hi = mid - 1,
        }
    }
    Ok(best)
}

/// `req` on exactly `n` nodes, its GPUs per node taken on each.
fn with_nodes(req: &Request, n: u32) -> Request {
    let mut r = req.clone();
    r.nodes = Some(n);
    r.nodes_max = None;
    if let Some(g) = r.gpus_per_node {
        r.gpus = g.saturating_mul(n);
    }
    r
}

fn describe_shape(req: &Request, shape: &Shape, size: u32) -> String {
    let scope = match req.topology {
        TopologyKind::Pod => " in one pod",
        _ => "",
    };
    match *shape {
        Shape::Uniform { count, whole: true, .. } => {
            format!("needs {count} whole node{}{scope}", if count == 1 { "" } else { "s" })
        }
        Shape::Uniform { count: 1, gpus_each, .. } => {
            if req.is_share() {
                format!("needs {} milli-GPU on one GPU", req.gpu_milli)
            } else {
                format!("needs {gpus_each} GPUs on one node")
            }
        }
        Shape::Uniform { count, gpus_each, .. } => {
            format!("needs {count} nodes with {gpus_each} GPUs each{scope}")
        }
        Shape::WholePlusRest { whole, rest, .. } => {
            format!("needs {} GPUs ({whole} whole nodes of {size} + {rest}){scope}", req.gpus)
        }
    }
}

/// Pods in the order to try: tightest pod whose usable GPUs can hold the request first.
fn pod_order(ctx: &PlaceCtx<'_>, req: &Request, shape: &Shape, _size: u32) -> Vec<Option<PodId>> {
    let cluster = ctx.cluster;
    let part = &cluster.partitions[ctx.partition.0 as usize];
    let mut free = vec![0u32; cluster.pods.len()];
    let mut whole = vec![0u32; cluster.pods.len()];
    for &id in &part.nodes {
        let n = cluster.node(id);
        if !n.avail.schedulable() {
            continue;
        }
        let a = ctx.avail(id).count();
        free[n.pod.0 as usize] += a;
        if a == n.gpus && n.is_idle() {
            whole[n.pod.0 as usize] += 1;
        }
    }
    let need_whole = match *shape {
        Shape::Uniform { count, whole: true, .. } => count,
        Shape::WholePlusRest { whole, .. } => whole,
        _ => 0,
    };
    // Tightest pod first; among equals, the pod whose nodes serve fewer partitions (it is
    // the least contended), then pod order.
    let shared = |p: u32| -> usize {
        cluster.pods[p as usize].nodes.iter().map(|&n| cluster.node(n).partitions.len()).sum()
    };
    let mut pods: Vec<(u32, usize, u32)> = (0..cluster.pods.len() as u32)
        .filter(|&p| free[p as usize] >= req.gpus && whole[p as usize] >= need_whole)
        .map(|p| (free[p as usize], shared(p), p))
        .collect();
    pods.sort_unstable();
    pods.into_iter().map(|(_, _, p)| Some(PodId(p))).collect()
}

fn place_in(
    ctx: &PlaceCtx<'_>,
    policy: &dyn PlacementPolicy,
    req: &Request,
    shape: &Shape,
    size: u32,
    pod: Option<PodId>,
) -> Option<Vec<NodeAlloc>> {
    let mut parts: Vec<NodeAlloc> = Vec::new();
    let in_pod = |id: NodeId| pod.is_some_and(|p| ctx.cluster.node(id).pod != p);
    match *shape {
        Shape::Uniform { count, gpus_each, whole } => {
            if whole {
                return whole_nodes(ctx, policy, req, count, pod, size).map(|ids| {
                    ids.into_iter()
                        .map(|id| whole_alloc(ctx.cluster, id, req))
                        .collect()
                });
            }
            let d = NodeDemand {
                gpus: gpus_each,
                gpu_milli: if gpus_each == 0 { MILLI } else { req.gpu_milli },
                cpu_milli: req.cpu_milli_per_node,
                mem_mib: req.mem_mib_per_node,
                gpu_types: &req.gpu_types,
                whole_node: whole && req.exclusive,
            };
            for _ in 0..count {
                let used: Vec<NodeId> = parts.iter().map(|p| p.node).collect();
                let skip = |id: NodeId| in_pod(id) || used.contains(&id);
                let id = best_node(ctx, policy, req, &d, &skip)?;
                parts.push(alloc_on(ctx, policy, id, &d)?);
            }
            Some(parts)
        }
        Shape::WholePlusRest { whole, rest, spread } => {
            if whole > 0 {
                let ids = whole_nodes(ctx, policy, req, whole, pod, size)?;
                parts.extend(ids.into_iter().map(|id| whole_alloc(ctx.cluster, id, req)));
            }
            if rest == 0 {
                return Some(parts);
            }
            let used: Vec<NodeId> = parts.iter().map(|p| p.node).collect();
            let skip = |id: NodeId| in_pod(id) || used.contains(&id);
            let d = NodeDemand {
                gpus: rest,
                gpu_milli: req.gpu_milli,
                cpu_milli: req.cpu_milli_per_node,
                mem_mib: req.mem_mib_per_node,
                gpu_types: &req.gpu_types,
                whole_node: false,
            };
            if let Some(id) = best_node(ctx, policy, req, &d, &skip) {
                parts.push(alloc_on(ctx, policy, id, &d)?);
                return Some(parts);
            }
            if !spread || req.is_share() {
                return None;
            }
            // Spread the rest over the nodes with most usable GPUs (fewest nodes).
            let mut left = rest;
            let mut used = used;
            while left > 0 {
                let one = NodeDemand { gpus: 1, ..d.clone() };
                let mut cand: Option<(u32, NodeId)> = None;
                for id in ctx.cluster.nodes_by_free_desc(1) {
                    if in_pod(id) || used.contains(&id) {
                        continue;
                    }
                    if let Some(avail) = node_feasible(ctx, req, id, &one) {
                        let c = avail.count().min(left);
                        if cand.is_none_or(|(bc, _)| c > bc) {
                            cand = Some((c, id));
                        }
                        if c == left {
                            break;
                        }
                    }
                }
                let (c, id) = cand?;
                let dn = NodeDemand { gpus: c, ..d.clone() };
                parts.push(alloc_on(ctx, policy, id, &dn)?);
                used.push(id);
                left -= c;
            }
            Some(parts)
        }
    }
}

fn whole_alloc(cluster: &Cluster, id: NodeId, req: &Request) -> NodeAlloc {
    let n = cluster.node(id);
    let (cpu, mem) = if req.exclusive {
        (n.cpu_milli, n.mem_mib)
    } else {
        (req.cpu_milli_per_node, req.mem_mib_per_node)
    };
    NodeAlloc {
        node: id,
        gpus: GpuMask::all(n.gpus),
        gpu_milli: MILLI,
        cpu_milli: cpu,
        mem_mib: mem,
    }
}

/// Picks `count` nodes whose GPUs are all usable, packing them into as few pods as possible:
/// the tightest pod that holds them all, else pods with most whole nodes first. With `pod`
/// given, only that pod. Inside a pod, nodes are taken in the policy's order: highest
/// [`PlacementPolicy::score`] first, then [`PlaceCtx::tie_rank`] (node id without one).
fn whole_nodes(
    ctx: &PlaceCtx<'_>,
    policy: &dyn PlacementPolicy,
    req: &Request,
    count: u32,
    pod: Option<PodId>,
    size: u32,
) -> Option<Vec<NodeId>> {
    let cluster = ctx.cluster;
    let d = NodeDemand {
        gpus: size,
        gpu_milli: MILLI,
        cpu_milli: req.cpu_milli_per_node,
        mem_mib: req.mem_mib_per_node,
        gpu_types: &req.gpu_types,
        whole_node: req.exclusive,
    };
    let mut by_pod: Vec<Vec<(std::cmp::Reverse<Score>, u32, NodeId)>> = vec![Vec::new(); cluster.pods.len()];
    for id in cluster.nodes_by_free(size.max(1)) {
        let n = cluster.node(id);
        if pod.is_some_and(|p| n.pod != p) || n.gpus != size {
            continue;
        }
        if let Some(avail) = node_feasible(ctx, req, id, &d).filter(|a| a.count() == n.gpus) {
            let score = policy.score(ctx, id, avail, &d);
            let tie = ctx.tie_rank.map_or(id.0, |r| r[id.0 as usize]);
            by_pod[n.pod.0 as usize].push((std::cmp::Reverse(score), tie, id));
        }
    }
    for nodes in &mut by_pod {
        nodes.sort_unstable();
    }
    let by_pod: Vec<Vec<NodeId>> = by_pod
        .into_iter()
        .map(|v| v.into_iter().map(|(_, _, id)| id).collect())
        .collect();
    let total: usize = by_pod.iter().map(Vec::len).sum();
    if total < count as usize {
        return None;
    }
    // Tightest single pod that can hold the whole request.
    if let Some(p) = (0..by_pod.len())
        .filter(|&p| by_pod[p].len() >= count as usize)
        .min_by_key(|&p| (by_pod[p].len(), p))
    {
        return Some(by_pod[p][..count as usize].to_vec());
    }
    let mut order: Vec<usize> = (0..by_pod.len()).collect();
    order.sort_by_key(|&p| (std::cmp::Reverse(by_pod[p].len()), p));
    let mut out = Vec::with_capacity(count as usize);
    for p in order {
        for &id in &by_pod[p] {
            if out.len() == count as usize {
                return Some(out);
            }
            out.push(id);
        }
    }
    (out.len() == count as usize).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores a node by its id (higher id first) and picks the highest-index GPU for a share.
    #[derive(Debug)]
    struct ById;

    impl PlacementPolicy for ById {
        fn name(&self) -> &str {
            "by-id"
        }
        fn score(&self, _: &PlaceCtx<'_>, node: NodeId, _: GpuMask, _: &NodeDemand<'_>) -> Score {
            Score::from(node.0)
        }
        fn pick_share_gpu_for(&self, node: &Node, blocked: GpuMask, d: &NodeDemand<'_>) -> Option<u32> {
            (0..node.gpus)
                .rev()
                .find(|&g| !blocked.contains(g) && node.gpu_milli_used[g as usize] + d.gpu_milli <= MILLI)
        }
    }

    fn ctx<'a>(c: &'a Cluster, rank: Option<&'a [u32]>) -> PlaceCtx<'a> {
        PlaceCtx {
            cluster: c,
            blocked: &|_| GpuMask::EMPTY,
            tie_rank: rank,
            partition: PartId(0),
            job_end: None,
            busy_until: None,
        }
    }

    #[test]
    fn whole_nodes_follow_the_policy_score() {
        let c = Cluster::uniform(4, 8, 4, 64, 512_000);
        let p = place(&ctx(&c, None), &ById, &Request::gpus(8, TopologyKind::Node)).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].node, NodeId(3));
        assert_eq!(p[0].gpus, GpuMask::all(8));
    }

    #[test]
    fn whole_node_ties_follow_the_tie_rank() {
        #[derive(Debug)]
        struct Flat;
        impl PlacementPolicy for Flat {
            fn name(&self) -> &str {
                "flat"
            }
            fn score(&self, _: &PlaceCtx<'_>, _: NodeId, _: GpuMask, _: &NodeDemand<'_>) -> Score {
                0
            }
        }
        let c = Cluster::uniform(4, 8, 4, 64, 512_000);
        let rank = [3, 2, 0, 1];
        let p = place(&ctx(&c, Some(&rank)), &Flat, &Request::gpus(16, TopologyKind::Node)).unwrap();
        let nodes: Vec<NodeId> = p.iter().map(|a| a.node).collect();
        assert_eq!(nodes, vec![NodeId(2), NodeId(3)]);
        // Without a rank: node id order.
        let p = place(&ctx(&c, None), &Flat, &Request::gpus(8, TopologyKind::Node)).unwrap();
        assert_eq!(p[0].node, NodeId(0));
    }

    /// `-N MIN-MAX` with `gpus_per_node` (none when 0) on `c`.
    fn range(min: u32, max: u32, gpn: u32) -> Request {
        Request {
            gpus: gpn * min,
            nodes: Some(min),
            nodes_max: Some(max),
            gpus_per_node: (gpn > 0).then_some(gpn),
            ..Request::default()
        }
    }

    #[test]
    fn a_node_range_takes_the_nodes_that_fit_up_to_its_maximum() {
        let mut c = Cluster::uniform(4, 8, 4, 64, 512_000);
        // All 4 idle: -N2-5 takes 4, -N1-3 takes 3, -N2-2 (no range) 2.
        assert_eq!(place_range(&ctx(&c, None), &ById, &range(2, 5, 0)).unwrap().len(), 4);
        assert_eq!(place_range(&ctx(&c, None), &ById, &range(1, 3, 2)).unwrap().len(), 3);
        assert_eq!(place_range(&ctx(&c, None), &ById, &range(2, 2, 0)).unwrap().len(), 2);
        // One node without room for 2 GPUs: 3 nodes, each with its 2 GPUs.
        let p = place(&ctx(&c, None), &ById, &Request::gpus(7, TopologyKind::Node)).unwrap();
        c.take(&p[0]);
        let p = place_range(&ctx(&c, None), &ById, &range(1, 4, 2)).unwrap();
        assert_eq!(p.len(), 3);
        assert!(p.iter().all(|a| a.gpus.count() == 2 && a.node != NodeId(3)), "{p:?}");
        // Below the minimum: the minimum's error.
        let e = place_range(&ctx(&c, None), &ById, &range(4, 5, 2)).unwrap_err();
        assert_eq!(e.detail, place(&ctx(&c, None), &ById, &with_nodes(&range(4, 5, 2), 4)).unwrap_err().detail);
    }

    proptest::proptest! {
        /// On any occupancy, a node range's placement has between MIN and MAX nodes, all
        /// distinct, each with the per-node GPUs; it is at MAX or one node more does not fit
        /// (the count is the largest that fits); and it fails exactly when MIN does not fit.
        #[test]
        fn a_node_range_is_the_largest_count_that_fits(
            used in proptest::collection::vec(0u32..=8, 6),
            min in 1u32..=6,
            extra in 0u32..=6,
            gpn in 0u32..=4,
        ) {
            let mut c = Cluster::uniform(6, 8, 6, 64, 512_000);
            for (i, &u) in used.iter().enumerate() {
                if u > 0 {
                    c.take(&NodeAlloc { node: NodeId(i as u32), gpus: GpuMask::all(u), gpu_milli: MILLI, cpu_milli: u64::from(u) * 8000, mem_mib: 0 });
                }
            }
            let req = range(min, min + extra, gpn);
            let ctx = ctx(&c, None);
            match place_range(&ctx, &ById, &req) {
                Ok(p) => {
                    let n = p.len() as u32;
                    proptest::prop_assert!(n >= min && n <= min + extra);
                    let nodes: std::collections::BTreeSet<_> = p.iter().map(|a| a.node).collect();
                    proptest::prop_assert_eq!(nodes.len(), p.len());
                    proptest::prop_assert!(p.iter().all(|a| a.gpus.count() == gpn));
                    if n < min + extra {
                        proptest::prop_assert!(place(&ctx, &ById, &with_nodes(&req, n + 1)).is_err());
                    }
                }
                Err(_) => proptest::prop_assert!(place(&ctx, &ById, &with_nodes(&req, min)).is_err()),
            }
        }
    }

    #[test]
    fn share_gpu_choice_sees_the_whole_demand() {
        let c = Cluster::uniform(1, 8, 1, 64, 512_000);
        let req = Request {
            gpus: 1,
            gpu_milli: 300,
            ..Request::default()
        };
        let p = place(&ctx(&c, None), &ById, &req).unwrap();
        assert_eq!(p[0].gpus, GpuMask::single(7));
        assert_eq!(p[0].gpu_milli, 300);
    }
}
