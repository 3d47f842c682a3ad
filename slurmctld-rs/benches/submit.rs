//! Submission throughput through the RPC, durable (each reply follows the commit of its
//! job): sequential (one client, one connection) and concurrent (many clients; group commit
//! batches their inserts into one transaction). Prints figures; asserts nothing.
//!
//! `cargo bench -p flotilla-slurmctld --bench submit [-- JOBS CLIENTS [held|plain|after-held|after-held-limited]]`:
//! `held` (default) submits `--hold` jobs as Slurm's bench.sh does (no scheduling cycle is
//! triggered by them); `plain` submits jobs that can run (no node registers, so they stay
//! pending, and every turn of the controller may run a debounced cycle over the growing
//! queue); `after-held` submits JOBS held jobs, then times 300 plain ones one at a time
//! (a submission's `Priority` test against a large queue; SQLite only);
//! `after-held-limited` the same under a `MaxSubmitJobs` limit (quota.conf's, far above
//! JOBS): each submission also counts the jobs its user holds.
//!
//! The same on SQLite (`synchronous=FULL`, then `NORMAL`) and on a PostgreSQL server the bench
//! starts in a temp dir (`StateStorageType=state/postgres`, the server flushing its WAL at each
//! commit: `fsync=on`, `synchronous_commit=on`), so the figures are ratios of one run. Without
//! PostgreSQL installed its line says so. PostgreSQL runs twice: each turn's transaction
//! pipelined (two round trips: BEGIN, the lease's fence and every write in one flight, then
//! COMMIT; as slurmctld runs) and, as the baseline, statement by statement (`PgConf::pipeline`
//! off: a round trip for BEGIN, the fence, each kind of statement, and COMMIT).
//!
//! After the submissions each run times `squeue` (the default format's fields, every job: the
//! queue is served from the controller's memory, whatever the store) over all the jobs
//! submitted: `-- 8000` leaves 10,000 in the queue (2,000 sequential ones and 8,000).

#[path = "../../admin/src/pg.rs"]
mod pg;

use flotilla_core::config::{ClusterConfig, ConfNodeState, NodeConfig, PartitionConfig, TopologyKind};
use flotilla_proto::client::Client;
use flotilla_proto::jobview::{JobField, QueueQuery};
use flotilla_proto::{ClusterKey, JobQuery, Request, Response, Role, SubmitJob};
use flotilla_slurmctld::ctld::CtlOptions;
use flotilla_slurmctld::daemon::{self, DaemonConfig};
use flotilla_slurmctld::store::{PgConf, StorageConf, SyncMode};
use std::net::SocketAddr;
use std::time::Instant;

fn cluster() -> ClusterConfig {
    let nodes: Vec<NodeConfig> = (1..=4)
        .map(|i| NodeConfig {
            name: format!("gpu{i:02}"),
            addr: "127.0.0.1".into(),
            hostname: String::new(),
            port: 0,
            sockets: 2,
            cores_per_socket: 32,
            threads_per_core: 1,
            boards: 1,
            cpus: 64,
            real_memory_mib: 512_000,
            tmp_disk_mib: 0,
            gpus: 8,
            gpu_type: Some("h100".into()),
            gpu_files: vec![],
            gpu_cores: None,
            gpu_links: false,
            gres: String::new(),
            weight: 1,
            features: vec![],
            state: ConfNodeState::Unknown,
        })
        .collect();
    ClusterConfig {
        def_mem_per_cpu_mib: Some(1024),
        max_array_size: 1001,
        partitions: vec![PartitionConfig {
            name: "batch".into(),
            nodes: nodes.iter().map(|n| n.name.clone()).collect(),
            nodes_expr: String::new(),
            default: true,
            max_time_min: None,
            default_time_min: Some(60),
            state: "UP".into(),
            priority_tier: 1,
            priority_job_factor: 1,
            max_nodes: None,
            default_topology: TopologyKind::Any,
            sub_node_pool: false,
            inference_pool: false,
            access: Default::default(),
            tres_billing_weights: None,
        }],
        nodes,
        ..ClusterConfig::default()
    }
}

fn job(hold: bool) -> SubmitJob {
    SubmitJob {
        name: Some("wrap".into()),
        script: "#!/bin/sh\ntrue\n".into(),
        hold, // as Slurm's bench.sh: sbatch --hold --wrap true
        uid: 2001,
        gid: 2001,
        user: "alice".into(),
        work_dir: "/tmp".into(),
        ..SubmitJob::default()
    }
}

/// `n` jobs one after the other on one connection; each one's time from request to reply
/// (ms).
fn submit_loop(addr: SocketAddr, key: &ClusterKey, n: usize, hold: bool) -> Vec<f64> {
    let mut c = Client::connect_tcp(addr, Role::Command).unwrap();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        // Signed now: a slow run outlives a credential's 300 s.
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let cred = key.sign(2001, 2001, "bench", now, 300);
        let t = Instant::now();
        match c.call(Some(cred), Request::SubmitJob(Box::new(job(hold)))).unwrap() {
            Response::Submitted(_) => {}
            other => panic!("{other:?}"),
        }
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times
}

/// `squeue`'s query (the fields its default format `%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R`
/// and default sort read, every job), 21 times on one connection: the median in ms, and how
/// many jobs it listed.
fn squeue(addr: SocketAddr, key: &ClusterKey) -> (f64, u64) {
    use JobField as F;
    let fields = vec![
        F::JobId, F::ArrayJobId, F::ArrayTaskId, F::ArrayTaskStr, F::State, F::Partition, F::Name, F::User, F::StartTime,
        F::NumNodes, F::Nodes, F::Reason, F::Priority,
    ];
    let mut c = Client::connect_tcp(addr, Role::Command).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let mut times = Vec::new();
    let mut listed = 0;
    for _ in 0..21 {
        let q = QueueQuery { query: JobQuery { include_finished: true, ..JobQuery::default() }, fields: fields.clone() };
        let t = Instant::now();
        match c.call(Some(key.sign(2001, 2001, "bench", now, 300)), Request::QueryQueue(q)).unwrap() {
            Response::Queue(rows) => listed = rows.count,
            other => panic!("{other:?}"),
        }
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], listed)
}

/// A controller over [`cluster`] on `storage` (state and key in `dir`), on its own runtime:
/// the runtime (drop it after the shutdown), the daemon and its key.
fn start(dir: &std::path::Path, storage: StorageConf, opts: CtlOptions) -> (tokio::runtime::Runtime, daemon::Daemon, ClusterKey) {
    let key = ClusterKey::generate(&dir.join("key")).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let d = rt
        .block_on(daemon::start(DaemonConfig {
            cluster: cluster(),
            state_dir: dir.join("state"),
            key: key.clone(),
            listen: Some("127.0.0.1:0".parse().unwrap()),
            socket: None,
            storage,
            opts,
            max_conns: 4096,
            max_frame: flotilla_proto::DEFAULT_MAX_FRAME,
            slurm_uid: 0,
            host: "bench".into(),
        }))
        .unwrap();
    (rt, d, key)
}

/// `n` jobs over `clients` connections at once (each `n / clients`); the jobs submitted.
fn submit_concurrently(addr: SocketAddr, key: &ClusterKey, n: usize, clients: usize, hold: bool) -> usize {
    let hs: Vec<_> = (0..clients)
        .map(|_| {
            let key = key.clone();
            std::thread::spawn(move || submit_loop(addr, &key, n / clients, hold))
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    n / clients * clients
}

fn run(storage: Option<StorageConf>, sync: SyncMode, label: &str, seq_jobs: usize, conc_jobs: usize, clients: usize, hold: bool) {
    let dir = tempfile::tempdir().unwrap();
    let storage = storage.unwrap_or_else(|| StorageConf::Sqlite { dir: dir.path().join("state"), sync });
    let (rt, d, key) = start(dir.path(), storage, CtlOptions::default());
    let addr = d.tcp_addr.unwrap();
    let t = Instant::now();
    submit_loop(addr, &key, seq_jobs, hold);
    let seq = seq_jobs as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    let conc = submit_concurrently(addr, &key, conc_jobs, clients, hold) as f64 / t.elapsed().as_secs_f64();
    let stats = {
        let mut c = Client::connect_tcp(addr, Role::Command).unwrap();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        match c.call(Some(key.sign(0, 0, "bench", now, 300)), Request::Stats).unwrap() {
            Response::Stats(s) => s,
            other => panic!("{other:?}"),
        }
    };
    let (squeue_ms, listed) = squeue(addr, &key);
    println!(
        "{label}: sequential {seq:.0} jobs/s ({seq_jobs} jobs, 1 client); concurrent {conc:.0} jobs/s ({conc_jobs} jobs, {clients} clients); \
         {} commits, mean {} events/commit, mean commit {} us; squeue of {listed} jobs: median {squeue_ms:.1} ms",
        stats.db_commits, stats.mean_batch, stats.mean_commit_us
    );
    let _ = d.shutdown.send(true);
    drop(rt);
}

/// `after-held` mode: `jobs` held jobs (Slurm's bench.sh flood) over `clients` connections,
/// then 300 plain jobs one at a time, each timed from request to reply. A plain submission
/// is tested against the pending jobs ranked above it (Slurm's
/// `_top_priority` in `job_allocate`, the `Priority` reason); the held jobs (priority 0)
/// rank below every one of them, so this shows what the queue's size costs that test.
/// SQLite `synchronous=NORMAL`; the scheduling pass paced as slurm.conf's default (3 s), so
/// few of the timed turns run one. `limited`: under a `MaxSubmitJobs` of ten million jobs
/// (every submission counts the jobs its user holds, `limits::check_submit`).
fn after_held(jobs: usize, clients: usize, limited: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = CtlOptions::default();
    if limited {
        opts.job_limits = Some(std::sync::Arc::new(MaxSubmitJobs(10_000_000)));
    }
    let (rt, d, key) = start(dir.path(), StorageConf::Sqlite { dir: dir.path().join("state"), sync: SyncMode::Normal }, opts);
    let addr = d.tcp_addr.unwrap();
    let t = Instant::now();
    let held = submit_concurrently(addr, &key, jobs, clients, true);
    let flood = held as f64 / t.elapsed().as_secs_f64();
    let mut times = submit_loop(addr, &key, 300, false);
    times.sort_by(f64::total_cmp);
    let pct = |p: usize| times[(times.len() * p / 100).min(times.len() - 1)];
    println!(
        "SQLite synchronous=NORMAL, {held} held jobs ({flood:.0} jobs/s) then 300 plain ones, one client{}: per plain submission median {:.2} ms, p90 {:.2} ms, max {:.2} ms",
        if limited { ", MaxSubmitJobs=10000000" } else { "" },
        pct(50),
        pct(90),
        times[times.len() - 1]
    );
    let _ = d.shutdown.send(true);
    drop(rt);
}

/// Every user's `MaxSubmitJobs` in every account (quota.conf's limit, as a source).
#[derive(Debug)]
struct MaxSubmitJobs(u32);

impl flotilla_slurmctld::limits::JobLimitSource for MaxSubmitJobs {
    fn max_submit_jobs(&self, _user: &str, _account: &str) -> Option<u32> {
        Some(self.0)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let jobs: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let clients: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    if let Some(mode @ ("after-held" | "after-held-limited")) = args.get(2).map(String::as_str) {
        after_held(jobs, clients, mode == "after-held-limited");
        return;
    }
    let hold = args.get(2).is_none_or(|a| a != "plain");
    let what = if hold { "held jobs" } else { "plain jobs" };
    run(None, SyncMode::Full, &format!("SQLite synchronous=FULL, {what}"), 2000, jobs, clients, hold);
    run(None, SyncMode::Normal, &format!("SQLite synchronous=NORMAL, {what}"), 2000, jobs, clients, hold);
    if !pg::available() {
        println!("PostgreSQL: not installed ({}), not measured", pg::pg_bin().display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = pg::LocalPg::start(&dir.path().join("pg"), 5432, true).unwrap();
    let conf = |pipeline| PgConf {
        host: server.socket_dir().display().to_string(),
        port: server.port,
        user: pg::ROLE.into(),
        password: Some(server.password.clone()),
        dbname: pg::DATABASE.into(),
        call_timeout: std::time::Duration::from_secs(30),
        pipeline,
        idle_in_transaction_timeout: None,
    };
    // Each run starts from an empty database (the controller would recover the last one's
    // jobs): the schema is dropped and made again by the next controller's migrations.
    let fresh = || {
        let db = flotilla_slurmctld::store::postgres::Postgres::connect(conf(true)).unwrap();
        flotilla_slurmctld::store::backend::Backend::batch(&db, "DROP SCHEMA public CASCADE; CREATE SCHEMA public;").unwrap();
    };
    run(
        Some(StorageConf::Postgres(conf(false))),
        SyncMode::Full,
        &format!("PostgreSQL fsync=on, statement by statement (before), {what}"),
        2000,
        jobs,
        clients,
        hold,
    );
    fresh();
    run(Some(StorageConf::Postgres(conf(true))), SyncMode::Full, &format!("PostgreSQL fsync=on, pipelined turns, {what}"), 2000, jobs, clients, hold);
}
