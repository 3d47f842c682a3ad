//! `slurmd`: Flotilla's node daemon.
//!
//! Slurm flags: `-N NAME` (node name; several daemons may run on one host), `-f slurm.conf`,
//! `-D` (foreground; Flotilla always stays in the foreground, as under systemd), `-v`.
//! Flotilla flags: `--fake-gpus N` (development GPU inventory instead of gres.conf),
//! `--spool DIR` (default `SlurmdSpoolDir` with `%n` expanded), `--ctld HOST:PORT` (or
//! `FLOTILLA_CTLD_ADDR`; default `SlurmctldHost`'s address and `SlurmctldPort`), `--key FILE`
//! (default `/etc/slurm/slurm.key`), `--boot-id-file PATH` (or `FLOTILLA_BOOT_ID_FILE`; default
//! `/proc/sys/kernel/random/boot_id`), `--cgroup v1|v2|none|auto` (default `auto`),
//! `--heartbeat-ms N` (default 2000).
//!
//! Internal: `slurmd --stepd DIR [--cgroup KIND]` is the job supervisor
//! ([`flotilla_slurmd::stepd`]), started by the daemon itself.

mod daemon;

use anyhow::{bail, Context};
use flotilla_proto::ClusterKey;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

/// The confinement the `--cgroup` flag names. Until the cgroup implementations are merged,
/// `auto` resolves to none and `v1`/`v2` are refused.
fn confinement(kind: &str) -> anyhow::Result<Option<Box<dyn flotilla_slurmd::confine::Confinement>>> {
    match kind {
        "auto" | "none" => Ok(None),
        "v1" | "v2" => bail!("--cgroup {kind}: cgroup confinement is not built into this slurmd yet"),
        other => bail!("--cgroup {other}: expected v1, v2, none or auto"),
    }
}

fn stepd_main(args: &[String]) -> anyhow::Result<()> {
    let dir = PathBuf::from(args.first().context("--stepd needs a directory")?);
    let kind = match args.get(1).map(String::as_str) {
        Some("--cgroup") => args.get(2).map_or("auto", String::as_str),
        _ => "auto",
    };
    let cgroup = match confinement(kind)? {
        Some(c) => {
            let job: flotilla_slurmd::spool::JobFile = flotilla_slurmd::spool::read_json(&dir.join("job.json"))?
                .context("job.json missing")?;
            let spec = flotilla_slurmd::confine::ConfineSpec {
                name: format!("job_{}", job.bind.job_id),
                mem_limit_mib: (job.bind.mem_mib > 0).then_some(job.bind.mem_mib),
                allowed_gpus: flotilla_slurmd::env::gpu_indices(job.bind.gpu_mask),
                all_gpus: Vec::new(),
            };
            Some(c.create(&spec)?)
        }
        None => None,
    };
    flotilla_slurmd::stepd::run(&dir, cgroup)?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
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
    let mut heartbeat = Duration::from_millis(2000);
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
            "--heartbeat-ms" => heartbeat = Duration::from_millis(val()?.parse()?),
            "-h" | "--help" => {
                println!("usage: slurmd [-D] [-N name] [-f slurm.conf] [-v] [--fake-gpus N] [--spool DIR] [--ctld HOST:PORT] [--key FILE] [--boot-id-file PATH] [--cgroup v1|v2|none|auto] [--heartbeat-ms N]");
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
    tracing_subscriber::fmt().with_max_level(level).with_writer(std::io::stderr).init();
    confinement(&cgroup)?;
    let conf_path = match conf {
        Some(p) => p,
        None => flotilla_commands::conf::conf_path(&|k| std::env::var(k).ok()),
    };
    let conf_path = std::fs::canonicalize(&conf_path).unwrap_or(conf_path);
    let cluster = flotilla_commands::conf::load_from(&conf_path).with_context(|| format!("loading {}", conf_path.display()))?;
    for w in &cluster.warnings {
        tracing::warn!("{w}");
    }
    let node = match node {
        Some(n) => n,
        None => nix::unistd::gethostname()?.to_string_lossy().split('.').next().unwrap_or_default().to_string(),
    };
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
    let key = ClusterKey::load(&key).with_context(|| format!("cluster key {}", key.display()))?;
    let boot_id = std::fs::read_to_string(&boot_id_file).with_context(|| format!("boot id {}", boot_id_file.display()))?;
    let opts = daemon::Options {
        node: node.clone(),
        conf_path,
        gpus: fake_gpus.unwrap_or(nconf.gpus),
        cpus: nconf.cpus,
        mem_mib: nconf.real_memory_mib,
        conf: cluster,
        spool,
        key,
        ctld,
        boot_id,
        heartbeat,
        self_exe: std::env::current_exe()?,
        cgroup,
    };
    let d = daemon::Daemon::new(opts)?;
    tracing::info!(node = %node, epoch = d.epoch(), "slurmd started");
    d.run()
}
