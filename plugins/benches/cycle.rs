//! Scheduling-cycle benchmarks (criterion). Goals from the core issue, reported, never
//! asserted: one full cycle (priority + placement + reservations + backfill) on 128 × 8 GPUs
//! with 1,000 pending jobs under 1 ms; on 10,000 × 8 with 100,000 pending under 1 s, in under
//! 200 MiB. Also the reference cluster's job mix (`shared/slurm-reference/bench/cycle`:
//! 4 × 8 GPUs, 2,000 and 10,000 pending) to compare with real Slurm's measured cycle times,
//! and how the cycle scales with nodes and with pending jobs.
//!
//! `cargo bench -p flotilla-plugins --bench cycle`; `FLOTILLA_BENCH_BIG=0` skips the 10,000-node
//! case.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use flotilla_core::cluster::Cluster;
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{JobSpec, Request};
use flotilla_core::cluster::Time;
use flotilla_core::sched::{Decision, Event, SchedConfig, Scheduler};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(|l| l.split_whitespace().nth(1).unwrap_or("0").parse::<f64>().unwrap_or(0.0)))
        .unwrap_or(0.0)
        / 1024.0
}

/// The benchmarks' one path for the decisions of their setup. There are no nodes to start
/// jobs on, so a bind, a reservation or an alert needs nothing carried out; a setup that
/// decided to stop, requeue or preempt work would leave a state other than the one
/// described, so such a decision fails it. (The benchmarked cycles hand their decisions to
/// criterion, which only keeps them from being optimised away.)
fn apply(d: Vec<Decision>) {
    for x in &d {
        assert!(
            matches!(x, Decision::Bind { .. } | Decision::BindReplica { .. } | Decision::Reserve { .. } | Decision::ReleaseReservation { .. } | Decision::Alert { .. }),
            "the setup decided {x:?}"
        );
    }
}

/// A scheduler on `nodes` × 8 GPUs (32 nodes per pod) whose first cycle has filled the
/// cluster, leaving about `pending` jobs queued: the steady state a cycle runs in. Job i
/// arrives at second i and the first cycle runs after the last arrival; returns the
/// scheduler and the time (s) the benchmarked cycles run at, a second after that cycle.
fn steady(nodes: u32, pending: usize, seed: u64) -> (Scheduler, Time) {
    let mut s = Scheduler::new(
        Cluster::uniform(nodes, 8, 32, 64, 512_000),
        flotilla_plugins::placement("topo-bestfit").unwrap(),
        flotilla_plugins::priority("priority/multifactor").unwrap(),
        SchedConfig::default(),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Enough jobs to fill the cluster (mean ~6 GPUs per job) plus the pending depth.
    let total = pending + (nodes as usize * 8) / 5;
    for i in 0..total {
        let g = [1u32, 2, 4, 8, 16, 64][rng.random_range(0..6)];
        let topo = if g <= 8 { TopologyKind::Node } else { TopologyKind::Any };
        let limit = 600 * rng.random_range(1..144u64);
        // Job i arrives at second i.
        let mut spec = JobSpec::simple(i as u64 + 1, i as u64, Request::gpus(g, topo), Some(limit));
        spec.nice = [0, 0, 0, 100, 500][rng.random_range(0..5)];
        apply(s.handle(Event::Submit(spec), i as u64));
    }
    apply(s.cycle(total as Time));
    (s, total as Time + 1)
}



/// The reference job mix (`jobmix.py N`, seed 20261129) on the reference cluster, parsed from
/// the generator's output; `None` when python3 or the shared folder is missing. Job i arrives
/// at second i; returns the scheduler after a first cycle at the last arrival and the time
/// (s) the benchmarked cycles run at, a second later.
fn jobmix(n: usize) -> Option<(Scheduler, Time)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/slurm-reference/bench/cycle/jobmix.py");
    let out = std::process::Command::new("python3").arg(root).arg(n.to_string()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let mut c = Cluster::uniform(4, 8, 2, 64, 512_000);
    c.partitions[0].name = "batch".into();
    let mut s = Scheduler::new(
        c,
        flotilla_plugins::placement("topo-bestfit").unwrap(),
        flotilla_plugins::priority("priority/multifactor").unwrap(),
        SchedConfig::default(),
    );
    let mut last: Time = 0;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let (i, gpus, args) = (f[0].parse::<u64>().ok()?, f[2].parse::<u32>().ok()?, f[3]);
        let minutes: u64 = args.split("--time=").nth(1)?.split_whitespace().next()?.parse().ok()?;
        let nice: i32 = args.split("--nice=").nth(1).and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0);
        let req = if gpus <= 8 {
            Request { gpus, nodes: Some(1), topology: TopologyKind::Any, ..Request::default() }
        } else {
            Request { gpus, nodes: Some(gpus / 8), gpus_per_node: Some(8), topology: TopologyKind::Any, ..Request::default() }
        };
        // Job i arrives at second i.
        let mut spec = JobSpec::simple(i + 1, i, req, Some(minutes * 60));
        spec.nice = nice;
        apply(s.handle(Event::Submit(spec), i));
        last = last.max(i);
    }
    apply(s.cycle(last));
    Some((s, last + 1))
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("cycle");
    g.measurement_time(Duration::from_secs(5));

    let (mut s, now) = steady(128, 1000, 1);
    eprintln!("128x8: {} running, {} pending, {} reservations", s.running().len(), s.pending_len(), s.reservations().len());
    g.bench_function("128x8_1000_pending", |b| b.iter(|| s.cycle(now)));

    for n in [2000usize, 10_000] {
        if let Some((mut s, now)) = jobmix(n) {
            eprintln!("jobmix {n}: {} running, {} pending", s.running().len(), s.pending_len());
            g.bench_with_input(BenchmarkId::new("reference_jobmix_4x8", n), &n, |b, _| b.iter(|| s.cycle(now)));
        } else {
            eprintln!("SKIPPED: reference job mix {n} (python3 or ../shared missing)");
        }
    }

    for nodes in [128u32, 512, 2048] {
        let (mut s, now) = steady(nodes, 10_000, 2);
        g.bench_with_input(BenchmarkId::new("scale_nodes_10000_pending", nodes), &nodes, |b, _| b.iter(|| s.cycle(now)));
    }
    for pending in [1000usize, 10_000, 50_000] {
        let (mut s, now) = steady(1024, pending, 3);
        g.bench_with_input(BenchmarkId::new("scale_pending_1024_nodes", pending), &pending, |b, _| b.iter(|| s.cycle(now)));
    }
    g.finish();

    if std::env::var("FLOTILLA_BENCH_BIG").as_deref() != Ok("0") {
        let mut g = c.benchmark_group("cycle_big");
        g.sample_size(10).measurement_time(Duration::from_secs(20));
        let before = rss_mib();
        let (mut s, now) = steady(10_000, 100_000, 4);
        let after = rss_mib();
        eprintln!(
            "10000x8: {} running, {} pending; RSS {:.0} MiB -> {:.0} MiB (scheduler state ~{:.0} MiB)",
            s.running().len(),
            s.pending_len(),
            before,
            after,
            after - before
        );
        g.bench_function("10000x8_100000_pending", |b| b.iter(|| s.cycle(now)));
        g.finish();
    }
}

/// 128 × 8 GPUs (1,024) with 500 running preemptible jobs (1/2/8-GPU mix), all past their minimum runtime; one service replica of 8 GPUs must preempt.
fn preemption_setup() -> Scheduler {
    use flotilla_core::sched::{ServiceId, ServiceSpec};
    let mut s = Scheduler::new(
        Cluster::uniform(128, 8, 32, 64, 512_000),
        flotilla_plugins::placement("topo-bestfit").unwrap(),
        flotilla_plugins::priority("priority/multifactor").unwrap(),
        SchedConfig { budget_warn_pct: 100, budget_page_pct: 100, ..SchedConfig::default() },
    );
    // 12 whole-node jobs, 440 of 2 GPUs and 48 of 1 GPU: exactly 1,024 GPUs in 500 jobs.
    let mut sizes: Vec<u32> = [vec![8u32; 12], vec![2; 440], vec![1; 48]].concat();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for i in (1..sizes.len()).rev() {
        sizes.swap(i, rng.random_range(0..=i));
    }
    for (i, g) in sizes.into_iter().enumerate() {
        let mut j = JobSpec::simple(i as u64 + 1, 0, Request::gpus(g, TopologyKind::Node), Some(86_400));
        j.preemptible = true;
        j.checkpoint_bytes = 1_000_000_000;
        apply(s.handle(Event::Submit(j), 0));
    }
    apply(s.cycle(0));
    // An hour later (every job past its minimum runtime) a service asks for a replica.
    apply(s.handle(
        Event::ServiceUpsert(ServiceSpec {
            id: ServiceId(1),
            name: "svc".into(),
            partition: flotilla_core::cluster::PartId(0),
            account: "inference".into(),
            user: "svc".into(),
            replica: Request::gpus(8, TopologyKind::Node),
            min_replicas: 1,
            max_replicas: 1,
            desired_replicas: 1,
            priority: 1,
        }),
        3600,
    ));
    s
}

fn bench_preempt(c: &mut Criterion) {
    let s = preemption_setup();
    eprintln!(
        "preemption bench: {} running jobs on {} GPUs, {} free",
        s.running().len(),
        s.cluster().total_gpus(),
        s.cluster().total_gpus() * 1000 - s.cluster().used_gpu_milli()
    );
    let mut g = c.benchmark_group("preempt");
    g.bench_function("plan_1024_gpus_500_jobs", |b| {
        b.iter_batched(
            preemption_setup,
            |mut s| {
                let d = s.cycle(3600);
                assert!(d.iter().any(|x| matches!(x, flotilla_core::sched::Decision::Preempt { .. })));
                d
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench, bench_preempt);
criterion_main!(benches);
