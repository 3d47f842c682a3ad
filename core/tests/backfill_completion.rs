//! Regression: when a held reservation completes and its backfill occupants are preempted,
//! no other job may be backfilled onto the GPUs they free in the same cycle; otherwise the
//! reservation never fills (found by the simulator's ITP replay: jobs preempted and
//! re-backfilled in turn, forever).

use flotilla_core::cluster::{Cluster, GpuMask, NodeId};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{JobId, JobSpec, Request};
use flotilla_core::placement::{Score, NodeDemand, PlaceCtx, PlacementPolicy};
use flotilla_core::sched::{Decision, Event, PriorityInput, PriorityPolicy, SchedConfig, Scheduler};

#[derive(Debug)]
struct Tightest;

impl PlacementPolicy for Tightest {
    fn name(&self) -> &str {
        "tightest"
    }
    fn score(&self, _: &PlaceCtx<'_>, _: NodeId, avail: GpuMask, d: &NodeDemand<'_>) -> Score {
        -Score::from(avail.count() - d.gpus)
    }
}

#[derive(Debug)]
struct Fifo;

impl PriorityPolicy for Fifo {
    fn name(&self) -> &str {
        "fifo"
    }
    fn priority(&self, _: PriorityInput<'_>) -> u64 {
        0
    }
}

fn job(id: u64, submit: u64, gpus: u32, limit_h: u64) -> JobSpec {
    JobSpec::simple(id, submit, Request::gpus(gpus, TopologyKind::Node), Some(limit_h * 3600))
}

/// The test's driver: the one place decisions go. A backfill preemption (only ever for job
/// 2's reservation here) is carried out at once: the job stops and is requeued, and the
/// decisions of that event come back here too. Returns the decisions for the test to check.
fn apply(s: &mut Scheduler, decisions: Vec<Decision>, now: u64) -> Vec<Decision> {
    for x in &decisions {
        if let Decision::PreemptBackfill { job, for_job } = x {
            assert_eq!(*for_job, JobId(2));
            let d = s.handle(Event::Requeued(*job), now);
            apply(s, d, now);
        }
    }
    decisions
}

#[test]
fn a_completing_reservation_takes_no_new_backfill() {
    let cluster = Cluster::uniform(1, 8, 1, 64, 512_000);
    let mut s = Scheduler::new(cluster, Box::new(Tightest), Box::new(Fifo), SchedConfig::default());
    // Job 1 holds 4 GPUs for up to 10 h; job 2 (8 GPUs) reserves the node; job 3 (1 h)
    // backfills on the reserved free GPUs.
    for (spec, now) in [(job(1, 0, 4, 10), 0), (job(2, 1, 8, 10), 1), (job(3, 2, 1, 1), 2)] {
        let d = s.handle(Event::Submit(spec), now);
        apply(&mut s, d, now);
    }
    let d = s.cycle(2);
    let d = apply(&mut s, d, 2);
    assert!(d.iter().any(|d| matches!(d, Decision::Bind { job: JobId(3), backfill_for, .. } if backfill_for == &vec![JobId(2)])));
    s.check_invariants().unwrap();
    // Job 4 (1 h) arrives; job 1 ends early at 30 min: the reservation completes.
    let d = s.handle(Event::Submit(job(4, 1000, 1, 1)), 1000);
    apply(&mut s, d, 1000);
    let d = s.handle(Event::JobEnded(JobId(1)), 1800);
    apply(&mut s, d, 1800);
    let mut bound_2 = false;
    for _ in 0..4 {
        let d = s.cycle(1800);
        let d = apply(&mut s, d, 1800);
        s.check_invariants().unwrap();
        for x in &d {
            match x {
                Decision::Bind { job: JobId(2), .. } => bound_2 = true,
                Decision::Bind { job, backfill_for, .. } => {
                    assert!(!backfill_for.contains(&JobId(2)), "job {job} backfilled on a completing reservation");
                }
                _ => {}
            }
        }
        if bound_2 {
            break;
        }
    }
    assert!(bound_2, "the reservation of job 2 never filled");
}
