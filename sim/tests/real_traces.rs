//! Loads every real file in `../shared/traces` and checks the row counts and facts that
//! `../shared/traces/README.md` states. The shared folder sits beside the repository.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

use flotilla_sim::traces::dlrm::{Censored, TRACE_END_S};
use flotilla_sim::traces::openb::{OpenbVariant, Phase};
use flotilla_sim::traces::philly::ANALYSIS_WINDOW_S;
use flotilla_sim::traces::{itp, JobKind, TraceDir};

fn traces() -> TraceDir {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("sim/ has a parent")
        .to_owned();
    let dir = TraceDir::new(workspace.join(TraceDir::DEFAULT));
    assert!(
        dir.root().is_dir(),
        "{} is missing: the shared folder must sit beside the repository",
        dir.root().display()
    );
    dir
}

/// Counts of each key, as a sorted map.
fn histogram<K: Ord>(keys: impl IntoIterator<Item = K>) -> BTreeMap<K, usize> {
    let mut counts = BTreeMap::new();
    for k in keys {
        *counts.entry(k).or_insert(0) += 1;
    }
    counts
}

#[test]
fn openb_nodes_match_the_readme() {
    let nodes = traces().openb_nodes().unwrap();
    assert_eq!(nodes.len(), 1_213);
    assert_eq!(nodes.iter().map(|n| u64::from(n.gpus)).sum::<u64>(), 6_212);
    let shapes = histogram(nodes.iter().map(|n| n.gpus));
    assert_eq!(
        shapes,
        BTreeMap::from([(1, 24), (2, 518), (4, 54), (8, 617)])
    );
    let by_model = |gpus: u32| {
        histogram(
            nodes
                .iter()
                .filter(|n| n.gpus == gpus)
                .map(|n| n.gpu_model.as_str()),
        )
    };
    assert_eq!(
        by_model(8),
        BTreeMap::from([("G2", 549), ("G3", 39), ("V100M16", 8), ("V100M32", 21)])
    );
    assert_eq!(by_model(2), BTreeMap::from([("P100", 131), ("T4", 387)]));
}

#[test]
fn openb_pod_lists_match_the_readme() {
    let dir = traces();
    assert_eq!(
        dir.openb_variants(),
        OpenbVariant::ALL.to_vec(),
        "all 17 pod lists present"
    );
    let expected_rows = [
        ("default", 8_152),
        ("cpu050", 7_439),
        ("cpu100", 7_853),
        ("cpu200", 8_832),
        ("cpu250", 9_420),
        ("gpushare40", 8_152),
        ("gpushare60", 8_152),
        ("gpushare80", 8_152),
        ("gpushare100", 8_152),
        ("gpuspec10", 8_152),
        ("gpuspec20", 8_152),
        ("gpuspec25", 8_152),
        ("gpuspec33", 8_152),
        ("multigpu20", 8_324),
        ("multigpu30", 8_508),
        ("multigpu40", 8_746),
        ("multigpu50", 9_061),
    ];
    for (name, rows) in expected_rows {
        let variant: OpenbVariant = name.parse().unwrap();
        let pods = dir.openb_pods(variant).unwrap();
        assert_eq!(pods.len(), rows, "{name}");
        assert!(
            pods.iter()
                .all(|p| p.kind == JobKind::Other && p.user_or_group.is_none()),
            "{name}"
        );
        assert!(pods.iter().all(|p| p.gpus <= 8), "{name}");
        if variant.has_times() {
            assert!(
                pods.iter().all(|p| p.submit_s.is_some()
                    && p.duration_s.is_some()
                    && p.qos.is_some()
                    && p.phase.is_some()
                    && p.deletion_s.is_some()),
                "{name}"
            );
            // Only Pending pods were never scheduled.
            assert!(
                pods.iter()
                    .all(|p| (p.phase == Some(Phase::Pending)) == p.scheduled_s.is_none()),
                "{name}"
            );
        } else {
            assert!(
                pods.iter().all(|p| p.submit_s.is_none()
                    && p.duration_s.is_none()
                    && p.qos.is_none()
                    && p.phase.is_none()
                    && p.scheduled_s.is_none()
                    && p.deletion_s.is_none()),
                "{name}"
            );
        }
        let constrained = pods.iter().filter(|p| !p.gpu_spec.is_empty()).count();
        assert_eq!(
            name.starts_with("gpuspec"),
            constrained > 0,
            "{name}: {constrained} pods with gpu_spec"
        );
    }
}

#[test]
fn openb_default_facts() {
    let pods = traces().openb_pods(OpenbVariant::Default).unwrap();
    assert_eq!(
        pods.iter()
            .filter(|p| p.phase == Some(Phase::Pending))
            .count(),
        897
    );
    assert_eq!(
        pods.iter().filter(|p| p.is_gpu_sharing()).count(),
        3_078,
        "fractional pods (ANCHORS A1)"
    );
    assert_eq!(
        pods.iter().filter(|p| p.gpus == 0).count(),
        1_088,
        "CPU-only pods (ANCHORS A1r)"
    );
    // duration = deletion − scheduled, or − creation for Pending pods.
    for p in &pods {
        let start = p.scheduled_s.or(p.submit_s).unwrap();
        assert_eq!(
            p.duration_s,
            Some(p.deletion_s.unwrap() - start),
            "pod {}",
            p.pod
        );
    }
    let mut durations: Vec<u64> = pods.iter().map(|p| p.duration_s.unwrap()).collect();
    durations.sort_unstable();
    assert_eq!(durations[durations.len() / 2], 485, "median duration");
    // Summed demand is 97.98 % of 6,212,000 milli-GPUs (ANCHORS A1r).
    let demand: u64 = pods.iter().map(|p| p.gpu_demand_milli()).sum();
    assert_eq!(demand * 10_000 / 6_212_000, 9_798);
    let multigpu50 = traces().openb_pods(OpenbVariant::Multigpu50).unwrap();
    let demand: u64 = multigpu50.iter().map(|p| p.gpu_demand_milli()).sum();
    assert_eq!(
        demand * 1_000 / 6_212_000,
        1_828,
        "multigpu50 is 182.9 % of capacity"
    );
}

#[test]
fn itp_jobs_match_the_readme() {
    let dir = traces();
    let jobs = dir.itp_jobs().unwrap();
    assert_eq!(jobs.len(), 69_351);
    let gpus = histogram(jobs.iter().map(|j| j.gpus));
    assert_eq!(
        gpus,
        BTreeMap::from([
            (1, 57_682),
            (2, 1_483),
            (4, 2_371),
            (8, 7_009),
            (16, 381),
            (32, 354),
            (64, 71)
        ])
    );
    assert_eq!(jobs.iter().filter(|j| j.gpus > 8).count(), 806);
    let gpu_seconds: u64 = jobs.iter().map(|j| u64::from(j.gpus) * j.duration_s).sum();
    assert_eq!((gpu_seconds + 1_800) / 3_600, 1_632_720, "GPU-hours");
    assert!(jobs
        .iter()
        .all(|j| j.duration_s > 0 && j.kind == JobKind::Train && j.user_or_group.is_none()));
    let names = itp::clusters(&jobs);
    assert_eq!(names.len(), 10);
    assert_eq!(names[0], "cluster01");
    assert_eq!(names[9], "cluster10");
    // Ordered by cluster, then upstream row; upstream rows are sorted by submission time.
    for pair in jobs.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.cluster == b.cluster {
            assert_eq!(b.job_idx, a.job_idx + 1);
            assert!(a.submit_s <= b.submit_s, "{} row {}", b.cluster, b.job_idx);
        } else {
            assert!(a.cluster < b.cluster);
            assert_eq!(b.job_idx, 0);
        }
    }
    let c4 = dir.itp_cluster_jobs("cluster04").unwrap();
    assert_eq!(c4.len(), 15_802);
    assert_eq!(c4.iter().map(|j| j.gpus).max(), Some(64));
    assert!(dir.itp_cluster_jobs("cluster11").is_err());
}

#[test]
fn philly_matches_the_readme() {
    let dir = traces();
    let jobs = dir.philly_jobs().unwrap();
    assert_eq!(jobs.len(), 82_247);
    let gpus = histogram(jobs.iter().map(|j| j.gpus));
    assert_eq!(
        gpus,
        BTreeMap::from([
            (1, 76_627),
            (2, 1_818),
            (4, 1_870),
            (8, 1_643),
            (12, 7),
            (16, 199),
            (24, 7),
            (32, 67),
            (64, 6),
            (128, 3)
        ])
    );
    let vcs: HashSet<&str> = jobs.iter().map(|j| j.vc()).collect();
    assert_eq!(vcs.len(), 15);
    assert!(
        vcs.contains("6214e9"),
        "VC hashes stay text even when they look like numbers"
    );
    assert!(jobs.iter().all(|j| j.kind == JobKind::Train));
    assert_eq!(jobs.iter().filter(|j| j.duration_s < 60).count(), 7_654);
    let mut durations: Vec<u64> = jobs.iter().map(|j| j.duration_s).collect();
    durations.sort_unstable();
    assert_eq!(durations[durations.len() / 2], 1_144, "median duration");
    let total: u64 = durations.iter().sum();
    assert_eq!(
        (total + jobs.len() as u64 / 2) / jobs.len() as u64,
        13_136,
        "mean duration"
    );
    assert_eq!(
        jobs.iter()
            .filter(|j| ANALYSIS_WINDOW_S.contains(&j.submit_s))
            .count(),
        68_510
    );
    assert!(jobs
        .windows(2)
        .all(|w| (w[0].submit_s, w[0].orig_row) < (w[1].submit_s, w[1].orig_row)));
    let distinct: HashSet<_> = jobs
        .iter()
        .map(|j| (j.submit_s, j.gpus, j.duration_s, j.vc()))
        .collect();
    assert_eq!(
        jobs.len() - distinct.len(),
        65,
        "rows duplicating another row"
    );
    let gpu_seconds: u64 = jobs.iter().map(|j| u64::from(j.gpus) * j.duration_s).sum();
    assert_eq!(gpu_seconds / 3_600 / 10_000, 97, "0.98 M GPU-hours");

    let machines = dir.philly_machines().unwrap();
    assert_eq!(machines.len(), 552);
    assert_eq!(machines.iter().map(|m| m.gpus).sum::<u32>(), 2_490);
    let shapes = histogram(machines.iter().map(|m| (m.gpus, m.gpu_mem_gb)));
    assert_eq!(shapes, BTreeMap::from([((2, 12), 321), ((8, 24), 231)]));

    let helios = dir.philly_vc_nodes_helios().unwrap();
    assert_eq!(helios.len(), 11);
    assert_eq!(helios.iter().map(|v| v.nodes_8gpu).sum::<u32>(), 352);
    assert!(
        helios.iter().all(|v| vcs.contains(v.vc.as_str())),
        "every Helios VC is a trace VC"
    );
}

#[test]
fn dlrm_matches_the_readme() {
    let instances = traces().dlrm_instances().unwrap();
    assert_eq!(instances.len(), 7_386);
    assert!(instances
        .iter()
        .all(|i| i.gpus == 1 && i.kind == JobKind::Infer));
    let censored = histogram(instances.iter().map(|i| format!("{:?}", i.censored)));
    assert_eq!(
        censored,
        BTreeMap::from([
            ("Both".to_owned(), 2_277),
            ("Left".to_owned(), 846),
            ("Right".to_owned(), 1_045),
            ("Uncensored".to_owned(), 3_218)
        ])
    );
    let services: HashSet<&str> = instances.iter().map(|i| i.service()).collect();
    assert_eq!(services.len(), 156);
    assert!(instances.iter().any(|i| i.max_per_node.is_none()));
    for i in &instances {
        assert_eq!(
            i.submit_s,
            i.creation_s.unwrap_or(0.0),
            "instance {}",
            i.instance
        );
        let end = i.deletion_s.unwrap_or(TRACE_END_S);
        let start = i.scheduled_s.or(i.creation_s).unwrap_or(0.0);
        assert!(
            (i.duration_s - (end - start)).abs() < 1e-6,
            "instance {}",
            i.instance
        );
        assert_eq!(
            i.censored == Censored::Both,
            i.creation_s.is_none() && i.deletion_s.is_none()
        );
    }
    // Peak concurrent GPUs from creation (0 if before the trace) to deletion (trace end if after).
    let mut events: Vec<(f64, i32)> = instances
        .iter()
        .flat_map(|i| [(i.submit_s, 1), (i.deletion_s.unwrap_or(TRACE_END_S), -1)])
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let peak = events
        .iter()
        .scan(0, |running, &(_, d)| {
            *running += d;
            Some(*running)
        })
        .max();
    assert_eq!(peak, Some(3_414));
}

#[test]
fn node_lists_and_topology_match_the_readme() {
    let dir = traces();
    let pai = dir.pai_v2020_machines().unwrap();
    assert_eq!(pai.len(), 1_897);
    assert_eq!(pai.iter().map(|m| m.gpus).sum::<u32>(), 6_742);
    let shapes = histogram(pai.iter().map(|m| (m.gpus, m.gpu_type.as_str())));
    assert_eq!(
        shapes,
        BTreeMap::from([
            ((0, "CPU"), 83),
            ((2, "P100"), 798),
            ((2, "T4"), 497),
            ((8, "MISC"), 280),
            ((8, "V100"), 104),
            ((8, "V100M32"), 135)
        ])
    );

    let spot = dir.spot_v2026_nodes().unwrap();
    assert_eq!(spot.len(), 4_278);
    assert_eq!(spot.iter().map(|n| n.gpus).sum::<u32>(), 10_412);
    assert_eq!(
        histogram(spot.iter().map(|n| n.gpus)),
        BTreeMap::from([(1, 3_396), (4, 10), (8, 872)])
    );
    let count = |gpus: u32, model: &str| {
        spot.iter()
            .filter(|n| n.gpus == gpus && n.gpu_model == model)
            .count()
    };
    assert_eq!(
        (
            count(1, "A10"),
            count(8, "A100-SXM4-80GB"),
            count(8, "H800")
        ),
        (2_494, 432, 219)
    );

    let hosts = dir.crux_topology().unwrap();
    assert_eq!(hosts.len(), 847);
    let tors = histogram(hosts.iter().map(|h| h.tor()));
    assert_eq!(tors.len(), 119);
    assert_eq!(tors.values().min(), Some(&2));
    assert_eq!(tors.values().max(), Some(&8));
    assert_eq!(tors.values().filter(|&&n| n == 8).count(), 68);
}
