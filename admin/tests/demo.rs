//! `flotilla demo` interrupted in the middle of its workload (Ctrl-C) stops everything it
//! started: no daemon, no job supervisor, no job process is left. (The whole demo runs to
//! success in CI's run-command stage.) Needs `slurmctld` and `slurmd` built beside `flotilla`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Processes whose command line or working directory is inside `dir` (daemons, supervisors
/// and the jobs, which run in `dir/demo`).
fn processes_in(dir: &Path) -> Vec<String> {
    let d = dir.to_string_lossy().into_owned();
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let cwd = std::fs::read_link(e.path().join("cwd")).map(|p| p.display().to_string()).unwrap_or_default();
        if (cmd.contains(&d) || cwd.starts_with(&d)) && !cmd.contains(" demo ") {
            v.push(format!("{} {cmd} (cwd {cwd})", e.file_name().to_string_lossy()));
        }
    }
    v
}

#[test]
fn interrupted_demo_leaves_nothing() {
    let t = tempfile::tempdir_in("/tmp").unwrap();
    let d = t.path().join("demo");
    let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(["demo", "--dir", d.to_str().unwrap(), "--cgroup", "none"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start flotilla demo");
    // Interrupt once the service's replicas run beside the checkpointing job: jobs, replicas
    // and daemons are all alive then.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let t0 = Instant::now();
    let mut seen = Vec::new();
    loop {
        let Some(Ok(l)) = lines.next() else { panic!("demo ended early: {seen:#?}") };
        seen.push(l.clone());
        if l.contains("replicas of service infer running") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "{seen:#?}");
    }
    assert!(!processes_in(t.path()).is_empty(), "the cluster runs before the interrupt");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "interrupted demo exits 130");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_in(t.path());
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: {left:#?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
