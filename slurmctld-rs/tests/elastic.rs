//! The controller carrying out elastic jobs (in process, fake clock, fake nodes): an elastic
//! job starts at its minimum, grows into free nodes (its record, the store and the new nodes
//! follow, `--elastic-signal` goes to its steps), gives the growth back to a pending job
//! (SIGTERM on the leaving nodes, SIGKILL and the release at the deadline), survives a
//! rebooted node above its minimum, keeps its growth across a controller restart, and
//! `scontrol update NumNodes=` sets its maximum or shrinks a rigid job. The transcript is a golden
//! (`tests/goldens/elastic_controller.txt`).

mod harness;

use flotilla_proto::{
    CtlToNode, ElasticInfo, ElasticRequest, GresSpec, JobChange, JobRef, Request, Response,
    SubmitElastic, UpdateJob,
};
use flotilla_slurmctld::ctld::CtlOptions;
use harness::{job, Harness, User};

/// Four 8-GPU nodes in one partition; elastic jobs grow 60 s after each change; preemption
/// at once.
const FOUR_NODES: &str = "\
ClusterName=harness
SlurmctldHost=localhost
GresTypes=gpu
PreemptExemptTime=0
ElasticGrowInterval=60
NodeName=gpu[01-04] Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 State=UNKNOWN
PartitionName=batch Nodes=gpu[01-04] Default=YES DefaultTime=01:00:00 MaxTime=2-00:00:00 State=UP
";

/// Eight GPUs on each node: the job holds its nodes whole.
fn gpus8(mut j: flotilla_proto::SubmitJob) -> flotilla_proto::SubmitJob {
    j.gres = vec![GresSpec {
        name: "gpu".into(),
        gpu_type: None,
        count: 8,
    }];
    j
}

fn elastic(who: User, min: u32, max: u32, signal: Option<i32>) -> Request {
    let mut j = gpus8(job(who, None, 0));
    j.nodes_min = Some(min);
    j.nodes_max = Some(max);
    Request::SubmitElastic(Box::new(SubmitElastic {
        job: j,
        elastic: ElasticRequest {
            gpus_max: None,
            step: None,
            signal,
        },
    }))
}

fn info(h: &mut Harness, id: u64) -> ElasticInfo {
    match h.call(User::Alice, Request::QueryElastic { job_ids: vec![id] }) {
        Response::Elastic(mut v) => v.pop().expect("an elastic job"),
        other => panic!("{other:?}"),
    }
}

fn nodes(h: &Harness, id: u64) -> (String, u32) {
    let j = h.job(id);
    (j.nodes.clone(), j.num_nodes)
}

#[test]
fn elastic_job_grows_shrinks_and_loses_a_node() {
    let mut h = Harness::new("elastic_controller", FOUR_NODES, CtlOptions::default());
    for n in ["gpu01", "gpu02", "gpu03", "gpu04"] {
        h.register(n);
    }
    h.turn();
    // A rigid job on one node; the elastic job (2..4 nodes, SIGUSR1 on changes) starts at 2.
    let rigid = h.submit(gpus8(job(User::Bob, Some(600), 0)));
    h.rpc(User::Alice, elastic(User::Alice, 2, 4, Some(10)));
    h.turn();
    let Some(Response::Submitted(s)) = h.replies().last().cloned() else {
        panic!("submitted")
    };
    let id = s.job_id;
    assert_eq!(nodes(&h, id).1, 2, "starts at MIN");
    // Its environment carries its range as torchrun takes it; a rigid job's does not.
    let env_of = |m: &CtlToNode| match m {
        CtlToNode::Launch { bind, .. } => Some((
            bind.job_id,
            bind.environment
                .iter()
                .find(|(k, _)| k == "FLOTILLA_ELASTIC_NNODES")
                .map(|(_, v)| v.clone()),
        )),
        _ => None,
    };
    let launched: Vec<(u64, Option<String>)> =
        h.sent.iter().filter_map(|(_, m)| env_of(m)).collect();
    assert_eq!(
        launched,
        vec![(id, Some("2:4".to_string())), (id, Some("2:4".to_string()))]
    );
    assert_eq!(info(&mut h, id).min, 2);
    // After the interval it grows into the free node, in one round.
    h.advance(60);
    h.turn();
    assert_eq!(nodes(&h, id).1, 3);
    // The batch host hears the members, first node first, before the signal.
    let first = h.job(id).batch_host.clone();
    let to_first: Vec<&CtlToNode> = h
        .sent
        .iter()
        .filter(|(n, _)| *n == first)
        .map(|(_, m)| m)
        .collect();
    assert!(
        matches!(to_first.as_slice(), [CtlToNode::Membership { nodes, .. }, CtlToNode::SignalSteps { signal: 10, .. }] if nodes.split(',').count() == 3 && nodes.starts_with(&first)),
        "{to_first:?}"
    );
    let e = info(&mut h, id);
    assert_eq!(
        (
            e.resizes.len(),
            e.resizes[0].change.as_str(),
            e.grown_nodes.is_empty()
        ),
        (1, "grow", false)
    );
    let joined = e.grown_nodes.clone();
    assert!(
        h.runs_on(&joined).iter().any(|(j, _)| *j == id),
        "the new node runs the job's part"
    );
    // The rigid job ends: the job grows to MAX.
    h.advance(600);
    h.turn();
    h.advance(60);
    h.turn();
    assert_eq!(nodes(&h, id).1, 4);
    assert_eq!(
        h.job(rigid).state,
        Some(flotilla_proto::JobStateWire::Completed)
    );
    // The controller restarts: the record (nodes, grown parts) comes back from the store.
    h.restart();
    for n in ["gpu01", "gpu02", "gpu03", "gpu04"] {
        h.register(n);
    }
    h.turn();
    assert_eq!(nodes(&h, id).1, 4);
    assert_eq!(info(&mut h, id).resizes.len(), 2);
    // A node of the job other than its first reboots: a membership change, not a requeue.
    let lost = ["gpu04", "gpu03", "gpu02", "gpu01"]
        .into_iter()
        .find(|n| *n != first && h.runs_on(n).iter().any(|(j, _)| *j == id))
        .expect("a member other than the first");
    h.reboot(lost);
    h.register(lost);
    h.turn();
    assert_eq!(nodes(&h, id).1, 3);
    assert_eq!(h.job(id).state, Some(flotilla_proto::JobStateWire::Running));
    // A 2-node job arrives: the free node and the newest growth (SIGTERM now, SIGKILL at the
    // deadline).
    let mut two = gpus8(job(User::Bob, Some(600), 0));
    two.nodes_min = Some(2);
    let two = h.submit(two);
    let termed: Vec<&String> = h
        .sent
        .iter()
        .filter(|(_, m)| matches!(m, flotilla_proto::CtlToNode::Signal { job_id, signal: 15, .. } if *job_id == id))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(termed.len(), 1, "SIGTERM to the grown node taken back");
    assert_eq!(
        nodes(&h, id).1,
        3,
        "the leaving member keeps its node until the deadline"
    );
    // The deadline is a preemption's: the core's `min_deadline_s` (10 s) for a job without a
    // checkpoint size.
    h.advance(9);
    h.turn();
    assert_eq!(nodes(&h, id).1, 3, "not before the deadline");
    h.advance(1);
    h.turn();
    assert_eq!(nodes(&h, id).1, 2, "back at MIN");
    assert_eq!(
        h.job(two).state,
        Some(flotilla_proto::JobStateWire::Running)
    );
    let e = info(&mut h, id);
    let changes: Vec<&str> = e.resizes.iter().map(|r| r.change.as_str()).collect();
    assert_eq!(changes, vec!["grow", "grow", "lost", "shrink"]);
    assert_eq!((e.resizes[2].num_nodes, e.resizes[3].num_nodes), (3, 2));
    // scontrol update NumNodes= on the running elastic job sets its maximum.
    let up = UpdateJob {
        job: JobRef {
            job_id: id,
            tasks: None,
        },
        changes: vec![JobChange::NumNodes(3)],
    };
    assert!(matches!(
        h.call(User::Alice, Request::UpdateJob(up)),
        Response::JobResults(_)
    ));
    assert_eq!(info(&mut h, id).max, 3);
    let low = UpdateJob {
        job: JobRef {
            job_id: id,
            tasks: None,
        },
        changes: vec![JobChange::NumNodes(1)],
    };
    match h.call(User::Alice, Request::UpdateJob(low)) {
        Response::Error(e) => assert_eq!(e.code, flotilla_proto::errno::ESLURM_INVALID_NODE_COUNT),
        other => panic!("below MIN accepted: {other:?}"),
    }
    // ... and shrinks a rigid job at once.
    let shrink = UpdateJob {
        job: JobRef {
            job_id: two,
            tasks: None,
        },
        changes: vec![JobChange::NumNodes(1)],
    };
    assert!(matches!(
        h.call(User::Bob, Request::UpdateJob(shrink)),
        Response::JobResults(_)
    ));
    h.turn();
    assert_eq!(nodes(&h, two).1, 1);
    h.check();
}

/// `scontrol update NumNodes=` on a grown elastic job: a count outside MIN..MAX is refused; a
/// count below its size is its new MAX and the newest growth leaves with notice (SIGTERM now,
/// SIGKILL and the release at the deadline); it does not grow past it again.
#[test]
fn num_nodes_lowers_the_maximum_of_a_grown_job() {
    let mut h = Harness::new("elastic_num_nodes", FOUR_NODES, CtlOptions::default());
    for n in ["gpu01", "gpu02", "gpu03", "gpu04"] {
        h.register(n);
    }
    h.turn();
    h.rpc(User::Alice, elastic(User::Alice, 1, 3, None));
    h.turn();
    let Some(Response::Submitted(s)) = h.replies().last().cloned() else {
        panic!("submitted")
    };
    let id = s.job_id;
    h.advance(60);
    h.turn();
    assert_eq!(nodes(&h, id).1, 3, "grown to MAX in one round");
    let set = |n: u32| {
        Request::UpdateJob(UpdateJob {
            job: JobRef {
                job_id: id,
                tasks: None,
            },
            changes: vec![JobChange::NumNodes(n)],
        })
    };
    for bad in [0, 4] {
        match h.call(User::Alice, set(bad)) {
            Response::Error(e) => assert_eq!(
                e.code,
                flotilla_proto::errno::ESLURM_INVALID_NODE_COUNT,
                "{bad}"
            ),
            other => panic!("NumNodes={bad} accepted: {other:?}"),
        }
    }
    assert!(matches!(
        h.call(User::Alice, set(2)),
        Response::JobResults(_)
    ));
    let termed: Vec<String> = h
        .sent
        .iter()
        .filter(|(_, m)| matches!(m, CtlToNode::Signal { job_id, signal: 15, .. } if *job_id == id))
        .map(|(n, _)| n.clone())
        .collect();
    assert_eq!(termed.len(), 1, "SIGTERM to one grown node: {:?}", h.sent);
    assert_eq!(nodes(&h, id).1, 3, "until the deadline");
    h.advance(10);
    h.turn();
    assert_eq!(nodes(&h, id).1, 2);
    assert!(h
        .sent
        .contains(&(termed[0].clone(), CtlToNode::Kill { job_id: id })));
    let e = info(&mut h, id);
    assert_eq!(
        (
            e.max,
            e.resizes.last().map(|r| (r.change.as_str(), r.num_nodes))
        ),
        (2, Some(("shrink", 2)))
    );
    // Free nodes, the interval passed: no growth above the new maximum.
    h.advance(120);
    h.turn();
    assert_eq!(nodes(&h, id).1, 2);
    h.check();
}

/// A step over every member of an elastic job (its launch command) is started on the node
/// that joins, with the same arguments: as many tasks as on its first node (one torchrun
/// agent a node here), ids after the last, after the node's binding.
#[test]
fn growth_starts_the_jobs_step_on_the_new_node() {
    let mut h = Harness::new("elastic_step", FOUR_NODES, CtlOptions::default());
    for n in ["gpu01", "gpu02", "gpu03"] {
        h.register(n);
    }
    h.turn();
    h.rpc(User::Alice, elastic(User::Alice, 2, 3, None));
    h.turn();
    let Some(Response::Submitted(s)) = h.replies().last().cloned() else {
        panic!("submitted")
    };
    let id = s.job_id;
    let req = flotilla_proto::step::StepRequest {
        job_id: id,
        ntasks_per_node: Some(1),
        name: "torchrun".into(),
        argv: vec!["torchrun".into(), "--nnodes=2:3".into()],
        srun_addr: "127.0.0.1:9".into(),
        ..Default::default()
    };
    let Response::StepCreated(l) = h.call(User::Alice, Request::CreateStep(Box::new(req))) else {
        panic!("step")
    };
    assert_eq!(l.tasks, vec![vec![0], vec![1]]);
    // After the interval the job grows onto the third node (the fourth never registered).
    h.advance(60);
    h.turn();
    assert_eq!(nodes(&h, id).1, 3);
    let to_new: Vec<&CtlToNode> = h
        .sent
        .iter()
        .filter(|(n, _)| n == "gpu03")
        .map(|(_, m)| m)
        .collect();
    match to_new.as_slice() {
        [CtlToNode::Launch { .. }, CtlToNode::LaunchStep(m)] => {
            assert_eq!(m.argv, vec!["torchrun".to_string(), "--nnodes=2:3".into()]);
            assert_eq!((m.node_index, m.layout.tasks[2].clone()), (2, vec![2]));
            assert_eq!(
                (m.layout.nodes[2].as_str(), m.task_gpus.clone()),
                ("gpu03", vec![0xff])
            );
        }
        other => panic!("{other:?}"),
    }
    h.check();
}

/// The partition's reclaimable figures (`Request::QueryReclaimable`), as `sinfo --largest`
/// and `-O LargestReclaimable` show them.
fn reclaimable(h: &mut Harness) -> flotilla_proto::PartitionReclaim {
    match h.call(User::Alice, Request::QueryReclaimable) {
        Response::Reclaimable(mut v) => {
            assert_eq!(v.len(), 1, "{v:?}");
            v.pop().unwrap()
        }
        other => panic!("{other:?}"),
    }
}

/// The partitions' metrics text (`/metrics/partitions`) and one sample of it.
fn partition_metric(h: &mut Harness, series: &str) -> u64 {
    use flotilla_slurmctld::metrics::{render, MetricsKind};
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    let now = harness::T0 + h.at();
    h.ctl_mut().handle(
        flotilla_slurmctld::ctld::Event::Metrics {
            kind: Some(MetricsKind::Partitions),
            reply: tx,
        },
        now,
    );
    let text = render(&rx.try_recv().expect("answered").expect("a snapshot"));
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|r| r.strip_prefix(' ')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
}

/// What operators see as reclaimable is the elastic job's growth: `QueryReclaimable` and the
/// metrics report the grown GPUs (8 per grown node, from the job's grown nodes) and the
/// largest request that would fit if they were taken back, beside `largest_placeable` (0 on
/// the full partition); a grown part already being given back is no longer reclaimable.
#[test]
fn grown_gpus_are_reported_as_reclaimable() {
    let mut h = Harness::new("elastic_reclaimable", FOUR_NODES, CtlOptions::default());
    for n in ["gpu01", "gpu02", "gpu03", "gpu04"] {
        h.register(n);
    }
    h.turn();
    h.submit(gpus8(job(User::Bob, Some(6_000), 0)));
    h.rpc(User::Alice, elastic(User::Alice, 1, 4, None));
    h.turn();
    let Some(Response::Submitted(s)) = h.replies().last().cloned() else {
        panic!("submitted")
    };
    let id = s.job_id;
    assert_eq!(nodes(&h, id).1, 1, "starts at MIN");
    // Nothing grown: the reclaimable figures are today's.
    let r = reclaimable(&mut h);
    let lp = |node, pod, any| flotilla_proto::LargestPlaceableWire { node, pod, any };
    let now = match h.call(User::Alice, Request::QueryPartitions) {
        Response::Partitions(p) => p[0].largest_placeable.expect("computed"),
        other => panic!("{other:?}"),
    };
    assert_eq!((r.name.as_str(), r.grown_gpus, r.largest_if_reclaimed), ("batch", 0, now));
    assert_eq!(now.any, 16, "two free nodes");
    // The job grows into both free nodes: 16 GPUs grown, nothing free now.
    h.advance(60);
    h.turn();
    assert_eq!(nodes(&h, id).1, 3);
    let grown_nodes = flotilla_core::hostlist::expand(&info(&mut h, id).grown_nodes).unwrap();
    let r = reclaimable(&mut h);
    assert_eq!(r.grown_gpus, 8 * grown_nodes.len() as u32, "the grown GPUs");
    assert_eq!(r.grown_gpus, 16);
    assert_eq!((r.largest_if_reclaimed.node, r.largest_if_reclaimed.any), (8, 16));
    let series = |m: &str, topo: &str| format!("{m}{{partition=\"batch\",topology=\"{topo}\"}}");
    assert_eq!(partition_metric(&mut h, "flotilla_elastic_reclaimable_gpus{partition=\"batch\"}"), 16);
    assert_eq!(partition_metric(&mut h, &series("flotilla_largest_placeable", "any")), 0);
    assert_eq!(partition_metric(&mut h, &series("flotilla_largest_placeable_if_reclaimed", "any")), 16);
    assert_eq!(partition_metric(&mut h, &series("flotilla_largest_placeable_if_reclaimed", "node")), 8);
    // A 2-node job takes the growth back: both grown nodes are leaving (held until the
    // deadline) and no longer count as reclaimable.
    let mut two = gpus8(job(User::Bob, Some(600), 0));
    two.nodes_min = Some(2);
    let two = h.submit(two);
    assert_eq!(nodes(&h, id).1, 3, "the leaving members keep their nodes until the deadline");
    assert_eq!(reclaimable(&mut h), flotilla_proto::PartitionReclaim { name: "batch".into(), grown_gpus: 0, largest_if_reclaimed: lp(0, 0, 0) });
    assert_eq!(partition_metric(&mut h, "flotilla_elastic_reclaimable_gpus{partition=\"batch\"}"), 0);
    h.advance(10);
    h.turn();
    assert_eq!(h.job(two).state, Some(flotilla_proto::JobStateWire::Running));
    assert_eq!(reclaimable(&mut h).grown_gpus, 0);
}

/// `scontrol update NumNodes=` on running jobs, as Slurm 22.05's `_update_job`: a rigid job
/// may only shrink (growing it is "not supported", 0 an invalid count), and shrinks at once;
/// a GPU-granular elastic job has no node count to set.
#[test]
fn num_nodes_refusals_on_running_jobs() {
    use flotilla_proto::errno::{ESLURM_INVALID_NODE_COUNT, ESLURM_NOT_SUPPORTED};
    let mut h = Harness::new("elastic_num_nodes_refusals", FOUR_NODES, CtlOptions::default());
    for n in ["gpu01", "gpu02", "gpu03", "gpu04"] {
        h.register(n);
    }
    h.turn();
    let mut rigid = gpus8(job(User::Bob, Some(600), 0));
    rigid.nodes_min = Some(2);
    let rigid = h.submit(rigid);
    let mut g = job(User::Alice, Some(600), 0);
    g.gpus = Some(flotilla_proto::GpuCount { gpu_type: None, count: 2 });
    g.topology = Some("any".into());
    h.rpc(
        User::Alice,
        Request::SubmitElastic(Box::new(SubmitElastic {
            job: g,
            elastic: ElasticRequest { gpus_max: Some(4), step: None, signal: None },
        })),
    );
    h.turn();
    let by_gpu = match h.replies().last().cloned() {
        Some(Response::Submitted(s)) => s.job_id,
        other => panic!("GPU-granular elastic job refused: {other:?}"),
    };
    for id in [rigid, by_gpu] {
        assert_eq!(h.job(id).state, Some(flotilla_proto::JobStateWire::Running), "job {id}");
    }
    let set = |job_id: u64, n: u32| Request::UpdateJob(UpdateJob { job: JobRef { job_id, tasks: None }, changes: vec![JobChange::NumNodes(n)] });
    let code = |r: Response| match r {
        Response::Error(e) => e.code,
        other => panic!("accepted: {other:?}"),
    };
    assert_eq!(code(h.call(User::Bob, set(rigid, 3))), ESLURM_NOT_SUPPORTED, "a rigid job does not grow");
    assert_eq!(code(h.call(User::Bob, set(rigid, 0))), ESLURM_INVALID_NODE_COUNT);
    assert_eq!(code(h.call(User::Alice, set(by_gpu, 1))), ESLURM_NOT_SUPPORTED, "no node count to set");
    assert!(matches!(h.call(User::Bob, set(rigid, 1)), Response::JobResults(_)));
    h.turn();
    assert_eq!(nodes(&h, rigid).1, 1, "shrunk at once");
}
