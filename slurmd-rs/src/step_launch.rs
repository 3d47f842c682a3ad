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
//! Unconfined: signals go to every task's process group ([`StepRegistry`]).
//!
//! Threads: one per step (waits for tasks), one per output pipe, one reading `srun`'s frames.

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

/// Process groups of the running tasks of every step on this node, by (job, step), and the
/// node's job cgroups.
#[derive(Debug, Clone, Default)]
pub struct StepRegistry(Arc<Mutex<Groups>>, Arc<NodeCgroups>);

impl StepRegistry {
    /// A registry whose steps are confined by `cgroups`.
    pub fn with_cgroups(cgroups: Arc<NodeCgroups>) -> StepRegistry {
        StepRegistry(Arc::default(), cgroups)
    }

    fn add(&self, key: (u64, u32), pgid: i32) {
        self.0.lock().expect("registry lock").entry(key).or_default().push(pgid);
    }

    fn remove_task(&self, key: (u64, u32), pgid: i32) {
        let mut m = self.0.lock().expect("registry lock");
        if let Some(v) = m.get_mut(&key) {
            v.retain(|&p| p != pgid);
            if v.is_empty() {
                m.remove(&key);
            }
        }
    }

    /// Sends `signal` to every task of every step of `job_id` on this node (`scancel`, the
    /// job's stop and kill): to every process of the steps' cgroups when confined, else to
    /// every task's process group. Returns how many step cgroups or task groups it reached.
    pub fn signal_job(&self, job_id: u64, signal: i32) -> usize {
        if self.1.confined() {
            return self.1.signal_steps(job_id, signal);
        }
        let groups: Vec<i32> = self
            .0
            .lock()
            .expect("registry lock")
            .range((job_id, 0)..=(job_id, u32::MAX))
            .flat_map(|(_, v)| v.iter().copied())
            .collect();
        for &g in &groups {
            signal_group(g, signal);
        }
        groups.len()
    }

    /// Steps with running tasks here.
    pub fn steps(&self) -> Vec<(u64, u32)> {
        self.0.lock().expect("registry lock").keys().copied().collect()
    }
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

type Sink = Arc<Mutex<TcpStream>>;

fn send(sink: &Sink, m: &StepIo) -> bool {
    let mut s = sink.lock().expect("sink lock");
    write_msg(&mut *s, m).is_ok()
}

fn pump(mut r: impl Read, sink: Sink, task: u32, stderr: bool) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let data = buf[..n].to_vec();
                let m = if stderr { StepIo::Stderr { task, data } } else { StepIo::Stdout { task, data } };
                // srun gone: keep draining so that the task never blocks on a full pipe.
                let _ = send(&sink, &m);
            }
        }
    }
}

fn connect(addr: &str) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, format!("{addr} resolves to nothing"));
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, Duration::from_secs(10)) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn open_out(path: &str, opened: &mut BTreeMap<String, std::fs::File>) -> std::io::Result<std::fs::File> {
    if let Some(f) = opened.get(path) {
        return f.try_clone();
    }
    let f = std::fs::OpenOptions::new().create(true).write(true).truncate(true).open(path)?;
    opened.insert(path.to_string(), f.try_clone()?);
    Ok(f)
}

/// Starts this node's tasks of the step in `msg` (returns at once; threads do the rest).
/// `host` is the node's short host name (`%N`). Failures to reach `srun` are logged and the
/// tasks are not started; failures to start a task are reported to `srun` as Slurm does
/// (`slurmstepd: error: execve(): PROG: ...` on the task's stderr, exit code 2).
pub fn launch(msg: LaunchStep, facts: NodeFacts, host: String, registry: StepRegistry) {
    let key = (msg.layout.job_id, msg.layout.step_id);
    std::thread::Builder::new()
        .name(format!("step-{}.{}", key.0, key.1))
        .spawn(move || {
            if let Err(e) = run_step(&msg, &facts, &host, &registry) {
                warn!(job = key.0, step = key.1, "step launch failed: {e}");
            }
        })
        .expect("spawn a step thread");
}

struct Task {
    id: u32,
    child: Child,
    pgid: i32,
    readers: Vec<std::thread::JoinHandle<()>>,
}

fn run_step(msg: &LaunchStep, facts: &NodeFacts, host: &str, registry: &StepRegistry) -> std::io::Result<()> {
    let key = (msg.layout.job_id, msg.layout.step_id);
    let user = crate::env::UserInfo::of_uid(msg.uid, &msg.user);
    let stream = connect(&msg.srun_addr)?;
    let _ = stream.set_nodelay(true);
    let mut reader = stream.try_clone()?;
    let sink: Sink = Arc::new(Mutex::new(stream));
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
    // The step's cgroup, joined by each task before it execs: no task starts unconfined.
    let cgroup: Option<StepCgroup> = match registry.1.step(key.0, key.1) {
        Ok(c) => c,
        Err(e) => {
            for &id in &here {
                let text = format!("slurmstepd: error: step cgroup: {e}\n");
                let _ = send(&sink, &StepIo::Stderr { task: id, data: text.into_bytes() });
                let _ = send(&sink, &StepIo::TaskExit { task: id, exit_code: 2, signal: 0 });
            }
            let _ = sink.lock().expect("sink lock").shutdown(std::net::Shutdown::Write);
            return Err(std::io::Error::other(format!("step cgroup: {e}")));
        }
    };
    let groups = crate::env::groups_of(&user.name, msg.gid);
    let mut tasks: Vec<Task> = Vec::new();
    let mut stdins: Vec<ChildStdin> = Vec::new();
    let mut opened: BTreeMap<String, std::fs::File> = BTreeMap::new();
    let work_dir = if std::path::Path::new(&msg.work_dir).is_dir() { msg.work_dir.as_str() } else { "/tmp" };
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
        // The child joins the step's cgroup (when confined), then becomes the user with her
        // supplementary groups and changes directory ([`TaskJoin`]), all before it execs: no
        // task starts unconfined, and a task reads what the user's groups may read (as the
        // batch script does; `Command::uid` would drop every supplementary group).
        if cgroup.is_none() && !me.is_root() {
            cmd.current_dir(work_dir);
        } else {
            let join = match TaskJoin::new(cgroup.as_ref(), me.is_root().then_some((msg.uid, msg.gid)), &groups, work_dir) {
                Ok(j) => j,
                Err(e) => {
                    fail(format!("step cgroup: {e}"));
                    continue;
                }
            };
            // SAFETY: the closure only calls `TaskJoin::in_child`, which is
            // async-signal-safe (system calls on data prepared before the fork).
            #[allow(unsafe_code)]
            unsafe {
                cmd.pre_exec(move || join.in_child());
            }
        }
        let out_path = msg.stdout.as_deref().map(|p| resolve(&expand_pattern(p, msg, id, host), &msg.work_dir));
        let err_path = msg.stderr.as_deref().map(|p| resolve(&expand_pattern(p, msg, id, host), &msg.work_dir));
        let mut pipe_out = true;
        let mut pipe_err = true;
        match &out_path {
            Some(p) => match open_out(p, &mut opened) {
                Ok(f) => {
                    pipe_out = false;
                    if err_path.is_none() {
                        cmd.stderr(f.try_clone()?);
                        pipe_err = false;
                    }
                    cmd.stdout(f);
                }
                Err(e) => {
                    fail(format!("Could not open stdout file {p}: {e}"));
                    continue;
                }
            },
            None => {
                cmd.stdout(Stdio::piped());
            }
        }
        match &err_path {
            Some(p) => match open_out(p, &mut opened) {
                Ok(f) => {
                    pipe_err = false;
                    cmd.stderr(f);
                }
                Err(e) => {
                    fail(format!("Could not open stderr file {p}: {e}"));
                    continue;
                }
            },
            None if pipe_err => {
                cmd.stderr(Stdio::piped());
            }
            None => {}
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let why = match e.kind() {
                    std::io::ErrorKind::NotFound => "No such file or directory".to_string(),
                    std::io::ErrorKind::PermissionDenied => "Permission denied".to_string(),
                    _ => e.to_string(),
                };
                fail(format!("execve(): {prog}: {why}"));
                continue;
            }
        };
        let pgid = child.id() as i32;
        registry.add(key, pgid);
        let mut readers = Vec::new();
        if pipe_out {
            if let Some(o) = child.stdout.take() {
                let s = sink.clone();
                readers.push(std::thread::spawn(move || pump(o, s, id, false)));
            }
        }
        if pipe_err {
            if let Some(e) = child.stderr.take() {
                let s = sink.clone();
                readers.push(std::thread::spawn(move || pump(e, s, id, true)));
            }
        }
        if let Some(i) = child.stdin.take() {
            stdins.push(i);
        }
        tasks.push(Task { id, child, pgid, readers });
    }
    drop(opened);
    info!(job = key.0, step = key.1, tasks = tasks.len(), "step tasks started");
    // srun → tasks: signals and standard input; srun gone: kill the tasks.
    let pgids: Vec<i32> = tasks.iter().map(|t| t.pgid).collect();
    {
        let cgroup = cgroup.clone();
        // Every process of the step when confined, else every task's process group.
        let signal_step = move |sig: i32| match &cgroup {
            Some(cg) => {
                let _ = cg.cgroup.signal_all(sig);
            }
            None => {
                for &g in &pgids {
                    signal_group(g, sig);
                }
            }
        };
        std::thread::spawn(move || {
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
    }
    for mut t in tasks {
        let status = t.child.wait();
        for r in t.readers.drain(..) {
            let _ = r.join();
        }
        // Whatever the task left in its group goes with it.
        signal_group(t.pgid, libc::SIGKILL);
        registry.remove_task(key, t.pgid);
        let (exit_code, signal) = match status {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(c), _) => (c, 0),
                (None, Some(sig)) => (0, sig),
                _ => (0, 0),
            },
            Err(_) => (0, libc::SIGKILL),
        };
        let _ = send(&sink, &StepIo::TaskExit { task: t.id, exit_code, signal });
    }
    if cgroup.is_some() {
        // Whatever the tasks left (daemonized children too) goes with the step.
        registry.1.end_step(key.0, key.1);
    }
    info!(job = key.0, step = key.1, "step tasks ended");
    let _ = sink.lock().expect("sink lock").shutdown(std::net::Shutdown::Write);
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
