//! Regression test (found by the controller's crash test, where many cycles run within one
//! second of wall-clock time): a reservation re-planned in the same second as a backfill job
//! started on its GPUs gets `created == start` and an estimated fill earlier than the backfill
//! job's end. Re-planning now clears the backfill relation of the dropped reservation (the
//! job becomes an ordinary occupant with its own end), so invariant 6 holds and
//! `check_invariants` reports nothing.

use flotilla_core::cluster::{Cluster, GpuMask, Node, NodeId};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{JobId, JobSpec, Request};
use flotilla_core::placement::{Score, PlaceCtx, PlacementPolicy, NodeDemand};
use flotilla_core::sched::{Decision, Event, PriorityInput, PriorityPolicy, SchedConfig, Scheduler};
use proptest::prelude::*;

#[derive(Debug)]
struct Lowest;
impl PlacementPolicy for Lowest {
    fn name(&self) -> &str {
        "lowest"
    }
    fn score(&self, _: &PlaceCtx<'_>, node: NodeId, _: GpuMask, _: &NodeDemand<'_>) -> Score {
        -Score::from(node.0)
    }
    fn pick_gpus(&self, node: &Node, avail: GpuMask, n: u32) -> Option<GpuMask> {
        avail.choose(n, node.gpus)
    }
}

/// Priority = base priority + failed cycles (aging, as multifactor does).
#[derive(Debug)]
struct Aging;
impl PriorityPolicy for Aging {
    fn name(&self) -> &str {
        "aging"
    }
    fn priority(&self, i: PriorityInput<'_>) -> u64 {
        u64::from(i.job.base_priority) + u64::from(i.failed_cycles) * 7
    }
}

/// The test's driver: the one place decisions go. Binds add the job to `running` (the test
/// ends running jobs itself, in an order the case chooses). A backfill preemption is left
/// for the job's end to settle, as a driver slow to stop it would: the job keeps its GPUs
/// until the test ends it, which is the situation this regression covers.
fn apply(running: &mut Vec<JobId>, decisions: Vec<Decision>) {
    for d in decisions {
        if let Decision::Bind { job, .. } = d {
            running.push(job);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn invariants_hold_when_priorities_overtake_reservations(
        jobs in proptest::collection::vec((1u32..=8, 0u32..100, 0u64..2, proptest::option::of(Just(360u64))), 5..60),
        ends in proptest::collection::vec(0usize..40, 0..40),
    ) {
        let cluster = Cluster::uniform(3, 8, 3, 64, 512_000);
        let mut s = Scheduler::new(cluster, Box::new(Lowest), Box::new(Aging), SchedConfig::default());
        let mut now = 0u64;
        let mut running: Vec<JobId> = Vec::new();
        let mut ends = ends.into_iter();
        for (i, (gpus, prio, len, limit)) in jobs.iter().enumerate() {
            let mut spec = JobSpec::simple(i as u64 + 1, now, Request::gpus(*gpus, TopologyKind::Node), limit.map(|l| l * 10));
            spec.base_priority = *prio;
            apply(&mut running, s.handle(Event::Submit(spec), now));
            apply(&mut running, s.cycle(now));
            s.check_invariants().map_err(TestCaseError::fail)?;
            now += *len;
            if let Some(k) = ends.next() {
                if !running.is_empty() {
                    let j = running.remove(k % running.len());
                    apply(&mut running, s.handle(Event::JobEnded(j), now));
                }
            }
        }
        for _ in 0..20 {
            now += 1;
            apply(&mut running, s.cycle(now));
            s.check_invariants().map_err(TestCaseError::fail)?;
            if !running.is_empty() {
                let j = running.remove(0);
                apply(&mut running, s.handle(Event::JobEnded(j), now));
            }
        }
    }
}
