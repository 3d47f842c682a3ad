//! Helpers for Flotilla's end-to-end tests: locating `shared/` and reading the goldens of
//! real Slurm 22.05 recorded in `shared/slurm-reference/goldens`, and running a golden's
//! command line against Flotilla's binaries.
//!
//! This crate only reads files and runs processes in tests; it never writes into `shared/`.
//! Golden format: `shared/slurm-reference/README.md`.

pub mod cluster;
pub mod mariadb;
pub mod restd;
pub mod wait;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Deserialize;
use thiserror::Error;

/// Errors of this crate.
#[derive(Debug, Error)]
pub enum CompatError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A golden file is not valid JSON of the expected shape.
    #[error("invalid golden {path}: {source}")]
    Json {
        /// The path concerned.
        path: PathBuf,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// `/bin/bash` could not be started.
    #[error("cannot run /bin/bash: {0}")]
    Spawn(std::io::Error),
}

/// Runs `cmd` with `/bin/sh -c` (test set-up: users, directories, copies); true when it ran
/// and exited 0.
pub fn sh(cmd: &str) -> bool {
    Command::new("/bin/sh").arg("-c").arg(cmd).status().is_ok_and(|s| s.success())
}

/// The workspace root (the directory holding `compat-tests/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("compat-tests lives inside the workspace")
        .to_path_buf()
}

/// Where the workspace's binaries are for the running test: `$FLOTILLA_BIN_DIR` if set, else
/// the test executable's `target/<profile>` (tests live in `target/<profile>/deps`).
pub fn bin_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FLOTILLA_BIN_DIR") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().expect("test executable");
    exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf()
}

/// [`bin_dir`], after checking that `names` were built there (`cargo build --bins`).
pub fn bin_dir_with(names: &[&str]) -> PathBuf {
    let d = bin_dir();
    for b in names {
        assert!(d.join(b).is_file(), "{} missing: cargo build -p flotilla-commands --bins", d.join(b).display());
    }
    d
}

/// Builds the commands and daemons for the running test's profile (once per test process;
/// cargo does nothing when they are up to date).
pub fn build_binaries() {
    static BUILD: std::sync::Once = std::sync::Once::new();
    BUILD.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut c = Command::new(cargo);
        c.args(["build", "--bins", "-p", "flotilla-commands", "-p", "flotilla-slurmctld", "-p", "flotilla-slurmd", "-p", "flotilla-slurmrestd"]);
        if bin_dir().ends_with("release") {
            c.arg("--release");
        }
        let st = c.current_dir(workspace_root()).status().expect("cargo runs");
        assert!(st.success(), "building the binaries failed");
    });
}

/// Whether a root test may run: with `FLOTILLA_TEST_ROOT=1` (CI) it must be root (else the
/// test fails); without it, prints `SKIPPED: <what>; needs root (FLOTILLA_TEST_ROOT=1)` (CI
/// fails on any root `SKIPPED:`) and answers false.
pub fn root_tests(what: &str) -> bool {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") {
        eprintln!("SKIPPED: {what}; needs root (FLOTILLA_TEST_ROOT=1)");
        return false;
    }
    assert!(nix::unistd::geteuid().is_root(), "FLOTILLA_TEST_ROOT=1 but not root");
    true
}

/// Makes the user `name` with `uid` (and a home) unless it exists, as the reference cluster
/// has its users (alice 2001, bob 2002). Panics when `useradd` fails.
pub fn ensure_user(name: &str, uid: u32) {
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("id {name} >/dev/null 2>&1 || useradd -u {uid} -m -s /bin/bash {name}"))
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "useradd {name}");
}

/// The shared data directory: `$FLOTILLA_SHARED_DIR` if set, else `<workspace root>/../shared`.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("FLOTILLA_SHARED_DIR") {
        Some(d) => PathBuf::from(d),
        None => workspace_root().join("..").join("shared"),
    }
}

/// The directory of real Slurm's goldens: `<shared>/slurm-reference/goldens`.
pub fn goldens_dir() -> PathBuf {
    shared_dir().join("slurm-reference").join("goldens")
}

/// One recorded run of a real Slurm 22.05 command (`goldens/NNNN_<case>.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct GoldenCase {
    /// Unique case name.
    pub case: String,
    /// Execution order (the `NNNN` of the file name).
    pub seq: u32,
    /// The command line given to `/bin/bash -c`.
    pub cmd: String,
    /// The command with job ids as `{symbol}`.
    #[serde(default)]
    pub template: String,
    /// Job id symbols used in `template` and their ids as recorded (decimal text).
    #[serde(default)]
    pub ids: BTreeMap<String, String>,
    /// The full argument vector root ran.
    #[serde(default)]
    pub argv: Vec<String>,
    /// `alice`, `bob` or `root`.
    #[serde(default)]
    pub user: String,
    /// The complete environment of the command (nothing else inherited).
    pub env: BTreeMap<String, String>,
    /// Working directory of the recording.
    #[serde(default)]
    pub cwd: String,
    /// Bytes fed on stdin, or `None` for `/dev/null`.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Exit status of `bash -c CMD`.
    pub exit_code: i32,
    /// Complete standard output.
    pub stdout: String,
    /// Complete standard error.
    pub stderr: String,
    /// Remark about the case.
    #[serde(default)]
    pub note: String,
    /// When it ran (never compared).
    #[serde(default)]
    pub captured_at: String,
}

/// What a command printed and returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutput {
    /// Standard output, raw.
    pub stdout: Vec<u8>,
    /// Standard error, raw.
    pub stderr: Vec<u8>,
    /// Exit status (128 + signal when killed by a signal, as bash reports it).
    pub exit_code: i32,
}

/// Loads every case `NNNN_<case>.json` of [`goldens_dir`], sorted by `seq`.
pub fn load_goldens() -> Result<Vec<GoldenCase>, CompatError> {
    load_goldens_from(&goldens_dir())
}

/// Loads every case `NNNN_<case>.json` of `dir`, sorted by `seq`.
pub fn load_goldens_from(dir: &Path) -> Result<Vec<GoldenCase>, CompatError> {
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let path = entry.map_err(|e| io_err(dir, e))?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let numbered = name.len() > 5
            && name.as_bytes()[..4].iter().all(u8::is_ascii_digit)
            && name.as_bytes()[4] == b'_';
        if !numbered || !name.ends_with(".json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
        let case =
            serde_json::from_str(&text).map_err(|source| CompatError::Json { path, source })?;
        cases.push(case);
    }
    cases.sort_by_key(|c: &GoldenCase| c.seq);
    Ok(cases)
}

impl GoldenCase {
    /// The command line without its leading `NAME=value` assignments, e.g.
    /// `scontrol show hostnames` for `SLURM_NODELIST='gpu[01-02]' scontrol show hostnames`.
    pub fn command(&self) -> &str {
        let mut rest = self.cmd.trim_start();
        loop {
            let word_end = word_end(rest);
            let word = &rest[..word_end];
            let is_assignment = word.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty()
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            if !is_assignment {
                return rest;
            }
            rest = rest[word_end..].trim_start();
        }
    }

    /// Runs the case's command line with `/bin/bash -c` in `cwd`, with exactly the case's
    /// environment except that `bin_dirs` come first on `PATH`, and the case's stdin.
    pub fn run_with_path(&self, bin_dirs: &[&Path], cwd: &Path) -> Result<RunOutput, CompatError> {
        let mut path: Vec<String> = bin_dirs.iter().map(|d| d.display().to_string()).collect();
        if let Some(p) = self.env.get("PATH") {
            path.push(p.clone());
        }
        let mut cmd = Command::new("/bin/bash");
        cmd.arg("-c")
            .arg(&self.cmd)
            .env_clear()
            .envs(&self.env)
            .env("PATH", path.join(":"))
            .current_dir(cwd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        let mut child = cmd.spawn().map_err(CompatError::Spawn)?;
        if let (Some(input), Some(mut pipe)) = (&self.stdin, child.stdin.take()) {
            // A command that does not read its stdin closes the pipe early; that is fine.
            let _ = pipe.write_all(input.as_bytes());
        }
        let out = child.wait_with_output().map_err(CompatError::Spawn)?;
        let exit_code = out.status.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            128 + out.status.signal().unwrap_or(0)
        });
        Ok(RunOutput {
            stdout: out.stdout,
            stderr: out.stderr,
            exit_code,
        })
    }

    /// Compares `got` with the recording byte for byte; `Err` describes every difference.
    pub fn compare(&self, got: &RunOutput) -> Result<(), String> {
        let mut diffs = Vec::new();
        if got.exit_code != self.exit_code {
            diffs.push(format!(
                "exit code: want {}, got {}",
                self.exit_code, got.exit_code
            ));
        }
        for (what, want, got) in [
            ("stdout", &self.stdout, &got.stdout),
            ("stderr", &self.stderr, &got.stderr),
        ] {
            if want.as_bytes() != got.as_slice() {
                diffs.push(format!(
                    "{what}:\n--- want\n{want:?}\n+++ got\n{:?}",
                    String::from_utf8_lossy(got)
                ));
            }
        }
        if diffs.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} ({}): {}\n{}",
                self.case,
                self.seq,
                self.cmd,
                diffs.join("\n")
            ))
        }
    }
}

fn io_err(path: &Path, source: std::io::Error) -> CompatError {
    CompatError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Byte index where the first shell word of `s` ends (quotes respected, no expansions).
fn word_end(s: &str) -> usize {
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c.is_whitespace() => return i,
            None => {}
        }
    }
    s.len()
}

/// This host's name (what `%N` expands to and what a job's `hostname` prints).
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Slurm's client commands; those Flotilla does not build get a failing stand-in in the golden
/// replays ([`stub_commands`]), so that a case never measures the host's own Slurm (a
/// reference Slurm runs beside the replays on development machines).
pub const SLURM_COMMANDS: &[&str] = &[
    "sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol", "sdiag", "sinfo", "sprio",
    "squeue", "sreport", "srun", "sshare", "sstat", "strigger", "seff",
];

/// Writes `<dir>/stubs/<cmd>` for each of [`SLURM_COMMANDS`] that `bins` lacks: it fails with
/// status 127 like a missing command. `dir` and the stubs are made mode 755 so that the cases'
/// users reach them. Returns the stubs' directory (to put on `PATH`).
pub fn stub_commands(dir: &Path, bins: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let stubs = dir.join("stubs");
    std::fs::create_dir_all(&stubs).unwrap();
    for c in SLURM_COMMANDS.iter().filter(|c| !bins.join(c).is_file()) {
        let p = stubs.join(c);
        std::fs::write(&p, format!("#!/bin/sh\necho \"{c}: not built by Flotilla (the replay never runs the host's Slurm)\" >&2\nexit 127\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for d in [dir, &stubs] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    stubs
}

/// A golden replay's `known_failures.txt`: `case<TAB>why` per line (`#` comments and blank
/// lines skipped; a case without a reason maps to ""). A missing file is an empty list.
pub fn read_list(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once('\t') {
            Some((a, b)) => (a.trim().to_string(), b.trim().to_string()),
            None => (l.trim().to_string(), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(cmd: &str) -> GoldenCase {
        serde_json::from_value(serde_json::json!({
            "case": "t", "seq": 1, "cmd": cmd, "env": {"PATH": "/usr/bin:/bin"},
            "exit_code": 0, "stdout": "", "stderr": ""
        }))
        .unwrap()
    }

    #[test]
    fn command_strips_assignments() {
        assert_eq!(
            case("SLURM_NODELIST='gpu[01-02]' scontrol show hostnames").command(),
            "scontrol show hostnames"
        );
        assert_eq!(case("A=1 B=\"x y\" squeue").command(), "squeue");
        assert_eq!(case("scontrol update a=b").command(), "scontrol update a=b");
    }

    #[test]
    fn runs_under_bash_with_case_env() {
        let c = case("echo $PATH; echo err >&2; exit 3");
        let out = c
            .run_with_path(&[Path::new("/opt/x")], Path::new("/"))
            .unwrap();
        assert_eq!(out.stdout, b"/opt/x:/usr/bin:/bin\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.exit_code, 3);
        assert!(c.compare(&out).is_err());
    }

    #[test]
    fn goldens_load_when_present() {
        if !goldens_dir().is_dir() {
            eprintln!("skipped: no goldens at {}", goldens_dir().display());
            return;
        }
        let cases = load_goldens().unwrap();
        assert!(cases.len() >= 300, "{} cases", cases.len());
        assert!(cases.windows(2).all(|w| w[0].seq < w[1].seq));
    }
}

