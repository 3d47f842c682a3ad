//! `scontrol ping` against a real `slurmctld` (the binary beside this test, or
//! `FLOTILLA_SLURMCTLD_BIN`) on an OS-chosen port, with a second `SlurmctldHost=` where no
//! controller runs: the primary is `UP`, the backup `DOWN`, and root gets Slurm's banner.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `slurmctld` binary: `target/<profile>/slurmctld` beside this test's directory.
fn slurmctld_bin() -> PathBuf {
    if let Ok(p) = std::env::var("FLOTILLA_SLURMCTLD_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().unwrap();
    let p = exe.parent().and_then(Path::parent).unwrap().join("slurmctld");
    assert!(
        p.exists(),
        "{} not found: build it with `cargo build -p flotilla-slurmctld` (cargo test --workspace does), or set FLOTILLA_SLURMCTLD_BIN",
        p.display()
    );
    p
}

struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn ping_a_live_primary_and_a_dead_backup() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    flotilla_proto::ClusterKey::generate(&dir.path().join("slurm.key")).unwrap();
    let common = format!(
        "ClusterName=c\nSlurmUser=root\nStateSaveLocation={d}/state\n\
         NodeName=gpu01 NodeAddr=127.0.0.1 CPUs=4 RealMemory=4096 State=UNKNOWN\n\
         PartitionName=batch Nodes=gpu01 Default=YES State=UP\n"
    );
    std::fs::write(dir.path().join("slurm.conf"), format!("SlurmctldHost=h1(127.0.0.1)\nSlurmctldPort=6817\n{common}")).unwrap();
    let addr_file = dir.path().join("ctld.addr");
    let log = std::fs::File::create(dir.path().join("slurmctld.log")).unwrap();
    let _ctld = Kill(
        Command::new(slurmctld_bin())
            .arg("-D")
            .arg("-f")
            .arg(dir.path().join("slurm.conf"))
            .arg("--key")
            .arg(dir.path().join("slurm.key"))
            .args(["--listen", "127.0.0.1:0", "--sync", "normal"])
            .arg("--socket")
            .arg(dir.path().join("state/slurmctld.sock"))
            .arg("--addr-file")
            .arg(&addr_file)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn slurmctld"),
    );
    let t0 = Instant::now();
    let addr: std::net::SocketAddr = loop {
        if let Ok(s) = std::fs::read_to_string(&addr_file) {
            break s.trim().parse().unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "slurmctld did not start: {}", std::fs::read_to_string(dir.path().join("slurmctld.log")).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(10));
    };
    // The commands' slurm.conf: the controller's port, and a backup on an address where
    // nothing listens.
    let conf = dir.path().join("commands.conf");
    std::fs::write(
        &conf,
        format!("SlurmctldHost=h1(127.0.0.1)\nSlurmctldHost=h2(127.0.0.2)\nSlurmctldPort={}\n{common}", addr.port()),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_scontrol"))
        .arg("ping")
        .env_clear()
        .env("SLURM_CONF", &conf)
        .env("FLOTILLA_AUTH_SOCKET", dir.path().join("no-sackd.sock"))
        .output()
        .unwrap();
    let mut want = "Slurmctld(primary) at h1 is UP\nSlurmctld(backup) at h2 is DOWN\n".to_string();
    if nix::unistd::getuid().is_root() {
        want.push_str("*****************************************\n** RESTORE SLURMCTLD DAEMON TO SERVICE **\n*****************************************\n");
    }
    assert_eq!(
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned(), out.status.code()),
        (want, String::new(), Some(0))
    );
}
