//! The experiments end to end: hand-computed fixtures, determinism, and reduced versions of
//! `fgd` and `gang` on the real traces (a few hundred rows, 1–2 seeds; well under a minute in
//! a debug build).

use std::path::PathBuf;

use flotilla_sim::fgd::{self, FgdOptions};
use flotilla_sim::gang::{self, GangOptions, TraceJob};
use flotilla_sim::progress::NoProgress;
use flotilla_sim::traces::openb::{OpenbNode, OpenbPod, OpenbVariant};
use flotilla_sim::traces::{JobKind, TraceDir};

fn traces() -> TraceDir {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("sim/ has a parent").to_owned();
    TraceDir::new(workspace.join(TraceDir::DEFAULT))
}

fn node(i: usize, gpus: u32, cpu_milli: u32) -> OpenbNode {
    OpenbNode {
        node_id: format!("n{i}"),
        gpus,
        gpu_model: "G2".into(),
        cpu_milli,
        memory_mib: 1 << 20,
    }
}

fn pod(i: u32, gpus: u32, gpu_milli: u32, cpu_milli: u32) -> OpenbPod {
    OpenbPod {
        submit_s: None,
        gpus,
        duration_s: None,
        kind: JobKind::Other,
        user_or_group: None,
        pod: i,
        gpu_milli,
        cpu_milli,
        memory_mib: 1024,
        gpu_spec: Vec::new(),
        qos: None,
        phase: None,
        scheduled_s: None,
        deletion_s: None,
    }
}

fn fixture_opts(policies: &[&str]) -> FgdOptions {
    FgdOptions {
        seeds: vec![1, 2],
        policies: policies.iter().map(|s| s.to_string()).collect(),
        inflation: 1.0,
        ..FgdOptions::default()
    }
}

#[test]
fn fgd_pods_that_fill_two_nodes_exactly_leave_nothing_unallocated() {
    // 2 nodes × 8 GPUs; 2 pods of 4 GPUs, 4 of 1 GPU, 8 shares of 500 milli = 16 GPUs, exactly
    // the capacity, so the stream at 100 % is the whole list (no draws, nothing dropped).
    let nodes = vec![node(0, 8, 64_000), node(1, 8, 64_000)];
    let mut pods = vec![pod(0, 4, 1000, 1000), pod(1, 4, 1000, 1000)];
    pods.extend((2..6).map(|i| pod(i, 1, 1000, 1000)));
    pods.extend((6..14).map(|i| pod(i, 1, 500, 1000)));
    // Best-fit policies fill the nodes exactly whatever the order: every pod fits.
    let opts = fixture_opts(&["topo-bestfit", "best-fit", "fgd"]);
    let r = fgd::run_with(&nodes, &[("fixture".into(), pods)], &opts, &Default::default(), &NoProgress).unwrap();
    for p in ["topo-bestfit", "best-fit", "fgd"] {
        let s = &r.results["fixture"][p];
        assert_eq!(s.failed_pods, 0.0, "{p}");
        assert_eq!(s.pods, 14.0, "{p}");
        assert!(s.unallocated_gpu_pct_at_100.abs() < 1e-9, "{p}: {}", s.unallocated_gpu_pct_at_100);
    }
}

#[test]
fn fgd_a_pod_too_big_for_any_node_counts_as_arrived_but_fails() {
    // Two 4-GPU nodes (8 GPUs); pods of 8, 4 and 4 GPUs (16 GPUs) with the stream inflated to
    // 200 %: every seed streams all three. The 8-GPU pod never fits anywhere and is dropped;
    // the 4-GPU pods fit. At 100 % arrived the allocation is 0 % (the 8 came first) or 100 %
    // (both 4s came first); no event lands at 100 % when the 8 comes second.
    let nodes = vec![node(0, 4, 64_000), node(1, 4, 64_000)];
    let pods = vec![pod(0, 8, 1000, 1000), pod(1, 4, 1000, 1000), pod(2, 4, 1000, 1000)];
    let opts = FgdOptions { seeds: (1..9).collect(), inflation: 2.0, ..fixture_opts(&["first-fit"]) };
    let r = fgd::run_with(&nodes, &[("fixture".into(), pods)], &opts, &Default::default(), &NoProgress).unwrap();
    let s = &r.results["fixture"]["first-fit"];
    assert_eq!(s.pods, 3.0);
    assert_eq!(s.failed_pods, 1.0);
    assert!(!s.per_seed_at_100.is_empty());
    for v in &s.per_seed_at_100 {
        assert!(*v == 0.0 || (*v - 100.0).abs() < 1e-9, "{v}");
    }
}

#[test]
fn fgd_cpu_stranding_is_avoided_by_topo_bestfit() {
    // Node 0 has 8 GPUs and 16 CPUs (2 per GPU), node 1 has 8 GPUs and 64 CPUs. Pods: four
    // 1-GPU pods asking 8 CPUs each and twelve 1-GPU pods asking 2 CPUs. Demand = 16 GPUs.
    // Putting the CPU-heavy pods on node 0 strands its GPUs; topo-bestfit places every pod.
    let nodes = vec![node(0, 8, 16_000), node(1, 8, 64_000)];
    let mut pods: Vec<OpenbPod> = (0..4).map(|i| pod(i, 1, 1000, 8000)).collect();
    pods.extend((4..16).map(|i| pod(i, 1, 1000, 2000)));
    let opts = FgdOptions { seeds: (1..9).collect(), ..fixture_opts(&["topo-bestfit", "first-fit"]) };
    let r = fgd::run_with(&nodes, &[("fixture".into(), pods)], &opts, &Default::default(), &NoProgress).unwrap();
    let ours = &r.results["fixture"]["topo-bestfit"];
    let ff = &r.results["fixture"]["first-fit"];
    assert!(ours.failed_pods <= ff.failed_pods, "{} vs {}", ours.failed_pods, ff.failed_pods);
}

fn gang_opts(policies: &[&str]) -> GangOptions {
    GangOptions {
        policies: policies.iter().map(|s| s.to_string()).collect(),
        check_invariants: true,
        ..GangOptions::default()
    }
}

#[test]
fn gang_waits_for_its_reservation_while_a_short_job_backfills() {
    // One 8-GPU node. t=0: job 1 (4 GPUs, 10 h). t=60: job 2 (8 GPUs, 1 h) must wait for
    // job 1. t=120: job 3 (1 GPU, 30 min, limit 1 h) ends long before job 2 can start.
    let jobs = [
        TraceJob { submit_s: 0, gpus: 4, duration_s: 36_000 },
        TraceJob { submit_s: 60, gpus: 8, duration_s: 3_600 },
        TraceJob { submit_s: 120, gpus: 1, duration_s: 1_800 },
    ];
    let opts = gang_opts(&["fifo", "easy", "flotilla"]);
    let run = |p: &str| gang::replay(&jobs, &[8], p, 1.0, 1.0, &opts).unwrap();
    let per_bucket = |r: &gang::RunSummary, b: &str| r.by_gang_size.iter().find(|(k, _)| k == b).unwrap().1.clone();
    for p in ["easy", "flotilla"] {
        let r = run(p);
        // Job 3 starts at once on the free GPUs (backfill), job 2 when job 1 ends.
        assert_eq!(per_bucket(&r, "1").queue_mean_s, 0.0, "{p}");
        assert_eq!(per_bucket(&r, "5-8").queue_mean_s, (36_000 - 60) as f64, "{p}");
        assert_eq!(r.backfill_preemptions, 0, "{p}");
    }
    let fifo = run("fifo");
    // Strict FIFO: job 3 waits behind job 2 (until 36,000 + 3,600).
    assert_eq!(per_bucket(&fifo, "1").queue_mean_s, (39_600 - 120) as f64);
    assert_eq!(per_bucket(&fifo, "5-8").queue_mean_s, (36_000 - 60) as f64);
    let flot = run("flotilla");
    assert_eq!(flot.backfill_starts, 1);
    assert_eq!(flot.all.jobs, 3);
}

#[test]
fn gang_backfill_that_overstays_an_early_fill_is_preempted_and_requeued() {
    // All at t=0, walltime = duration rounded up to an hour. Job 1 (4 GPUs, 30 min, limit
    // 1 h) starts; job 2 (8 GPUs) reserves the node, estimated fill at 1 h; job 3 (1 GPU,
    // 40 min, limit 1 h: ends by the fill) backfills. At 30 min job 1 ends early, the
    // reservation completes: job 3 is preempted (0.5 GPU-hours lost), requeued, runs after.
    let jobs = [
        TraceJob { submit_s: 0, gpus: 4, duration_s: 1_800 },
        TraceJob { submit_s: 0, gpus: 8, duration_s: 600 },
        TraceJob { submit_s: 0, gpus: 1, duration_s: 2_400 },
    ];
    let opts = GangOptions { walltime_factor: 1.0, ..gang_opts(&["flotilla"]) };
    let r = gang::replay(&jobs, &[8], "flotilla", 1.0, 1.0, &opts).unwrap();
    assert_eq!(r.backfill_preemptions, 1);
    assert!((r.lost_gpu_hours - 0.5).abs() < 1e-9, "{}", r.lost_gpu_hours);
    assert_eq!(r.all.jobs, 3);
    // Job 3 finally starts when job 2 ends (2,400 s) and ends at 4,800 s.
    assert_eq!(r.by_gang_size[0].1.queue_mean_s, 2_400.0);
    assert_eq!(r.by_gang_size[0].1.jct_mean_s, 4_800.0);
}

#[test]
fn an_extra_hold_delays_the_end_but_not_the_walltime_request() {
    // One 8-GPU node, fifo. Job 1 (8 GPUs, 100 s) holds the node 50 s longer: job 2 (t=10)
    // starts at 150 instead of 100; job 2, without an extra, ends at its start + duration.
    let jobs = [TraceJob { submit_s: 0, gpus: 8, duration_s: 100 }, TraceJob { submit_s: 10, gpus: 8, duration_s: 100 }];
    let plain = gang::replay(&jobs, &[8], "fifo", 1.0, 1.0, &gang_opts(&["fifo"])).unwrap();
    assert_eq!(plain.job_times, vec![(0, Some(0), Some(100)), (10, Some(100), Some(200))]);
    let opts = GangOptions { extra_hold_s: vec![50], ..gang_opts(&["fifo"]) };
    let held = gang::replay(&jobs, &[8], "fifo", 1.0, 1.0, &opts).unwrap();
    assert_eq!(held.job_times, vec![(0, Some(0), Some(150)), (10, Some(150), Some(250))]);
}

#[test]
fn offered_load_scales_inter_arrivals() {
    let jobs = [
        TraceJob { submit_s: 0, gpus: 8, duration_s: 100 },
        TraceJob { submit_s: 100, gpus: 8, duration_s: 100 },
    ];
    // W = 1600 GPU-s, span 100 s, 16 GPUs: native load 1.0.
    let (w, t) = gang::work_and_span(&jobs);
    assert_eq!((w, t), (1600.0, 100.0));
    let r = gang::run_with("fixture", &jobs, &[8, 8], &GangOptions { loads: vec![0.5], ..gang_opts(&["fifo"]) }, &NoProgress).unwrap();
    assert!((r.native_load - 1.0).abs() < 1e-12);
    assert!((r.runs[0].arrival_scale - 2.0).abs() < 1e-12);
    assert_eq!(gang::time_limit(1_800, 2.0), 3_600);
    assert_eq!(gang::time_limit(10 * 86_400, 2.0), 10 * 86_400);
    assert_eq!(gang::itp_nodes(&jobs), 4);
}

fn reduced_fgd(seeds: Vec<u64>) -> fgd::FgdReport {
    let t = traces();
    let nodes: Vec<OpenbNode> = t.openb_nodes().unwrap().into_iter().step_by(10).collect();
    let pods: Vec<OpenbPod> = t.openb_pods(OpenbVariant::Default).unwrap().into_iter().step_by(20).collect();
    let opts = FgdOptions { seeds, jobs: 2, ..FgdOptions::default() };
    fgd::run_with(&nodes, &[("default-reduced".into(), pods)], &opts, &Default::default(), &NoProgress).unwrap()
}

#[test]
fn fgd_reduced_on_real_openb_runs_every_policy() {
    let r = reduced_fgd(vec![42]);
    for p in fgd::POLICIES {
        let s = &r.results["default-reduced"][*p];
        assert!(s.unallocated_gpu_pct_at_100.is_finite() && s.unallocated_gpu_pct_at_100 >= 0.0, "{p}");
        assert!(s.pods > 300.0, "{p}: {}", s.pods);
    }
}

#[test]
fn experiments_are_deterministic_byte_for_byte() {
    let dir = std::env::temp_dir().join(format!("flotilla-sim-det-{}", std::process::id()));
    let (a, b) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    reduced_fgd(vec![7]).write(&a).unwrap();
    reduced_fgd(vec![7]).write(&b).unwrap();
    let fa = std::fs::read(a.join("summary.json")).unwrap();
    assert_eq!(fa, std::fs::read(b.join("summary.json")).unwrap());
    assert!(a.join("fgd_curve_default-reduced.png").is_file());
    // Gang: the first 400 jobs of ITP cluster04, twice, one and two threads.
    let jobs = traces().itp_cluster_jobs("cluster04").unwrap();
    let jobs: Vec<TraceJob> = jobs.iter().take(400).map(|j| TraceJob { submit_s: j.submit_s, gpus: j.gpus, duration_s: j.duration_s }).collect();
    let nodes = vec![8; gang::itp_nodes(&jobs) as usize];
    let mut opts = GangOptions { loads: vec![0.7, 1.0], ..gang_opts(&["fifo", "easy", "flotilla"]) };
    let g1 = gang::run_with("itp/cluster04", &jobs, &nodes, &opts, &NoProgress).unwrap();
    opts.jobs = 2;
    let g2 = gang::run_with("itp/cluster04", &jobs, &nodes, &opts, &NoProgress).unwrap();
    g1.write(&a).unwrap();
    g2.write(&b).unwrap();
    assert_eq!(std::fs::read(a.join("summary.json")).unwrap(), std::fs::read(b.join("summary.json")).unwrap());
    assert!(a.join("gang_queue_vs_load.png").is_file());
    for r in &g1.runs {
        assert_eq!(r.all.jobs, 400, "{} {}", r.policy, r.load);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn gang_elastic_job_starts_at_its_minimum_grows_and_gives_growth_back() {
    // Two 8-GPU nodes. t=0: rigid job A (8 GPUs, 10,000 s). t=10: job B (16 GPUs, 10,000 s),
    // elastic between 1 and 2 nodes. t=11,000: rigid job C (8 GPUs, 1,000 s).
    let jobs = [
        TraceJob { submit_s: 0, gpus: 8, duration_s: 10_000 },
        TraceJob { submit_s: 10, gpus: 16, duration_s: 10_000 },
        TraceJob { submit_s: 11_000, gpus: 8, duration_s: 1_000 },
    ];
    let rigid = gang::replay(&jobs, &[8, 8], "flotilla", 1.0, 1.0, &gang_opts(&["flotilla"])).unwrap();
    // Rigid: B waits for A (9,990 s) and runs 10,000 s; C waits for B.
    let b = |r: &gang::RunSummary| r.by_gang_size.iter().find(|(k, _)| k == "9-64").unwrap().1.clone();
    assert_eq!((b(&rigid).queue_mean_s, b(&rigid).jct_mean_s), (9_990.0, 19_990.0));
    assert_eq!((rigid.elastic_jobs, rigid.grows, rigid.shrinks), (0, 0, 0));
    let opts = GangOptions { elastic_min_gpus: Some(16), ..gang_opts(&["flotilla"]) };
    let el = gang::replay(&jobs, &[8, 8], "flotilla", 1.0, 1.0, &opts).unwrap();
    // Elastic: B starts at once on one node (79,920 GPU-s done by t=10,000), grows to two
    // when A ends, gives the second back to C at 11,000 (95,920 done), grows again when C
    // ends at 12,000 (103,920 done) and ends at 12,000 + 56,080 / 16 = 15,505.
    assert_eq!((b(&el).queue_mean_s, b(&el).jct_mean_s), (0.0, 15_495.0));
    let c = el.by_gang_size.iter().find(|(k, _)| k == "5-8").unwrap().1.clone();
    assert_eq!(c.jobs, 2);
    assert_eq!(c.queue_mean_s, 0.0, "C starts at once on the grown node");
    assert_eq!((el.elastic_jobs, el.grows, el.shrinks, el.elastic_reached_max), (1, 2, 1, 1));
    assert_eq!(el.elastic_size_violations, 0);
    assert_eq!(el.backfill_preemptions, 0);
    assert!(el.utilisation_pct > rigid.utilisation_pct, "{} vs {}", el.utilisation_pct, rigid.utilisation_pct);
}

#[test]
fn gang_elastic_replay_of_reduced_itp_stays_within_min_and_max() {
    // The first 400 jobs of ITP cluster04 at load 0.9, jobs of 16 GPUs and more elastic;
    // the core's invariants are checked after every cycle.
    let jobs = traces().itp_cluster_jobs("cluster04").unwrap();
    let jobs: Vec<TraceJob> = jobs.iter().take(400).map(|j| TraceJob { submit_s: j.submit_s, gpus: j.gpus, duration_s: j.duration_s }).collect();
    let nodes = vec![8; gang::itp_nodes(&jobs) as usize];
    let rigid = gang::run_with("itp/cluster04", &jobs, &nodes, &GangOptions { loads: vec![0.9], ..gang_opts(&["easy", "flotilla"]) }, &NoProgress).unwrap();
    let opts = GangOptions { loads: vec![0.9], elastic_min_gpus: Some(16), ..gang_opts(&["easy", "flotilla"]) };
    let el = gang::run_with("itp/cluster04", &jobs, &nodes, &opts, &NoProgress).unwrap();
    for (r, e) in rigid.runs.iter().zip(&el.runs) {
        eprintln!(
            "{}: rigid q {:.0} jct {:.0} util {:.1} preempt {}; elastic({}) q {:.0} jct {:.0} util {:.1} preempt {} grows {} shrinks {} at max {}",
            r.policy, r.all.queue_mean_s, r.all.jct_mean_s, r.utilisation_pct, r.backfill_preemptions, e.elastic_jobs, e.all.queue_mean_s, e.all.jct_mean_s, e.utilisation_pct, e.backfill_preemptions, e.grows, e.shrinks, e.elastic_reached_max
        );
        assert_eq!(e.all.jobs, 400, "{}", e.policy);
        assert_eq!(e.elastic_size_violations, 0, "{}", e.policy);
        assert!(e.elastic_jobs > 0 && e.grows > 0 && e.elastic_reached_max > 0, "{}", e.policy);
        assert_ne!(e.all.queue_mean_s, r.all.queue_mean_s, "{}", e.policy);
    }
}

#[test]
fn gang_elastic_backfill_preempted_is_requeued_whole_and_restarts() {
    // Two 8-GPU nodes, walltime = duration rounded up to an hour. Job 1 (8 GPUs, 30 min,
    // limit 1 h) starts; job 2 (12 GPUs, rigid) reserves, estimated fill at 1 h; job 3
    // (16 GPUs, elastic 1..2 nodes: at MIN it needs 2,400 s, limit 1 h) backfills on one
    // node. Job 1 ends early: job 3 has no grown part to give back, so it is preempted whole
    // (8 GPUs × 1,800 s = 4 GPU-hours lost), requeued, and restarts from the beginning.
    let jobs = [
        TraceJob { submit_s: 0, gpus: 8, duration_s: 1_800 },
        TraceJob { submit_s: 0, gpus: 12, duration_s: 600 },
        TraceJob { submit_s: 0, gpus: 16, duration_s: 1_200 },
    ];
    let opts = GangOptions { walltime_factor: 1.0, elastic_min_gpus: Some(16), ..gang_opts(&["flotilla"]) };
    let r = gang::replay(&jobs, &[8, 8], "flotilla", 1.0, 1.0, &opts).unwrap();
    assert_eq!(r.all.jobs, 3);
    assert_eq!(r.backfill_preemptions, 1);
    // Job 2 starts at 1,800 s and ends at 2,400 s; job 3 restarts then at MIN (no event
    // after it to grow at) and ends at 4,800 s.
    let big = r.by_gang_size.iter().find(|(k, _)| k == "9-64").unwrap().1.clone();
    assert_eq!((big.queue_mean_s, big.jct_mean_s), ((1_800.0 + 2_400.0) / 2.0, (2_400.0 + 4_800.0) / 2.0));
    assert!((r.lost_gpu_hours - 4.0).abs() < 1e-9, "{}", r.lost_gpu_hours);
    assert_eq!(r.elastic_size_violations, 0);
}

#[test]
fn gang_incremental_cycle_gives_the_full_scans_results_byte_for_byte() {
    // The first 1,000 jobs of ITP cluster04 at loads 0.9 and 1.0 (a queue builds up), every
    // queue policy: the incremental cycle (default) and the full scan write the same
    // summary.json.
    let dir = std::env::temp_dir().join(format!("flotilla-sim-inc-{}", std::process::id()));
    let (a, b) = (dir.join("incremental"), dir.join("full"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let jobs = traces().itp_cluster_jobs("cluster04").unwrap();
    let jobs: Vec<TraceJob> = jobs.iter().take(1000).map(|j| TraceJob { submit_s: j.submit_s, gpus: j.gpus, duration_s: j.duration_s }).collect();
    let nodes = vec![8; gang::itp_nodes(&jobs) as usize];
    let mut opts = GangOptions { loads: vec![0.9, 1.0], ..gang_opts(&["fifo", "easy", "flotilla"]) };
    let inc = gang::run_with("itp/cluster04", &jobs, &nodes, &opts, &NoProgress).unwrap();
    opts.full_scan = true;
    let full = gang::run_with("itp/cluster04", &jobs, &nodes, &opts, &NoProgress).unwrap();
    inc.write(&a).unwrap();
    full.write(&b).unwrap();
    assert_eq!(std::fs::read(a.join("summary.json")).unwrap(), std::fs::read(b.join("summary.json")).unwrap());
    assert!(inc.runs.iter().all(|r| r.all.jobs == 1000));
    std::fs::remove_dir_all(&dir).ok();
}
