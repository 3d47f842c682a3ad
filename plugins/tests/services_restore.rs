//! The core's driver-facing pieces of services: a restarted driver restores running replicas
//! with `restore_replica` (counted toward their service, never started twice) and the replica
//! id sequence with `set_next_replica_id` (never reused); `largest_placeable_in` counts only
//! a partition's nodes.

use flotilla_core::cluster::{Cluster, NodeId, PartId};
use flotilla_core::config::TopologyKind::Node;
use flotilla_core::job::Request;
use flotilla_core::placement::LargestPlaceable;
use flotilla_core::sched::{Decision, Event, RunningJob, SchedConfig, Scheduler, ServiceId, ServiceSpec, REPLICA_ID_BASE};

fn sched(c: Cluster) -> Scheduler {
    Scheduler::new(
        c,
        flotilla_plugins::placement("topo-bestfit").unwrap(),
        flotilla_plugins::priority("priority/basic").unwrap(),
        SchedConfig::default(),
    )
}

fn cluster() -> Cluster {
    // 4 nodes × 8 GPUs, pods of 2; partition 0 holds all, `debug` the first two.
    let mut c = Cluster::uniform(4, 8, 2, 64, 512_000);
    c.add_partition("debug", vec![NodeId(0), NodeId(1)], false);
    c
}

fn spec(desired: u32) -> ServiceSpec {
    ServiceSpec {
        id: ServiceId(7),
        name: "llm".into(),
        partition: PartId(0),
        account: "inference".into(),
        user: "svc".into(),
        replica: Request::gpus(2, Node),
        min_replicas: 1,
        max_replicas: 4,
        desired_replicas: desired,
        priority: 10,
    }
}

/// The tests' one path for an event's decisions: none is expected from the service events
/// fed here (an upsert or a scale acts at the next cycle), so there is nothing to carry out.
fn event(s: &mut Scheduler, e: Event, now: u64) {
    let d = s.handle(e, now);
    assert!(d.is_empty(), "unexpected decisions: {d:?}");
}

/// The replicas a cycle's decisions bind (a bind needs nothing carried out in these tests).
fn bound(d: &[Decision]) -> Vec<u64> {
    d.iter()
        .filter_map(|d| match d {
            Decision::BindReplica { replica, .. } => Some(replica.0),
            _ => None,
        })
        .collect()
}

#[test]
fn largest_placeable_per_partition() {
    let mut s = sched(cluster());
    let lp = |node, pod, any| LargestPlaceable { node, pod, any };
    assert_eq!(s.largest_placeable_in(PartId(0)), lp(8, 16, 32));
    assert_eq!(s.largest_placeable_in(PartId(1)), lp(8, 16, 16));
    event(&mut s, Event::ServiceUpsert(spec(1)), 0);
    assert_eq!(bound(&s.cycle(0)).len(), 1);
    // Best fit puts the 2-GPU replica on the first node: the debug partition loses 2 GPUs.
    assert_eq!(s.largest_placeable_in(PartId(1)), lp(8, 14, 14));
    assert_eq!(s.largest_placeable_in(PartId(0)), lp(8, 16, 30));
    assert_eq!(s.largest_placeable(), s.largest_placeable_in(PartId(0)));
}

/// A partition of 4-GPU nodes beside 8-GPU nodes: 2 + 2 GPUs free make 4, a whole 4-GPU node's
/// worth that no free node holds, so 3 fit; the 8-GPU nodes outside the partition must not set
/// the node size (with them it read 4).
#[test]
fn largest_placeable_in_a_partition_of_smaller_nodes() {
    use flotilla_core::cluster::{NodeAlloc, NodeSpec};
    let node = |name: &str, gpus, pod: &str| NodeSpec {
        name: name.into(),
        gpus,
        gpu_type: None,
        cpu_milli: 64_000,
        mem_mib: 512_000,
        pod: pod.into(),
    };
    let mut c = Cluster::from_specs(&[node("s1", 4, "p1"), node("s2", 4, "p1"), node("b1", 8, "p2"), node("b2", 8, "p2")]);
    let small = c.add_partition("small", vec![NodeId(0), NodeId(1)], false);
    // Two GPUs busy on each small node: 2 + 2 free there.
    for n in [0, 1] {
        c.take(&NodeAlloc { node: NodeId(n), gpus: flotilla_core::cluster::GpuMask(0b11), gpu_milli: 1000, cpu_milli: 1000, mem_mib: 0 });
    }
    let s = sched(c);
    assert_eq!(s.largest_placeable_in(small), LargestPlaceable { node: 2, pod: 3, any: 3 });
}

#[test]
fn restored_replicas_count_and_ids_are_not_reused() {
    let mut a = sched(cluster());
    event(&mut a, Event::ServiceUpsert(spec(1)), 0);
    let ids = bound(&a.cycle(0));
    assert_eq!(ids, vec![REPLICA_ID_BASE]);
    let running: RunningJob = a.running()[&flotilla_core::job::JobId(REPLICA_ID_BASE)].clone();

    // Restart: the service, then its running replica and the id sequence.
    let mut b = sched(cluster());
    event(&mut b, Event::ServiceUpsert(spec(1)), 10);
    b.restore_replica(ServiceId(7), running.clone());
    b.set_next_replica_id(a.next_replica_id());
    assert!(bound(&b.cycle(10)).is_empty(), "the restored replica counts: none started twice");
    assert_eq!(b.service_replicas(ServiceId(7)).0.len(), 1);
    event(&mut b, Event::ServiceScale { service: ServiceId(7), desired: 2 }, 11);
    assert_eq!(bound(&b.cycle(11)), vec![REPLICA_ID_BASE + 1], "a fresh id");
    b.check_invariants().unwrap();

    // Restored as a plain job, the replica would not count and a second would start.
    let mut c = sched(cluster());
    event(&mut c, Event::ServiceUpsert(spec(1)), 10);
    c.restore_running(running);
    assert_eq!(bound(&c.cycle(10)).len(), 1);

    // The sequence only moves forward.
    let mut d = sched(cluster());
    d.set_next_replica_id(5);
    assert_eq!(d.next_replica_id(), REPLICA_ID_BASE);
    d.set_next_replica_id(REPLICA_ID_BASE + 9);
    d.set_next_replica_id(REPLICA_ID_BASE + 3);
    assert_eq!(d.next_replica_id(), REPLICA_ID_BASE + 9);
}

/// Replicas drawing from the driver's job id space (`share_job_ids`) take Slurm's
/// `get_next_job_id` ids: from the sequence, skipping ids the driver holds and the core's
/// jobs, wrapping from `MaxJobId` (never given) to `FirstJobId`; none when all are in use.
#[test]
fn shared_job_ids_wrap_and_skip_ids_in_use() {
    let mut s = sched(cluster());
    s.share_job_ids(102, 100, 104);
    s.hold_job_id(100);
    assert_eq!(s.take_job_id(), Some(102));
    s.hold_job_id(102);
    event(&mut s, Event::ServiceUpsert(spec(2)), 0);
    let mut ids = bound(&s.cycle(0));
    ids.sort_unstable();
    assert_eq!(ids, vec![101, 103], "103, then 100 (held) is skipped after the wrap");
    assert_eq!(s.next_replica_id(), 102);
    assert_eq!(s.take_job_id(), None, "every id of 100..104 is in use");
    s.free_job_id(100);
    assert_eq!(s.take_job_id(), Some(100));
    s.check_invariants().unwrap();
}
