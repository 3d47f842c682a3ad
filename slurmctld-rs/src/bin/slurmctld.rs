//! `slurmctld`: Flotilla's controller daemon.
//!
//! Slurm flags: `-D` (foreground; Flotilla always stays in the foreground, as under systemd),
//! `-f <slurm.conf>`, `-v` (more logging). Flotilla flags: `--state-dir DIR` (default
//! `StateSaveLocation`), `--key FILE` (default `/etc/slurm/slurm.key`), `--listen ADDR`
//! (default `0.0.0.0:SlurmctldPort`), `--socket PATH` (default `<state-dir>/slurmctld.sock`),
//! `--addr-file FILE` (write the bound TCP address there), `--cluster-json FILE` (a
//! `ClusterConfig` as JSON instead of slurm.conf), `--sync normal|full`, `--tick-ms`,
//! `--sched-interval-ms`, `--debounce-ms`, `--batch-sched-delay-ms` (overrides slurm.conf's
//! `SchedulerParameters=batch_sched_delay`, Slurm's default 3 s: how long after a scheduling
//! cycle the next one asked for by anything but a job's end may run; test clusters give 0),
//! `--slurmd-timeout S`, `--kill-wait S`,
//! `--max-conns N` (most authenticated remote-command connections over TCP at once, default
//! 1024; the other connection pools are `server::Limits`' defaults), `--max-frame BYTES`
//! (largest frame from an authenticated peer; unauthenticated peers get
//! `flotilla_proto::frame::PREAUTH_MAX_FRAME`), `--preempt-exempt-s S` (seconds a job runs before it
//! may be preempted; overrides slurm.conf's `PreemptExemptTime`, default 10 min, DESIGN.md §5),
//! `--preempt-budget-pct P` (the preemption budget's paging limit, default 25).
//! `--requeue-holdoff S` (how long a requeued job waits before it may start; default 121),
//! `--full-scan` (the old scheduling cycle, which searches a placement for every pending job
//! every cycle; same decisions as the default incremental cycle, to compare their cost),
//! `--no-follow` (a standby does not follow the store's job rows while it waits: it reads
//! them all at takeover, as before; to compare, `benches/takeover.rs`),
//! `--time-scale F` (test-only, for trace replay: the controller's clock starts at the wall
//! clock and runs F times faster, F >= 1; the periods of `--tick-ms`, `--sched-interval-ms`
//! and `--debounce-ms` are then controller time; see [`flotilla_slurmctld::clock`]),
//! Users' default accounts come from the accounting database (a site's slurmdbd database
//! imported at the first start, `flotilla_slurmctld::assoc::slurmdbd`) and `quota.conf`
//! beside `slurm.conf` ([`flotilla_slurmctld::conf::quota_tree`]), whose quotas the scheduler enforces.

use anyhow::{bail, Context};
use flotilla_proto::ClusterKey;
use flotilla_slurmctld::ctld::CtlOptions;
use flotilla_slurmctld::daemon::{self, DaemonConfig};
use flotilla_slurmctld::store::SyncMode;
use std::path::PathBuf;
use std::time::Duration;

/// The command line, parsed (the module doc lists the flags).
struct Args {
    conf: Option<PathBuf>,
    cluster_json: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    key: PathBuf,
    listen: Option<String>,
    socket: Option<PathBuf>,
    addr_file: Option<PathBuf>,
    sync: SyncMode,
    opts: CtlOptions,
    verbose: usize,
    max_conns: usize,
    max_frame: usize,
    kill_wait: Option<i64>,
    slurmd_timeout: Option<i64>,
}

/// Parses the command line; `None` after `--help` printed the usage. Errors: an unknown
/// flag, a flag without its value, a value that does not parse.
fn parse_args() -> anyhow::Result<Option<Args>> {
    let mut args = std::env::args().skip(1);
    let mut conf: Option<PathBuf> = None;
    let mut cluster_json: Option<PathBuf> = None;
    let mut state_dir: Option<PathBuf> = None;
    let mut key = PathBuf::from("/etc/slurm/slurm.key");
    let mut listen: Option<String> = None;
    let mut socket: Option<PathBuf> = None;
    let mut addr_file: Option<PathBuf> = None;
    let mut sync = SyncMode::Full;
    let mut opts = CtlOptions::default();
    let mut verbose = 0;
    let mut max_conns = flotilla_slurmctld::server::Limits::default().tcp_commands;
    let mut max_frame = flotilla_proto::DEFAULT_MAX_FRAME;
    let mut kill_wait: Option<i64> = None;
    let mut slurmd_timeout: Option<i64> = None;
    while let Some(a) = args.next() {
        let mut val = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "-D" => {}
            "-v" | "-vv" | "-vvv" => verbose += a.len() - 1,
            "-f" => conf = Some(val()?.into()),
            "--cluster-json" => cluster_json = Some(val()?.into()),
            "--state-dir" => state_dir = Some(val()?.into()),
            "--key" => key = val()?.into(),
            "--listen" => listen = Some(val()?),
            "--socket" => socket = Some(val()?.into()),
            "--addr-file" => addr_file = Some(val()?.into()),
            "--sync" => {
                sync = match val()?.as_str() {
                    "normal" => SyncMode::Normal,
                    "full" => SyncMode::Full,
                    s => bail!("--sync {s}: expected normal or full"),
                }
            }
            "--tick-ms" => opts.tick = Duration::from_millis(val()?.parse()?),
            "--sched-interval-ms" => opts.sched_interval = Duration::from_millis(val()?.parse()?),
            "--debounce-ms" => opts.debounce = Duration::from_millis(val()?.parse()?),
            "--batch-sched-delay-ms" => opts.batch_sched_delay = Some(Duration::from_millis(val()?.parse()?)),
            "--slurmd-timeout" => slurmd_timeout = Some(val()?.parse()?),
            "--kill-wait" => kill_wait = Some(val()?.parse()?),
            "--minute-s" => opts.minute_s = val()?.parse()?,
            "--preempt-exempt-s" => opts.preempt_exempt_s = Some(val()?.parse()?),
            "--preempt-budget-pct" => opts.preempt_budget_pct = Some(val()?.parse()?),
            "--requeue-holdoff" => opts.requeue_holdoff_s = val()?.parse()?,
            "--max-conns" => max_conns = val()?.parse()?,
            "--max-frame" => max_frame = val()?.parse()?,
            "--full-scan" => opts.full_scan = true,
            "--no-follow" => opts.follow_store = false,
            "--time-scale" => {
                let f = flotilla_slurmctld::clock::ScaledClock::parse_factor(&val()?)?;
                opts.clock = std::sync::Arc::new(flotilla_slurmctld::clock::ScaledClock::from_wall(f)?);
            }
            "-h" | "--help" => {
                println!("usage: slurmctld [-D] [-f slurm.conf] [-v] [--state-dir DIR] [--key FILE] [--listen ADDR] [--socket PATH] [--addr-file FILE] [--cluster-json FILE] [--sync normal|full]");
                return Ok(None);
            }
            other => bail!("unrecognized option '{other}'"),
        }
    }
    Ok(Some(Args {
        conf,
        cluster_json,
        state_dir,
        key,
        listen,
        socket,
        addr_file,
        sync,
        opts,
        verbose,
        max_conns,
        max_frame,
        kill_wait,
        slurmd_timeout,
    }))
}

/// Unblocks every signal and makes any panic abort the process (fail stop).
fn fail_stop_and_signals() {
    // A blocked signal mask is inherited from whoever started us (`flotilla dev up` blocks
    // SIGTERM to wait for it): SIGTERM must stop this daemon.
    let _ = nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&nix::sys::signal::SigSet::empty()),
        None,
    );
    // Fail stop: a panic anywhere (a broken invariant, a failed commit) ends the process;
    // restart recovers from the database.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::abort();
    }));
}

fn main() -> anyhow::Result<()> {
    fail_stop_and_signals();
    let Some(Args {
        conf,
        cluster_json,
        state_dir,
        key,
        listen,
        socket,
        addr_file,
        sync,
        mut opts,
        verbose,
        max_conns,
        max_frame,
        kill_wait,
        slurmd_timeout,
    }) = parse_args()?
    else {
        return Ok(());
    };
    let level = match verbose {
        0 => tracing::Level::INFO,
        1 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    // Colour only on a terminal: a log file (systemd, `2>>file`) gets plain text.
    tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stderr).with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init();
    let cluster = flotilla_slurmctld::conf::load(conf.as_deref(), cluster_json.as_deref())?;
    if cluster_json.is_none() {
        let path = conf.clone().unwrap_or_else(|| flotilla_conf::conf_path(&|k| std::env::var(k).ok()));
        // A quota.conf that does not parse stops only a first start (daemon::controller).
        match flotilla_slurmctld::conf::quota_tree(&path) {
            Ok(quotas) => {
                opts.admission.default_accounts = quotas.default_accounts();
                opts.quotas = quotas;
            }
            Err(e) => opts.quota_error = Some(format!("{e:#}")),
        }
        // AccountingStorageType=accounting_storage/slurmdbd: the site's database named by
        // slurmdbd.conf beside slurm.conf, imported once (assoc::slurmdbd).
        opts.slurmdbd = flotilla_slurmctld::assoc::slurmdbd::source(&path, &cluster.raw);
    }
    for w in &cluster.warnings {
        tracing::warn!("{w}");
    }
    let state_dir = state_dir
        .or_else(|| (!cluster.state_save_location.is_empty()).then(|| cluster.state_save_location.clone().into()))
        .unwrap_or_else(|| "/var/spool/slurmctld".into());
    let key = ClusterKey::load(&key).with_context(|| format!("cluster key {}", key.display()))?;
    let listen = listen.unwrap_or_else(|| format!("0.0.0.0:{}", cluster.slurmctld_port)).parse()?;
    let socket = socket.unwrap_or_else(|| state_dir.join("slurmctld.sock"));
    opts.kill_wait_s = kill_wait.unwrap_or(cluster.kill_wait_s as i64);
    opts.min_job_age_s = cluster.min_job_age_s as i64;
    opts.max_job_count = cluster.max_job_count.max(1);
    opts.first_job_id = cluster.first_job_id.max(1);
    opts.max_job_id = if cluster.max_job_id == 0 { flotilla_core::config::DEFAULT_MAX_JOB_ID } else { cluster.max_job_id };
    // `--slurmd-timeout`, else slurm.conf's `SlurmdTimeout` (0: a disconnected node is never
    // marked down for it, as Slurm's 0 disables the check).
    match (slurmd_timeout, cluster.slurmd_timeout_s) {
        (Some(t), _) => opts.slurmd_timeout_s = t,
        (None, Some(0)) => opts.slurmd_timeout_s = i64::MAX,
        (None, Some(t)) => opts.slurmd_timeout_s = i64::try_from(t).unwrap_or(i64::MAX),
        (None, None) => {}
    }
    let storage = daemon::storage_conf(&cluster, &state_dir, sync)?;
    // 0: unset (a `--cluster-json` written without it): the default lease.
    if cluster.slurmctld_timeout_s > 0 {
        opts.lease_ttl = Duration::from_secs(cluster.slurmctld_timeout_s);
    }
    let slurm_uid = daemon::uid_of(&cluster.slurm_user).unwrap_or(0);
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let d = daemon::start(DaemonConfig {
            cluster,
            state_dir,
            key,
            listen: Some(listen),
            socket: Some(socket),
            storage,
            opts,
            max_conns,
            max_frame,
            slurm_uid,
            host,
        })
        .await?;
        if let (Some(f), Some(a)) = (addr_file, d.tcp_addr) {
            let tmp = f.with_extension("tmp");
            std::fs::write(&tmp, a.to_string())?;
            std::fs::rename(&tmp, &f)?;
        }
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut owner = d.owner;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
            r = &mut owner => {
                r?;
                bail!("controller owner task stopped");
            }
        }
        tracing::info!("shutting down");
        let _ = d.shutdown.send(true);
        let _ = owner.await;
        Ok(())
    })
}
