//! The scheduling cycle with 1,000 elastic jobs running, against the same cycle today (the
//! same jobs rigid at the size they run at). Goal from the elastic issue, reported, never
//! asserted: within 10 % of today's.
//!
//! Both states: 1,536 nodes × 8 GPUs (pods of 32) running 1,000 one-node jobs, then 1,000
//! pending jobs (1 to 64 GPUs) that cannot all start. Today the 1,000 jobs are rigid and the
//! pending jobs start on the 536 free nodes; in the elastic state the 1,000 jobs are elastic
//! (1..3 nodes), have grown into the 536 nodes and give them back to the pending jobs. The
//! setup runs cycles until the state is steady (shrinks carried out), then the benchmarked
//! cycles run at a fixed time, each over the 1,000 elastic jobs (the grow stage) and the
//! queue (the reclaim stage).
//!
//! `cargo bench -p flotilla-plugins --bench elastic`.

use criterion::{criterion_group, criterion_main, Criterion};
use flotilla_core::cluster::{Cluster, Time};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{Elastic, ElasticUnit, JobSpec, Request};
use flotilla_core::sched::{Decision, Event, SchedConfig, Scheduler};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::{Duration, Instant};

const NODES: u32 = 1536;
const ELASTIC: u64 = 1000;

fn one_node(id: u64, t: Time, elastic: bool) -> JobSpec {
    let req = Request {
        gpus: 8,
        nodes: Some(1),
        gpus_per_node: Some(8),
        ..Request::gpus(0, TopologyKind::Any)
    };
    let mut j = JobSpec::simple(id, t, req, Some(7 * 86_400));
    j.preemptible = true;
    if elastic {
        j.elastic = Some(Elastic {
            unit: ElasticUnit::Nodes,
            min: 1,
            max: 3,
            step: 1,
        });
    }
    j
}

/// Carries out what a setup cycle decided: shrinks finish at once (so the state settles);
/// binds, growth and reservations need nothing.
fn settle(s: &mut Scheduler, d: Vec<Decision>, now: Time) -> usize {
    let mut shrinks = 0;
    for x in d {
        if let Decision::Shrink { job, allocs, .. } = x {
            shrinks += 1;
            let more = s.handle(Event::Shrunk { job, allocs }, now);
            assert!(more.is_empty());
        }
    }
    shrinks
}

/// The state described in the module doc; `elastic` chooses the elastic or today's variant.
/// Returns the scheduler and the time the benchmarked cycles run at.
fn state(elastic: bool) -> (Scheduler, Time) {
    let config = SchedConfig {
        elastic_grow_interval_s: 60,
        ..SchedConfig::default()
    };
    let mut s = Scheduler::new(
        Cluster::uniform(NODES, 8, 32, 64, 512_000),
        flotilla_plugins::placement("topo-bestfit").unwrap(),
        flotilla_plugins::priority("priority/multifactor").unwrap(),
        config,
    );
    for i in 0..ELASTIC {
        let _ = s.handle(Event::Submit(one_node(i + 1, 0, elastic)), 0);
    }
    let _ = s.cycle(0);
    if elastic {
        // The elastic jobs grow into the rest of the cluster.
        let d = s.cycle(100);
        assert!(d.iter().any(|x| matches!(x, Decision::Grow { .. })));
        assert_eq!(
            s.cluster().used_gpu_milli(),
            u64::from(NODES) * 8 * 1000,
            "the cluster is full"
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(22);
    let t = 1000;
    for i in 0..1000u64 {
        let g = [1u32, 2, 4, 8, 16, 64][rng.random_range(0..6)];
        let topo = if g <= 8 {
            TopologyKind::Node
        } else {
            TopologyKind::Any
        };
        let spec = JobSpec::simple(
            100_000 + i,
            t,
            Request::gpus(g, topo),
            Some(600 * rng.random_range(1..144u64)),
        );
        let _ = s.handle(Event::Submit(spec), t);
    }
    let mut shrinks = 0;
    for k in 0..50 {
        let d = s.cycle(t + k);
        let n = settle(&mut s, d, t + k);
        shrinks += n;
        if n == 0 && k > 2 {
            break;
        }
    }
    let grown: usize = s.running().values().map(|r| r.grown.len()).sum();
    eprintln!(
        "{}: {} running ({} grown parts), {} pending, {} reservations; {shrinks} shrinks in the setup",
        if elastic { "elastic" } else { "today" },
        s.running().len(),
        grown,
        s.pending_len(),
        s.reservations().len()
    );
    (s, t + 100)
}

/// The ratio in one run: cycles of the two states interleaved (so a busy machine slows both
/// alike), `rounds` of each, the medians compared.
fn interleaved(today: &mut Scheduler, elastic: &mut Scheduler, now: Time, rounds: usize) {
    let (mut a, mut b) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let t = Instant::now();
        std::hint::black_box(today.cycle(now));
        a.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(elastic.cycle(now));
        b.push(t.elapsed());
    }
    a.sort_unstable();
    b.sort_unstable();
    let (ma, mb) = (a[rounds / 2], b[rounds / 2]);
    eprintln!(
        "interleaved medians over {rounds} cycles each: today {ma:?}, elastic {mb:?}: elastic/today = {:.3}",
        mb.as_secs_f64() / ma.as_secs_f64()
    );
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("elastic");
    g.measurement_time(Duration::from_secs(10));
    let (mut today, now) = state(false);
    let (mut elastic, _) = state(true);
    interleaved(&mut today, &mut elastic, now, 1000);
    g.bench_function("today_1536x8_1000_pending", |b| b.iter(|| today.cycle(now)));
    g.bench_function("elastic_1000_running_1536x8_1000_pending", |b| {
        b.iter(|| elastic.cycle(now))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
