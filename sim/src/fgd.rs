//! Experiment `fgd`: the fragmentation protocol of FGD (Weng et al., USENIX ATC'23) on the
//! Alibaba openb cluster, exactly as `../shared/traces/ANCHORS.md` §A1 and §A1r state it.
//!
//! Per seed: shuffle the whole pod list, then append draws with replacement until the summed
//! GPU demand (`gpus × gpu_milli`) reaches 130 % of the cluster's milli-GPUs, or drop random
//! pods (the tail of the shuffled list) down to 130 %; draw a random permutation of the nodes
//! (the tie-break of every policy). Place the pods one at a time through
//! [`flotilla_core::placement::place`] and [`Cluster::take`]: no departures, no retries, a pod
//! that fits nowhere is dropped but counts as arrived. CPU, memory, GPU model and fractional
//! shares are enforced by the core's engine.
//!
//! Metric: after every pod event, allocation = used milli-GPUs / total milli-GPUs, and arrived
//! demand = summed demand of the pods so far / total. "Unallocated GPU % at x" is
//! 100 − the mean allocation over the events whose arrived demand rounds to x
//! (x − 0.5 ≤ arrived < x + 0.5), then the mean (or median) over seeds. Every policy of a run
//! sees the same pod streams and permutations.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use flotilla_core::cluster::{check_accounting, Cluster, NodeAlloc, NodeId, NodeSpec, PartId, MILLI};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::Request;
use flotilla_core::placement::{place, PlaceCtx, PlacementPolicy};
use flotilla_plugins::placement::{Fgd, RandomFit, TopoBestFit, Workload};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::progress::{run_parallel, Progress};
use crate::report::{self, Series};
use crate::traces::openb::{OpenbNode, OpenbPod, OpenbVariant};
use crate::traces::TraceDir;
use crate::SimError;

/// The policies of the experiment, in report order: ours, the artifact's BestFit, FGD, random
/// and topology-blind first-fit.
pub const POLICIES: &[&str] = &["topo-bestfit", "best-fit", "fgd", "random", "first-fit"];

/// The seeds of the artifact (42–51).
pub const DEFAULT_SEEDS: std::ops::Range<u64> = 42..52;

/// The arrived-demand points reported as the curve (percent of capacity).
pub const CURVE: std::ops::RangeInclusive<u32> = 75..=120;

/// Share of the pod list FGD's target workload covers (`ANCHORS.md` §A1r).
pub const FGD_COVERAGE: f64 = 0.95;

/// Options of the experiment.
#[derive(Debug, Clone)]
pub struct FgdOptions {
    /// Pod lists to run.
    pub pod_lists: Vec<OpenbVariant>,
    /// Seeds of the pod streams, one run per seed.
    pub seeds: Vec<u64>,
    /// Policies (names of [`POLICIES`]).
    pub policies: Vec<String>,
    /// The pod stream's total demand as a multiple of capacity (1.3).
    pub inflation: f64,
    /// Threads (results do not depend on it).
    pub jobs: usize,
    /// Check invariant 1 every this many placements (1 in debug builds by default).
    pub check_every: usize,
}

impl Default for FgdOptions {
    fn default() -> Self {
        FgdOptions {
            pod_lists: vec![OpenbVariant::Default],
            seeds: DEFAULT_SEEDS.collect(),
            policies: POLICIES.iter().map(|s| s.to_string()).collect(),
            inflation: 1.3,
            jobs: 1,
            check_every: if cfg!(debug_assertions) { 1 } else { 1024 },
        }
    }
}

/// The openb cluster as the core models it: one node per row, its GPU model as the GPU type,
/// all in one pod (the trace has no switch topology) and one default partition.
pub fn openb_cluster(nodes: &[OpenbNode]) -> Cluster {
    let specs: Vec<NodeSpec> = nodes
        .iter()
        .map(|n| NodeSpec {
            name: n.node_id.clone(),
            gpus: n.gpus,
            gpu_type: Some(n.gpu_model.clone()),
            cpu_milli: u64::from(n.cpu_milli),
            mem_mib: n.memory_mib,
            pod: "openb".into(),
        })
        .collect();
    let mut c = Cluster::from_specs(&specs);
    let all = (0..nodes.len() as u32).map(NodeId).collect();
    c.add_partition("openb", all, true);
    c
}

/// The request of one pod: its GPUs (or share of one GPU), CPUs, memory and GPU models, on
/// exactly one node (a Kubernetes pod never spans nodes).
pub fn pod_request(p: &OpenbPod) -> Request {
    Request {
        gpus: p.gpus,
        nodes: Some(1),
        gpus_per_node: Some(p.gpus),
        gpu_milli: if p.gpus == 0 { MILLI } else { p.gpu_milli },
        cpu_milli_per_node: u64::from(p.cpu_milli),
        mem_mib_per_node: p.memory_mib,
        topology: TopologyKind::Node,
        gpu_types: p.gpu_spec.clone(),
        ..Request::default()
    }
}

/// The pod stream of one seed (indices into `pods`) and the node tie-break permutation
/// (`rank[node]` = position), both from one ChaCha8 generator seeded with `seed`: shuffle the
/// list; if its demand is below `inflation × capacity`, append uniform draws with replacement
/// until the demand reaches it; else keep the shuffled prefix whose demand stays within it.
pub fn pod_stream(pods: &[OpenbPod], nodes: usize, capacity_milli: u64, inflation: f64, seed: u64) -> (Vec<usize>, Vec<u32>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let target = (capacity_milli as f64 * inflation).round() as u64;
    let mut order: Vec<usize> = (0..pods.len()).collect();
    order.shuffle(&mut rng);
    let total: u64 = pods.iter().map(OpenbPod::gpu_demand_milli).sum();
    if total < target {
        let mut sum = total;
        while sum < target && !pods.is_empty() {
            let i = rng.random_range(0..pods.len());
            sum += pods[i].gpu_demand_milli();
            order.push(i);
        }
    } else {
        let mut sum = 0;
        let mut keep = 0;
        for &i in &order {
            let d = pods[i].gpu_demand_milli();
            if sum + d > target {
                break;
            }
            sum += d;
            keep += 1;
        }
        order.truncate(keep);
    }
    let mut perm: Vec<u32> = (0..nodes as u32).collect();
    perm.shuffle(&mut rng);
    let mut rank = vec![0u32; nodes];
    for (pos, &n) in perm.iter().enumerate() {
        rank[n as usize] = pos as u32;
    }
    (order, rank)
}

/// The target workload of a pod list (`ANCHORS.md` §A1r): its popular shapes, covering
/// [`FGD_COVERAGE`] of the pods.
pub fn workload(pods: &[OpenbPod]) -> Workload {
    Workload::from_pods(
        pods.iter()
            .map(|p| (u64::from(p.cpu_milli), p.gpu_milli, p.gpus, p.gpu_spec.as_slice())),
        FGD_COVERAGE,
    )
}

/// Builds a policy of the experiment by name. FGD and ours (`topo-bestfit`) get the same
/// workload model, the pod list's target workload; the random policy is seeded with the
/// run's seed. `topo-bestfit-nomodel` (not run by default) is ours without the model, as
/// `flotilla_plugins::placement("topo-bestfit")` builds it: the ablation;
/// `topo-bestfit-noscarcity` (not run by default) is ours with the model but without its
/// GPU-model scarcity key ([`TopoBestFit::without_scarcity`]), the policy before it.
pub fn make_policy(name: &str, pods: &[OpenbPod], seed: u64) -> Result<Box<dyn PlacementPolicy>, SimError> {
    Ok(match name {
        "fgd" => Box::new(Fgd::with_workload(Arc::new(workload(pods)))),
        "topo-bestfit" => Box::new(TopoBestFit::with_workload(Arc::new(workload(pods)))),
        "topo-bestfit-nomodel" => Box::new(TopoBestFit::new()),
        "topo-bestfit-noscarcity" => Box::new(TopoBestFit::with_workload(Arc::new(workload(pods))).without_scarcity()),
        "random" => Box::new(RandomFit::new(seed)),
        other => flotilla_plugins::placement(other).ok_or_else(|| SimError::UnknownPolicy { name: other.to_owned() })?,
    })
}

/// What one event bin (arrived demand rounding to one percent) accumulated.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bin {
    /// Pod events in the bin.
    pub events: u64,
    /// Sum over the events of the allocation ratio (percent).
    pub alloc_pct: f64,
    /// Sum over the events of the fully free 8-GPU nodes.
    pub whole8: f64,
    /// Sum over the events of the share (percent) of free GPUs in fully free 8-GPU nodes.
    pub whole8_share_pct: f64,
}

impl Bin {
    fn mean(&self, f: impl Fn(&Bin) -> f64) -> Option<f64> {
        (self.events > 0).then(|| f(self) / self.events as f64)
    }
}

/// One run: one policy, one seed, one pod list.
#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    /// Bins by arrived percent (index = rounded percent).
    pub bins: Vec<Bin>,
    /// Pods in the stream.
    pub pods: u64,
    /// Pods that fit nowhere.
    pub failed: u64,
    /// Allocation ratio (percent) after the last pod.
    pub final_alloc_pct: f64,
}

impl RunResult {
    /// Unallocated GPU % at arrived demand `x` (percent), if an event rounds to it.
    pub fn unalloc_at(&self, x: u32) -> Option<f64> {
        self.bins.get(x as usize).and_then(|b| b.mean(|b| b.alloc_pct)).map(|a| 100.0 - a)
    }
    /// Mean fully free 8-GPU nodes at arrived demand `x`.
    pub fn whole8_at(&self, x: u32) -> Option<f64> {
        self.bins.get(x as usize).and_then(|b| b.mean(|b| b.whole8))
    }
    /// Mean share (percent) of free GPUs in fully free 8-GPU nodes at arrived demand `x`.
    pub fn whole8_share_at(&self, x: u32) -> Option<f64> {
        self.bins.get(x as usize).and_then(|b| b.mean(|b| b.whole8_share_pct))
    }
}

/// Places the pods of `stream` one at a time on a fresh cluster of `nodes` with `policy`,
/// ties broken by `rank`. Checks invariant 1 every `check_every` placements and at the end.
///
/// Panics if invariant 1 breaks (a bug in the core: fail stop).
pub fn run_once(nodes: &[OpenbNode], pods: &[OpenbPod], stream: &[usize], rank: &[u32], policy: &dyn PlacementPolicy, check_every: usize) -> RunResult {
    let mut cluster = openb_cluster(nodes);
    let capacity = cluster.total_gpus() * u64::from(MILLI);
    let part = PartId(0);
    let mut allocs: Vec<NodeAlloc> = Vec::with_capacity(stream.len());
    let mut whole8 = cluster.fully_free_gpu_nodes(8) as u64;
    let (mut arrived, mut used, mut failed) = (0u64, 0u64, 0u64);
    let mut bins = vec![Bin::default(); 201];
    let blocked = |_: NodeId| flotilla_core::cluster::GpuMask::EMPTY;
    for (k, &i) in stream.iter().enumerate() {
        let pod = &pods[i];
        let req = pod_request(pod);
        arrived += pod.gpu_demand_milli();
        let ctx = PlaceCtx {
            cluster: &cluster,
            blocked: &blocked,
            tie_rank: Some(rank),
            partition: part,
            // The FGD protocol has no departures and no times.
            job_end: None,
            busy_until: None,
        };
        match place(&ctx, policy, &req) {
            Ok(parts) => {
                for a in parts {
                    let node = cluster.node(a.node);
                    let was_whole8 = node.gpus == 8 && node.gpus_all_free();
                    cluster.take(&a);
                    let node = cluster.node(a.node);
                    if was_whole8 && !node.gpus_all_free() {
                        whole8 -= 1;
                    }
                    used += u64::from(a.gpu_milli) * u64::from(a.gpus.count());
                    allocs.push(a);
                }
            }
            Err(_) => failed += 1,
        }
        if check_every > 0 && (k + 1) % check_every == 0 {
            check(&cluster, &allocs, used);
        }
        let arrived_pct = arrived as f64 * 100.0 / capacity as f64;
        let b = (arrived_pct + 0.5).floor() as usize;
        if b < bins.len() {
            let free = capacity - used;
            let bin = &mut bins[b];
            bin.events += 1;
            bin.alloc_pct += used as f64 * 100.0 / capacity as f64;
            bin.whole8 += whole8 as f64;
            bin.whole8_share_pct += if free == 0 { 0.0 } else { (whole8 * 8000) as f64 * 100.0 / free as f64 };
        }
    }
    check(&cluster, &allocs, used);
    RunResult {
        bins,
        pods: stream.len() as u64,
        failed,
        final_alloc_pct: used as f64 * 100.0 / capacity as f64,
    }
}

fn check(cluster: &Cluster, allocs: &[NodeAlloc], used: u64) {
    if let Err(e) = check_accounting(cluster, allocs.iter()) {
        panic!("invariant 1 broken: {e}");
    }
    assert_eq!(cluster.used_gpu_milli(), used, "used milli-GPUs drifted");
}

/// The summary of one policy on one pod list, over seeds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PolicySummary {
    /// Seeds run.
    pub seeds: usize,
    /// Unallocated GPU % at 100 % arrived demand, mean over seeds (the FGD bar charts).
    pub unallocated_gpu_pct_at_100: f64,
    /// The same, median over seeds.
    pub unallocated_gpu_pct_at_100_median: f64,
    /// Unallocated GPUs at 100 %, mean over seeds.
    pub unallocated_gpus_at_100: f64,
    /// Unallocated GPU % (mean over seeds) at 90, 100, 110, 120 and 130 % arrived demand.
    pub unallocated_gpu_pct_at: BTreeMap<String, f64>,
    /// Fully free 8-GPU nodes at 90 % arrived demand, mean over seeds.
    pub whole_free_nodes_at_90: f64,
    /// Share (%) of the free GPUs that sit in fully free 8-GPU nodes at 90 %, mean over seeds.
    pub whole_free_gpu_share_pct_at_90: f64,
    /// Fully free 8-GPU nodes at 100 %, mean over seeds.
    pub whole_free_nodes_at_100: f64,
    /// Pods that fit nowhere, mean over seeds.
    pub failed_pods: f64,
    /// Pods in the stream, mean over seeds.
    pub pods: f64,
    /// The artifact's number at 100 % for this policy and list, when it has one.
    pub artifact_unallocated_gpu_pct_at_100: Option<f64>,
    /// Per seed: unallocated GPU % at 100 %.
    pub per_seed_at_100: Vec<f64>,
    /// The 75–120 % curve: (arrived %, mean over seeds, median over seeds).
    pub curve: Vec<(u32, f64, f64)>,
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// Summarises the runs of one policy on one list.
pub fn summarise(runs: &[RunResult], total_gpus: u64, artifact: Option<f64>) -> PolicySummary {
    let at = |x: u32| -> Vec<f64> { runs.iter().filter_map(|r| r.unalloc_at(x)).collect() };
    let at100 = at(100);
    let mut points = BTreeMap::new();
    for x in [90, 100, 110, 120, 130] {
        points.insert(x.to_string(), mean(&at(x)));
    }
    let w90: Vec<f64> = runs.iter().filter_map(|r| r.whole8_at(90)).collect();
    let s90: Vec<f64> = runs.iter().filter_map(|r| r.whole8_share_at(90)).collect();
    let w100: Vec<f64> = runs.iter().filter_map(|r| r.whole8_at(100)).collect();
    PolicySummary {
        seeds: runs.len(),
        unallocated_gpu_pct_at_100: mean(&at100),
        unallocated_gpu_pct_at_100_median: median(&at100),
        unallocated_gpus_at_100: mean(&at100) * total_gpus as f64 / 100.0,
        unallocated_gpu_pct_at: points,
        whole_free_nodes_at_90: mean(&w90),
        whole_free_gpu_share_pct_at_90: mean(&s90),
        whole_free_nodes_at_100: mean(&w100),
        failed_pods: mean(&runs.iter().map(|r| r.failed as f64).collect::<Vec<_>>()),
        pods: mean(&runs.iter().map(|r| r.pods as f64).collect::<Vec<_>>()),
        artifact_unallocated_gpu_pct_at_100: artifact,
        per_seed_at_100: at100,
        curve: CURVE
            .map(|x| {
                let v = at(x);
                (x, mean(&v), median(&v))
            })
            .collect(),
    }
}

/// The artifact's unallocated GPU % at 100 % (mean over its 10 seeds), by (pod list, our
/// policy name), from `anchors/fgd_unalloc_summary.csv`; empty when the file is absent.
pub fn artifact_numbers(traces: &TraceDir) -> BTreeMap<(String, String), f64> {
    let mut out = BTreeMap::new();
    let Ok(mut r) = csv::Reader::from_path(traces.path("anchors/fgd_unalloc_summary.csv")) else {
        return out;
    };
    let Ok(h) = r.headers().cloned() else { return out };
    let col = |name: &str| h.iter().position(|c| c == name);
    let (Some(w), Some(p), Some(v)) = (col("workload"), col("policy"), col("unalloc_pct_mean_at_100")) else {
        return out;
    };
    for rec in r.records().flatten() {
        let ours = match rec.get(p).unwrap_or("") {
            "01-Random" => "random",
            "05-BestFit" => "best-fit",
            "06-FGD" => "fgd",
            _ => continue,
        };
        if let Some(x) = rec.get(v).and_then(|s| s.parse::<f64>().ok()) {
            out.insert((rec.get(w).unwrap_or("").to_owned(), ours.to_owned()), x);
        }
    }
    out
}

/// The experiment's results: per pod list, per policy.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FgdReport {
    /// Seeds run, one pod stream each.
    pub seeds: Vec<u64>,
    /// Pod lists in run order.
    pub pod_lists: Vec<String>,
    /// Total GPUs of the cluster.
    pub total_gpus: u64,
    /// `results[list][policy]`.
    pub results: BTreeMap<String, BTreeMap<String, PolicySummary>>,
    /// Policies in report order.
    pub policies: Vec<String>,
}

/// Runs the experiment on the cluster `nodes` with the lists' pods as given (the entry point
/// for fixtures and reduced runs; [`run`] loads the real files).
pub fn run_with(
    nodes: &[OpenbNode],
    lists: &[(String, Vec<OpenbPod>)],
    opts: &FgdOptions,
    artifact: &BTreeMap<(String, String), f64>,
    progress: &dyn Progress,
) -> Result<FgdReport, SimError> {
    let total_gpus: u64 = nodes.iter().map(|n| u64::from(n.gpus)).sum();
    let capacity = total_gpus * u64::from(MILLI);
    for p in &opts.policies {
        make_policy(p, &[], 0)?;
    }
    let mut results = BTreeMap::new();
    progress.add_total((lists.len() * opts.policies.len() * opts.seeds.len()) as u64);
    for (name, pods) in lists {
        let streams: Vec<(u64, Vec<usize>, Vec<u32>)> = opts
            .seeds
            .iter()
            .map(|&s| {
                let (st, rank) = pod_stream(pods, nodes.len(), capacity, opts.inflation, s);
                (s, st, rank)
            })
            .collect();
        let work: Vec<(usize, usize)> = (0..opts.policies.len())
            .flat_map(|p| (0..streams.len()).map(move |s| (p, s)))
            .collect();
        let runs = run_parallel(&work, opts.jobs, |&(p, s)| {
            let (seed, stream, rank) = &streams[s];
            let policy = make_policy(&opts.policies[p], pods, *seed).expect("checked above");
            let r = run_once(nodes, pods, stream, rank, policy.as_ref(), opts.check_every);
            progress.advance(1, &format!("{name} {} seed {seed}", opts.policies[p]));
            r
        });
        let mut by_policy = BTreeMap::new();
        for (p, policy) in opts.policies.iter().enumerate() {
            let mine: Vec<RunResult> = work
                .iter()
                .zip(&runs)
                .filter(|((pi, _), _)| *pi == p)
                .map(|(_, r)| r.clone())
                .collect();
            let a = artifact.get(&(name.clone(), policy.clone())).copied();
            by_policy.insert(policy.clone(), summarise(&mine, total_gpus, a));
        }
        results.insert(name.clone(), by_policy);
    }
    Ok(FgdReport {
        seeds: opts.seeds.clone(),
        pod_lists: lists.iter().map(|(n, _)| n.clone()).collect(),
        total_gpus,
        results,
        policies: opts.policies.clone(),
    })
}

/// Runs the experiment on the real openb files.
pub fn run(traces: &TraceDir, opts: &FgdOptions, progress: &dyn Progress) -> Result<FgdReport, SimError> {
    let nodes = traces.openb_nodes()?;
    let mut lists = Vec::new();
    for &v in &opts.pod_lists {
        lists.push((v.name().to_owned(), traces.openb_pods(v)?));
    }
    run_with(&nodes, &lists, opts, &artifact_numbers(traces), progress)
}

impl FgdReport {
    /// The `summary.json` value: `"policies"` holds one object per policy with the numbers
    /// of the first pod list at top level and every list under `"pod_lists"`.
    pub fn summary_json(&self) -> serde_json::Value {
        let mut policies = serde_json::Map::new();
        for p in &self.policies {
            let mut obj = serde_json::Map::new();
            if let Some(first) = self.pod_lists.first().and_then(|l| self.results[l].get(p)) {
                obj.insert("pod_list".into(), self.pod_lists[0].clone().into());
                obj.insert("unallocated_gpu_pct_at_100".into(), first.unallocated_gpu_pct_at_100.into());
                obj.insert("whole_free_nodes_at_90".into(), first.whole_free_nodes_at_90.into());
            }
            let mut lists = serde_json::Map::new();
            for l in &self.pod_lists {
                if let Some(s) = self.results[l].get(p) {
                    lists.insert(l.clone(), serde_json::to_value(s).unwrap_or_default());
                }
            }
            obj.insert("pod_lists".into(), lists.into());
            policies.insert(p.clone(), obj.into());
        }
        serde_json::json!({
            "experiment": "fgd",
            "protocol": "ANCHORS.md A1/A1r: shuffle, inflate to 130 % of capacity, place one at a time, no departures or retries",
            "seeds": self.seeds,
            "total_gpus": self.total_gpus,
            "pod_lists": self.pod_lists,
            "policies": policies,
        })
    }

    /// Writes `summary.json`, `fgd_summary.csv`, `fgd_curve.csv`, `fgd_seeds.csv` and one
    /// `fgd_curve_<list>.png` per pod list into `out`.
    pub fn write(&self, out: &Path) -> Result<(), SimError> {
        report::write_json(&out.join("summary.json"), &self.summary_json())?;
        let mut rows = vec![vec![
            "pod_list".to_string(),
            "policy".into(),
            "seeds".into(),
            "unalloc_pct_at_90".into(),
            "unalloc_pct_at_100".into(),
            "unalloc_pct_at_100_median".into(),
            "unalloc_pct_at_110".into(),
            "unalloc_pct_at_120".into(),
            "unalloc_pct_at_130".into(),
            "unalloc_gpus_at_100".into(),
            "whole_free_nodes_at_90".into(),
            "whole_free_gpu_share_pct_at_90".into(),
            "failed_pods".into(),
            "artifact_unalloc_pct_at_100".into(),
        ]];
        let mut curve = vec![vec!["pod_list".to_string(), "policy".into(), "arrived_pct".into(), "unalloc_pct_mean".into(), "unalloc_pct_median".into()]];
        let mut seeds = vec![vec!["pod_list".to_string(), "policy".into(), "seed".into(), "unalloc_pct_at_100".into()]];
        for l in &self.pod_lists {
            let mut series = Vec::new();
            for p in &self.policies {
                let Some(s) = self.results[l].get(p) else { continue };
                let f = |x: f64| format!("{x:.3}");
                rows.push(vec![
                    l.clone(),
                    p.clone(),
                    s.seeds.to_string(),
                    f(s.unallocated_gpu_pct_at["90"]),
                    f(s.unallocated_gpu_pct_at_100),
                    f(s.unallocated_gpu_pct_at_100_median),
                    f(s.unallocated_gpu_pct_at["110"]),
                    f(s.unallocated_gpu_pct_at["120"]),
                    f(s.unallocated_gpu_pct_at["130"]),
                    f(s.unallocated_gpus_at_100),
                    f(s.whole_free_nodes_at_90),
                    f(s.whole_free_gpu_share_pct_at_90),
                    f(s.failed_pods),
                    s.artifact_unallocated_gpu_pct_at_100.map(f).unwrap_or_default(),
                ]);
                for &(x, m, med) in &s.curve {
                    curve.push(vec![l.clone(), p.clone(), x.to_string(), f(m), f(med)]);
                }
                for (seed, v) in self.seeds.iter().zip(&s.per_seed_at_100) {
                    seeds.push(vec![l.clone(), p.clone(), seed.to_string(), f(*v)]);
                }
                series.push(Series {
                    name: p.clone(),
                    points: s.curve.iter().filter(|c| c.2.is_finite()).map(|&(x, _, med)| (f64::from(x), med)).collect(),
                });
            }
            report::plot_lines(
                &out.join(format!("fgd_curve_{l}.png")),
                &format!("openb {l}: unallocated GPU % (median over seeds)"),
                "arrived GPU demand (% of capacity)",
                "unallocated GPU %",
                &series,
            )?;
        }
        report::write_csv(&out.join("fgd_summary.csv"), &rows)?;
        report::write_csv(&out.join("fgd_curve.csv"), &curve)?;
        report::write_csv(&out.join("fgd_seeds.csv"), &seeds)?;
        Ok(())
    }
}
