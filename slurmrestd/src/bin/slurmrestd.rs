//! `slurmrestd [OPTIONS] [host]:port|unix:/path ...` — Slurm's REST daemon.
//!
//! Options as Slurm 22.05's: `-a` rest_auth plugins (`rest_auth/local`, `rest_auth/jwt`;
//! default both), `-f` slurm.conf, `-s` OpenAPI plugins (accepted; every version is served),
//! `-t` threads, `-u`/`-g` user and group to run as once the sockets are bound, `-v` more
//! logging, `-V` version. `SLURM_CONF` as for every command.

use anyhow::{bail, Context, Result};
use flotilla_slurmrestd::app::{router, AppState};
use flotilla_slurmrestd::auth::AuthModes;
use flotilla_slurmrestd::ctl::{CtlClient, CtlTarget};
use flotilla_slurmrestd::server::{bind, serve, Limits, Listen};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug)]
struct Opts {
    modes: AuthModes,
    conf: Option<PathBuf>,
    threads: usize,
    user: Option<String>,
    group: Option<String>,
    verbose: u8,
    listen: Vec<Listen>,
    limits: Limits,
}

const USAGE: &str = "Usage: slurmrestd [OPTIONS] [host]:port|unix:/path/to/socket ...
  -a <plugins>  rest_auth plugins (rest_auth/local,rest_auth/jwt)
  -f <file>     slurm.conf
  -g <group>    run as this group
  -h            this help
  --max-connections <count>
                connections served at once (also SLURMRESTD_MAX_CONNECTIONS, as Slurm
                23.02+; default 4096); one client (address or uid) may hold 1024 of them
  -s <plugins>  OpenAPI plugins (every version is served)
  -t <count>    worker threads
  -u <user>     run as this user
  -v            more verbose
  -V            print the version";

fn parse(args: &[String]) -> Result<Option<Opts>> {
    let mut o = Opts {
        modes: AuthModes {
            local: true,
            jwt: true,
        },
        conf: None,
        threads: 20,
        user: None,
        group: None,
        verbose: 0,
        listen: Vec::new(),
        limits: Limits::default(),
    };
    let mut max_conns = std::env::var("SLURMRESTD_MAX_CONNECTIONS").ok();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        let mut val = || -> Result<String> {
            i += 1;
            args.get(i)
                .cloned()
                .with_context(|| format!("option {a} needs a value\n{USAGE}"))
        };
        match a {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "-V" | "--version" => {
                let (ma, mi, mc) = flotilla_rest::version::SLURM_RELEASE;
                println!("slurm {ma}.{mi:02}.{mc}");
                return Ok(None);
            }
            "-v" => o.verbose += 1,
            "-a" => {
                let v = val()?;
                let mut m = AuthModes {
                    local: false,
                    jwt: false,
                };
                for p in v.split(',') {
                    match p.trim().trim_start_matches("rest_auth/") {
                        "local" => m.local = true,
                        "jwt" => m.jwt = true,
                        "list" => {
                            println!("rest_auth/local\nrest_auth/jwt");
                            return Ok(None);
                        }
                        other => bail!("Unable to load rest_auth plugin: rest_auth/{other}"),
                    }
                }
                o.modes = m;
            }
            "-f" => o.conf = Some(PathBuf::from(val()?)),
            "-s" => {
                val()?;
            }
            "-t" => o.threads = val()?.parse().context("-t needs a number")?,
            "--max-connections" => max_conns = Some(val()?),
            s if s.starts_with("--max-connections=") => max_conns = Some(s["--max-connections=".len()..].to_string()),
            "-u" => o.user = Some(val()?),
            "-g" => o.group = Some(val()?),
            s if s.starts_with('-') => bail!("unknown option {s}\n{USAGE}"),
            s => o.listen.push(Listen::parse(s).map_err(anyhow::Error::msg)?),
        }
        i += 1;
    }
    if o.listen.is_empty() {
        bail!("no listen address given\n{USAGE}");
    }
    if let Some(m) = max_conns {
        let n: usize = m.trim().parse().ok().filter(|n| *n >= 1).with_context(|| format!("Invalid max connections: {m}"))?;
        o.limits.connections = n;
        o.limits.per_client = o.limits.per_client.min(n);
    }
    Ok(Some(o))
}

fn drop_privileges(user: Option<&str>, group: Option<&str>) -> Result<()> {
    use nix::unistd::{setgid, setgroups, setuid, Group, User};
    let gid = match group {
        Some(g) => Some(match g.parse::<u32>() {
            Ok(n) => nix::unistd::Gid::from_raw(n),
            Err(_) => {
                Group::from_name(g)?
                    .with_context(|| format!("Unable to find group {g}"))?
                    .gid
            }
        }),
        None => None,
    };
    let user = match user {
        Some(u) => Some(match u.parse::<u32>() {
            Ok(n) => User::from_uid(nix::unistd::Uid::from_raw(n))?
                .with_context(|| format!("Unable to find user {u}"))?,
            Err(_) => User::from_name(u)?.with_context(|| format!("Unable to find user {u}"))?,
        }),
        None => None,
    };
    if let Some(g) = gid.or(user.as_ref().map(|u| u.gid)) {
        setgroups(&[g])?;
        setgid(g)?;
    }
    if let Some(u) = user {
        setuid(u.uid)?;
    }
    Ok(())
}

/// Where the controllers are: slurm.conf's `SlurmctldHost=` lines in order at
/// `SlurmctldPort` (the first at `ControlAddr`, or 127.0.0.1 without one, as the commands
/// take it), the first's Unix socket in `StateSaveLocation`.
fn target(conf: &flotilla_core::config::ClusterConfig) -> CtlTarget {
    let unix = (!conf.state_save_location.is_empty())
        .then(|| Path::new(&conf.state_save_location).join("slurmctld.sock"));
    let first = if conf.control_addr.is_empty() {
        "127.0.0.1"
    } else {
        conf.control_addr.as_str()
    };
    let mut tcp: Vec<(String, String)> = conf
        .controllers()
        .into_iter()
        .enumerate()
        .map(|(i, (host, addr))| {
            let addr = if i == 0 { first } else { addr.as_str() };
            (host, format!("{addr}:{}", conf.slurmctld_port))
        })
        .collect();
    if tcp.is_empty() {
        tcp.push((first.to_string(), format!("{first}:{}", conf.slurmctld_port)));
    }
    let auth_socket = std::env::var("FLOTILLA_AUTH_SOCKET")
        .ok()
        .filter(|s| !s.is_empty())
        .map_or_else(|| PathBuf::from("/run/slurm/sackd.sock"), PathBuf::from);
    CtlTarget {
        unix,
        tcp,
        auth_socket,
        slurmctld_timeout: std::time::Duration::from_secs(conf.slurmctld_timeout_s),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => return,
        Err(e) => {
            eprintln!("slurmrestd: fatal: {e:#}");
            std::process::exit(1);
        }
    };
    let level = match opts.verbose {
        0 => tracing::Level::INFO,
        1 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(opts) {
        eprintln!("slurmrestd: fatal: {e:#}");
        std::process::exit(1);
    }
}

fn run(opts: Opts) -> Result<()> {
    let conf = match &opts.conf {
        Some(p) => flotilla_conf::load_from(p)?,
        None => flotilla_conf::load(&|k| std::env::var(k).ok())?,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.threads.clamp(1, 256))
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut bound = Vec::new();
        for l in &opts.listen {
            bound.push(
                bind(l)
                    .await
                    .with_context(|| format!("Unable to bind listen address {l:?}"))?,
            );
        }
        drop_privileges(opts.user.as_deref(), opts.group.as_deref())?;
        let st = Arc::new(AppState {
            ctl: CtlClient::new(target(&conf)),
            modes: opts.modes,
            my_uid: nix::unistd::geteuid().as_raw(),
            cluster: conf.cluster_name.clone(),
        });
        let app = router(st);
        let mut tasks = Vec::new();
        for b in bound {
            tasks.push(tokio::spawn(serve(b, app.clone(), opts.limits)));
        }
        tracing::info!(listen = ?opts.listen, "slurmrestd ready");
        for t in tasks {
            t.await??;
        }
        Ok(())
    })
}
