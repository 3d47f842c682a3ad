//! The store's row format: goldens of the JSON of fixed records (a format change shows as a
//! golden diff; a core field renamed fails to compile in `store::rows` instead), and the
//! round trip record -> row -> JSON -> row -> record for random records.
//!
//! The goldens `tests/golden/job_row.json` and `tests/golden/service_row.json` were written
//! by the serde derives of `JobRecord` and `ServiceRecord` before the row types existed (format
//! 0): the row types reproduce that text. They are pretty-printed; the column holds the same
//! JSON compact.

mod store_data;

use flotilla_core::cluster::{GpuMask, NodeAlloc, NodeAvail, NodeId, PartId};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{HoldKind, JobId, JobSpec, Request};
use flotilla_core::sched::{AllocId, Allocation, Owner, ServiceId};
use flotilla_proto::{ArrayTasks, ServiceCreate, SignalSpec};
use flotilla_slurmctld::acct::AcctInfo;
use flotilla_slurmctld::job::{JobRecord, JobState, StopWhy, Stopping};
use flotilla_slurmctld::service::ServiceRecord;
use flotilla_slurmctld::store::rows::{self, JobRow, NodeAvailRow, ServiceRow};
use proptest::prelude::*;

fn check_golden(name: &str, want: &str, got: &str) {
    assert!(
        got == want.trim_end(),
        "the stored JSON of {name} changed: a format change needs a new format number and a \
         migration (store/rows.rs).\n--- golden\n{want}\n--- now\n{got}\n"
    );
}

/// `json` without the whitespace outside its strings (keys keep their order).
fn minified(json: &str) -> String {
    let (mut out, mut in_string, mut escaped) = (String::new(), false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            (in_string, escaped) = match (escaped, c) {
                (true, _) => (true, false),
                (false, '\\') => (true, true),
                (false, '"') => (false, false),
                _ => (true, false),
            };
        } else if !c.is_whitespace() {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

#[test]
fn job_row_json_is_the_golden() {
    let rec = store_data::full();
    let row = JobRow::from(&rec);
    check_golden(
        "job_row.json",
        include_str!("golden/job_row.json"),
        &serde_json::to_string_pretty(&row).unwrap(),
    );
    // The column's compact text is the same JSON.
    let compact = rows::job_to_json(&rec);
    assert_eq!(compact, minified(include_str!("golden/job_row.json")));
    assert_eq!(rows::job_from_json(&compact).unwrap(), rec);
}

/// A row whose `node_shape` lacks fields (written before they were added) still reads, the
/// missing ones not given: a controller must start on the state an older one wrote.
#[test]
fn node_shape_with_missing_fields_reads() {
    let rec = store_data::full();
    let mut v: serde_json::Value = serde_json::from_str(&rows::job_to_json(&rec)).unwrap();
    v["node_shape"] = serde_json::json!({"min_cpus": 4, "tmp_disk_mib": 100});
    let back = rows::job_from_json(&v.to_string()).unwrap();
    assert_eq!(back.node_shape, flotilla_proto::NodeShape { min_cpus: 4, tmp_disk_mib: 100, ..Default::default() });
}

#[test]
fn service_row_json_is_the_golden() {
    let svc = store_data::service();
    let row = ServiceRow::from(&svc);
    check_golden(
        "service_row.json",
        include_str!("golden/service_row.json"),
        &serde_json::to_string_pretty(&row).unwrap(),
    );
    assert_eq!(rows::service_from_json(&rows::service_to_json(&svc)).unwrap(), svc);
}

#[test]
fn node_avail_json_is_format_0s() {
    let cases = [
        (NodeAvail::Up, r#""Up""#),
        (NodeAvail::Unknown, r#""Unknown""#),
        (
            NodeAvail::Drain {
                reason: "x \"y\"".into(),
            },
            r#"{"Drain":{"reason":"x \"y\""}}"#,
        ),
        (
            NodeAvail::Down {
                reason: "Not responding".into(),
            },
            r#"{"Down":{"reason":"Not responding"}}"#,
        ),
        (
            NodeAvail::Quarantined {
                reason: "XID 79".into(),
            },
            r#"{"Quarantined":{"reason":"XID 79"}}"#,
        ),
        (
            NodeAvail::Fail {
                reason: "bad".into(),
            },
            r#"{"Fail":{"reason":"bad"}}"#,
        ),
    ];
    for (avail, json) in cases {
        assert_eq!(rows::avail_to_json(&avail), json);
        assert_eq!(rows::avail_from_json(json).unwrap(), avail);
        assert_eq!(NodeAvail::from(NodeAvailRow::from(&avail)), avail);
    }
}

fn text() -> impl Strategy<Value = String> {
    ".{0,6}"
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(text())
}

fn texts() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(text(), 0..3)
}

fn job_state() -> impl Strategy<Value = JobState> {
    prop_oneof![
        Just(JobState::Pending),
        Just(JobState::Running),
        Just(JobState::Completing),
        Just(JobState::Completed),
        Just(JobState::Failed),
        Just(JobState::Cancelled),
        Just(JobState::Timeout),
        Just(JobState::Preempted),
        Just(JobState::NodeFail),
        Just(JobState::OutOfMemory),
    ]
}

fn topology() -> impl Strategy<Value = TopologyKind> {
    prop_oneof![
        Just(TopologyKind::Node),
        Just(TopologyKind::Pod),
        Just(TopologyKind::Any)
    ]
}

fn node_ids() -> impl Strategy<Value = Vec<NodeId>> {
    proptest::collection::vec(any::<u32>().prop_map(NodeId), 0..3)
}

prop_compose! {
    fn request()(
        gpus in any::<u32>(),
        gpu_milli in any::<u32>(),
        nodes in any::<Option<u32>>(),
        gpus_per_node in any::<Option<u32>>(),
        nodes_max in any::<Option<u32>>(),
        cpu_milli_per_node in any::<u64>(),
        mem_mib_per_node in any::<u64>(),
        topology in topology(),
        gpu_types in texts(),
        exclusive in any::<bool>(),
        nodes_in in (node_ids(), node_ids()),
        features in proptest::sample::select(vec![None, Some("ib"), Some("(ib|fast)&a b"), Some("x&"), Some("a,b|c")]),
    ) -> Request {
        Request {
            gpus,
            gpu_milli,
            nodes,
            nodes_max,
            gpus_per_node,
            cpu_milli_per_node,
            mem_mib_per_node,
            topology,
            gpu_types,
            exclusive,
            required_nodes: nodes_in.0,
            excluded_nodes: nodes_in.1,
            // A row keeps the text and parses it again.
            features: features.map(|f| Box::new(flotilla_core::features::Constraint::parse(f).unwrap().unwrap())),
        }
    }
}

prop_compose! {
    fn spec()(
        ids in (any::<u64>(), any::<u32>()),
        who in (text(), text()),
        times in (any::<u64>(), any::<Option<u64>>(), any::<Option<u64>>()),
        prio in (any::<u32>(), any::<i32>()),
        request in request(),
        preempt in (any::<bool>(), any::<u64>(), any::<u32>()),
        held in proptest::option::of(prop_oneof![Just(HoldKind::User), Just(HoldKind::Admin)]),
        dependency_pending in any::<bool>(),
        elastic in proptest::option::of((any::<bool>(), any::<u32>(), any::<u32>(), any::<u32>())),
    ) -> JobSpec {
        JobSpec {
            id: JobId(ids.0),
            partition: PartId(ids.1),
            account: who.0,
            user: who.1,
            submit_time: times.0,
            begin_time: times.1,
            base_priority: prio.0,
            nice: prio.1,
            site_factor: prio.1 / 3,
            time_limit_s: times.2,
            request,
            preemptible: preempt.0,
            checkpoint_bytes: preempt.1,
            held,
            dependency_pending,
            preempt_count: preempt.2,
            qos: "normal".into(),
            elastic: elastic.map(|(gpus, min, max, step)| flotilla_core::job::Elastic {
                unit: if gpus { flotilla_core::job::ElasticUnit::Gpus } else { flotilla_core::job::ElasticUnit::Nodes },
                min,
                max,
                step,
            }),
        }
    }
}

fn owner() -> impl Strategy<Value = Owner> {
    prop_oneof![
        any::<u64>().prop_map(|j| Owner::Job(JobId(j))),
        (any::<u32>(), any::<u64>()).prop_map(|(s, r)| Owner::Replica {
            service: ServiceId(s),
            replica: JobId(r),
        }),
    ]
}

prop_compose! {
    fn allocation()(
        id in any::<u64>(),
        owner in owner(),
        part in (any::<u32>(), any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()),
        created_at in any::<u64>(),
        flags in (any::<bool>(), any::<bool>()),
        backfill_for in any::<Option<u64>>(),
    ) -> Allocation {
        Allocation {
            id: AllocId(id),
            owner,
            part: NodeAlloc {
                node: NodeId(part.0),
                gpus: GpuMask(part.1),
                gpu_milli: part.2,
                cpu_milli: part.3,
                mem_mib: part.4,
            },
            created_at,
            preemptible: flags.0,
            borrowed: flags.1,
            backfill_for: backfill_for.map(JobId),
        }
    }
}

fn stop_why() -> impl Strategy<Value = StopWhy> {
    prop_oneof![
        Just(StopWhy::Cancel),
        Just(StopWhy::Timeout),
        Just(StopWhy::Preempt),
        any::<bool>().prop_map(|hold| StopWhy::Requeue { hold }),
    ]
}

fn stopping() -> impl Strategy<Value = Option<Stopping>> {
    proptest::option::of(
        (stop_why(), any::<i64>(), any::<bool>(), any::<Option<i64>>()).prop_map(
            |(why, term_at, kill_sent, kill_at)| Stopping {
                why,
                term_at,
                kill_sent,
                kill_at,
            },
        ),
    )
}

prop_compose! {
    fn acct()(
        a in (any::<Option<i64>>(), any::<Option<u32>>(), any::<u32>(), any::<u32>(), any::<u32>()),
        b in (any::<u64>(), any::<u32>(), any::<u32>(), any::<u64>()),
        d in (any::<i32>(), any::<i32>(), any::<bool>()),
    ) -> AcctInfo {
        AcctInfo {
            eligible_time: a.0,
            cancelled_by: a.1,
            alloc_nodes: a.2,
            alloc_cpus: a.3,
            alloc_gpus: a.4,
            alloc_mem_mib: b.0,
            batch_cpus: b.1,
            batch_gpus: b.2,
            batch_mem_mib: b.3,
            derived_ec: d.0,
            acct_derived_ec: d.1,
            reason_prev: d.2.then_some(flotilla_core::sched::Reason::Dependency),
        }
    }
}

fn array_tasks() -> impl Strategy<Value = Option<ArrayTasks>> {
    proptest::option::of(
        any::<(u32, u32, u32, u32)>().prop_map(|(count, min, max, step)| ArrayTasks { count, min, max, step }),
    )
}

fn signal() -> impl Strategy<Value = Option<SignalSpec>> {
    proptest::option::of(
        any::<(i32, u32, bool)>().prop_map(|(signal, secs_before, batch_only)| SignalSpec {
            signal,
            secs_before,
            batch_only,
        }),
    )
}

prop_compose! {
    fn record()(
        a in (
            any::<u64>(),
            any::<Option<u64>>(),
            any::<Option<u32>>(),
            proptest::collection::vec(any::<u32>(), 0..4),
            any::<Option<u32>>(),
            job_state(),
            opt_text(),
            text(),
            text(),
            any::<u32>(),
        ),
        b in (any::<u32>(), text(), text(), text(), text(), opt_text(), opt_text(), texts(), opt_text(), any::<i64>()),
        c in (
            any::<Option<i64>>(),
            any::<Option<i64>>(),
            any::<Option<u32>>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            proptest::collection::vec((text(), opt_text(), any::<u64>()), 0..3),
            opt_text(),
            any::<bool>(),
            any::<u32>(),
        ),
        d in (
            spec(),
            proptest::collection::vec(allocation(), 0..3),
            texts(),
            texts(),
            proptest::option::of(job_state()),
            any::<i32>(),
            any::<i32>(),
            stopping(),
            text(),
            any::<bool>(),
        ),
        e in (
            any::<u64>(),
            any::<u32>(),
            texts(),
            texts(),
            text(),
            any::<Option<u64>>(),
            array_tasks(),
            signal(),
            any::<bool>(),
            any::<bool>(),
        ),
        f in (any::<Option<i64>>(), any::<Option<u32>>(), acct(), opt_text(), opt_text(), opt_text()),
        g in proptest::option::of(elastic_record()),
        h in (opt_text(), opt_text(), any::<u32>(), any::<u32>(), proptest::collection::btree_map(text(), proptest::collection::vec(any::<u32>(), 0..4), 0..3), any::<bool>()),
    ) -> JobRecord {
        JobRecord {
            id: a.0,
            array_job_id: a.1,
            array_task_id: a.2,
            array_pending: a.3,
            array_max_running: a.4,
            // Not stored (numbered again at recovery).
            priority: flotilla_slurmctld::job::PRIO_UNSET,
            state: a.5,
            reason: a.6,
            name: a.7,
            user: a.8,
            uid: a.9,
            gid: b.0,
            account: b.1,
            qos: b.2.clone(),
            partition: b.3,
            work_dir: b.4,
            stdout: b.5,
            stderr: b.6,
            argv: b.7,
            comment: b.8,
            submit_time: b.9,
            start_time: c.0,
            end_time: c.1,
            time_limit_min: c.2,
            ntasks: c.3,
            cpus_per_task: c.4,
            num_nodes: c.5,
            gres: c.6,
            dependency: c.7,
            requeue: c.8,
            restarts: c.9,
            // The spec's QOS is the record's (stored once).
            spec: JobSpec { qos: b.2, ..d.0 },
            allocs: d.1,
            nodes: d.2,
            completing_nodes: d.3,
            end_state: d.4,
            exit_code: d.5,
            exit_signal: d.6,
            stopping: d.7,
            topology: d.8,
            exclusive: d.9,
            mem_per_node_mib: e.0,
            gpus: e.1,
            required_nodes: e.2,
            excluded_nodes: e.3,
            submit_host: e.4,
            mem_per_cpu_mib: e.5,
            array_tasks: e.6,
            signal: e.7,
            warn_sent: e.8,
            special_exit: h.5,
            interactive: e.9,
            last_checkpoint_ack: f.0,
            service: f.1,
            acct: f.2,
            command: f.3,
            tres_per_job: f.4,
            tres_per_task: f.5,
            tres_per_node: h.0,
            tres_per_socket: h.1.clone(),
            max_nodes: h.2,
            sockets_per_node: h.3,
            mem_whole_node: h.3 % 2 == 1,
            node_shape: flotilla_proto::NodeShape {
                ntasks_per_node: h.2 % 5,
                ntasks_per_core: h.3 % 3,
                cores_per_socket: h.2 % 7,
                threads_per_core: h.3 % 2,
                min_cpus: h.2 % 11,
                tmp_disk_mib: u64::from(h.3) * 1024,
                oversubscribe: if h.2 % 3 == 0 { flotilla_proto::Oversubscribe::User } else { flotilla_proto::Oversubscribe::Unset },
            },
            mail_type: (h.3 % 0x800) as u16,
            job_flags: (h.2 % 32) as u16,
            time_min: f.1.map(|m| m % 1000),
            deadline: f.0.map(|d| d ^ 0x55),
            min_cpus_set: f.1.map(|m| m % 7),
            features: h.1.clone(),
            ntasks_given: h.2 % 2 == 0,
            admin_comment: h.1.as_ref().map(|t| format!("+={t}")),
            delay_boot_s: f.1.map(|m| m.wrapping_mul(60)),
            mail_user: h.1.as_ref().map(|t| format!("{t}@x")),
            cores: h.4,
            elastic: g,
        }
    }
}

prop_compose! {
    fn elastic_record()(
        signal in any::<Option<i32>>(),
        grown in proptest::collection::vec(
            (proptest::collection::vec(any::<u64>(), 0..3), any::<u64>(), any::<Option<u64>>()),
            0..3,
        ),
        resizes in proptest::collection::vec((any::<i64>(), 0u8..3, texts(), any::<u32>()), 0..3),
    ) -> flotilla_slurmctld::job::ElasticRecord {
        use flotilla_slurmctld::job::{ElasticRecord, Resize, ResizeChange};
        ElasticRecord {
            signal,
            grown: grown
                .into_iter()
                .map(|(allocs, at, shrinking)| flotilla_core::sched::Growth {
                    allocs: allocs.into_iter().map(flotilla_core::sched::AllocId).collect(),
                    at,
                    shrinking,
                })
                .collect(),
            resizes: resizes
                .into_iter()
                .map(|(time, c, nodes, num_nodes)| Resize {
                    time,
                    change: [ResizeChange::Grow, ResizeChange::Shrink, ResizeChange::Lost][c as usize],
                    nodes,
                    num_nodes,
                })
                .collect(),
        }
    }
}

prop_compose! {
    fn service_create()(
        a in (text(), text(), any::<u32>(), opt_text(), opt_text(), any::<Option<u32>>(), any::<Option<u64>>()),
        b in (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), opt_text(), opt_text(), text()),
        c in (proptest::collection::vec((text(), text()), 0..3), any::<u32>(), any::<u32>(), text()),
    ) -> ServiceCreate {
        ServiceCreate {
            name: a.0,
            command: a.1,
            gpus_per_replica: a.2,
            gpu_type: a.3,
            topology: a.4,
            cpus_per_replica: a.5,
            mem_per_replica_mib: a.6,
            min_replicas: b.0,
            max_replicas: b.1,
            desired_replicas: b.2,
            priority: b.3,
            partition: b.4,
            account: b.5,
            work_dir: b.6,
            environment: c.0,
            uid: c.1,
            gid: c.2,
            user: c.3,
        }
    }
}

proptest! {
    /// record -> row -> JSON -> row -> record is the identity, and the JSON is what the store
    /// writes and reads.
    #[test]
    fn job_record_round_trips_through_its_row(rec in record()) {
        let row = JobRow::from(&rec);
        let json = serde_json::to_string(&row).unwrap();
        prop_assert_eq!(&json, &rows::job_to_json(&rec));
        let back: JobRow = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &row);
        prop_assert_eq!(JobRecord::from(back), rec.clone());
        prop_assert_eq!(rows::job_from_json(&json).unwrap(), rec);
    }

    #[test]
    fn service_record_round_trips_through_its_row(
        id in any::<u32>(),
        create in service_create(),
        desired_replicas in any::<u32>(),
        template in record(),
        create_time in any::<i64>(),
    ) {
        let svc = ServiceRecord { id, create, desired_replicas, template, create_time };
        let json = rows::service_to_json(&svc);
        let back: ServiceRow = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(&back, &ServiceRow::from(&svc));
        prop_assert_eq!(rows::service_from_json(&json).unwrap(), svc);
    }
}
