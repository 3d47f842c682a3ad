//! `flotilla emulate`: one process holding many node sessions, each speaking `proto` to the
//! controller exactly as `slurmd` does, without running anything.
//!
//! Each emulated node is one tokio task: it connects to the controller over TCP, shakes hands
//! as a [`Role::NodeDaemon`], registers ([`Register`]: its name, boot epoch, GPU, CPU and
//! memory inventory, the jobs it runs and the ends not yet acknowledged) with a credential
//! signed by the cluster key, then sends a full [`NodeToCtl::Heartbeat`] every heartbeat
//! period and handles what the controller pushes:
//!
//! - `Launch`/`Bind`: the job "runs" for its runtime (below), idempotently per `(job, run)`
//!   as `slurmd` treats binds; the batch host then reports [`NodeToCtl::JobExited`] and repeats
//!   the end in heartbeats until `AckExits`.
//! - `Kill`: the batch host reports the end with signal 9 (what `slurmd`'s supervisor writes
//!   after killing the job); another node of the job forgets it and sends a heartbeat at once
//!   (without the job: the controller releases the node's part then), not at its next
//!   period, as Slurm's `slurmd` sends `REQUEST_EPILOG_COMPLETE` as soon as a job's epilog
//!   has run there (`_rpc_terminate_job` ends with `_epilog_complete`,
//!   `src/slurmd/slurmd/req.c`).
//! - `Signal` with SIGTERM or SIGKILL (a time limit, a cancel, a preemption): the job ends
//!   with that signal, as a script without a trap would. Other signals are ignored.
//! - `LaunchStep`: refused by logging it (no processes: `srun` steps are not emulated).
//! - `StopNotice`, `SignalSteps`: ignored (they concern files and processes).
//!
//! A job's runtime is, in order: the job environment's `FLOTILLA_EMULATE_RUNTIME` (seconds,
//! fractional allowed), the first `sleep N` of its batch script, else the emulator's default.
//! Its exit code is `FLOTILLA_EMULATE_EXIT` (default 0). Runtimes are in the job's time:
//! with `time_scale` S, a job of R seconds ends after R / S real seconds (trace replay).
//!
//! The end a node reports ([`JobExit::end_time`]) is read on the emulator's own job clock
//! (the wall clock at the emulator's start, then S job seconds per real second): a script
//! that ends by itself reports exactly its start on that clock plus its runtime, a killed one
//! the clock's time of the kill. (The controller, like Slurm's, stamps its own time when the
//! end reaches it; the node's time is informational.) [`Emulator::record_ends`] keeps, for
//! a trace replay, the real instants of each batch script's launch and end report
//! ([`EndTiming`]), from which `flotilla bench trace` measures the end latency.
//!
//! Nodes can be told ([`Control`]) to lose their connection (reconnecting after a pause with
//! the same boot epoch and their jobs), to reboot (a new boot epoch, every job forgotten, as
//! invariant 8 expects), to power off and on again (silent until `up`, then a new epoch), or
//! to fail a GPU (a `health/nvidia` quarantine verdict, as `slurmd`'s health loop sends it).
//! `flotilla emulate` serves these on a Unix socket, one line per connection
//! ([`serve_control`]); tests call [`Emulator::control`].
//!
//! With the controller on a loopback address, node `i` connects from 127.10.x.y (its own
//! source address, as real nodes are distinct peers), else from the host's address.
//!
//! Boot epochs start at the emulator's start time in milliseconds, so an emulator restarted
//! later registers every node with a new epoch (its jobs are gone: a reboot), and each reboot
//! adds one.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use flotilla_proto::{
    Bind, ClusterKey, CtlToNode, Frame, HealthLevel, Hello, JobExit, NodeJob, NodeToCtl, Register, Request, Response,
    Role,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// The job environment variable that sets an emulated job's runtime (seconds, in job time).
pub const RUNTIME_ENV: &str = "FLOTILLA_EMULATE_RUNTIME";
/// The job environment variable that sets an emulated job's exit code.
pub const EXIT_ENV: &str = "FLOTILLA_EMULATE_EXIT";

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

/// One emulated node's inventory, as it registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Node name (`NodeName=`).
    pub name: String,
    /// GPUs.
    pub gpus: u32,
    /// CPUs.
    pub cpus: u32,
    /// Memory (MiB).
    pub mem_mib: u64,
}

/// What the emulator runs.
#[derive(Debug, Clone)]
pub struct EmulatorOptions {
    /// The controller's TCP address.
    pub ctld: SocketAddr,
    /// The cluster key (signs the registrations' credentials).
    pub key: ClusterKey,
    /// The nodes.
    pub nodes: Vec<NodeSpec>,
    /// Heartbeat period (`slurmd --heartbeat-ms`, 2 s by default).
    pub heartbeat: Duration,
    /// Runtime (s, job time) of a job that names none.
    pub default_runtime_s: f64,
    /// Job seconds per real second (1: real time).
    pub time_scale: f64,
}

impl EmulatorOptions {
    /// The nodes of a cluster configuration with their configured inventory (GPUs, CPUs,
    /// `RealMemory`), optionally only those of `only` (a hostlist expression).
    ///
    /// Errors: a bad hostlist, or a name in it that the configuration does not have.
    pub fn nodes_of(conf: &flotilla_core::config::ClusterConfig, only: Option<&str>) -> Result<Vec<NodeSpec>> {
        let all: Vec<NodeSpec> = conf
            .nodes
            .iter()
            .map(|n| NodeSpec {
                name: n.name.clone(),
                gpus: n.gpus,
                cpus: n.cpus,
                mem_mib: n.real_memory_mib,
            })
            .collect();
        let Some(list) = only else { return Ok(all) };
        let names = flotilla_core::hostlist::expand(list).map_err(|e| anyhow::anyhow!("{list}: {e}"))?;
        let by_name: HashMap<&str, &NodeSpec> = all.iter().map(|n| (n.name.as_str(), n)).collect();
        names
            .iter()
            .map(|n| by_name.get(n.as_str()).map(|s| (*s).clone()).with_context(|| format!("node {n} is not in slurm.conf")))
            .collect()
    }
}

/// What an emulated node can be told to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// Lose the connection, reconnect after the pause (same boot epoch, jobs kept).
    Disconnect(Duration),
    /// Reboot: lose the connection, forget every job, register with the next boot epoch.
    Reboot,
    /// Power off: lose the connection and stay silent until [`Control::Up`].
    Down,
    /// Power on after [`Control::Down`]: a boot, so the next boot epoch and no jobs.
    Up,
    /// A GPU fails: the node reports a `health/nvidia` quarantine with this reason.
    FailGpu(String),
}

impl Control {
    /// Parses one control line: `disconnect NODE [SECONDS]`, `reboot NODE`, `down NODE`,
    /// `up NODE`, `fail NODE [REASON...]`. Returns the node (a hostlist expression) and the
    /// command.
    ///
    /// Errors: an unknown command, a missing node, a bad number.
    pub fn parse(line: &str) -> Result<(String, Control)> {
        let mut w = line.split_whitespace();
        let cmd = w.next().context("empty command")?;
        let node = w.next().with_context(|| format!("{cmd}: which node?"))?.to_string();
        let rest: Vec<&str> = w.collect();
        let c = match cmd {
            "disconnect" => {
                let secs: f64 = match rest.first() {
                    Some(s) => s.parse().with_context(|| format!("disconnect: bad seconds {s:?}"))?,
                    None => 1.0,
                };
                if !(0.0..=86_400.0).contains(&secs) {
                    bail!("disconnect: seconds must be within 0-86400");
                }
                Control::Disconnect(Duration::from_secs_f64(secs))
            }
            "reboot" => Control::Reboot,
            "down" => Control::Down,
            "up" => Control::Up,
            "fail" => Control::FailGpu(if rest.is_empty() {
                "Xid 79 on gpu 0: GPU has fallen off the bus".into()
            } else {
                rest.join(" ")
            }),
            other => bail!("unknown command {other:?} (disconnect, reboot, down, up, fail)"),
        };
        Ok((node, c))
    }
}

/// Counters of the whole emulator (all nodes).
#[derive(Debug, Default)]
pub struct EmuStats {
    /// Registrations answered `Registered`.
    pub registrations: AtomicU64,
    /// Registrations refused or failed (retried).
    pub refused: AtomicU64,
    /// Node sessions open now.
    pub sessions: AtomicU64,
    /// Job parts bound (distinct `(job, run)` per node).
    pub launches: AtomicU64,
    /// Batch-script ends reported.
    pub exits: AtomicU64,
    /// Heartbeats sent.
    pub heartbeats: AtomicU64,
    /// Frames from the controller.
    pub frames_in: AtomicU64,
    /// Batch-script ends with their real instants, while [`Emulator::record_ends`] is on.
    ends: std::sync::Mutex<Option<Vec<EndTiming>>>,
}

/// A batch script's run on its emulated node, in real time (kept while
/// [`Emulator::record_ends`] is on).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EndTiming {
    /// Job id.
    pub job_id: u64,
    /// Run (requeue count).
    pub run: u32,
    /// Its launch reached the node.
    pub launched: std::time::Instant,
    /// Its end was sent to the controller.
    pub ended: std::time::Instant,
    /// Signal that ended it (0: it ended by itself after its runtime).
    pub signal: i32,
    /// The end time the node reported ([`JobExit::end_time`], the emulator's job clock).
    pub end_time: i64,
}

impl EmuStats {
    fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    /// A counter's value.
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}

/// A running emulator: its nodes' tasks live on the tokio runtime it was started on.
#[derive(Debug)]
pub struct Emulator {
    controls: HashMap<String, mpsc::UnboundedSender<Control>>,
    stats: Arc<EmuStats>,
    shutdown: watch::Sender<bool>,
    names: Vec<String>,
}

impl Emulator {
    /// Starts one task per node on `rt`; they connect and register at once.
    pub fn start(opts: EmulatorOptions, rt: &tokio::runtime::Handle) -> Emulator {
        let stats = Arc::new(EmuStats::default());
        let (shutdown, sd_rx) = watch::channel(false);
        let base_epoch = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(1, |d| d.as_millis() as u64);
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".into());
        let shared = Arc::new(Shared {
            ctld: opts.ctld,
            key: opts.key,
            heartbeat: opts.heartbeat,
            default_runtime_s: opts.default_runtime_s,
            time_scale: if opts.time_scale > 0.0 { opts.time_scale } else { 1.0 },
            clock_origin: wall_now(),
            clock_start: Instant::now(),
            host,
            stats: stats.clone(),
        });
        let mut controls = HashMap::new();
        let mut names = Vec::new();
        for (i, spec) in opts.nodes.into_iter().enumerate() {
            let (tx, rx) = mpsc::unbounded_channel();
            controls.insert(spec.name.clone(), tx);
            names.push(spec.name.clone());
            let node = EmuNode {
                spec,
                index: i as u64,
                epoch: base_epoch,
                jobs: BTreeMap::new(),
                finished: Vec::new(),
                seen: std::collections::HashSet::new(),
                health_unsent: Vec::new(),
                ctld_epoch: 0,
            };
            rt.spawn(node.run(shared.clone(), rx, sd_rx.clone()));
        }
        Emulator {
            controls,
            stats,
            shutdown,
            names,
        }
    }

    /// The emulator's counters.
    pub fn stats(&self) -> &Arc<EmuStats> {
        &self.stats
    }

    /// The node names, in start order.
    pub fn nodes(&self) -> &[String] {
        &self.names
    }

    /// Tells the nodes named by `nodes` (a hostlist expression) to do `c`.
    ///
    /// Errors: a bad hostlist or an unknown node (nothing is sent then).
    pub fn control(&self, nodes: &str, c: Control) -> Result<usize> {
        let names = flotilla_core::hostlist::expand(nodes).map_err(|e| anyhow::anyhow!("{nodes}: {e}"))?;
        let txs: Vec<&mpsc::UnboundedSender<Control>> = names
            .iter()
            .map(|n| self.controls.get(n).with_context(|| format!("node {n} is not emulated here")))
            .collect::<Result<_>>()?;
        for tx in &txs {
            let _ = tx.send(c.clone());
        }
        Ok(txs.len())
    }

    /// From now on, keeps every batch script's [`EndTiming`] (for a trace replay; off by
    /// default, as a long-running emulator must not grow).
    pub fn record_ends(&self) {
        let mut e = self.stats.ends.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        e.get_or_insert_with(Vec::new);
    }

    /// The [`EndTiming`]s kept since [`Emulator::record_ends`] (taken: kept ones are not
    /// returned again).
    pub fn take_ends(&self) -> Vec<EndTiming> {
        let mut e = self.stats.ends.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        e.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Stops every node task (their connections close).
    pub fn stop(&self) {
        let _ = self.shutdown.send(true);
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
    }
}

#[derive(Debug)]
struct Shared {
    ctld: SocketAddr,
    key: ClusterKey,
    heartbeat: Duration,
    default_runtime_s: f64,
    time_scale: f64,
    /// The job clock: `clock_origin` (wall seconds) at `clock_start`, then `time_scale` job
    /// seconds per real second.
    clock_origin: i64,
    clock_start: Instant,
    host: String,
    stats: Arc<EmuStats>,
}

impl Shared {
    /// The job clock at `at` (s since the epoch, fractional).
    fn job_time(&self, at: Instant) -> f64 {
        self.clock_origin as f64 + at.saturating_duration_since(self.clock_start).as_secs_f64() * self.time_scale
    }
}

#[derive(Debug)]
struct EmuJob {
    gpu_mask: u64,
    batch: bool,
    exit_code: i32,
    /// When the batch script "ends" (only the batch host's part ends by itself).
    end_at: Option<Instant>,
    /// When its launch arrived.
    launched: Instant,
    /// The end it reports when it ends by itself: its start on the job clock plus its
    /// runtime (s since the epoch).
    end_stamp: i64,
}

#[derive(Debug)]
struct EmuNode {
    spec: NodeSpec,
    index: u64,
    epoch: u64,
    jobs: BTreeMap<(u64, u32), EmuJob>,
    finished: Vec<JobExit>,
    /// `(job, run)` bound during this boot (binds are idempotent).
    seen: std::collections::HashSet<(u64, u32)>,
    health_unsent: Vec<NodeToCtl>,
    /// The highest leader epoch seen (`Frame::ToNodeFenced`), as slurmd keeps it: a message
    /// of a lower epoch (a plain `ToNode` counts as 0) is refused. Kept in memory only.
    ctld_epoch: u64,
}

/// Why a session ended.
enum SessionEnd {
    /// The controller closed it or an I/O error: reconnect soon.
    Lost,
    /// Reconnect after this pause.
    Pause(Duration),
    /// Powered off until `Up`.
    Down,
    /// Shut down.
    Stop,
}

fn wall_now() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The value of `key` in the environment the job's script would get, after `sbatch
/// --export` (`SLURM_EXPORT_ENV`: `K=V` items set a value; `ALL` or no `--export` passes the
/// submitted environment; a bare name passes that variable; `NONE`/`NIL` pass nothing else),
/// as the node daemon applies it (`flotilla_slurmd::env::exported`).
pub fn job_env<'a>(bind: &'a Bind, key: &str) -> Option<&'a str> {
    let submitted = |k: &str| bind.environment.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.as_str());
    let Some(spec) = submitted("SLURM_EXPORT_ENV") else { return submitted(key) };
    let items: Vec<&str> = spec.split(',').map(str::trim).collect();
    if let Some(v) = items.iter().rev().find_map(|i| i.strip_prefix(key).and_then(|r| r.strip_prefix('='))) {
        return Some(v);
    }
    let all = items.first().is_some_and(|i| i.eq_ignore_ascii_case("ALL"));
    (all || items.contains(&key)).then(|| submitted(key)).flatten()
}

/// The local address node `index` connects from when the controller is on a loopback
/// address: its own address in 127.10.0.0/16 (`127.10.0.1` for the first), so that each
/// emulated node is a peer of its own as a real node is (the controller's connection pools
/// are per source address) and each has a full range of ephemeral ports. `None` otherwise.
fn source_addr(ctld: SocketAddr, index: u64) -> Option<SocketAddr> {
    match ctld {
        SocketAddr::V4(a) if a.ip().is_loopback() && index < 65_534 => {
            let n = index + 1;
            Some(SocketAddr::from(([127, 10, (n >> 8) as u8, (n & 0xff) as u8], 0)))
        }
        _ => None,
    }
}

/// The end a script started at `start` (job clock, s since the epoch) reports after
/// `runtime` s: their sum, in whole seconds (down).
fn end_stamp(start: f64, runtime: f64) -> i64 {
    (start + runtime.clamp(0.0, 1e12)).floor() as i64
}

/// A job's runtime (s, job time) from its environment or script, else `default`.
pub fn runtime_of(bind: &Bind, default: f64) -> f64 {
    if let Some(v) = job_env(bind, RUNTIME_ENV).and_then(|v| v.trim().parse::<f64>().ok()) {
        return v.max(0.0);
    }
    for line in bind.script.lines() {
        let mut w = line.split_whitespace();
        if w.next() == Some("sleep") {
            if let Some(v) = w.next().and_then(|s| s.parse::<f64>().ok()) {
                return v.max(0.0);
            }
        }
    }
    default
}

fn exit_code_of(bind: &Bind) -> i32 {
    job_env(bind, EXIT_ENV).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

/// A cancel-safe frame reader over one half of a TCP stream.
struct FrameReader {
    rd: OwnedReadHalf,
    buf: Vec<u8>,
}

impl FrameReader {
    /// The next frame; `Err` when the stream closed or the framing broke.
    async fn next(&mut self) -> Result<Frame> {
        loop {
            if let Some((f, used)) = flotilla_proto::decode_frame(&self.buf)? {
                self.buf.drain(..used);
                return Ok(f);
            }
            self.buf.reserve(4096);
            if self.rd.read_buf(&mut self.buf).await? == 0 {
                bail!("connection closed");
            }
        }
    }
}

async fn write(wr: &mut OwnedWriteHalf, f: &Frame) -> Result<()> {
    let bytes = flotilla_proto::encode_frame(f)?;
    wr.write_all(&bytes).await?;
    Ok(())
}

impl EmuNode {
    fn running(&self) -> Vec<NodeJob> {
        self.jobs
            .iter()
            .map(|(&(job_id, run), j)| NodeJob {
                job_id,
                run,
                gpu_mask: j.gpu_mask,
            })
            .collect()
    }

    /// A full heartbeat: the boot epoch, the jobs running here, the ends not acknowledged.
    fn heartbeat(&self) -> NodeToCtl {
        NodeToCtl::Heartbeat {
            boot_epoch: self.epoch,
            running: self.running(),
            finished: self.finished.clone(),
        }
    }

    /// A boot: the next epoch, nothing running, nothing remembered.
    fn reboot(&mut self) {
        self.epoch += 1;
        self.jobs.clear();
        self.finished.clear();
        self.seen.clear();
    }

    /// A pause that spreads reconnections of many nodes over `[base, 2·base)`.
    fn jitter(&self, base: Duration) -> Duration {
        let h = self.index.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54; // 0..1023
        base + base.mul_f64(h as f64 / 1024.0)
    }

    async fn run(mut self, sh: Arc<Shared>, mut ctl: mpsc::UnboundedReceiver<Control>, mut sd: watch::Receiver<bool>) {
        let mut pause = Duration::ZERO;
        loop {
            if !pause.is_zero() {
                let wake = Instant::now() + pause;
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep_until(wake) => break,
                        c = ctl.recv() => match c {
                            Some(Control::Reboot | Control::Up) => { self.reboot(); break }
                            Some(Control::Down) => { self.power_off(&mut ctl, &mut sd).await; if *sd.borrow() { return } break }
                            Some(Control::FailGpu(r)) => self.queue_health(r),
                            Some(Control::Disconnect(_)) => {}
                            None => return,
                        },
                        _ = sd.changed() => return,
                    }
                }
            }
            if *sd.borrow() {
                return;
            }
            let (rd, wr) = match self.connect(&sh).await {
                Ok(s) => s,
                Err(_) => {
                    EmuStats::inc(&sh.stats.refused);
                    pause = self.jitter(Duration::from_millis(500));
                    continue;
                }
            };
            sh.stats.sessions.fetch_add(1, Ordering::Relaxed);
            let end = self.session(&sh, rd, wr, &mut ctl, &mut sd).await;
            sh.stats.sessions.fetch_sub(1, Ordering::Relaxed);
            pause = match end {
                SessionEnd::Lost => self.jitter(Duration::from_millis(200)),
                SessionEnd::Pause(d) => d,
                SessionEnd::Down => {
                    self.power_off(&mut ctl, &mut sd).await;
                    Duration::ZERO
                }
                SessionEnd::Stop => return,
            };
        }
    }

    /// Silent until `Up` (then a boot) or shutdown.
    async fn power_off(&mut self, ctl: &mut mpsc::UnboundedReceiver<Control>, sd: &mut watch::Receiver<bool>) {
        loop {
            tokio::select! {
                c = ctl.recv() => match c {
                    Some(Control::Up | Control::Reboot) => { self.reboot(); return }
                    Some(_) => {}
                    None => return,
                },
                _ = sd.changed() => return,
            }
        }
    }

    fn queue_health(&mut self, reason: String) {
        self.health_unsent.push(NodeToCtl::Health {
            verdict: HealthLevel::Quarantine,
            reason,
            events: Vec::new(),
        });
    }

    /// Connects, shakes hands and registers, as `slurmd` does.
    async fn connect(&mut self, sh: &Shared) -> Result<(FrameReader, OwnedWriteHalf)> {
        let sock = if sh.ctld.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        if let Some(src) = source_addr(sh.ctld, self.index) {
            sock.bind(src)?;
        }
        let s = tokio::time::timeout(Duration::from_secs(10), sock.connect(sh.ctld)).await??;
        let _ = s.set_nodelay(true);
        let (rd, mut wr) = s.into_split();
        let mut rd = FrameReader { rd, buf: Vec::new() };
        let step = Duration::from_secs(30);
        write(&mut wr, &Frame::Hello(Hello::current(Role::NodeDaemon))).await?;
        match tokio::time::timeout(step, rd.next()).await?? {
            Frame::HelloOk { .. } => {}
            other => bail!("handshake refused: {other:?}"),
        }
        let reg = Register {
            node: self.spec.name.clone(),
            boot_epoch: self.epoch,
            gpus: self.spec.gpus,
            cpus: self.spec.cpus,
            mem_mib: self.spec.mem_mib,
            running: self.running(),
            finished: self.finished.clone(),
        };
        let cred = sh.key.sign(0, 0, &sh.host, wall_now().max(0) as u64, 300);
        write(&mut wr, &Frame::Request { id: 1, auth: Some(cred), body: Request::Register(reg) }).await?;
        match tokio::time::timeout(step, rd.next()).await?? {
            Frame::Response { body: Response::Registered, .. } => {
                EmuStats::inc(&sh.stats.registrations);
                Ok((rd, wr))
            }
            other => bail!("registration refused: {other:?}"),
        }
    }

    fn next_end(&self) -> Option<Instant> {
        self.jobs.values().filter_map(|j| j.end_at).min()
    }

    /// One registered session, until it is lost or the node is told to leave it.
    async fn session(
        &mut self,
        sh: &Shared,
        mut rd: FrameReader,
        mut wr: OwnedWriteHalf,
        ctl: &mut mpsc::UnboundedReceiver<Control>,
        sd: &mut watch::Receiver<bool>,
    ) -> SessionEnd {
        let mut hb = tokio::time::interval_at(Instant::now() + sh.heartbeat, sh.heartbeat);
        hb.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            for m in std::mem::take(&mut self.health_unsent) {
                if write(&mut wr, &Frame::FromNode(m)).await.is_err() {
                    return SessionEnd::Lost;
                }
            }
            let next_end = self.next_end();
            let mut out: Vec<NodeToCtl> = Vec::new();
            tokio::select! {
                f = rd.next() => match f {
                    Ok(Frame::ToNode(m)) => {
                        EmuStats::inc(&sh.stats.frames_in);
                        if self.ctld_epoch == 0 {
                            self.handle(sh, m, &mut out);
                        }
                    }
                    Ok(Frame::ToNodeFenced { epoch, msg }) => {
                        EmuStats::inc(&sh.stats.frames_in);
                        if epoch >= self.ctld_epoch {
                            self.ctld_epoch = epoch;
                            self.handle(sh, msg, &mut out);
                        }
                    }
                    Ok(_) => {}
                    Err(_) => return SessionEnd::Lost,
                },
                _ = hb.tick() => {
                    EmuStats::inc(&sh.stats.heartbeats);
                    out.push(NodeToCtl::Heartbeat {
                        boot_epoch: self.epoch,
                        running: self.running(),
                        finished: self.finished.clone(),
                    });
                }
                _ = async { tokio::time::sleep_until(next_end.expect("guarded")).await }, if next_end.is_some() => {
                    self.end_due(sh, &mut out);
                }
                c = ctl.recv() => match c {
                    Some(Control::Disconnect(d)) => return SessionEnd::Pause(d),
                    Some(Control::Reboot) => { self.reboot(); return SessionEnd::Pause(Duration::ZERO) }
                    Some(Control::Down) => return SessionEnd::Down,
                    Some(Control::Up) => {}
                    Some(Control::FailGpu(r)) => self.queue_health(r),
                    None => return SessionEnd::Stop,
                },
                _ = sd.changed() => return SessionEnd::Stop,
            }
            for m in out {
                if write(&mut wr, &Frame::FromNode(m)).await.is_err() {
                    return SessionEnd::Lost;
                }
            }
        }
    }

    /// Reports the batch scripts whose runtime has passed.
    fn end_due(&mut self, sh: &Shared, out: &mut Vec<NodeToCtl>) {
        let now = Instant::now();
        let due: Vec<(u64, u32)> = self.jobs.iter().filter(|(_, j)| j.end_at.is_some_and(|e| e <= now)).map(|(k, _)| *k).collect();
        for k in due {
            let j = self.jobs.remove(&k).expect("present");
            self.end(sh, k, &j, j.exit_code, 0, out);
        }
    }

    /// The batch script of `job` ends with `exit_code` or `signal` (0: by itself, at its
    /// `end_stamp`; else now on the job clock).
    fn end(&mut self, sh: &Shared, (job_id, run): (u64, u32), job: &EmuJob, exit_code: i32, signal: i32, out: &mut Vec<NodeToCtl>) {
        let now = Instant::now();
        let end_time = if signal == 0 { job.end_stamp } else { sh.job_time(now).floor() as i64 };
        let exit = JobExit {
            job_id,
            run,
            exit_code,
            signal,
            oom: false,
            end_time,
        };
        if let Some(v) = sh.stats.ends.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
            v.push(EndTiming {
                job_id,
                run,
                launched: job.launched.into_std(),
                ended: now.into_std(),
                signal,
                end_time,
            });
        }
        EmuStats::inc(&sh.stats.exits);
        self.finished.push(exit.clone());
        out.push(NodeToCtl::JobExited(exit));
    }

    fn handle(&mut self, sh: &Shared, m: CtlToNode, out: &mut Vec<NodeToCtl>) {
        match m {
            CtlToNode::Bind(b) | CtlToNode::Launch { bind: b, .. } => self.launch(sh, &b),
            CtlToNode::Signal { job_id, signal, .. } => {
                if signal == SIGTERM || signal == SIGKILL {
                    self.stop_job(sh, job_id, signal, out);
                }
            }
            CtlToNode::Kill { job_id } => {
                let batch_here = self.jobs.iter().any(|(k, j)| k.0 == job_id && j.batch);
                self.stop_job(sh, job_id, SIGKILL, out);
                if !batch_here {
                    // The release reported at once (Slurm's epilog-complete message), not at
                    // the next heartbeat: at a scaled time a heartbeat period is hours of
                    // the controller's time that the job's other nodes would stay allocated.
                    EmuStats::inc(&sh.stats.heartbeats);
                    out.push(self.heartbeat());
                }
            }
            CtlToNode::AckExits { job_ids } => self.finished.retain(|e| !job_ids.contains(&e.job_id)),
            CtlToNode::LaunchStep(s) => {
                tracing_free_warn(&format!(
                    "{}: step {}.{} not launched: an emulated node runs no processes",
                    self.spec.name, s.layout.job_id, s.layout.step_id
                ));
            }
            // An emulated node runs no processes: no membership file to write. It keeps its
            // session while the controller process lives (no liveness timeout).
            CtlToNode::StopNotice { .. }
            | CtlToNode::SignalSteps { .. }
            | CtlToNode::SignalStep { .. }
            | CtlToNode::Membership { .. }
            | CtlToNode::Keepalive => {}
        }
    }

    fn launch(&mut self, sh: &Shared, b: &Bind) {
        let key = (b.job_id, b.run);
        if !self.seen.insert(key) {
            return;
        }
        EmuStats::inc(&sh.stats.launches);
        let now = Instant::now();
        let runtime = runtime_of(b, sh.default_runtime_s);
        let end_at = b.batch_host.then(|| now + Duration::from_secs_f64((runtime / sh.time_scale).min(1e9)));
        self.jobs.insert(key, EmuJob {
            gpu_mask: b.gpu_mask,
            batch: b.batch_host,
            exit_code: exit_code_of(b),
            end_at,
            launched: now,
            end_stamp: end_stamp(sh.job_time(now), runtime),
        });
    }

    /// The job's processes end by `signal`: the batch host reports it, other nodes forget.
    fn stop_job(&mut self, sh: &Shared, job_id: u64, signal: i32, out: &mut Vec<NodeToCtl>) {
        let keys: Vec<(u64, u32)> = self.jobs.keys().filter(|k| k.0 == job_id).copied().collect();
        for k in keys {
            let j = self.jobs.remove(&k).expect("present");
            if j.batch {
                self.end(sh, k, &j, 0, signal, out);
            }
        }
    }
}

/// The admin command has no tracing subscriber: warnings go to stderr.
fn tracing_free_warn(msg: &str) {
    eprintln!("flotilla emulate: {msg}");
}

/// Serves control lines on the Unix socket `path` (created, mode 0600; an old one replaced):
/// each connection sends one line ([`Control::parse`]) and gets `ok N` (the nodes told) or
/// `error: ...` back. Runs until the emulator stops.
///
/// Errors: the socket cannot be bound.
pub async fn serve_control(path: &Path, emu: Arc<Emulator>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(path);
    let l = tokio::net::UnixListener::bind(path).with_context(|| format!("control socket {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let mut sd = emu.shutdown.subscribe();
    loop {
        let (mut s, _) = tokio::select! {
            a = l.accept() => a?,
            _ = sd.changed() => return Ok(()),
        };
        let emu = emu.clone();
        tokio::spawn(async move {
            let mut line = Vec::new();
            let mut b = [0u8; 256];
            while !line.contains(&b'\n') && line.len() < 4096 {
                match s.read(&mut b).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => line.extend_from_slice(&b[..n]),
                }
            }
            let text = String::from_utf8_lossy(&line);
            let answer = match Control::parse(text.trim()).and_then(|(n, c)| emu.control(&n, c)) {
                Ok(n) => format!("ok {n}\n"),
                Err(e) => format!("error: {e:#}\n"),
            };
            let _ = s.write_all(answer.as_bytes()).await;
        });
    }
}

/// Sends one control line to the emulator serving `socket`; returns its answer.
///
/// Errors: the socket cannot be reached, or the emulator answered an error.
pub fn send_control(socket: &Path, line: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).with_context(|| format!("emulator control socket {}", socket.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(format!("{}\n", line.trim()).as_bytes())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let answer = answer.trim().to_string();
    match answer.strip_prefix("error: ") {
        Some(e) => bail!("{e}"),
        None => Ok(answer),
    }
}

/// Raises this process's open-file limit to its hard limit (each emulated node holds one
/// socket). Returns the new soft limit.
pub fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) => {
            if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(script: &str, env: &[(&str, &str)]) -> Bind {
        Bind {
            job_id: 1,
            run: 0,
            array: None,
            name: "j".into(),
            gpu_mask: 1,
            cpus: 1,
            mem_mib: 1,
            batch_host: true,
            nodes: "n1".into(),
            uid: 0,
            gid: 0,
            user: "root".into(),
            script: script.into(),
            argv: Vec::new(),
            environment: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            work_dir: "/".into(),
            stdout: None,
            stderr: None,
            time_limit_s: None,
            partition: "batch".into(),
        }
    }

    fn shared(scale: f64) -> Shared {
        Shared {
            ctld: "127.0.0.1:1".parse().unwrap(),
            key: ClusterKey::from_bytes(&[7; 32]).unwrap(),
            heartbeat: Duration::from_secs(1),
            default_runtime_s: 1.0,
            time_scale: scale,
            clock_origin: 1_000_000,
            clock_start: Instant::now(),
            host: "h".into(),
            stats: Arc::new(EmuStats::default()),
        }
    }

    fn node() -> EmuNode {
        EmuNode {
            spec: NodeSpec {
                name: "n1".into(),
                gpus: 8,
                cpus: 96,
                mem_mib: 1,
            },
            index: 0,
            epoch: 5,
            jobs: BTreeMap::new(),
            finished: Vec::new(),
            seen: Default::default(),
            health_unsent: Vec::new(),
            ctld_epoch: 0,
        }
    }

    #[test]
    fn a_killed_part_is_released_at_once_and_ends_carry_the_job_clock() {
        let sh = shared(100.0);
        *sh.stats.ends.lock().unwrap() = Some(Vec::new());
        let mut n = node();
        // Job 1's batch script runs here (1 h), job 2 has its second node here.
        n.launch(&sh, &bind("#!/bin/sh\nsleep 3600\n", &[]));
        let mut b2 = bind("#!/bin/sh\nsleep 60\n", &[]);
        b2.job_id = 2;
        b2.batch_host = false;
        n.launch(&sh, &b2);
        let mut out = Vec::new();
        n.handle(&sh, CtlToNode::Kill { job_id: 2 }, &mut out);
        match out.as_slice() {
            [NodeToCtl::Heartbeat { boot_epoch: 5, running, finished }] => {
                assert_eq!(running.iter().map(|j| j.job_id).collect::<Vec<_>>(), vec![1]);
                assert!(finished.is_empty());
            }
            other => panic!("a heartbeat without job 2 at once, not {other:?}"),
        }
        // Job 1 ends by itself: at its start on the job clock plus 3,600 s exactly.
        let launched = n.jobs[&(1, 0)].launched;
        n.jobs.get_mut(&(1, 0)).unwrap().end_at = Some(Instant::now());
        out.clear();
        n.end_due(&sh, &mut out);
        let want = (sh.job_time(launched) + 3_600.0).floor() as i64;
        match out.as_slice() {
            [NodeToCtl::JobExited(e)] => assert_eq!((e.job_id, e.signal, e.end_time), (1, 0, want)),
            other => panic!("{other:?}"),
        }
        // A batch script killed: its end (signal 9) at the kill's time, no extra heartbeat.
        let mut b3 = bind("#!/bin/sh\nsleep 3600\n", &[]);
        b3.job_id = 3;
        n.launch(&sh, &b3);
        out.clear();
        n.handle(&sh, CtlToNode::Kill { job_id: 3 }, &mut out);
        match out.as_slice() {
            [NodeToCtl::JobExited(e)] => {
                assert_eq!((e.job_id, e.signal), (3, 9));
                assert!(e.end_time >= 1_000_000 && e.end_time < want, "{}", e.end_time);
            }
            other => panic!("{other:?}"),
        }
        let ends: Vec<(u64, i32)> = sh.stats.ends.lock().unwrap().as_ref().unwrap().iter().map(|e| (e.job_id, e.signal)).collect();
        assert_eq!(ends, vec![(1, 0), (3, 9)]);
    }

    #[test]
    fn a_script_reports_its_start_plus_its_runtime_on_the_job_clock() {
        assert_eq!(end_stamp(1_000.7, 30.0), 1_030);
        assert_eq!(end_stamp(1_000.0, 2.5), 1_002);
        assert_eq!(end_stamp(1_000.2, 0.0), 1_000);
        assert_eq!(end_stamp(1_000.0, -5.0), 1_000, "a negative runtime ends at the start");
    }

    #[test]
    fn runtime_comes_from_the_environment_then_the_script_then_the_default() {
        assert_eq!(runtime_of(&bind("#!/bin/sh\nsleep 30\n", &[(RUNTIME_ENV, "2.5")]), 60.0), 2.5);
        assert_eq!(runtime_of(&bind("#!/bin/sh\necho hi\n  sleep 30 \n", &[]), 60.0), 30.0);
        assert_eq!(runtime_of(&bind("#!/bin/sh\nsleep forever\n", &[(RUNTIME_ENV, "x")]), 60.0), 60.0);
        assert_eq!(exit_code_of(&bind("", &[(EXIT_ENV, "3")])), 3);
        assert_eq!(exit_code_of(&bind("", &[])), 0);
        // sbatch --export: values in SLURM_EXPORT_ENV win; NONE hides the submitted ones.
        let b = bind("", &[(RUNTIME_ENV, "9"), ("SLURM_EXPORT_ENV", "ALL,FLOTILLA_EMULATE_RUNTIME=1.5")]);
        assert_eq!(runtime_of(&b, 60.0), 1.5);
        assert_eq!(runtime_of(&bind("", &[(RUNTIME_ENV, "9"), ("SLURM_EXPORT_ENV", "NONE")]), 60.0), 60.0);
        assert_eq!(runtime_of(&bind("", &[(RUNTIME_ENV, "9"), ("SLURM_EXPORT_ENV", "FLOTILLA_EMULATE_RUNTIME")]), 60.0), 9.0);
        assert_eq!(runtime_of(&bind("", &[(RUNTIME_ENV, "9"), ("SLURM_EXPORT_ENV", "ALL")]), 60.0), 9.0);
    }

    #[test]
    fn control_lines_parse() {
        assert_eq!(Control::parse("reboot gpu001").unwrap(), ("gpu001".into(), Control::Reboot));
        assert_eq!(
            Control::parse("disconnect gpu[001-004] 2.5").unwrap(),
            ("gpu[001-004]".into(), Control::Disconnect(Duration::from_millis(2500)))
        );
        assert_eq!(
            Control::parse("fail gpu002 Xid 48 on gpu 1").unwrap(),
            ("gpu002".into(), Control::FailGpu("Xid 48 on gpu 1".into()))
        );
        assert!(Control::parse("explode gpu001").is_err());
        assert!(Control::parse("reboot").is_err());
        assert!(Control::parse("disconnect gpu001 -1").is_err());
    }
}
