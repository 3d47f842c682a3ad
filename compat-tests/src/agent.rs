//! A stand-in node daemon for end-to-end tests until `slurmd-rs` lands: it registers a node
//! with the controller, heartbeats, and *really runs* batch scripts (as the job's user when
//! the test runs as root), writing Slurm's default output files in the job's working
//! directory, delivering signals to the script's process group and reporting exits. No
//! cgroups, no steps, no prolog: only what the goldens' jobs need.

use flotilla_proto::client::{Client, ClientError, Stream};
use flotilla_proto::{Bind, ClusterKey, CtlToNode, Frame, JobExit, NodeJob, NodeToCtl, ProtoError, Register, Request, Response, Role};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A running fake node daemon; stops (killing its jobs) when dropped.
#[derive(Debug)]
pub struct Agent {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Agent {
    /// Starts a daemon for `node` talking to the controller at `addr`, keeping job scripts
    /// in `spool`.
    pub fn spawn(key: ClusterKey, node: &str, addr: SocketAddr, spool: PathBuf, cluster: &str) -> Agent {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let node = node.to_string();
        let cluster = cluster.to_string();
        let handle = std::thread::spawn(move || agent_main(key, node, addr, spool, cluster, s2));
        Agent {
            stop,
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

struct Running {
    run: u32,
    mask: u64,
    child: Option<Child>,
    batch_host: bool,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn agent_main(key: ClusterKey, node: String, addr: SocketAddr, spool: PathBuf, cluster: String, stop: Arc<AtomicBool>) {
    let mut running: HashMap<u64, Running> = HashMap::new();
    let mut finished: Vec<JobExit> = Vec::new();
    let mut seen: HashSet<(u64, u32)> = HashSet::new();
    while !stop.load(Ordering::SeqCst) {
        let Ok(mut c) = Client::connect_tcp(addr, Role::NodeDaemon) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        if let Stream::Tcp(s) = c.stream() {
            let _ = s.set_read_timeout(Some(Duration::from_millis(20)));
        }
        let reg = Register {
            node: node.clone(),
            boot_epoch: 1,
            gpus: 8,
            cpus: 64,
            mem_mib: 512_000,
            running: running_of(&running),
            finished: finished.clone(),
        };
        let cred = key.sign(0, 0, &node, now().max(0) as u64, 300);
        if c.send(&Frame::Request { id: 1, auth: Some(cred), body: Request::Register(reg) }).is_err() {
            continue;
        }
        let mut registered = false;
        let mut last_hb = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            match c.recv() {
                Ok(Frame::Response { body: Response::Registered, .. }) => registered = true,
                Ok(Frame::Response { .. }) => {}
                Ok(Frame::ToNode(m)) => handle(&mut running, &mut finished, &mut seen, &node, &spool, &cluster, m),
                Ok(_) => {}
                Err(ClientError::Proto(ProtoError::Io(e)))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
            let newly = reap(&mut running, &mut finished);
            if !registered {
                continue;
            }
            let mut ok = true;
            for e in newly {
                ok &= c.send(&Frame::FromNode(NodeToCtl::JobExited(e))).is_ok();
            }
            if last_hb.elapsed() > Duration::from_millis(500) {
                last_hb = Instant::now();
                ok &= c
                    .send(&Frame::FromNode(NodeToCtl::Heartbeat {
                        boot_epoch: 1,
                        running: running_of(&running),
                        finished: finished.clone(),
                    }))
                    .is_ok();
            }
            if !ok {
                break;
            }
        }
    }
    for r in running.values_mut() {
        if let Some(ch) = r.child.as_mut() {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(ch.id() as i32), nix::sys::signal::Signal::SIGKILL);
            let _ = ch.wait();
        }
    }
}

fn running_of(running: &HashMap<u64, Running>) -> Vec<NodeJob> {
    running
        .iter()
        .map(|(id, r)| NodeJob {
            job_id: *id,
            run: r.run,
            gpu_mask: r.mask,
        })
        .collect()
}

fn reap(running: &mut HashMap<u64, Running>, finished: &mut Vec<JobExit>) -> Vec<JobExit> {
    let mut out = Vec::new();
    let done: Vec<(u64, i32, i32)> = running
        .iter_mut()
        .filter_map(|(id, r)| {
            let ch = r.child.as_mut()?;
            match ch.try_wait() {
                Ok(Some(st)) => Some((*id, st.code().unwrap_or(0), st.signal().unwrap_or(0))),
                _ => None,
            }
        })
        .collect();
    for (id, code, sig) in done {
        let r = running.remove(&id).expect("listed");
        let e = JobExit {
            job_id: id,
            run: r.run,
            exit_code: code,
            signal: sig,
            oom: false,
            end_time: now(),
        };
        finished.push(e.clone());
        out.push(e);
    }
    out
}

/// Slurm's output file name patterns (`%j %J %A %a %x %u %N %n %t %%`, `%5j` zero-pads).
pub fn expand_pattern(pat: &str, b: &Bind, node: &str) -> String {
    let mut out = String::new();
    let mut chars = pat.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch != '%' {
            out.push(ch);
            continue;
        }
        let mut width = 0usize;
        while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
            width = width * 10 + d as usize;
            chars.next();
        }
        let Some(k) = chars.next() else {
            out.push('%');
            break;
        };
        let num = |n: u64| format!("{n:0width$}");
        let (aid, task) = match b.array {
            Some((a, t)) => (a, Some(t)),
            None => (b.job_id, None),
        };
        match k {
            '%' => out.push('%'),
            'j' | 'J' => out.push_str(&num(b.job_id)),
            'A' => out.push_str(&num(aid)),
            'a' => out.push_str(&num(task.map_or(u64::from(u32::MAX - 1), u64::from))),
            'x' => out.push_str(&b.name),
            'u' => out.push_str(&b.user),
            'N' => out.push_str(&crate::hostname()),
            'n' | 't' => out.push_str(&num(0)),
            's' => out.push_str("batch"),
            other => {
                out.push('%');
                out.push(other);
            }
        }
    }
    let _ = node;
    out
}

fn handle(
    running: &mut HashMap<u64, Running>,
    finished: &mut Vec<JobExit>,
    seen: &mut HashSet<(u64, u32)>,
    node: &str,
    spool: &std::path::Path,
    cluster: &str,
    m: CtlToNode,
) {
    // The controller sends `Launch` (a `Bind` plus launch details for a real slurmd); this
    // stand-in needs only the binding.
    let m = match m {
        CtlToNode::Launch { bind, .. } => CtlToNode::Bind(bind),
        other => other,
    };
    match m {
        CtlToNode::Bind(b) => {
            if !seen.insert((b.job_id, b.run)) {
                return;
            }
            let child = if b.batch_host { launch(&b, node, spool, cluster) } else { None };
            if b.batch_host && child.is_none() {
                // Could not start: report a launch failure at once.
                finished.push(JobExit {
                    job_id: b.job_id,
                    run: b.run,
                    exit_code: 1,
                    signal: 0,
                    oom: false,
                    end_time: now(),
                });
                return;
            }
            running.insert(
                b.job_id,
                Running {
                    run: b.run,
                    mask: b.gpu_mask,
                    child,
                    batch_host: b.batch_host,
                },
            );
        }
        CtlToNode::Signal { job_id, signal, batch_only } => {
            // Slurm signals job *steps* unless `-b`/`--full`; the batch shell is not a step and
            // these jobs run none, so such a signal reaches nothing (golden 0255: sleep.sh
            // survives `scancel --signal=USR1`). SIGTERM/SIGKILL are the controller stopping
            // the job and reach everything.
            if !batch_only && signal != 15 && signal != 9 {
                return;
            }
            if let Some(r) = running.get(&job_id) {
                if let (Some(ch), true) = (&r.child, r.batch_host) {
                    if let Ok(sig) = nix::sys::signal::Signal::try_from(signal) {
                        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(ch.id() as i32), sig);
                    }
                } else if signal == 15 || signal == 9 {
                    running.remove(&job_id);
                }
            }
        }
        CtlToNode::Kill { job_id } => {
            if let Some(r) = running.get_mut(&job_id) {
                match r.child.as_mut() {
                    Some(ch) => {
                        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(ch.id() as i32), nix::sys::signal::Signal::SIGKILL);
                    }
                    None => {
                        running.remove(&job_id);
                    }
                }
            }
        }
        CtlToNode::AckExits { job_ids } => finished.retain(|e| !job_ids.contains(&e.job_id)),
        CtlToNode::Launch { .. } => unreachable!("turned into Bind above"),
        // The goldens run no `srun` steps; this stand-in launches none.
        CtlToNode::LaunchStep(_) => {}
    }
}

fn launch(b: &Bind, node: &str, spool: &std::path::Path, cluster: &str) -> Option<Child> {
    let script = spool.join(format!("job{}.{}.sh", b.job_id, b.run));
    std::fs::write(&script, &b.script).ok()?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).ok()?;
    let default_out = if b.array.is_some() { "slurm-%A_%a.out" } else { "slurm-%j.out" };
    let resolve = |p: &str| -> PathBuf {
        let e = expand_pattern(p, b, node);
        if e.starts_with('/') {
            PathBuf::from(e)
        } else {
            PathBuf::from(&b.work_dir).join(e)
        }
    };
    let out_path = resolve(b.stdout.as_deref().unwrap_or(default_out));
    let open = |p: &PathBuf| -> Option<std::fs::File> {
        let f = std::fs::OpenOptions::new().create(true).append(true).open(p).ok()?;
        let _ = std::os::unix::fs::chown(p, Some(b.uid), Some(b.gid));
        Some(f)
    };
    let out = open(&out_path)?;
    let err = match &b.stderr {
        Some(e) => open(&resolve(e))?,
        None => out.try_clone().ok()?,
    };
    let mut cmd = Command::new(&script);
    cmd.args(&b.argv)
        .env_clear()
        .envs(b.environment.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&b.work_dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    let mut env: Vec<(String, String)> = vec![
        ("SLURM_JOB_ID".into(), b.job_id.to_string()),
        ("SLURM_JOBID".into(), b.job_id.to_string()),
        ("SLURM_JOB_NAME".into(), b.name.clone()),
        ("SLURM_JOB_NODELIST".into(), b.nodes.clone()),
        ("SLURM_NODELIST".into(), b.nodes.clone()),
        ("SLURMD_NODENAME".into(), node.into()),
        ("SLURM_CLUSTER_NAME".into(), cluster.into()),
        ("SLURM_JOB_PARTITION".into(), b.partition.clone()),
        ("SLURM_SUBMIT_DIR".into(), b.work_dir.clone()),
        ("SLURM_JOB_USER".into(), b.user.clone()),
        ("SLURM_JOB_UID".into(), b.uid.to_string()),
        ("SLURM_PROCID".into(), "0".into()),
        ("SLURM_LOCALID".into(), "0".into()),
        ("SLURM_NODEID".into(), "0".into()),
        ("SLURM_CPUS_ON_NODE".into(), b.cpus.to_string()),
    ];
    if let Some((a, t)) = b.array {
        env.push(("SLURM_ARRAY_JOB_ID".into(), a.to_string()));
        env.push(("SLURM_ARRAY_TASK_ID".into(), t.to_string()));
    }
    if b.gpu_mask != 0 {
        let ids: Vec<String> = (0..64).filter(|i| b.gpu_mask & (1 << i) != 0).map(|i: u32| i.to_string()).collect();
        env.push(("CUDA_VISIBLE_DEVICES".into(), ids.join(",")));
    }
    cmd.envs(env);
    if nix::unistd::getuid().is_root() {
        cmd.uid(b.uid).gid(b.gid);
    }
    cmd.spawn().ok()
}
