//! The node daemon's owner loop: one thread owns the node's state (its jobs, their unreported
//! ends, the controller session) and handles a closed set of events; a reader thread per
//! controller session forwards what the controller pushes.
//!
//! Session: connect to the controller, hand-shake, `Register` (node name, boot epoch, GPU
//! inventory, CPUs, memory, the jobs it runs, the ends not yet acknowledged), then receive
//! `Launch`/`Bind`, `StopNotice`, `Signal`, `Kill`, `AckExits`, and send `JobExited`, `CheckpointAck` and a
//! full `Heartbeat` periodically (the controller's reconciler is level-triggered). A lost
//! session is re-opened forever, with the same epoch.
//!
//! GPU health: a health thread polls the health source (`--health`), applies the
//! `health/nvidia` policy to each poll and hands the owner its verdicts; the owner acts once
//! per reason: a quarantine is sent to the controller as `Health` (kept until a session takes
//! it), a warning is logged.

use flotilla_slurmd::env::{self, NodeFacts, UserInfo};
use flotilla_slurmd::pattern::{self, PatternVars};
use flotilla_slurmd::spool::{self, ExitRecord, JobDir, JobFile};
use flotilla_slurmd::step_launch::{self, StepRegistry};
use flotilla_slurmd::stepd;
use flotilla_proto::client::{Client, Stream};
use flotilla_core::health::{HealthEvent, HealthVerdict};
use flotilla_proto::{
    Bind, ClusterKey, CtlToNode, Frame, HealthLevel, JobExit, LaunchDetails, NodeJob, NodeToCtl, Register, Request,
    Response, Role, StepUsage,
};
use flotilla_slurmd::health::HealthSource;
use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};
use tracing::{debug, error, info, warn};

/// How the node daemon is set up.
#[derive(Debug)]
pub struct Options {
    /// Node name (`-N`).
    pub node: String,
    /// Path of slurm.conf (for `SLURM_CONF` and `FLOTILLA_CONF` of jobs).
    pub conf_path: PathBuf,
    /// The cluster configuration.
    pub conf: flotilla_core::config::ClusterConfig,
    /// Spool directory, `%n` expanded.
    pub spool: PathBuf,
    /// Cluster key.
    pub key: ClusterKey,
    /// Controller address (the first `SlurmctldHost=`, or `--ctld`).
    pub ctld: SocketAddr,
    /// The backup controllers' addresses (the other `SlurmctldHost=` lines at
    /// `SlurmctldPort`), tried in order after `ctld`.
    pub backups: Vec<SocketAddr>,
    /// GPUs of the node (from `--fake-gpus` or gres.conf).
    pub gpus: u32,
    /// CPUs of the node.
    pub cpus: u32,
    /// Memory of the node (MiB).
    pub mem_mib: u64,
    /// Kernel boot id (changes at each boot).
    pub boot_id: String,
    /// Heartbeat period.
    pub heartbeat: Duration,
    /// The `slurmd` executable (re-executed as `slurmd --stepd DIR`).
    pub self_exe: PathBuf,
    /// Confinement to pass to supervisors (`--cgroup`), as given.
    pub cgroup: String,
    /// The jobs' cgroups on this node (created at bind, removed at the job's end here).
    pub cgroups: std::sync::Arc<flotilla_slurmd::jobcg::NodeCgroups>,
    /// GPU health source (`--health`); `None`: no health loop.
    pub health: Option<Box<dyn HealthSource>>,
    /// How long one health poll waits for events (NVML XID wait; the fake sleeps).
    pub health_poll: Duration,
}

/// What the owner handles.
#[derive(Debug)]
enum Event {
    /// The controller pushed a message on session `gen`, from lease epoch `.1` (0: a plain
    /// `Frame::ToNode`).
    Ctl(u64, u64, CtlToNode),
    /// Session `gen` closed.
    Closed(u64),
    /// Session `gen`'s controller sent keepalives and then nothing for [`Daemon::liveness`].
    Silent(u64),
    /// The health loop's verdict on one poll (never `Ignore`), with the poll's events.
    Health(HealthVerdict, Vec<HealthEvent>),
    /// A batch supervisor this daemon started has exited (its waiter thread reaped it): the
    /// loop polls the jobs at once, so a job's end is reported without waiting for the
    /// loop's 50 ms timeout (Slurm's slurmstepd reports its end itself).
    SupervisorExited,
}

#[derive(Debug)]
struct Entry {
    gpu_mask: u64,
    batch: bool,
    dir: JobDir,
    /// When the last SIGTERM went to the job (a stop: time limit, preemption, cancel).
    stop_at: Option<SystemTime>,
    ack_reported: bool,
    /// The batch supervisor's pid, when this daemon started it (an unconfined job's usage
    /// poll reads its descendants).
    supervisor: Option<i32>,
}

/// The node daemon's state, owned by one thread.
#[derive(Debug)]
pub struct Daemon {
    /// `slurmd.lock` in the spool, held for the daemon's life.
    _spool_lock: nix::fcntl::Flock<std::fs::File>,
    opts: Options,
    epoch: u64,
    /// The highest controller lease epoch seen ([`spool::CtldFence`]).
    fence: spool::CtldFence,
    /// Controller messages refused for an epoch below it.
    refused: u64,
    facts: NodeFacts,
    host: String,
    jobs: BTreeMap<(u64, u32), Entry>,
    finished: Vec<JobExit>,
    seen: HashSet<(u64, u32)>,
    /// The pid of the last batch supervisor started (each is reaped by its own waiter
    /// thread, which sends [`Event::SupervisorExited`]).
    last_supervisor: Option<i32>,
    client: Option<Client>,
    gen: u64,
    /// Which controller ([`Options::ctld`], then [`Options::backups`]) to try next: the one
    /// that led last, until it cannot be reached or answers as a standby.
    ctld_at: usize,
    next_connect: Instant,
    last_hb: Instant,
    tx: mpsc::Sender<Event>,
    rx: mpsc::Receiver<Event>,
    /// Health reasons already seen (each verdict is acted on once per reason).
    health_seen: HashSet<String>,
    /// Quarantine reports not yet handed to a controller session.
    health_unsent: Vec<NodeToCtl>,
    /// Tasks of `srun` steps running here.
    steps: StepRegistry,
    /// Usage reports not yet sent ([`flotilla_slurmd::usage`]): steps' ends and polls.
    usage: flotilla_slurmd::usage::Outbox,
    /// `JobAcctGatherFrequency` (`None`: 0, no polls), and the last poll.
    usage_every: Option<Duration>,
    last_usage: Instant,
}

fn short_hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .map(|h| h.split('.').next().unwrap_or_default().to_string())
        .unwrap_or_else(|| "localhost".into())
}

/// Takes the spool's lock (`<spool>/slurmd.lock`, `flock`), which the daemon holds for its
/// whole life, so that two daemons never share one spool (each would take the other's jobs
/// for ones a previous boot left and kill them). The file is opened close-on-exec: the
/// supervisors, which outlive a daemon, never hold it.
///
/// Errors: another daemon holds it ("another slurmd is running on spool directory ..."), or
/// the spool or the file cannot be created.
fn lock_spool(spool: &Path) -> anyhow::Result<nix::fcntl::Flock<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt;
    // The spool and the directories created above it are 0755 (the daemon's umask is
    // 0077): users reach their job's directory below it by name.
    let missing: Vec<&Path> = spool.ancestors().take_while(|p| !p.as_os_str().is_empty() && !p.exists()).collect();
    for d in missing.into_iter().rev() {
        std::fs::create_dir(d)
            .and_then(|()| std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)))
            .or_else(|e| if d.is_dir() { Ok(()) } else { Err(e) })
            .map_err(|e| anyhow::anyhow!("spool directory {}: {e}", d.display()))?;
    }
    let path = spool.join("slurmd.lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(spool::FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
        if e == nix::errno::Errno::EWOULDBLOCK {
            anyhow::anyhow!(
                "another slurmd is running on spool directory {} (it holds {}): exiting",
                spool.display(),
                path.display()
            )
        } else {
            anyhow::anyhow!("lock {}: {e}", path.display())
        }
    })
}

fn now_s() -> i64 {
    stepd::wall_now()
}

impl Daemon {
    /// Prepares the spool: computes the boot epoch; after a reboot (or a new spool) kills
    /// whatever an older boot left and forgets its jobs, else re-adopts the jobs found.
    ///
    /// Errors: another daemon holds the spool's lock (`slurmd.lock`), the spool cannot be
    /// created or read.
    pub fn new(opts: Options) -> anyhow::Result<Daemon> {
        let spool_lock = lock_spool(&opts.spool)?;
        let jobs = opts.spool.join("jobs");
        std::fs::create_dir_all(&jobs)?;
        // Users reach their own job's directory by name (its script, `user/`), nothing more.
        std::fs::set_permissions(&opts.spool, std::fs::Permissions::from_mode(0o755))?;
        std::fs::set_permissions(&jobs, std::fs::Permissions::from_mode(0o711))?;
        let (epoch, bumped) = spool::boot_epoch(&opts.spool, &opts.boot_id)?;
        let fence = spool::CtldFence::load(&opts.spool)?;
        let (tx, rx) = mpsc::channel();
        let facts = NodeFacts {
            node: opts.node.clone(),
            cluster_name: opts.conf.cluster_name.clone(),
            conf_path: opts.conf_path.to_string_lossy().into_owned(),
            ctld_host: opts.ctld.ip().to_string(),
            ctld_port: opts.ctld.port(),
            topology_addr: env::topology_addr(&opts.conf, &opts.node),
        };
        let steps = StepRegistry::with_cgroups(opts.cgroups.clone());
        let freq = flotilla_slurmd::usage::gather_frequency(&opts.conf.raw);
        let mut d = Daemon {
            _spool_lock: spool_lock,
            opts,
            epoch,
            fence,
            refused: 0,
            facts,
            host: short_hostname(),
            jobs: BTreeMap::new(),
            finished: Vec::new(),
            seen: HashSet::new(),
            last_supervisor: None,
            client: None,
            gen: 0,
            ctld_at: 0,
            next_connect: Instant::now(),
            last_hb: Instant::now(),
            tx,
            rx,
            health_seen: HashSet::new(),
            health_unsent: Vec::new(),
            usage: steps.usage_outbox(),
            steps,
            usage_every: (freq > 0).then(|| Duration::from_secs(freq)),
            last_usage: Instant::now(),
        };
        if bumped {
            info!(epoch, "new boot epoch: forgetting the jobs of the previous boot");
            d.purge_spool();
        } else {
            info!(epoch, "same boot: re-adopting jobs");
            d.recover();
        }
        // Cgroups of jobs not re-adopted (step tasks of an earlier daemon included) go.
        d.opts.cgroups.sweep();
        Ok(d)
    }

    /// The boot epoch registered with.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// How long a controller session may stay silent (no message of any kind) once its
    /// controller has sent a keepalive ([`CtlToNode::Keepalive`], sent while its lease is
    /// fresh when a keepalive period passed without another message): slurm.conf's rule, the
    /// same the controller derives its period from
    /// ([`flotilla_core::config::ClusterConfig::keepalive`]). With backups one and a half
    /// `SlurmctldTimeout`, long enough for a standby to have taken the lapsed lease when the
    /// node moves on to it; with one controller `SlurmdTimeout` (three of Slurm's ping
    /// periods), after which the node reconnects.
    fn liveness(&self) -> Duration {
        self.opts.conf.keepalive().silence
    }

    fn job_dirs(&self) -> Vec<(u64, u32, bool, PathBuf)> {
        let mut v = Vec::new();
        if let Ok(rd) = std::fs::read_dir(self.opts.spool.join("jobs")) {
            for e in rd.flatten() {
                if let Some((j, r, done)) = e.file_name().to_str().and_then(spool::parse_name) {
                    v.push((j, r, done, e.path()));
                }
            }
        }
        v.sort();
        v
    }

    /// Kills every job a previous boot left (a real reboot leaves none; a changed boot id
    /// in tests does) and empties the spool's job directory.
    fn purge_spool(&mut self) {
        let dirs = self.job_dirs();
        for (j, _, done, path) in &dirs {
            let dir = JobDir(path.clone());
            if !done && stepd::alive(&dir) {
                warn!(job = j, "killing a job left by the previous boot");
                let _ = stepd::send_command(&dir, "kill");
            }
        }
        let t0 = Instant::now();
        while dirs.iter().any(|(_, _, done, p)| !done && stepd::alive(&JobDir(p.clone()))) && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        for (_, _, _, p) in dirs {
            let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        }
    }

    /// Re-adopts the jobs of this boot found in the spool.
    fn recover(&mut self) {
        for (job_id, run, done, path) in self.job_dirs() {
            if done {
                self.seen.insert((job_id, run));
                continue;
            }
            let dir = JobDir(path);
            let jf: JobFile = match spool::read_json(&dir.job_file()) {
                Ok(Some(j)) => j,
                Ok(None) => {
                    warn!(job = job_id, "job directory without job.json: removing it");
                    let _ = std::fs::remove_dir_all(&dir.0);
                    continue;
                }
                Err(e) => {
                    error!("{e}: removing the job directory");
                    let _ = std::fs::remove_dir_all(&dir.0);
                    continue;
                }
            };
            // An interactive allocation (salloc) runs no supervisor: nothing to wait for.
            let batch = jf.bind.batch_host && !jf.details.as_ref().is_some_and(|d| d.interactive);
            if batch && !dir.exit().exists() && !dir.lock().exists() {
                // The daemon stopped between writing job.json and starting the supervisor
                // (or the supervisor is just starting): give it a moment, else the job was
                // never launched and the controller's next bind launches it.
                let t0 = Instant::now();
                while !stepd::alive(&dir) && t0.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if !stepd::alive(&dir) && !dir.exit().exists() {
                    warn!(job = job_id, run, "job was never launched: forgetting it");
                    let _ = std::fs::remove_dir_all(&dir.0);
                    continue;
                }
            }
            self.seen.insert((job_id, run));
            // The job's cgroup outlived the daemon: re-open it (or re-create it).
            if let Err(e) = self.opts.cgroups.open_job(job_id, run, jf.bind.gpu_mask, jf.bind.mem_mib) {
                error!(job = job_id, "re-adopted job: its cgroup: {e}");
            }
            info!(job = job_id, run, batch, "re-adopted");
            self.jobs.insert((job_id, run), Entry {
                gpu_mask: jf.bind.gpu_mask,
                batch,
                dir,
                stop_at: None,
                ack_reported: false,
                supervisor: None,
            });
        }
        // Ends recorded while the daemon was away are picked up by the first poll.
    }

    fn running(&self) -> Vec<NodeJob> {
        self.jobs
            .iter()
            .map(|(&(job_id, run), e)| NodeJob {
                job_id,
                run,
                gpu_mask: e.gpu_mask,
            })
            .collect()
    }

    fn send(&mut self, msg: NodeToCtl) {
        if let Some(c) = self.client.as_mut() {
            if let Err(e) = c.send(&Frame::FromNode(msg)) {
                warn!("controller session lost: {e}");
                self.client = None;
                self.next_connect = Instant::now() + Duration::from_millis(200);
            }
        }
    }

    /// Moves on to the next controller (after one that cannot be reached or is a standby) and
    /// tries it after `wait`; a full round without a leader waits at least 500 ms.
    fn next_controller(&mut self, wait: Duration) {
        let n = 1 + self.opts.backups.len();
        self.ctld_at = (self.ctld_at + 1) % n;
        let wait = if self.ctld_at == 0 { wait.max(Duration::from_millis(500)) } else { wait.min(Duration::from_millis(50)) };
        self.next_connect = Instant::now() + wait;
    }

    fn connect(&mut self) {
        let addr = match self.ctld_at {
            0 => self.opts.ctld,
            i => self.opts.backups[i - 1],
        };
        let mut c = match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                // A controller that accepts but does not answer (paused: the kernel completes
                // the connection) is left within the liveness limit, 2 to 10 s.
                let _ = s.set_read_timeout(Some(self.liveness().clamp(Duration::from_secs(2), Duration::from_secs(10))));
                match Client::handshake(Stream::Tcp(s), Role::NodeDaemon) {
                    Ok(c) => c,
                    Err(e) => {
                        debug!("handshake with {addr} failed: {e}");
                        self.next_controller(Duration::from_millis(500));
                        return;
                    }
                }
            }
            Err(e) => {
                debug!("cannot reach the controller at {addr}: {e}");
                self.next_controller(Duration::from_millis(500));
                return;
            }
        };
        let reg = Register {
            node: self.opts.node.clone(),
            boot_epoch: self.epoch,
            gpus: self.opts.gpus,
            cpus: self.opts.cpus,
            mem_mib: self.opts.mem_mib,
            running: self.running(),
            finished: self.finished.clone(),
        };
        let cred = self.opts.key.sign(0, 0, &self.host, now_s().max(0) as u64, 300);
        match c.call(Some(cred), Request::Register(reg)) {
            Ok(Response::Registered) => {}
            // A standby (another controller leads): the next one, as Slurm's daemons do.
            Ok(Response::Error(e)) if e.code == flotilla_proto::errno::ESLURM_IN_STANDBY_MODE => {
                info!(ctld = %addr, "the controller is a standby ({}): trying the next SlurmctldHost", e.text);
                self.next_controller(Duration::from_millis(500));
                return;
            }
            Ok(other) => {
                error!("registration refused: {other:?}");
                self.next_connect = Instant::now() + Duration::from_secs(2);
                return;
            }
            Err(e) => {
                warn!("registration failed: {e}");
                self.next_connect = Instant::now() + Duration::from_millis(500);
                return;
            }
        }
        let Stream::Tcp(s) = c.stream() else { return };
        let reader = match s.try_clone() {
            Ok(r) => r,
            Err(e) => {
                warn!("cannot clone the session socket: {e}");
                return;
            }
        };
        let _ = reader.set_read_timeout(None);
        self.gen += 1;
        let gen = self.gen;
        let tx = self.tx.clone();
        let liveness = self.liveness();
        std::thread::spawn(move || {
            let mut r = reader;
            // Armed by the session's first keepalive: a controller that sends none (an older
            // one) is never judged silent.
            let mut armed = false;
            let mut last = Instant::now();
            loop {
                // Every message of the controller counts as liveness, not only its keepalives:
                // it sends those only when a third of the lease passed without another
                // message to this node (a busy node hears none).
                let (epoch, msg) = match flotilla_proto::read_frame(&mut r, flotilla_proto::DEFAULT_MAX_FRAME) {
                    Ok(Frame::ToNode(m)) => (0, m),
                    Ok(Frame::ToNodeFenced { epoch, msg }) => (epoch, msg),
                    // Anything else (an answer) proves no leadership: it keeps the read
                    // from timing out, so the silence is judged here too.
                    Ok(_) if armed && last.elapsed() >= liveness => {
                        let _ = tx.send(Event::Silent(gen));
                        return;
                    }
                    Ok(_) => continue,
                    Err(_) => {
                        let silent = armed && last.elapsed() >= liveness;
                        let _ = tx.send(if silent { Event::Silent(gen) } else { Event::Closed(gen) });
                        return;
                    }
                };
                last = Instant::now();
                if matches!(msg, CtlToNode::Keepalive) && !armed {
                    armed = true;
                    let _ = r.set_read_timeout(Some(liveness));
                }
                if tx.send(Event::Ctl(gen, epoch, msg)).is_err() {
                    return;
                }
            }
        });
        info!(ctld = %addr, epoch = self.epoch, running = self.jobs.len(), "registered");
        self.client = Some(c);
        self.last_hb = Instant::now();
    }

    /// Starts the health loop: a thread that polls the health source, applies the health
    /// policy (`health/nvidia`) to each poll's events and hands the owner every verdict that is
    /// not `Ignore`.
    fn start_health(&mut self) {
        let Some(mut source) = self.opts.health.take() else { return };
        let policy = flotilla_plugins::health("health/nvidia").expect("health/nvidia is registered");
        let timeout_ms = u32::try_from(self.opts.health_poll.as_millis()).unwrap_or(u32::MAX);
        let tx = self.tx.clone();
        info!(source = source.kind(), policy = policy.name(), gpus = source.inventory().len(), "GPU health loop started");
        std::thread::Builder::new()
            .name("health".into())
            .spawn(move || loop {
                let events = source.poll(timeout_ms);
                if events.is_empty() {
                    continue;
                }
                let verdict = policy.evaluate_all(&events);
                if verdict != HealthVerdict::Ignore && tx.send(Event::Health(verdict, events)).is_err() {
                    return;
                }
            })
            .expect("spawn the health thread");
    }

    /// A health verdict: acted on once per reason. Quarantine: reported to the controller
    /// (kept until a session takes it); warn: logged.
    fn health(&mut self, verdict: HealthVerdict, events: Vec<HealthEvent>) {
        let reason = verdict.reason().to_string();
        if !self.health_seen.insert(reason.clone()) {
            return;
        }
        let events: Vec<String> = events.iter().map(|e| format!("{e:?}")).collect();
        let verdict = match verdict {
            HealthVerdict::Ignore => return,
            HealthVerdict::Warn { .. } => {
                warn!(reason = %reason, "GPU health warning");
                return;
            }
            HealthVerdict::Quarantine { .. } => {
                error!(reason = %reason, ?events, "GPU health: asking the controller to quarantine this node");
                HealthLevel::Quarantine
            }
        };
        self.health_unsent.push(NodeToCtl::Health { verdict, reason, events });
        self.flush_health();
    }

    fn flush_health(&mut self) {
        while self.client.is_some() && !self.health_unsent.is_empty() {
            let msg = self.health_unsent[0].clone();
            self.send(msg);
            if self.client.is_some() {
                self.health_unsent.remove(0);
            }
        }
    }

    /// Runs forever.
    pub fn run(mut self) -> ! {
        self.start_health();
        loop {
            if self.client.is_none() && Instant::now() >= self.next_connect {
                self.connect();
                self.flush_health();
            }
            match self.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(ev) => self.handle(ev),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => unreachable!("the owner holds a sender"),
            }
            while let Ok(ev) = self.rx.try_recv() {
                self.handle(ev);
            }
            self.poll();
            if self.usage_every.is_some_and(|f| self.last_usage.elapsed() >= f) {
                self.last_usage = Instant::now();
                self.poll_usage();
            }
            self.flush_usage();
            if self.client.is_some() && self.last_hb.elapsed() >= self.opts.heartbeat {
                self.heartbeat();
            }
        }
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Closed(gen) => {
                if gen == self.gen && self.client.is_some() {
                    warn!("controller closed the session");
                    self.client = None;
                    self.next_connect = Instant::now() + Duration::from_millis(200);
                }
            }
            Event::Silent(gen) => {
                if gen == self.gen && self.client.is_some() {
                    let rule = if self.opts.conf.backup_controllers.is_empty() { "SlurmdTimeout" } else { "1.5 x SlurmctldTimeout" };
                    warn!(
                        "no keepalive from the controller for {} ms ({rule}): leaving it for the next SlurmctldHost",
                        self.liveness().as_millis()
                    );
                    self.client = None;
                    self.next_controller(Duration::ZERO);
                }
            }
            Event::Ctl(gen, ..) if gen != self.gen => {}
            Event::Ctl(_, epoch, msg) if !self.admit(epoch, &msg) => {}
            Event::Ctl(_, _, msg) => match msg {
                CtlToNode::Bind(b) => self.launch(*b, None),
                CtlToNode::Launch { bind, details } => self.launch(*bind, Some(*details)),
                CtlToNode::Signal {
                    job_id,
                    signal,
                    batch_only,
                } => self.signal(job_id, signal, batch_only),
                CtlToNode::Kill { job_id } => self.kill(job_id),
                CtlToNode::AckExits { job_ids } => self.ack_exits(&job_ids),
                CtlToNode::LaunchStep(m) => {
                    if self.jobs.keys().any(|&(j, _)| j == m.layout.job_id) {
                        info!(job = m.layout.job_id, step = m.layout.step_id, "launching step tasks");
                        let (job, step) = (m.layout.job_id, m.layout.step_id);
                        if let Err(e) = step_launch::launch(*m, self.facts.clone(), self.host.clone(), self.steps.clone()) {
                            error!(job, step, "step not launched: {e}");
                        }
                    } else {
                        warn!(job = m.layout.job_id, step = m.layout.step_id, "step of a job not bound here: ignored");
                    }
                }
                CtlToNode::StopNotice { job_id, at, cause } => self.stop_notice(job_id, at, cause),
                CtlToNode::SignalSteps { job_id, signal } => {
                    let n = self.steps.signal_job(job_id, signal);
                    info!(job = job_id, signal, tasks = n, "signal delivered to step tasks");
                }
                CtlToNode::SignalStep { job_id, step_id, signal, cancelled_at, wait_s } => {
                    let multiple = self.multiple_slurmd();
                    let notice = cancelled_at
                        .map(|at| flotilla_slurmd::notice::step_cancel_notice(&self.opts.node, multiple, job_id, step_id, at));
                    let found = self.steps.signal_one(job_id, step_id, signal, notice.map(|n| (n.into_bytes(), wait_s)));
                    info!(job = job_id, step = step_id, signal, found, "signal to a step");
                }
                CtlToNode::Membership { job_id, nodes } => self.membership(job_id, &nodes),
                CtlToNode::Keepalive => {}
            },
            Event::Health(verdict, events) => self.health(verdict, events),
            // The loop polls the jobs after every event.
            Event::SupervisorExited => {}
        }
    }

    /// Whether a controller message of lease epoch `epoch` may be acted on: not when this
    /// node has seen a higher epoch (the sender lost the lease; [`spool::CtldFence`]). Each
    /// refusal is logged with the count so far.
    fn admit(&mut self, epoch: u64, msg: &CtlToNode) -> bool {
        match self.fence.admit(epoch) {
            spool::Admit::Current => true,
            spool::Admit::Newer { previous, saved } => {
                info!(epoch, previous, "controller epoch raised: messages of older epochs are refused from now on");
                if let Err(e) = saved {
                    error!(epoch, "cannot store the controller epoch (kept in memory until a restart): {e}");
                }
                true
            }
            spool::Admit::Older { highest } => {
                self.refused += 1;
                warn!(
                    "refused a message from controller epoch {epoch}, below the highest seen ({highest}): {} ({} refused since start)",
                    describe(msg),
                    self.refused
                );
                false
            }
        }
    }

    fn launch(&mut self, bind: Bind, details: Option<LaunchDetails>) {
        let key = (bind.job_id, bind.run);
        if !self.seen.insert(key) {
            debug!(job = bind.job_id, run = bind.run, "duplicate bind ignored");
            return;
        }
        for (&(other, _), e) in &self.jobs {
            if e.gpu_mask & bind.gpu_mask != 0 {
                error!(job = bind.job_id, other, "GPUs {:#x} bound while job {other} holds {:#x}", bind.gpu_mask, e.gpu_mask);
            }
        }
        let dir = JobDir::new(&self.opts.spool, bind.job_id, bind.run);
        let interactive = details.as_ref().is_some_and(|d| d.interactive);
        // The job's cgroup on this node first: nothing of the job runs here before it.
        let r = match self.opts.cgroups.open_job(bind.job_id, bind.run, bind.gpu_mask, bind.mem_mib) {
            Err(e) => Err(anyhow::anyhow!("job cgroup: {e}")),
            Ok(()) if bind.batch_host && !interactive => self.launch_batch(&dir, &bind, details),
            Ok(()) => self.record_alloc(&dir, &bind, details),
        };
        match r {
            Ok(()) => {
                info!(job = bind.job_id, run = bind.run, batch = bind.batch_host, gpus = format!("{:#x}", bind.gpu_mask), "job bound");
                let batch = bind.batch_host && !interactive;
                self.jobs.insert(key, Entry {
                    gpu_mask: bind.gpu_mask,
                    batch,
                    dir,
                    stop_at: None,
                    ack_reported: false,
                    supervisor: if batch { self.last_supervisor } else { None },
                });
            }
            Err(e) => {
                error!(job = bind.job_id, "launch failed: {e:#}");
                self.opts.cgroups.release(bind.job_id, bind.run);
                // Report the failure as the script's end (exit code 1), as slurmstepd does.
                if bind.batch_host {
                    let exit = JobExit {
                        job_id: bind.job_id,
                        run: bind.run,
                        exit_code: 1,
                        signal: 0,
                        oom: false,
                        end_time: now_s(),
                    };
                    self.finished.push(exit.clone());
                    self.send(NodeToCtl::JobExited(exit));
                }
                let _ = std::fs::remove_dir_all(&dir.0);
            }
        }
    }

    fn record_alloc(&self, dir: &JobDir, bind: &Bind, details: Option<LaunchDetails>) -> anyhow::Result<()> {
        spool::create_private_dir(&dir.0)?;
        let jf = JobFile {
            bind: Bind {
                script: String::new(),
                environment: Vec::new(),
                ..bind.clone()
            },
            details,
            env: Vec::new(),
            stdout: String::new(),
            stderr: String::new(),
            append: false,
            started_at: now_s(),
            groups: Vec::new(),
        };
        spool::write_json(&dir.job_file(), &jf)?;
        Ok(())
    }

    fn launch_batch(&mut self, dir: &JobDir, bind: &Bind, details: Option<LaunchDetails>) -> anyhow::Result<()> {
        // Never through a link (the entries are root's fresh ones; a leftover is not followed).
        use std::os::unix::fs::lchown as chown;
        let pw = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(bind.uid)).ok().flatten();
        let user = UserInfo::of_uid(bind.uid, &bind.user);
        let groups: Vec<u32> = match &pw {
            Some(p) => flotilla_slurmd::env::groups_of(&p.name, bind.gid),
            None => Vec::new(),
        };
        let owner = (Some(bind.uid), Some(bind.gid));
        // Private from its creation (job.json holds the script and the environment); then
        // the job's group may reach its entries by name ([`spool::BATCH_DIR_MODE`]).
        spool::create_private_dir(&dir.0)?;
        chown(&dir.0, None, owner.1)?;
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(spool::BATCH_DIR_MODE))?;
        spool::create_private_dir(&dir.user_dir())?;
        chown(dir.user_dir(), owner.0, owner.1)?;
        spool::write_new(&dir.script(), bind.script.as_bytes(), 0o700)?;
        chown(dir.script(), owner.0, owner.1)?;

        let ack = dir.checkpoint_ack().to_string_lossy().into_owned();
        let mut env = env::batch_env(bind, details.as_ref(), &self.facts, &user, &ack);
        // The ports of the other elastic jobs this node is the first node of (their job files
        // keep the environment they started with, across a daemon restart too).
        let taken: Vec<u16> = self
            .jobs
            .values()
            .filter(|e| e.batch)
            .filter_map(|e| spool::read_json::<JobFile>(&e.dir.job_file()).ok().flatten())
            .filter_map(|jf| env::rdzv_port_of(&jf.env))
            .collect();
        let conf = &self.opts.conf;
        let (base, count) = (conf.elastic_rdzv_port.unwrap_or(env::RDZV_PORT_BASE), conf.elastic_rdzv_port_count.unwrap_or(env::RDZV_PORT_COUNT));
        if let Some(port) = env::elastic_rdzv_port(bind, base, count, &taken) {
            // An elastic job: its rendezvous endpoint on this, its first, node, and its
            // membership file, written as the user before the script starts.
            let file = dir.user_dir().join(env::NODES_FILE);
            let writer = flotilla_slurmd::notice::Writer { uid: bind.uid, gid: bind.gid, groups: groups.clone() };
            flotilla_slurmd::notice::replace_as_user(&dir.user_dir(), env::NODES_FILE, Some(&writer), &env::nodes_file_text(&bind.nodes, Some(&self.facts.node)))?;
            env.push(("FLOTILLA_NODES_FILE".into(), file.to_string_lossy().into_owned()));
            env.push(("FLOTILLA_RDZV_ENDPOINT".into(), format!("{}:{port}", self.host)));
        }
        let vars = PatternVars {
            job_id: bind.job_id,
            array: bind.array,
            job_name: &bind.name,
            user: &user.name,
            host: &self.host,
        };
        let resolve = |p: &str| -> String {
            let e = pattern::expand(p, &vars);
            if Path::new(&e).is_absolute() {
                e
            } else {
                Path::new(&bind.work_dir).join(e).to_string_lossy().into_owned()
            }
        };
        let stdout = resolve(bind.stdout.as_deref().unwrap_or(pattern::default_pattern(bind.array.is_some())));
        let stderr = bind.stderr.as_deref().map_or_else(|| stdout.clone(), resolve);
        let open_mode = bind.environment.iter().find(|(k, _)| k == "SLURM_OPEN_MODE").map(|(_, v)| v.as_str());
        let append = match open_mode {
            Some(m) if m.starts_with('a') || m.starts_with('A') => true,
            Some(m) if m.starts_with('t') || m.starts_with('T') => false,
            _ => bind.run > 0,
        };
        let jf = JobFile {
            bind: bind.clone(),
            details,
            env,
            stdout,
            stderr,
            append,
            started_at: now_s(),
            groups,
        };
        spool::write_json(&dir.job_file(), &jf)?;
        if let Some(cg) = self.opts.cgroups.batch_cgroups(bind.job_id) {
            spool::write_json(&dir.0.join(flotilla_slurmd::jobcg::BATCH_FILE), &cg)?;
        }
        let log = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(spool::FILE_MODE)
                .open(dir.0.join("stepd.log"))?
        };
        let child = Command::new(&self.opts.self_exe)
            .arg("--stepd")
            .arg(&dir.0)
            .arg("--cgroup")
            .arg(&self.opts.cgroup)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.last_supervisor = Some(child.id() as i32);
        let (exited_tx, exited) = mpsc::channel();
        let tx = self.tx.clone();
        std::thread::Builder::new().name("supervisor-wait".into()).spawn(move || {
            let mut child = child;
            let status = child.wait();
            let _ = exited_tx.send(status);
            let _ = tx.send(Event::SupervisorExited);
        })?;
        // Wait until the supervisor holds its lock (or died), so that polls never take a
        // starting supervisor for a dead one.
        let t0 = Instant::now();
        while !stepd::alive(dir) {
            if let Ok(status) = exited.try_recv() {
                if dir.exit().exists() {
                    return Ok(());
                }
                let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                // The job's directory (and its log) goes with the failed launch: its last
                // lines go into this error.
                let log = std::fs::read_to_string(dir.0.join("stepd.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(8).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                anyhow::bail!("supervisor exited with {status}; its log ends: {}", tail.join(" | "));
            }
            if t0.elapsed() > Duration::from_secs(10) {
                anyhow::bail!("supervisor did not start");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    /// An elastic job's members changed: its membership file on this, its batch, host is
    /// rewritten as the job's user (never by root: the directory is the user's).
    fn membership(&mut self, job_id: u64, nodes: &str) {
        let Some(e) = self.jobs.iter().find(|((j, _), e)| *j == job_id && e.batch).map(|(_, e)| e) else {
            debug!(job = job_id, "membership of a job whose batch host is elsewhere: ignored");
            return;
        };
        let Ok(Some(jf)) = spool::read_json::<JobFile>(&e.dir.job_file()) else { return };
        if !jf.env.iter().any(|(k, _)| k == "FLOTILLA_NODES_FILE") {
            return;
        }
        let writer = flotilla_slurmd::notice::Writer { uid: jf.bind.uid, gid: jf.bind.gid, groups: jf.groups.clone() };
        let text = env::nodes_file_text(nodes, None);
        match flotilla_slurmd::notice::replace_as_user(&e.dir.user_dir(), env::NODES_FILE, Some(&writer), &text) {
            Ok(()) => info!(job = job_id, nodes, "membership file rewritten"),
            Err(err) => warn!(job = job_id, "membership file not written: {err}"),
        }
    }

    fn signal(&mut self, job_id: u64, signal: i32, batch_only: bool) {
        if !batch_only {
            let n = self.steps.signal_job(job_id, signal);
            if n > 0 {
                info!(job = job_id, signal, tasks = n, "signal delivered to step tasks");
            }
        }
        let keys: Vec<(u64, u32)> = self.jobs.keys().filter(|k| k.0 == job_id).copied().collect();
        for k in keys {
            let e = self.jobs.get_mut(&k).expect("present");
            if !e.batch {
                continue;
            }
            if signal == nix::sys::signal::Signal::SIGTERM as i32 {
                let _ = std::fs::remove_file(e.dir.checkpoint_ack());
                e.stop_at = Some(SystemTime::now());
                e.ack_reported = false;
            }
            match stepd::send_command(&e.dir, &format!("signal {signal} {}", u8::from(batch_only))) {
                Ok(a) if a == "ok" => info!(job = job_id, signal, batch_only, "signal delivered"),
                Ok(a) => warn!(job = job_id, "supervisor answered {a}"),
                Err(err) => warn!(job = job_id, "supervisor unreachable: {err}"),
            }
        }
    }

    /// Has the supervisor of the job's batch script write slurmstepd's stop notice into the
    /// job's stderr file.
    /// Several daemons on one host (Slurm's multiple-slurmd): the node is not the host.
    fn multiple_slurmd(&self) -> bool {
        self.opts.node != self.host
    }

    fn stop_notice(&mut self, job_id: u64, at: i64, cause: flotilla_proto::StopCause) {
        let text = flotilla_slurmd::notice::stop_notice(&self.opts.node, self.multiple_slurmd(), job_id, at, cause);
        for e in self.jobs.iter().filter(|(k, e)| k.0 == job_id && e.batch).map(|(_, e)| e) {
            match stepd::send_command(&e.dir, &format!("notice {}", text.trim_end())) {
                Ok(a) if a == "ok" => debug!(job = job_id, "stop notice written"),
                Ok(a) => warn!(job = job_id, "stop notice: supervisor answered {a}"),
                Err(err) => warn!(job = job_id, "stop notice: supervisor unreachable: {err}"),
            }
        }
    }

    fn kill(&mut self, job_id: u64) {
        self.steps.signal_job(job_id, libc_sigkill());
        self.steps.forget_job(job_id);
        // Every process of the job here, daemonized ones too.
        self.opts.cgroups.kill_job(job_id);
        let keys: Vec<(u64, u32)> = self.jobs.keys().filter(|k| k.0 == job_id).copied().collect();
        let mut released = false;
        for k in keys {
            if self.jobs[&k].batch {
                let dir = self.jobs[&k].dir.clone();
                match stepd::send_command(&dir, "kill") {
                    Ok(_) => info!(job = job_id, "killed"),
                    Err(e) => warn!(job = job_id, "supervisor unreachable: {e}"),
                }
            } else if let Some(e) = self.jobs.remove(&k) {
                info!(job = job_id, "allocation released");
                self.opts.cgroups.release(job_id, k.1);
                let _ = std::fs::remove_dir_all(&e.dir.0);
                let _ = std::fs::write(e.dir.done_marker(), b"");
                released = true;
            }
        }
        // A released part is reported at once (a heartbeat without the job, on which the
        // controller frees this node's part), not at the next period: until then the job stays
        // COMPLETING and this node's GPUs stay allocated. Slurm's slurmd does the same: its
        // `_rpc_terminate_job` (src/slurmd/slurmd/req.c) ends by sending the epilog-complete
        // message as soon as the job is gone from the node.
        if released && self.client.is_some() {
            self.heartbeat();
        }
    }

    /// Sends a heartbeat now (boot epoch, the jobs running here, the ends not acknowledged)
    /// and restarts the period.
    fn heartbeat(&mut self) {
        self.last_hb = Instant::now();
        let hb = NodeToCtl::Heartbeat { boot_epoch: self.epoch, running: self.running(), finished: self.finished.clone() };
        self.send(hb);
    }

    fn ack_exits(&mut self, job_ids: &[u64]) {
        let (acked, keep): (Vec<JobExit>, Vec<JobExit>) =
            std::mem::take(&mut self.finished).into_iter().partition(|e| job_ids.contains(&e.job_id));
        self.finished = keep;
        for e in acked {
            let dir = JobDir::new(&self.opts.spool, e.job_id, e.run);
            let _ = std::fs::remove_dir_all(&dir.0);
            let _ = std::fs::write(dir.done_marker(), b"");
        }
    }

    /// Picks up ends and checkpoint acknowledgements; reaps supervisors.
    fn poll(&mut self) {
        self.opts.cgroups.poll();
        let keys: Vec<(u64, u32)> = self.jobs.iter().filter(|(_, e)| e.batch).map(|(k, _)| *k).collect();
        for k in keys {
            let dir = self.jobs[&k].dir.clone();
            let mut rec: Option<ExitRecord> = spool::read_json(&dir.exit()).unwrap_or(None);
            if rec.is_none() && !stepd::alive(&dir) {
                rec = spool::read_json(&dir.exit()).unwrap_or(None);
                if rec.is_none() {
                    warn!(job = k.0, "supervisor gone without an exit record: reporting the job killed");
                    let r = ExitRecord {
                        exit_code: 0,
                        signal: 9,
                        oom: false,
                        end_time: now_s(),
                        usage: None,
                    };
                    let _ = spool::write_json(&dir.exit(), &r);
                    rec = Some(r);
                }
            }
            if let Some(r) = rec {
                self.jobs.remove(&k);
                // The job has ended here (the supervisor killed what was left).
                self.opts.cgroups.release(k.0, k.1);
                info!(job = k.0, run = k.1, exit_code = r.exit_code, signal = r.signal, oom = r.oom, "batch script ended");
                if let Some(usage) = r.usage {
                    // Before the end itself: the controller records it with the batch step.
                    self.usage.push(StepUsage {
                        job_id: k.0,
                        run: k.1,
                        step: "batch".into(),
                        node: self.opts.node.clone(),
                        usage,
                        done: true,
                        at: r.end_time,
                        exit: None,
                    });
                    self.flush_usage();
                }
                let exit = JobExit {
                    job_id: k.0,
                    run: k.1,
                    exit_code: r.exit_code,
                    signal: r.signal,
                    oom: r.oom,
                    end_time: r.end_time,
                };
                self.finished.push(exit.clone());
                self.send(NodeToCtl::JobExited(exit));
                continue;
            }
            let e = self.jobs.get_mut(&k).expect("present");
            if let (Some(stop), false) = (e.stop_at, e.ack_reported) {
                // The entry itself (the user owns `user/`: a symlink there is not followed).
                if let Ok(m) = std::fs::symlink_metadata(e.dir.checkpoint_ack()).and_then(|m| m.modified()) {
                    e.ack_reported = true;
                    let at = m.max(stop).duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
                    info!(job = k.0, "checkpoint acknowledged");
                    self.send(NodeToCtl::CheckpointAck {
                        job_id: k.0,
                        run: k.1,
                        at,
                    });
                }
            }
        }
    }
}

impl Daemon {
    /// Sends the queued usage reports while a controller session is up; what cannot be sent
    /// stays queued.
    fn flush_usage(&mut self) {
        if self.client.is_none() {
            return;
        }
        let mut queued = self.usage.take().into_iter();
        while let Some((n, u)) = queued.next() {
            self.send(NodeToCtl::StepUsage(u.clone()));
            if self.client.is_none() {
                self.usage.unshift(std::iter::once((n, u)).chain(queued).collect());
                return;
            }
            self.usage.sent_below(n + 1);
        }
    }

    /// One usage poll (`JobAcctGatherFrequency`): every running step's usage so far, from its
    /// cgroup, or unconfined from the processes: the batch supervisor's live descendants, an
    /// `srun` step's task leaders (their reaped children's CPU included, not their live
    /// children).
    fn poll_usage(&mut self) {
        let at = now_s();
        let node = self.opts.node.clone();
        let mut reports = Vec::new();
        if self.opts.cgroups.confined() {
            for (job_id, run, step, name) in self.opts.cgroups.running_steps() {
                if let Some(usage) = self.opts.cgroups.usage_of(&name) {
                    reports.push(StepUsage { job_id, run, step, node: node.clone(), usage, done: false, at, exit: None });
                }
            }
        } else {
            for (&(job_id, run), e) in &self.jobs {
                let Some(pid) = e.supervisor else { continue };
                let usage = flotilla_slurmd::usage::procs_usage(&stepd::descendants(pid));
                reports.push(StepUsage { job_id, run, step: "batch".into(), node: node.clone(), usage, done: false, at, exit: None });
            }
            for ((job_id, step), leaders) in self.steps.step_groups() {
                let mut usage = flotilla_slurmd::usage::procs_usage(&leaders);
                usage.ntasks = leaders.len() as u32;
                let step = step.to_string();
                reports.push(StepUsage { job_id, run: 0, step, node: node.clone(), usage, done: false, at, exit: None });
            }
        }
        for r in reports {
            self.usage.push(r);
        }
    }
}

fn libc_sigkill() -> i32 {
    nix::sys::signal::Signal::SIGKILL as i32
}

/// A controller message in a few words (job and kind), for the log.
fn describe(m: &CtlToNode) -> String {
    match m {
        CtlToNode::Bind(b) | CtlToNode::Launch { bind: b, .. } => format!("launch of job {}", b.job_id),
        CtlToNode::Signal { job_id, signal, .. } => format!("signal {signal} to job {job_id}"),
        CtlToNode::Kill { job_id } => format!("kill of job {job_id}"),
        CtlToNode::AckExits { job_ids } => format!("acknowledgement of the ends of jobs {job_ids:?}"),
        CtlToNode::LaunchStep(l) => format!("launch of step {}.{}", l.layout.job_id, l.layout.step_id),
        CtlToNode::StopNotice { job_id, .. } => format!("stop notice of job {job_id}"),
        CtlToNode::SignalSteps { job_id, signal } => format!("signal {signal} to the steps of job {job_id}"),
        CtlToNode::SignalStep { job_id, step_id, signal, .. } => format!("signal {signal} to step {job_id}.{step_id}"),
        CtlToNode::Membership { job_id, .. } => format!("membership change of job {job_id}"),
        CtlToNode::Keepalive => "keepalive".into(),
    }
}
