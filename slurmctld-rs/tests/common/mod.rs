//! Test support: a cluster configuration, the real `slurmctld` binary on an OS-chosen port in
//! a temp dir, a client that signs its own credentials, and fake node agents speaking `proto`.
#![allow(dead_code)]

use flotilla_core::config::{ClusterConfig, ConfNodeState, NodeConfig, PartitionConfig, PodConfig, TopologyKind};
use flotilla_proto::client::Client;
use flotilla_proto::{
    ClusterKey, CtlToNode, Frame, JobExit, JobInfo, JobQuery, NodeJob, NodeToCtl, Register, Request, Response, Role,
    SubmitJob,
};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `n` nodes `gpu01..` of 64 CPUs, 512000 MiB, 8 h100, two per pod; partitions `batch`
/// (default, 1 h default, 2 days max) and `debug` (first two nodes, 30 min max).
pub fn cluster(n: usize) -> ClusterConfig {
    let names: Vec<String> = (1..=n).map(|i| format!("gpu{i:02}")).collect();
    let nodes = names
        .iter()
        .map(|name| NodeConfig {
            name: name.clone(),
            addr: "127.0.0.1".into(),
            hostname: name.clone(),
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
            gpu_files: Vec::new(),
            gpu_cores: None,
            gpu_links: false,
            gres: "gpu:h100:8".into(),
            weight: 1,
            features: Vec::new(),
            state: ConfNodeState::Unknown,
        })
        .collect();
    let part = |name: &str, nodes: Vec<String>, default: bool, max: u64, def: Option<u64>| PartitionConfig {
        name: name.into(),
        nodes_expr: String::new(),
        nodes,
        default,
        max_time_min: Some(max),
        default_time_min: def,
        state: "UP".into(),
        priority_tier: 1,
        priority_job_factor: 1,
        max_nodes: None,
        default_topology: TopologyKind::Any,
        sub_node_pool: false,
        inference_pool: false,
        access: Default::default(),
        tres_billing_weights: None,
    };
    ClusterConfig {
        cluster_name: "test".into(),
        slurm_user: "root".into(),
        def_mem_per_cpu_mib: Some(1024),
        kill_wait_s: 1,
        min_job_age_s: 3600,
        max_job_count: 100_000,
        max_array_size: 10001,
        nodes,
        partitions: vec![
            part("batch", names.clone(), true, 2880, Some(60)),
            part("debug", names.iter().take(2).cloned().collect(), false, 30, None),
        ],
        pods: names
            .chunks(2)
            .enumerate()
            .map(|(i, c)| PodConfig {
                name: format!("leaf{}", i + 1),
                nodes: c.to_vec(),
                nodes_expr: String::new(),
            })
            .collect(),
        ..ClusterConfig::default()
    }
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A test environment: temp dir with the key and cluster JSON.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub key: ClusterKey,
}

impl Env {
    pub fn new(nodes: usize) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let key = ClusterKey::generate(&dir.path().join("slurm.key")).unwrap();
        std::fs::write(dir.path().join("cluster.json"), serde_json::to_string(&cluster(nodes)).unwrap()).unwrap();
        Env { dir, key }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// Changes the cluster configuration the controllers of this environment read.
    pub fn edit_cluster(&self, f: impl FnOnce(&mut ClusterConfig)) {
        let path = self.path("cluster.json");
        let mut c: ClusterConfig = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        f(&mut c);
        std::fs::write(&path, serde_json::to_string(&c).unwrap()).unwrap();
    }

    /// Points the controllers of this environment at another state store (slurm.conf's
    /// `StateStorage*` keys; `backends::TestPg::keys` for a test's PostgreSQL server).
    pub fn set_storage(&self, storage: flotilla_core::config::StateStorageConf) {
        let path = self.path("cluster.json");
        let mut c: ClusterConfig = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        c.state_storage = storage;
        std::fs::write(&path, serde_json::to_string(&c).unwrap()).unwrap();
    }

    /// A credential for `uid` (the test holds the cluster key, as sackd would).
    pub fn cred(&self, uid: u32) -> flotilla_proto::Credential {
        self.key.sign(uid, uid, "testhost", now(), 300)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(log) = std::fs::read_to_string(self.path("slurmctld.log")) {
                let lines: Vec<&str> = log.lines().collect();
                let keep: Vec<&str> = lines.iter().copied().filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("panicked") || l.contains("stopping") || l.contains("recovered")).collect();
                let lines = keep;
                let from = lines.len().saturating_sub(60);
                eprintln!("---- slurmctld.log (last 60 lines) ----\n{}", lines[from..].join("\n"));
            }
        }
    }
}

/// The real `slurmctld` binary.
pub struct Ctl {
    pub child: Child,
    pub addr: SocketAddr,
    pub socket: PathBuf,
}

impl Ctl {
    /// Starts the binary; `port` 0 lets the OS choose (restarts pass the first port).
    pub fn start(env: &Env, port: u16, extra: &[&str]) -> Ctl {
        let child = Ctl::spawn_named(env, "", port, extra);
        Ctl::wait_ready(env, "", child)
    }

    /// Spawns controller `name` (its own state dir `state<name>`, socket, address file and
    /// log `slurmctld<name>.log`) without waiting for it to lead ([`Ctl::wait_ready`]).
    pub fn spawn_named(env: &Env, name: &str, port: u16, extra: &[&str]) -> Child {
        let addr_file = env.path(&format!("ctld{name}.addr"));
        let _ = std::fs::remove_file(&addr_file);
        let socket = env.path(&format!("ctld{name}.sock"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(env.path(&format!("slurmctld{name}.log")))
            .unwrap();
        Command::new(env!("CARGO_BIN_EXE_slurmctld"))
            .arg("-D")
            .arg("--cluster-json")
            .arg(env.path("cluster.json"))
            .arg("--state-dir")
            .arg(env.path(&format!("state{name}")))
            .arg("--key")
            .arg(env.path("slurm.key"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--socket")
            .arg(&socket)
            .arg("--addr-file")
            .arg(&addr_file)
            // No `batch_sched_delay` pacing (Slurm's 3 s by default) unless `extra` asks.
            .args(["--batch-sched-delay-ms", "0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn slurmctld")
    }

    /// Waits until controller `name` (spawned by [`Ctl::spawn_named`]) leads and listens: its
    /// address file appears (a standby writes it once it took the lease).
    pub fn wait_ready(env: &Env, name: &str, child: Child) -> Ctl {
        let addr_file = env.path(&format!("ctld{name}.addr"));
        let t0 = Instant::now();
        let addr = loop {
            if let Ok(s) = std::fs::read_to_string(&addr_file) {
                break s.trim().parse().unwrap();
            }
            let log = env.path(&format!("slurmctld{name}.log"));
            assert!(t0.elapsed() < Duration::from_secs(30), "slurmctld{name} did not start; see {}", log.display());
            std::thread::sleep(Duration::from_millis(5));
        };
        Ctl { child, addr, socket: env.path(&format!("ctld{name}.sock")) }
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Ctl {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// One request over TCP with a fresh credential for `uid`.
pub fn call(env: &Env, addr: SocketAddr, uid: u32, req: Request) -> Result<Response, String> {
    let mut c = Client::connect_tcp(addr, Role::Command).map_err(|e| e.to_string())?;
    c.stream_timeout(Duration::from_secs(10));
    c.call(Some(env.cred(uid)), req).map_err(|e| e.to_string())
}

pub trait TimeoutExt {
    fn stream_timeout(&mut self, d: Duration);
}

impl TimeoutExt for Client {
    fn stream_timeout(&mut self, d: Duration) {
        if let flotilla_proto::client::Stream::Tcp(s) = self.stream() {
            let _ = s.set_read_timeout(Some(d));
        }
    }
}

/// A `--wrap`-like submission for `uid`; the fake agents read `#FAKE_RUNTIME_MS=`,
/// `#FAKE_EXIT=` and `#FAKE_IGNORE_TERM=` (add it to the script) from the script.
pub fn job(uid: u32, runtime_ms: u64, exit: i32) -> SubmitJob {
    SubmitJob {
        name: Some("wrap".into()),
        script: format!("#!/bin/sh\n#FAKE_RUNTIME_MS={runtime_ms}\n#FAKE_EXIT={exit}\ntrue\n"),
        work_dir: "/tmp".into(),
        uid,
        gid: uid,
        user: if uid == 2002 { "bob".into() } else if uid == 0 { "root".into() } else { "alice".into() },
        ..SubmitJob::default()
    }
}

pub fn all_jobs(env: &Env, addr: SocketAddr) -> Vec<JobInfo> {
    match call(
        env,
        addr,
        0,
        Request::QueryJobs(JobQuery {
            include_finished: true,
            ..JobQuery::default()
        }),
    ) {
        Ok(Response::Jobs(j)) => j,
        other => panic!("query failed: {other:?}"),
    }
}

/// What the fake agents saw, across all nodes: the test's ground truth.
#[derive(Default, Debug)]
pub struct Ledger {
    /// Starts of each (job, run) on its batch host.
    pub starts: HashMap<(u64, u32), u32>,
    /// When each (job, run) first started on its batch host.
    pub started_at: HashMap<(u64, u32), Instant>,
    /// Violations seen (a GPU bound twice, ...).
    pub violations: Vec<String>,
    /// Kill/Signal messages received for jobs still running.
    pub kills: Vec<(u64, u32)>,
    /// Binds received (including duplicates the agent ignored).
    pub binds: u64,
    /// Step launches received: (node, message).
    pub launches: Vec<(String, flotilla_proto::step::LaunchStep)>,
    /// Stop notices received: (job, cause).
    pub notices: Vec<(u64, flotilla_proto::StopCause)>,
    /// Messages received, by the controller lease epoch they carried (0: a plain
    /// `Frame::ToNode`). The fake agents act on every one; the real `slurmd` refuses an epoch
    /// below the highest it has seen.
    pub by_epoch: std::collections::BTreeMap<u64, u64>,
    /// Messages a test has the agent of a node send (node, message), in order, once it is
    /// registered.
    pub to_send: Vec<(String, NodeToCtl)>,
}

struct RunningJob {
    run: u32,
    mask: u64,
    ends: Instant,
    exit: i32,
    batch_host: bool,
    /// `#FAKE_IGNORE_TERM=1`: a signal other than SIGKILL does not end it (a job that traps
    /// SIGTERM); only `Kill` does.
    ignore_term: bool,
}

struct AgentState {
    running: HashMap<u64, RunningJob>,
    finished: Vec<JobExit>,
    seen: HashSet<(u64, u32)>,
}

/// A fake node daemon: registers, heartbeats, "runs" jobs for their fake runtime, reconnects
/// forever when the controller goes away.
pub struct Agent {
    pub stop: Arc<AtomicBool>,
    pub addr: Arc<Mutex<SocketAddr>>,
    pub boot_epoch: Arc<Mutex<u64>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Agent {
    pub fn spawn(env: &Env, node: &str, addr: Arc<Mutex<SocketAddr>>, ledger: Arc<Mutex<Ledger>>) -> Agent {
        let stop = Arc::new(AtomicBool::new(false));
        let key = env.key.clone();
        let node = node.to_string();
        let boot_epoch = Arc::new(Mutex::new(1u64));
        let (s2, a2, b2) = (stop.clone(), addr.clone(), boot_epoch.clone());
        let handle = std::thread::spawn(move || agent_main(key, node, a2, b2, ledger, s2));
        Agent {
            stop,
            addr,
            boot_epoch,
            handle: Some(handle),
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn parse_tag(script: &str, tag: &str) -> Option<i64> {
    script
        .lines()
        .find_map(|l| l.strip_prefix(tag))
        .and_then(|v| v.trim().parse().ok())
}

fn agent_main(
    key: ClusterKey,
    node: String,
    addr: Arc<Mutex<SocketAddr>>,
    boot_epoch: Arc<Mutex<u64>>,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
) {
    let mut st = AgentState {
        running: HashMap::new(),
        finished: Vec::new(),
        seen: HashSet::new(),
    };
    let mut my_epoch = *boot_epoch.lock().unwrap();
    while !stop.load(Ordering::SeqCst) {
        let a = *addr.lock().unwrap();
        let Ok(mut c) = Client::connect_tcp(a, Role::NodeDaemon) else {
            advance(&mut st);
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let epoch_now = *boot_epoch.lock().unwrap();
        if epoch_now != my_epoch {
            // A reboot: everything that ran here is gone.
            my_epoch = epoch_now;
            st.running.clear();
            st.finished.clear();
            st.seen.clear();
        }
        if let flotilla_proto::client::Stream::Tcp(s) = c.stream() {
            let _ = s.set_read_timeout(Some(Duration::from_millis(25)));
        }
        advance(&mut st);
        let reg = Register {
            node: node.clone(),
            boot_epoch: my_epoch,
            gpus: 8,
            cpus: 64,
            mem_mib: 512_000,
            running: running_of(&st),
            finished: st.finished.clone(),
        };
        let cred = key.sign(0, 0, &node, now(), 300);
        if c.send(&Frame::Request { id: 1, auth: Some(cred), body: Request::Register(reg) }).is_err() {
            continue;
        }
        let mut registered = false;
        let mut last_hb = Instant::now();
        loop {
            if stop.load(Ordering::SeqCst) || *boot_epoch.lock().unwrap() != my_epoch {
                break;
            }
            match c.recv() {
                Ok(Frame::Response { body: Response::Registered, .. }) => registered = true,
                // The previous session of this agent is not seen closed yet, or the address
                // points at a controller that has not taken the lease yet (a failover in
                // progress; slurmd moves on from a standby): try again.
                Ok(Frame::Response { body: Response::Error(e), .. })
                    if e.code == flotilla_proto::errno::ESLURM_IN_STANDBY_MODE || e.messages.iter().any(|m| m.contains("live session")) =>
                {
                    std::thread::sleep(Duration::from_millis(20));
                    break;
                }
                Ok(Frame::Response { body, .. }) => panic!("registration of {node} refused: {body:?}"),
                Ok(Frame::ToNode(m)) => {
                    *ledger.lock().unwrap().by_epoch.entry(0).or_default() += 1;
                    handle_msg(&mut st, &node, m, &ledger);
                }
                Ok(Frame::ToNodeFenced { epoch, msg }) => {
                    *ledger.lock().unwrap().by_epoch.entry(epoch).or_default() += 1;
                    handle_msg(&mut st, &node, msg, &ledger);
                }
                Ok(_) => {}
                Err(flotilla_proto::client::ClientError::Proto(flotilla_proto::ProtoError::Io(e)))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
            let newly = advance(&mut st);
            if !registered {
                continue;
            }
            let mut ok = true;
            for e in newly {
                ok &= c.send(&Frame::FromNode(NodeToCtl::JobExited(e))).is_ok();
            }
            let mine: Vec<NodeToCtl> = {
                let mut l = ledger.lock().unwrap();
                let (mine, rest) = std::mem::take(&mut l.to_send).into_iter().partition(|(n, _)| *n == node);
                l.to_send = rest;
                mine.into_iter().map(|(_, m)| m).collect()
            };
            for m in mine {
                ok &= c.send(&Frame::FromNode(m)).is_ok();
            }
            if last_hb.elapsed() > Duration::from_millis(100) {
                last_hb = Instant::now();
                ok &= c
                    .send(&Frame::FromNode(NodeToCtl::Heartbeat {
                        boot_epoch: my_epoch,
                        running: running_of(&st),
                        finished: st.finished.clone(),
                    }))
                    .is_ok();
            }
            if !ok {
                break;
            }
        }
    }
}

fn running_of(st: &AgentState) -> Vec<NodeJob> {
    st.running
        .iter()
        .map(|(id, r)| NodeJob {
            job_id: *id,
            run: r.run,
            gpu_mask: r.mask,
        })
        .collect()
}

/// Ends jobs whose runtime is over; returns their exits (also kept until acknowledged).
fn advance(st: &mut AgentState) -> Vec<JobExit> {
    let now_i = Instant::now();
    let done: Vec<u64> = st
        .running
        .iter()
        .filter(|(_, r)| r.batch_host && r.ends <= now_i)
        .map(|(id, _)| *id)
        .collect();
    let mut out = Vec::new();
    for id in done {
        let r = st.running.remove(&id).unwrap();
        let e = JobExit {
            job_id: id,
            run: r.run,
            exit_code: r.exit,
            signal: 0,
            oom: false,
            end_time: now() as i64,
        };
        st.finished.push(e.clone());
        out.push(e);
    }
    out
}

fn handle_msg(st: &mut AgentState, node: &str, m: CtlToNode, ledger: &Mutex<Ledger>) {
    match m {
        CtlToNode::Launch { bind, .. } => handle_msg(st, node, CtlToNode::Bind(bind), ledger),
        CtlToNode::Bind(b) => {
            let mut l = ledger.lock().unwrap();
            l.binds += 1;
            if !st.seen.insert((b.job_id, b.run)) {
                return;
            }
            for (other, r) in &st.running {
                if r.mask & b.gpu_mask != 0 {
                    l.violations.push(format!(
                        "{node}: job {} bound to GPUs {:#x} held by job {other} ({:#x})",
                        b.job_id, b.gpu_mask, r.mask
                    ));
                }
            }
            if b.batch_host {
                *l.starts.entry((b.job_id, b.run)).or_default() += 1;
                l.started_at.entry((b.job_id, b.run)).or_insert_with(Instant::now);
            }
            let ms = parse_tag(&b.script, "#FAKE_RUNTIME_MS=").unwrap_or(100) as u64;
            let exit = parse_tag(&b.script, "#FAKE_EXIT=").unwrap_or(0) as i32;
            st.running.insert(
                b.job_id,
                RunningJob {
                    run: b.run,
                    mask: b.gpu_mask,
                    ends: Instant::now() + Duration::from_millis(ms),
                    exit,
                    batch_host: b.batch_host,
                    ignore_term: parse_tag(&b.script, "#FAKE_IGNORE_TERM=") == Some(1),
                },
            );
        }
        CtlToNode::Signal { job_id, signal, .. } => {
            if st.running.get(&job_id).is_some_and(|r| r.ignore_term && signal != 9) {
                return;
            }
            if let Some(r) = st.running.remove(&job_id) {
                if r.batch_host {
                    ledger.lock().unwrap().kills.push((job_id, r.run));
                    st.finished.push(JobExit {
                        job_id,
                        run: r.run,
                        exit_code: 0,
                        signal,
                        oom: false,
                        end_time: now() as i64,
                    });
                }
            }
        }
        // The fake agent runs no step tasks: nothing to signal.
        CtlToNode::SignalSteps { .. } | CtlToNode::SignalStep { .. } | CtlToNode::Membership { .. } | CtlToNode::Keepalive => {}
        CtlToNode::Kill { job_id } => {
            if let Some(r) = st.running.remove(&job_id) {
                if r.batch_host {
                    ledger.lock().unwrap().kills.push((job_id, r.run));
                    st.finished.push(JobExit {
                        job_id,
                        run: r.run,
                        exit_code: 0,
                        signal: 9,
                        oom: false,
                        end_time: now() as i64,
                    });
                }
            }
        }
        CtlToNode::AckExits { job_ids } => {
            st.finished.retain(|e| !job_ids.contains(&e.job_id));
        }
        CtlToNode::LaunchStep(m) => ledger.lock().unwrap().launches.push((node.to_string(), *m)),
        CtlToNode::StopNotice { job_id, cause, .. } => {
            if st.running.get(&job_id).is_some_and(|r| r.batch_host) {
                ledger.lock().unwrap().notices.push((job_id, cause));
            }
        }
    }
}

/// Waits until `f` is true or `secs` pass; returns whether it became true. The caller asserts
/// the result (with what it waited for), so that a wait that timed out fails the test.
#[must_use = "a wait that timed out must fail the test: assert the result"]
pub fn wait_for(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

pub fn state_dir_db(env: &Env) -> PathBuf {
    env.path("state").join("flotilla.db")
}

pub fn exists(p: &Path) -> bool {
    p.exists()
}

/// Waits until `f` is true, polling every 20 ms; after `secs` seconds fails the test with
/// `timed out after {secs} s waiting for {what}`.
pub fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "timed out after {secs} s waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The controller's counters (`Request::QueryTurns`): owner-loop turns and scheduling cycles
/// completed since it started, as of the turn that answered (that turn not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turns {
    /// Turns completed (each: events handled, timers, maybe a cycle, the commit).
    pub turns: u64,
    /// Scheduling cycles completed.
    pub cycles: u64,
    /// A scheduling cycle is due (an event since the last one asked for it).
    pub cycle_due: bool,
}

/// Asks the controller at `addr` for its [`Turns`].
pub fn turns(env: &Env, addr: SocketAddr) -> Turns {
    match call(env, addr, 0, Request::QueryTurns) {
        Ok(Response::Turns { turns, cycles, cycle_due }) => Turns { turns, cycles, cycle_due },
        other => panic!("turn query failed: {other:?}"),
    }
}

/// A barrier: returns once the controller has completed `n` more turns after this call's first
/// query was handled (`n = 1`: the turn that handled it, with its cycle if one was due and its
/// commit). Fails the test after 20 s.
pub fn wait_turns(env: &Env, addr: SocketAddr, n: u64) -> Turns {
    let start = turns(env, addr);
    let t0 = Instant::now();
    loop {
        let now = turns(env, addr);
        if now.turns >= start.turns + n {
            return now;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "timed out after 20 s waiting for {n} controller turns after {start:?} (now {now:?})");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A barrier: returns once the controller has completed `n` scheduling cycles that began after
/// this call's first query was handled, each committed with its turn (so whatever a cycle
/// decides about an earlier action - a start, a kill, a reason - is visible to the queries that
/// follow). Use it before asserting that something did *not* happen. Fails the test after
/// 20 s (a controller whose periodic cycles are minutes apart needs an event that makes a
/// cycle due).
pub fn wait_cycles(env: &Env, addr: SocketAddr, n: u64) -> Turns {
    let start = turns(env, addr);
    let t0 = Instant::now();
    loop {
        let now = turns(env, addr);
        if now.cycles >= start.cycles + n {
            return now;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "timed out after 20 s waiting for {n} scheduling cycles after {start:?} (now {now:?})"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
