//! Fixed controller records for the store's format tests: one job record with every field
//! set (the row golden), and the contents of the version-4 database fixture
//! (`tests/fixtures/store_v4.sql`), built the same way by the code that wrote the fixture and
//! by the tests that load it.
//!
//! The fixture's cluster is `common::cluster(5)`: nodes `gpu01..gpu05` of 64 CPUs, 512000 MiB
//! and 8 GPUs, partition `batch` (id 0) and `debug` (id 1). Times are fixed seconds since the
//! epoch around [`T0`].
#![allow(dead_code)]

use flotilla_core::cluster::{GpuMask, NodeAlloc, NodeAvail, NodeId, PartId};
use flotilla_core::config::TopologyKind;
use flotilla_core::job::{HoldKind, JobId, JobSpec, Request};
use flotilla_core::sched::{AllocId, Allocation, Owner, ServiceId, REPLICA_ID_BASE};
use flotilla_proto::{ArrayTasks, ServiceCreate, SignalSpec};
use flotilla_slurmctld::acct::AcctInfo;
use flotilla_slurmctld::job::{JobRecord, JobState, StopWhy, Stopping};
use flotilla_slurmctld::service::ServiceRecord;

/// The fixture's "now" (s since epoch): records ended before [`CUTOFF`] are not loaded.
pub const T0: i64 = 1_790_000_000;
/// `Store::load`'s `finished_since` in the tests.
pub const CUTOFF: i64 = T0 - 3600;
/// The replica's job id (first replica id of the inference range).
pub const REPLICA: u64 = REPLICA_ID_BASE + 1;

fn s(v: &str) -> String {
    v.to_string()
}

fn sv(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// A whole-GPU allocation of `gpus` on node `node` for `owner`.
pub fn alloc(id: u64, owner: Owner, node: u32, gpus: u64, cpu_milli: u64, mem_mib: u64) -> Allocation {
    Allocation {
        id: AllocId(id),
        owner,
        part: NodeAlloc {
            node: NodeId(node),
            gpus: GpuMask(gpus),
            gpu_milli: 1000,
            cpu_milli,
            mem_mib,
        },
        created_at: (T0 - 600) as u64,
        preemptible: false,
        borrowed: false,
        backfill_for: None,
    }
}

/// A plain job of user alice (uid 2001) in partition `batch`, pending, with nothing optional
/// set; the fixture's records start from it.
pub fn base(id: u64) -> JobRecord {
    let request = Request {
        gpus: 1,
        gpu_milli: 1000,
        nodes: Some(1),
        nodes_max: None,
        gpus_per_node: None,
        cpu_milli_per_node: 1000,
        mem_mib_per_node: 1024,
        topology: TopologyKind::Any,
        gpu_types: Vec::new(),
        exclusive: false,
        required_nodes: Vec::new(),
        excluded_nodes: Vec::new(),
        features: None,
    };
    let spec = JobSpec {
        id: JobId(id),
        partition: PartId(0),
        account: s("research"),
        user: s("alice"),
        submit_time: (T0 - 1000) as u64,
        begin_time: None,
        base_priority: 0,
        nice: 0,
        site_factor: 0,
        time_limit_s: None,
        request,
        preemptible: false,
        checkpoint_bytes: 0,
        held: None,
        dependency_pending: false,
        preempt_count: 0,
        qos: s("normal"),
        elastic: None,
    };
    JobRecord {
        id,
        array_job_id: None,
        array_task_id: None,
        array_pending: Vec::new(),
        array_max_running: None,
        priority: flotilla_slurmctld::job::PRIO_UNSET,
        state: JobState::Pending,
        reason: None,
        name: format!("job{id}"),
        user: s("alice"),
        uid: 2001,
        gid: 2001,
        account: s("research"),
        qos: s("normal"),
        partition: s("batch"),
        work_dir: s("/home/alice"),
        stdout: None,
        stderr: None,
        argv: Vec::new(),
        comment: None,
        submit_time: T0 - 1000,
        start_time: None,
        end_time: None,
        time_limit_min: None,
        ntasks: 1,
        cpus_per_task: 1,
        num_nodes: 1,
        gres: vec![(s("gpu"), None, 1)],
        dependency: None,
        requeue: false,
        restarts: 0,
        spec,
        allocs: Vec::new(),
        nodes: Vec::new(),
        completing_nodes: Vec::new(),
        end_state: None,
        exit_code: 0,
        exit_signal: 0,
        stopping: None,
        topology: s("any"),
        exclusive: false,
        mem_per_node_mib: 1024,
        gpus: 1,
        required_nodes: Vec::new(),
        excluded_nodes: Vec::new(),
        submit_host: s("login1"),
        mem_per_cpu_mib: None,
        array_tasks: None,
        signal: None,
        warn_sent: false,
        special_exit: false,
        elastic: None,
        interactive: false,
        last_checkpoint_ack: None,
        service: None,
        acct: AcctInfo::default(),
        command: None,
        tres_per_job: None,
        tres_per_task: None,
        tres_per_node: None,
        tres_per_socket: None,
        max_nodes: 0,
        sockets_per_node: 0,
        mem_whole_node: false,
        node_shape: Default::default(),
        mail_type: 0,
        mail_user: None,
        job_flags: 0,
        time_min: None,
        deadline: None,
        min_cpus_set: None,
        features: None,
        ntasks_given: false,
        admin_comment: None,
        delay_boot_s: None,
        cores: Default::default(),
    }
}

/// A job record with every field set to a value other than its default (every `Option` is
/// `Some`, every list non-empty, every flag true): the row golden's record. Its state is
/// finished (`TIMEOUT`), so a controller loading it never gives it to the scheduler.
pub fn full() -> JobRecord {
    let request = Request {
        gpus: 16,
        gpu_milli: 1000,
        nodes: Some(2),
        nodes_max: None,
        gpus_per_node: Some(8),
        cpu_milli_per_node: 32_000,
        mem_mib_per_node: 256_000,
        topology: TopologyKind::Pod,
        gpu_types: sv(&["h100"]),
        exclusive: true,
        required_nodes: vec![NodeId(0), NodeId(1)],
        excluded_nodes: vec![NodeId(4)],
        features: None,
    };
    let spec = JobSpec {
        id: JobId(10),
        partition: PartId(0),
        account: s("research"),
        user: s("alice"),
        submit_time: (T0 - 900) as u64,
        begin_time: Some((T0 - 800) as u64),
        base_priority: 7,
        nice: -3,
        site_factor: 0,
        time_limit_s: Some(7200),
        request,
        preemptible: true,
        checkpoint_bytes: 1 << 34,
        held: Some(HoldKind::Admin),
        dependency_pending: true,
        preempt_count: 2,
        qos: s("high"),
        elastic: None,
    };
    let owner = Owner::Replica {
        service: ServiceId(1),
        replica: JobId(10),
    };
    let mut a0 = alloc(101, owner, 0, 0xff, 32_000, 256_000);
    a0.preemptible = true;
    a0.borrowed = true;
    a0.backfill_for = Some(JobId(4));
    let mut a1 = alloc(102, Owner::Job(JobId(10)), 1, 0xff, 32_000, 256_000);
    a1.part.gpu_milli = 500;
    JobRecord {
        id: 10,
        array_job_id: Some(9),
        array_task_id: Some(3),
        array_pending: vec![4, 5, 7],
        array_max_running: Some(2),
        priority: flotilla_slurmctld::job::PRIO_UNSET,
        state: JobState::Timeout,
        reason: Some(s("BadConstraints")),
        name: s("everything"),
        user: s("alice"),
        uid: 2001,
        gid: 3001,
        account: s("research"),
        qos: s("high"),
        partition: s("batch"),
        work_dir: s("/home/alice/run"),
        stdout: Some(s("out-%j.txt")),
        stderr: Some(s("err-%j.txt")),
        argv: sv(&["--epochs", "3"]),
        comment: Some(s("a \"quoted\" comment")),
        submit_time: T0 - 900,
        start_time: Some(T0 - 700),
        end_time: Some(T0 - 100),
        time_limit_min: Some(120),
        ntasks: 16,
        cpus_per_task: 4,
        num_nodes: 2,
        gres: vec![(s("gpu"), Some(s("h100")), 8), (s("gpu"), None, 2)],
        dependency: Some(s("afterok:4")),
        requeue: true,
        restarts: 3,
        spec,
        allocs: vec![a0, a1],
        nodes: sv(&["gpu01", "gpu02"]),
        completing_nodes: sv(&["gpu02"]),
        end_state: Some(JobState::Timeout),
        exit_code: 137,
        exit_signal: 9,
        stopping: Some(Stopping {
            why: StopWhy::Requeue { hold: true },
            term_at: T0 - 150,
            kill_sent: true,
            kill_at: Some(T0 - 120),
        }),
        topology: s("pod"),
        exclusive: true,
        mem_per_node_mib: 256_000,
        gpus: 16,
        required_nodes: sv(&["gpu01", "gpu02"]),
        excluded_nodes: sv(&["gpu05"]),
        submit_host: s("login2"),
        mem_per_cpu_mib: Some(2000),
        array_tasks: Some(ArrayTasks {
            count: 6,
            min: 0,
            max: 7,
            step: 1,
        }),
        signal: Some(SignalSpec {
            signal: 12,
            secs_before: 90,
            batch_only: true,
        }),
        warn_sent: true,
        special_exit: false,
        elastic: None,
        interactive: true,
        last_checkpoint_ack: Some(T0 - 300),
        service: Some(1),
        acct: AcctInfo {
            eligible_time: Some(T0 - 800),
            cancelled_by: Some(0),
            alloc_nodes: 2,
            alloc_cpus: 64,
            alloc_gpus: 16,
            alloc_mem_mib: 512_000,
            batch_cpus: 32,
            batch_gpus: 8,
            batch_mem_mib: 256_000,
            derived_ec: 0,
            acct_derived_ec: 0,
            reason_prev: None,
        },
        command: Some(s("/home/alice/run/train.sh --epochs 3")),
        tres_per_job: Some(s("gres:gpu:h100:16")),
        tres_per_task: Some(s("gres:gpu:1")),
        // Left out of the stored JSON when unset, as `elastic`: the golden is format 1's
        // (store_rows' round trip covers them set).
        tres_per_node: None,
        tres_per_socket: None,
        max_nodes: 0,
        sockets_per_node: 0,
        mem_whole_node: false,
        node_shape: Default::default(),
        mail_type: 0,
        mail_user: None,
        job_flags: 0,
        time_min: None,
        deadline: None,
        min_cpus_set: None,
        features: None,
        ntasks_given: false,
        admin_comment: None,
        delay_boot_s: None,
        cores: Default::default(),
    }
}

fn running(mut r: JobRecord, start: i64, nodes: &[&str], allocs: Vec<Allocation>) -> JobRecord {
    r.state = JobState::Running;
    r.start_time = Some(start);
    r.nodes = sv(nodes);
    r.allocs = allocs;
    r.acct.eligible_time = Some(r.submit_time);
    r.acct.alloc_nodes = r.allocs.len() as u32;
    r
}

/// The service of the fixture: `sdeploy create` of one-GPU replicas of `vllm serve`.
pub fn service() -> ServiceRecord {
    let create = ServiceCreate {
        name: s("llm"),
        command: s("vllm serve --port 8000"),
        gpus_per_replica: 1,
        gpu_type: Some(s("h100")),
        topology: Some(s("node")),
        cpus_per_replica: Some(2),
        mem_per_replica_mib: Some(8192),
        min_replicas: 1,
        max_replicas: 3,
        desired_replicas: 1,
        priority: 5,
        partition: Some(s("batch")),
        account: Some(s("inference")),
        work_dir: s("/srv/llm"),
        environment: vec![(s("HF_HOME"), s("/srv/hf"))],
        uid: 2002,
        gid: 2002,
        user: s("bob"),
    };
    let mut t = base(0);
    t.name = s("llm");
    t.user = s("bob");
    t.uid = 2002;
    t.gid = 2002;
    t.account = s("inference");
    t.spec.id = JobId(0);
    t.spec.user = s("bob");
    t.spec.account = s("inference");
    t.spec.request.topology = TopologyKind::Node;
    t.spec.request.cpu_milli_per_node = 2000;
    t.spec.request.mem_mib_per_node = 8192;
    t.spec.request.gpu_types = sv(&["h100"]);
    t.topology = s("node");
    t.cpus_per_task = 2;
    t.mem_per_node_mib = 8192;
    t.work_dir = s("/srv/llm");
    t.service = Some(1);
    ServiceRecord {
        id: 1,
        create,
        desired_replicas: 1,
        template: t,
        create_time: T0 - 5000,
    }
}

/// The jobs of the fixture database, by id:
/// - 1: completed long before [`CUTOFF`] (migrated, not loaded);
/// - 2: completed after the cutoff;
/// - 3: running on `gpu01` and `gpu02` (GPUs 4-7 of each), with an `srun` step;
/// - 4: pending, held by its user, waiting on `afterok:3`;
/// - 5: an array's pending remainder (tasks 1-3, `%2`); 6 is its task 0, running on `gpu03`;
/// - 7: completing after `scancel`, `gpu03` still to confirm;
/// - 8: running on `gpu02`, being preempted (SIGKILL deadline set);
/// - 10: [`full`], finished after the cutoff;
/// - [`REPLICA`]: the service's replica, running on `gpu01`.
pub fn jobs() -> Vec<JobRecord> {
    let mut v = Vec::new();

    let mut j = base(1);
    j.state = JobState::Completed;
    j.submit_time = T0 - 90_000;
    j.spec.submit_time = (T0 - 90_000) as u64;
    j.start_time = Some(T0 - 89_000);
    j.end_time = Some(T0 - 88_000);
    j.nodes = sv(&["gpu01"]);
    v.push(j);

    let mut j = base(2);
    j.state = JobState::Completed;
    j.start_time = Some(T0 - 900);
    j.end_time = Some(T0 - 60);
    j.nodes = sv(&["gpu04"]);
    j.exit_code = 0;
    j.command = Some(s("/home/alice/a.sh"));
    v.push(j);

    let mut j = base(3);
    j.num_nodes = 2;
    j.gpus = 8;
    j.ntasks = 2;
    j.spec.request.gpus = 8;
    j.spec.request.nodes = Some(2);
    j.spec.request.gpus_per_node = Some(4);
    j.spec.request.cpu_milli_per_node = 8000;
    j.spec.request.mem_mib_per_node = 65_536;
    j.mem_per_node_mib = 65_536;
    j.gres = vec![(s("gpu"), None, 4)];
    j.requeue = true;
    let a = vec![
        alloc(1, Owner::Job(JobId(3)), 0, 0xf0, 8000, 65_536),
        alloc(2, Owner::Job(JobId(3)), 1, 0xf0, 8000, 65_536),
    ];
    v.push(running(j, T0 - 500, &["gpu01", "gpu02"], a));

    let mut j = base(4);
    j.dependency = Some(s("afterok:3"));
    j.spec.dependency_pending = true;
    j.spec.held = Some(HoldKind::User);
    j.stdout = Some(s("slurm-%j.out"));
    v.push(j);

    let mut j = base(5);
    j.array_job_id = Some(5);
    j.array_pending = vec![1, 2, 3];
    j.array_max_running = Some(2);
    j.array_tasks = Some(ArrayTasks {
        count: 4,
        min: 0,
        max: 3,
        step: 1,
    });
    j.spec.request.gpus_per_node = Some(1);
    v.push(j);

    let mut j = base(6);
    j.array_job_id = Some(5);
    j.array_task_id = Some(0);
    j.array_tasks = Some(ArrayTasks {
        count: 4,
        min: 0,
        max: 3,
        step: 1,
    });
    j.spec.request.gpus_per_node = Some(1);
    let a = vec![alloc(3, Owner::Job(JobId(6)), 2, 0x01, 1000, 1024)];
    v.push(running(j, T0 - 400, &["gpu03"], a));

    let mut j = base(7);
    let a = vec![alloc(4, Owner::Job(JobId(7)), 2, 0x02, 1000, 1024)];
    let mut j2 = {
        j.signal = Some(SignalSpec {
            signal: 10,
            secs_before: 60,
            batch_only: false,
        });
        running(j, T0 - 300, &["gpu03"], a)
    };
    j2.state = JobState::Completing;
    j2.end_state = Some(JobState::Cancelled);
    j2.end_time = Some(T0 - 10);
    j2.completing_nodes = sv(&["gpu03"]);
    j2.exit_signal = 15;
    j2.acct.cancelled_by = Some(2001);
    j2.stopping = Some(Stopping {
        why: StopWhy::Cancel,
        term_at: T0 - 12,
        kill_sent: false,
        kill_at: None,
    });
    v.push(j2);

    let mut j = base(8);
    j.spec.preemptible = true;
    j.spec.checkpoint_bytes = 1 << 30;
    let mut a = alloc(5, Owner::Job(JobId(8)), 1, 0x01, 1000, 1024);
    a.preemptible = true;
    let mut j = running(j, T0 - 200, &["gpu02"], vec![a]);
    j.last_checkpoint_ack = Some(T0 - 100);
    j.stopping = Some(Stopping {
        why: StopWhy::Preempt,
        term_at: T0 - 5,
        kill_sent: false,
        kill_at: Some(T0 + 25),
    });
    v.push(j);

    v.push(full());

    let svc = service();
    let mut j = svc.template.clone();
    j.id = REPLICA;
    j.spec.id = JobId(REPLICA);
    j.submit_time = T0 - 4000;
    j.spec.submit_time = (T0 - 4000) as u64;
    let a = vec![alloc(
        6,
        Owner::Replica {
            service: ServiceId(1),
            replica: JobId(REPLICA),
        },
        0,
        0x01,
        2000,
        8192,
    )];
    v.push(running(j, T0 - 3900, &["gpu01"], a));
    v
}

/// The node rows of the fixture: one of each availability (`gpu03` was down because it did
/// not respond, which a restarted controller forgives).
pub fn nodes() -> Vec<(String, u64, NodeAvail)> {
    vec![
        (s("gpu01"), 11, NodeAvail::Up),
        (
            s("gpu02"),
            12,
            NodeAvail::Drain {
                reason: s("maintenance \"soon\""),
            },
        ),
        (
            s("gpu03"),
            13,
            NodeAvail::Down {
                reason: s("Not responding"),
            },
        ),
        (
            s("gpu04"),
            14,
            NodeAvail::Quarantined {
                reason: s("XID 79 on GPU 3"),
            },
        ),
        (s("gpu05"), 0, NodeAvail::Unknown),
    ]
}
