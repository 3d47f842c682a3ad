//! Scenario goldens for elastic jobs: growth into freed nodes (batched, rate-limited),
//! shrinking for an inference scale-up instead of preempting, shrinking to MIN then
//! preempting, a failed node as a membership change, a held reservation completed by
//! shrinking, and `scontrol update NumNodes=`. Each golden is reviewed as a diff; each key
//! fact is also asserted by hand.

mod support;

use flotilla_core::cluster::{Cluster, NodeAvail, NodeId, Time};
use flotilla_core::config::TopologyKind::{self, Node, Pod};
use flotilla_core::job::{Elastic, ElasticUnit, JobId, JobSpec, Request};
use flotilla_core::sched::{
    AllocId, Decision, Event, LossReason, SchedConfig, Scheduler, ServiceId, ServiceSpec,
};
use support::{check_golden, job, render};

struct Run {
    s: Scheduler,
    log: String,
    /// Shrinks decided and not yet carried out: (job, leaving allocations).
    shrinking: Vec<(JobId, Vec<AllocId>)>,
    /// Preemptions decided and not yet carried out.
    preempting: Vec<JobId>,
}

impl Run {
    fn new(c: Cluster) -> Run {
        // The budget is wide open: only the elastic rules decide here.
        let config = SchedConfig {
            budget_warn_pct: 100,
            budget_page_pct: 100,
            ..SchedConfig::default()
        };
        let s = Scheduler::new(
            c,
            flotilla_plugins::placement("topo-bestfit").unwrap(),
            flotilla_plugins::priority("priority/basic").unwrap(),
            config,
        );
        Run {
            s,
            log: String::new(),
            shrinking: Vec::new(),
            preempting: Vec::new(),
        }
    }
    fn note(&mut self, t: Time, what: &str) {
        self.log.push_str(&format!("t={t} {what}\n"));
    }
    /// The one path for decisions: the transcript, and shrinks and preemptions remembered
    /// until the scenario carries them out.
    fn apply(&mut self, d: Vec<Decision>, now: Time) -> Vec<Decision> {
        self.log.push_str(&render(&self.s, &d, now));
        for x in &d {
            match x {
                Decision::Shrink { job, allocs, .. } => self.shrinking.push((*job, allocs.clone())),
                Decision::Preempt { job, .. } => self.preempting.push(*job),
                _ => {}
            }
        }
        d
    }
    fn ev(&mut self, e: Event, now: Time) -> Vec<Decision> {
        let d = self.s.handle(e, now);
        let d = self.apply(d, now);
        self.s.check_invariants().unwrap();
        d
    }
    fn cycle(&mut self, now: Time) -> Vec<Decision> {
        let d = self.s.cycle(now);
        self.log.push_str(&format!("t={now} cycle\n"));
        let d = self.apply(d, now);
        self.s.check_invariants().unwrap();
        d
    }
    /// The leaving members of every shrink decided so far exit (SIGTERM honoured) at `now`.
    fn carry_out(&mut self, now: Time) {
        for (job, allocs) in std::mem::take(&mut self.shrinking) {
            self.note(now, &format!("job {job}'s leaving members exit"));
            self.ev(Event::Shrunk { job, allocs }, now);
        }
        for job in std::mem::take(&mut self.preempting) {
            self.note(now, &format!("job {job} checkpoints and exits"));
            self.ev(Event::Requeued(job), now);
        }
    }
    fn size(&self, job: u64) -> u32 {
        self.s.running()[&JobId(job)].size()
    }
}

/// An elastic job of `min..max` 8-GPU nodes (step `step`) with `topology`, preemptible.
fn elastic(id: u64, t: Time, min: u32, max: u32, step: u32, topology: TopologyKind) -> JobSpec {
    let req = Request {
        gpus: min * 8,
        nodes: Some(min),
        gpus_per_node: Some(8),
        ..Request::gpus(0, topology)
    };
    let mut j = JobSpec::simple(id, t, req, Some(24 * 3600));
    j.elastic = Some(Elastic {
        unit: ElasticUnit::Nodes,
        min,
        max,
        step,
    });
    j.preemptible = true;
    j.checkpoint_bytes = 600_000_000_000;
    j.user = format!("u{id}");
    j
}

fn service(id: u32, gpus: u32, desired: u32) -> ServiceSpec {
    ServiceSpec {
        id: ServiceId(id),
        name: format!("svc{id}"),
        partition: flotilla_core::cluster::PartId(0),
        account: "inference".into(),
        user: "svc".into(),
        replica: Request::gpus(gpus, Node),
        min_replicas: 0,
        max_replicas: 8,
        desired_replicas: desired,
        priority: 1000,
    }
}

fn count(d: &[Decision], f: fn(&Decision) -> bool) -> usize {
    d.iter().filter(|x| f(x)).count()
}

/// Grows into free nodes once its interval has passed, and into freed nodes in one batched
/// round, never above MAX.
#[test]
fn grows_into_freed_nodes() {
    let mut r = Run::new(Cluster::uniform(6, 8, 6, 64, 512_000));
    r.ev(Event::Submit(job(1, 0, 24, Node, 30)), 0);
    r.ev(Event::Submit(elastic(2, 0, 2, 5, 1, Node)), 0);
    let d = r.cycle(0);
    assert_eq!(count(&d, |x| matches!(x, Decision::Bind { .. })), 2);
    assert_eq!(r.size(2), 2, "starts as a gang of MIN");
    assert_eq!(
        count(&d, |x| matches!(x, Decision::Grow { .. })),
        0,
        "no growth before the interval"
    );
    let d = r.cycle(30);
    assert!(d.is_empty(), "still inside the interval: {d:?}");
    let d = r.cycle(60);
    assert_eq!(count(&d, |x| matches!(x, Decision::Grow { .. })), 1);
    assert_eq!(r.size(2), 3, "one free node");
    r.note(1800, "job 1 (3 nodes) ends");
    r.ev(Event::JobEnded(JobId(1)), 1800);
    let d = r.cycle(1800);
    let grown: Vec<usize> = d
        .iter()
        .filter_map(|x| {
            if let Decision::Grow { allocs, .. } = x {
                Some(allocs.len())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        grown,
        vec![2],
        "two nodes join in one round, MAX caps it at 5"
    );
    assert_eq!(r.size(2), 5);
    assert!(r.cycle(2000).is_empty(), "at MAX");
    // Growth is borrowed.
    let run = &r.s.running()[&JobId(2)];
    assert!(run.allocs.iter().all(|a| a.borrowed == run.is_grown(a.id)));
    assert_eq!(run.grown_gpus(), 24);
    check_golden("elastic_grow", &r.log);
}

/// A service scale-up shrinks the elastic job's newest growth instead of preempting a rigid
/// preemptible job that is older and lower in priority.
#[test]
fn shrinks_for_an_inference_scale_up_instead_of_preempting() {
    let mut r = Run::new(Cluster::uniform(4, 8, 4, 64, 512_000));
    let mut rigid = job(1, 0, 8, Node, 24 * 60);
    rigid.preemptible = true;
    r.ev(Event::Submit(rigid), 0);
    r.ev(Event::Submit(elastic(2, 0, 1, 3, 1, Node)), 0);
    r.cycle(0);
    r.cycle(600);
    assert_eq!(r.size(2), 3, "grew into both free nodes at once");
    r.note(1000, "service svc1 asks for 2 replicas of 8 GPUs");
    r.ev(Event::ServiceUpsert(service(1, 8, 2)), 1000);
    let d = r.cycle(1000);
    assert_eq!(
        count(&d, |x| matches!(x, Decision::Preempt { .. })),
        0,
        "nothing preempted: {d:?}"
    );
    assert_eq!(
        count(&d, |x| matches!(x, Decision::Shrink { .. })),
        2,
        "both grown nodes, one per replica"
    );
    assert_eq!(
        r.size(2),
        3,
        "the leaving members hold their GPUs until they exit"
    );
    r.carry_out(1010);
    let d = r.cycle(1010);
    assert_eq!(count(&d, |x| matches!(x, Decision::BindReplica { .. })), 2);
    assert_eq!(r.size(2), 1, "back at MIN, still running");
    assert!(
        r.s.running().contains_key(&JobId(1)),
        "the rigid job was never touched"
    );
    check_golden("elastic_shrink_for_inference", &r.log);
}

/// Shrunk to MIN first; only a job at MIN is preempted whole (SIGTERM, checkpoint, requeue).
#[test]
fn shrinks_to_min_then_preempts() {
    let mut r = Run::new(Cluster::uniform(2, 8, 2, 64, 512_000));
    r.ev(Event::Submit(elastic(1, 0, 1, 2, 1, Node)), 0);
    r.cycle(0);
    r.cycle(600);
    assert_eq!(r.size(1), 2);
    r.ev(Event::ServiceUpsert(service(1, 8, 1)), 1000);
    let d = r.cycle(1000);
    assert_eq!(count(&d, |x| matches!(x, Decision::Shrink { .. })), 1);
    assert_eq!(count(&d, |x| matches!(x, Decision::Preempt { .. })), 0);
    r.carry_out(1005);
    r.cycle(1005);
    assert_eq!(r.size(1), 1);
    r.note(1100, "svc1 scales to 2");
    r.ev(
        Event::ServiceScale {
            service: ServiceId(1),
            desired: 2,
        },
        1100,
    );
    let d = r.cycle(1100);
    assert_eq!(
        count(&d, |x| matches!(x, Decision::Shrink { .. })),
        0,
        "never below MIN"
    );
    assert_eq!(
        count(&d, |x| matches!(x, Decision::Preempt { job: JobId(1), .. })),
        1,
        "at MIN: preempted as today"
    );
    r.carry_out(1110);
    let d = r.cycle(1110);
    assert_eq!(count(&d, |x| matches!(x, Decision::BindReplica { .. })), 1);
    assert_eq!(
        r.s.pending_spec(JobId(1)).unwrap().preempt_count,
        1,
        "requeued at MIN"
    );
    check_golden("elastic_shrink_to_min_then_preempt", &r.log);
}

/// A failed node of an elastic job is a membership change while the job stays at or above
/// MIN; at MIN, or on its first (rendezvous) node, the job is requeued as before.
#[test]
fn a_failed_node_is_a_membership_change() {
    let mut r = Run::new(Cluster::uniform(4, 8, 4, 64, 512_000));
    r.ev(Event::Submit(elastic(1, 0, 2, 4, 1, Node)), 0);
    r.cycle(0);
    r.cycle(600);
    assert_eq!(r.size(1), 4);
    let nodes: Vec<NodeId> = r.s.running()[&JobId(1)]
        .allocs
        .iter()
        .map(|a| a.part.node)
        .collect();
    let down = |reason: &str| NodeAvail::Down {
        reason: reason.into(),
    };
    // A base member (not the first node) fails: a grown part becomes base.
    r.note(700, &format!("{} fails", r.s.cluster().node(nodes[1]).name));
    let d = r.ev(
        Event::NodeAvail {
            node: nodes[1],
            avail: down("Not responding"),
        },
        700,
    );
    assert!(
        matches!(
            &d[..],
            [Decision::MembersLost {
                reason: LossReason::Node(_),
                ..
            }]
        ),
        "{d:?}"
    );
    assert_eq!(r.size(1), 3);
    assert_eq!(
        r.s.running()[&JobId(1)].grown.len(),
        1,
        "one grown node promoted to base"
    );
    // A grown member fails.
    r.note(800, &format!("{} fails", r.s.cluster().node(nodes[3]).name));
    let d = r.ev(
        Event::NodeAvail {
            node: nodes[3],
            avail: down("Not responding"),
        },
        800,
    );
    assert!(matches!(&d[..], [Decision::MembersLost { .. }]), "{d:?}");
    assert_eq!(r.size(1), 2);
    // At MIN: the next failure requeues the job.
    r.note(900, &format!("{} fails", r.s.cluster().node(nodes[2]).name));
    let d = r.ev(
        Event::NodeAvail {
            node: nodes[2],
            avail: down("Not responding"),
        },
        900,
    );
    assert!(
        matches!(&d[..], [Decision::Requeue { job: JobId(1), .. }]),
        "{d:?}"
    );
    // The first node's failure requeues even above MIN.
    let mut r2 = Run::new(Cluster::uniform(4, 8, 4, 64, 512_000));
    r2.ev(Event::Submit(elastic(1, 0, 1, 4, 1, Node)), 0);
    r2.cycle(0);
    r2.cycle(600);
    let first = r2.s.running()[&JobId(1)].allocs[0].part.node;
    let d = r2.ev(
        Event::NodeAvail {
            node: first,
            avail: down("Not responding"),
        },
        700,
    );
    assert!(
        matches!(&d[..], [Decision::Requeue { .. }]),
        "the rendezvous host is gone: {d:?}"
    );
    r.log.push_str("--- first node fails\n");
    r.log.push_str(&r2.log);
    check_golden("elastic_node_failure", &r.log);
}

/// A pending job that fits only if growth is taken back reclaims it (no preemption right
/// needed); a held reservation whose GPUs grown parts occupy completes by shrinking them, and
/// growth never sits on reserved GPUs.
#[test]
fn pending_jobs_and_reservations_take_growth_back() {
    let mut r = Run::new(Cluster::uniform(4, 8, 4, 64, 512_000));
    r.ev(Event::Submit(job(1, 0, 16, Node, 60)), 0);
    r.ev(Event::Submit(elastic(2, 0, 1, 4, 1, Node)), 0);
    r.cycle(0);
    r.cycle(600);
    assert_eq!(r.size(2), 2);
    // A 16-GPU job (not a preemptor) arrives: it reclaims the grown node plus... only one
    // node is grown and none free: it must wait for job 1, reserving; growth stays.
    r.ev(Event::Submit(job(3, 700, 24, Node, 60)), 700);
    let d = r.cycle(700);
    assert_eq!(
        count(&d, |x| matches!(x, Decision::Shrink { .. })),
        0,
        "shrinking alone does not make room"
    );
    assert!(d
        .iter()
        .any(|x| matches!(x, Decision::Reserve { job: JobId(3), .. })));
    // Job 1 ends: the reservation's two freed nodes plus the grown one: it completes by
    // shrinking the growth.
    r.ev(Event::JobEnded(JobId(1)), 3600);
    let d = r.cycle(3600);
    assert_eq!(
        count(&d, |x| matches!(x, Decision::Grow { .. })),
        0,
        "growth never takes reserved GPUs"
    );
    assert_eq!(
        count(&d, |x| matches!(
            x,
            Decision::Shrink {
                for_job: Some(JobId(3)),
                ..
            }
        )),
        1,
        "{d:?}"
    );
    r.carry_out(3610);
    let d = r.cycle(3610);
    assert!(
        d.iter()
            .any(|x| matches!(x, Decision::Bind { job: JobId(3), .. })),
        "{d:?}"
    );
    assert_eq!(r.size(2), 1);
    // A small rigid job reclaims growth directly.
    let mut r2 = Run::new(Cluster::uniform(2, 8, 2, 64, 512_000));
    r2.ev(Event::Submit(elastic(1, 0, 1, 2, 1, Node)), 0);
    r2.cycle(0);
    r2.cycle(600);
    r2.ev(Event::Submit(job(2, 700, 4, Node, 60)), 700);
    let d = r2.cycle(700);
    assert_eq!(
        count(&d, |x| matches!(
            x,
            Decision::Shrink {
                for_job: Some(JobId(2)),
                ..
            }
        )),
        1,
        "{d:?}"
    );
    r2.carry_out(710);
    let d = r2.cycle(710);
    assert!(d
        .iter()
        .any(|x| matches!(x, Decision::Bind { job: JobId(2), .. })));
    r.log.push_str("--- a small job reclaims growth\n");
    r.log.push_str(&r2.log);
    check_golden("elastic_reclaim", &r.log);
}

/// `scontrol update NumNodes=`: a new MAX for an elastic job (growth above it shrinks, newest
/// first); a rigid job keeps its first nodes and loses the rest at once.
#[test]
fn scontrol_numnodes_sets_max_or_shrinks() {
    let mut r = Run::new(Cluster::uniform(6, 8, 6, 64, 512_000));
    r.ev(Event::Submit(elastic(1, 0, 1, 4, 1, Node)), 0);
    let mut rigid = job(2, 0, 16, Node, 60);
    rigid.request.nodes = Some(2);
    r.ev(Event::Submit(rigid), 0);
    r.cycle(0);
    r.cycle(600);
    assert_eq!(r.size(1), 4);
    r.note(700, "scontrol update jobid=1 NumNodes=2");
    let d = r.ev(
        Event::Resize {
            job: JobId(1),
            size: 2,
        },
        700,
    );
    assert_eq!(
        count(&d, |x| matches!(x, Decision::Shrink { for_job: None, .. })),
        1
    );
    r.carry_out(710);
    assert_eq!(r.size(1), 2);
    assert_eq!(r.s.running()[&JobId(1)].spec.elastic.unwrap().max, 2);
    let d = r.cycle(2000);
    assert_eq!(
        count(&d, |x| matches!(x, Decision::Grow { .. })),
        0,
        "the new MAX holds"
    );
    r.note(2100, "scontrol update jobid=2 NumNodes=1");
    let d = r.ev(
        Event::Resize {
            job: JobId(2),
            size: 1,
        },
        2100,
    );
    assert!(
        matches!(
            &d[..],
            [Decision::MembersLost {
                reason: LossReason::Resized,
                ..
            }]
        ),
        "{d:?}"
    );
    assert_eq!(r.s.running()[&JobId(2)].allocs.len(), 1);
    check_golden("elastic_scontrol_resize", &r.log);
}

/// A `pod` job grows only inside its pod, node-granular or GPU-granular.
#[test]
fn growth_stays_inside_the_topology_set() {
    // Two pods of 3 nodes; pod0 has one more free node, pod1 three.
    let mut r = Run::new(Cluster::uniform(6, 8, 3, 64, 512_000));
    r.ev(Event::Submit(job(9, 0, 8, Node, 600)), 0);
    r.ev(Event::Submit(elastic(1, 0, 1, 6, 1, Pod)), 0);
    r.cycle(0);
    r.cycle(600);
    let run = &r.s.running()[&JobId(1)];
    let pods: std::collections::BTreeSet<_> = run
        .allocs
        .iter()
        .map(|a| r.s.cluster().node(a.part.node).pod)
        .collect();
    assert_eq!(pods.len(), 1, "one pod");
    assert_eq!(
        r.size(1),
        3 - u32::from(
            r.s.running()[&JobId(9)].allocs[0].part.node.0 / 3 == run.allocs[0].part.node.0 / 3
        )
    );
    // GPU-granular, pod topology: 2..12 GPUs by 2 grows only in its pod, on nodes it does
    // not hold: its pod's other node takes 8 more GPUs (4 steps), the other pod none.
    let mut g = Run::new(Cluster::uniform(4, 8, 2, 64, 512_000));
    let mut spec = JobSpec::simple(1, 0, Request::gpus(2, Pod), Some(3600));
    spec.elastic = Some(Elastic { unit: ElasticUnit::Gpus, min: 2, max: 12, step: 2 });
    g.ev(Event::Submit(spec), 0);
    g.cycle(0);
    let d = g.cycle(600);
    assert_eq!(count(&d, |x| matches!(x, Decision::Grow { .. })), 1);
    let run = &g.s.running()[&JobId(1)];
    let pods: std::collections::BTreeSet<_> = run.allocs.iter().map(|a| g.s.cluster().node(a.part.node).pod).collect();
    assert_eq!(pods.len(), 1, "one pod");
    assert_eq!(run.size(), 10);
    r.log.push_str("--- GPU-granular, pod topology\n");
    r.log.push_str(&g.log);
    check_golden("elastic_topology", &r.log);
}
