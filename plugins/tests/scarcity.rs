//! The GPU-model scarcity key of `topo-bestfit` with a workload model
//! ([`Workload::model_pressure`], [`Workload::scarce_now`]): an untyped request never takes a
//! scarce model when an equally good node of a common model exists; typed requests, and every
//! request of a workload without typed shapes, are placed exactly as without the key;
//! placement stays deterministic.

use std::sync::Arc;

use flotilla_core::cluster::{Cluster, GpuMask, NodeAlloc, NodeId, NodeSpec, PartId, MILLI};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::Request;
use flotilla_core::placement::{place, PlaceCtx, PlacementPolicy};
use flotilla_plugins::placement::{FgdTarget, TopoBestFit, Workload};
use proptest::prelude::*;

const SCARCE: &str = "T4";
const COMMON: &str = "G2";

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

/// `pairs` twin nodes: node 2i of the scarce model, node 2i+1 of the common one, otherwise
/// identical (8 GPUs, 64 CPUs, 512 GiB).
fn twins(pairs: usize) -> Cluster {
    let specs: Vec<NodeSpec> = (0..pairs * 2)
        .map(|i| NodeSpec {
            name: format!("n{i}"),
            gpus: 8,
            gpu_type: Some(if i % 2 == 0 { SCARCE } else { COMMON }.into()),
            cpu_milli: 64_000,
            mem_mib: 512_000,
            pod: "p".into(),
        })
        .collect();
    let mut c = Cluster::from_specs(&specs);
    c.add_partition("all", (0..pairs as u32 * 2).map(NodeId).collect(), true);
    c
}

fn target(gpus: u32, gpu_milli: u32, types: &[&str], weight: f64) -> FgdTarget {
    FgdTarget {
        cpu_milli: 4000,
        gpu_milli,
        gpus,
        gpu_types: types.iter().map(|s| s.to_string()).collect(),
        weight,
    }
}

/// A workload where pods requiring the scarce model ask for more than it has: its pressure
/// is 1.28, the common model's 0.
fn typed_workload() -> Workload {
    Workload::new(vec![
        target(1, MILLI, &[SCARCE], 4.0),
        target(2, MILLI, &[SCARCE], 2.0),
        target(1, MILLI, &[], 2.0),
        target(1, 500, &[], 1.0),
        target(4, MILLI, &[], 0.5),
    ])
}

fn untyped_workload() -> Workload {
    Workload::new(vec![target(1, MILLI, &[], 2.0), target(1, 500, &[], 1.0), target(4, MILLI, &[], 0.5)])
}

/// One allocation to apply to both twins of a pair: (pair, GPUs as a mask, milli per GPU,
/// CPUs).
type Fill = (usize, u8, u32, u64);

fn fills(pairs: usize) -> impl Strategy<Value = Vec<Fill>> {
    prop::collection::vec((0..pairs, any::<u8>(), prop::sample::select(vec![200u32, 500, 1000]), 0u64..8), 0..12)
}

/// Applies `fills` to both nodes of each pair (a fill that does not fit is skipped on both).
fn fill(c: &mut Cluster, fills: &[Fill]) {
    for &(pair, mask, milli, cpus) in fills {
        for id in [pair * 2, pair * 2 + 1] {
            let n = c.node(NodeId(id as u32));
            let gpus = if milli < MILLI {
                match (0..8).find(|&g| n.gpu_milli_used[g as usize] + milli <= MILLI) {
                    Some(g) => GpuMask::single(g),
                    None => continue,
                }
            } else {
                GpuMask(u64::from(mask)).minus(GpuMask::all(8).minus(n.free_gpus))
            };
            if gpus.count() == 0 || n.free_cpu_milli < cpus * 1000 {
                continue;
            }
            c.take(&NodeAlloc { node: NodeId(id as u32), gpus, gpu_milli: milli, cpu_milli: cpus * 1000, mem_mib: 1024 });
        }
    }
}

/// An untyped request: whole GPUs (1–8) or a share of one GPU, on one node.
fn request() -> impl Strategy<Value = Request> {
    (1u32..9, prop::option::weighted(0.3, prop::sample::select(vec![100u32, 300, 500, 700])), 1u64..16).prop_map(
        |(gpus, share, cpus)| {
            let gpus = if share.is_some() { 1 } else { gpus };
            Request {
                gpus,
                nodes: Some(1),
                gpus_per_node: Some(gpus),
                gpu_milli: share.unwrap_or(MILLI),
                cpu_milli_per_node: cpus * 1000,
                mem_mib_per_node: 1024,
                topology: TopologyKind::Node,
                ..Request::default()
            }
        },
    )
}

fn node_of(c: &Cluster, policy: &dyn PlacementPolicy, req: &Request) -> Option<NodeId> {
    place(&ctx(c), policy, req).ok().map(|p| p[0].node)
}

#[test]
fn pressure_is_the_share_of_the_model_that_typed_pods_claim() {
    let c = twins(2);
    let w = typed_workload();
    // Demand by weight: typed 4·1000 + 2·2000 = 8000, all 8000 + 2·1000 + 1·500 + 0.5·4000
    // = 12500 (the common factor 1/9.5 cancels); the scarce model holds 16 of the 32 GPUs:
    // P = (8000/16) / (12500/32) = 1.28.
    let p = w.model_pressure(&c, PartId(0), Some(SCARCE));
    assert!((p - 1.28).abs() < 1e-9, "{p}");
    // Names compare without case; the common model, an untyped node and a workload without
    // typed shapes have none.
    assert_eq!(w.model_pressure(&c, PartId(0), Some("t4")), p);
    assert_eq!(w.model_pressure(&c, PartId(0), Some(COMMON)), 0.0);
    assert_eq!(w.model_pressure(&c, PartId(0), None), 0.0);
    assert_eq!(untyped_workload().model_pressure(&c, PartId(0), Some(SCARCE)), 0.0);
    // A shape accepting both models spreads over both in proportion to their GPUs.
    let both = Workload::new(vec![target(1, MILLI, &[SCARCE, COMMON], 1.0), target(1, MILLI, &[], 1.0)]);
    assert!((both.model_pressure(&c, PartId(0), Some(COMMON)) - 0.5).abs() < 1e-9);
    // The memo follows the inventory: with 8 of 32 GPUs, P = (8000/8) / (12500/32) = 2.56.
    let specs: Vec<NodeSpec> = (0..4)
        .map(|i| NodeSpec {
            name: format!("n{i}"),
            gpus: 8,
            gpu_type: Some(if i == 0 { SCARCE } else { COMMON }.into()),
            cpu_milli: 64_000,
            mem_mib: 512_000,
            pod: "p".into(),
        })
        .collect();
    let mut bigger = Cluster::from_specs(&specs);
    bigger.add_partition("all", (0..4).map(NodeId).collect(), true);
    assert!((w.model_pressure(&bigger, PartId(0), Some(SCARCE)) - 2.56).abs() < 1e-9);
}

#[test]
fn a_model_is_scarce_once_its_free_share_falls_to_its_pressure_times_the_free_share() {
    // A quarter of the demand requires the T4, which holds half the GPUs:
    // P = (250/16) / (1000/32) = 0.5.
    let w = Workload::new(vec![target(1, MILLI, &[SCARCE], 1.0), target(1, MILLI, &[], 3.0)]);
    let mut c = twins(2);
    let p = w.model_pressure(&c, PartId(0), Some(SCARCE));
    assert!((p - 0.5).abs() < 1e-9, "{p}");
    // All free: T4 free share 1 > 0.5 · 1: common.
    assert!(!w.scarce_now(&c, PartId(0), Some(SCARCE)));
    // 12 of 16 T4 GPUs used: its free share 4/16 = 0.25; the cluster's 20/32 = 0.625, times
    // 0.5 = 0.3125 ≥ 0.25: scarce. The memo sees the change.
    c.take(&NodeAlloc { node: NodeId(0), gpus: GpuMask::all(8), gpu_milli: MILLI, cpu_milli: 0, mem_mib: 0 });
    c.take(&NodeAlloc { node: NodeId(2), gpus: GpuMask(0xf), gpu_milli: MILLI, cpu_milli: 0, mem_mib: 0 });
    assert!(w.scarce_now(&c, PartId(0), Some(SCARCE)));
    // 8 of 16 G2 GPUs used too: the cluster's free share 12/32 · 0.5 = 0.1875 < 0.25: common
    // again (the untyped pods still to come cannot all go to the G2 nodes).
    c.take(&NodeAlloc { node: NodeId(1), gpus: GpuMask::all(8), gpu_milli: MILLI, cpu_milli: 0, mem_mib: 0 });
    assert!(!w.scarce_now(&c, PartId(0), Some(SCARCE)));
    // A common model, an untyped node and a model of pressure 1.28 on a fresh cluster.
    assert!(!w.scarce_now(&c, PartId(0), Some(COMMON)));
    assert!(!w.scarce_now(&c, PartId(0), None));
    assert!(typed_workload().scarce_now(&twins(2), PartId(0), Some(SCARCE)));
}

#[test]
fn an_untyped_pod_leaves_the_scarce_model_even_against_exact_fill() {
    // Node 0 (T4) has one GPU left: exact fill for a 1-GPU pod; node 1 (G2) is wholly free.
    // Without the term the exact fill wins; with it the pod keeps the T4 for typed pods.
    let mut c = twins(1);
    c.take(&NodeAlloc { node: NodeId(0), gpus: GpuMask(0x7f), gpu_milli: MILLI, cpu_milli: 8000, mem_mib: 1024 });
    let w = Arc::new(typed_workload());
    let req = Request { cpu_milli_per_node: 4000, ..Request::gpus(1, TopologyKind::Node) };
    assert_eq!(node_of(&c, &TopoBestFit::with_workload(w.clone()), &req), Some(NodeId(1)));
    assert_eq!(node_of(&c, &TopoBestFit::with_workload(w.clone()).without_scarcity(), &req), Some(NodeId(0)));
    // A pod that requires the T4 takes it either way.
    let typed = Request { gpu_types: vec![SCARCE.into()], ..req.clone() };
    assert_eq!(node_of(&c, &TopoBestFit::with_workload(w), &typed), Some(NodeId(0)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every scarce node has a common twin in the same state: an untyped request never lands
    /// on the scarce model.
    #[test]
    fn untyped_requests_never_take_a_scarce_model_over_an_equal_common_one(
        pairs in 1usize..5, fs in fills(4), req in request()
    ) {
        let mut c = twins(pairs);
        let fs: Vec<Fill> = fs.into_iter().filter(|f| f.0 < pairs).collect();
        fill(&mut c, &fs);
        let ours = TopoBestFit::with_workload(Arc::new(typed_workload()));
        if let Some(id) = node_of(&c, &ours, &req) {
            prop_assert_eq!(c.node(id).gpu_type.as_deref(), Some(COMMON), "{:?} on {:?}", req, id);
        }
    }

    /// Typed requests, and any request when the workload has no typed shapes, are placed
    /// exactly as without the term.
    #[test]
    fn typed_requests_and_untyped_workloads_are_unaffected(
        pairs in 1usize..5, fs in fills(4), req in request(), ty in 0usize..3
    ) {
        let mut c = twins(pairs);
        let fs: Vec<Fill> = fs.into_iter().filter(|f| f.0 < pairs).collect();
        fill(&mut c, &fs);
        let types: Vec<String> = match ty {
            0 => vec![SCARCE.into()],
            1 => vec![COMMON.into()],
            _ => vec![SCARCE.into(), COMMON.into()],
        };
        let typed = Request { gpu_types: types, ..req.clone() };
        let w = Arc::new(typed_workload());
        let with = place(&ctx(&c), &TopoBestFit::with_workload(w.clone()), &typed);
        let without = place(&ctx(&c), &TopoBestFit::with_workload(w).without_scarcity(), &typed);
        prop_assert_eq!(with, without);
        let u = Arc::new(untyped_workload());
        let with = place(&ctx(&c), &TopoBestFit::with_workload(u.clone()), &req);
        let without = place(&ctx(&c), &TopoBestFit::with_workload(u).without_scarcity(), &req);
        prop_assert_eq!(with, without);
    }

    /// The same requests on the same cluster give the same placements, whatever the
    /// policy's memo holds (one instance reused, one fresh per request).
    #[test]
    fn placement_with_scarcity_is_deterministic(pairs in 1usize..5, reqs in prop::collection::vec(request(), 1..20)) {
        let w = Arc::new(typed_workload());
        let reused = TopoBestFit::with_workload(w.clone());
        let mut a = twins(pairs);
        let mut b = twins(pairs);
        for req in &reqs {
            let pa = place(&ctx(&a), &reused, req);
            let pb = place(&ctx(&b), &TopoBestFit::with_workload(Arc::new(typed_workload())), req);
            prop_assert_eq!(&pa, &pb);
            if let Ok(parts) = pa {
                for p in &parts {
                    a.take(p);
                    b.take(p);
                }
            }
        }
    }
}
