//! Launching a job step's tasks on this node (the part of Slurm's `slurmstepd` that runs an
//! `srun` step): the node daemon hands [`launch`] a [`LaunchStep`]; it connects back to
//! `srun`'s I/O port, presents the step's I/O key, starts this node's tasks as the job's user
//! with their per-task environment ([`task_env`]), and streams their output and exit statuses
//! to `srun` over that connection ([`StepIo`]); `srun` sends signals and standard input back
//! ([`SrunIo`]). When `srun` goes away the tasks are killed, as Slurm does.
//!
//! Each task runs in a process group of its own. Confined ([`crate::jobcg`]): each task joins
//! the step's cgroup `job_<id>/step_<s>` (below the job's, with the job's limits and GPUs)
//! between fork and exec, signals from `srun`, `scancel` or the job's stop go to every process
//! of the step's cgroup, and the step's end kills what is left in it and removes it; a task
//! whose cgroup cannot be joined does not start (`slurmstepd: error: ...`, exit code 2).
//! Unconfined: signals go to every task's process group whose leader is not yet reaped
//! ([`StepRegistry`]).
//!
//! A task's `-o`/`-e` files are opened, and its working directory entered, by the task's own
//! child after it became the user, never by root: following the user's symlinks with the
//! user's rights only (slurmstepd opens them as the user too). Tasks of one step sharing a
//! file on this node truncate it once (not with `--open-mode=append`) and append to it.
//!
//! Threads: one per step (waits for tasks), one per output pipe, one reading `srun`'s frames.
//! A task's output waits for an `srun` that does not read while the task runs (the task then
//! blocks on its pipe, as under slurmstepd); any other write to `srun`, and output once its
//! task has ended, completes within [`SRUN_IO_TIMEOUT`] or `srun` is taken for gone. So no
//! root thread outlives its step by more than that, and a job runs at most
//! [`MAX_RUNNING_STEPS_PER_JOB`] steps here at once.

use crate::env::{compress_counts, gpu_indices, NodeFacts};
use crate::jobcg::{NodeCgroups, StepCgroup, TaskJoin};
use crate::pattern::{self, PatternVars};
use flotilla_proto::step::{read_msg, write_msg, LaunchStep, SrunIo, StepIo};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::{info, warn};

/// Process groups of running tasks, by (job id, step id).
type Groups = BTreeMap<(u64, u32), Vec<i32>>;

/// Most steps of one job that may run on this node at once: 512. A step beyond it is refused
/// (logged; its `srun` sees no node connect and gives up). Slurm bounds a job's steps with
/// `MaxStepCount` (40000 in all, counted by the controller); a node bounds those it runs at
/// once, so that one job cannot exhaust the daemon's threads (each step runs at least two).
pub const MAX_RUNNING_STEPS_PER_JOB: usize = 512;

/// How long a write to `srun` or a connect to it may block: 10 s (Slurm's `MessageTimeout`
/// default). An `srun` that does not read for that long is taken for gone, as one whose
/// connection closed (its tasks are killed), except while the task whose output it is still
/// runs: output waits for a paused `srun` (`srun ... | less`) as long as its task lives.
pub const SRUN_IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Process groups of the running tasks of every step on this node, by (job, step), the
/// node's job cgroups, and how many steps of each job run here.
///
/// A task's process group stays in the registry exactly while its leader is not reaped (it
/// is removed, under the registry's lock, before the leader is), so a signal never reaches a
/// process group whose id the kernel may have handed to someone else.
#[derive(Debug, Clone, Default)]
pub struct StepRegistry(
    Arc<Mutex<Groups>>,
    Arc<NodeCgroups>,
    Arc<Mutex<BTreeMap<u64, usize>>>,
    crate::usage::Outbox,
    Arc<Mutex<StepSignals>>,
);

/// What `scancel JOB.STEP` needs of this node's steps: the running steps' handles, and the
/// signals that came for a step before its tasks started here (the controller's message can
/// overtake the launch thread), delivered as the step starts.
#[derive(Debug, Default)]
struct StepSignals {
    running: BTreeMap<(u64, u32), StepHandle>,
    early: BTreeMap<(u64, u32), Vec<EarlySignal>>,
}

/// A signal for a step not started here yet: when it came, the signal, and a cancel's notice.
type EarlySignal = (std::time::Instant, i32, Option<(Vec<u8>, u32)>);

/// Most signals kept for steps not started here yet (a step that never starts here leaves
/// its entry until its job ends here or [`EARLY_SIGNAL_TTL`] passes).
const MAX_EARLY_SIGNALS: usize = 1024;

/// How long a signal for a step not started here yet is kept: 60 s (a launch that has not
/// started its tasks by then has failed; srun gives up sooner).
const EARLY_SIGNAL_TTL: std::time::Duration = std::time::Duration::from_secs(60);

/// A running step's link to its `srun` and how to signal its tasks (every process of its
/// cgroup when confined, else every live task's process group), for `scancel JOB.STEP`.
#[derive(Clone)]
struct StepHandle {
    sink: Sink,
    signal: Arc<dyn Fn(i32) + Send + Sync>,
}

impl std::fmt::Debug for StepHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StepHandle")
    }
}

impl StepRegistry {
    /// A registry whose steps are confined by `cgroups`.
    pub fn with_cgroups(cgroups: Arc<NodeCgroups>) -> StepRegistry {
        StepRegistry(Arc::default(), cgroups, Arc::default(), crate::usage::Outbox::default(), Arc::default())
    }

    /// The usage reports of ended steps, for the daemon to send ([`crate::usage::Outbox`]).
    pub fn usage_outbox(&self) -> crate::usage::Outbox {
        self.3.clone()
    }

    fn add(&self, key: (u64, u32), pgid: i32) {
        self.0.lock().expect("registry lock").entry(key).or_default().push(pgid);
    }

    /// The task led by `pgid` has exited and its leader is a zombie, not yet reaped (so the
    /// group id is still this task's): kills what is left in its group and forgets it. The
    /// caller reaps the leader afterwards.
    fn task_ended(&self, key: (u64, u32), pgid: i32) {
        let mut m = self.0.lock().expect("registry lock");
        signal_group(pgid, libc::SIGKILL);
        if let Some(v) = m.get_mut(&key) {
            v.retain(|&p| p != pgid);
            if v.is_empty() {
                m.remove(&key);
            }
        }
    }

    /// Sends `signal` to every task of every step of `job_id` on this node (`scancel`, the
    /// job's stop and kill): to every process of the steps' cgroups when confined, else to
    /// every task's process group whose leader is not yet reaped. Returns how many step
    /// cgroups or task groups it reached.
    pub fn signal_job(&self, job_id: u64, signal: i32) -> usize {
        if self.1.confined() {
            return self.1.signal_steps(job_id, signal);
        }
        let m = self.0.lock().expect("registry lock");
        let mut n = 0;
        for g in m.range((job_id, 0)..=(job_id, u32::MAX)).flat_map(|(_, v)| v.iter()) {
            signal_group(*g, signal);
            n += 1;
        }
        n
    }

    /// Sends `signal` to the process group of every task of step `key` whose leader is not
    /// yet reaped (the unconfined step's signals from `srun`).
    fn signal_step(&self, key: (u64, u32), signal: i32) {
        let m = self.0.lock().expect("registry lock");
        for &g in m.get(&key).into_iter().flatten() {
            signal_group(g, signal);
        }
    }

    /// `scancel JOB.STEP`: `signal` to every task of step `step_id` of `job_id` here;
    /// `cancel` (the node's notice line and the seconds `srun` says it waits) first goes to the
    /// step's `srun` ([`StepIo::Cancelled`]), ahead of the tasks' exits. A step whose tasks
    /// have not started here yet gets it as they start. `false`: no such step runs here (yet).
    pub fn signal_one(&self, job_id: u64, step_id: u32, signal: i32, cancel: Option<(Vec<u8>, u32)>) -> bool {
        let h = {
            let mut t = self.4.lock().expect("registry lock");
            match t.running.get(&(job_id, step_id)) {
                Some(h) => h.clone(),
                None => {
                    t.early.retain(|_, v| {
                        v.retain(|e| e.0.elapsed() < EARLY_SIGNAL_TTL);
                        !v.is_empty()
                    });
                    if t.early.values().map(Vec::len).sum::<usize>() < MAX_EARLY_SIGNALS {
                        t.early.entry((job_id, step_id)).or_default().push((std::time::Instant::now(), signal, cancel));
                    }
                    return false;
                }
            }
        };
        deliver(&h, signal, cancel);
        true
    }

    /// The step `key` started its tasks here: from now on [`StepRegistry::signal_one`] reaches
    /// it; the signals that came for it before are delivered now, in order.
    fn step_running(&self, key: (u64, u32), h: StepHandle) {
        let early = {
            let mut t = self.4.lock().expect("registry lock");
            t.running.insert(key, h.clone());
            t.early.remove(&key).unwrap_or_default()
        };
        for (at, signal, cancel) in early {
            if at.elapsed() < EARLY_SIGNAL_TTL {
                info!(job = key.0, step = key.1, signal, "a signal that came before the step started");
                deliver(&h, signal, cancel);
            }
        }
    }

    /// Job `job_id` ended here: signals kept for its steps that never started are dropped
    /// (a requeued run's steps start their ids again).
    pub fn forget_job(&self, job_id: u64) {
        self.4.lock().expect("registry lock").early.retain(|k, _| k.0 != job_id);
    }

    /// Steps with running tasks here.
    pub fn steps(&self) -> Vec<(u64, u32)> {
        self.0.lock().expect("registry lock").keys().copied().collect()
    }

    /// The running tasks' process groups (their leaders' pids) of every step, for an
    /// unconfined usage poll.
    pub fn step_groups(&self) -> Vec<((u64, u32), Vec<i32>)> {
        self.0.lock().expect("registry lock").iter().map(|(k, v)| (*k, v.clone())).collect()
    }

    /// Counts a step of `job_id` as running; `false` (nothing counted) when
    /// [`MAX_RUNNING_STEPS_PER_JOB`] already run.
    fn step_started(&self, job_id: u64) -> bool {
        let mut m = self.2.lock().expect("registry lock");
        let n = m.entry(job_id).or_default();
        if *n >= MAX_RUNNING_STEPS_PER_JOB {
            return false;
        }
        *n += 1;
        true
    }

    fn step_ended(&self, job_id: u64) {
        let mut m = self.2.lock().expect("registry lock");
        if let Some(n) = m.get_mut(&job_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&job_id);
            }
        }
    }
}

/// A cancel's notice to the step's `srun`, then the signal to its tasks.
fn deliver(h: &StepHandle, signal: i32, cancel: Option<(Vec<u8>, u32)>) {
    if let Some((notice, wait_s)) = cancel {
        let _ = send(&h.sink, &StepIo::Cancelled { notice, wait_s });
    }
    (h.signal)(signal);
}

fn signal_group(pgid: i32, signal: i32) {
    let Ok(sig) = nix::sys::signal::Signal::try_from(signal) else { return };
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), sig);
}

fn set(env: &mut Vec<(String, String)>, k: &str, v: impl Into<String>) {
    let v = v.into();
    match env.iter_mut().find(|(key, _)| key == k) {
        Some(e) => e.1 = v,
        None => env.push((k.to_string(), v)),
    }
}

/// The environment of one task: `srun`'s environment with what Slurm sets for a step task
/// (srun(1) "OUTPUT ENVIRONMENT VARIABLES"): the job's identity (`SLURM_JOB_ID`, ... — also
/// when the caller deleted every `SLURM_*` variable), the step's (`SLURM_STEP_ID`,
/// `SLURM_STEP_NODELIST`, `SLURM_STEP_NUM_TASKS`, `SLURM_STEP_TASKS_PER_NODE`, and
/// `SLURM_NODELIST`, `SLURM_NTASKS`, `SLURM_TASKS_PER_NODE` as the step's), the task's
/// (`SLURM_PROCID` global rank, `SLURM_LOCALID` rank on the node, `SLURM_NODEID` node index in
/// the step), and its GPUs (`CUDA_VISIBLE_DEVICES` and friends; removed when it has none).
/// `local` is the task's index among this node's tasks. `srun --export` applies as it does to a
/// batch job ([`crate::env::exported`], from `SLURM_EXPORT_ENV`).
pub fn task_env(msg: &LaunchStep, facts: &NodeFacts, user: &crate::env::UserInfo, local: usize) -> Vec<(String, String)> {
    let l = &msg.layout;
    let node = msg.node_index as usize;
    let here = &l.tasks[node];
    let task = here[local];
    let mut env = crate::env::exported(&msg.environment, user);
    let job = l.job_id.to_string();
    let step = l.step_id.to_string();
    let step_nodes = flotilla_core::hostlist::compress(&l.nodes);
    let counts: Vec<u32> = l.tasks.iter().map(|t| t.len() as u32).collect();
    let ntasks = l.ntasks().to_string();
    let job_nnodes = flotilla_core::hostlist::expand(&msg.job_nodes).map_or(1, |v| v.len());
    let node_pos = flotilla_core::hostlist::expand(&msg.job_nodes)
        .ok()
        .and_then(|v| v.iter().position(|n| *n == facts.node));
    set(&mut env, "SLURM_JOB_ID", job.clone());
    set(&mut env, "SLURM_JOBID", job);
    set(&mut env, "SLURM_JOB_NAME", msg.job_name.clone());
    set(&mut env, "SLURM_JOB_NODELIST", msg.job_nodes.clone());
    set(&mut env, "SLURM_JOB_NUM_NODES", job_nnodes.to_string());
    set(&mut env, "SLURM_JOB_PARTITION", msg.partition.clone());
    set(&mut env, "SLURM_JOB_CPUS_PER_NODE", compress_counts(&msg.job_cpus_per_node));
    set(&mut env, "SLURM_JOB_UID", msg.uid.to_string());
    set(&mut env, "SLURM_JOB_USER", msg.user.clone());
    if let Some((a, t)) = msg.array {
        set(&mut env, "SLURM_ARRAY_JOB_ID", a.to_string());
        set(&mut env, "SLURM_ARRAY_TASK_ID", t.to_string());
    }
    set(&mut env, "SLURM_CLUSTER_NAME", facts.cluster_name.clone());
    set(&mut env, "SLURM_CONF", facts.conf_path.clone());
    set(&mut env, "FLOTILLA_CONF", facts.conf_path.clone());
    set(&mut env, "SLURMD_NODENAME", facts.node.clone());
    if let Some(c) = node_pos.and_then(|p| msg.job_cpus_per_node.get(p)) {
        set(&mut env, "SLURM_CPUS_ON_NODE", c.to_string());
    }
    if l.cpus_per_task > 1 {
        set(&mut env, "SLURM_CPUS_PER_TASK", l.cpus_per_task.to_string());
    }
    set(&mut env, "SLURM_STEP_ID", step.clone());
    set(&mut env, "SLURM_STEPID", step);
    set(&mut env, "SLURM_STEP_NODELIST", step_nodes.clone());
    set(&mut env, "SLURM_NODELIST", step_nodes);
    set(&mut env, "SLURM_STEP_NUM_NODES", l.nodes.len().to_string());
    set(&mut env, "SLURM_NNODES", l.nodes.len().to_string());
    set(&mut env, "SLURM_STEP_NUM_TASKS", ntasks.clone());
    set(&mut env, "SLURM_NTASKS", ntasks.clone());
    set(&mut env, "SLURM_NPROCS", ntasks);
    set(&mut env, "SLURM_STEP_TASKS_PER_NODE", compress_counts(&counts));
    set(&mut env, "SLURM_TASKS_PER_NODE", compress_counts(&counts));
    set(&mut env, "SLURM_DISTRIBUTION", "block");
    set(&mut env, "SLURM_PROCID", task.to_string());
    set(&mut env, "SLURM_LOCALID", local.to_string());
    set(&mut env, "SLURM_NODEID", node.to_string());
    set(&mut env, "SLURM_GTIDS", here.iter().map(u32::to_string).collect::<Vec<_>>().join(","));
    set(&mut env, "SLURM_TOPOLOGY_ADDR", facts.topology_addr.0.clone());
    set(&mut env, "SLURM_TOPOLOGY_ADDR_PATTERN", facts.topology_addr.1.clone());
    if let Some((host, port)) = msg.srun_addr.rsplit_once(':') {
        set(&mut env, "SLURM_SRUN_COMM_HOST", host);
        set(&mut env, "SLURM_SRUN_COMM_PORT", port);
        set(&mut env, "SLURM_LAUNCH_NODE_IPADDR", host);
    }
    const GPU_VARS: [&str; 4] = ["CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"];
    let gpus = gpu_indices(msg.task_gpus.get(local).copied().unwrap_or(0));
    if gpus.is_empty() {
        env.retain(|(k, _)| !GPU_VARS.contains(&k.as_str()) && k != "SLURM_STEP_GPUS");
    } else {
        let list = gpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        for k in GPU_VARS {
            set(&mut env, k, list.clone());
        }
        set(&mut env, "SLURM_STEP_GPUS", list);
    }
    env
}

/// Expands an `srun` output pattern for one task: srun(1) "IO Redirection": `%t` task id,
/// `%n` node index in the step, `%s` step id, `%J` `job.step`, `%N` the node's short host
/// name, and the job's letters (`%j %A %a %u %x %%`) as for batch output.
pub fn expand_pattern(p: &str, msg: &LaunchStep, task: u32, host: &str) -> String {
    let step = msg.layout.step_id.to_string();
    let job = msg.layout.job_id;
    let chars: Vec<char> = p.chars().collect();
    let mut pre = String::with_capacity(p.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '%' {
            pre.push(chars[i]);
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < chars.len() && chars[j].is_ascii_digit() {
            j += 1;
        }
        let Some(&letter) = chars.get(j) else {
            pre.extend(&chars[i..]);
            break;
        };
        let width: usize = chars[i + 1..j].iter().collect::<String>().parse().unwrap_or(0).min(64);
        let num = |v: String| if v.len() < width { format!("{}{v}", "0".repeat(width - v.len())) } else { v };
        match letter {
            't' => pre.push_str(&num(task.to_string())),
            'n' => pre.push_str(&num(msg.node_index.to_string())),
            's' => pre.push_str(&step),
            'J' => pre.push_str(&format!("{job}.{step}")),
            _ => pre.extend(&chars[i..=j]),
        }
        i = j + 1;
    }
    let vars = PatternVars {
        job_id: job,
        array: msg.array,
        job_name: &msg.job_name,
        user: &msg.user,
        host,
    };
    pattern::expand(&pre, &vars)
}

/// The connection to `srun`, shared by the threads that write to it. A write that fails or
/// blocks past [`SRUN_IO_TIMEOUT`] marks it dead and shuts it down (the reader then sees the
/// end and kills the step's tasks); later writes are dropped at once.
struct SrunLink {
    stream: Mutex<TcpStream>,
    dead: std::sync::atomic::AtomicBool,
}

type Sink = Arc<SrunLink>;

fn send(sink: &Sink, m: &StepIo) -> bool {
    send_while(sink, m, None)
}

/// [`send`], but while `running` holds (the task whose output `m` is still runs), a write
/// that blocks past [`SRUN_IO_TIMEOUT`] keeps waiting instead of taking `srun` for gone.
fn send_while(sink: &Sink, m: &StepIo, running: Option<&std::sync::atomic::AtomicBool>) -> bool {
    use std::sync::atomic::Ordering;
    if sink.dead.load(Ordering::Relaxed) {
        return false;
    }
    let mut s = sink.stream.lock().expect("sink lock");
    if sink.dead.load(Ordering::Relaxed) {
        return false;
    }
    let Err(e) = write_frame(&mut s, m, running) else { return true };
    warn!("srun's connection failed ({e}): taking srun for gone");
    sink.dead.store(true, Ordering::Relaxed);
    let _ = s.shutdown(std::net::Shutdown::Both);
    false
}

/// Writes one frame, all of it within [`SRUN_IO_TIMEOUT`] (a peer that takes a byte now and
/// then does not stretch it); while `running` holds, each time that passes starts another
/// (logged once per frame).
fn write_frame(s: &mut TcpStream, m: &StepIo, running: Option<&std::sync::atomic::AtomicBool>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    write_msg(&mut buf, m)?;
    let mut deadline = std::time::Instant::now() + SRUN_IO_TIMEOUT;
    let mut told = false;
    let mut off = 0;
    while off < buf.len() {
        let mut left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() && running.is_some_and(|r| r.load(std::sync::atomic::Ordering::Acquire)) {
            if !told {
                info!("srun has taken no output for 10 s; its task still runs: waiting for srun");
                told = true;
            }
            deadline = std::time::Instant::now() + SRUN_IO_TIMEOUT;
            left = SRUN_IO_TIMEOUT;
        }
        if left.is_zero() {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "srun took no frame within 10 s"));
        }
        s.set_write_timeout(Some(left))?;
        match s.write(&buf[off..]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => off += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Forwards a task's pipe to `srun` until the pipe ends; `running`: the task has not exited
/// (its output waits for a paused `srun` meanwhile).
fn pump(mut r: impl Read, sink: Sink, task: u32, stderr: bool, running: Arc<std::sync::atomic::AtomicBool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let data = buf[..n].to_vec();
                let m = if stderr { StepIo::Stderr { task, data } } else { StepIo::Stdout { task, data } };
                // srun gone: keep draining so that the task never blocks on a full pipe.
                let _ = send_while(&sink, &m, Some(&running));
            }
        }
    }
}

fn connect(addr: &str) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, format!("{addr} resolves to nothing"));
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, SRUN_IO_TIMEOUT) {
            Ok(s) => {
                s.set_write_timeout(Some(SRUN_IO_TIMEOUT))?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Which part of a task's start failed in its child (the byte the child writes on the status
/// pipe before it gives up), so that the error is reported with Slurm's words.
const STAGE_STDOUT: u8 = b'o';
const STAGE_STDERR: u8 = b'e';

/// One output file of a task, opened in the task's child as the user.
#[derive(Debug)]
struct OutFile {
    path: std::ffi::CString,
    flags: libc::c_int,
}

impl OutFile {
    /// `truncate`: the first opener of the file on this node (and not `--open-mode=append`).
    /// Every opener appends, so that the tasks sharing one file never overwrite each other.
    fn new(path: &str, truncate: bool) -> OutFile {
        let mut flags = libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC;
        if truncate {
            flags |= libc::O_TRUNC;
        }
        OutFile {
            path: std::ffi::CString::new(path.replace('\0', "")).expect("NULs removed"),
            flags,
        }
    }

    /// In the child, as the user: opens the file and puts it on each of `targets` (1, 2).
    /// Async-signal-safe (system calls on data prepared before the fork).
    #[allow(unsafe_code)]
    fn open_onto(&self, targets: &[libc::c_int]) -> std::io::Result<()> {
        // SAFETY: open(2) of a NUL-terminated path owned by `self`.
        let fd = unsafe { libc::open(self.path.as_ptr(), self.flags, 0o666 as libc::c_uint) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fcntl(2) and dup2(2) on the descriptor just opened; close(2) of it after.
        unsafe {
            // O_NONBLOCK was for the open only (a FIFO must not hang the launch).
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl >= 0 {
                libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
            }
            for &t in targets {
                if libc::dup2(fd, t) < 0 {
                    let e = std::io::Error::last_os_error();
                    libc::close(fd);
                    return Err(e);
                }
            }
            libc::close(fd);
        }
        Ok(())
    }
}

/// What a task's child does after it became the user ([`TaskJoin::in_child`]) and before it
/// execs: sets the job's umask (`SLURM_UMASK`), opens its output files as the user (never as
/// root: a user's path is the user's to open), and changes to the working directory, or to
/// `/tmp` with slurmstepd's message when it cannot.
#[derive(Debug)]
struct TaskIo {
    umask: libc::mode_t,
    stdout: Option<OutFile>,
    stderr: Option<OutFile>,
    /// Standard error goes to the stdout file (`-o` without `-e`).
    err_to_out: bool,
    dir: std::ffi::CString,
    /// `couldn't chdir to ...` messages by errno (ENOENT, EACCES, ENOTDIR, other).
    chdir_msgs: [Vec<u8>; 4],
    status: libc::c_int,
}

impl TaskIo {
    #[allow(unsafe_code)]
    fn in_child(&self) -> std::io::Result<()> {
        let report = |stage: u8, e: std::io::Error| {
            // SAFETY: write(2) of one byte to the status pipe this child inherited.
            unsafe { libc::write(self.status, (&stage as *const u8).cast(), 1) };
            Err(e)
        };
        // SAFETY: umask(2) cannot fail.
        unsafe { libc::umask(self.umask) };
        if let Some(o) = &self.stdout {
            let targets: &[libc::c_int] = if self.err_to_out { &[1, 2] } else { &[1] };
            if let Err(e) = o.open_onto(targets) {
                return report(STAGE_STDOUT, e);
            }
        }
        if let Some(o) = &self.stderr {
            if let Err(e) = o.open_onto(&[2]) {
                return report(STAGE_STDERR, e);
            }
        }
        // SAFETY: chdir(2) of NUL-terminated paths; write(2) of a buffer owned by `self`.
        unsafe {
            if libc::chdir(self.dir.as_ptr()) != 0 {
                let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                let m = &self.chdir_msgs[match errno {
                    libc::ENOENT => 0,
                    libc::EACCES => 1,
                    libc::ENOTDIR => 2,
                    _ => 3,
                }];
                libc::write(2, m.as_ptr().cast(), m.len());
                libc::chdir(c"/tmp".as_ptr());
            }
        }
        Ok(())
    }
}

/// The umask of a step's tasks: `SLURM_UMASK` of `srun`'s environment (octal), else 022, as
/// slurmstepd sets it.
fn task_umask(env: &[(String, String)]) -> libc::mode_t {
    env.iter()
        .find(|(k, _)| k == "SLURM_UMASK")
        .and_then(|(_, v)| libc::mode_t::from_str_radix(v, 8).ok())
        .map_or(0o022, |m| m & 0o777)
}

/// `--open-mode=append` (`SLURM_OPEN_MODE` of `srun`'s environment).
fn open_append(env: &[(String, String)]) -> bool {
    env.iter()
        .find(|(k, _)| k == "SLURM_OPEN_MODE")
        .is_some_and(|(_, v)| v.starts_with(['a', 'A']))
}

/// Starts this node's tasks of the step in `msg` (returns at once; threads do the rest).
/// `host` is the node's short host name (`%N`). Failures to reach `srun` are logged and the
/// tasks are not started; failures to start a task are reported to `srun` as Slurm does
/// (`slurmstepd: error: execve(): PROG: ...` on the task's stderr, exit code 2).
///
/// Errors (nothing started): [`MAX_RUNNING_STEPS_PER_JOB`] steps of the job run here
/// already, or no thread could be started.
pub fn launch(msg: LaunchStep, facts: NodeFacts, host: String, registry: StepRegistry) -> std::io::Result<()> {
    let key = (msg.layout.job_id, msg.layout.step_id);
    if !registry.step_started(key.0) {
        return Err(std::io::Error::other(format!(
            "job {} runs {MAX_RUNNING_STEPS_PER_JOB} steps on this node already: step {} refused",
            key.0, key.1
        )));
    }
    let reg = registry.clone();
    let r = std::thread::Builder::new().name(format!("step-{}.{}", key.0, key.1)).spawn(move || {
        if let Err(e) = run_step(&msg, &facts, &host, &reg) {
            warn!(job = key.0, step = key.1, "step launch failed: {e}");
        }
        reg.step_ended(key.0);
    });
    match r {
        Ok(_) => Ok(()),
        Err(e) => {
            registry.step_ended(key.0);
            Err(std::io::Error::other(format!("cannot start a thread for step {}.{}: {e}", key.0, key.1)))
        }
    }
}

/// How long a step's end waits for its usage report to be handed to the controller before
/// the last task's exit goes to `srun`.
const USAGE_SEND_WAIT: Duration = Duration::from_secs(2);

struct Task {
    id: u32,
    child: Child,
    pgid: i32,
    readers: Vec<std::thread::JoinHandle<()>>,
    /// Cleared when the task has exited ([`send_while`]).
    running: Arc<std::sync::atomic::AtomicBool>,
}

/// Waits until `pid` (a child) has exited, without reaping it: the zombie keeps its pid, and
/// so its process group id, from being handed out again.
fn wait_exited(pid: i32) {
    use nix::sys::wait::{waitid, Id, WaitPidFlag};
    loop {
        match waitid(Id::Pid(nix::unistd::Pid::from_raw(pid)), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Err(nix::errno::Errno::EINTR) => continue,
            _ => return,
        }
    }
}

fn run_step(msg: &LaunchStep, facts: &NodeFacts, host: &str, registry: &StepRegistry) -> std::io::Result<()> {
    let key = (msg.layout.job_id, msg.layout.step_id);
    let user = crate::env::UserInfo::of_uid(msg.uid, &msg.user);
    let stream = connect(&msg.srun_addr)?;
    let _ = stream.set_nodelay(true);
    let mut reader = stream.try_clone()?;
    let sink: Sink = Arc::new(SrunLink {
        stream: Mutex::new(stream),
        dead: Default::default(),
    });
    let hello = StepIo::Hello {
        job_id: key.0,
        step_id: key.1,
        node_index: msg.node_index,
        io_key: msg.io_key.clone(),
    };
    if !send(&sink, &hello) {
        return Err(std::io::Error::other("srun closed the connection"));
    }
    let me = nix::unistd::getuid();
    let here = msg.layout.tasks.get(msg.node_index as usize).cloned().unwrap_or_default();
    let shut = |sink: &Sink| {
        let _ = sink.stream.lock().expect("sink lock").shutdown(std::net::Shutdown::Write);
    };
    // The step's cgroup, joined by each task before it execs: no task starts unconfined.
    let cgroup: Option<StepCgroup> = match registry.1.step(key.0, key.1) {
        Ok(c) => c,
        Err(e) => {
            for &id in &here {
                let text = format!("slurmstepd: error: step cgroup: {e}\n");
                let _ = send(&sink, &StepIo::Stderr { task: id, data: text.into_bytes() });
                let _ = send(&sink, &StepIo::TaskExit { task: id, exit_code: 2, signal: 0 });
            }
            shut(&sink);
            return Err(std::io::Error::other(format!("step cgroup: {e}")));
        }
    };
    let groups = crate::env::groups_of(&user.name, msg.gid);
    let mut tasks: Vec<Task> = Vec::new();
    let mut stdins: Vec<ChildStdin> = Vec::new();
    // Output files already opened (so truncated) on this node by an earlier task.
    let mut opened: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let append = open_append(&msg.environment);
    let umask = task_umask(&msg.environment);
    let chdir_msgs = ["No such file or directory", "Permission denied", "Not a directory", "Input/output error"]
        .map(|why| format!("slurmstepd: error: couldn't chdir to `{}': {why}: going to /tmp instead\n", msg.work_dir).into_bytes());
    for (local, &id) in here.iter().enumerate() {
        let fail = |text: String| {
            let _ = send(&sink, &StepIo::Stderr { task: id, data: format!("slurmstepd: error: {text}\n").into_bytes() });
            let _ = send(&sink, &StepIo::TaskExit { task: id, exit_code: 2, signal: 0 });
        };
        if !me.is_root() && me.as_raw() != msg.uid {
            fail(format!("cannot run a task of uid {} as uid {me}", msg.uid));
            continue;
        }
        let Some(prog) = msg.argv.first() else {
            fail("no program to run".into());
            continue;
        };
        let mut cmd = Command::new(prog);
        cmd.args(&msg.argv[1..])
            .env_clear()
            .envs(task_env(msg, facts, &user, local))
            .process_group(0)
            .stdin(Stdio::piped());
        let out_path = msg.stdout.as_deref().map(|p| resolve(&expand_pattern(p, msg, id, host), &msg.work_dir));
        let err_path = msg.stderr.as_deref().map(|p| resolve(&expand_pattern(p, msg, id, host), &msg.work_dir));
        let mut out_file = |p: &Option<String>| {
            p.as_deref().map(|p| {
                let first = opened.insert(p.to_string());
                OutFile::new(p, first && !append)
            })
        };
        let stdout = out_file(&out_path);
        let stderr = out_file(&err_path);
        let (pipe_out, pipe_err) = (stdout.is_none(), stderr.is_none() && stdout.is_none());
        cmd.stdout(if pipe_out { Stdio::piped() } else { Stdio::null() });
        cmd.stderr(if pipe_err { Stdio::piped() } else { Stdio::null() });
        let (status_r, status_w) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
            Ok(p) => p,
            Err(e) => {
                fail(format!("pipe: {}", e.desc()));
                continue;
            }
        };
        let io = TaskIo {
            umask,
            err_to_out: stderr.is_none(),
            stdout,
            stderr,
            dir: std::ffi::CString::new(msg.work_dir.replace('\0', "")).expect("NULs removed"),
            chdir_msgs: chdir_msgs.clone(),
            status: std::os::fd::AsRawFd::as_raw_fd(&status_w),
        };
        // The child joins the step's cgroup (when confined), then becomes the user with her
        // supplementary groups ([`TaskJoin`]), then opens her output files and changes
        // directory as the user ([`TaskIo`]), all before it execs: no task starts unconfined,
        // a task reads what the user's groups may read (as the batch script does;
        // `Command::uid` would drop every supplementary group), and no path the user names
        // is opened by root.
        let join = match TaskJoin::new(cgroup.as_ref(), me.is_root().then_some((msg.uid, msg.gid)), &groups, "/") {
            Ok(j) => j,
            Err(e) => {
                fail(format!("step cgroup: {e}"));
                continue;
            }
        };
        // SAFETY: the closure only calls `TaskJoin::in_child` and `TaskIo::in_child`, which
        // are async-signal-safe (system calls on data prepared before the fork).
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(move || {
                join.in_child()?;
                io.in_child()
            });
        }
        let spawned = cmd.spawn();
        drop(status_w);
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let mut stage = [0u8; 1];
                let stage = match std::fs::File::from(status_r).read(&mut stage) {
                    Ok(1) => stage[0],
                    _ => 0,
                };
                let why = e.raw_os_error().map_or_else(|| e.to_string(), |n| nix::errno::Errno::from_raw(n).desc().to_string());
                match stage {
                    STAGE_STDOUT => fail(format!("Could not open stdout file {}: {why}", out_path.as_deref().unwrap_or_default())),
                    STAGE_STDERR => fail(format!("Could not open stderr file {}: {why}", err_path.as_deref().unwrap_or_default())),
                    _ => fail(format!("execve(): {prog}: {why}")),
                }
                continue;
            }
        };
        let pgid = child.id() as i32;
        registry.add(key, pgid);
        let mut readers = Vec::new();
        let running = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let mut pipes: Vec<(Box<dyn Read + Send>, bool)> = Vec::new();
        if let Some(o) = child.stdout.take() {
            pipes.push((Box::new(o), false));
        }
        if let Some(e) = child.stderr.take() {
            pipes.push((Box::new(e), true));
        }
        for (r, is_err) in pipes {
            let (s, run) = (sink.clone(), running.clone());
            match std::thread::Builder::new().name(format!("step-{}.{}-io", key.0, key.1)).spawn(move || pump(r, s, id, is_err, run)) {
                Ok(h) => readers.push(h),
                // The pipe's end is dropped: the task's writes fail (SIGPIPE), never block.
                Err(e) => warn!(job = key.0, step = key.1, task = id, "cannot start an output thread: {e}"),
            }
        }
        if let Some(i) = child.stdin.take() {
            stdins.push(i);
        }
        tasks.push(Task { id, child, pgid, readers, running });
    }
    info!(job = key.0, step = key.1, tasks = tasks.len(), "step tasks started");
    // srun → tasks: signals and standard input; srun gone: kill the tasks.
    {
        let cgroup = cgroup.clone();
        let step_signals = registry.clone();
        let registry = registry.clone();
        // Every process of the step when confined, else every live task's process group.
        let signal_step = move |sig: i32| match &cgroup {
            Some(cg) => {
                let _ = cg.cgroup.signal_all(sig);
            }
            None => registry.signal_step(key, sig),
        };
        let kill_step = signal_step.clone();
        let handle = StepHandle { sink: sink.clone(), signal: Arc::new(signal_step.clone()) };
        step_signals.step_running(key, handle);
        let r = std::thread::Builder::new().name(format!("step-{}.{}-srun", key.0, key.1)).spawn(move || {
            let mut stdins = Some(stdins);
            loop {
                match read_msg::<_, SrunIo>(&mut reader) {
                    Ok(SrunIo::Signal(sig)) => signal_step(sig),
                    Ok(SrunIo::Stdin(data)) => {
                        if let Some(v) = stdins.as_mut() {
                            v.retain_mut(|i| i.write_all(&data).is_ok());
                        }
                    }
                    Ok(SrunIo::StdinEof) => stdins = None,
                    Err(_) => {
                        signal_step(libc::SIGKILL);
                        return;
                    }
                }
            }
        });
        if let Err(e) = r {
            // Nobody would hear srun (its signals, its end): the step cannot run.
            warn!(job = key.0, step = key.1, "cannot start the thread reading srun: {e}: killing the step");
            kill_step(libc::SIGKILL);
        }
    }
    // Unconfined, a task's memory peak is read while it lives (a zombie has none left).
    let peaks = (cgroup.is_none()).then(|| crate::usage::PeakSampler::start(tasks.iter().map(|t| (t.id, t.pgid)).collect()));
    let mut task_usage: Vec<(u32, flotilla_proto::Usage)> = Vec::new();
    let ntasks = tasks.len();
    // Each task's end here; a task that could not start ended with exit code 2 (`fail`).
    let mut ends: Vec<(i32, i32)> = vec![(2, 0); here.len().saturating_sub(ntasks)];
    // The last task's exit waits for the step's usage report to go out (see below).
    let mut last_exit: Option<StepIo> = None;
    for (i, mut t) in tasks.into_iter().enumerate() {
        wait_exited(t.pgid);
        // The zombie's CPU times (its own and its reaped children's), before it is reaped: the
        // step's usage unconfined, its CPU where the cgroup keeps none (v1 without cpuacct).
        let mut u = crate::usage::proc_usage(t.pgid).unwrap_or_default();
        if let Some(p) = &peaks {
            (u.max_rss, u.max_vmsize) = p.peak(t.id);
        }
        task_usage.push((t.id, u));
        // Its output still in flight no longer waits for a paused srun.
        t.running.store(false, std::sync::atomic::Ordering::Release);
        // Whatever the task left in its group goes with it, while the group is still its;
        // what it wrote stays readable in its pipes.
        registry.task_ended(key, t.pgid);
        for r in t.readers.drain(..) {
            let _ = r.join();
        }
        let status = t.child.wait();
        let (exit_code, signal) = match status {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(c), _) => (c, 0),
                (None, Some(sig)) => (0, sig),
                _ => (0, 0),
            },
            Err(_) => (0, libc::SIGKILL),
        };
        ends.push((exit_code, signal));
        let exit = StepIo::TaskExit { task: t.id, exit_code, signal };
        if i + 1 == ntasks {
            last_exit = Some(exit);
        } else {
            let _ = send(&sink, &exit);
        }
    }
    let step_name = format!("{}/step_{}", crate::jobcg::job_name(key.0), key.1);
    let by_task = crate::usage::fold_tasks(&task_usage);
    let usage = match &cgroup {
        Some(_) => registry.1.usage_of(&step_name).map(|mut u| {
            u.ntasks = here.len() as u32;
            if u.total_usec == 0 {
                (u.user_usec, u.system_usec, u.total_usec) = (by_task.user_usec, by_task.system_usec, by_task.total_usec);
            }
            (u.min_cpu_usec, u.min_cpu_task, u.max_rss_task) = (by_task.min_cpu_usec, by_task.min_cpu_task, by_task.max_rss_task);
            u
        }),
        None => Some(by_task),
    };
    drop(peaks);
    if let Some(usage) = usage {
        info!(job = key.0, step = key.1, cpu_us = usage.total_usec, max_rss = usage.max_rss, "step usage at its end");
        let n = registry.3.push(flotilla_proto::StepUsage {
            job_id: key.0,
            // An srun step belongs to the job's current run (the controller knows which).
            run: 0,
            step: key.1.to_string(),
            node: facts.node.clone(),
            usage,
            done: true,
            at: crate::stepd::wall_now(),
            exit: flotilla_proto::step::worst_end(ends.iter().copied()),
        });
        // srun reports the step complete once it has every task's exit: the usage goes to the
        // controller first (bounded: a controller away does not hold srun).
        if !registry.3.wait_sent(n, USAGE_SEND_WAIT) {
            warn!(job = key.0, step = key.1, "the step's usage report is not sent yet: telling srun of the end anyway");
        }
    }
    if let Some(exit) = last_exit {
        let _ = send(&sink, &exit);
    }
    if cgroup.is_some() {
        // Whatever the tasks left (daemonized children too) goes with the step.
        registry.1.end_step(key.0, key.1);
    }
    info!(job = key.0, step = key.1, "step tasks ended");
    registry.4.lock().expect("registry lock").running.remove(&key);
    shut(&sink);
    Ok(())
}

fn resolve(p: &str, work_dir: &str) -> String {
    if std::path::Path::new(p).is_absolute() {
        p.to_string()
    } else {
        std::path::Path::new(work_dir).join(p).to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::UserInfo;
    use flotilla_proto::step::StepLayout;

    fn msg() -> LaunchStep {
        LaunchStep {
            layout: StepLayout {
                job_id: 7,
                step_id: 2,
                nodes: vec!["gpu01".into(), "gpu02".into()],
                tasks: vec![(0..8).collect(), (8..16).collect()],
                cpus_per_task: 1,
            },
            node_index: 1,
            task_gpus: (0..8).map(|b| 1u64 << b).collect(),
            job_name: "train".into(),
            job_nodes: "gpu[01-02]".into(),
            job_cpus_per_node: vec![8, 8],
            partition: "batch".into(),
            user: "alice".into(),
            uid: 2001,
            environment: vec![
                ("PATH".into(), "/bin".into()),
                ("SLURM_JOB_ID".into(), "7".into()),
                ("CUDA_VISIBLE_DEVICES".into(), "0,1,2,3,4,5,6,7".into()),
            ],
            srun_addr: "10.0.0.1:4242".into(),
            ..LaunchStep::default()
        }
    }

    fn facts() -> NodeFacts {
        NodeFacts {
            node: "gpu02".into(),
            cluster_name: "c".into(),
            conf_path: "/etc/slurm/slurm.conf".into(),
            ..NodeFacts::default()
        }
    }

    fn get<'a>(env: &'a [(String, String)], k: &str) -> Option<&'a str> {
        env.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn rank_variables_of_the_second_node() {
        let env = task_env(&msg(), &facts(), &UserInfo::default(), 3);
        for (k, v) in [
            ("SLURM_PROCID", "11"),
            ("SLURM_LOCALID", "3"),
            ("SLURM_NODEID", "1"),
            ("SLURM_NTASKS", "16"),
            ("SLURM_NPROCS", "16"),
            ("SLURM_STEP_ID", "2"),
            ("SLURM_STEPID", "2"),
            ("SLURM_STEP_NODELIST", "gpu[01-02]"),
            ("SLURM_NODELIST", "gpu[01-02]"),
            ("SLURM_STEP_NUM_NODES", "2"),
            ("SLURM_STEP_NUM_TASKS", "16"),
            ("SLURM_STEP_TASKS_PER_NODE", "8(x2)"),
            ("SLURM_TASKS_PER_NODE", "8(x2)"),
            ("SLURM_GTIDS", "8,9,10,11,12,13,14,15"),
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOBID", "7"),
            ("SLURM_JOB_NODELIST", "gpu[01-02]"),
            ("SLURM_JOB_NUM_NODES", "2"),
            ("SLURM_CPUS_ON_NODE", "8"),
            ("SLURMD_NODENAME", "gpu02"),
            ("CUDA_VISIBLE_DEVICES", "3"),
            ("SLURM_STEP_GPUS", "3"),
            ("SLURM_SRUN_COMM_HOST", "10.0.0.1"),
            ("SLURM_SRUN_COMM_PORT", "4242"),
            ("FLOTILLA_CONF", "/etc/slurm/slurm.conf"),
            ("PATH", "/bin"),
        ] {
            assert_eq!(get(&env, k), Some(v), "{k}");
        }
        assert_eq!(env.iter().filter(|(k, _)| k == "SLURM_JOB_ID").count(), 1);
    }

    #[test]
    fn no_gpus_removes_the_inherited_ones() {
        let mut m = msg();
        m.task_gpus = vec![0; 8];
        let env = task_env(&m, &facts(), &UserInfo::default(), 0);
        assert_eq!(get(&env, "CUDA_VISIBLE_DEVICES"), None);
    }

    /// `--cgroup none`: once a task's leader is reaped its process group id may be anyone's,
    /// so the registry forgets the group before the leader is reaped, and signals stop.
    #[test]
    fn an_ended_tasks_group_is_never_signalled() {
        use std::os::unix::process::CommandExt;
        let r = StepRegistry::default();
        let mut child = Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
        let pgid = child.id() as i32;
        r.add((1, 0), pgid);
        assert_eq!(r.signal_job(1, libc::SIGKILL), 1);
        wait_exited(pgid);
        // Exited, not reaped: the group id is still the task's.
        assert_eq!(r.signal_job(1, libc::SIGKILL), 1);
        r.task_ended((1, 0), pgid);
        let st = child.wait().unwrap();
        assert_eq!(st.signal(), Some(libc::SIGKILL));
        assert_eq!(r.signal_job(1, libc::SIGTERM), 0, "a reaped task's group is not signalled");
        assert!(r.steps().is_empty());
    }

    #[test]
    fn running_steps_per_job_are_capped() {
        let r = StepRegistry::default();
        for _ in 0..MAX_RUNNING_STEPS_PER_JOB {
            assert!(r.step_started(7));
        }
        assert!(!r.step_started(7), "one more is refused");
        assert!(r.step_started(8), "another job's are counted apart");
        r.step_ended(7);
        assert!(r.step_started(7));
    }

    /// `scancel JOB.STEP` before the step's tasks started here: the signal (and a cancel's
    /// notice, ahead of it on srun's connection) reaches the step as it starts; another job's
    /// step gets nothing, and an ended job's kept signals are dropped.
    #[test]
    fn a_signal_before_the_step_started_reaches_it_as_it_starts() {
        let r = StepRegistry::default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut srun, _) = listener.accept().unwrap();
        let got: Arc<Mutex<Vec<i32>>> = Arc::default();
        let handle = |got: &Arc<Mutex<Vec<i32>>>, stream: TcpStream| {
            let got = Arc::clone(got);
            StepHandle {
                sink: Arc::new(SrunLink { stream: Mutex::new(stream), dead: Default::default() }),
                signal: Arc::new(move |s| got.lock().unwrap().push(s)),
            }
        };
        assert!(!r.signal_one(5, 0, 9, Some((b"notice\n".to_vec(), 7))), "not started yet");
        assert!(!r.signal_one(6, 0, 10, None));
        r.forget_job(6);
        r.step_running((5, 0), handle(&got, stream.try_clone().unwrap()));
        assert_eq!(*got.lock().unwrap(), vec![9]);
        match read_msg::<_, StepIo>(&mut srun).unwrap() {
            StepIo::Cancelled { notice, wait_s } => assert_eq!((notice, wait_s), (b"notice\n".to_vec(), 7)),
            m => panic!("{m:?}"),
        }
        assert!(r.signal_one(5, 0, 10, None), "running: delivered at once");
        assert_eq!(*got.lock().unwrap(), vec![9, 10]);
        let other: Arc<Mutex<Vec<i32>>> = Arc::default();
        r.step_running((6, 0), handle(&other, stream));
        assert!(other.lock().unwrap().is_empty(), "job 6's kept signal was dropped with its end");
    }

    #[test]
    fn task_umask_and_open_mode() {
        let env = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(task_umask(&[]), 0o022);
        assert_eq!(task_umask(&env("SLURM_UMASK", "0077")), 0o077);
        assert_eq!(task_umask(&env("SLURM_UMASK", "junk")), 0o022);
        assert!(open_append(&env("SLURM_OPEN_MODE", "append")));
        assert!(!open_append(&env("SLURM_OPEN_MODE", "truncate")));
        assert!(!open_append(&[]));
    }

    #[test]
    fn output_patterns() {
        let m = msg();
        assert_eq!(expand_pattern("%j_%t_log.out", &m, 11, "h"), "7_11_log.out");
        assert_eq!(expand_pattern("%A_%a_%3t.%N.%n.%s.%J.%%", &m, 1, "h"), "7_4294967294_001.h.1.2.7.2.%");
        let mut a = msg();
        a.array = Some((5, 3));
        assert_eq!(expand_pattern("%A_%a_%t", &a, 0, "h"), "5_3_0");
    }
}
