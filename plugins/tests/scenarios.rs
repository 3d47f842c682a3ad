//! Scenario goldens for the scheduling core with Flotilla's default policies: "this cluster,
//! these jobs, these decisions". Each golden is checked in under `tests/goldens/` and reviewed
//! as a diff; the key fact of each scenario is also asserted by hand, so re-recording a golden
//! cannot hide a regression.

mod support;

use flotilla_core::cluster::{Cluster, GpuMask, NodeId, Time};
use flotilla_core::config::TopologyKind::{Any, Node};
use flotilla_core::job::JobId;
use flotilla_core::sched::{Decision, Event, QueueMode, Reason, Scheduler};
use support::{check_golden, job, render, scheduler};

struct Run {
    s: Scheduler,
    log: String,
}

impl Run {
    fn new(c: Cluster) -> Run {
        Run { s: scheduler(c, QueueMode::HeldReservations), log: String::new() }
    }
    /// The scenario's one path for decisions: they go into the transcript, rendered one per
    /// line, unless `quiet` (a setup step the transcript summarises in a line of its own).
    /// Nothing else is carried out here: the scenarios send the events a driver would (a
    /// job's end, a backfill job's requeue) themselves, so the transcript shows them.
    fn apply(&mut self, d: Vec<Decision>, now: Time, quiet: bool) -> Vec<Decision> {
        if !quiet {
            self.log.push_str(&render(&self.s, &d, now));
        }
        d
    }
    /// An event, logged with the decisions it forces.
    fn event(&mut self, e: Event, now: Time) -> Vec<Decision> {
        let what = match &e {
            Event::Requeued(j) => format!("requeued job={j}"),
            Event::NodeRegistered { node, boot_epoch } => {
                format!("node {} registers boot_epoch={boot_epoch}", self.s.cluster().node(*node).name)
            }
            other => format!("{other:?}"),
        };
        self.log.push_str(&format!("t={now} {what}\n"));
        let d = self.s.handle(e, now);
        self.apply(d, now, false)
    }
    /// A setup event, left out of the transcript with its decisions.
    fn setup(&mut self, e: Event, now: Time) -> Vec<Decision> {
        let d = self.s.handle(e, now);
        self.apply(d, now, true)
    }
    /// A setup cycle, left out of the transcript with its decisions.
    fn setup_cycle(&mut self, now: Time) -> Vec<Decision> {
        let d = self.s.cycle(now);
        self.s.check_invariants().unwrap();
        self.apply(d, now, true)
    }
    fn submit(&mut self, spec: flotilla_core::job::JobSpec, now: Time) {
        self.log.push_str(&format!(
            "t={now} submit job={} gpus={} topology={} limit={}m\n",
            spec.id,
            spec.request.gpus,
            spec.request.topology.as_str(),
            spec.time_limit_s.unwrap_or(0) / 60
        ));
        let d = self.s.handle(Event::Submit(spec), now);
        self.apply(d, now, false);
    }
    fn end(&mut self, id: u64, now: Time) {
        self.log.push_str(&format!("t={now} end job={id}\n"));
        let d = self.s.handle(Event::JobEnded(JobId(id)), now);
        self.apply(d, now, false);
    }
    fn cycle(&mut self, now: Time) -> Vec<Decision> {
        let d = self.s.cycle(now);
        self.log.push_str(&format!("t={now} cycle\n"));
        let d = self.apply(d, now, false);
        self.s.check_invariants().unwrap();
        d
    }
    fn node_of(&self, id: u64) -> Vec<String> {
        self.s.running()[&JobId(id)]
            .allocs
            .iter()
            .map(|a| self.s.cluster().node(a.part.node).name.clone())
            .collect()
    }
}

fn binds(d: &[Decision]) -> Vec<JobId> {
    d.iter()
        .filter_map(|d| match d {
            Decision::Bind { job, .. } => Some(*job),
            _ => None,
        })
        .collect()
}

#[test]
fn two_gpu_job_lands_on_the_node_with_six_used() {
    let mut r = Run::new(Cluster::uniform(4, 8, 2, 64, 512_000));
    r.submit(job(1, 0, 6, Node, 60), 0);
    r.submit(job(2, 0, 3, Node, 60), 0);
    r.cycle(0);
    let six = r.node_of(1);
    r.submit(job(3, 1, 2, Node, 60), 1);
    let d = r.cycle(1);
    assert_eq!(binds(&d), vec![JobId(3)]);
    assert_eq!(r.node_of(3), six, "the 2-GPU job must fill the node with 6 used");
    assert_eq!(r.s.cluster().fully_free_gpu_nodes(8), 2);
    check_golden("two_gpu_on_six_used", &r.log);
}

#[test]
fn sixteen_gpu_job_takes_two_whole_nodes() {
    let mut r = Run::new(Cluster::uniform(4, 8, 2, 64, 512_000));
    r.submit(job(1, 0, 3, Node, 60), 0);
    r.cycle(0);
    r.submit(job(2, 1, 16, Any, 60), 1);
    let d = r.cycle(1);
    assert_eq!(binds(&d), vec![JobId(2)]);
    let allocs = &r.s.running()[&JobId(2)].allocs;
    assert_eq!(allocs.len(), 2);
    for a in allocs {
        assert_eq!(a.part.gpus, GpuMask::all(8), "whole nodes only");
    }
    // Both whole nodes come from one pod when one pod can hold them.
    let pods: std::collections::BTreeSet<_> = allocs.iter().map(|a| r.s.cluster().node(a.part.node).pod).collect();
    assert_eq!(pods.len(), 1);
    check_golden("sixteen_gpu_two_whole_nodes", &r.log);
}

/// 4-GPU requests pair up to fill nodes, also under churn.
#[test]
fn four_gpu_requests_pair_up_to_fill_nodes() {
    let mut r = Run::new(Cluster::uniform(8, 8, 4, 64, 512_000));
    for i in 1..=6 {
        r.submit(job(i, 0, 4, Node, 60), 0);
    }
    r.cycle(0);
    assert_eq!(r.s.cluster().fully_free_gpu_nodes(8), 5, "six 4-GPU jobs fill exactly three nodes");
    // Churn: jobs 1, 3, 5 leave (one from each pair), three new 4-GPU jobs arrive.
    for i in [1, 3, 5] {
        r.end(i, 10);
    }
    for i in 7..=9 {
        r.submit(job(i, 10, 4, Node, 60), 10);
    }
    r.cycle(10);
    assert_eq!(r.s.cluster().fully_free_gpu_nodes(8), 5, "new halves pair with the halves left behind");
    // A 2-GPU job must not break a whole node while a half node... there is none: all 3 are full.
    r.submit(job(10, 11, 2, Node, 60), 11);
    r.submit(job(11, 11, 2, Node, 60), 11);
    r.cycle(11);
    assert_eq!(r.s.cluster().fully_free_gpu_nodes(8), 4, "two 2-GPU jobs share one node");
    assert_eq!(r.node_of(10), r.node_of(11));
    check_golden("four_gpu_pairs", &r.log);
}

/// A 256-GPU gang on a busy 1,024-GPU cluster holds its reservation while short
/// jobs backfill on the reserved GPUs, and the backfill is preempted when the gang fills.
#[test]
fn big_gang_holds_reservation_while_short_jobs_backfill() {
    let mut r = Run::new(Cluster::uniform(128, 8, 32, 64, 512_000));
    // 128 busy nodes: 8-GPU jobs ending at staggered times (1 to 128 hours).
    for i in 0..128u64 {
        r.setup(Event::Submit(job(1000 + i, 0, 8, Node, 60 * (i + 1))), 0);
    }
    r.setup_cycle(0);
    assert_eq!(r.s.running().len(), 128);
    r.log.push_str("t=0 128 whole-node jobs running, ending after 1..128 h\n");
    // Jobs 1000..1007 end early at t=100: 8 nodes free.
    for i in 0..8 {
        r.setup(Event::JobEnded(JobId(1000 + i)), 100);
    }
    r.submit(job(1, 100, 256, Any, 24 * 60), 100);
    let d = r.cycle(100);
    let est = d
        .iter()
        .find_map(|d| match d {
            Decision::Reserve { job, est_fill, gpus } if *job == JobId(1) => {
                assert_eq!(gpus.iter().map(|(_, g)| g.count()).sum::<u32>(), 256);
                Some(*est_fill)
            }
            _ => None,
        })
        .expect("the gang must hold a reservation");
    // It holds the 8 free nodes and the 24 that free up soonest (jobs ending at 9..32 h).
    assert_eq!(est, 32 * 3600);
    assert_eq!(r.s.pending_info(JobId(1)).unwrap().reason, Reason::Resources);
    assert_eq!(r.s.pending_info(JobId(1)).unwrap().expected_start, Some(est));
    // A short job backfills on the reserved free GPUs; a long one may not.
    r.submit(job(2, 200, 8, Node, 60), 200);
    r.submit(job(3, 200, 8, Node, 40 * 60), 200);
    let d = r.cycle(200);
    assert!(d.iter().any(|d| matches!(d, Decision::Bind { job, backfill_for, .. } if *job == JobId(2) && backfill_for == &vec![JobId(1)])));
    assert!(!binds(&d).contains(&JobId(3)), "a job ending after the fill must not backfill");
    // The long job holds a reservation of its own, ranked below the gang's and disjoint; as
    // in Slurm, only the first blocked job of the partition shows `Resources`.
    assert_eq!(r.s.pending_info(JobId(3)).unwrap().reason, Reason::Priority);
    assert_eq!(r.s.reservations().iter().map(|x| x.job).collect::<Vec<_>>(), vec![JobId(1), JobId(3)]);
    // The reservation survives the next cycles (held, not released).
    let d = r.cycle(300);
    assert!(!d.iter().any(|d| matches!(d, Decision::ReleaseReservation { .. })));
    // Every occupant of the reserved nodes ends early at t=1000: only the backfill job remains
    // on the reserved GPUs, and it is preempted the moment the reservation completes.
    for i in 8..32 {
        r.setup(Event::JobEnded(JobId(1000 + i)), 1000);
    }
    r.log.push_str("t=1000 jobs 1008..1031 end\n");
    let d = r.cycle(1000);
    assert!(d.iter().any(|d| matches!(d, Decision::PreemptBackfill { job, for_job } if *job == JobId(2) && *for_job == JobId(1))));
    assert!(!binds(&d).contains(&JobId(1)));
    r.event(Event::Requeued(JobId(2)), 1001);
    let d = r.cycle(1001);
    assert!(binds(&d).contains(&JobId(1)), "the gang starts once the backfill is gone");
    assert_eq!(r.s.running()[&JobId(1)].allocs.len(), 32);
    check_golden("gang_256_backfill", &r.log);
}

/// Two large gangs never deadlock: reservations are totally ordered and the lower one never
/// takes the higher one's GPUs; both run, in rank order.
#[test]
fn two_large_gangs_never_deadlock() {
    let mut r = Run::new(Cluster::uniform(4, 8, 2, 64, 512_000));
    // Small jobs on every node, ending at different times.
    for (i, node_end_min) in [(10u64, 30u64), (11, 60), (12, 90), (13, 120)] {
        r.submit(job(i, 0, 5, Node, node_end_min), 0);
    }
    r.cycle(0);
    r.submit(job(1, 10, 24, Any, 600), 10);
    r.submit(job(2, 11, 24, Any, 600), 11);
    let d = r.cycle(20);
    let reserved: Vec<JobId> = d
        .iter()
        .filter_map(|d| match d {
            Decision::Reserve { job, .. } => Some(*job),
            _ => None,
        })
        .collect();
    assert!(reserved.contains(&JobId(1)));
    // Time passes; small jobs end one by one.
    let mut started = Vec::new();
    for (t, id) in [(1800u64, 10u64), (3600, 11), (5400, 12), (7200, 13)] {
        r.end(id, t);
        for j in binds(&r.cycle(t)) {
            started.push((t, j));
        }
    }
    assert!(started.iter().any(|(_, j)| *j == JobId(1)), "the first gang starts: {started:?}");
    let t1 = started.iter().find(|(_, j)| *j == JobId(1)).unwrap().0;
    // The second one starts when the first ends.
    r.end(1, t1 + 3600);
    let d = r.cycle(t1 + 3600);
    assert!(binds(&d).contains(&JobId(2)) || started.iter().any(|(_, j)| *j == JobId(2)));
    check_golden("two_gangs_no_deadlock", &r.log);
}

#[test]
fn pending_reasons_name_the_topology() {
    let mut r = Run::new(Cluster::uniform(2, 8, 2, 64, 512_000));
    r.submit(job(1, 0, 5, Node, 60), 0);
    r.submit(job(2, 0, 5, Node, 60), 0);
    r.cycle(0);
    r.submit(job(3, 1, 8, Node, 60), 1);
    r.submit(job(4, 2, 8, Node, 60), 2);
    r.cycle(2);
    let i3 = r.s.pending_info(JobId(3)).unwrap();
    assert_eq!(i3.reason, Reason::Resources);
    assert_eq!(r.s.pending_info(JobId(4)).unwrap().reason, Reason::Priority);
    assert!(i3.detail.as_deref().unwrap().contains("needs 8 GPUs on one node") || i3.detail.as_deref().unwrap().contains("whole node"), "{:?}", i3.detail);
    let lp = r.s.largest_placeable();
    assert_eq!((lp.node, lp.pod, lp.any), (0, 0, 0));
    let _ = NodeId(0);
}

#[test]
fn node_reboot_requeues_its_jobs() {
    let mut r = Run::new(Cluster::uniform(2, 8, 2, 64, 512_000));
    r.setup(Event::NodeRegistered { node: NodeId(0), boot_epoch: 1 }, 0);
    r.setup(Event::NodeRegistered { node: NodeId(1), boot_epoch: 1 }, 0);
    r.submit(job(1, 0, 8, Node, 60), 0);
    r.submit(job(2, 0, 16, Any, 60), 0);
    r.cycle(0);
    assert_eq!(r.s.running().len(), 1);
    let node = r.s.running()[&JobId(1)].allocs[0].part.node;
    // Same epoch: nothing happens.
    assert!(r.setup(Event::NodeRegistered { node, boot_epoch: 1 }, 5).is_empty());
    let d = r.event(Event::NodeRegistered { node, boot_epoch: 2 }, 10);
    assert!(matches!(&d[..], [Decision::Requeue { job, .. }] if *job == JobId(1)));
    assert!(r.s.running().is_empty());
    r.s.check_invariants().unwrap();
    assert!(r.s.cluster().node(node).is_idle());
}

#[test]
fn required_node_down_is_req_node_not_avail() {
    let mut r = Run::new(Cluster::uniform(4, 8, 2, 64, 512_000));
    r.setup(Event::NodeAvail { node: NodeId(3), avail: flotilla_core::cluster::NodeAvail::Drain { reason: "maint".into() } }, 0);
    let mut spec = job(1, 0, 1, Node, 5);
    spec.request.required_nodes = vec![NodeId(3)];
    r.submit(spec, 0);
    assert!(r.cycle(0).is_empty());
    let info = r.s.pending_info(JobId(1)).unwrap();
    assert_eq!(info.reason, Reason::ReqNodeNotAvail);
    assert_eq!(info.slurm_detail.as_deref(), Some("UnavailableNodes:n0004"));
}
