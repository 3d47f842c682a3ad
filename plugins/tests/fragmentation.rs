//! Flotilla's fragmentation claim as a test that compares counts, not times: on a 128 × 8
//! cluster with a random mix of 1/2/4/8/16/64-GPU jobs arriving and leaving, over 20 fixed
//! seeds, Flotilla's default placement keeps on average at least as many fully free nodes as
//! first-fit, worst-fit and plain best-fit in every occupancy decile from 30 % to 90 %, and
//! strictly more over the whole run.
//!
//! Run with `--nocapture` to see the table.

mod support;

use flotilla_core::cluster::Cluster;
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{JobId, JobSpec, Request};
use flotilla_core::sched::{Decision, Event, SchedConfig, Scheduler};
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use rand_chacha::ChaCha8Rng;

const POLICIES: [&str; 4] = ["topo-bestfit", "first-fit", "worst-fit", "best-fit"];
const SEEDS: u64 = 20;
const STEPS: usize = 4000;
const NODES: u32 = 128;

/// Per decile (index 3..=8 for 30–90 %): (sum of fully free nodes, samples).
type Table = [(f64, u64); 10];

fn size(rng: &mut ChaCha8Rng) -> u32 {
    let u: f64 = rng.random();
    match u {
        u if u < 0.30 => 1,
        u if u < 0.50 => 2,
        u if u < 0.70 => 4,
        u if u < 0.85 => 8,
        u if u < 0.95 => 16,
        _ => 64,
    }
}

/// The comparison's driver: which jobs end when. Jobs are started by the scheduler and end
/// after their duration.
struct Driver {
    s: Scheduler,
    /// Actual end of each job once started: its duration, which its time limit overestimates
    /// by a factor of 1 to 2 (users round up).
    duration: BTreeMap<JobId, u64>,
    /// Started jobs by end time.
    ends: BTreeMap<(u64, JobId), ()>,
}

impl Driver {
    /// The one path for decisions: a bind schedules the job's end; a backfill preemption
    /// stops the job at once and requeues it (that event's decisions come back here).
    fn apply(&mut self, d: Vec<Decision>, now: u64) {
        for x in d {
            match x {
                Decision::Bind { job, .. } => {
                    self.ends.insert((now + self.duration[&job], job), ());
                }
                Decision::PreemptBackfill { job, .. } => {
                    self.ends.retain(|(_, j), _| *j != job);
                    self.event(Event::Requeued(job), now);
                }
                _ => {}
            }
        }
    }
    fn event(&mut self, e: Event, now: u64) {
        let d = self.s.handle(e, now);
        self.apply(d, now);
    }
}

fn run(policy: &str, seed: u64) -> (Table, f64) {
    let s = Scheduler::new(
        Cluster::uniform(NODES, 8, 32, 64, 512_000),
        flotilla_plugins::placement(policy).unwrap(),
        flotilla_plugins::priority("priority/basic").unwrap(),
        SchedConfig::default(),
    );
    let mut drv = Driver { s, duration: BTreeMap::new(), ends: BTreeMap::new() };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let total = f64::from(NODES * 8);
    let mut table: Table = [(0.0, 0); 10];
    let (mut all, mut n) = (0.0, 0u64);
    let mut next = 1u64;
    for step in 0..STEPS {
        let now = step as u64 * 60;
        // Departures: jobs whose duration has elapsed.
        while let Some((&(t, id), _)) = drv.ends.iter().next() {
            if t > now {
                break;
            }
            drv.ends.remove(&(t, id));
            drv.event(Event::JobEnded(id), now);
        }
        // Arrivals: the target occupancy ramps up and down twice so every decile is visited.
        let phase = (step as f64 / STEPS as f64 * 4.0) % 2.0;
        let target = 0.2 + 0.8 * if phase < 1.0 { phase } else { 2.0 - phase };
        let used = drv.s.cluster().used_gpu_milli() as f64 / 1000.0 / total;
        if used < target && drv.s.pending_len() < 8 {
            for _ in 0..4 {
                let g = size(&mut rng);
                let topo = if g <= 8 { TopologyKind::Node } else { TopologyKind::Any };
                let dur = 600 + (-(1.0 - rng.random::<f64>()).ln() * 3.0 * 3600.0) as u64;
                let limit = ((dur as f64 * (1.0 + rng.random::<f64>())) as u64).div_ceil(1800) * 1800;
                drv.duration.insert(JobId(next), dur.min(limit));
                drv.event(Event::Submit(JobSpec::simple(next, now, Request::gpus(g, topo), Some(limit))), now);
                next += 1;
            }
        }
        let d = drv.s.cycle(now);
        drv.apply(d, now);
        let used = drv.s.cluster().used_gpu_milli() as f64 / 1000.0 / total;
        let free_nodes = drv.s.cluster().fully_free_gpu_nodes(8) as f64;
        let decile = ((used * 10.0) as usize).min(9);
        table[decile].0 += free_nodes;
        table[decile].1 += 1;
        all += free_nodes;
        n += 1;
    }
    (table, all / n as f64)
}

#[test]
fn default_policy_keeps_the_most_whole_free_nodes() {
    let mut tables = Vec::new();
    for p in POLICIES {
        let mut sum: Table = [(0.0, 0); 10];
        let mut overall = 0.0;
        for seed in 0..SEEDS {
            let (t, o) = run(p, 1000 + seed);
            for d in 0..10 {
                sum[d].0 += t[d].0;
                sum[d].1 += t[d].1;
            }
            overall += o / SEEDS as f64;
        }
        tables.push((p, sum, overall));
    }
    println!("mean fully free 8-GPU nodes by occupancy decile (128 x 8, {SEEDS} seeds)");
    print!("{:<14}", "policy");
    for d in 3..9 {
        print!(" {:>8}", format!("{}-{}%", d * 10, d * 10 + 10));
    }
    println!(" {:>8}", "overall");
    for (p, t, o) in &tables {
        print!("{p:<14}");
        for row in t.iter().take(9).skip(3) {
            print!(" {:>8.2}", row.0 / row.1.max(1) as f64);
        }
        println!(" {o:>8.2}");
    }
    let (_, ours, ours_all) = &tables[0];
    for (p, t, o) in &tables[1..] {
        for d in 3..9 {
            assert!(ours[d].1 > 0 && t[d].1 > 0, "decile {d} not visited");
            let a = ours[d].0 / ours[d].1 as f64;
            let b = t[d].0 / t[d].1 as f64;
            assert!(a >= b, "{p} keeps more whole nodes than ours in decile {d}: {b:.2} > {a:.2}");
        }
        assert!(ours_all > o, "{p} is not strictly worse overall: {o:.2} >= {ours_all:.2}");
    }
}
