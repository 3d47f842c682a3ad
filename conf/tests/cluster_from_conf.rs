//! The cluster model the scheduler runs on, built from real configuration files: the
//! reference cluster's own slurm.conf/gres.conf/topology.conf and our 128-node example.

use flotilla_core::cluster::{Cluster, NodeId};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{JobId, JobSpec, Request};
use flotilla_core::sched::{Decision, Event, SchedConfig, Scheduler};
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn reference_cluster_schedules_in_its_topology() {
    let conf = flotilla_conf::load_from(&root().join("../shared/slurm-reference/conf/slurm.conf")).unwrap();
    let c = Cluster::from_config(&conf);
    assert_eq!(c.nodes.len(), 4);
    assert_eq!(c.total_gpus(), 32);
    assert_eq!(c.pods.len(), 2);
    let pods: Vec<Vec<&str>> = c.pods.iter().map(|p| p.nodes.iter().map(|n| c.node(*n).name.as_str()).collect()).collect();
    assert_eq!(pods, vec![vec!["gpu01", "gpu02"], vec!["gpu03", "gpu04"]]);
    let parts: Vec<(&str, usize, bool)> = c.partitions.iter().map(|p| (p.name.as_str(), p.nodes.len(), p.default)).collect();
    assert_eq!(parts, vec![("batch", 4, true), ("debug", 2, false)]);
    assert_eq!(c.partitions[1].max_time_min, Some(30));
    assert_eq!(c.node(NodeId(0)).cpu_milli, 64_000);
    assert_eq!(c.node(NodeId(0)).gpu_type.as_deref(), Some("h100"));

    // A 16-GPU pod job lands on one leaf switch; a 2-GPU debug job on gpu01/gpu02 only.
    let mut s = Scheduler::new(
        c,
        flotilla_plugins::placement(&conf.select_type).unwrap(),
        flotilla_plugins::priority(&conf.priority_type).unwrap(),
        SchedConfig::default(),
    );
    // A submission forces no decision (nothing to carry out); the cycle binds both.
    assert!(s.handle(Event::Submit(JobSpec::simple(1, 0, Request::gpus(16, TopologyKind::Pod), Some(600))), 0).is_empty());
    let mut dbg = JobSpec::simple(2, 0, Request::gpus(2, TopologyKind::Node), Some(600));
    dbg.partition = s.cluster().partition_id("debug").unwrap();
    assert!(s.handle(Event::Submit(dbg), 0).is_empty());
    let d = s.cycle(0);
    assert_eq!(d.iter().filter(|d| matches!(d, Decision::Bind { .. })).count(), 2);
    let names = |j: u64| -> Vec<String> {
        s.running()[&JobId(j)].allocs.iter().map(|a| s.cluster().node(a.part.node).name.clone()).collect()
    };
    let pod_job = names(1);
    assert!(pod_job == ["gpu03", "gpu04"] || pod_job == ["gpu01", "gpu02"], "{pod_job:?}");
    assert!(["gpu01", "gpu02"].contains(&names(2)[0].as_str()));
    // The debug job went to the leaf the pod job left free: whole leaf1 stays usable for debug.
    assert_eq!(pod_job, ["gpu03", "gpu04"]);
    s.check_invariants().unwrap();
}

#[test]
fn example_128_node_cluster_loads_into_the_model() {
    let conf = flotilla_conf::load_from(&root().join("examples/cluster-128/slurm.conf")).unwrap();
    let c = Cluster::from_config(&conf);
    assert_eq!((c.nodes.len(), c.total_gpus(), c.pods.len()), (128, 1024, 4));
    assert!(c.pods.iter().all(|p| p.nodes.len() == 32));
    assert!(c.partitions.iter().any(|p| p.sub_node_pool));
    assert!(c.partitions.iter().any(|p| p.default_topology == TopologyKind::Node));
    let lp = flotilla_core::placement::largest_placeable(&c, &|_| Some(flotilla_core::cluster::GpuMask::EMPTY));
    assert_eq!((lp.node, lp.pod, lp.any), (8, 256, 1024));
}
