//! Why one policy leaves more GPUs unallocated than another on the FGD protocol
//! (`../shared/traces/ANCHORS.md` §A1/A1r), seed by seed.
//!
//! With no departures, the unallocated share at 100 % arrived demand is the GPU demand of the
//! pods that failed before that point; this example breaks it down by pod class (CPU-only,
//! share, 1/2/4/8 GPUs), with the arrived % of each class's first failure, and shows where
//! the free GPU milli sits at 100 % (by node size: in fully free nodes, on untouched GPUs of
//! used nodes, in partly used GPUs, and how much of it sits behind fewer than 4 free CPUs),
//! and the fully free 8-GPU nodes at the first event at or past 90 % arrived demand.
//!
//! ```text
//! cargo run --release -p flotilla-sim --example fgd_why -- ../shared/traces multigpu40 42,43,44 topo-bestfit,fgd
//! ```
//!
//! Environment (read by this example only, never by the library):
//! * `WHY_BREAKERS=1` also prints, per node size and GPU model, which pods were the first on
//!   a node (the pods that broke up a wholly free node), by class and CPUs, before 100 %.
//! * `WHY_TABLE=1` runs the protocol itself instead ([`flotilla_sim::fgd::run`], the code of
//!   `flotilla sim fgd`, two threads), one list at a time (LIST may be comma-separated), and
//!   prints unallocated % at 100 % / fully free 8-GPU nodes at 90 % per policy (means over
//!   the seeds); with `WHY_OUT=DIR` it writes each list's report files into `DIR/<list>/`
//!   (`fgd_summary.csv`, `fgd_seeds.csv`, ...: the files `flotilla sim fgd` writes).

use std::collections::BTreeMap;

use flotilla_core::cluster::{NodeId, PartId, MILLI};
use flotilla_core::placement::{place, PlaceCtx};
use flotilla_sim::fgd::{make_policy, openb_cluster, pod_request, pod_stream};
use flotilla_sim::traces::openb::OpenbVariant;
use flotilla_sim::traces::TraceDir;

fn class(gpus: u32, milli: u32) -> String {
    match (gpus, milli) {
        (0, _) => "cpu".into(),
        (_, m) if m < MILLI => "share".into(),
        (g, _) => format!("{g}gpu"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        return Err("usage: fgd_why TRACES LIST SEEDS POLICIES (comma-separated)".into());
    }
    let traces = TraceDir::new(&args[1]);
    let variant: OpenbVariant = args[2].split(',').next().unwrap_or_default().parse()?;
    let seeds: Vec<u64> = args[3]
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let policies: Vec<&str> = args[4].split(',').collect();
    let nodes = traces.openb_nodes()?;
    if std::env::var_os("WHY_TABLE").is_some() {
        // One line per list and policy: the protocol's own summary (unallocated % at 100 %,
        // fully free 8-GPU nodes at 90 %), over the seeds.
        for list in args[2].split(',') {
            let v: OpenbVariant = list.parse()?;
            let opts = flotilla_sim::fgd::FgdOptions {
                pod_lists: vec![v],
                seeds: seeds.clone(),
                policies: policies.iter().map(|s| s.to_string()).collect(),
                jobs: 2,
                check_every: 0,
                ..Default::default()
            };
            let r = flotilla_sim::fgd::run(&traces, &opts, &flotilla_sim::progress::NoProgress)?;
            if let Some(out) = std::env::var_os("WHY_OUT") {
                let dir = std::path::Path::new(&out).join(list);
                std::fs::create_dir_all(&dir)?;
                r.write(&dir)?;
            }
            let line: Vec<String> = policies
                .iter()
                .map(|p| {
                    let s = &r.results[list][*p];
                    format!(
                        "{p} {:.2}/{:.1}",
                        s.unallocated_gpu_pct_at_100, s.whole_free_nodes_at_90
                    )
                })
                .collect();
            println!("{list}: {}", line.join("  "));
        }
        return Ok(());
    }
    let pods = traces.openb_pods(variant)?;
    let capacity: u64 = nodes
        .iter()
        .map(|n| u64::from(n.gpus) * u64::from(MILLI))
        .sum();
    let pct = |m: u64| m as f64 * 100.0 / capacity as f64;
    for &seed in &seeds {
        let (stream, rank) = pod_stream(&pods, nodes.len(), capacity, 1.3, seed);
        for &pname in &policies {
            let policy = make_policy(pname, &pods, seed)?;
            let mut cluster = openb_cluster(&nodes);
            let blocked = |_: NodeId| flotilla_core::cluster::GpuMask::EMPTY;
            let mut arrived = 0u64;
            // class -> (failed pods, failed milli, first failure arrived %)
            let mut failed: BTreeMap<String, (u64, u64, f64)> = BTreeMap::new();
            let mut whole8_at_90 = None;
            // (node GPUs, model) -> breaker class -> count: the first pod on each node.
            let mut breakers: BTreeMap<(u32, String), BTreeMap<String, u64>> = BTreeMap::new();
            for &i in &stream {
                let pod = &pods[i];
                arrived += pod.gpu_demand_milli();
                if pct(arrived) >= 100.5 {
                    break;
                }
                let ctx = PlaceCtx {
                    cluster: &cluster,
                    blocked: &blocked,
                    tie_rank: Some(&rank),
                    partition: PartId(0),
                    job_end: None,
                    busy_until: None,
                };
                match place(&ctx, policy.as_ref(), &pod_request(pod)) {
                    Ok(parts) => {
                        for a in parts {
                            let n = cluster.node(a.node);
                            if n.is_idle() {
                                let key = (n.gpus, n.gpu_type.clone().unwrap_or_default());
                                let c = format!(
                                    "{}/{}c",
                                    class(pod.gpus, pod.gpu_milli),
                                    pod.cpu_milli / 1000
                                );
                                *breakers.entry(key).or_default().entry(c).or_default() += 1;
                            }
                            cluster.take(&a);
                        }
                    }
                    Err(_) => {
                        let e = failed.entry(class(pod.gpus, pod.gpu_milli)).or_insert((
                            0,
                            0,
                            pct(arrived),
                        ));
                        e.0 += 1;
                        e.1 += pod.gpu_demand_milli();
                    }
                }
                if whole8_at_90.is_none() && pct(arrived) >= 90.0 {
                    whole8_at_90 = Some(cluster.fully_free_gpu_nodes(8));
                }
            }
            let used = cluster.used_gpu_milli();
            if std::env::var_os("WHY_BREAKERS").is_some() {
                for ((g, m), b) in &breakers {
                    let mut v: Vec<_> = b.iter().collect();
                    v.sort_by(|a, b| b.1.cmp(a.1));
                    let top: Vec<String> =
                        v.iter().take(8).map(|(c, n)| format!("{c}:{n}")).collect();
                    println!("  broke {g}x{m}: {}", top.join(" "));
                }
            }
            println!(
                "{} seed {seed} {pname}: unalloc at ~100 % {:.2} (failed demand {:.2}), whole 8-GPU nodes at 90 %: {}",
                args[2],
                100.0 - pct(used),
                pct(failed.values().map(|f| f.1).sum()),
                whole8_at_90.unwrap_or(0)
            );
            for (c, (n, m, first)) in &failed {
                println!(
                    "  failed {c:>6}: {n:>4} pods, {:.2} % of GPUs, first at {first:.1} %",
                    pct(*m)
                );
            }
            // node size -> (nodes, fully free nodes, free milli: whole-free nodes, untouched
            // GPUs on used nodes, partly used GPUs, free milli behind < 4 free CPUs)
            let mut free: BTreeMap<u32, [u64; 6]> = BTreeMap::new();
            for n in &cluster.nodes {
                let e = free.entry(n.gpus).or_default();
                e[0] += 1;
                let f: u64 = n.gpu_milli_used.iter().map(|&u| u64::from(MILLI - u)).sum();
                if n.gpus > 0 && n.gpus_all_free() {
                    e[1] += 1;
                    e[2] += f;
                } else {
                    e[3] += u64::from(n.free_gpus.count()) * u64::from(MILLI);
                    e[4] += n
                        .gpu_milli_used
                        .iter()
                        .filter(|&&u| u > 0 && u < MILLI)
                        .map(|&u| u64::from(MILLI - u))
                        .sum::<u64>();
                }
                if n.free_cpu_milli < 4000 {
                    e[5] += f;
                }
            }
            for (g, e) in &free {
                if *g == 0 {
                    continue;
                }
                println!(
                    "  {g}-GPU nodes {:>4}: fully free {:>3} ({:.2} %), untouched GPUs on used nodes {:.2} %, partly used GPUs {:.2} %, behind <4 CPUs {:.2} %",
                    e[0],
                    e[1],
                    pct(e[2]),
                    pct(e[3]),
                    pct(e[4]),
                    pct(e[5])
                );
            }
        }
    }
    Ok(())
}
