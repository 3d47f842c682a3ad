//! `slurmd`: Flotilla's node daemon.
//!
//! Slurm flags: `-N NAME` (node name; several daemons may run on one host), `-f slurm.conf`,
//! `-D` (foreground; Flotilla always stays in the foreground, as under systemd), `-v`.
//! Flotilla flags: `--fake-gpus N` (development GPU inventory instead of gres.conf),
//! `--spool DIR` (default `SlurmdSpoolDir` with `%n` expanded), `--ctld HOST:PORT` (or
//! `FLOTILLA_CTLD_ADDR`; default the first `SlurmctldHost`'s address and `SlurmctldPort`; the other
//! `SlurmctldHost` lines are tried after it, in order, when it is unreachable or a standby, and
//! when a leader that sent keepalives falls silent for 1.5 x `SlurmctldTimeout`; with one
//! `SlurmctldHost` the same controller is reconnected after `SlurmdTimeout` of silence), `--key FILE`
//! (default `/etc/slurm/slurm.key`), `--boot-id-file PATH` (or `FLOTILLA_BOOT_ID_FILE`; default
//! `/proc/sys/kernel/random/boot_id`), `--cgroup v1|v2|none|auto` (default `auto`: cgroup.conf's
//! `CgroupPlugin`; cgroup.conf beside slurm.conf says what is constrained, see
//! [`flotilla_conf::cgroup`]),
//! `--cgroup-scope NAME` (the cluster part of the job cgroups' paths, `<NAME>_<node>`;
//! default ClusterName; `flotilla dev up` gives each local cluster its own),
//! `--heartbeat-ms N` (default 2000, longer on large clusters: [`flotilla_conf::default_heartbeat`]), `--health nvml|fake:PATH|none` (GPU health source;
//! default `nvml` when NVML loads, else none with one log line; `fake:PATH` reads JSON-lines
//! `HealthEvent`s appended to PATH, `%n` expanded, see [`flotilla_slurmd::health::fake::FileHealth`]),
//! `--health-poll-ms N` (default 1000: how long one health poll waits for events).
//!
//! Internal: `slurmd --stepd DIR [--cgroup KIND]` is the job supervisor
//! ([`flotilla_slurmd::stepd`]), started by the daemon itself; it confines the script to the
//! cgroups the daemon wrote in `DIR/cgroup.json` ([`flotilla_slurmd::jobcg`]), none when there
//! is no such file or KIND is `none`.
//!
//! One daemon per spool: the daemon holds `<spool>/slurmd.lock` for its life; a second one on
//! the same spool exits with status 1 ("another slurmd is running on spool directory ...").
//! Its umask is 0077 (jobs get their own, `SLURM_UMASK`).
//!
//! GPU devices the cgroups deny outside a job's mask (with cgroup.conf `ConstrainDevices=yes`): gres.conf's `File=` for this node where
//! given (as Slurm's `ConstrainDevices` uses it), else the host's `/dev/nvidia<N>`.

mod daemon;

use anyhow::{bail, Context};
use flotilla_proto::ClusterKey;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

/// The confinement the `--cgroup` flag names, under `root` (cgroup.conf's
/// `CgroupMountpoint`): `v1`, `v2`, `none`, or `auto`: cgroup.conf's `CgroupPlugin`
/// (`cgroup/v1`, `cgroup/v2`), or with `autodetect` what the host offers (none, with a log
/// line, when it offers nothing usable or this user may not create cgroups there).
fn confinement(
    kind: &str,
    plugin: flotilla_conf::cgroup::CgroupPlugin,
    root: &std::path::Path,
    node: &str,
) -> anyhow::Result<Option<Box<dyn flotilla_slurmd::confine::Confinement>>> {
    use flotilla_conf::cgroup::CgroupPlugin;
    use flotilla_slurmd::confine::{auto::auto, v1::CgroupV1, v2::CgroupV2};
    let kind = match (kind, plugin) {
        ("auto", CgroupPlugin::V1) => "v1",
        ("auto", CgroupPlugin::V2) => "v2",
        (kind, _) => kind,
    };
    match kind {
        "none" => Ok(None),
        "auto" => match auto(root, node) {
            Ok(c) => {
                // Where the node's cgroups would be created (v1: the memory hierarchy).
                let base = if c.kind() == "v1" { root.join("memory") } else { root.to_path_buf() };
                if nix::unistd::access(&base, nix::unistd::AccessFlags::W_OK).is_err() {
                    tracing::warn!("no cgroup confinement: {} is not writable by this user (run as root, or --cgroup none)", base.display());
                    return Ok(None);
                }
                Ok(Some(c))
            }
            Err(e) => {
                tracing::warn!("no cgroup confinement: {e}");
                Ok(None)
            }
        },
        "v1" => Ok(Some(Box::new(CgroupV1::new(root, node)))),
        "v2" => Ok(Some(Box::new(CgroupV2::new(root, node)))),
        other => bail!("--cgroup {other}: expected v1, v2, none or auto"),
    }
}

/// The health source the `--health` flag names: `nvml` (an error when NVML does not load),
/// `fake:PATH` (`%n` = node name), `none`; absent: NVML when it loads, else none (logged).
fn health_source(
    kind: Option<&str>,
    node: &str,
    gpus: u32,
) -> anyhow::Result<Option<Box<dyn flotilla_slurmd::health::HealthSource>>> {
    use flotilla_slurmd::health::{fake::FileHealth, nvml};
    Ok(match kind {
        None => nvml::nvml_or_log().map(|h| Box::new(h) as Box<dyn flotilla_slurmd::health::HealthSource>),
        Some("none") => None,
        Some("nvml") => Some(Box::new(nvml::NvmlHealth::new()?)),
        Some(other) => match other.strip_prefix("fake:") {
            Some(path) => Some(Box::new(FileHealth::new(path.replace("%n", node), gpus))),
            None => bail!("--health {other}: expected nvml, fake:PATH or none"),
        },
    })
}

/// The node's GPU character devices: gres.conf's `File=` list (index = position) when the
/// node has one, else NVIDIA's `/dev/nvidia<N>` (major 195), index = N. A listed file that is
/// not there is left out with a warning.
fn gpu_devices(files: &[String]) -> Vec<flotilla_slurmd::confine::GpuDevice> {
    let mut out = Vec::new();
    if !files.is_empty() {
        for (index, path) in files.iter().enumerate() {
            match nix::sys::stat::stat(path.as_str()) {
                Ok(st) => out.push(flotilla_slurmd::confine::GpuDevice {
                    index: index as u32,
                    major: nix::sys::stat::major(st.st_rdev) as u32,
                    minor: nix::sys::stat::minor(st.st_rdev) as u32,
                    path: path.clone(),
                }),
                Err(e) => tracing::warn!("gres.conf File={path}: {e}: this GPU is not constrained"),
            }
        }
        return out;
    }
    let Ok(dir) = std::fs::read_dir("/dev") else { return out };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(idx) = name.strip_prefix("nvidia").and_then(|n| n.parse::<u32>().ok()) else { continue };
        let path = format!("/dev/{name}");
        if let Ok(st) = nix::sys::stat::stat(path.as_str()) {
            let rdev = st.st_rdev;
            out.push(flotilla_slurmd::confine::GpuDevice {
                index: idx,
                major: nix::sys::stat::major(rdev) as u32,
                minor: nix::sys::stat::minor(rdev) as u32,
                path,
            });
        }
    }
    out.sort_by_key(|d| d.index);
    out
}

fn stepd_main(args: &[String]) -> anyhow::Result<()> {
    let dir = PathBuf::from(args.first().context("--stepd needs a directory")?);
    let kind = match args.get(1).map(String::as_str) {
        Some("--cgroup") => args.get(2).map_or("auto", String::as_str),
        _ => "auto",
    };
    // The daemon created the job's cgroup and says which to use (none: unconfined).
    let cgroups = match flotilla_slurmd::jobcg::BatchCgroups::read(&dir)? {
        Some(b) if kind != "none" => Some(b.open()?),
        _ => None,
    };
    flotilla_slurmd::stepd::run(&dir, cgroups)?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    // Whoever started us may have blocked signals (a starter waiting for SIGTERM with
    // sigwait, as `flotilla dev up` does): a blocked mask is inherited, and SIGTERM must stop
    // this daemon and reach its jobs.
    let _ = nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&nix::sys::signal::SigSet::empty()),
        None,
    );
    // What the daemon and the supervisors create is private unless they say otherwise (the
    // units set `UMask=0077` too; a daemon started by hand gets it here). Jobs get their own
    // umask (`SLURM_UMASK`, else 022) before they exec.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let argv: Vec<String> = std::env::args().collect();
    // The supervisor must stay single-threaded: dispatch before anything starts a thread.
    if argv.get(1).map(String::as_str) == Some("--stepd") {
        return stepd_main(&argv[2..]);
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        std::process::abort();
    }));
    let mut args = argv.into_iter().skip(1);
    let mut node: Option<String> = None;
    let mut conf: Option<PathBuf> = None;
    let mut fake_gpus: Option<u32> = None;
    let mut spool: Option<PathBuf> = None;
    let mut ctld: Option<String> = std::env::var("FLOTILLA_CTLD_ADDR").ok().filter(|s| !s.is_empty());
    let mut key = PathBuf::from("/etc/slurm/slurm.key");
    let mut boot_id_file = std::env::var("FLOTILLA_BOOT_ID_FILE")
        .ok()
        .filter(|s| !s.is_empty())
        .map_or_else(|| PathBuf::from("/proc/sys/kernel/random/boot_id"), PathBuf::from);
    let mut cgroup = "auto".to_string();
    let mut cgroup_scope: Option<String> = None;
    let mut heartbeat: Option<Duration> = None;
    let mut health: Option<String> = None;
    let mut health_poll = Duration::from_millis(1000);
    let mut verbose = 0;
    while let Some(a) = args.next() {
        let mut val = || args.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "-D" => {}
            "-v" | "-vv" | "-vvv" => verbose += a.len() - 1,
            "-N" => node = Some(val()?),
            "-f" => conf = Some(val()?.into()),
            "--fake-gpus" => fake_gpus = Some(val()?.parse()?),
            "--spool" => spool = Some(val()?.into()),
            "--ctld" => ctld = Some(val()?),
            "--key" => key = val()?.into(),
            "--boot-id-file" => boot_id_file = val()?.into(),
            "--cgroup" => cgroup = val()?,
            "--cgroup-scope" => cgroup_scope = Some(val()?),
            "--heartbeat-ms" => heartbeat = Some(Duration::from_millis(val()?.parse()?)),
            "--health" => health = Some(val()?),
            "--health-poll-ms" => health_poll = Duration::from_millis(val()?.parse()?),
            "-h" | "--help" => {
                println!("usage: slurmd [-D] [-N name] [-f slurm.conf] [-v] [--fake-gpus N] [--spool DIR] [--ctld HOST:PORT] [--key FILE] [--boot-id-file PATH] [--cgroup v1|v2|none|auto] [--cgroup-scope NAME] [--heartbeat-ms N] [--health nvml|fake:PATH|none] [--health-poll-ms N]");
                return Ok(());
            }
            other => bail!("unrecognized option '{other}'"),
        }
    }
    let level = match verbose {
        0 => tracing::Level::INFO,
        1 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    // Colour only on a terminal: a log file (systemd, `2>>file`) gets plain text.
    tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stderr).with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init();
    if !matches!(cgroup.as_str(), "v1" | "v2" | "none" | "auto") {
        bail!("--cgroup {cgroup}: expected v1, v2, none or auto");
    }
    if let Some(h) = &health {
        if !matches!(h.as_str(), "nvml" | "none") && !h.starts_with("fake:") {
            bail!("--health {h}: expected nvml, fake:PATH or none");
        }
    }
    let conf_path = match conf {
        Some(p) => p,
        None => flotilla_conf::conf_path(&|k| std::env::var(k).ok()),
    };
    let conf_path = std::fs::canonicalize(&conf_path).unwrap_or(conf_path);
    let cluster = flotilla_conf::load_from(&conf_path).with_context(|| format!("loading {}", conf_path.display()))?;
    for w in &cluster.warnings {
        tracing::warn!("{w}");
    }
    let node = match node {
        Some(n) => n,
        None => nix::unistd::gethostname()?.to_string_lossy().split('.').next().unwrap_or_default().to_string(),
    };
    let cluster_nodes = cluster.nodes.len();
    let Some(nconf) = cluster.nodes.iter().find(|n| n.name == node) else {
        bail!("node {node} is not in {}", conf_path.display());
    };
    let spool = spool.unwrap_or_else(|| {
        let d = if cluster.slurmd_spool_dir.is_empty() { "/var/spool/slurmd" } else { &cluster.slurmd_spool_dir };
        PathBuf::from(d.replace("%n", &node).replace("%h", &node))
    });
    let ctld = match ctld {
        Some(a) => a,
        None => {
            let host = if cluster.control_addr.is_empty() { &cluster.control_host } else { &cluster.control_addr };
            format!("{host}:{}", cluster.slurmctld_port)
        }
    };
    let ctld = ctld
        .to_socket_addrs()
        .with_context(|| format!("controller address {ctld}"))?
        .next()
        .with_context(|| format!("controller address {ctld} resolves to nothing"))?;
    // The backup controllers, tried in order after the first (a name that does not resolve is
    // left out, with a warning).
    let backups: Vec<std::net::SocketAddr> = cluster
        .backup_controllers
        .iter()
        .filter_map(|(host, addr)| {
            let a = if addr.is_empty() { host } else { addr };
            match (a.as_str(), cluster.slurmctld_port).to_socket_addrs().map(|mut i| i.next()) {
                Ok(Some(sa)) => Some(sa),
                _ => {
                    tracing::warn!("backup controller {host} ({a}) does not resolve: left out");
                    None
                }
            }
        })
        .collect();
    let key = ClusterKey::load(&key).with_context(|| format!("cluster key {}", key.display()))?;
    let boot_id = std::fs::read_to_string(&boot_id_file).with_context(|| format!("boot id {}", boot_id_file.display()))?;
    let gpus = fake_gpus.unwrap_or(nconf.gpus);
    // cgroup.conf beside slurm.conf: what is constrained (Slurm's defaults without one).
    let cg_conf = flotilla_conf::cgroup::load_cgroup_conf(&conf_path)?;
    for w in &cg_conf.warnings {
        tracing::warn!("{w}");
    }
    let cg_root = PathBuf::from(&cg_conf.cgroup_mountpoint);
    // Cgroups are host-global: they are named by cluster (or `--cgroup-scope`) and node, so
    // that several clusters (and several `-N` daemons) on one host never share one.
    let scope = cgroup_scope.as_deref().unwrap_or(&cluster.cluster_name);
    if scope.is_empty() || scope.contains('/') || scope == "." || scope == ".." {
        bail!("--cgroup-scope {scope:?}: expected a name without '/'");
    }
    let cg_node = flotilla_slurmd::jobcg::node_part(scope, &node);
    let cgroups = flotilla_slurmd::jobcg::NodeCgroups::new(
        confinement(&cgroup, cg_conf.cgroup_plugin, &cg_root, &cg_node)?,
        &cg_root,
        &cg_node,
        gpu_devices(&nconf.gpu_files),
    )
    .with_conf(&cg_conf, nconf.real_memory_mib);
    if let Some(kind) = cgroups.kind() {
        tracing::info!(
            kind,
            node = %cg_node,
            constrain_devices = cg_conf.constrain_devices,
            constrain_ram_space = cg_conf.constrain_ram_space,
            constrain_swap_space = cg_conf.constrain_swap_space,
            "jobs are confined by cgroups"
        );
        if !cg_conf.constrain_devices && gpus > 0 {
            tracing::warn!("cgroup.conf has no ConstrainDevices=yes: jobs may open every GPU of this node");
        }
    }
    let health = health_source(health.as_deref(), &node, gpus)?;
    let opts = daemon::Options {
        node: node.clone(),
        conf_path,
        gpus,
        cpus: nconf.cpus,
        mem_mib: nconf.real_memory_mib,
        conf: cluster,
        spool,
        key,
        ctld,
        backups,
        boot_id,
        heartbeat: heartbeat.unwrap_or_else(|| flotilla_conf::default_heartbeat(cluster_nodes)),
        self_exe: std::env::current_exe()?,
        cgroup,
        cgroups: std::sync::Arc::new(cgroups),
        health,
        health_poll,
    };
    let d = daemon::Daemon::new(opts)?;
    tracing::info!(node = %node, epoch = d.epoch(), "slurmd started");
    d.run()
}
