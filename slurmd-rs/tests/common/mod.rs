//! Test support: a slurm.conf like the reference cluster's in a temp dir, the real
//! `slurmctld` on an OS-chosen port, real `slurmd` daemons (fake 8-GPU inventories, injectable
//! boot ids), and a client that signs its own credentials with the cluster key.
//!
//! The controller binary: `FLOTILLA_SLURMCTLD_BIN` if set, else `slurmctld` in the target
//! directory beside this test binary (`target/<profile>/slurmctld`, which `cargo test
//! --workspace` and nextest build along with every workspace binary). When it is missing the
//! tests fail with how to build it (they are never skipped silently).
#![allow(dead_code)]

use flotilla_proto::client::Client;
use flotilla_proto::{ClusterKey, JobInfo, JobQuery, Request, Response, Role, SubmitJob};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The `slurmctld` binary.
pub fn slurmctld_bin() -> PathBuf {
    if let Ok(p) = std::env::var("FLOTILLA_SLURMCTLD_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test> -> target/<profile>/slurmctld
    let p = exe.parent().and_then(Path::parent).unwrap().join("slurmctld");
    assert!(
        p.exists(),
        "{} not found: build it with `cargo build -p flotilla-slurmctld` (cargo test --workspace does), or set FLOTILLA_SLURMCTLD_BIN",
        p.display()
    );
    p
}

pub fn hostname() -> String {
    nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .split('.')
        .next()
        .unwrap()
        .to_string()
}

/// A test cluster: temp dir with slurm.conf (4 nodes gpu[01-04], 8 h100 each, tree topology),
/// topology.conf, the key.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub key: ClusterKey,
    pub ctld: Option<Child>,
    pub addr: SocketAddr,
    pub nodes: Vec<(String, Option<Child>)>,
    /// `slurmd --heartbeat-ms` of the nodes started after it is set (200 by default).
    pub heartbeat_ms: u64,
}

impl Cluster {
    /// Writes the configuration and starts the controller with `ctld_args`.
    pub fn start(kill_wait_s: u32, ctld_args: &[&str]) -> Cluster {
        Cluster::start_with(kill_wait_s, "", ctld_args)
    }

    /// [`Cluster::start`] with `extra_conf` (whole lines) appended to slurm.conf's global keys.
    pub fn start_with(kill_wait_s: u32, extra_conf: &str, ctld_args: &[&str]) -> Cluster {
        let mut c = Cluster::configure(kill_wait_s, extra_conf);
        c.start_ctld(ctld_args);
        c
    }

    /// The configuration of [`Cluster::start_with`] without a controller: the test plays the
    /// controller itself at [`Cluster::addr`], which it sets before starting nodes.
    pub fn configure(kill_wait_s: u32, extra_conf: &str) -> Cluster {
        let dir = tempfile::Builder::new().prefix("flt").tempdir_in("/tmp").unwrap();
        // The jobs of the non-root test run as another user: let them reach the temp dir.
        std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let key = ClusterKey::generate(&dir.path().join("slurm.key")).unwrap();
        let d = dir.path().display();
        let host = hostname();
        let mut conf = format!(
            "ClusterName=oracle\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort=6817\nSlurmUser=root\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool/%n\nSchedulerType=sched/backfill\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_Core_Memory\nDefMemPerCPU=1024\nGresTypes=gpu\n\
             TopologyPlugin=topology/tree\nMaxArraySize=10001\nMinJobAge=3600\nKillWait={kill_wait_s}\n{extra_conf}"
        );
        for i in 1..=4 {
            conf.push_str(&format!(
                "NodeName=gpu{i:02} NodeAddr=127.0.0.1 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=512000 Gres=gpu:h100:8 State=UNKNOWN\n"
            ));
        }
        conf.push_str("PartitionName=batch Nodes=gpu[01-04] Default=YES DefaultTime=01:00:00 MaxTime=2-00:00:00 State=UP\n");
        conf.push_str("PartitionName=debug Nodes=gpu[01-02] Default=NO MaxTime=00:30:00 State=UP\n");
        std::fs::write(dir.path().join("slurm.conf"), conf).unwrap();
        std::fs::write(
            dir.path().join("topology.conf"),
            "SwitchName=leaf1 Nodes=gpu[01-02]\nSwitchName=leaf2 Nodes=gpu[03-04]\nSwitchName=spine Switches=leaf[1-2]\n",
        )
        .unwrap();
        Cluster {
            dir,
            key,
            ctld: None,
            addr: "127.0.0.1:1".parse().unwrap(),
            nodes: Vec::new(),
            heartbeat_ms: 200,
        }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn start_ctld(&mut self, extra: &[&str]) {
        let addr_file = self.path("ctld.addr");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("slurmctld.log"))
            .unwrap();
        let child = Command::new(slurmctld_bin())
            .arg("-D")
            .arg("-f")
            .arg(self.path("slurm.conf"))
            .arg("--key")
            .arg(self.path("slurm.key"))
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--socket")
            .arg(self.path("ctld.sock"))
            .arg("--addr-file")
            .arg(&addr_file)
            .args(["--tick-ms", "100", "--sched-interval-ms", "100", "--debounce-ms", "5", "--batch-sched-delay-ms", "0", "--sync", "normal"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn slurmctld");
        self.ctld = Some(child);
        let t0 = Instant::now();
        self.addr = loop {
            if let Ok(s) = std::fs::read_to_string(&addr_file) {
                break s.trim().parse().unwrap();
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "slurmctld did not start; see its log");
            std::thread::sleep(Duration::from_millis(10));
        };
    }

    /// SIGKILLs the controller and starts it again (same state directory, a new port: the
    /// daemons started after this reach it; running ones keep the old address).
    pub fn restart_ctld(&mut self, extra: &[&str]) {
        if let Some(mut c) = self.ctld.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(self.path("ctld.addr"));
        let _ = std::fs::remove_file(self.path("ctld.sock"));
        self.start_ctld(extra);
    }

    /// Sets node `i`'s (1-based) kernel boot id.
    pub fn set_boot_id(&self, i: usize, id: &str) {
        std::fs::write(self.path(&format!("boot_id.gpu{i:02}")), format!("{id}\n")).unwrap();
    }

    /// Starts `slurmd -N gpuNN` (1-based `i`).
    pub fn start_node(&mut self, i: usize) {
        let name = format!("gpu{i:02}");
        let boot = self.path(&format!("boot_id.{name}"));
        if !boot.exists() {
            self.set_boot_id(i, "boot-1");
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path(&format!("slurmd-{name}.log")))
            .unwrap();
        let heartbeat = self.heartbeat_ms.to_string();
        let child = Command::new(env!("CARGO_BIN_EXE_slurmd"))
            // Production mode as root (`FLOTILLA_TEST_ROOT=1`): cgroups on, each test cluster
            // in its own cgroup scope, since several run at once with the same node names.
            .args(["-D", "-N", &name, "--fake-gpus", "8", "--heartbeat-ms", &heartbeat, "--cgroup", cgroup_mode()])
            .arg("--cgroup-scope")
            .arg(self.cgroup_scope())
            // GPU health from a file the test appends to (never the host's NVML): see
            // `inject_health`.
            .arg("--health")
            .arg(format!("fake:{}", self.path(&format!("health.{name}.jsonl")).display()))
            .args(["--health-poll-ms", "100"])
            .arg("-f")
            .arg(self.path("slurm.conf"))
            .arg("--key")
            .arg(self.path("slurm.key"))
            .arg("--ctld")
            .arg(self.addr.to_string())
            .arg("--boot-id-file")
            .arg(&boot)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn slurmd");
        match self.nodes.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = Some(child),
            None => self.nodes.push((name, Some(child))),
        }
    }

    /// Makes node `i`'s (1-based) health source report `event` (appended to the file its
    /// `--health fake:PATH` reads).
    pub fn inject_health(&self, i: usize, event: &flotilla_core::health::HealthEvent) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path(&format!("health.gpu{i:02}.jsonl")))
            .unwrap();
        writeln!(f, "{}", serde_json::to_string(event).unwrap()).unwrap();
    }

    /// The controller's view of the nodes.
    pub fn nodes(&self) -> Vec<flotilla_proto::NodeInfo> {
        match self.call(0, Request::QueryNodes(Default::default())) {
            Ok(Response::Nodes(v)) => v,
            other => panic!("node query failed: {other:?}"),
        }
    }

    /// SIGKILLs node `i`'s daemon (its jobs' supervisors live on).
    pub fn kill_node(&mut self, i: usize) {
        let name = format!("gpu{i:02}");
        if let Some((_, Some(c))) = self.nodes.iter_mut().find(|(n, _)| *n == name) {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(slot) = self.nodes.iter_mut().find(|(n, _)| *n == name) {
            slot.1 = None;
        }
    }

    /// Starts nodes `1..=n` and waits until the controller sees them idle.
    pub fn start_nodes(&mut self, n: usize) {
        for i in 1..=n {
            self.start_node(i);
        }
        let ok = wait_for(30, || {
            let nodes = match self.call(0, Request::QueryNodes(Default::default())) {
                Ok(Response::Nodes(v)) => v,
                _ => return false,
            };
            nodes.iter().filter(|n| !n.not_responding && n.state == "IDLE").count() >= n
        });
        assert!(ok, "nodes did not come up; {}", self.logs());
    }

    pub fn cred(&self, uid: u32) -> flotilla_proto::Credential {
        self.key.sign(uid, uid, "testhost", now(), 300)
    }

    pub fn call(&self, uid: u32, req: Request) -> Result<Response, String> {
        let mut c = Client::connect_tcp(self.addr, Role::Command).map_err(|e| e.to_string())?;
        if let flotilla_proto::client::Stream::Tcp(s) = c.stream() {
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        }
        c.call(Some(self.cred(uid)), req).map_err(|e| e.to_string())
    }

    /// Submits; returns the job id.
    pub fn submit(&self, s: SubmitJob) -> u64 {
        match self.call(s.uid, Request::SubmitJob(Box::new(s))) {
            Ok(Response::Submitted(x)) => x.job_id,
            other => panic!("submit failed: {other:?}"),
        }
    }

    pub fn jobs(&self) -> Vec<JobInfo> {
        match self.call(
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

    pub fn job(&self, id: u64) -> Option<JobInfo> {
        self.jobs().into_iter().find(|j| j.job_id == id)
    }

    /// Waits until job `id` is in a finished state; returns it.
    pub fn wait_done(&self, id: u64, secs: u64) -> JobInfo {
        let mut last = None;
        let ok = wait_for(secs, || {
            last = self.job(id);
            last.as_ref().is_some_and(|j| j.state.is_some_and(|s| s.is_finished()))
        });
        assert!(ok, "job {id} did not finish in {secs} s: {last:?}\n{}", self.logs());
        last.unwrap()
    }

    /// Waits until job `id` runs; returns it.
    pub fn wait_running(&self, id: u64, secs: u64) -> JobInfo {
        let mut last = None;
        let ok = wait_for(secs, || {
            last = self.job(id);
            last.as_ref().is_some_and(|j| j.state == Some(flotilla_proto::JobStateWire::Running))
        });
        assert!(ok, "job {id} did not start in {secs} s: {last:?}\n{}", self.logs());
        last.unwrap()
    }

    /// The controller's counters (`Request::QueryTurns`).
    pub fn turns(&self) -> Turns {
        match self.call(0, Request::QueryTurns) {
            Ok(Response::Turns { turns, cycles, cycle_due }) => Turns { turns, cycles, cycle_due },
            other => panic!("turn query failed: {other:?}"),
        }
    }

    /// A barrier: returns once the controller has completed `n` scheduling cycles that began
    /// after this call's first query was handled, each committed with its turn, so whatever
    /// those cycles decided about earlier events is visible. Use it before asserting that
    /// something did *not* happen. Fails the test after 20 s (the test controller runs a
    /// periodic cycle every 100 ms).
    pub fn wait_cycles(&self, n: u64) -> Turns {
        let start = self.turns();
        let t0 = Instant::now();
        loop {
            let now = self.turns();
            if now.cycles >= start.cycles + n {
                return now;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "timed out after 20 s waiting for {n} scheduling cycles after {start:?} (now {now:?})\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Lines of log `name` (`slurmctld.log`, `slurmd-gpu01.log`, ...) that contain `text`.
    pub fn log_lines(&self, name: &str, text: &str) -> usize {
        std::fs::read_to_string(self.path(name)).unwrap_or_default().lines().filter(|l| l.contains(text)).count()
    }

    /// The tail of every log, for failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        let mut names = vec!["slurmctld.log".to_string()];
        names.extend(self.nodes.iter().map(|(n, _)| format!("slurmd-{n}.log")));
        for n in names {
            let text = std::fs::read_to_string(self.path(&n)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(25);
            out.push_str(&format!("---- {n} ----\n{}\n", lines[from..].join("\n")));
        }
        out
    }
}

/// The confinement test clusters' node daemons run with: `auto` (cgroups on, as a site runs
/// them) as root with `FLOTILLA_TEST_ROOT=1`, else `none`.
pub fn cgroup_mode() -> &'static str {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() == Ok("1") && nix::unistd::geteuid().is_root() {
        "auto"
    } else {
        "none"
    }
}

impl Cluster {
    /// This cluster's cgroup scope (`slurmd --cgroup-scope`): unique per test cluster (its
    /// temp dir's name), so clusters running at once never share job cgroups.
    pub fn cgroup_scope(&self) -> String {
        let base = self.dir.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        format!("test-{base}")
    }

    /// Removes this cluster's cgroup directories, `<controller>/flotilla/<scope>_*` with their
    /// job and step cgroups, under v1 and v2: what is left in them is SIGKILLed first, and a
    /// directory whose last process is still exiting is tried again for up to 2 s (cleanup
    /// only; nothing is asserted on it).
    fn remove_cgroup_dirs(&self) {
        fn remove_tree(dir: &std::path::Path) {
            if let Ok(rd) = std::fs::read_dir(dir) {
                for e in rd.flatten().filter(|e| e.path().is_dir()) {
                    remove_tree(&e.path());
                }
            }
            for _ in 0..100 {
                if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
                    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                    }
                }
                match std::fs::remove_dir(dir) {
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => std::thread::sleep(std::time::Duration::from_millis(20)),
                    _ => return,
                }
            }
        }
        let scope = format!("{}_", self.cgroup_scope());
        let root = std::path::Path::new("/sys/fs/cgroup");
        let mut bases = vec![root.join("flotilla")];
        if let Ok(rd) = std::fs::read_dir(root) {
            bases.extend(rd.flatten().map(|e| e.path().join("flotilla")));
        }
        for base in bases {
            let Ok(rd) = std::fs::read_dir(&base) else { continue };
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(&scope) {
                    remove_tree(&e.path());
                }
            }
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, c) in &mut self.nodes {
            if let Some(c) = c {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if let Some(c) = &mut self.ctld {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Supervisors outlive their daemons by design: end the ones this test started.
        if let Ok(rd) = std::fs::read_dir("/proc") {
            let me = self.dir.path().to_string_lossy().into_owned();
            for e in rd.flatten() {
                let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
                let cmd = String::from_utf8_lossy(&cmd);
                if cmd.contains("--stepd") && cmd.contains(&me) {
                    if let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() {
                        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                    }
                }
            }
        }
        if cgroup_mode() == "auto" {
            self.remove_cgroup_dirs();
        }
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

/// Waits until `f` is true or `secs` pass; returns whether it became true. The caller asserts
/// the result (with what it waited for), so that a wait that timed out fails the test.
#[must_use = "a wait that timed out must fail the test: assert the result"]
pub fn wait_for(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Pids of processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<i32> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
            if pid == std::process::id() as i32 {
                continue;
            }
            let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
            let cmd: String = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) {
                v.push(pid);
            }
        }
    }
    v
}

/// A job for the current user running `script` in `dir`.
pub fn job(script: &str, dir: &Path) -> SubmitJob {
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name);
    SubmitJob {
        name: Some("wrap".into()),
        script: script.into(),
        work_dir: dir.to_string_lossy().into_owned(),
        uid,
        gid,
        user,
        submit_host: hostname(),
        account: Some("research".into()),
        environment: vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("SLURM_SUBMIT_DIR".into(), dir.to_string_lossy().into_owned()),
            ("SLURM_SUBMIT_HOST".into(), hostname()),
        ],
        ..SubmitJob::default()
    }
}
