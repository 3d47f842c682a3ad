//! Assembles the controller: the scheduling core from the cluster configuration and the
//! plugin registry, the store, the owner task and the listeners. Used by the `slurmctld`
//! binary and by in-process tests.

use crate::admission::AdmissionConf;
use crate::ctld::{wall_now, Controller, CtlOptions};
use crate::server::{self, Shared};
use crate::store::{Acquired, PgConf, StorageConf, Store, SyncMode};
use anyhow::{anyhow, Context};
use flotilla_core::cluster::Cluster;
use flotilla_core::config::ClusterConfig;
use flotilla_core::sched::Scheduler;
use flotilla_proto::{ClusterKey, Verifier};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};

/// Everything needed to start a controller.
#[derive(Debug)]
pub struct DaemonConfig {
    /// The cluster.
    pub cluster: ClusterConfig,
    /// State directory (the SQLite database lives here, the socket and the JWT key too).
    pub state_dir: PathBuf,
    /// The cluster key.
    pub key: ClusterKey,
    /// TCP address to listen on (`None`: no TCP).
    pub listen: Option<SocketAddr>,
    /// Unix socket path (`None`: none).
    pub socket: Option<PathBuf>,
    /// Where the state lives ([`storage_conf`]).
    pub storage: StorageConf,
    /// Controller tunables (admission settings are filled in from `cluster`, except
    /// `admission.default_accounts`, kept as given).
    pub opts: CtlOptions,
    /// Most authenticated command connections over TCP at once ([`server::Limits`]'s
    /// `tcp_commands`; the other pools keep their defaults, node sessions are sized from the
    /// configured nodes).
    pub max_conns: usize,
    /// Maximum frame body (bytes).
    pub max_frame: usize,
    /// Uid of `SlurmUser`.
    pub slurm_uid: u32,
    /// Host name put in issued credentials.
    pub host: String,
}

/// A started controller.
#[derive(Debug)]
pub struct Daemon {
    /// Bound TCP address.
    pub tcp_addr: Option<SocketAddr>,
    /// Set to true to stop.
    pub shutdown: watch::Sender<bool>,
    /// The owner task (ends after shutdown; a panic inside it is a broken invariant).
    pub owner: tokio::task::JoinHandle<()>,
    /// The SQLite state directory's lock ([`lock_state_dir`]), held while this lives.
    pub dir_lock: Option<nix::fcntl::Flock<std::fs::File>>,
}

/// Resolves a user name to a uid (`root` is 0 without a lookup).
pub fn uid_of(name: &str) -> Option<u32> {
    if name == "root" || name.is_empty() {
        return Some(0);
    }
    if let Ok(uid) = name.parse() {
        return Some(uid);
    }
    nix::unistd::User::from_name(name).ok().flatten().map(|u| u.uid.as_raw())
}

/// The scheduler for a cluster configuration, with the policies its keys name;
/// `preempt_exempt_s` overrides the core's minimum runtime before preemption, and
/// `preempt_budget_pct` the preemption budget's paging limit (percent of running training
/// preempted in the trailing hour; the warning share is capped at it; seed R6).
pub fn scheduler(
    conf: &ClusterConfig,
    preempt_exempt_s: Option<u64>,
    preempt_budget_pct: Option<u32>,
) -> anyhow::Result<Scheduler> {
    let cluster = Cluster::from_config(conf);
    let placement = flotilla_plugins::placement(&conf.select_type)
        .ok_or_else(|| anyhow!("unknown SelectType {}", conf.select_type))?;
    let priority = flotilla_plugins::priority_from_conf(conf)
        .ok_or_else(|| anyhow!("unknown PriorityType {}", conf.priority_type))?;
    let mut queue = flotilla_plugins::queue(&conf.scheduler_type)
        .ok_or_else(|| anyhow!("unknown SchedulerType {}", conf.scheduler_type))?;
    if let Some(s) = preempt_exempt_s {
        queue.min_runtime_s = s;
    }
    if let Some(p) = preempt_budget_pct {
        queue.budget_page_pct = p;
        queue.budget_warn_pct = queue.budget_warn_pct.min(p);
    }
    if let Some(s) = conf.elastic_grow_interval_s {
        queue.elastic_grow_interval_s = s;
    }
    let usage = flotilla_core::fairshare::UsageConfig::from_config(conf)?;
    let mut sched = Scheduler::new(cluster, placement, priority, queue);
    sched.set_usage_config(usage);
    Ok(sched)
}

/// `PreemptExemptTime=` in seconds (Slurm's `time_str2secs`; `-1`/`INFINITE` disable it, as
/// 0, as slurm.conf(5) says); `None` when unset.
///
/// # Errors
/// A value that is not a Slurm time string.
pub fn preempt_exempt_s(conf: &ClusterConfig) -> anyhow::Result<Option<u64>> {
    use flotilla_core::time::{time_str2secs, SlurmDuration};
    let Some(v) = conf.preempt_exempt_time.as_deref() else { return Ok(None) };
    match time_str2secs(v) {
        Ok(SlurmDuration::Finite(s)) => Ok(Some(s.max(0) as u64)),
        Ok(SlurmDuration::Infinite) => Ok(Some(0)),
        Err(_) => Err(anyhow!("slurm.conf: invalid PreemptExemptTime={v}")),
    }
}

/// The controller for `cluster` over `store` at `now` (s since the epoch), assembled as the
/// daemon does: the scheduler with the policies the configuration names and its
/// `PreemptExemptTime` (unless `opts.preempt_exempt_s` overrides it), the quotas of
/// `opts.quotas` when they set any limit, `AlertProgram=` unless `opts` names one, and the
/// admission settings of the configuration (keeping `opts.admission.default_accounts`).
/// Recovers the stored state. Used by [`start`] and by the in-process controller tests.
///
/// # Errors
/// An unknown policy name or `PreemptExemptTime`, or a store that cannot be read.
pub fn controller(
    cluster: &ClusterConfig,
    store: Store,
    mut opts: CtlOptions,
    auth_failures: Arc<AtomicU64>,
    now: i64,
) -> anyhow::Result<Controller> {
    let exempt = match opts.preempt_exempt_s {
        Some(s) => Some(s),
        None => preempt_exempt_s(cluster)?,
    };
    let mut sched = scheduler(cluster, exempt, opts.preempt_budget_pct)?;
    sched.set_full_scan(opts.full_scan);
    // The accounting database (crate::assoc) is the source of the associations, quotas and
    // job limits; quota.conf (`opts.quotas`) is imported into it at the first start only.
    // The controller builds the scheduler's accounting from it (`apply_accounting`).
    if let Some(e) = opts.quota_error.take() {
        if crate::assoc::db::imported(store.db()).map_err(|e| anyhow!("accounting database: {e}"))? {
            tracing::warn!("{e}: ignored: quota.conf was imported into the accounting database, which holds the associations now (sacctmgr)");
        } else {
            return Err(anyhow!("{e}"));
        }
    }
    let mut store = store;
    if store.lease().is_none() {
        // In process (tests, tools): the lease is taken here; the daemon took it already
        // ([`start`], which waits for it as a standby).
        match store.acquire_lease(&holder_id(), &opts.advertise, opts.lease_ttl, false)? {
            Acquired::Leader(epoch) => tracing::info!(epoch, "took the leader lease"),
            Acquired::Held(row) => return Err(anyhow!("the leader lease is held by {} (epoch {})", row.holder, row.epoch)),
        }
    }
    let quotas = std::mem::take(&mut opts.quotas);
    opts.assoc_db = crate::assoc::open(&mut store, cluster, &quotas, &opts.slurmdbd).map_err(|e| anyhow!("accounting database: {e}"))?;
    opts.access = crate::authz::Access::from_config(cluster, Default::default(), &crate::authz::resolve_groups)?;
    // AccountingStorageEnforce, parsed once (authz::parse_enforce, which refuses what we
    // cannot honour).
    opts.enforce = opts.access.enforce;
    if opts.alert_program.is_none() {
        opts.alert_program = cluster.alert_program.as_ref().map(PathBuf::from);
    }
    // Nodes whose CPU count is their sockets x cores x threads (Slurm uses the layout only
    // then; `CPUs=` alone describes no sockets).
    opts.core_layouts = cluster
        .nodes
        .iter()
        .filter(|n| n.sockets.saturating_mul(n.cores_per_socket).saturating_mul(n.threads_per_core) == n.cpus)
        .map(|n| (n.name.clone(), flotilla_core::cores::CoreLayout::new(n.sockets, n.cores_per_socket, n.threads_per_core)))
        .collect();
    opts.admission = AdmissionConf {
        def_mem_per_cpu_mib: cluster.def_mem_per_cpu_mib,
        max_array_size: cluster.max_array_size.max(1),
        default_accounts: std::mem::take(&mut opts.admission.default_accounts),
        max_script_size: crate::limits::max_script_size(cluster.scheduler_parameters.as_deref())
            .map_err(|e| anyhow!("slurm.conf: {e}"))?,
        node_kinds: crate::admission::node_kinds(&cluster.nodes, sched.cluster()),
    };
    // Slurm 22.05 `job_mgr.c` `init_depend_policy`: `DependencyParameters`, not
    // `SchedulerParameters` (the reference ignores it there).
    opts.kill_invalid_depend = crate::limits::has_option(cluster.dependency_parameters.as_deref(), "kill_invalid_depend");
    // `RequeueExitHold` first, so that `RequeueExit` wins for a code in both.
    for (hold, value) in [(true, &cluster.requeue_exit_hold), (false, &cluster.requeue_exit)] {
        let (codes, warnings) = crate::limits::exit_codes(value.as_deref());
        for w in warnings {
            tracing::error!("slurm.conf: {w}");
        }
        for (slot, _) in opts.requeue_on_exit.iter_mut().zip(codes.iter()).filter(|(_, &on)| on) {
            *slot = Some(hold);
        }
    }
    let (bf_max_job_test, warning) = crate::limits::bf_max_job_test(cluster.scheduler_parameters.as_deref());
    if let Some(w) = warning {
        tracing::error!("slurm.conf: SchedulerParameters: {w}");
    }
    opts.bf_max_job_test = bf_max_job_test;
    if opts.batch_sched_delay.is_none() {
        let (delay, warning) = crate::limits::batch_sched_delay(cluster.scheduler_parameters.as_deref());
        if let Some(w) = warning {
            tracing::error!("slurm.conf: SchedulerParameters: {w}");
        }
        opts.batch_sched_delay = Some(std::time::Duration::from_secs(delay));
    }
    Ok(Controller::new(sched, store, opts, auth_failures, now)?)
}

/// A name for this controller process in the lease: `host:pid:nanoseconds`, unique per
/// process (a restarted controller is a new holder: it never inherits its predecessor's
/// epoch).
pub fn holder_id() -> String {
    let host = nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_else(|| "localhost".into());
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{host}:{}:{nonce}", std::process::id())
}

/// Takes the leader lease for the controller about to start from `store`: at once when it is
/// free, expired or its holder's session is gone; else this controller is a standby and waits,
/// trying again every sixth of the lease, until the leader stops renewing it. `force`: the
/// caller knows no other controller lives (it holds the SQLite state directory's lock).
///
/// # Errors
/// The store's, other than those [`crate::store::StoreError::may_recover`] waits out.
/// `shared.takeover` (set by `scontrol takeover`, [`crate::server::Shared::takeover`]) makes a
/// standby take the lease at its next try, as `force`: the leader's next write then finds it
/// lost and the leader steps down. While waiting, `shared.leader` names the lease holder's
/// address (where the HTTP side sends metrics requests, [`crate::metrics::Standing`]).
pub async fn take_lease(store: Store, opts: &CtlOptions, force: bool, shared: &Shared) -> anyhow::Result<Store> {
    let takeover = &shared.takeover;
    let set_leader = |addr: Option<String>| *shared.leader.lock().unwrap_or_else(|p| p.into_inner()) = addr;
    let holder = holder_id();
    let mut store = store;
    let mut said = None;
    // While a standby, the job rows are followed ([`crate::store::follow`]): the takeover then
    // reads only what changed since the last look.
    let mut follower = (opts.follow_store && store.can_follow()).then(crate::store::follow::JobFollower::default);
    let mut follow_said = false;
    loop {
        let take = takeover.load(std::sync::atomic::Ordering::Acquire);
        if take {
            tracing::info!("takeover requested (scontrol takeover): taking the leader lease");
        }
        let force = force || take;
        let (s, f, r, followed) = tokio::task::spawn_blocking({
            let (holder, addr, ttl) = (holder.clone(), opts.advertise.clone(), opts.lease_ttl);
            let mut follower = follower.take();
            move || {
                let r = store.acquire_lease(&holder, &addr, ttl, force);
                let followed = match (&r, follower.as_mut()) {
                    (Ok(Acquired::Held(_)), Some(f)) => Some(store.follow_jobs_up_to(f, crate::store::follow::STANDBY_FETCH)),
                    _ => None,
                };
                (store, follower, r, followed)
            }
        })
        .await?;
        (store, follower) = (s, f);
        match followed {
            Some(Ok(n)) if !follow_said && n.behind == 0 => {
                tracing::info!(jobs = n.jobs, "standby: following the store's job rows");
                follow_said = true;
            }
            Some(Err(e)) => {
                // Followed anew from nothing at the next look (or read whole at takeover).
                tracing::warn!("standby: cannot follow the store: {e}");
                follower = Some(Default::default());
            }
            _ => {}
        }
        match r {
            Ok(Acquired::Leader(epoch)) => {
                tracing::info!(epoch, holder, "took the leader lease: this controller leads");
                set_leader(None);
                if let Some(f) = follower {
                    store.set_follower(f);
                }
                return Ok(store);
            }
            Ok(Acquired::Held(row)) => {
                set_leader(Some(row.addr.clone()));
                if said.as_ref() != Some(&row.holder) {
                    tracing::info!(leader = %row.holder, addr = %row.addr, epoch = row.epoch, "standby: another controller leads; waiting for its lease to lapse");
                    said = Some(row.holder.clone());
                }
            }
            Err(e) if e.may_recover() => tracing::warn!("cannot read the leader lease: {e}; retrying"),
            Err(e) => return Err(e.into()),
        }
        tokio::time::sleep((opts.lease_ttl / 6).max(std::time::Duration::from_millis(100))).await;
    }
}

/// Holds `<state_dir>/slurmctld.lock` (an exclusive `flock`) for the life of the process: on
/// SQLite, one controller per state directory; the lock is the kernel's, so it is free the
/// moment its holder dies, and the next controller may take the lease at once. Waits while
/// another live controller holds it. The lock is held while the returned value lives.
///
/// # Errors
/// The lock file cannot be opened.
pub async fn lock_state_dir(state_dir: &std::path::Path) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(state_dir).with_context(|| format!("state directory {}", state_dir.display()))?;
    let path = state_dir.join("slurmctld.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&path)
        .with_context(|| format!("lock file {}", path.display()))?;
    let mut said = false;
    loop {
        match nix::fcntl::Flock::lock(f.try_clone()?, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                if !said {
                    tracing::info!(lock = %path.display(), "another slurmctld holds this state directory; waiting");
                    said = true;
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err((_, e)) => return Err(anyhow!("lock file {}: {e}", path.display())),
        }
    }
}

/// Where each node's registrations must come from: `NodeAddr=`, which defaults to
/// `NodeHostname=`, which defaults to `NodeName=` (slurm.conf(5)).
pub fn node_addrs(conf: &ClusterConfig) -> std::collections::HashMap<String, String> {
    conf.nodes
        .iter()
        .map(|n| {
            let addr = [&n.addr, &n.hostname, &n.name].into_iter().find(|a| !a.is_empty()).cloned().unwrap_or_default();
            (n.name.clone(), addr)
        })
        .collect()
}

/// The `auth/jwt` key and token policy (`AuthAltTypes=auth/jwt`, `AuthAltParameters=`; the
/// key defaults to `jwt_hs256.key` in the state directory, as Slurm's to
/// `StateSaveLocation`). A key that cannot be used (missing, too short, readable by group or
/// others) is logged and leaves tokens refused; the controller still serves everything else,
/// so a bad key edit never keeps the cluster down (Slurm's slurmctld exits instead).
pub fn jwt_conf(
    conf: &ClusterConfig,
    state_dir: &std::path::Path,
) -> (Option<flotilla_proto::jwt::JwtKey>, flotilla_proto::jwt::IssuePolicy) {
    use flotilla_proto::jwt;
    let policy = jwt::IssuePolicy::parse(&conf.auth_alt_parameters);
    if !conf.auth_alt_types.iter().any(|t| t == "auth/jwt") {
        return (None, policy);
    }
    let path = jwt::key_path(&conf.auth_alt_parameters, &state_dir.to_string_lossy());
    match jwt::JwtKey::load(&path) {
        Ok(k) => {
            tracing::info!(key = %path.display(), "auth/jwt: tokens accepted");
            (Some(k), policy)
        }
        Err(e) => {
            tracing::error!("auth/jwt: {e}; every token is refused until the key is fixed and the controller restarted");
            (None, policy)
        }
    }
}

/// Where the state lives, from slurm.conf's `StateStorage*` keys: SQLite in `state_dir` with
/// `sync` (`state/sqlite`, the default), or the PostgreSQL database they name
/// (`state/postgres`; the role defaults to `SlurmUser`, the password is read from
/// `StateStoragePassFile`, which must be the controller user's and private to it; each call
/// to the server waits at most `SlurmctldTimeout`, at least 5 s).
///
/// # Errors
/// A password file that cannot be read or is readable by others.
pub fn storage_conf(conf: &ClusterConfig, state_dir: &std::path::Path, sync: SyncMode) -> anyhow::Result<StorageConf> {
    let s = &conf.state_storage;
    if !s.is_postgres() {
        return Ok(StorageConf::Sqlite {
            dir: state_dir.to_path_buf(),
            sync,
        });
    }
    let password = match &s.pass_file {
        Some(f) => Some(crate::store::postgres::read_password_file(std::path::Path::new(f))?),
        None => None,
    };
    Ok(StorageConf::Postgres(PgConf {
        host: s.host.clone(),
        port: s.port,
        user: s.user.clone().unwrap_or_else(|| conf.slurm_user.clone()),
        password,
        dbname: s.loc.clone(),
        call_timeout: std::time::Duration::from_secs(conf.slurmctld_timeout_s.max(5)),
        pipeline: true,
        idle_in_transaction_timeout: Some(std::time::Duration::from_secs(conf.slurmctld_timeout_s.max(2))),
    }))
}

/// Starts the controller on the current tokio runtime.
pub async fn start(cfg: DaemonConfig) -> anyhow::Result<Daemon> {
    // On SQLite one controller per state directory: the directory's lock (taken before the
    // database is opened and the socket there is bound) says the previous holder is dead, so
    // the lease is taken at once.
    let sqlite = matches!(cfg.storage, StorageConf::Sqlite { .. });
    let dir_lock = if sqlite { Some(lock_state_dir(&cfg.state_dir).await?) } else { None };
    // A full state disk at start is waited out here, not left to a restart loop: the
    // database cannot be opened (its WAL index needs room) until space returns. A PostgreSQL
    // server not up yet is waited for the same way.
    let store = loop {
        let storage = cfg.storage.clone();
        match tokio::task::spawn_blocking(move || Store::open_conf(&storage)).await? {
            Ok(s) => break s,
            Err(e) if e.may_recover() => {
                tracing::error!("cannot open the state database: {e}; retrying in 5 s");
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let started = wall_now();
    let auth_failures = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel(65_536);
    let (shutdown, shutdown_rx) = watch::channel(false);
    let limits = server::Limits {
        tcp_commands: cfg.max_conns,
        node_sessions: 2 * cfg.cluster.nodes.len() + 16,
        ..server::Limits::default()
    };
    // The replay cache starts empty: credentials issued before this start are refused.
    let verifier = Verifier::new(cfg.key, flotilla_proto::auth::DEFAULT_TTL_S * 12, started.max(0) as u64);
    let mut shared = Shared::new(Some(tx), verifier, cfg.slurm_uid, cfg.host.clone(), auth_failures.clone(), limits, cfg.max_frame);
    shared.node_addrs = node_addrs(&cfg.cluster);
    (shared.jwt, shared.jwt_policy) = jwt_conf(&cfg.cluster, &cfg.state_dir);
    shared.http = Arc::new(
        crate::metrics::HttpGate::new(crate::metrics::MetricsConf::from_config(&cfg.cluster)).with_jwt(shared.jwt.clone(), cfg.slurm_uid),
    );
    // With backup controllers (several `SlurmctldHost=` lines) a standby until the lease is
    // taken (below): what reaches the sockets meanwhile is answered `ESLURM_IN_STANDBY_MODE`
    // (pings excepted), and the commands try the next host. A lone controller (restarting,
    // or waiting out a dead predecessor's lease) has no other to send them to: its requests
    // wait for it to lead.
    shared.standby = std::sync::atomic::AtomicBool::new(!cfg.cluster.backup_controllers.is_empty());
    // The keepalive period the nodes' silence check expects (both read it from slurm.conf).
    shared.keepalive_every = cfg.cluster.keepalive().every;
    let shared = Arc::new(shared);
    let mut tcp_addr = None;
    if let Some(addr) = cfg.listen {
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        tcp_addr = Some(l.local_addr()?);
        tokio::spawn(server::serve_tcp(l, shared.clone(), shutdown_rx.clone()));
    }
    if let Some(path) = &cfg.socket {
        let l = server::bind_unix(path).with_context(|| format!("binding {}", path.display()))?;
        tokio::spawn(server::serve_unix(l, shared.clone(), shutdown_rx.clone()));
    }
    let mut opts = cfg.opts;
    if opts.advertise.is_empty() {
        opts.advertise = match tcp_addr {
            Some(a) if a.ip().is_unspecified() => format!("{}:{}", cfg.host, a.port()),
            Some(a) => a.to_string(),
            None => cfg.host.clone(),
        };
    }
    // One controller leads: the lease decides. A standby waits here; with backups
    // configured it answers only pings meanwhile (`Shared::standby`).
    let store = take_lease(store, &opts, sqlite, &shared).await?;
    // Every node message from here on carries the epoch (the owner task, which alone sends
    // to nodes, starts below).
    shared.epoch.store(store.epoch(), std::sync::atomic::Ordering::Release);
    // Node sessions keep the nodes with this controller while its lease is fresh.
    let _ = shared.lease.set(store.fence_watch());
    shared.standby.store(false, std::sync::atomic::Ordering::Release);
    if opts.clock.scale() != 1.0 {
        tracing::warn!(scale = opts.clock.scale(), "controller time runs faster than real time (--time-scale: trace replay only)");
    }
    let now = opts.clock.now();
    let ctl = controller(&cfg.cluster, store, opts, auth_failures, now)?;
    let owner = tokio::spawn(ctl.run(rx, shutdown_rx.clone()));
    tracing::info!(tcp = ?tcp_addr, socket = ?cfg.socket, "slurmctld listening");
    Ok(Daemon {
        tcp_addr,
        shutdown,
        owner,
        dir_lock,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preempt_exempt_time_from_slurm_conf() {
        let with = |v: Option<&str>| ClusterConfig {
            preempt_exempt_time: v.map(str::to_string),
            ..ClusterConfig::default()
        };
        assert_eq!(preempt_exempt_s(&with(None)).unwrap(), None);
        assert_eq!(preempt_exempt_s(&with(Some("00:05:00"))).unwrap(), Some(300));
        assert_eq!(preempt_exempt_s(&with(Some("1-00:00:00"))).unwrap(), Some(86_400));
        assert_eq!(preempt_exempt_s(&with(Some("-1"))).unwrap(), Some(0));
        assert_eq!(preempt_exempt_s(&with(Some("0"))).unwrap(), Some(0));
        assert!(preempt_exempt_s(&with(Some("soon"))).is_err());
    }
}
