//! The job's cgroup on every node (Slurm's extern step), end to end with real cgroups: a local
//! cluster of two node daemons (`gpu01`, `gpu02` on this host, `--cgroup auto`) whose GPUs are
//! fake device nodes named by gres.conf `File=`, running 2-node jobs whose `srun` tasks report
//! `/proc/self/cgroup` and try to open every GPU.
//!
//! Root only, gated by `FLOTILLA_TEST_ROOT=1` (CI sets it and runs as root); without it they
//! print `SKIPPED: ...` and pass; with it, anything missing fails.
//!
//! Fake GPUs are character devices with NVIDIA's major number 195 and no driver behind them:
//! opening one the cgroup allows gets past the cgroup and fails in the driver lookup with
//! `ENXIO` ("No such device or address"); one the cgroup denies fails with `EPERM`
//! ("Operation not permitted") before that (as in slurmd-rs/tests/cgroup_root.rs).
//!
//! The commands must be built beside the daemons (`cargo build -p flotilla-commands --bins
//! -p flotilla-slurmctld -p flotilla-slurmd`; `cargo test --workspace` does it).

use flotilla_compat_tests::cluster::LocalCluster;

/// Our command `name` run on cluster `c`, after checking that the commands were built.
fn checked_run(c: &LocalCluster, name: &str, args: &[&str], cwd: &Path) -> Output {
    flotilla_compat_tests::bin_dir_with(&["srun", "sbatch", "scancel", "squeue"]);
    c.run(name, args, cwd)
}
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sys::stat::{makedev, mknod, Mode, SFlag};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const NVIDIA_MAJOR: u64 = 195;
const GPUS: u32 = 4;

fn root_enabled() -> bool {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") {
        println!("SKIPPED: needs root and FLOTILLA_TEST_ROOT=1");
        return false;
    }
    assert!(nix::unistd::geteuid().is_root(), "FLOTILLA_TEST_ROOT=1 but the test does not run as root");
    true
}

/// What the host offers: `v1` (memory and devices hierarchies) or `v2` (unified with memory).
fn cgroup_mode() -> &'static str {
    let root = Path::new("/sys/fs/cgroup");
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|c| c == "memory") {
        return "v2";
    }
    assert!(
        root.join("memory/cgroup.procs").exists() && root.join("devices/cgroup.procs").exists(),
        "FLOTILLA_TEST_ROOT=1 but this host has neither cgroup v2 with memory nor v1 memory and devices"
    );
    "v1"
}

/// The directories of job `job`'s cgroup on node `node_part` (`<cluster>_<node>`).
fn job_dirs(mode: &str, node_part: &str, job: u64) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    match mode {
        "v2" => vec![root.join("flotilla").join(node_part).join(format!("job_{job}"))],
        _ => ["memory", "devices", "pids"]
            .iter()
            .map(|c| root.join(c).join("flotilla").join(node_part).join(format!("job_{job}")))
            .filter(|d| d.parent().and_then(Path::parent).and_then(Path::parent).is_some_and(|c| c.join("cgroup.procs").exists()))
            .collect(),
    }
}

/// A tmpfs mounted with device nodes allowed, holding fake GPU device nodes; unmounted on drop.
struct FakeDev {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl FakeDev {
    fn new(gpus: u32) -> FakeDev {
        FakeDev::with_number(gpus, |i| makedev(NVIDIA_MAJOR, i.into()))
    }

    /// Fake GPUs that are aliases of `/dev/null` (1:3), as the reference cluster makes them
    /// (`shared/slurm-reference/setup.sh`).
    fn dev_null_aliases(gpus: u32) -> FakeDev {
        FakeDev::with_number(gpus, |_| makedev(1, 3))
    }

    fn with_number(gpus: u32, number: impl Fn(u32) -> nix::libc::dev_t) -> FakeDev {
        let tmp = tempfile::Builder::new().prefix("fltdev").tempdir_in("/tmp").unwrap();
        std::fs::set_permissions(tmp.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let dir = tmp.path().join("dev");
        std::fs::create_dir(&dir).unwrap();
        mount(Some("tmpfs"), &dir, Some("tmpfs"), MsFlags::MS_NOSUID, Some("mode=755")).expect("mount a tmpfs for fake GPUs");
        for i in 0..gpus {
            let path = dir.join(format!("nvidia{i}"));
            mknod(&path, SFlag::S_IFCHR, Mode::from_bits_truncate(0o666), number(i)).expect("mknod a fake GPU");
        }
        FakeDev { _tmp: tmp, dir }
    }
}

impl Drop for FakeDev {
    fn drop(&mut self) {
        let _ = umount2(&self.dir, MntFlags::MNT_DETACH);
    }
}

/// Removes the cgroups of cluster `0` (`/sys/fs/cgroup/.../flotilla/<cluster>-<hash>_*`) on drop,
/// killing what is left in them: a failed test leaves nothing behind. Declared before the
/// cluster, so dropped after it.
struct CgCleanup(String);

impl Drop for CgCleanup {
    fn drop(&mut self) {
        fn tree(d: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    tree(&e.path(), out);
                }
            }
            out.push(d.to_path_buf());
        }
        let root = Path::new("/sys/fs/cgroup");
        let mut bases = vec![root.join("flotilla")];
        bases.extend(["memory", "devices", "pids"].iter().map(|c| root.join(c).join("flotilla")));
        for base in bases {
            // The cluster's cgroup scope is `<cluster>-<hash>` (`flotilla_admin::dev::cgroup_scope`).
            let prefix = format!("{}-", self.0);
            for e in std::fs::read_dir(&base).into_iter().flatten().flatten() {
                if !e.file_name().to_string_lossy().starts_with(&prefix) {
                    continue;
                }
                let mut dirs = Vec::new();
                tree(&e.path(), &mut dirs);
                for d in &dirs {
                    for pid in std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default().lines() {
                        if let Ok(pid) = pid.trim().parse::<i32>() {
                            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
                        }
                    }
                }
                // Best effort (this runs in `drop`): the killed processes leave their cgroups
                // within moments; a cgroup still populated after 5 s is left behind.
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_secs(5)
                    && dirs.iter().any(|d| std::fs::read_to_string(d.join("cgroup.procs")).is_ok_and(|p| !p.trim().is_empty()))
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
                for d in &dirs {
                    let _ = std::fs::remove_dir(d);
                }
            }
        }
    }
}

/// A configuration directory: cluster `cluster`, nodes gpu[01-02] with `GPUS` GPUs each whose
/// device files are `dev/nvidia[0-3]` (gres.conf `File=`), GPUs and memory constrained
/// (cgroup.conf `ConstrainDevices=yes`, `ConstrainRAMSpace=yes`).
fn config(cluster: &str, dev: &Path) -> tempfile::TempDir {
    config_with(cluster, dev, "ConstrainDevices=yes\nConstrainRAMSpace=yes\n")
}

/// [`config`] with `cgroup_conf` as cgroup.conf (none when empty).
fn config_with(cluster: &str, dev: &Path, cgroup_conf: &str) -> tempfile::TempDir {
    let d = tempfile::Builder::new().prefix("fltconf").tempdir_in("/tmp").unwrap();
    let mut conf = format!(
        "ClusterName={cluster}\nSchedulerType=sched/backfill\nSelectType=select/cons_tres\n\
         SelectTypeParameters=CR_Core_Memory\nDefMemPerCPU=1024\nGresTypes=gpu\nMinJobAge=300\nKillWait=2\n"
    );
    for i in 1..=2 {
        conf.push_str(&format!(
            "NodeName=gpu{i:02} Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=64000 Gres=gpu:h100:{GPUS} State=UNKNOWN\n"
        ));
    }
    conf.push_str("PartitionName=batch Nodes=gpu[01-02] Default=YES MaxTime=01:00:00 State=UP\n");
    std::fs::write(d.path().join("slurm.conf"), conf).unwrap();
    if !cgroup_conf.is_empty() {
        std::fs::write(d.path().join("cgroup.conf"), cgroup_conf).unwrap();
    }
    std::fs::write(
        d.path().join("gres.conf"),
        format!("NodeName=gpu[01-02] Name=gpu Type=h100 File={}/nvidia[0-{}]\n", dev.display(), GPUS - 1),
    )
    .unwrap();
    d
}

fn sbatch(c: &LocalCluster, w: &Path, script: &str) -> u64 {
    std::fs::write(w.join("job.sh"), script).unwrap();
    let o = checked_run(c, "sbatch", &["--parsable", "job.sh"], w);
    assert!(o.status.success(), "sbatch: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().trim().parse().unwrap()
}

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool, diag: impl Fn() -> String) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "timed out waiting for {what}\n{}", diag());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The job's state as `squeue -t all` shows it.
fn state(c: &LocalCluster, w: &Path, id: u64) -> String {
    let o = checked_run(c, "squeue", &["-t", "all", "-h", "-j", &id.to_string(), "-o", "%T"], w);
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn logs(c: &LocalCluster) -> String {
    let mut out = String::new();
    for n in ["slurmctld.log", "slurmd-gpu01.log", "slurmd-gpu02.log"] {
        let text = std::fs::read_to_string(c.dir().join(n)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        out.push_str(&format!("---- {n} ----\n{}\n", lines[lines.len().saturating_sub(30)..].join("\n")));
    }
    out
}

/// Writes `$1`: the node, its cgroups (`/proc/self/cgroup`), and for each GPU `dev I opened`
/// or `dev I <dd's error>`.
const PROBE: &str = r#"#!/bin/sh
out=$1; dev=$2
{
  echo "host $SLURMD_NODENAME"
  sed 's/^/cg /' /proc/self/cgroup
  for i in 0 1 2 3; do
    if err=$(dd if=$dev/nvidia$i of=/dev/null count=0 2>&1); then echo "dev $i opened"; else echo "dev $i $err"; fi
  done
} > "$out.tmp" && mv "$out.tmp" "$out"
"#;

struct Probe {
    host: String,
    cgroups: Vec<String>,
    /// GPUs whose open got past the cgroup (ENXIO), and those the cgroup denied (EPERM).
    allowed: BTreeSet<u32>,
    denied: BTreeSet<u32>,
}

fn parse_probe(text: &str) -> Probe {
    let mut p = Probe {
        host: String::new(),
        cgroups: Vec::new(),
        allowed: BTreeSet::new(),
        denied: BTreeSet::new(),
    };
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("host ") {
            p.host = h.to_string();
        } else if let Some(c) = line.strip_prefix("cg ") {
            p.cgroups.push(c.to_string());
        } else if let Some(d) = line.strip_prefix("dev ") {
            let (i, rest) = d.split_once(' ').unwrap();
            let i: u32 = i.parse().unwrap();
            if rest.contains("No such device or address") {
                p.allowed.insert(i);
            } else if rest.contains("Operation not permitted") {
                p.denied.insert(i);
            } else {
                panic!("unexpected open result for GPU {i}: {rest}\n{text}");
            }
        }
    }
    p
}

/// The cgroup path every controller that confines jobs shows for a process of `step` of job
/// `job` on node `node_part`: v1 `memory`, `devices` and `pids` lines, or v2's `0::` line.
fn assert_in_step(p: &Probe, mode: &str, node_part: &str, job: u64, step: &str, what: &str) {
    let want = format!("/flotilla/{node_part}/job_{job}/{step}");
    let controllers: &[&str] = if mode == "v2" { &[""] } else { &["memory", "devices", "pids"] };
    for c in controllers {
        let line = p
            .cgroups
            .iter()
            .find(|l| l.split(':').nth(1) == Some(c))
            .unwrap_or_else(|| panic!("{what}: no {c} line in {:?}", p.cgroups));
        assert!(line.ends_with(&want), "{what}: {line} is not in {want}");
    }
}

#[test]
fn every_task_on_both_nodes_and_the_batch_script_are_in_the_job_cgroup() {
    if !root_enabled() {
        return;
    }
    let mode = cgroup_mode();
    let cluster = format!("extcg{}", std::process::id());
    let _cleanup = CgCleanup(cluster.clone());
    let dev = FakeDev::new(GPUS);
    // Control: outside any job cgroup every fake GPU gets past the (absent) cgroup.
    for i in 0..GPUS {
        let e = std::fs::File::open(dev.dir.join(format!("nvidia{i}"))).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc_enxio()), "GPU {i} outside a job: {e}");
    }
    let conf = config(&cluster, &dev.dir);
    let c = LocalCluster::start_with(Some(conf.path()), |o| o.cgroup = "auto".into());
    let scope = c.cgroup_scope().to_string();
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    std::fs::set_permissions(&w, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    std::fs::write(w.join("probe.sh"), PROBE).unwrap();
    let d = dev.dir.display();
    let id = sbatch(
        &c,
        &w,
        &format!(
            "#!/bin/sh\n#SBATCH -N 2 --ntasks-per-node=2 --gpus-per-node=2 --mem=512M -o batch.out\n\
             sh probe.sh batch.txt {d}\n\
             srun sh -c 'sh probe.sh task_$SLURM_PROCID.txt {d}'\n\
             echo srun=$? > status.txt\n"
        ),
    );
    wait_until("the job's end", 90, || state(&c, &w, id) == "COMPLETED", || {
        format!("state {}\n{}\n{}", state(&c, &w, id), std::fs::read_to_string(w.join("batch.out")).unwrap_or_default(), logs(&c))
    });
    assert_eq!(std::fs::read_to_string(w.join("status.txt")).unwrap(), "srun=0\n");
    let batch = parse_probe(&std::fs::read_to_string(w.join("batch.txt")).unwrap());
    assert_in_step(&batch, mode, &format!("{scope}_{}", batch.host), id, "step_batch", "the batch script");
    println!("batch script on {}: {:?}; GPUs allowed {:?}, denied {:?}", batch.host, batch.cgroups, batch.allowed, batch.denied);
    assert_eq!((batch.allowed.len(), batch.denied.len()), (2, 2), "the job holds 2 of the node's 4 GPUs");
    let mut hosts = BTreeSet::new();
    let mut allowed_on: std::collections::BTreeMap<String, BTreeSet<u32>> = Default::default();
    for t in 0..4 {
        let text = std::fs::read_to_string(w.join(format!("task_{t}.txt"))).unwrap_or_else(|e| panic!("task {t}: {e}"));
        let p = parse_probe(&text);
        assert_in_step(&p, mode, &format!("{scope}_{}", p.host), id, "step_0", &format!("task {t}"));
        println!("task {t} on {}: {:?}; GPUs allowed {:?}, denied {:?}", p.host, p.cgroups, p.allowed, p.denied);
        assert_eq!((p.allowed.len(), p.denied.len()), (2, 2), "task {t}: {text}");
        // Every process of the job on one node has the same GPUs.
        let prev = allowed_on.entry(p.host.clone()).or_insert_with(|| p.allowed.clone());
        assert_eq!(*prev, p.allowed, "task {t}");
        hosts.insert(p.host);
    }
    assert_eq!(hosts.len(), 2, "tasks on both nodes: {hosts:?}");
    assert_eq!(allowed_on[&batch.host], batch.allowed, "the batch script and the tasks of its node");
    let other = hosts.iter().find(|h| **h != batch.host).unwrap();
    println!("non-batch node {other}: GPUs allowed {:?}", allowed_on[other]);
    // Gone once the job ended, on both nodes.
    for h in &hosts {
        let dirs = job_dirs(mode, &format!("{scope}_{h}"), id);
        assert!(!dirs.is_empty());
        wait_until("the job's cgroups to be removed", 30, || dirs.iter().all(|d| !d.exists()), || format!("{dirs:?}\n{}", logs(&c)));
    }
}

/// ENXIO, without a libc dependency.
fn libc_enxio() -> i32 {
    nix::errno::Errno::ENXIO as i32
}

/// Pids whose command line contains `marker`, with their command lines.
fn processes_with(marker: &str) -> Vec<(i32, String)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.starts_with("sleep ") && cmd.contains(marker) {
            v.push((pid, cmd));
        }
    }
    v
}

/// `scancel` of a running 2-node job whose tasks sleep, each with a daemonized child in a
/// session of its own (out of reach of its task's process group): every process is gone
/// afterwards, on both nodes, and so are the job's cgroups.
#[test]
fn cancel_kills_every_task_process_on_both_nodes_and_removes_the_cgroups() {
    if !root_enabled() {
        return;
    }
    let mode = cgroup_mode();
    let cluster = format!("extkill{}", std::process::id());
    let _cleanup = CgCleanup(cluster.clone());
    let dev = FakeDev::new(GPUS);
    let conf = config(&cluster, &dev.dir);
    let c = LocalCluster::start_with(Some(conf.path()), |o| o.cgroup = "auto".into());
    let scope = c.cgroup_scope().to_string();
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    // Unique sleep lengths: the markers of this test's processes.
    let mark = format!("1{}", std::process::id());
    let (fg, bg) = (format!("{mark}.25"), format!("{mark}.75"));
    let id = sbatch(
        &c,
        &w,
        &format!(
            "#!/bin/sh\n#SBATCH -N 2 --ntasks-per-node=2 -o batch.out\n\
             srun sh -c 'setsid sleep {bg} < /dev/null > /dev/null 2>&1 & exec sleep {fg}'\n"
        ),
    );
    wait_until("8 sleeping processes (2 per task, 4 tasks)", 60, || processes_with(&mark).len() == 8, || {
        format!("{:?}\n{}", processes_with(&mark), logs(&c))
    });
    let procs = processes_with(&mark);
    // Each is in its job's cgroup on its node.
    for (pid, cmd) in &procs {
        let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        assert!(cg.contains(&format!("/job_{id}/step_0")), "{pid} {cmd}: {cg}");
        assert!(cg.contains(&format!("/flotilla/{scope}_gpu0")), "{pid} {cmd}: {cg}");
    }
    let o = checked_run(&c, "scancel", &[&id.to_string()], &w);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let t0 = Instant::now();
    wait_until("every task process to be gone", 30, || processes_with(&mark).is_empty(), || {
        format!("left: {:?}\n{}", processes_with(&mark), logs(&c))
    });
    println!("all 8 task processes gone {} ms after scancel", t0.elapsed().as_millis());
    for n in ["gpu01", "gpu02"] {
        let dirs = job_dirs(mode, &format!("{scope}_{n}"), id);
        wait_until("the job's cgroups to be removed", 30, || dirs.iter().all(|d| !d.exists()), || format!("{dirs:?}\n{}", logs(&c)));
    }
    wait_until("CANCELLED", 30, || state(&c, &w, id) == "CANCELLED", || format!("{}\n{}", state(&c, &w, id), logs(&c)));
}

/// An `srun` task on the batch host that exceeds the job's memory ends the job
/// OUT_OF_MEMORY, as the batch script itself would (the OOM kill is read from the job's whole
/// cgroup tree at the script's end).
#[test]
fn an_srun_task_over_the_jobs_memory_ends_it_out_of_memory() {
    if !root_enabled() {
        return;
    }
    let _ = cgroup_mode();
    let cluster = format!("extoom{}", std::process::id());
    let _cleanup = CgCleanup(cluster.clone());
    let dev = FakeDev::new(GPUS);
    let conf = config(&cluster, &dev.dir);
    let c = LocalCluster::start_with(Some(conf.path()), |o| o.cgroup = "auto".into());
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    // The task holds 400 MB from a pipe in a 128 MiB job; the script itself ends with 0.
    let id = sbatch(
        &c,
        &w,
        "#!/bin/sh\n#SBATCH -N 1 -n 1 --mem=128M -o batch.out\n\
         srun sh -c 'head -c 800000000 /dev/zero | tail -c 400000000 > /dev/null'\n\
         echo srun=$? > status.txt\nexit 0\n",
    );
    wait_until("OUT_OF_MEMORY", 90, || state(&c, &w, id) == "OUT_OF_MEMORY", || {
        format!("{}\n{}\n{}", state(&c, &w, id), std::fs::read_to_string(w.join("batch.out")).unwrap_or_default(), logs(&c))
    });
    let status = std::fs::read_to_string(w.join("status.txt")).unwrap();
    assert_ne!(status, "srun=0\n", "the task was killed");
}

/// A process this test started, SIGKILLed on drop.
struct Started(std::process::Child);

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The job's cgroup outlives its node daemon: SIGKILL the non-batch node's `slurmd` while
/// the job's tasks run there (they live on, orphaned, still in the job's cgroup), start it
/// again (same boot: it re-adopts the job and re-opens its cgroup, and its start-up sweep of
/// stale cgroups leaves the job's alone), then `scancel`: the restarted daemon kills every
/// process of the job there (the old daemon's tasks included) and removes the cgroups.
#[test]
fn a_restarted_node_daemon_readopts_the_job_cgroup_and_its_kill_reaches_the_old_tasks() {
    if !root_enabled() {
        return;
    }
    let mode = cgroup_mode();
    let cluster = format!("extrst{}", std::process::id());
    let _cleanup = CgCleanup(cluster.clone());
    let dev = FakeDev::new(GPUS);
    let conf = config(&cluster, &dev.dir);
    let c = LocalCluster::start_with(Some(conf.path()), |o| o.cgroup = "auto".into());
    let scope = c.cgroup_scope().to_string();
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    let mark = format!("2{}", std::process::id());
    let (fg, bg) = (format!("{mark}.25"), format!("{mark}.75"));
    // The script outlives srun (which gives up on the step when a node's daemon dies).
    let id = sbatch(
        &c,
        &w,
        &format!(
            "#!/bin/sh\n#SBATCH -N 2 --ntasks-per-node=1 -o batch.out\n\
             srun sh -c 'setsid sleep {bg} < /dev/null > /dev/null 2>&1 & exec sleep {fg}' &\n\
             exec sleep 3{}\n",
            std::process::id()
        ),
    );
    let on_gpu02 = || -> Vec<i32> {
        processes_with(&mark)
            .into_iter()
            .filter(|(pid, _)| {
                std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                    .is_ok_and(|cg| cg.contains(&format!("/flotilla/{scope}_gpu02/job_{id}/step_0")))
            })
            .map(|(pid, _)| pid)
            .collect()
    };
    wait_until("2 task processes in the job's cgroup on gpu02", 60, || on_gpu02().len() == 2, || {
        format!("{:?}\n{}", processes_with(&mark), logs(&c))
    });
    let tasks = on_gpu02();
    // gpu02's daemon: the third daemon (controller, gpu01, gpu02).
    let pid = c.pids()[2];
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let argv: Vec<String> = cmdline.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    assert!(argv.windows(2).any(|w| w[0] == "-N" && w[1] == "gpu02"), "{argv:?}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
    wait_until("the old daemon to be gone", 10, || !Path::new(&format!("/proc/{pid}/cmdline")).exists() || std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.is_empty()), String::new);
    let gpu02_responding = |c: &LocalCluster| c.query_nodes().iter().any(|(n, _, not_responding)| n == "gpu02" && !not_responding);
    wait_until("the controller to see gpu02's daemon go", 10, || !gpu02_responding(&c), || logs(&c));
    assert_eq!(on_gpu02(), tasks, "the tasks outlive their daemon, in the job's cgroup");
    let log_path = c.dir().join("slurmd-gpu02.log");
    let before = std::fs::read_to_string(&log_path).unwrap_or_default().matches("re-adopted").count();
    let log = std::fs::OpenOptions::new().append(true).open(&log_path).unwrap();
    let restarted = Started(
        std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_until("the restarted daemon to re-adopt the job and register", 30, || {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        text.matches("re-adopted").count() > before && text.rsplit("re-adopted").next().is_some_and(|t| t.contains("registered"))
    }, || logs(&c));
    // The registration reconciled with the controller, and a scheduling cycle after it (which
    // would end a job the controller thought lost).
    wait_until("the controller to see gpu02's daemon back", 10, || gpu02_responding(&c), || logs(&c));
    c.wait_cycles(1);
    assert_eq!(on_gpu02(), tasks, "the restart kept the job's tasks and cgroup");
    let o = checked_run(&c, "scancel", &[&id.to_string()], &w);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    wait_until("every task process to be gone", 30, || processes_with(&mark).is_empty(), || {
        format!("left: {:?}\n{}", processes_with(&mark), logs(&c))
    });
    for n in ["gpu01", "gpu02"] {
        let dirs = job_dirs(mode, &format!("{scope}_{n}"), id);
        wait_until("the job's cgroups to be removed", 30, || dirs.iter().all(|d| !d.exists()), || format!("{dirs:?}\n{}", logs(&c)));
    }
    drop(restarted);
}

/// A job of another user (alice, uid 2001, as CI creates her): its `srun` tasks join the
/// step's cgroup (as root, before the uid change) and then run as alice, in her working
/// directory, denied the GPUs outside the job's mask.
#[test]
fn tasks_of_another_user_join_the_cgroup_then_run_as_that_user() {
    if !root_enabled() {
        return;
    }
    let mode = cgroup_mode();
    let alice = nix::unistd::User::from_name("alice")
        .ok()
        .flatten()
        .expect("FLOTILLA_TEST_ROOT=1 needs user alice (uid 2001), as .ci/run creates her");
    let cluster = format!("extusr{}", std::process::id());
    let _cleanup = CgCleanup(cluster.clone());
    let dev = FakeDev::new(GPUS);
    let conf = config(&cluster, &dev.dir);
    let c = LocalCluster::start_with(Some(conf.path()), |o| o.cgroup = "auto".into());
    let scope = c.cgroup_scope().to_string();
    std::fs::set_permissions(c.dir(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let w = c.dir().join("alice");
    std::fs::create_dir_all(&w).unwrap();
    std::os::unix::fs::chown(&w, Some(alice.uid.as_raw()), Some(alice.gid.as_raw())).unwrap();
    std::fs::write(w.join("probe.sh"), PROBE).unwrap();
    let d = dev.dir.display();
    std::fs::write(
        w.join("job.sh"),
        format!(
            "#!/bin/sh\n#SBATCH -N 2 --ntasks-per-node=1 --gpus-per-node=1 -o batch.out\n\
             srun sh -c 'sh probe.sh task_$SLURM_PROCID.txt {d}; echo \"$(id -u) $(pwd)\" > who_$SLURM_PROCID.txt'\n"
        ),
    )
    .unwrap();
    let bins = flotilla_compat_tests::bin_dir_with(&["srun", "sbatch", "scancel", "squeue"]);
    let o = Command::new(bins.join("sbatch"))
        .args(["--parsable", "job.sh"])
        .current_dir(&w)
        .env_clear()
        .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", bins.display()))
        .env("HOME", &w)
        .envs(c.env())
        .uid(alice.uid.as_raw())
        .gid(alice.gid.as_raw())
        .output()
        .unwrap();
    assert!(o.status.success(), "sbatch as alice: {}", String::from_utf8_lossy(&o.stderr));
    let id: u64 = String::from_utf8(o.stdout).unwrap().trim().parse().unwrap();
    wait_until("the job's end", 90, || state(&c, &w, id) == "COMPLETED", || {
        format!("state {}\n{}\n{}", state(&c, &w, id), std::fs::read_to_string(w.join("batch.out")).unwrap_or_default(), logs(&c))
    });
    for t in 0..2 {
        let who = std::fs::read_to_string(w.join(format!("who_{t}.txt"))).unwrap();
        assert_eq!(who, format!("{} {}\n", alice.uid, w.display()), "task {t}");
        let p = parse_probe(&std::fs::read_to_string(w.join(format!("task_{t}.txt"))).unwrap());
        assert_in_step(&p, mode, &format!("{scope}_{}", p.host), id, "step_0", &format!("task {t}"));
        assert_eq!((p.allowed.len(), p.denied.len()), (1, 3), "task {t} on {}", p.host);
    }
}

/// The time limit: a 2-node job whose tasks (and their daemonized children) ignore SIGTERM
/// ends TIMEOUT, and every one of its processes on both nodes is gone (SIGKILL through the
/// cgroups), and so are its cgroups. A minute lasts 2 s here (`slurmctld --minute-s 2`).
#[test]
fn time_limit_kills_every_task_process_on_both_nodes() {
    if !root_enabled() {
        return;
    }
    let mode = cgroup_mode();
    let cluster = format!("extto{}", std::process::id());
    let _cleanup = CgCleanup(cluster.clone());
    let dev = FakeDev::new(GPUS);
    let conf = config(&cluster, &dev.dir);
    let c = LocalCluster::start_with(Some(conf.path()), |o| {
        o.cgroup = "auto".into();
        o.ctld_args = vec!["--minute-s".into(), "2".into()];
    });
    let scope = c.cgroup_scope().to_string();
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    let mark = format!("3{}", std::process::id());
    let (fg, bg) = (format!("{mark}.25"), format!("{mark}.75"));
    let id = sbatch(
        &c,
        &w,
        &format!(
            "#!/bin/sh\n#SBATCH -N 2 --ntasks-per-node=1 -t 1 -o batch.out\n\
             srun sh -c \"trap '' TERM; setsid sleep {bg} < /dev/null > /dev/null 2>&1 & exec sleep {fg}\"\n"
        ),
    );
    wait_until("4 sleeping processes (2 per task, 2 tasks)", 60, || processes_with(&mark).len() == 4, || {
        format!("{:?}\n{}", processes_with(&mark), logs(&c))
    });
    wait_until("TIMEOUT", 60, || state(&c, &w, id) == "TIMEOUT", || format!("{}\n{}", state(&c, &w, id), logs(&c)));
    wait_until("every task process to be gone", 30, || processes_with(&mark).is_empty(), || {
        format!("left: {:?}\n{}", processes_with(&mark), logs(&c))
    });
    for n in ["gpu01", "gpu02"] {
        let dirs = job_dirs(mode, &format!("{scope}_{n}"), id);
        wait_until("the job's cgroups to be removed", 30, || dirs.iter().all(|d| !d.exists()), || format!("{dirs:?}\n{}", logs(&c)));
    }
}

/// A job's memory is enforced only with cgroup.conf `ConstrainRAMSpace=yes` (Slurm's
/// task/cgroup; the default is no): the same batch script, which holds 400 MB from a pipe in a
/// 128 MiB job, ends OUT_OF_MEMORY on a cluster whose cgroup.conf says
/// `ConstrainRAMSpace=yes` and COMPLETED on one whose cgroup.conf says only
/// `ConstrainDevices=yes` (cgroups on in both).
#[test]
fn a_job_over_its_memory_is_killed_only_with_constrain_ram_space() {
    if !root_enabled() {
        return;
    }
    let _ = cgroup_mode();
    let script = "#!/bin/sh\n#SBATCH -N 1 -n 1 --mem=128M -o batch.out\n\
                  head -c 800000000 /dev/zero | tail -c 400000000 > /dev/null\n\
                  echo pipe=$? > status.txt\n";
    for (name, cgroup_conf, want) in [
        ("extram", "ConstrainDevices=yes\nConstrainRAMSpace=yes\n", "OUT_OF_MEMORY"),
        ("extnoram", "ConstrainDevices=yes\n", "COMPLETED"),
    ] {
        let cluster = format!("{name}{}", std::process::id());
        let _cleanup = CgCleanup(cluster.clone());
        let dev = FakeDev::new(GPUS);
        let conf = config_with(&cluster, &dev.dir, cgroup_conf);
        let c = LocalCluster::start_with(Some(conf.path()), |o| o.cgroup = "auto".into());
        let w = c.dir().join("work");
        std::fs::create_dir_all(&w).unwrap();
        let id = sbatch(&c, &w, script);
        wait_until(
            "the job's end",
            90,
            || !matches!(state(&c, &w, id).as_str(), "" | "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING"),
            || format!("{}\n{}", state(&c, &w, id), logs(&c)),
        );
        assert_eq!(state(&c, &w, id), want, "cgroup.conf {cgroup_conf:?}\n{}", logs(&c));
        if want == "COMPLETED" {
            assert_eq!(std::fs::read_to_string(w.join("status.txt")).unwrap(), "pipe=0\n");
        }
    }
}

/// Several jobs at once on one node, with `ConstrainDevices=yes` and GPUs whose device files
/// are aliases of /dev/null (the reference cluster's fake GPUs): each job holds one GPU, so
/// each job cgroup denies the other three, and every job still opens /dev/null, /dev/zero,
/// /dev/full, /dev/random and /dev/urandom while all four run (a standard device is never
/// denied; the clients' `PermissionError: '/dev/null'` of issue #17).
#[test]
fn concurrent_jobs_on_one_node_open_dev_null_under_constrain_devices() {
    if !root_enabled() {
        return;
    }
    let _ = cgroup_mode();
    let cluster = format!("extnull{}", std::process::id());
    let _cleanup = CgCleanup(cluster.clone());
    let dev = FakeDev::dev_null_aliases(GPUS);
    let conf = config(&cluster, &dev.dir);
    let c = LocalCluster::start_with(Some(conf.path()), |o| o.cgroup = "auto".into());
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    // Each job marks its start, waits (bounded) until all four have started, then opens the
    // standard devices; `together` says whether it saw the other three running.
    let script = format!(
        "#!/bin/sh\n#SBATCH -N 1 -n 1 -w gpu01 --gpus=1 --mem=256M -o out_%j.txt\n\
         touch started_$SLURM_JOB_ID\n\
         n=0; while [ $(ls started_* | wc -l) -lt {GPUS} ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done\n\
         [ $(ls started_* | wc -l) -ge {GPUS} ] && echo together || echo alone\n\
         for d in null zero full random urandom; do\n\
           if head -c 1 /dev/$d > /dev/null 2>&1; then echo \"ok $d\"; else echo \"denied $d\"; fi\n\
         done\n\
         echo x > /dev/null && echo wrote-null\n"
    );
    let ids: Vec<u64> = (0..GPUS).map(|_| sbatch(&c, &w, &script)).collect();
    for &id in &ids {
        wait_until("the job's end", 120, || state(&c, &w, id) == "COMPLETED", || {
            format!("job {id}: {}\n{}\n{}", state(&c, &w, id), std::fs::read_to_string(w.join(format!("out_{id}.txt"))).unwrap_or_default(), logs(&c))
        });
    }
    for &id in &ids {
        let out = std::fs::read_to_string(w.join(format!("out_{id}.txt"))).unwrap();
        println!("job {id}: {out:?}");
        assert!(out.contains("together\n"), "job {id} did not run alongside the other three: {out}");
        for d in ["null", "zero", "full", "random", "urandom"] {
            assert!(out.contains(&format!("ok {d}\n")), "job {id}: /dev/{d}: {out}");
        }
        assert!(out.contains("wrote-null\n"), "job {id}: {out}");
    }
}
