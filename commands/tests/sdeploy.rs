//! `sdeploy create|scale|list|show|delete` against a real local cluster (`flotilla dev up`,
//! 4 nodes × 8 fake GPUs, `--cgroup none`), with the replicas as `squeue` shows them, `sinfo
//! -O LargestPlaceable` / `sinfo --largest` and `scontrol show alerts`. The whole session is
//! one golden transcript, `tests/goldens/sdeploy.txt` (the user name and times normalised);
//! re-record with `UPDATE_GOLDENS=1 cargo test -p flotilla-commands --test sdeploy` and review
//! the diff. Needs `slurmctld`, `slurmd` and `flotilla` (package `flotilla-admin`) built beside
//! the commands (`cargo test --workspace` builds them).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn bin(name: &str) -> PathBuf {
    match name {
        "sdeploy" => env!("CARGO_BIN_EXE_sdeploy").into(),
        "sinfo" => env!("CARGO_BIN_EXE_sinfo").into(),
        "squeue" => env!("CARGO_BIN_EXE_squeue").into(),
        "scontrol" => env!("CARGO_BIN_EXE_scontrol").into(),
        "flotilla" => {
            // Another package's binary: cargo builds it for `--workspace` runs.
            let p = Path::new(env!("CARGO_BIN_EXE_sdeploy")).with_file_name("flotilla");
            assert!(p.is_file(), "{} missing: cargo build -p flotilla-admin", p.display());
            p
        }
        _ => unreachable!(),
    }
}

fn run(conf: &Path, cmd: &str, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(bin(cmd))
        .args(args)
        .env("SLURM_CONF", conf)
        .current_dir(conf.parent().unwrap())
        .output()
        .expect("run command");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Replaces what differs between runs: the user's name and wall-clock times.
fn normalise(s: &str, user: &str) -> String {
    let short: String = user.chars().take(8).collect();
    let mut out = s
        .replace(&format!("UserId={user}"), "UserId=USER")
        .replace(&format!("{:>8}", short), "    USER");
    while let Some(i) = out.find("CreateTime=2") {
        out.replace_range(i + 11..i + 30, "TIME");
    }
    out
}

struct Dev(PathBuf);

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = Command::new(bin("flotilla"))
            .args(["dev", "down", "--dir", self.0.to_str().unwrap(), "--grace", "5"])
            .output();
    }
}

#[test]
fn sdeploy_session_golden() {
    let t = tempfile::tempdir_in("/tmp").unwrap();
    let dir = t.path().to_str().unwrap().to_string();
    let (rc, _, err) = {
        let o = Command::new(bin("flotilla"))
            .args(["dev", "up", "--dir", &dir, "--cgroup", "none"])
            .output()
            .unwrap();
        (o.status.code().unwrap_or(-1), o.stdout, String::from_utf8_lossy(&o.stderr).into_owned())
    };
    assert_eq!(rc, 0, "dev up failed: {err}");
    let _dev = Dev(t.path().to_path_buf());
    let conf = std::fs::canonicalize(t.path()).unwrap().join("slurm.conf");
    let user = nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map_or_else(|| nix::unistd::getuid().to_string(), |u| u.name);
    let mut transcript = String::new();
    let mut step = |args: &[&str]| -> String {
        let (rc, out, err) = run(&conf, args[0], &args[1..]);
        transcript.push_str(&format!("$ {}\n{}", args.join(" "), normalise(&out, &user)));
        if !err.is_empty() {
            transcript.push_str(&format!("[stderr] {err}"));
        }
        transcript.push_str(&format!("[exit {rc}]\n\n"));
        out
    };
    let wait = |what: &str| {
        let t0 = Instant::now();
        loop {
            let (_, out, _) = run(&conf, "sdeploy", &["show", "1"]);
            if out.contains(what) {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "no `{what}` in:\n{out}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    step(&["sdeploy", "list"]);
    step(&["sdeploy", "create", "--name", "llm", "--gpus", "4", "--min", "1", "--max", "3", "--priority", "5", "--", "sleep", "300"]);
    wait("Replicas=1 Pending=0");
    step(&["sdeploy", "scale", "1", "--replicas", "2"]);
    wait("Replicas=2 Pending=0");
    step(&["sdeploy", "show", "1"]);
    step(&["sdeploy", "show", "-o"]);
    step(&["sdeploy", "list"]);
    // By job id: the replicas tie in every default key, and Slurm's order for ties (latest
    // start first, equal starts oldest first) depends on whether the scale crossed a second.
    step(&["squeue", "-h", "-S", "i", "-o", "%.18i %.9P %.8j %.2t %.6D %R"]);
    step(&["sinfo", "-O", "Partition,LargestPlaceable"]);
    step(&["sinfo", "--largest"]);
    step(&["scontrol", "show", "alerts"]);
    step(&["sdeploy", "scale", "99", "--replicas", "1"]);
    step(&["sdeploy", "show", "99"]);
    step(&["sdeploy", "create", "--name", "big", "--gpus", "16", "--", "true"]);
    step(&["sdeploy", "delete", "1"]);
    step(&["sdeploy", "list"]);
    let t0 = Instant::now();
    // Until they have ended: a stopped replica shows COMPLETING (Slurm's `_job_signal`)
    // while its node still holds its GPUs.
    while run(&conf, "squeue", &["-h", "-t", "R,CG"]).1.contains("llm") {
        assert!(t0.elapsed() < Duration::from_secs(30), "replicas of a deleted service still run");
        std::thread::sleep(Duration::from_millis(100));
    }
    step(&["sinfo", "--largest"]);

    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/goldens/sdeploy.txt");
    if std::env::var_os("UPDATE_GOLDENS").is_some() {
        std::fs::write(&golden, &transcript).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    assert!(
        want == transcript,
        "sdeploy session differs from {} (UPDATE_GOLDENS=1 re-records):\n{transcript}",
        golden.display()
    );
}
