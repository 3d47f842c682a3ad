//! Authorisation attacks on the controller, in process ([`harness::Harness`]): each is what a
//! hostile user tried on a local cluster (issue #17), refused with Slurm's error, and each
//! scenario's transcript is compared with its golden in `tests/goldens/` (`UPDATE_GOLDENS=1`
//! re-records; review the diff). The refusals are also asserted by hand.

mod harness;

use flotilla_core::quota::parse_quota_conf;
use flotilla_proto::errno::*;
use flotilla_proto::*;
use flotilla_slurmctld::ctld::CtlOptions;
use harness::*;

/// The error code of a reply (0: none).
fn code(r: &Response) -> i32 {
    match r {
        Response::Error(e) => e.code,
        Response::JobResults(v) => v.iter().find_map(|j| j.error.as_ref().map(|e| e.code)).unwrap_or(0),
        _ => 0,
    }
}

fn text(r: &Response) -> String {
    match r {
        Response::Error(e) => e.text.clone(),
        Response::JobResults(v) => v.iter().find_map(|j| j.error.as_ref().map(|e| e.text.clone())).unwrap_or_default(),
        _ => String::new(),
    }
}

fn submit(h: &mut Harness, who: User, j: SubmitJob) -> Response {
    h.call(who, Request::SubmitJob(Box::new(j)))
}

fn update(id: u64, changes: Vec<JobChange>) -> Request {
    Request::UpdateJob(UpdateJob { job: JobRef::id(id), changes })
}

fn hold(op: HoldOp, id: u64) -> Request {
    Request::HoldRelease(HoldRelease { jobs: vec![JobRef::id(id)], op })
}

/// A harness over `conf` with `quota` as `quota.conf`, both nodes registered; `name` names
/// the golden.
fn with_quota(name: &str, conf: &str, quota: &str) -> Harness {
    let opts = CtlOptions { quotas: parse_quota_conf(quota, "quota.conf").unwrap(), ..CtlOptions::default() };
    let mut h = Harness::new(name, conf, opts);
    h.register("gpu01");
    h.register("gpu02");
    h.turn();
    h
}

fn gpus(n: u64) -> Vec<GresSpec> {
    vec![GresSpec { name: "gpu".into(), gpu_type: None, count: n }]
}

/// A job whose gid is not the caller's: alice claims gid 0 (root's group), as an
/// `LD_PRELOAD` shim returning gid 0 made `sbatch` do. Refused with Slurm's `Invalid group
/// id` (`_valid_id`); the same for a service. Root may submit for any uid and gid.
#[test]
fn forged_gid_is_refused() {
    let mut h = Harness::two_nodes("authz_forged_gid");
    let mut j = job(User::Alice, Some(10), 0);
    j.gid = 0;
    let r = submit(&mut h, User::Alice, j.clone());
    assert_eq!((code(&r), text(&r).as_str()), (ESLURM_GROUP_ID_MISSING, "Invalid group id"), "{r:?}");
    assert_eq!(h.jobs().count(), 0, "no job");
    // The same for an allocation (`salloc`/`srun` without one).
    let mut alloc = j.clone();
    (alloc.interactive, alloc.script) = (true, String::new());
    assert_eq!(code(&submit(&mut h, User::Alice, alloc)), ESLURM_GROUP_ID_MISSING);
    let svc = ServiceCreate {
        name: "llm".into(),
        command: "serve".into(),
        gpus_per_replica: 1,
        max_replicas: 1,
        work_dir: "/tmp".into(),
        uid: 2001,
        gid: 0,
        user: "alice".into(),
        ..ServiceCreate::default()
    };
    let r = h.call(User::Alice, Request::ServiceCreate(Box::new(svc)));
    assert_eq!(code(&r), ESLURM_GROUP_ID_MISSING, "{r:?}");
    // Root may (sbatch --uid/--gid as root).
    let Response::Submitted(s) = submit(&mut h, User::Root, j) else { panic!("root's submission refused") };
    assert_eq!(h.job(s.job_id).gid, 0);
    h.check();
}

/// Accounts from `quota.conf` associations: alice (research) asking for ops at submission is
/// charged to her default account instead (Slurm 22.05 `job_create` without
/// `AccountingStorageEnforce=associations`; goldens-extra a11_unknown_account), and so is a
/// pending job she moves to ops by `scontrol update` (no error: `_update_job` takes the
/// association Slurm falls back to; goldens-extra 1113); a running job's account does not
/// change (`Job is no longer pending execution`); with `AccountingStorageEnforce=associations` a user with no
/// association is refused even without `-A`.
#[test]
fn accounts_need_an_association() {
    let quota = "Account=research Users=alice\nAccount=ops Users=bob\n";
    let mut h = with_quota("authz_accounts", TWO_NODES, quota);
    let mut j = job(User::Alice, None, 0);
    j.account = Some("ops".into());
    let Response::Submitted(s) = submit(&mut h, User::Alice, j.clone()) else { panic!("an unassociated account falls back") };
    assert_eq!(h.job(s.job_id).account, "research", "charged to alice's default account");
    let r = h.call(User::Alice, Request::CancelJob(CancelJob { jobs: vec![JobRef::id(s.job_id)], ..CancelJob::default() }));
    assert!(!matches!(r, Response::Error(_)), "{r:?}");
    j.account = Some("research".into());
    let running = h.submit(j.clone());
    assert_eq!(h.job(running).state, Some(JobStateWire::Running));
    let r = h.call(User::Alice, update(running, vec![JobChange::Account("ops".into())]));
    assert_eq!(code(&r), ESLURM_JOB_NOT_PENDING, "running job's account: {r:?}");
    let r = h.call(User::Root, update(running, vec![JobChange::Account("ops".into())]));
    assert_eq!(code(&r), ESLURM_JOB_NOT_PENDING, "not even an admin changes a running job's account: {r:?}");
    j.hold = true;
    let pending = h.submit(j);
    let r = h.call(User::Alice, update(pending, vec![JobChange::Account("ops".into())]));
    assert_eq!(code(&r), 0, "pending job to an account alice has no association with: {r:?}");
    assert_eq!(h.job(pending).account, "research");
    assert_eq!(h.job(running).account, "research");
    h.check();

    let enforce = format!("AccountingStorageEnforce=associations\n{TWO_NODES}");
    let mut h = with_quota("authz_accounts_enforced", &enforce, "Account=research Users=alice\n");
    let mut other = job(User::Alice, None, 0);
    other.account = Some("ops".into());
    let r = submit(&mut h, User::Alice, other);
    assert_eq!(
        (code(&r), text(&r).as_str()),
        (ESLURM_INVALID_ACCOUNT, "Invalid account or account/partition combination specified"),
        "enforced: no fallback: {r:?}"
    );
    let r = submit(&mut h, User::Bob, job(User::Bob, None, 0));
    assert_eq!(code(&r), ESLURM_INVALID_ACCOUNT, "bob has no association: {r:?}");
    assert!(matches!(submit(&mut h, User::Alice, job(User::Alice, None, 0)), Response::Submitted(_)), "alice's default account");
}

/// Partitions' access keys of a migrated slurm.conf, each with Slurm's error.
#[test]
fn partition_access_keys_are_enforced() {
    let conf = format!(
        "{TWO_NODES}\
PartitionName=admins Nodes=gpu01 RootOnly=YES\n\
PartitionName=wheel Nodes=gpu01 AllowGroups=root\n\
PartitionName=opsonly Nodes=gpu01 AllowAccounts=ops\n\
PartitionName=noresearch Nodes=gpu01 DenyAccounts=research\n\
PartitionName=highqos Nodes=gpu01 AllowQos=high\n\
PartitionName=noroot Nodes=gpu01 DisableRootJobs=YES\n"
    );
    let mut h = with_quota("authz_partition_keys", &conf, "Account=research Users=alice,root\n");
    let to = |p: &str| {
        let mut j = job(User::Alice, None, 0);
        j.partition = Some(p.into());
        j
    };
    let cases = [
        ("admins", ESLURM_ACCESS_DENIED, "Access/permission denied"),
        ("wheel", ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP, "User's group not permitted to use this partition"),
        ("opsonly", ESLURM_INVALID_ACCOUNT, "Invalid account or account/partition combination specified"),
        ("noresearch", ESLURM_INVALID_ACCOUNT, "Invalid account or account/partition combination specified"),
        ("highqos", ESLURM_INVALID_QOS, "Invalid qos specification"),
    ];
    for (p, c, t) in cases {
        let r = submit(&mut h, User::Alice, to(p));
        assert_eq!((code(&r), text(&r).as_str()), (c, t), "partition {p}: {r:?}");
    }
    let mut q = to("highqos");
    q.qos = Some("high".into());
    assert!(matches!(submit(&mut h, User::Alice, q), Response::Submitted(_)), "AllowQos=high lets QOS high in");
    // Root: anywhere but DisableRootJobs.
    for p in ["admins", "wheel"] {
        let mut j = job(User::Root, None, 0);
        j.partition = Some(p.into());
        assert!(matches!(submit(&mut h, User::Root, j), Response::Submitted(_)), "root into {p}");
    }
    let mut j = job(User::Root, None, 0);
    j.partition = Some("noroot".into());
    assert_eq!(code(&submit(&mut h, User::Root, j)), ESLURM_USER_ID_MISSING, "DisableRootJobs");
    // Moving a pending job into a partition it may not use is refused the same way.
    let mut j = to("batch");
    j.hold = true;
    let id = h.submit(j);
    let r = h.call(User::Alice, update(id, vec![JobChange::Partition("admins".into())]));
    assert_eq!(code(&r), ESLURM_ACCESS_DENIED, "{r:?}");
    let r = h.call(User::Alice, update(id, vec![JobChange::Partition("wheel".into())]));
    assert_eq!(code(&r), ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP, "{r:?}");
    assert_eq!(h.job(id).partition, "batch");
    h.check();
}

/// `PrivateData=jobs,nodes,partitions`: bob sees his own jobs only (squeue, scontrol show
/// job, sacct), no node state (`Access/permission denied`) and only partitions he may use;
/// root sees everything.
#[test]
fn private_data_hides_other_users() {
    let conf = format!("PrivateData=jobs,nodes,partitions\n{TWO_NODES}PartitionName=admins Nodes=gpu01 RootOnly=YES\n");
    let mut h = with_quota("authz_private_data", &conf, "");
    let alices = h.submit(job(User::Alice, None, 0));
    let bobs = h.submit(job(User::Bob, None, 0));
    let Response::Jobs(seen) = h.call(User::Bob, Request::QueryJobs(JobQuery { include_finished: true, ..JobQuery::default() })) else {
        panic!()
    };
    assert_eq!(seen.iter().map(|j| j.job_id).collect::<Vec<_>>(), vec![bobs], "bob's job query");
    let q = QueueQuery { query: JobQuery::default(), fields: vec![JobField::JobId] };
    let Response::Queue(rows) = h.call(User::Bob, Request::QueryQueue(q.clone())) else { panic!() };
    assert_eq!(rows.count, 1, "bob's squeue");
    let Response::Queue(rows) = h.call(User::Root, Request::QueryQueue(q)) else { panic!() };
    assert_eq!(rows.count, 2, "root's squeue");
    let acct = AcctQuery { now: h.at() + T0, ..AcctQuery::default() };
    let Response::Acct(rows) = h.call(User::Bob, Request::QueryAcct(acct.clone())) else { panic!() };
    assert!(rows.iter().all(|j| j.uid == 2002) && !rows.is_empty(), "bob's sacct: {rows:?}");
    let Response::Acct(rows) = h.call(User::Root, Request::QueryAcct(acct)) else { panic!() };
    assert!(rows.iter().any(|j| j.uid == 2001), "root's sacct");
    let r = h.call(User::Bob, Request::QueryNodes(NodeQuery::default()));
    assert_eq!(code(&r), ESLURM_ACCESS_DENIED, "{r:?}");
    assert!(matches!(h.call(User::Root, Request::QueryNodes(NodeQuery::default())), Response::Nodes(n) if n.len() == 2));
    let Response::Partitions(p) = h.call(User::Bob, Request::QueryPartitions) else { panic!() };
    assert_eq!(p.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), vec!["batch"]);
    let _ = alices;
    h.check();
}

/// An admin hold (`scontrol hold` by root) on alice's job: her `uhold` leaves it an admin
/// hold and her `release` is refused (goldens 0219 `Access/permission denied`, 0226).
#[test]
fn admin_hold_survives_uhold_then_release() {
    let mut h = Harness::two_nodes("authz_admin_hold");
    let mut j = job(User::Alice, Some(10), 0);
    j.begin = Some(T0 + 3600);
    let id = h.submit(j);
    h.call(User::Root, hold(HoldOp::Hold, id));
    assert_eq!(h.job(id).reason, "JobHeldAdmin");
    let r = h.call(User::Alice, hold(HoldOp::UserHold, id));
    assert_eq!(code(&r), 0, "uhold succeeds as in Slurm (rc=0), changing nothing: {r:?}");
    assert_eq!(h.job(id).reason, "JobHeldAdmin");
    let r = h.call(User::Alice, hold(HoldOp::Release, id));
    assert_eq!((code(&r), text(&r).as_str()), (ESLURM_ACCESS_DENIED, "Access/permission denied"), "{r:?}");
    let r = h.call(User::Alice, hold(HoldOp::Hold, id));
    assert_eq!(code(&r), 0);
    assert_eq!(h.job(id).reason, "JobHeldAdmin", "a user's hold does not replace an admin's");
    h.call(User::Root, hold(HoldOp::Release, id));
    assert_eq!(h.job(id).reason, "BeginTime");
    h.check();
}

/// `scontrol update gres=gpu:2147483648 numnodes=2` wrapped a u32 (2^31 × 2 = 0 GPUs); now
/// every update re-runs admission's shape checks: an overflow or a shape no node has is
/// refused and the job keeps its shape.
#[test]
fn update_cannot_wrap_or_escape_the_shape_checks() {
    let mut h = Harness::two_nodes("authz_update_shape");
    let mut j = job(User::Alice, None, 0);
    j.hold = true;
    j.gres = gpus(1);
    let id = h.submit(j);
    let big = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: 2_147_483_648 }];
    let r = h.call(User::Alice, update(id, vec![JobChange::Gres(big.clone()), JobChange::NumNodes(2)]));
    assert_ne!(code(&r), 0, "2^31 GPUs x 2 nodes: {r:?}");
    let r = h.call(User::Alice, update(id, vec![JobChange::NumNodes(2), JobChange::Gres(big)]));
    assert_ne!(code(&r), 0, "2 nodes x 2^31 GPUs: {r:?}");
    let r = h.call(User::Alice, update(id, vec![JobChange::Gres(gpus(9))]));
    assert_eq!(code(&r), ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE, "9 GPUs per node on 8-GPU nodes: {r:?}");
    assert_eq!((h.job(id).num_nodes, h.job(id).gpus), (1, 1), "unchanged");
    let r = h.call(User::Alice, update(id, vec![JobChange::Gres(gpus(8)), JobChange::NumNodes(2)]));
    assert_eq!(code(&r), 0, "a shape that fits: {r:?}");
    h.check();
}

/// The keys of `scontrol update` that are an operator's (Slurm 22.05 `_update_job`;
/// goldens-extra 0935, 0937, 0938): a user is refused `AdminComment=`, `SiteFactor=`,
/// `TasksPerNode=`, `OverSubscribe=`, `Reboot=` and `Contiguous=` on a pending job; root sets
/// the first three; what Flotilla does not do (rebooting for a job, contiguous nodes) is not
/// supported even for root, and specialized cores are nobody's (no
/// `AllowSpecResourcesUsage`). The counts a user may change are checked for 0.
#[test]
fn operator_only_update_keys() {
    use JobChange as C;
    let mut h = Harness::two_nodes("authz_operator_keys");
    let mut j = job(User::Alice, None, 0);
    j.hold = true;
    let id = h.submit(j);
    for ch in [C::AdminComment("x".into()), C::SiteFactor(10), C::TasksPerNode(2), C::Shared(1), C::Reboot(1), C::Contiguous(0), C::CoreSpec(1)] {
        let r = h.call(User::Alice, update(id, vec![ch.clone()]));
        assert_eq!(code(&r), ESLURM_ACCESS_DENIED, "{ch:?}: {r:?}");
    }
    assert_eq!(h.job(id).admin_comment, None, "nothing changed");
    let r = h.call(User::Root, update(id, vec![C::AdminComment("hello".into()), C::SiteFactor(-5), C::TasksPerNode(2)]));
    assert_eq!(code(&r), 0, "{r:?}");
    let info = h.job(id);
    assert_eq!((info.admin_comment.as_deref(), info.node_shape.ntasks_per_node), (Some("hello"), 2));
    for (ch, want) in [
        (C::Reboot(1), ESLURM_NOT_SUPPORTED),
        (C::Contiguous(1), ESLURM_NOT_SUPPORTED),
        (C::CoreSpec(1), ESLURM_ACCESS_DENIED),
        (C::Reboot(0), 0),
        (C::Contiguous(0), 0),
        (C::Licenses("foo".into()), ESLURM_INVALID_LICENSES),
        (C::Reservation("r1".into()), ESLURM_RESERVATION_INVALID),
        (C::BurstBuffer(String::new()), ESLURM_NOT_SUPPORTED),
    ] {
        let r = h.call(User::Root, update(id, vec![ch.clone()]));
        assert_eq!(code(&r), want, "root {ch:?}: {r:?}");
    }
    for (ch, want) in [(C::NumCpus(0), ESLURM_INVALID_CPU_COUNT), (C::NumTasks(0), ESLURM_BAD_TASK_COUNT), (C::NumCpus(4), 0), (C::NumTasks(3), 0)] {
        let r = h.call(User::Alice, update(id, vec![ch.clone()]));
        assert_eq!(code(&r), want, "alice {ch:?}: {r:?}");
    }
    let info = h.job(id);
    assert_eq!((info.num_cpus, info.num_tasks), (4, 3));
    h.check();
}

/// Services: a user without `ServiceAccounts` cannot create one (replicas never end, outrank
/// training, preempt others); with it, priority, replicas and GPUs are capped per user and
/// replicas get the partition's `MaxTime`; an admin is not capped.
#[test]
fn services_need_an_admin_or_an_allowed_account() {
    let svc = |priority: u32, max: u32, gpus: u32| ServiceCreate {
        name: "llm".into(),
        command: "serve".into(),
        gpus_per_replica: gpus,
        min_replicas: 0,
        max_replicas: max,
        desired_replicas: 1,
        priority,
        work_dir: "/tmp".into(),
        uid: 2001,
        gid: 2001,
        user: "alice".into(),
        ..ServiceCreate::default()
    };
    let create = |h: &mut Harness, who: User, c: ServiceCreate| h.call(who, Request::ServiceCreate(Box::new(c)));
    let mut h = Harness::two_nodes("authz_services_admin_only");
    let r = create(&mut h, User::Alice, svc(0, 1, 1));
    assert_eq!(code(&r), ESLURM_ACCESS_DENIED, "no ServiceAccounts: admins only: {r:?}");
    assert!(matches!(create(&mut h, User::Root, svc(100, 4, 8)), Response::ServiceCreated { .. }));
    h.check();

    let conf = format!("ServiceAccounts=inference\nServiceMaxPriority=5\nServiceMaxReplicas=2\nServiceMaxGPUs=4\n{TWO_NODES}");
    let mut h = with_quota("authz_services_capped", &conf, "Account=inference Users=alice\nAccount=research Users=bob\n");
    let r = create(&mut h, User::Alice, svc(6, 1, 1));
    assert_eq!(code(&r), ESLURM_ACCESS_DENIED, "priority above ServiceMaxPriority: {r:?}");
    let r = create(&mut h, User::Alice, svc(5, 3, 1));
    assert_eq!(code(&r), ESLURM_ACCESS_DENIED, "replicas above ServiceMaxReplicas: {r:?}");
    let r = create(&mut h, User::Alice, svc(5, 2, 4));
    assert_eq!(code(&r), ESLURM_ACCESS_DENIED, "8 GPUs above ServiceMaxGPUs: {r:?}");
    let Response::ServiceCreated { id } = create(&mut h, User::Alice, svc(5, 2, 2)) else { panic!("within the caps") };
    let r = create(&mut h, User::Alice, svc(0, 1, 1));
    assert_eq!(code(&r), ESLURM_ACCESS_DENIED, "a second service over the per-user replica cap: {r:?}");
    let mut bobs = svc(0, 1, 1);
    (bobs.uid, bobs.gid, bobs.user) = (2002, 2002, "bob".into());
    let r = create(&mut h, User::Bob, bobs);
    assert_eq!(code(&r), ESLURM_ACCESS_DENIED, "bob's account is not in ServiceAccounts: {r:?}");
    h.turn();
    let replica = h.jobs().find(|j| j.service_id == Some(id)).expect("a replica runs");
    assert_eq!(replica.time_limit, Some(TimeLimitWire::Minutes(2 * 24 * 60)), "the partition's MaxTime");
}
