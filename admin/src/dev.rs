//! `flotilla dev`: a local development cluster — one `slurmctld` and one `slurmd -N` per node,
//! all on localhost, everything (configuration, key, state, spools, logs, the daemons' pids)
//! inside one state directory.
//!
//! [`up`] writes the configuration (the default 4 nodes × 8 fake GPUs in 2 pods, or the nodes,
//! partitions and topology of an existing `slurm.conf` rewritten for localhost), starts the
//! daemons detached (each in its own process group, stdin closed, logs in the state dir), records
//! them in `<dir>/daemons` as it goes and waits until every node has registered. Any failure
//! or cancellation in the middle stops what it had started. [`down`] stops exactly what the
//! record names (checking each pid's start time, so a recycled pid is never signalled) plus the
//! job supervisors (`slurmd --stepd <dir>/spool/...`) by process group. [`status`] reports.
//!
//! The controller's port is chosen by binding port 0 and releasing it, then handed to
//! `slurmctld --listen` and written into `slurm.conf` (`SlurmctldPort`) so that commands find
//! it; when another process takes the port in between, the controller fails to bind and `up`
//! retries with a new one. Node daemons listen on no port (they connect to the controller), so
//! `NodeAddr` is rewritten to `127.0.0.1` (`Port` is kept for `scontrol show node`; it binds
//! nothing).
//!
//! The same code starts the clusters of the end-to-end tests (`flotilla_compat_tests::cluster`).
//!
//! `--ha` ([`UpOptions::ha`]): high availability as a site runs it (docs/ha.md), on one host.
//! A throw-away PostgreSQL in `<dir>/pg` ([`crate::pg::LocalPg`], Debian's `initdb`/`pg_ctl`,
//! on a Unix socket there) holds the state; two controllers share it, the primary on
//! 127.0.0.1 and the backup on 127.0.0.2 (two `SlurmctldHost=` lines with one
//! `SlurmctldPort`, as Slurm has it: every loopback address reaches this host); the backup
//! waits as a standby (state dir `<dir>/state-b`, socket `<dir>/state/slurmctld-b.sock`, log
//! `slurmctld-b.log`). A `sackd` on `<dir>/state/sackd.sock` vouches for local users, so that
//! commands reach whichever controller leads over TCP (printed as `export
//! FLOTILLA_AUTH_SOCKET=...`). Last, `up` starts a supervisor ([`supervise`], `flotilla dev
//! supervise`) that restarts a controller that exits, as the systemd units' `Restart=` would,
//! and returns once the supervisor watches the controllers ([`wait_supervisor_ready`]).
//! `down` stops the supervisor first, then the controllers, then PostgreSQL (fast shutdown).

use std::fmt::Write as _;
use std::io::Read as _;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use flotilla_proto::client::{Client, Stream};
use flotilla_proto::{ClusterKey, Request, Response, Role};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// The file in the state directory that records the daemons `up` started.
pub const DAEMONS_FILE: &str = "daemons";

/// What [`up`] starts.
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// The state directory (created; must not hold a running cluster).
    pub dir: PathBuf,
    /// A directory with `slurm.conf` (and optionally `gres.conf`, `topology.conf`, `cgroup.conf`, `quota.conf`,
    /// `slurmdbd.conf`: a site's accounting database the controller imports at its first start) whose nodes,
    /// partitions and topology to run; `None`: the default cluster.
    pub config: Option<PathBuf>,
    /// Number of nodes of the default cluster (ignored with `config`).
    pub nodes: usize,
    /// Fake GPUs per node of the default cluster.
    pub gpus_per_node: u32,
    /// `slurmd --cgroup` (`auto`: cgroups where the host offers them and this user may create
    /// them). Several clusters may share a host with cgroups on: each has its own cgroup scope
    /// ([`cgroup_scope`]).
    pub cgroup: String,
    /// How long to wait for the controller and the nodes.
    pub timeout: Duration,
    /// Where `slurmctld` and `slurmd` are; `None`: [`find_bin`].
    pub bin_dir: Option<PathBuf>,
    /// Fast scheduling ticks and no `batch_sched_delay` pacing (tests; without it the
    /// controller paces its cycles as slurm.conf says, Slurm's 3 s by default).
    pub fast: bool,
    /// More `slurmctld` arguments, after the ones `up` gives (tests: `--minute-s 10`).
    pub ctld_args: Vec<String>,
    /// Emulated nodes instead of one `slurmd` per node ([`crate::emulate`]); `None`: real
    /// node daemons. Without `config`, the cluster is [`emulated_config`] with `nodes` nodes.
    pub emulate: Option<Emulate>,
    /// `flotilla emulate --heartbeat-ms` (emulated nodes; default 2000, `slurmd`'s).
    pub emulate_args: Vec<String>,
    /// Two controllers on a PostgreSQL started in `<dir>/pg` (see the module documentation).
    pub ha: bool,
}

/// Who runs the emulated nodes of a [`UpOptions::emulate`] cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emulate {
    /// `up` starts a `flotilla emulate` process (recorded as `emulator`, stopped by `down`)
    /// and waits until every node registered.
    Process,
    /// The caller runs the emulator (`flotilla bench scale` holds it in process): `up`
    /// returns once the controller listens, without waiting for nodes.
    Caller,
}

impl UpOptions {
    /// The defaults for state directory `dir`: 4 nodes × 8 GPUs, `--cgroup auto`, 30 s.
    pub fn new(dir: impl Into<PathBuf>) -> UpOptions {
        UpOptions {
            dir: dir.into(),
            config: None,
            nodes: 4,
            gpus_per_node: 8,
            cgroup: "auto".into(),
            timeout: Duration::from_secs(30),
            bin_dir: None,
            fast: false,
            ctld_args: Vec::new(),
            emulate: None,
            emulate_args: Vec::new(),
            ha: false,
        }
    }
}

/// One daemon started by [`up`].
#[derive(Debug)]
pub struct Daemon {
    /// `slurmctld` or `slurmd`.
    pub kind: String,
    /// The node name (`-` for the controller).
    pub node: String,
    /// Its pid (also its process group).
    pub pid: i32,
    /// Its start time (`/proc/<pid>/stat` field 22), to recognise it later.
    pub start: u64,
    /// The child handle when this process started it (to reap it).
    pub child: Option<Child>,
}

/// A running local cluster.
#[derive(Debug)]
pub struct DevCluster {
    /// The state directory.
    pub dir: PathBuf,
    /// The controller's TCP address.
    pub ctld_addr: SocketAddr,
    /// The node names.
    pub nodes: Vec<String>,
    /// The daemons, controller first.
    pub daemons: Vec<Daemon>,
    /// The cluster part of the node daemons' cgroup paths (`slurmd --cgroup-scope`, see
    /// [`cgroup_scope`]): job cgroups are `<root>/flotilla/<scope>_<node>/job_<id>`.
    pub cgroup_scope: String,
    /// slurmrestd's URL (`http://127.0.0.1:PORT`; JWT on TCP, local auth on
    /// `<dir>/state/slurmrestd.sock`); `None` when no `slurmrestd` binary was found.
    pub restd_url: Option<String>,
    /// `--ha`: the backup controller's address (127.0.0.2, the same port).
    pub backup_addr: Option<SocketAddr>,
    /// `--ha`: sackd's socket, where commands get credentials for TCP.
    pub auth_socket: Option<PathBuf>,
}

impl DevCluster {
    /// `<dir>/slurm.conf`.
    pub fn slurm_conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    /// The lines a user needs: `export SLURM_CONF=...`, `export FLOTILLA_AUTH_SOCKET=...`
    /// with `--ha`, and `export FLOTILLA_RESTD_URL=...` when slurmrestd runs.
    pub fn export_line(&self) -> String {
        let mut s = format!("export SLURM_CONF={}", self.slurm_conf().display());
        if let Some(a) = &self.auth_socket {
            s.push_str(&format!("\nexport FLOTILLA_AUTH_SOCKET={}", a.display()));
        }
        if let Some(u) = &self.restd_url {
            s.push_str(&format!("\nexport FLOTILLA_RESTD_URL={u}"));
        }
        s
    }

    /// Stops every daemon (and job supervisor) of this cluster, as [`down`] does from the state
    /// dir.
    pub fn stop(&mut self, grace: Duration) {
        stop_daemons(&self.dir, &mut self.daemons, grace);
    }
}

/// `$TMPDIR/flotilla-dev-<uid>`: the state directory when none is given.
pub fn default_dir() -> PathBuf {
    std::env::temp_dir().join(format!("flotilla-dev-{}", nix::unistd::getuid()))
}

/// Finds binary `name`: in `bin_dir`, else beside the running executable (or its parent, for
/// test binaries in `target/<profile>/deps`), else on `PATH`.
pub fn find_bin(name: &str, bin_dir: Option<&Path>) -> Result<PathBuf> {
    if let Some(d) = bin_dir {
        let p = d.join(name);
        if p.is_file() {
            return Ok(p);
        }
        bail!("{} not found", p.display());
    }
    if let Ok(exe) = std::env::current_exe() {
        let mut dir = exe.parent();
        for _ in 0..2 {
            let Some(d) = dir else { break };
            let p = d.join(name);
            if p.is_file() {
                return Ok(p);
            }
            dir = d.parent();
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            let p = d.join(name);
            if p.is_file() {
                return Ok(p);
            }
        }
    }
    bail!("{name} not found beside this executable nor on PATH (build it: cargo build -p flotilla-slurmctld -p flotilla-slurmd)")
}

/// A free TCP port on 127.0.0.1 (bound to port 0, then released).
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The backup controller's address with `--ha`: another loopback address, so that both
/// controllers listen on the one `SlurmctldPort`.
pub const BACKUP_IP: [u8; 4] = [127, 0, 0, 2];

/// A port free on 127.0.0.1 and, with `ha`, on [`BACKUP_IP`] too.
fn free_ports(ha: bool) -> Result<u16> {
    for _ in 0..20 {
        let port = free_port()?;
        if !ha || TcpListener::bind(SocketAddr::from((BACKUP_IP, port))).is_ok() {
            return Ok(port);
        }
    }
    bail!("no port free on both 127.0.0.1 and 127.0.0.2")
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .and_then(|h| h.split('.').next().map(str::to_string))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn user_name() -> String {
    let uid = nix::unistd::getuid();
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

/// The keys `up` sets itself (whatever the source `slurm.conf` says).
const OVERRIDDEN: &[&str] = &[
    "slurmctldhost",
    "controlmachine",
    "controladdr",
    "backupcontroller",
    "backupaddr",
    "slurmctldport",
    "slurmdport",
    "slurmuser",
    "slurmduser",
    "statesavelocation",
    "slurmdspooldir",
    "slurmctldpidfile",
    "slurmdpidfile",
    "slurmctldlogfile",
    "slurmdlogfile",
    "authalttypes",
    "authaltparameters",
    "slurmctldtimeout",
    "statestoragetype",
    "statestoragehost",
    "statestorageport",
    "statestorageuser",
    "statestorageloc",
    "statestoragepassfile",
];

/// The `cgroup.conf` `up` writes for the default cluster: GPUs outside a job's allocation are
/// denied (`ConstrainDevices=yes`, Flotilla's promise of GPU isolation); memory is accounted
/// but not limited (`ConstrainRAMSpace=no`, Slurm's default): the real clients of
/// `../shared/clients` (snakemake asks for 100 MB and its Python needs more) pass against real
/// Slurm with that default, and a limit there would OOM-kill them. A site that wants memory
/// enforced writes `ConstrainRAMSpace=yes` (and `--config` copies its cgroup.conf).
pub const DEFAULT_CGROUP_CONF: &str = "# Written by `flotilla dev up` (Slurm cgroup.conf(5)).
CgroupPlugin=autodetect
ConstrainDevices=yes
ConstrainRAMSpace=no
";

/// The cgroup scope of the cluster in state directory `dir` named `cluster`:
/// `<cluster>-<8 hex digits of a hash of the directory's path>`, so that clusters on one
/// host never share job cgroups even when their configurations name the same ClusterName
/// (parallel tests on the reference configuration): a starting node daemon removes the job
/// cgroups it does not know under its own scope. FNV-1a (64 bits), stable across releases.
pub fn cgroup_scope(dir: &Path, cluster: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in dir.as_os_str().as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{cluster}-{:08x}", h as u32)
}

/// The `auth/jwt` key `up` generates in `<dir>/state` (Slurm's default name there).
const JWT_KEY: &str = flotilla_proto::jwt::DEFAULT_KEY_FILE;

/// The header of the generated `slurm.conf`: where the controller and state are; `pg`: the
/// `--ha` lines (the backup `SlurmctldHost`, `SlurmctldTimeout`, the `StateStorage*` keys).
fn header(dir: &Path, cluster: &str, port: u16, pg: Option<&str>) -> String {
    let d = dir.display();
    let mut s = format!(
        "# Written by `flotilla dev up`: a local cluster, every daemon on 127.0.0.1.\n\
         ClusterName={cluster}\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={port}\nSlurmUser={user}\n\
         StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\n\
         AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={d}/state/{JWT_KEY}\n",
        host = hostname(),
        user = user_name(),
    );
    if let Some(pg) = pg {
        let [a, b, c, e] = BACKUP_IP;
        let _ = write!(s, "SlurmctldHost={host}-b({a}.{b}.{c}.{e})\nSlurmctldTimeout={HA_TIMEOUT_S}\n{pg}", host = hostname());
    }
    s
}

/// The controllers' arguments of a [`UpOptions::fast`] cluster: fast ticks and cycles, and
/// no `batch_sched_delay` pacing.
const FAST_CTLD_ARGS: [&str; 8] = ["--tick-ms", "100", "--sched-interval-ms", "100", "--debounce-ms", "5", "--batch-sched-delay-ms", "0"];

/// `SlurmctldTimeout` of a `--ha` cluster (seconds): the leader lease.
pub const HA_TIMEOUT_S: u64 = 6;

/// `<dir>/pg`: the `--ha` cluster's PostgreSQL.
const PG_DIR: &str = "pg";
/// The number naming its socket (`.s.PGSQL.5432` in `<dir>/pg/server`; no TCP).
const PG_PORT: u16 = 5432;

/// The default cluster's `slurm.conf` body and `topology.conf`: `nodes` nodes named
/// `gpu01...`, `gpus` GPUs each, two pods (leaf switches) under one spine.
pub fn default_config(nodes: usize, gpus: u32) -> (String, String) {
    let nodes = nodes.max(1);
    let mut conf = String::from(
        "SchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\n\
         DefMemPerCPU=1024\nGresTypes=gpu\nTopologyPlugin=topology/tree\nMaxArraySize=10001\nMinJobAge=300\nKillWait=5\n",
    );
    let name = |i: usize| format!("gpu{i:02}");
    for i in 1..=nodes {
        let _ = writeln!(
            conf,
            "NodeName={} NodeAddr=127.0.0.1 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:{gpus} State=UNKNOWN",
            name(i)
        );
    }
    let all = format!("gpu[01-{nodes:02}]");
    let _ = writeln!(
        conf,
        "PartitionName=batch Nodes={} Default=YES DefaultTime=01:00:00 MaxTime=2-00:00:00 State=UP",
        if nodes == 1 { name(1) } else { all }
    );
    let half = nodes.div_ceil(2);
    let mut topo = format!("SwitchName=leaf1 Nodes={}\n", range(1, half));
    if nodes > 1 {
        let _ = writeln!(topo, "SwitchName=leaf2 Nodes={}", range(half + 1, nodes));
        topo.push_str("SwitchName=spine Switches=leaf[1-2]\n");
    }
    (conf, topo)
}

fn range(a: usize, b: usize) -> String {
    if a == b {
        format!("gpu{a:02}")
    } else {
        format!("gpu[{a:02}-{b:02}]")
    }
}

/// Nodes per pod (leaf switch) of [`emulated_config`], as in `examples/cluster-128`.
pub const POD_NODES: usize = 32;

/// The name of node `i` (1-based) of an emulated cluster of `nodes` nodes: `gpu` and at least
/// three digits (`gpu001`, ..., `gpu10000` is `gpu10000` among `gpu00001`...).
pub fn emulated_node_name(i: usize, nodes: usize) -> String {
    let width = nodes.to_string().len().max(3);
    format!("gpu{i:0width$}")
}

/// `examples/cluster-128` scaled to `nodes` nodes, for emulated nodes: pods of
/// [`POD_NODES`] nodes × 8 H100 (2 × 32 cores, 1.9 TB schedulable), one leaf switch per pod
/// under one spine, every `NodeAddr` 127.0.0.1; partitions `batch` (default, `any` topology)
/// and `train` (`node` topology, higher tier) over every node; `MaxJobCount` 20 per node (at
/// least 50,000, the example's), so 10,000 nodes hold 200,000 jobs. Returns the `slurm.conf`
/// body and `topology.conf`.
pub fn emulated_config(nodes: usize) -> (String, String) {
    let nodes = nodes.max(1);
    let name = |i: usize| emulated_node_name(i, nodes);
    let range = |a: usize, b: usize| if a == b { name(a) } else { format!("gpu[{}-{}]", &name(a)[3..], &name(b)[3..]) };
    let mut conf = format!(
        "SchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\n\
         PriorityType=priority/multifactor\nTopologyPlugin=topology/tree\nGresTypes=gpu\nDefMemPerCPU=7500\n\
         KillWait=30\nMinJobAge=300\nMaxJobCount={}\nMaxArraySize=10001\nSlurmdTimeout=300\n\
         NodeName=DEFAULT Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=1900000 Gres=gpu:h100:8 Features=h100,ib400 State=UNKNOWN\n",
        (nodes * 20).max(50_000)
    );
    let pods = nodes.div_ceil(POD_NODES);
    let mut topo = String::new();
    for p in 0..pods {
        let (a, b) = (p * POD_NODES + 1, ((p + 1) * POD_NODES).min(nodes));
        let _ = writeln!(conf, "NodeName={} NodeAddr=127.0.0.1", range(a, b));
        let _ = writeln!(topo, "SwitchName=leaf{} Nodes={}", p + 1, range(a, b));
    }
    if pods > 1 {
        let _ = writeln!(topo, "SwitchName=spine Switches=leaf[1-{pods}]");
    }
    conf.push_str(
        "PartitionName=DEFAULT State=UP MaxTime=7-00:00:00 DefaultTime=01:00:00\n\
         PartitionName=batch Nodes=ALL Default=YES DefaultTopology=any PriorityTier=1\n\
         PartitionName=train Nodes=ALL DefaultTopology=node PriorityTier=2 MaxTime=14-00:00:00\n",
    );
    (conf, topo)
}

/// Rewrites an existing `slurm.conf` for localhost: drops the keys the dev cluster sets itself
/// (the private list `OVERRIDDEN`), and in `NodeName=` lines sets `NodeAddr=127.0.0.1` and
/// drops `NodeHostname` (keeps `Port`, which Flotilla's node daemons never bind).
/// Returns the body and the cluster name.
pub fn rewrite_config(text: &str) -> (String, String) {
    let mut out = String::new();
    let mut cluster = "flotilla".to_string();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let key = trimmed
            .split('=')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if trimmed.starts_with('#') || !trimmed.contains('=') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if key == "clustername" {
            cluster = trimmed
                .split_once('=')
                .map_or("", |x| x.1)
                .trim()
                .to_string();
            continue;
        }
        if OVERRIDDEN.contains(&key.as_str()) {
            continue;
        }
        if key == "nodename" && !trimmed.to_ascii_lowercase().starts_with("nodename=default") {
            let mut words: Vec<String> = Vec::new();
            for w in trimmed.split_whitespace() {
                let k = w.split('=').next().unwrap_or("").to_ascii_lowercase();
                if matches!(k.as_str(), "nodeaddr" | "nodehostname") {
                    continue;
                }
                words.push(w.to_string());
                if k == "nodename" {
                    words.push("NodeAddr=127.0.0.1".into());
                }
            }
            out.push_str(&words.join(" "));
            out.push('\n');
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    (out, cluster)
}

/// Writes `slurm.conf` (controller on 127.0.0.1:`port`; `pg`: the `--ha` storage lines),
/// `topology.conf`/`gres.conf` and the key into `dir`.
fn write_config(opts: &UpOptions, port: u16, pg: Option<&str>) -> Result<()> {
    let dir = &opts.dir;
    let (body, cluster, topo) = match &opts.config {
        None if opts.emulate.is_some() => {
            let (b, t) = emulated_config(opts.nodes);
            (b, "emulated".to_string(), Some(t))
        }
        None => {
            let (b, t) = default_config(opts.nodes, opts.gpus_per_node);
            std::fs::write(dir.join("cgroup.conf"), DEFAULT_CGROUP_CONF)?;
            (b, "dev".to_string(), Some(t))
        }
        Some(src) => {
            let p = src.join("slurm.conf");
            let text =
                std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
            let (b, c) = rewrite_config(&text);
            for f in ["gres.conf", "topology.conf", "cgroup.conf", "quota.conf", "slurmdbd.conf"] {
                let from = src.join(f);
                if from.is_file() {
                    std::fs::copy(&from, dir.join(f))
                        .with_context(|| format!("copying {}", from.display()))?;
                }
            }
            (b, c, None)
        }
    };
    if let Some(t) = topo {
        std::fs::write(dir.join("topology.conf"), t)?;
    }
    let text = format!("{}{body}", header(dir, &cluster, port, pg));
    let tmp = dir.join("slurm.conf.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join("slurm.conf"))?;
    Ok(())
}

/// The start time of `pid` (`/proc/<pid>/stat` field 22), `None` when it is gone or a zombie.
pub fn start_time(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let mut f = rest.split_whitespace();
    let state = f.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    // Fields after the state start at field 4; field 22 is the 19th of them.
    f.nth(18)?.parse().ok()
}

/// Whether the daemon `d` still runs (same pid, same start time, not a zombie).
pub fn alive(pid: i32, start: u64) -> bool {
    start_time(pid) == Some(start)
}

fn record(dir: &Path, daemons: &[Daemon], ctld: Option<SocketAddr>) -> Result<()> {
    let mut s = String::new();
    if let Some(a) = ctld {
        let _ = writeln!(s, "addr {a}");
    }
    for d in daemons {
        let _ = writeln!(s, "{} {} {} {}", d.kind, d.node, d.pid, d.start);
    }
    let tmp = dir.join(format!("{DAEMONS_FILE}.tmp"));
    std::fs::write(&tmp, s)?;
    std::fs::rename(&tmp, dir.join(DAEMONS_FILE))?;
    Ok(())
}

/// What `<dir>/daemons` records: the controller address and the daemons (without handles).
pub fn read_record(dir: &Path) -> Result<(Option<SocketAddr>, Vec<Daemon>)> {
    let p = dir.join(DAEMONS_FILE);
    let text = std::fs::read_to_string(&p)
        .with_context(|| format!("no cluster recorded in {}", dir.display()))?;
    let mut addr = None;
    let mut daemons = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["addr", a] => addr = a.parse().ok(),
            [kind, node, pid, start] => daemons.push(Daemon {
                kind: kind.to_string(),
                node: node.to_string(),
                pid: pid
                    .parse()
                    .with_context(|| format!("{}: bad pid in {line:?}", p.display()))?,
                start: start
                    .parse()
                    .with_context(|| format!("{}: bad start in {line:?}", p.display()))?,
                child: None,
            }),
            _ => bail!("{}: unexpected line {line:?}", p.display()),
        }
    }
    Ok((addr, daemons))
}

/// The log file of daemon `kind` for `node` (`-`: none; the backup controller's is `b`).
fn log_name(kind: &str, node: &str) -> String {
    match kind {
        "slurmctld" | "sackd" if node != "-" => format!("{kind}-{node}.log"),
        "slurmctld" | "slurmrestd" | "emulator" | "sackd" | "supervisor" => format!("{kind}.log"),
        _ => format!("slurmd-{node}.log"),
    }
}

fn spawn(dir: &Path, kind: &str, node: &str, cmd: &mut Command) -> Result<Daemon> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(log_name(kind, node)))?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Detached from the terminal's process group: a Ctrl-C after `up` does not reach it.
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting {kind}"))?;
    let pid = child.id() as i32;
    let start = start_time(pid).unwrap_or(0);
    Ok(Daemon {
        kind: kind.into(),
        node: node.into(),
        pid,
        start,
        child: Some(child),
    })
}

/// The last `n` lines of `<dir>/<name>`.
pub fn log_tail(dir: &Path, name: &str, n: usize) -> String {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Sends `req` to the controller at `addr` as this process's user (a credential signed with
/// the cluster key in `dir`).
fn call_ctld(dir: &Path, addr: SocketAddr, req: Request) -> Result<Response> {
    let key = ClusterKey::load(&dir.join("slurm.key")).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut c = Client::connect_tcp(addr, Role::Command).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Stream::Tcp(s) = c.stream() {
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    }
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let cred = key.sign(uid, gid, &hostname(), now, 60);
    c.call(Some(cred), req).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Queries the controller's nodes: `(name, state, not_responding)`.
pub fn query_nodes(dir: &Path, addr: SocketAddr) -> Result<Vec<(String, String, bool)>> {
    match call_ctld(dir, addr, Request::QueryNodes(Default::default())) {
        Ok(Response::Nodes(v)) => Ok(v
            .into_iter()
            .map(|n| (n.name, n.state, n.not_responding))
            .collect()),
        Ok(other) => bail!("unexpected answer {other:?}"),
        Err(e) => bail!("{e}"),
    }
}

/// Stops what `up` started until it is disarmed.
struct Guard<'a> {
    dir: &'a Path,
    daemons: Vec<Daemon>,
    armed: bool,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if self.armed {
            stop_daemons(self.dir, &mut self.daemons, Duration::from_secs(5));
            let _ = std::fs::remove_file(self.dir.join(DAEMONS_FILE));
        }
    }
}

fn check_cancel(cancel: &AtomicBool) -> Result<()> {
    if cancel.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}

/// Starts a local cluster (see the module documentation). On any error, or when `cancel`
/// becomes true, everything started so far is stopped before returning the error.
pub fn up(opts: &UpOptions, cancel: &AtomicBool) -> Result<DevCluster> {
    let dir = &opts.dir;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = std::fs::canonicalize(dir)?;
    if let Ok((_, ds)) = read_record(&dir) {
        if let Some(d) = ds.iter().find(|d| alive(d.pid, d.start)) {
            bail!(
                "a cluster already runs in {} ({} pid {}): `flotilla dev down --dir {}` first",
                dir.display(),
                d.kind,
                d.pid,
                dir.display()
            );
        }
    }
    // Jobs may run as other users (when root starts it): let them reach the directory.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    for p in ["state", "spool"] {
        std::fs::create_dir_all(dir.join(p))?;
    }
    let key_path = dir.join("slurm.key");
    if !key_path.exists() {
        ClusterKey::generate(&key_path).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let jwt_key = dir.join("state").join(JWT_KEY);
    if !jwt_key.exists() {
        flotilla_proto::jwt::JwtKey::generate(&jwt_key).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let ctld_bin = find_bin("slurmctld", opts.bin_dir.as_deref())?;
    let slurmd_bin = match opts.emulate {
        None => find_bin("slurmd", opts.bin_dir.as_deref())?,
        Some(Emulate::Process) => find_bin("flotilla", opts.bin_dir.as_deref())?,
        Some(Emulate::Caller) => PathBuf::new(),
    };
    let mut g = Guard {
        dir: &dir,
        daemons: Vec::new(),
        armed: true,
    };
    let opts = UpOptions {
        dir: dir.clone(),
        ..opts.clone()
    };
    // --ha: PostgreSQL first (stopped last), recorded by its postmaster's pid.
    let pg_lines = if opts.ha {
        check_cancel(cancel)?;
        let pg_dir = dir.join(PG_DIR);
        // Throw-away: a server left by an earlier `up` in this directory is not running (no
        // recorded daemon lives), and its data is not kept.
        if pg_dir.exists() {
            std::fs::remove_dir_all(&pg_dir).with_context(|| format!("removing {}", pg_dir.display()))?;
        }
        let pg = crate::pg::LocalPg::start(&pg_dir, PG_PORT, false).map_err(|e| anyhow::anyhow!("PostgreSQL: {e}"))?;
        let pid = pg.pid().context("PostgreSQL's postmaster.pid")?;
        g.daemons.push(Daemon { kind: "postgres".into(), node: "-".into(), pid, start: start_time(pid).unwrap_or(0), child: None });
        let lines = pg.conf_lines();
        pg.detach();
        record(&dir, &g.daemons, None)?;
        Some(lines)
    } else {
        None
    };

    // The controller, on a port chosen by binding port 0; retried if someone took it meanwhile.
    let t0 = Instant::now();
    let addr_file = dir.join("ctld.addr");
    let mut ctld_addr = None;
    for _attempt in 0..5 {
        let port = free_ports(opts.ha)?;
        write_config(&opts, port, pg_lines.as_deref())?;
        let _ = std::fs::remove_file(&addr_file);
        let mut cmd = Command::new(&ctld_bin);
        cmd.arg("-D")
            .arg("-f")
            .arg(dir.join("slurm.conf"))
            .arg("--key")
            .arg(&key_path)
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--socket")
            .arg(dir.join("state/slurmctld.sock"))
            .arg("--addr-file")
            .arg(&addr_file)
            .args(["--sync", "normal"]);
        if opts.fast {
            cmd.args(FAST_CTLD_ARGS);
        }
        cmd.args(&opts.ctld_args);
        g.daemons.push(spawn(&dir, "slurmctld", "-", &mut cmd)?);
        record(&dir, &g.daemons, None)?;
        let exited = loop {
            check_cancel(cancel)?;
            // slurmctld writes the file (atomically) once it listens.
            if std::fs::read_to_string(&addr_file)
                .is_ok_and(|s| s.trim().parse::<SocketAddr>().is_ok())
            {
                break None;
            }
            let d = g.daemons.last_mut().expect("just pushed");
            if let Some(st) = d.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                break Some(st);
            }
            if t0.elapsed() > opts.timeout {
                bail!(
                    "slurmctld did not start within {:?}; {}/slurmctld.log:\n{}",
                    opts.timeout,
                    dir.display(),
                    log_tail(&dir, "slurmctld.log", 20)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        match exited {
            None => {
                ctld_addr = Some(SocketAddr::from(([127, 0, 0, 1], port)));
                break;
            }
            Some(st) => {
                g.daemons.pop();
                let log = log_tail(&dir, "slurmctld.log", 20);
                if !log.contains("in use") {
                    bail!(
                        "slurmctld exited ({st}); {}/slurmctld.log:\n{log}",
                        dir.display()
                    );
                }
            }
        }
    }
    let ctld_addr = ctld_addr.context("slurmctld could not bind a free port after 5 tries")?;
    record(&dir, &g.daemons, Some(ctld_addr))?;
    let (backup_addr, auth_socket) = if opts.ha {
        let (b, a) = start_backup(&opts, &ctld_bin, &key_path, ctld_addr, &mut g.daemons, cancel, t0)?;
        record(&dir, &g.daemons, Some(ctld_addr))?;
        (Some(b), Some(a))
    } else {
        (None, None)
    };

    // The node daemons.
    let cluster =
        flotilla_conf::load_from(&dir.join("slurm.conf")).map_err(|e| anyhow::anyhow!("{e}"))?;
    let scope = cgroup_scope(&dir, &cluster.cluster_name);
    let mut nodes = Vec::new();
    match opts.emulate {
        Some(Emulate::Caller) => {
            record(&dir, &g.daemons, Some(ctld_addr))?;
            g.armed = false;
            let daemons = std::mem::take(&mut g.daemons);
            return Ok(DevCluster {
                dir: dir.clone(),
                ctld_addr,
                nodes: cluster.nodes.iter().map(|n| n.name.clone()).collect(),
                daemons,
                cgroup_scope: scope,
                restd_url: None,
                backup_addr,
                auth_socket,
            });
        }
        Some(Emulate::Process) => {
            let mut cmd = Command::new(&slurmd_bin);
            cmd.args(["emulate", "--dir"]).arg(&dir);
            if opts.fast {
                cmd.args(["--heartbeat-ms", "200"]);
            }
            cmd.args(&opts.emulate_args);
            g.daemons.push(spawn(&dir, "emulator", "-", &mut cmd)?);
            record(&dir, &g.daemons, Some(ctld_addr))?;
            nodes = cluster.nodes.iter().map(|n| n.name.clone()).collect();
        }
        None => {}
    }
    for n in cluster.nodes.iter().filter(|_| opts.emulate.is_none()) {
        check_cancel(cancel)?;
        let mut cmd = Command::new(&slurmd_bin);
        cmd.args(["-D", "-N", &n.name])
            .arg("-f")
            .arg(dir.join("slurm.conf"))
            .arg("--fake-gpus")
            .arg(n.gpus.to_string())
            .arg("--spool")
            .arg(dir.join("spool").join(&n.name))
            .arg("--ctld")
            .arg(ctld_addr.to_string())
            .arg("--key")
            .arg(&key_path)
            .arg("--cgroup")
            .arg(&opts.cgroup)
            .arg("--cgroup-scope")
            .arg(&scope)
            .args(["--heartbeat-ms", if opts.fast { "200" } else { "1000" }]);
        g.daemons.push(spawn(&dir, "slurmd", &n.name, &mut cmd)?);
        record(&dir, &g.daemons, Some(ctld_addr))?;
        nodes.push(n.name.clone());
    }

    // Wait until every node has registered and is up.
    loop {
        check_cancel(cancel)?;
        for d in &mut g.daemons {
            if let Some(st) = d.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                let log = log_name(&d.kind, &d.node);
                bail!(
                    "{} {} exited ({st}); {}/{log}:\n{}",
                    d.kind,
                    d.node,
                    dir.display(),
                    log_tail(&dir, &log, 20)
                );
            }
        }
        let last = match query_nodes(&dir, ctld_addr) {
            Ok(v) => {
                let down: Vec<String> = nodes
                    .iter()
                    .filter(|n| {
                        !v.iter().any(|(m, state, nr)| {
                            m == *n && !nr && !matches!(state.as_str(), "UNKNOWN" | "DOWN")
                        })
                    })
                    .cloned()
                    .collect();
                if down.is_empty() {
                    break;
                }
                format!("not registered yet: {} node(s): {}", down.len(), flotilla_core::hostlist::compress(&down))
            }
            Err(e) => format!("controller: {e}"),
        };
        if t0.elapsed() > opts.timeout {
            bail!(
                "the nodes did not register within {:?} ({last}); logs in {}",
                opts.timeout,
                dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The REST API is an extra: the cluster runs without it (the reason is printed).
    let restd_url = start_restd(&dir, opts.bin_dir.as_deref(), &mut g.daemons, opts.timeout, auth_socket.as_deref()).unwrap_or_else(|e| {
        eprintln!("flotilla dev up: slurmrestd not started: {e:#}");
        None
    });
    record(&dir, &g.daemons, Some(ctld_addr))?;
    if opts.ha {
        // Last, once the record is complete: from now on only the supervisor rewrites it.
        let mut cmd = Command::new(find_bin("flotilla", opts.bin_dir.as_deref())?);
        cmd.args(["dev", "supervise", "--dir"]).arg(&dir);
        let log = dir.join(log_name("supervisor", "-"));
        let from = std::fs::metadata(&log).map_or(0, |m| m.len());
        g.daemons.push(spawn(&dir, "supervisor", "-", &mut cmd)?);
        record(&dir, &g.daemons, Some(ctld_addr))?;
        let sup = g.daemons.last_mut().expect("just pushed");
        wait_supervisor_ready(&dir, sup, from, cancel, opts.timeout)?;
    }
    g.armed = false;
    let daemons = std::mem::take(&mut g.daemons);
    Ok(DevCluster {
        dir: dir.clone(),
        ctld_addr,
        nodes,
        daemons,
        cgroup_scope: scope,
        restd_url,
        backup_addr,
        auth_socket,
    })
}

/// `--ha`: starts `sackd` on `<dir>/state/sackd.sock` and the backup controller on
/// [`BACKUP_IP`] at the primary's port, and waits until the backup answers a ping (as a
/// standby: the primary leads). Returns the backup's address and sackd's socket.
fn start_backup(
    opts: &UpOptions,
    ctld_bin: &Path,
    key_path: &Path,
    primary: SocketAddr,
    daemons: &mut Vec<Daemon>,
    cancel: &AtomicBool,
    t0: Instant,
) -> Result<(SocketAddr, PathBuf)> {
    let dir = &opts.dir;
    let sackd_bin = find_bin("sackd", opts.bin_dir.as_deref())?;
    let auth_socket = dir.join("state").join("sackd.sock");
    let _ = std::fs::remove_file(&auth_socket);
    let mut cmd = Command::new(&sackd_bin);
    cmd.arg("--socket").arg(&auth_socket).arg("--key").arg(key_path);
    daemons.push(spawn(dir, "sackd", "-", &mut cmd)?);
    let backup = SocketAddr::from((BACKUP_IP, primary.port()));
    let mut cmd = Command::new(ctld_bin);
    cmd.arg("-D")
        .arg("-f")
        .arg(dir.join("slurm.conf"))
        .arg("--key")
        .arg(key_path)
        .arg("--state-dir")
        .arg(dir.join("state-b"))
        .arg("--listen")
        .arg(backup.to_string())
        .arg("--socket")
        .arg(dir.join("state/slurmctld-b.sock"))
        .arg("--addr-file")
        .arg(dir.join("ctld-b.addr"))
        .args(["--sync", "normal"]);
    if opts.fast {
        cmd.args(FAST_CTLD_ARGS);
    }
    cmd.args(&opts.ctld_args);
    daemons.push(spawn(dir, "slurmctld", "b", &mut cmd)?);
    loop {
        check_cancel(cancel)?;
        let sackd_up = auth_socket.exists();
        if sackd_up && matches!(call_ctld(dir, backup, Request::Ping), Ok(Response::Pong)) {
            return Ok((backup, auth_socket));
        }
        for d in daemons.iter_mut().rev().take(2) {
            if let Some(st) = d.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                let log = log_name(&d.kind, &d.node);
                bail!("{} exited ({st}); {}/{log}:\n{}", d.kind, dir.display(), log_tail(dir, &log, 20));
            }
        }
        if t0.elapsed() > opts.timeout {
            bail!("the backup controller did not answer within {:?}; {}/slurmctld-b.log:\n{}", opts.timeout, dir.display(), log_tail(dir, "slurmctld-b.log", 20));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts slurmrestd (`-a rest_auth/local,rest_auth/jwt`) on a free 127.0.0.1 port and on
/// `<dir>/state/slurmrestd.sock`, and waits until its TCP port accepts. No `slurmrestd`
/// binary beside the others: none is started (`None`). The port is retried if taken
/// meanwhile.
/// `auth_socket`: where it gets credentials for controllers it reaches over TCP (`--ha`).
fn start_restd(dir: &Path, bin_dir: Option<&Path>, daemons: &mut Vec<Daemon>, timeout: Duration, auth_socket: Option<&Path>) -> Result<Option<String>> {
    let Ok(bin) = find_bin("slurmrestd", bin_dir) else {
        return Ok(None);
    };
    let sock = dir.join("state").join("slurmrestd.sock");
    for _attempt in 0..5 {
        let port = free_port()?;
        let _ = std::fs::remove_file(&sock);
        let mut cmd = Command::new(&bin);
        cmd.args(["-a", "rest_auth/local,rest_auth/jwt", "-f"])
            .arg(dir.join("slurm.conf"))
            .arg(format!("127.0.0.1:{port}"))
            .arg(format!("unix:{}", sock.display()));
        if let Some(a) = auth_socket {
            cmd.env("FLOTILLA_AUTH_SOCKET", a);
        }
        daemons.push(spawn(dir, "slurmrestd", "-", &mut cmd)?);
        let t0 = Instant::now();
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && sock.exists() {
                return Ok(Some(format!("http://127.0.0.1:{port}")));
            }
            let d = daemons.last_mut().expect("just pushed");
            if let Some(st) = d.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                let log = log_tail(dir, "slurmrestd.log", 20);
                daemons.pop();
                if log.contains("Unable to bind") {
                    break;
                }
                bail!("slurmrestd exited ({st}); {}/slurmrestd.log:\n{log}", dir.display());
            }
            if t0.elapsed() > timeout {
                bail!("slurmrestd did not listen within {timeout:?}; logs in {}", dir.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    bail!("slurmrestd could not bind a free port after 5 tries")
}

/// The job supervisors (`slurmd --stepd <dir>/spool/...`) of the cluster in `dir`.
pub fn supervisors(dir: &Path) -> Vec<i32> {
    let spool = dir.join("spool").to_string_lossy().into_owned();
    let mut v = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return v;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmd
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.get(1).map(String::as_str) == Some("--stepd")
            && args.get(2).is_some_and(|d| d.starts_with(&spool))
        {
            v.push(pid);
        }
    }
    v
}

fn pgid_of(pid: i32) -> Option<i32> {
    let mut s = String::new();
    std::fs::File::open(format!("/proc/{pid}/stat"))
        .ok()?
        .read_to_string(&mut s)
        .ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    // state ppid pgrp
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// SIGTERM to each live daemon (its process group when it leads one), then SIGKILL to what
/// still runs after `grace`; then the same for the job supervisors' process groups. Reaps
/// children this process started. Never signals a pid whose start time changed.
///
/// A `--ha` cluster's supervisor ([`supervise`]) is stopped first, and waited for, so that it
/// restarts nothing more; then the record is read again, since it names the controllers the
/// supervisor restarted.
fn stop_daemons(dir: &Path, daemons: &mut Vec<Daemon>, grace: Duration) {
    let sig = |d: &Daemon, s: Signal| {
        if alive(d.pid, d.start) {
            if pgid_of(d.pid) == Some(d.pid) {
                let _ = killpg(Pid::from_raw(d.pid), s);
            } else {
                let _ = kill(Pid::from_raw(d.pid), s);
            }
        }
    };
    let wait = |daemons: &mut [Daemon], until: Instant| loop {
        for d in daemons.iter_mut() {
            if let Some(c) = &mut d.child {
                let _ = c.try_wait();
            }
        }
        if daemons.iter().all(|d| !alive(d.pid, d.start)) || Instant::now() >= until {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let sup: Vec<usize> = (0..daemons.len()).filter(|&i| daemons[i].kind == "supervisor").collect();
    if !sup.is_empty() {
        let mut sups: Vec<Daemon> = sup.iter().rev().map(|&i| daemons.remove(i)).collect();
        for d in &sups {
            sig(d, Signal::SIGTERM);
        }
        wait(&mut sups, Instant::now() + grace);
        for d in &sups {
            sig(d, Signal::SIGKILL);
        }
        wait(&mut sups, Instant::now() + Duration::from_secs(5));
        for d in &mut sups {
            if let Some(mut c) = d.child.take() {
                let _ = c.wait();
            }
        }
        if let Ok((_, now)) = read_record(dir) {
            for r in now {
                if daemons.iter().any(|d| d.pid == r.pid && d.start == r.start) || r.kind == "supervisor" {
                    continue;
                }
                match daemons.iter().position(|d| d.kind == r.kind && d.node == r.node && !alive(d.pid, d.start)) {
                    Some(i) => {
                        if let Some(mut c) = daemons[i].child.take() {
                            let _ = c.try_wait();
                        }
                        daemons[i] = r;
                    }
                    None => daemons.push(r),
                }
            }
        }
    }
    // Node daemons first (so they start nothing more), then the controller.
    let order: Vec<usize> = (0..daemons.len()).rev().collect();
    for &i in &order {
        // PostgreSQL's fast shutdown is SIGINT (SIGTERM waits for every session to end).
        sig(&daemons[i], if daemons[i].kind == "postgres" { Signal::SIGINT } else { Signal::SIGTERM });
    }
    wait(daemons, Instant::now() + grace);
    for &i in &order {
        sig(&daemons[i], Signal::SIGKILL);
    }
    wait(daemons, Instant::now() + Duration::from_secs(5));
    for d in daemons.iter_mut() {
        if let Some(mut c) = d.child.take() {
            let _ = c.wait();
        }
    }
    // Job supervisors outlive their daemons by design, each in its own session, and each
    // job in a session of its own under it: end them all, by process group.
    let mut jobs: Vec<Daemon> = job_processes(dir)
        .into_iter()
        .filter_map(|pid| {
            Some(Daemon {
                kind: "job".into(),
                node: "-".into(),
                pid,
                start: start_time(pid)?,
                child: None,
            })
        })
        .collect();
    if !jobs.is_empty() {
        for d in &jobs {
            sig(d, Signal::SIGTERM);
        }
        wait(&mut jobs, Instant::now() + grace);
        for d in &jobs {
            sig(d, Signal::SIGKILL);
        }
        wait(&mut jobs, Instant::now() + Duration::from_secs(5));
    }
    remove_empty_cgroups(dir);
}

/// Removes the cgroup directories of the cluster in `dir` (its scope, [`cgroup_scope`]) that
/// are empty once its daemons and jobs are gone: `flotilla/<scope>_<node>` and what is left
/// below, under the v2 root and each v1 controller of `/sys/fs/cgroup`. Only `rmdir`: a cgroup
/// that still holds a process stays. Each cluster has a scope of its own, so without this every
/// stopped cluster would leave its empty node directories behind.
fn remove_empty_cgroups(dir: &Path) {
    fn rmdir_tree(d: &Path) {
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                rmdir_tree(&e.path());
            }
        }
        let _ = std::fs::remove_dir(d);
    }
    let Ok(cluster) = flotilla_conf::load_from(&dir.join("slurm.conf")) else { return };
    let prefix = format!("{}_", cgroup_scope(dir, &cluster.cluster_name));
    let root = Path::new("/sys/fs/cgroup");
    let mut bases = vec![root.join("flotilla")];
    bases.extend(["memory", "devices", "pids"].iter().map(|c| root.join(c).join("flotilla")));
    for base in bases {
        for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                rmdir_tree(&e.path());
            }
        }
    }
}

/// The job supervisors of the cluster in `dir` ([`supervisors`]), every process descending
/// from them, and any process whose command line names a file of `<dir>/spool/` (a job whose
/// supervisor is already gone).
pub fn job_processes(dir: &Path) -> Vec<i32> {
    let spool = format!("{}/", dir.join("spool").display());
    let me = std::process::id() as i32;
    let mut table: Vec<(i32, i32, bool)> = Vec::new(); // pid, ppid, names the spool
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            let Some(ppid) = stat
                .rfind(')')
                .and_then(|i| stat[i + 2..].split_whitespace().nth(1))
                .and_then(|p| p.parse().ok())
            else {
                continue;
            };
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let names = String::from_utf8_lossy(&cmd)
                .replace('\0', " ")
                .contains(&spool);
            table.push((pid, ppid, names));
        }
    }
    let mut ours: Vec<i32> = supervisors(dir);
    ours.extend(table.iter().filter(|t| t.2).map(|t| t.0));
    loop {
        let more: Vec<i32> = table
            .iter()
            .filter(|t| ours.contains(&t.1) && !ours.contains(&t.0))
            .map(|t| t.0)
            .collect();
        if more.is_empty() {
            break;
        }
        ours.extend(more);
    }
    ours.sort_unstable();
    ours.dedup();
    ours.retain(|p| *p != me);
    ours
}

/// Stops the cluster recorded in `dir` (supervisors first, then every recorded daemon, with
/// `grace` between SIGTERM and SIGKILL); removes only the record.
/// Returns how many recorded daemons were still running.
pub fn down(dir: &Path, grace: Duration) -> Result<usize> {
    // Supervisors are recognised by the (canonical) spool path in their command line.
    let dir =
        &std::fs::canonicalize(dir).with_context(|| format!("no cluster in {}", dir.display()))?;
    let (_, mut daemons) = read_record(dir)?;
    let running = daemons.iter().filter(|d| alive(d.pid, d.start)).count();
    stop_daemons(dir, &mut daemons, grace);
    if let Some(d) = daemons.iter().find(|d| alive(d.pid, d.start)) {
        bail!("{} {} (pid {}) still runs", d.kind, d.node, d.pid);
    }
    std::fs::remove_file(dir.join(DAEMONS_FILE))?;
    Ok(running)
}

/// `flotilla dev status`: one line per recorded daemon, then whether the controller answers.
/// Returns the text and whether everything runs and answers.
pub fn status(dir: &Path) -> Result<(String, bool)> {
    let (addr, daemons) = read_record(dir)?;
    let mut out = String::new();
    let mut ok = true;
    // With `--ha` either controller may lead: the nodes come from the one that answers (a
    // standby refuses queries); each controller gets a line below.
    let backup = addr.filter(|_| daemons.iter().any(|d| d.kind == "slurmctld" && d.node == "b")).map(|a| SocketAddr::from((BACKUP_IP, a.port())));
    let answers: Vec<_> = addr.into_iter().chain(backup).map(|a| (a, query_nodes(dir, a))).collect();
    let nodes = (!answers.is_empty()).then(|| match answers.iter().find(|(_, r)| r.is_ok()) {
        Some((_, Ok(v))) => Ok(v.clone()),
        _ => Err(anyhow::anyhow!("no controller answers")),
    });
    for d in &daemons {
        let up = alive(d.pid, d.start);
        ok &= up;
        let what = if d.kind == "slurmctld" && d.node == "b" {
            let [a, b, c, e] = BACKUP_IP;
            addr.map_or_else(|| "backup".into(), |x| format!("backup, {a}.{b}.{c}.{e}:{}", x.port()))
        } else if d.kind == "slurmctld" {
            addr.map_or_else(|| "port ?".into(), |a| format!("port {}", a.port()))
        } else if d.kind == "postgres" {
            "state store".into()
        } else if d.kind == "sackd" {
            "credentials".into()
        } else if d.kind == "slurmrestd" {
            "REST API".into()
        } else if d.kind == "supervisor" {
            "restarts the controllers".into()
        } else if d.kind == "emulator" {
            match &nodes {
                Some(Ok(v)) => {
                    let up = v.iter().filter(|(_, st, nr)| !nr && !matches!(st.as_str(), "UNKNOWN" | "DOWN")).count();
                    format!("emulated nodes, {up} of {} responding", v.len())
                }
                _ => "emulated nodes".into(),
            }
        } else {
            match &nodes {
                Some(Ok(v)) => v.iter().find(|(n, _, _)| *n == d.node).map_or_else(
                    || "unknown to the controller".into(),
                    |(_, st, nr)| format!("{st}{}", if *nr { " (not responding)" } else { "" }),
                ),
                _ => "-".into(),
            }
        };
        let _ = writeln!(
            out,
            "{:<10} {:<8} pid {:<8} {:<8} {what}",
            d.kind,
            d.node,
            d.pid,
            if up { "running" } else { "stopped" }
        );
    }
    if addr.is_none() {
        ok = false;
        let _ = writeln!(out, "controller address not recorded");
    }
    let ha = backup.is_some();
    for (a, r) in &answers {
        match r {
            Ok(_) if ha => {
                let _ = writeln!(out, "controller {a} answers (leader)");
            }
            Ok(_) => {
                let _ = writeln!(out, "controller {a} answers");
            }
            Err(_) if ha && matches!(call_ctld(dir, *a, Request::Ping), Ok(Response::Pong)) => {
                let _ = writeln!(out, "controller {a} answers (standby)");
            }
            Err(e) => {
                let _ = writeln!(out, "controller {a} does not answer: {e}");
            }
        }
    }
    ok &= answers.iter().any(|(_, r)| r.is_ok());
    Ok((out, ok))
}

/// Restarts the cluster's controller as `kill` then start would: SIGTERM (SIGKILL after
/// `grace`), then the same command line again (read from `/proc/<pid>/cmdline`), logging to the
/// same file; the record is updated. Returns when the new process has been started (it
/// recovers from its state database; callers wait for what they need, e.g. a scheduling
/// cycle through `Request::QueryTurns`).
///
/// Errors: no running controller in the record, or the new one cannot be started.
pub fn restart_controller(cluster: &mut DevCluster, grace: Duration) -> Result<()> {
    let i = cluster
        .daemons
        .iter()
        .position(|d| d.kind == "slurmctld" && alive(d.pid, d.start))
        .context("no running slurmctld in this cluster")?;
    let raw = std::fs::read(format!("/proc/{}/cmdline", cluster.daemons[i].pid)).context("the controller's command line")?;
    let argv: Vec<std::ffi::OsString> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(a).to_os_string())
        .collect();
    let (prog, args) = argv.split_first().context("empty command line")?;
    // Only the controller: the node daemons and their jobs keep running, as on a real restart.
    let d = &mut cluster.daemons[i];
    for (sig, wait) in [(Signal::SIGTERM, grace), (Signal::SIGKILL, Duration::from_secs(10))] {
        if alive(d.pid, d.start) {
            let _ = kill(Pid::from_raw(d.pid), sig);
        }
        let until = Instant::now() + wait;
        while alive(d.pid, d.start) && Instant::now() < until {
            if let Some(c) = &mut d.child {
                let _ = c.try_wait();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    if alive(d.pid, d.start) {
        bail!("slurmctld (pid {}) did not stop", d.pid);
    }
    if let Some(mut c) = d.child.take() {
        let _ = c.wait();
    }
    let mut cmd = Command::new(prog);
    cmd.args(args);
    cluster.daemons[i] = spawn(&cluster.dir, "slurmctld", "-", &mut cmd)?;
    record(&cluster.dir, &cluster.daemons, Some(cluster.ctld_addr))?;
    Ok(())
}

/// `--ha`: how long the supervisor waits before it starts a controller that exited again
/// (the units' `RestartSec=2s`).
pub const RESTART_DELAY: Duration = Duration::from_secs(2);
/// `--ha`: at most this many restarts of one controller in [`RESTART_INTERVAL`]; past that it
/// stays down until `dev down` (the units' `StartLimitBurst=10`).
pub const RESTART_BURST: usize = 10;
/// The window of [`RESTART_BURST`] (the units' `StartLimitIntervalSec=300`).
pub const RESTART_INTERVAL: Duration = Duration::from_secs(300);

/// One controller the supervisor watches.
struct Watched {
    node: String,
    argv: Vec<std::ffi::OsString>,
    pid: i32,
    start: u64,
    child: Option<Child>,
    down_since: Option<Instant>,
    starts: std::collections::VecDeque<Instant>,
    given_up: bool,
}

fn supervisor_log(msg: &str) {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    println!("[{:02}:{:02}:{:02}Z] {msg}", t / 3600 % 24, t / 60 % 60, t % 60);
}

/// What [`supervise`] writes once it has read the controllers' command lines.
const SUPERVISOR_READY: &str = "] watching ";

/// Waits until the supervisor `sup` (just started by `up`, its log `<dir>/supervisor.log`
/// from byte `from` on) has read the controllers' command lines ([`SUPERVISOR_READY`]), so
/// that a controller which exits as soon as `up` returns is restarted: a supervisor that first
/// looked after that exit could not read the command line of a controller already gone, and
/// ended with an error, leaving the cluster unsupervised. Errors: the supervisor exited, or
/// was not ready within `timeout`, or `cancel`.
fn wait_supervisor_ready(dir: &Path, sup: &mut Daemon, from: u64, cancel: &AtomicBool, timeout: Duration) -> Result<()> {
    let name = log_name("supervisor", "-");
    let t0 = Instant::now();
    loop {
        check_cancel(cancel)?;
        let text = std::fs::read(dir.join(&name)).unwrap_or_default();
        let new = text.get(from as usize..).unwrap_or_default();
        if String::from_utf8_lossy(new).contains(SUPERVISOR_READY) {
            return Ok(());
        }
        if let Some(st) = sup.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
            bail!("the supervisor exited ({st}); {}/{name}:\n{}", dir.display(), log_tail(dir, &name, 20));
        }
        if t0.elapsed() > timeout {
            bail!("the supervisor was not ready within {timeout:?}; {}/{name}:\n{}", dir.display(), log_tail(dir, &name, 20));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `flotilla dev supervise` (started by `up --ha`, recorded as `supervisor`, log
/// `<dir>/supervisor.log`): restarts each controller of the cluster in `dir` that exits, as
/// systemd's `Restart=` does for the units (packaging/systemd/slurmctld.service): after
/// [`RESTART_DELAY`], with the command line it had (read from `/proc` at the start), at most
/// [`RESTART_BURST`] times in [`RESTART_INTERVAL`]. A leader that was killed or stepped down
/// thus comes back as a standby. Each restart is written to the record (`<dir>/daemons`), which
/// the supervisor alone rewrites while it runs. It does not see the exit status of the
/// controllers `up` started (it is not their parent), so every exit counts as a failure.
///
/// Returns when `stop` becomes true (`dev down` sends SIGTERM and waits for it before it stops
/// the controllers: a restart under way is finished and recorded first, never half done).
/// Errors: no record, or a recorded controller whose command line cannot be read (one that
/// is gone already: `up` therefore waits for the `watching` line before it returns).
pub fn supervise(dir: &Path, stop: &AtomicBool) -> Result<()> {
    let dir = &std::fs::canonicalize(dir).with_context(|| format!("no cluster in {}", dir.display()))?;
    let (_, daemons) = read_record(dir)?;
    let mut ctls = Vec::new();
    for d in daemons.iter().filter(|d| d.kind == "slurmctld") {
        let raw = std::fs::read(format!("/proc/{}/cmdline", d.pid)).with_context(|| format!("slurmctld {} (pid {})'s command line", d.node, d.pid))?;
        let argv: Vec<std::ffi::OsString> = raw
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(a).to_os_string())
            .collect();
        if argv.is_empty() || !alive(d.pid, d.start) {
            bail!("slurmctld {} (pid {}) does not run", d.node, d.pid);
        }
        ctls.push(Watched { node: d.node.clone(), argv, pid: d.pid, start: d.start, child: None, down_since: None, starts: Default::default(), given_up: false });
    }
    // The ready line `up` waits for (SUPERVISOR_READY).
    supervisor_log(&format!(
        "watching {} controller(s); restart after {:?}, at most {RESTART_BURST} in {:?}",
        ctls.len(),
        RESTART_DELAY,
        RESTART_INTERVAL
    ));
    while !stop.load(Ordering::SeqCst) {
        for c in &mut ctls {
            let status = c.child.as_mut().and_then(|ch| ch.try_wait().ok().flatten());
            if c.given_up || alive(c.pid, c.start) {
                continue;
            }
            let Some(since) = c.down_since else {
                let how = status.map_or_else(|| "exited".to_string(), |s| format!("exited ({s})"));
                supervisor_log(&format!("slurmctld {} (pid {}) {how}; restarting in {:?}", c.node, c.pid, RESTART_DELAY));
                c.down_since = Some(Instant::now());
                continue;
            };
            if since.elapsed() < RESTART_DELAY {
                continue;
            }
            while c.starts.front().is_some_and(|t| t.elapsed() > RESTART_INTERVAL) {
                c.starts.pop_front();
            }
            if c.starts.len() >= RESTART_BURST {
                supervisor_log(&format!("slurmctld {}: start limit hit ({RESTART_BURST} in {RESTART_INTERVAL:?}); not restarting", c.node));
                c.given_up = true;
                continue;
            }
            let mut cmd = Command::new(&c.argv[0]);
            cmd.args(&c.argv[1..]);
            match spawn(dir, "slurmctld", &c.node, &mut cmd) {
                Ok(d) => {
                    c.starts.push_back(Instant::now());
                    c.down_since = None;
                    (c.pid, c.start, c.child) = (d.pid, d.start, d.child);
                    let (addr, mut rec) = read_record(dir)?;
                    if let Some(r) = rec.iter_mut().find(|r| r.kind == "slurmctld" && r.node == c.node) {
                        (r.pid, r.start) = (c.pid, c.start);
                    }
                    record(dir, &rec, addr)?;
                    supervisor_log(&format!("slurmctld {} restarted (pid {}), start {} of at most {RESTART_BURST} in {RESTART_INTERVAL:?}", c.node, c.pid, c.starts.len()));
                }
                Err(e) => {
                    supervisor_log(&format!("slurmctld {}: {e:#}; trying again in {RESTART_DELAY:?}", c.node));
                    c.starts.push_back(Instant::now());
                    c.down_since = Some(Instant::now());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    supervisor_log("stopping (the controllers are left to `dev down`)");
    Ok(())
}
