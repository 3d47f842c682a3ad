//! Placement scorers: Flotilla's default and the baselines we compare against.

use flotilla_core::cluster::{GpuMask, NodeId, MILLI};
use flotilla_core::placement::{Score, CandidateOrder, NodeDemand, PlaceCtx, PlacementPolicy};

/// Packs lexicographic keys (each `< base`, smaller is better) into one score (higher is
/// better).
fn lex(keys: &[(u64, u64)]) -> Score {
    let mut v: u128 = 0;
    for &(k, base) in keys {
        debug_assert!(v.checked_mul(u128::from(base)).is_some(), "score keys overflow 128 bits");
        v = v.saturating_mul(u128::from(base)).saturating_add(u128::from(k.min(base - 1)));
    }
    -(v.min(i128::MAX as u128) as Score)
}

/// Flotilla's default: exact fill first, then a partly used node
/// before a whole free one, then shape-aligned nodes (a node hosting allocations of the same
/// size), then nodes whose current work ends no earlier than the new job (lifetime alignment:
/// a node is whole again when all its jobs end), then least remainder, then fewest free CPUs;
/// sub-node shapes
/// prefer the sub-node pool; CPU-only work packs onto nodes without GPUs or with GPUs already
/// in use, never breaking up a whole free GPU node while another choice exists; fractional
/// shares go to the tightest GPU, on the node with the fewest whole free GPUs. Node weight
/// breaks the remaining ties.
///
/// Stranding (CPU- and memory-aware): a node's free GPUs are only usable with CPUs and memory
/// beside them. Each GPU of a node "comes with" its proportional part of the node's CPUs and
/// memory (`cpu / gpus`, `mem / gpus`); the *stranded* GPU milli of a node is the free GPU
/// milli beyond what its free CPUs and memory can still serve at that ratio. Right after exact
/// fill (whole GPUs), and first for shares, the policy takes the node where the placement
/// newly strands the fewest tenths of a GPU; then it avoids breaking up a wholly free node,
/// and when it must, breaks the smallest one (fewest GPUs, then CPUs, then memory), keeping
/// the largest nodes whole longest. CPU-only work never breaks a free GPU node while another
/// node fits, then strands least. With requests at or below a node's ratio nothing is
/// stranded, and the whole-GPU order (exact fill, shape-aligned, least remainder) is as above.
///
/// With a workload model ([`TopoBestFit::with_workload`]: the shapes the cluster's pods
/// typically ask for and how often), the policy also knows what its placements cost the work
/// still to come: the fragmentation gradient ΔF of FGD ([`Workload`]), the change in the GPU
/// milli that the typical pods could no longer use. It is a key of the order, in tenths of a GPU
/// (the unit of the stranding key): right after exact fill for whole GPUs, first for shares
/// (whose GPU is then the one with the lowest ΔF, tightest on ties) and for CPU-only work. The
/// other keys break its ties, where FGD draws a random node. Without a model the order is
/// exactly the one above.
///
/// GPU-model scarcity (with a model only): a request that accepts any GPU model keeps away
/// from nodes whose model is scarce now ([`Workload::scarce_now`]: the pods of the workload
/// that *require* the model would need what is left of it). It is the first key after the
/// sub-node pool, for whole GPUs and shares alike, so an untyped pod never takes a scarce
/// model while a node of a common model fits, not even for an exact fill. Typed and CPU-only
/// requests, and every request of a workload without typed shapes, are ordered as without it.
/// One rule, no parameter; [`TopoBestFit::without_scarcity`] is the ablation. Figures:
/// `bench/results/placement-scarcity.md`.
#[derive(Debug, Default, Clone)]
pub struct TopoBestFit {
    workload: Option<std::sync::Arc<Workload>>,
    /// The GPU-model scarcity key is off ([`TopoBestFit::without_scarcity`]).
    no_scarcity: bool,
}

/// Bias that makes the gradient key non-negative: a gradient is at most the free GPU milli of
/// one node (64 GPUs) either way.
const GRADIENT_BIAS: f64 = 64_000.0;

impl TopoBestFit {
    /// The default: no workload model.
    pub fn new() -> TopoBestFit {
        TopoBestFit::default()
    }

    /// With a workload model: the fragmentation gradient against it becomes a key.
    pub fn with_workload(workload: std::sync::Arc<Workload>) -> TopoBestFit {
        TopoBestFit { workload: Some(workload), no_scarcity: false }
    }

    /// The same policy without the GPU-model scarcity key (the ablation).
    pub fn without_scarcity(self) -> TopoBestFit {
        TopoBestFit { no_scarcity: true, ..self }
    }

    /// The scarcity key of placing `d` on `n` (0 or 1, smaller is better): 1 when `d` asks
    /// for GPUs of any model and the node's model is scarce now for the workload
    /// ([`Workload::scarce_now`]); 0 without a model, for typed and CPU-only requests.
    fn scarce_key(&self, ctx: &PlaceCtx<'_>, n: &flotilla_core::cluster::Node, d: &NodeDemand<'_>) -> u64 {
        match self.workload() {
            Some(w) if !self.no_scarcity && d.gpus > 0 && d.gpu_types.is_empty() => {
                u64::from(w.scarce_now(ctx.cluster, ctx.partition, n.gpu_type.as_deref()))
            }
            _ => 0,
        }
    }

    /// The workload model, if any.
    pub fn workload(&self) -> Option<&Workload> {
        self.workload.as_deref()
    }

    /// The gradient key: ΔF in tenths of a GPU, biased to be non-negative (smaller is better).
    fn gradient_key(gradient: f64) -> u64 {
        ((gradient + GRADIENT_BIAS) / 100.0).round().max(0.0) as u64
    }
}

/// Base of [`TopoBestFit::gradient_key`].
const GRADIENT_BASE: u64 = 2 * (GRADIENT_BIAS as u64) / 100 + 1;

/// Free GPU milli of `n` that its free CPUs and memory cannot serve at the node's own ratio,
/// after taking `cpu`, `mem` and `gpu_milli` more.
fn stranded(n: &flotilla_core::cluster::Node, cpu: u64, mem: u64, gpu_milli: u64) -> u64 {
    if n.gpus == 0 {
        return 0;
    }
    let free_gpu: u64 = n.gpu_milli_used.iter().map(|&u| u64::from(MILLI - u)).sum::<u64>().saturating_sub(gpu_milli);
    let g = u64::from(n.gpus) * u64::from(MILLI);
    let by_cpu = (n.free_cpu_milli.saturating_sub(cpu) * g).checked_div(n.cpu_milli).unwrap_or(g);
    let by_mem = (n.free_mem_mib.saturating_sub(mem) * g).checked_div(n.mem_mib).unwrap_or(g);
    free_gpu.saturating_sub(by_cpu.min(by_mem))
}

impl TopoBestFit {
    /// GPU milli newly stranded on `n` by placing `d` there (in tenths of a GPU, so that
    /// rounding noise does not override the keys after it).
    fn strands(n: &flotilla_core::cluster::Node, d: &NodeDemand<'_>) -> u64 {
        let take = u64::from(d.gpus) * u64::from(d.gpu_milli);
        let before = stranded(n, 0, 0, 0);
        let after = stranded(n, d.cpu_milli, d.mem_mib, take);
        after.saturating_sub(before).div_ceil(100)
    }
}

impl TopoBestFit {
    /// For a share with a workload model: the GPU with the lowest gradient key, then the
    /// tightest (most used), then the lowest index; with its gradient key.
    fn share_gpu(&self, w: &Workload, node: &flotilla_core::cluster::Node, blocked: GpuMask, d: &NodeDemand<'_>) -> Option<(u32, u64)> {
        (0..node.gpus)
            .filter(|&g| !blocked.contains(g) && node.gpu_milli_used[g as usize] + d.gpu_milli <= MILLI)
            .map(|g| (g, TopoBestFit::gradient_key(w.gradient(node, d, None, Some(g)))))
            .min_by_key(|&(g, k)| (k, MILLI - node.gpu_milli_used[g as usize], g))
    }
}

impl PlacementPolicy for TopoBestFit {
    fn name(&self) -> &str {
        "topo-bestfit"
    }

    fn order(&self) -> CandidateOrder {
        CandidateOrder::FewestFreeFirst
    }

    fn score(&self, ctx: &PlaceCtx<'_>, id: NodeId, avail: GpuMask, d: &NodeDemand<'_>) -> Score {
        let n = ctx.cluster.node(id);
        let weight = u64::from(n.weight);
        let sub_node = d.gpus > 0 && d.gpus * 2 <= n.gpus;
        let pool_key = u64::from(sub_node && !n.sub_node_pool && ctx.cluster.partitions.iter().any(|p| p.sub_node_pool));
        let strands = TopoBestFit::strands(n, d);
        // Breaking up a wholly free node costs its size: partly used nodes first, then the
        // smallest free nodes.
        let breaks = if n.gpus_all_free() {
            (u64::from(n.gpus.min(127)) << 20) | ((n.cpu_milli / 1000).min(1023) << 10) | (n.mem_mib / 4096).min(1023)
        } else {
            0
        };
        if d.gpus == 0 {
            // CPU-only: nodes without GPUs, then nodes whose GPUs are partly used, then fully
            // used, and whole free GPU nodes last; then the tightest CPUs.
            let class = if n.gpus == 0 {
                0
            } else if avail.count() == 0 {
                1
            } else if avail.count() < n.gpus {
                2
            } else {
                3
            };
            let cpu_left = (n.free_cpu_milli - d.cpu_milli) / 1000;
            let grad = self.workload().map_or(0, |w| TopoBestFit::gradient_key(w.gradient(n, d, Some(GpuMask::EMPTY), None)));
            return lex(&[(grad, GRADIENT_BASE), (breaks, 1 << 27), (strands, 1 << 8), (class, 4), (cpu_left, 1 << 20), (weight, 1 << 16)]);
        }
        if d.gpu_milli < MILLI {
            // A share: prefer a GPU already shared (least milli left after), then nodes with
            // the fewest whole free GPUs. With a model, the GPU of least gradient.
            let (grad, gpu_left) = match self.workload() {
                Some(w) => match self.share_gpu(w, n, (ctx.blocked)(id), d) {
                    Some((g, k)) => (k, Some(n.gpu_milli_used[g as usize])),
                    None => (0, None),
                },
                None => (
                    0,
                    (0..n.gpus)
                        .filter(|&g| n.gpu_milli_used[g as usize] > 0 && n.gpu_milli_used[g as usize] + d.gpu_milli <= MILLI)
                        .map(|g| n.gpu_milli_used[g as usize])
                        .max(),
                ),
            };
            let (shared, left) = match gpu_left {
                Some(u) if u > 0 => (0, u64::from(MILLI - u - d.gpu_milli)),
                _ => (1, 0),
            };
            let scarce = self.scarce_key(ctx, n, d);
            return lex(&[
                (pool_key, 2),
                (scarce, 2),
                (grad, GRADIENT_BASE),
                (strands, 1 << 8),
                (breaks, 1 << 27),
                (shared, 2),
                (left, 1001),
                (u64::from(avail.count()), 65),
                (weight, 1 << 16),
            ]);
        }
        let remainder = u64::from(avail.count() - d.gpus);
        let exact = u64::from(remainder != 0);
        // Never break a whole free node while a partly used one can take the request: an
        // empty node has no shape yet, but opening it destroys a whole-node placement.
        let opens_whole = u64::from(exact == 1 && avail.count() == n.gpus && n.gpus > 0);
        let aligned = match n.shape_affinity() {
            None => 0,
            Some(s) if s == d.gpus => 0,
            _ => 1,
        };
        let aligned = if exact == 0 { 0 } else { aligned };
        // Lifetime alignment: a job that would keep a node busy past its current allocations'
        // ends delays the moment the node is whole again; prefer nodes it does not extend.
        let extends = u64::from(exact == 1 && opens_whole == 0 && ctx.extends_busy(id));
        // CPUs pack too (cons_tres), so the busier node wins remaining ties.
        let cpu_left = (n.free_cpu_milli - d.cpu_milli.min(n.free_cpu_milli)) / 1000;
        let grad = self.workload().map_or(0, |w| TopoBestFit::gradient_key(w.gradient(n, d, lowest(avail, d.gpus), None)));
        let scarce = self.scarce_key(ctx, n, d);
        lex(&[
            (pool_key, 2),
            (scarce, 2),
            (exact, 2),
            (grad, GRADIENT_BASE),
            (strands, 1 << 8),
            (breaks, 1 << 27),
            (aligned, 2),
            (extends, 2),
            (remainder, 65),
            (cpu_left, 1 << 20),
            (weight, 1 << 16),
        ])
    }

    fn perfect_score(&self) -> Option<Score> {
        // Exact fill in the preferred pool, stranding nothing, with weight 1 (the default)
        // cannot be beaten except by weight 0. With a model, a better gradient could still
        // come: no early stop.
        if self.workload.is_some() {
            return None;
        }
        Some(lex(&[(0, 2), (0, 2), (0, 2), (0, GRADIENT_BASE), (0, 1 << 8), (0, 1 << 27), (0, 2), (0, 2), (0, 65), (0, 1 << 20), (1, 1 << 16)]))
    }

    fn pick_share_gpu_for(&self, node: &flotilla_core::cluster::Node, blocked: GpuMask, d: &NodeDemand<'_>) -> Option<u32> {
        match self.workload() {
            Some(w) => self.share_gpu(w, node, blocked, d).map(|(g, _)| g),
            None => self.pick_share_gpu(node, blocked, d.gpu_milli),
        }
    }
}

/// Baseline: topology-blind first-fit — the first node in configuration order that fits.
#[derive(Debug, Default, Clone, Copy)]
pub struct FirstFit;

impl PlacementPolicy for FirstFit {
    fn name(&self) -> &str {
        "first-fit"
    }
    fn order(&self) -> CandidateOrder {
        CandidateOrder::NodeOrder
    }
    fn score(&self, _: &PlaceCtx<'_>, _: NodeId, _: GpuMask, _: &NodeDemand<'_>) -> Score {
        0
    }
    fn perfect_score(&self) -> Option<Score> {
        Some(0)
    }
    fn pick_gpus(&self, _node: &flotilla_core::cluster::Node, avail: GpuMask, n: u32) -> Option<GpuMask> {
        lowest(avail, n)
    }
}

/// Baseline: worst-fit (spread) — the node with the most free GPUs.
#[derive(Debug, Default, Clone, Copy)]
pub struct WorstFit;

impl PlacementPolicy for WorstFit {
    fn name(&self) -> &str {
        "worst-fit"
    }
    fn order(&self) -> CandidateOrder {
        CandidateOrder::MostFreeFirst
    }
    fn score(&self, ctx: &PlaceCtx<'_>, id: NodeId, avail: GpuMask, _: &NodeDemand<'_>) -> Score {
        let n = ctx.cluster.node(id);
        Score::from(avail.count()) * 1_000_000 + Score::from(n.free_cpu_milli / 1000)
    }
    fn pick_gpus(&self, _node: &flotilla_core::cluster::Node, avail: GpuMask, n: u32) -> Option<GpuMask> {
        lowest(avail, n)
    }
}

/// Baseline: plain best-fit as the FGD artifact scores it (ATC'23 artifact's best-fit plugin,
/// `shared/traces/ANCHORS.md` §A1r): score = ⌊(1 − [0.5·(cpu_left − cpu_req)/128000 +
/// 0.5·(gpu_milli_left − gpus·milli)/8000])·100⌋, highest wins; memory is enforced but not
/// scored; inside the node the tightest GPU for a share, else the lowest-index free GPUs.
#[derive(Debug, Default, Clone, Copy)]
pub struct PlainBestFit;

impl PlacementPolicy for PlainBestFit {
    fn name(&self) -> &str {
        "best-fit"
    }
    fn order(&self) -> CandidateOrder {
        CandidateOrder::NodeOrder
    }
    fn score(&self, ctx: &PlaceCtx<'_>, id: NodeId, _: GpuMask, d: &NodeDemand<'_>) -> Score {
        let n = ctx.cluster.node(id);
        let cpu_left = n.free_cpu_milli as f64 - d.cpu_milli as f64;
        let gpu_left: f64 = n.gpu_milli_used.iter().map(|&u| f64::from(MILLI - u)).sum::<f64>()
            - f64::from(d.gpus) * f64::from(d.gpu_milli);
        let s = (1.0 - (0.5 * cpu_left / 128_000.0 + 0.5 * gpu_left / 8000.0)) * 100.0;
        s.floor() as Score
    }
    fn pick_gpus(&self, _node: &flotilla_core::cluster::Node, avail: GpuMask, n: u32) -> Option<GpuMask> {
        lowest(avail, n)
    }
}

/// One pod shape of FGD's target workload: what a typical task asks for, and how often.
#[derive(Debug, Clone, PartialEq)]
pub struct FgdTarget {
    /// CPUs in milli-CPUs (1000 = one CPU).
    pub cpu_milli: u64,
    /// Milli-GPUs on each GPU: 1000 for whole GPUs, less for a share, 0 for CPU-only.
    pub gpu_milli: u32,
    /// GPUs (0 for CPU-only, 1 for a share).
    pub gpus: u32,
    /// Allowed GPU models (empty = any).
    pub gpu_types: Vec<String>,
    /// Popularity (share of the workload), normalised to sum to 1 by [`Fgd::new`].
    pub weight: f64,
}

/// A target workload (FGD's model M, Weng et al., USENIX ATC'23; `ANCHORS.md` §A1, §A1r): the
/// typical pod shapes and their popularity, and the fragmentation of a node against them. A
/// node's fragmentation is F = Σ_m p_m · F(m), where F(m) is the node's free GPU milli that
/// task m could not use: all of it when m cannot run there at all (too few fitting GPUs, too
/// few CPUs, wrong model, or m is CPU-only), else the free milli of GPUs whose free part is
/// below m's per-GPU share. In production the controller would estimate the model from recent
/// submissions; the simulator builds it from the pod list ([`Workload::from_pods`]).
///
/// F depends only on a node's state (model, free CPUs, free milli per GPU), so it is memoised
/// by that state; the memo makes a run over the 1,213-node openb cluster cheap.
#[derive(Debug)]
pub struct Workload {
    targets: Vec<FgdTarget>,
    memo: std::sync::Mutex<FgdMemo>,
    /// Memo of [`Workload::model_pressure`] by (partition, GPU model): the partition's GPUs
    /// and the model's when it was computed (a changed count recomputes it) and the pressure.
    pressure: std::sync::Mutex<PressureMemo>,
    /// Memo of [`Workload::scarce_now`]: the free share of each GPU model of a partition at
    /// one cluster state.
    free: std::sync::Mutex<Option<FreeShares>>,
}

/// Free GPU milli of a partition by GPU model (lower-case) and in all, with the capacities,
/// at the cluster state `(partition, Cluster::gen, nodes, GPUs)`.
#[derive(Debug)]
struct FreeShares {
    key: (u32, u64, usize, u64),
    by_model: std::collections::BTreeMap<String, (u64, u64)>,
    all: (u64, u64),
}

/// [`Workload::model_pressure`]'s memo: (partition, lower-case model) -> ((partition's GPUs,
/// model's GPUs), pressure).
type PressureMemo = std::collections::BTreeMap<(u32, Option<String>), ((u64, u64), f64)>;

/// A pod shape: (milli-CPUs, milli-GPUs per GPU, GPUs, GPU models).
type Shape = (u64, u32, u32, Vec<String>);

#[derive(Debug, Default)]
struct FgdMemo {
    types: Vec<Option<String>>,
    frag: std::collections::HashMap<(u16, u64, [u16; 8], u8), f64>,
}

impl Workload {
    /// The given target workload (weights are renormalised to sum to 1).
    pub fn new(mut targets: Vec<FgdTarget>) -> Workload {
        let total: f64 = targets.iter().map(|t| t.weight).sum();
        if total > 0.0 {
            for t in &mut targets {
                t.weight /= total;
            }
        }
        Workload {
            targets,
            memo: std::sync::Mutex::new(FgdMemo::default()),
            pressure: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            free: std::sync::Mutex::new(None),
        }
    }

    /// Whether GPU model `model` is scarce now in partition `part`: its free share (free GPU
    /// milli over its GPU milli) is at most its [`Workload::model_pressure`] P times the
    /// partition's free share. If the work still to come has the workload's mix and fills
    /// what is free, the pods that require the model need P × (free share of the partition)
    /// of its GPUs: while the model has more free, a pod that accepts any model may use it;
    /// from there on, its GPUs are kept for those pods. A model with P ≥ 1 is always scarce,
    /// one with P = 0 (or an untyped node) never. Counts schedulable nodes only; memoised per
    /// cluster state ([`flotilla_core::cluster::Cluster::gen`]), recomputed in O(nodes)
    /// after each change.
    pub fn scarce_now(&self, cluster: &flotilla_core::cluster::Cluster, part: flotilla_core::cluster::PartId, model: Option<&str>) -> bool {
        let Some(model) = model else { return false };
        let p = self.model_pressure(cluster, part, Some(model));
        if p <= 0.0 {
            return false;
        }
        let all_gpus = cluster.capacity(part, &[]).total_gpus;
        let key = (part.0, cluster.gen(), cluster.nodes.len(), all_gpus);
        let mut memo = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if memo.as_ref().is_none_or(|m| m.key != key) {
            let mut by_model: std::collections::BTreeMap<String, (u64, u64)> = std::collections::BTreeMap::new();
            let mut all = (0u64, 0u64);
            for &id in &cluster.partitions[part.0 as usize].nodes {
                let n = cluster.node(id);
                if !n.avail.schedulable() || n.gpus == 0 {
                    continue;
                }
                let free: u64 = n.gpu_milli_used.iter().map(|&u| u64::from(MILLI - u)).sum();
                let cap = u64::from(n.gpus) * u64::from(MILLI);
                all.0 += free;
                all.1 += cap;
                if let Some(t) = &n.gpu_type {
                    let e = by_model.entry(t.to_ascii_lowercase()).or_default();
                    e.0 += free;
                    e.1 += cap;
                }
            }
            *memo = Some(FreeShares { key, by_model, all });
        }
        let m = memo.as_ref().expect("filled above");
        let Some(&(free, cap)) = m.by_model.get(&model.to_ascii_lowercase()) else {
            return false;
        };
        if cap == 0 || m.all.1 == 0 {
            return false;
        }
        // free / cap <= p × all_free / all_cap, without dividing.
        (free as f64) * (m.all.1 as f64) <= p * (m.all.0 as f64) * (cap as f64)
    }

    /// Scarcity of GPU model `model` for this workload in partition `part` of `cluster`
    /// (dimensionless, ≥ 0): the share of the model's GPUs that pods *requiring* it would
    /// claim when the workload's arrived GPU demand equals the partition's GPUs, each typed
    /// shape spread over the models it accepts in proportion to their GPUs:
    ///
    /// P(m) = Σ_{t typed, m ∈ A_t} (w_t·g_t·μ_t / G(A_t)) / (Σ_t w_t·g_t·μ_t / G)
    ///
    /// over the targets t of the model (weight w_t, GPUs g_t, milli per GPU μ_t, accepted
    /// models A_t), where G(A) is the partition's GPUs of the models in A and G all its GPUs.
    /// 0 for an untyped node, a workload without typed shapes or without GPU demand; ≥ 1
    /// means the typed pods alone would take every GPU of the model. The source is FGD's
    /// workload model (Weng et al., USENIX ATC'23 §4: the target workload's popularity and
    /// GPU-model constraints); the ratio is ours. Pure; memoised per (partition, model) and
    /// recomputed when the partition's GPUs or the model's change.
    pub fn model_pressure(&self, cluster: &flotilla_core::cluster::Cluster, part: flotilla_core::cluster::PartId, model: Option<&str>) -> f64 {
        let Some(model) = model else { return 0.0 };
        let all = cluster.capacity(part, &[]).total_gpus;
        let own = cluster.capacity(part, std::slice::from_ref(&model.to_owned())).total_gpus;
        let key = (part.0, Some(model.to_ascii_lowercase()));
        if let Some(&(g, p)) = self.pressure.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            if g == (all, own) {
                return p;
            }
        }
        let p = pressure_of(&self.targets, model, all, &|types| cluster.capacity(part, types).total_gpus);
        self.pressure.lock().unwrap_or_else(|e| e.into_inner()).insert(key, ((all, own), p));
        p
    }

    /// The target workload of the FGD artifact from a list of pods, each `(cpu_milli,
    /// gpu_milli, gpus, gpu_types)`: the distinct shapes by decreasing count (ties by
    /// decreasing shape), taken ten at a time until they cover at least `coverage` (0.95 in
    /// `ANCHORS.md` §A1r) of the pods, then renormalised.
    pub fn from_pods<'a>(pods: impl IntoIterator<Item = (u64, u32, u32, &'a [String])>, coverage: f64) -> Workload {
        let mut counts: std::collections::BTreeMap<Shape, u64> = std::collections::BTreeMap::new();
        let mut total = 0u64;
        for (cpu, milli, gpus, types) in pods {
            *counts.entry((cpu, milli, gpus, types.to_vec())).or_insert(0) += 1;
            total += 1;
        }
        let mut shapes: Vec<(Shape, u64)> = counts.into_iter().collect();
        // Decreasing count; equal counts in decreasing shape order (cpu, milli, gpus, types).
        shapes.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        let want = coverage * total as f64;
        let mut taken = 0usize;
        let mut cum = 0u64;
        while (cum as f64) < want && taken < shapes.len() {
            let upto = (taken + 10).min(shapes.len());
            cum += shapes[taken..upto].iter().map(|s| s.1).sum::<u64>();
            taken = upto;
        }
        let targets = shapes[..taken]
            .iter()
            .map(|((cpu, milli, gpus, types), n)| FgdTarget {
                cpu_milli: *cpu,
                gpu_milli: *milli,
                gpus: *gpus,
                gpu_types: types.clone(),
                weight: *n as f64,
            })
            .collect();
        Workload::new(targets)
    }

    /// The target workload, normalised.
    pub fn targets(&self) -> &[FgdTarget] {
        &self.targets
    }

    /// Fragmentation of a node state: `left` is the free milli of each GPU.
    pub fn frag_of(&self, gpu_type: Option<&str>, cpu_left: u64, left: &[u32]) -> f64 {
        let total: u32 = left.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let mut f = 0.0;
        for t in &self.targets {
            let all = f64::from(total);
            if t.gpu_milli == 0 {
                f += t.weight * all;
                continue;
            }
            let accessible = t.gpu_types.is_empty()
                || gpu_type.is_some_and(|g| t.gpu_types.iter().any(|a| a.eq_ignore_ascii_case(g)));
            if !accessible {
                f += t.weight * all;
                continue;
            }
            let fitting = left.iter().filter(|&&l| l >= t.gpu_milli).count() as u32;
            if fitting >= t.gpus && cpu_left >= t.cpu_milli {
                let frag: u32 = left.iter().filter(|&&l| l < t.gpu_milli).sum();
                f += t.weight * f64::from(frag);
            } else {
                f += t.weight * all;
            }
        }
        f
    }

    /// Memoised [`Workload::frag_of`].
    fn frag(&self, node: &flotilla_core::cluster::Node, cpu_left: u64, left: &[u32]) -> f64 {
        if left.len() > 8 {
            return self.frag_of(node.gpu_type.as_deref(), cpu_left, left);
        }
        let mut key = [0u16; 8];
        for (k, &l) in key.iter_mut().zip(left) {
            *k = l as u16;
        }
        key[..left.len()].sort_unstable();
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        let ty = match memo.types.iter().position(|t| t.as_deref() == node.gpu_type.as_deref()) {
            Some(i) => i,
            None => {
                memo.types.push(node.gpu_type.clone());
                memo.types.len() - 1
            }
        } as u16;
        let k = (ty, cpu_left, key, left.len() as u8);
        if let Some(&f) = memo.frag.get(&k) {
            return f;
        }
        drop(memo);
        let f = self.frag_of(node.gpu_type.as_deref(), cpu_left, left);
        self.memo.lock().unwrap_or_else(|e| e.into_inner()).frag.insert(k, f);
        f
    }

    fn left(node: &flotilla_core::cluster::Node) -> Vec<u32> {
        node.gpu_milli_used.iter().map(|&u| MILLI - u).collect()
    }

    /// The fragmentation gradient F_after − F_before (weighted milli-GPUs; negative when the
    /// placement lowers the node's fragmentation) of taking `d` on `node`: whole GPUs `gpus`,
    /// or a share on GPU `share`.
    fn gradient(&self, node: &flotilla_core::cluster::Node, d: &NodeDemand<'_>, gpus: Option<GpuMask>, share: Option<u32>) -> f64 {
        let mut left = Workload::left(node);
        let before = self.frag(node, node.free_cpu_milli, &left);
        if let Some(m) = gpus {
            for g in m.iter() {
                left[g as usize] = 0;
            }
        }
        if let Some(g) = share {
            left[g as usize] -= d.gpu_milli.min(left[g as usize]);
        }
        self.frag(node, node.free_cpu_milli.saturating_sub(d.cpu_milli), &left) - before
    }
}

/// [`Workload::model_pressure`] of `model` with `all` GPUs in the partition and `gpus_of`
/// giving the GPUs of the models a list accepts.
fn pressure_of(targets: &[FgdTarget], model: &str, all: u64, gpus_of: &dyn Fn(&[String]) -> u64) -> f64 {
    let demand = |t: &FgdTarget| t.weight * f64::from(t.gpus) * f64::from(t.gpu_milli);
    let total: f64 = targets.iter().map(demand).sum();
    if total <= 0.0 || all == 0 {
        return 0.0;
    }
    let mut typed = 0.0;
    for t in targets {
        if t.gpus == 0 || t.gpu_types.is_empty() || !t.gpu_types.iter().any(|a| a.eq_ignore_ascii_case(model)) {
            continue;
        }
        let g = gpus_of(&t.gpu_types);
        if g > 0 {
            typed += demand(t) / g as f64;
        }
    }
    typed / (total / all as f64)
}

/// Baseline: Fragmentation Gradient Descent (Weng et al., USENIX ATC'23; `ANCHORS.md` §A1,
/// §A1r) against a target [`Workload`]. The score of a node is
/// ⌊100·sigmoid((F_before − F_after)/1000)⌋ (highest wins, ties by [`PlaceCtx::tie_rank`]); a
/// share goes to the GPU with the best such score (lowest index on ties); whole GPUs are the
/// lowest-index free ones. Memory is enforced by the engine, never scored.
#[derive(Debug)]
pub struct Fgd {
    workload: std::sync::Arc<Workload>,
}

impl Fgd {
    /// FGD against the given target workload (weights are renormalised to sum to 1).
    pub fn new(targets: Vec<FgdTarget>) -> Fgd {
        Fgd::with_workload(std::sync::Arc::new(Workload::new(targets)))
    }

    /// FGD against a shared workload model.
    pub fn with_workload(workload: std::sync::Arc<Workload>) -> Fgd {
        Fgd { workload }
    }

    /// FGD against the artifact's target workload of a pod list ([`Workload::from_pods`]).
    pub fn from_pods<'a>(pods: impl IntoIterator<Item = (u64, u32, u32, &'a [String])>, coverage: f64) -> Fgd {
        Fgd::with_workload(std::sync::Arc::new(Workload::from_pods(pods, coverage)))
    }

    /// The target workload, normalised.
    pub fn targets(&self) -> &[FgdTarget] {
        self.workload.targets()
    }

    /// Fragmentation of a node state ([`Workload::frag_of`]).
    pub fn frag_of(&self, gpu_type: Option<&str>, cpu_left: u64, left: &[u32]) -> f64 {
        self.workload.frag_of(gpu_type, cpu_left, left)
    }

    fn to_score(gradient: f64) -> i64 {
        let x = -gradient / 1000.0;
        (100.0 / (1.0 + (-x).exp())) as i64
    }

    /// Best share GPU and its score: the first GPU (by index) with the highest score.
    fn best_share(&self, node: &flotilla_core::cluster::Node, blocked: GpuMask, d: &NodeDemand<'_>) -> Option<(u32, i64)> {
        let mut best: Option<(u32, i64)> = None;
        for g in 0..node.gpus {
            if blocked.contains(g) || node.gpu_milli_used[g as usize] + d.gpu_milli > MILLI {
                continue;
            }
            let s = Fgd::to_score(self.workload.gradient(node, d, None, Some(g)));
            if best.is_none_or(|(_, bs)| s > bs) {
                best = Some((g, s));
            }
        }
        best
    }
}

impl PlacementPolicy for Fgd {
    fn name(&self) -> &str {
        "fgd"
    }
    fn order(&self) -> CandidateOrder {
        CandidateOrder::NodeOrder
    }
    fn score(&self, ctx: &PlaceCtx<'_>, id: NodeId, avail: GpuMask, d: &NodeDemand<'_>) -> Score {
        let n = ctx.cluster.node(id);
        if d.gpus > 0 && d.gpu_milli < MILLI {
            return self.best_share(n, (ctx.blocked)(id), d).map_or(Score::MIN, |(_, s)| Score::from(s));
        }
        Score::from(Fgd::to_score(self.workload.gradient(n, d, lowest(avail, d.gpus), None)))
    }
    fn pick_gpus(&self, _node: &flotilla_core::cluster::Node, avail: GpuMask, n: u32) -> Option<GpuMask> {
        lowest(avail, n)
    }
    fn pick_share_gpu_for(&self, node: &flotilla_core::cluster::Node, blocked: GpuMask, d: &NodeDemand<'_>) -> Option<u32> {
        self.best_share(node, blocked, d).map(|(g, _)| g)
    }
}

/// Baseline: random placement (FGD artifact's `01-Random`): every feasible node gets an
/// independent pseudo-random score, so the highest is a uniformly random feasible node; a
/// share goes to a uniformly random GPU that fits; whole GPUs are the lowest-index free ones.
/// The generator (splitmix64) is seeded at construction and advanced by every draw, so a run
/// is deterministic for a seed.
#[derive(Debug)]
pub struct RandomFit {
    state: std::sync::atomic::AtomicU64,
}

impl RandomFit {
    /// A random policy seeded with `seed`.
    pub fn new(seed: u64) -> RandomFit {
        RandomFit {
            state: std::sync::atomic::AtomicU64::new(seed ^ 0x5851_f42d_4c95_7f2d),
        }
    }

    fn next(&self) -> u64 {
        let s = self
            .state
            .fetch_add(0x9e37_79b9_7f4a_7c15, std::sync::atomic::Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl PlacementPolicy for RandomFit {
    fn name(&self) -> &str {
        "random"
    }
    fn order(&self) -> CandidateOrder {
        CandidateOrder::NodeOrder
    }
    fn score(&self, _: &PlaceCtx<'_>, _: NodeId, _: GpuMask, _: &NodeDemand<'_>) -> Score {
        Score::from(self.next() >> 2)
    }
    fn is_stateful(&self) -> bool {
        true
    }
    fn pick_gpus(&self, _node: &flotilla_core::cluster::Node, avail: GpuMask, n: u32) -> Option<GpuMask> {
        lowest(avail, n)
    }
    fn pick_share_gpu(&self, node: &flotilla_core::cluster::Node, blocked: GpuMask, milli: u32) -> Option<u32> {
        let fits: Vec<u32> = (0..node.gpus)
            .filter(|&g| !blocked.contains(g) && node.gpu_milli_used[g as usize] + milli <= MILLI)
            .collect();
        if fits.is_empty() {
            return None;
        }
        Some(fits[(self.next() % fits.len() as u64) as usize])
    }
}

fn lowest(avail: GpuMask, n: u32) -> Option<GpuMask> {
    if avail.count() < n {
        return None;
    }
    Some(GpuMask(avail.iter().take(n as usize).fold(0u64, |m, g| m | (1 << g))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_core::cluster::{Cluster, NodeAlloc, PartId};
    use flotilla_core::config::TopologyKind;
    use flotilla_core::job::Request;
    use flotilla_core::placement::place;

    fn ctx(c: &Cluster) -> PlaceCtx<'_> {
        PlaceCtx {
            cluster: c,
            blocked: &|_| GpuMask::EMPTY,
            tie_rank: None,
            partition: PartId(0),
            job_end: None,
            busy_until: None,
        }
    }

    fn use_gpus(c: &mut Cluster, node: u32, n: u32) {
        c.take(&NodeAlloc {
            node: NodeId(node),
            gpus: GpuMask::all(n),
            gpu_milli: MILLI,
            cpu_milli: 1000,
            mem_mib: 0,
        });
    }

    #[test]
    fn two_gpus_land_on_the_node_with_six_used() {
        let mut c = Cluster::uniform(4, 8, 4, 64, 512_000);
        use_gpus(&mut c, 2, 6);
        use_gpus(&mut c, 1, 3);
        let p = place(&ctx(&c), &TopoBestFit::new(), &Request::gpus(2, TopologyKind::Node)).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].node, NodeId(2));
        // First-fit takes node 0 (empty) instead; worst-fit an empty node too.
        let f = place(&ctx(&c), &FirstFit, &Request::gpus(2, TopologyKind::Node)).unwrap();
        assert_eq!(f[0].node, NodeId(0));
        let w = place(&ctx(&c), &WorstFit, &Request::gpus(2, TopologyKind::Node)).unwrap();
        assert!(c.node(w[0].node).gpus_all_free());
    }

    #[test]
    fn shape_aligned_prefers_same_shape_nodes() {
        let mut c = Cluster::uniform(4, 8, 4, 64, 512_000);
        // Node 0 hosts one 4-GPU allocation; node 1 hosts a 2 and a 2 (mixed? no: same size 2).
        use_gpus(&mut c, 0, 4);
        c.take(&NodeAlloc { node: NodeId(1), gpus: GpuMask(0b11), gpu_milli: MILLI, cpu_milli: 1000, mem_mib: 0 });
        c.take(&NodeAlloc { node: NodeId(1), gpus: GpuMask(0b1100), gpu_milli: MILLI, cpu_milli: 1000, mem_mib: 0 });
        // Both nodes have 4 free: exact fill for a 4-GPU request on either; the busier node
        // (fewer free CPUs: two allocations) wins the tie.
        let p = place(&ctx(&c), &TopoBestFit::new(), &Request::gpus(4, TopologyKind::Node)).unwrap();
        assert_eq!(p[0].node, NodeId(1));
        // A 2-GPU request: not exact anywhere; node 1 (affinity 2) is aligned, node 0 is not.
        let p = place(&ctx(&c), &TopoBestFit::new(), &Request::gpus(2, TopologyKind::Node)).unwrap();
        assert_eq!(p[0].node, NodeId(1));
    }

    #[test]
    fn fgd_scores_by_fragmentation_against_the_target() {
        let mut c = Cluster::uniform(1, 8, 1, 64, 512_000);
        c.take(&NodeAlloc { node: NodeId(0), gpus: GpuMask(0b1), gpu_milli: 500, cpu_milli: 0, mem_mib: 0 });
        // One typical task: one whole GPU. GPU 0 (500 free) is the only fragment: F = 500.
        let fgd = Fgd::new(vec![FgdTarget { cpu_milli: 1000, gpu_milli: 1000, gpus: 1, gpu_types: vec![], weight: 3.0 }]);
        assert_eq!(fgd.targets()[0].weight, 1.0);
        let whole = NodeDemand { gpus: 1, gpu_milli: 1000, cpu_milli: 1000, mem_mib: 0, gpu_types: &[], whole_node: false };
        // A whole GPU leaves F at 500: ΔF = 0, sigmoid(0) = 0.5.
        assert_eq!(fgd.score(&ctx(&c), NodeId(0), c.node(NodeId(0)).free_gpus, &whole), 50);
        // A 500-milli share on GPU 0 removes the fragment (ΔF = 500 → 62); on a free GPU it
        // adds one (ΔF = −500 → 37). FGD takes GPU 0.
        let share = NodeDemand { gpu_milli: 500, ..whole.clone() };
        assert_eq!(fgd.score(&ctx(&c), NodeId(0), c.node(NodeId(0)).free_gpus, &share), 62);
        assert_eq!(fgd.pick_share_gpu_for(c.node(NodeId(0)), GpuMask::EMPTY, &share), Some(0));
        // A CPU-only target counts every free milli as fragmented.
        let cpu = Fgd::new(vec![FgdTarget { cpu_milli: 1000, gpu_milli: 0, gpus: 0, gpu_types: vec![], weight: 1.0 }]);
        assert_eq!(cpu.frag_of(None, 64_000, &[500, 1000]), 1500.0);
        // A model constraint the node does not meet: everything is fragmented.
        let typed = Fgd::new(vec![FgdTarget { cpu_milli: 0, gpu_milli: 1000, gpus: 1, gpu_types: vec!["V100".into()], weight: 1.0 }]);
        assert_eq!(typed.frag_of(Some("T4"), 64_000, &[1000]), 1000.0);
        assert_eq!(typed.frag_of(Some("v100"), 64_000, &[1000]), 0.0);
    }

    #[test]
    fn fgd_target_workload_covers_the_popular_shapes() {
        let none: Vec<String> = Vec::new();
        let mut pods = vec![(1000u64, 1000u32, 1u32, none.as_slice()); 90];
        pods.extend(vec![(2000, 500, 1, none.as_slice()); 10]);
        let f = Fgd::from_pods(pods, 0.95);
        assert_eq!(f.targets().len(), 2);
        assert!((f.targets()[0].weight - 0.9).abs() < 1e-12);
    }

    #[test]
    fn random_fit_is_deterministic_per_seed() {
        let c = Cluster::uniform(16, 8, 16, 64, 512_000);
        let req = Request::gpus(1, TopologyKind::Node);
        let pick = |seed| {
            let r = RandomFit::new(seed);
            (0..8).map(|_| place(&ctx(&c), &r, &req).unwrap()[0].node.0).collect::<Vec<_>>()
        };
        assert_eq!(pick(7), pick(7));
        assert_ne!(pick(7), pick(8));
    }

    #[test]
    fn topo_bestfit_avoids_stranding_gpus_behind_used_cpus() {
        // Two 8-GPU, 64-CPU nodes (8 CPUs per GPU), 4 GPUs used on each. Node 0 has 24 CPUs
        // left (enough for 3 of its 4 free GPUs), node 1 has 60. A 1-GPU job asking for 16
        // CPUs strands one more GPU on node 0 and none on node 1.
        let mut c = Cluster::uniform(2, 8, 2, 64, 512_000);
        c.take(&NodeAlloc { node: NodeId(0), gpus: GpuMask(0xf), gpu_milli: MILLI, cpu_milli: 40_000, mem_mib: 0 });
        c.take(&NodeAlloc { node: NodeId(1), gpus: GpuMask(0xf), gpu_milli: MILLI, cpu_milli: 4000, mem_mib: 0 });
        let req = Request { cpu_milli_per_node: 16_000, ..Request::gpus(1, TopologyKind::Node) };
        let p = place(&ctx(&c), &TopoBestFit::new(), &req).unwrap();
        assert_eq!(p[0].node, NodeId(1));
        // A CPU-only job takes node 1's spare CPUs too, never node 0's last ones.
        let cpu = Request { cpu_milli_per_node: 16_000, ..Request::gpus(0, TopologyKind::Node) };
        assert_eq!(place(&ctx(&c), &TopoBestFit::new(), &cpu).unwrap()[0].node, NodeId(1));
    }

    #[test]
    fn topo_bestfit_breaks_the_smallest_free_node() {
        let specs: Vec<flotilla_core::cluster::NodeSpec> = [(128_000, 786_432), (96_000, 393_216)]
            .iter()
            .enumerate()
            .map(|(i, &(cpu, mem))| flotilla_core::cluster::NodeSpec {
                name: format!("n{i}"),
                gpus: 8,
                gpu_type: None,
                cpu_milli: cpu,
                mem_mib: mem,
                pod: "p".into(),
            })
            .collect();
        let mut c = Cluster::from_specs(&specs);
        c.add_partition("all", vec![NodeId(0), NodeId(1)], true);
        let p = place(&ctx(&c), &TopoBestFit::new(), &Request::gpus(1, TopologyKind::Node)).unwrap();
        assert_eq!(p[0].node, NodeId(1), "the larger node stays whole");
    }

    fn typed_cluster() -> Cluster {
        let specs: Vec<flotilla_core::cluster::NodeSpec> = ["V100", "T4"]
            .iter()
            .enumerate()
            .map(|(i, ty)| flotilla_core::cluster::NodeSpec {
                name: format!("n{i}"),
                gpus: 8,
                gpu_type: Some((*ty).into()),
                cpu_milli: 64_000,
                mem_mib: 512_000,
                pod: "p".into(),
            })
            .collect();
        let mut c = Cluster::from_specs(&specs);
        c.add_partition("all", vec![NodeId(0), NodeId(1)], true);
        c
    }

    #[test]
    fn topo_bestfit_with_a_model_keeps_the_scarce_gpu_model_for_who_needs_it() {
        // Half of the typical pods need a V100; an untyped 1-GPU pod should take the T4 node,
        // which costs the V100 pods nothing. Without a model the nodes tie (node order).
        let c = typed_cluster();
        let w = Workload::new(vec![
            FgdTarget { cpu_milli: 1000, gpu_milli: 1000, gpus: 8, gpu_types: vec!["V100".into()], weight: 1.0 },
            FgdTarget { cpu_milli: 1000, gpu_milli: 1000, gpus: 1, gpu_types: vec![], weight: 1.0 },
        ]);
        let req = Request::gpus(1, TopologyKind::Node);
        let ours = TopoBestFit::with_workload(std::sync::Arc::new(w));
        assert_eq!(place(&ctx(&c), &ours, &req).unwrap()[0].node, NodeId(1));
        assert_eq!(place(&ctx(&c), &TopoBestFit::new(), &req).unwrap()[0].node, NodeId(0));
        assert!(ours.perfect_score().is_none() && TopoBestFit::new().perfect_score().is_some());
    }

    #[test]
    fn topo_bestfit_with_a_model_puts_a_share_where_it_fragments_least() {
        // GPU 0 has 700 milli used, GPU 1 has 500; the typical pod is a 300-milli share. A
        // 300-milli share on GPU 0 (300 → 0) fragments nothing; on GPU 1 (500 → 200) it would.
        let mut c = Cluster::uniform(1, 8, 1, 64, 512_000);
        c.take(&NodeAlloc { node: NodeId(0), gpus: GpuMask(0b1), gpu_milli: 700, cpu_milli: 0, mem_mib: 0 });
        c.take(&NodeAlloc { node: NodeId(0), gpus: GpuMask(0b10), gpu_milli: 500, cpu_milli: 0, mem_mib: 0 });
        let w = Workload::new(vec![FgdTarget { cpu_milli: 0, gpu_milli: 300, gpus: 1, gpu_types: vec![], weight: 1.0 }]);
        let ours = TopoBestFit::with_workload(std::sync::Arc::new(w));
        let d = NodeDemand { gpus: 1, gpu_milli: 300, cpu_milli: 1000, mem_mib: 0, gpu_types: &[], whole_node: false };
        assert_eq!(ours.pick_share_gpu_for(c.node(NodeId(0)), GpuMask::EMPTY, &d), Some(0));
        // A 400-milli share fits only GPU 1 (and the free GPUs): GPU 1 (500 → 100) fragments
        // 100, a free GPU (1000 → 600) none: the model takes a free GPU, the tightest rule GPU 1.
        let d4 = NodeDemand { gpu_milli: 400, ..d.clone() };
        assert_eq!(ours.pick_share_gpu_for(c.node(NodeId(0)), GpuMask::EMPTY, &d4), Some(2));
        assert_eq!(TopoBestFit::new().pick_share_gpu_for(c.node(NodeId(0)), GpuMask::EMPTY, &d4), Some(1));
    }

    #[test]
    fn plain_best_fit_matches_the_artifact_formula() {
        let c = Cluster::uniform(1, 8, 1, 128, 512_000);
        let d = NodeDemand { gpus: 1, gpu_milli: 1000, cpu_milli: 4000, mem_mib: 0, gpu_types: &[], whole_node: false };
        // cpu_left-req = 124000 → 0.484375; gpu_left-req = 7000 → 0.4375; 1 - 0.921875 = 0.078125 → 7
        assert_eq!(PlainBestFit.score(&ctx(&c), NodeId(0), GpuMask::all(8), &d), 7);
    }

    #[test]
    fn sub_node_pool_takes_only_sub_node_shapes() {
        let mut c = Cluster::uniform(4, 8, 4, 64, 512_000);
        // Nodes 2 and 3 form a dedicated sub-node pool.
        let pool = c.add_partition("dev", vec![NodeId(2), NodeId(3)], false);
        c.partitions[pool.0 as usize].sub_node_pool = true;
        c.nodes[2].sub_node_pool = true;
        c.nodes[3].sub_node_pool = true;
        // A 2-GPU job in the main partition goes to the pool, away from the whole nodes.
        let p = place(&ctx(&c), &TopoBestFit::new(), &Request::gpus(2, TopologyKind::Node)).unwrap();
        assert!(c.node(p[0].node).sub_node_pool);
        // A whole-node job never lands in the pool: with nodes 0 and 1 busy it cannot start.
        use_gpus(&mut c, 0, 1);
        use_gpus(&mut c, 1, 1);
        assert!(place(&ctx(&c), &TopoBestFit::new(), &Request::gpus(8, TopologyKind::Node)).is_err());
        assert!(place(&ctx(&c), &TopoBestFit::new(), &Request::gpus(6, TopologyKind::Node)).is_ok());
    }
}
