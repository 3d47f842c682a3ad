//! Replays every golden of real Slurm 22.05 (`shared/slurm-reference/goldens`), in recorded
//! order, against Flotilla: a local cluster ([`LocalCluster`], the code of `flotilla dev up`)
//! of the real `slurmctld` and four real `slurmd -N gpu01..gpu04` (8 fake GPUs each,
//! `--cgroup none`) configured like the reference (`shared/slurm-reference/conf`, plus its
//! accounting associations as `quota.conf`), with Flotilla's commands first on `PATH`. Each
//! case runs as its user (`runuser`, as `capture_goldens.py` does) with exactly the recorded
//! environment plus `FLOTILLA_CONF` (the goldens had `/etc/slurm/slurm.conf`; ours is in a temp
//! dir), and the waits of `capture_goldens.py` are repeated between cases.
//!
//! Comparison: both sides go through the reference `normalize.py` (called with `python3`, so
//! there is exactly one implementation of the rules), then through the documented
//! divergences in `divergences.tsv` (applied to both sides). Cases that still differ must be
//! listed in `known_failures.txt` with a reason; a listed case that passes fails the test
//! (the list may only shrink), except entries whose reason starts with `FLAKY` (timing
//! races of the replay, each explained), which may pass or fail. Needs root (to create and become alice/bob and run their
//! jobs); otherwise prints `SKIPPED: <reason>`.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::{goldens_dir, load_goldens, shared_dir, GoldenCase};
use flotilla_proto::client::Client;
use flotilla_proto::{JobInfo, JobQuery, JobRef, JobStateWire, NodeQuery, Request, Response, Role};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Seconds a time-limit minute lasts in the replay (the 1-minute timeout case would
/// otherwise take a minute; every fill job's limit is ≥ 20 minutes = 200 s).
const MINUTE_S: u32 = 10;

/// The reference's accounting associations (`setup.sh`: `sacctmgr add account research`,
/// `sacctmgr add user alice,bob account=research`), as Flotilla's `quota.conf`.
const QUOTA_CONF: &str = "# The reference cluster's accounting associations.\nAccount=research Users=alice,bob\n";

const SCRIPTS: &[(&str, &str)] = &[
    ("env.sh", "#!/bin/bash\n# prints the job's Slurm/GPU environment, sorted\nenv | grep -E '^(SLURM|SLURMD|CUDA|GPU|ROCR|ZE_)' | sort\necho \"HOSTNAME_CMD=$(hostname)\"\necho \"PWD=$PWD\"\nsleep 2\n"),
    ("directives.sh", "#!/bin/bash\n#SBATCH --job-name=early\n#SBATCH -t 7\n#SBATCH --partition=batch   # trailing comment after a directive\n##SBATCH --job-name=doublehash\n# SBATCH --job-name=spacehash\n #SBATCH --job-name=leadingspace\n#SBATCH --comment=\"quoted comment with spaces\"\n\necho first command\n#SBATCH --job-name=late\n#SBATCH -t 99\n#SBATCH --gres=gpu:3\nsleep 1\n"),
    ("sleep.sh", "#!/bin/bash\nsleep ${1:-600}\n"),
    ("exit3.sh", "#!/bin/bash\necho about to fail\nexit 3\n"),
    ("sigkill.sh", "#!/bin/bash\necho about to die by SIGKILL\nkill -9 $$\n"),
    ("noshebang.sh", "echo no shebang line\n"),
    ("empty.sh", ""),
    ("arrfail.sh", "#!/bin/bash\necho task $SLURM_ARRAY_TASK_ID\n[ \"$SLURM_ARRAY_TASK_ID\" = 1 ] && exit 2\nexit 0\n"),
    ("badopt.sh", "#!/bin/bash\n#SBATCH --no-such-option\necho hi\n"),
];

fn sh(cmd: &str) -> bool {
    Command::new("/bin/sh").arg("-c").arg(cmd).status().is_ok_and(|s| s.success())
}

fn ensure_users() -> Result<(), String> {
    for (name, uid) in [("alice", 2001), ("bob", 2002)] {
        match nix::unistd::User::from_name(name) {
            Ok(Some(u)) if u.uid.as_raw() == uid => {}
            Ok(Some(u)) => return Err(format!("user {name} exists with uid {} (want {uid})", u.uid)),
            _ => {
                if !sh(&format!(
                    "getent group {uid} >/dev/null || groupadd -g {uid} {name}; useradd -u {uid} -g {uid} -m -d /home/{name} -s /bin/bash {name}"
                )) {
                    return Err(format!("cannot create user {name}"));
                }
            }
        }
    }
    Ok(())
}

struct Harness {
    dir: tempfile::TempDir,
    socket: PathBuf,
    conf: PathBuf,
    bin_dir: PathBuf,
    /// Stand-ins that fail for the Slurm commands Flotilla does not build ([`stub_commands`]).
    stub_dir: PathBuf,
}

impl Harness {
    fn call(&self, req: Request) -> Option<Response> {
        let mut c = Client::connect_unix(&self.socket, Role::Command).ok()?;
        c.call(None, req).ok()
    }

    fn jobs(&self) -> Vec<JobInfo> {
        match self.call(Request::QueryJobs(JobQuery {
            include_finished: true,
            ..JobQuery::default()
        })) {
            Some(Response::Jobs(j)) => j,
            _ => Vec::new(),
        }
    }

    fn states_of(&self, id: u64) -> Vec<JobStateWire> {
        match self.call(Request::QueryJobs(JobQuery {
            jobs: vec![JobRef::id(id)],
            include_finished: true,
            ..JobQuery::default()
        })) {
            Some(Response::Jobs(j)) => j.iter().filter_map(|j| j.state).collect(),
            _ => Vec::new(),
        }
    }

    fn live(&self, id: u64) -> bool {
        self.jobs().iter().any(|j| {
            (j.job_id == id || j.array_job_id == Some(id)) && j.state.is_some_and(|s| !s.is_finished())
        })
    }

    fn wait_done(&self, ids: &[u64], secs: u64) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(secs) {
            if ids.iter().all(|&i| !self.live(i)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        eprintln!("WARN: timeout waiting for {ids:?}");
    }

    fn wait_state(&self, id: u64, want: &[JobStateWire], secs: u64) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(secs) {
            if self.states_of(id).iter().any(|s| want.contains(s)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("WARN: job {id} not in {want:?}");
    }

    fn wait_reason(&self, id: u64, bad: &[&str], secs: u64) {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(secs) {
            let ok = self.jobs().iter().any(|j| j.job_id == id && !bad.contains(&j.reason.as_str()));
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn cancel_all(&self) {
        let ids: BTreeSet<u64> = self
            .jobs()
            .iter()
            .filter(|j| j.state.is_some_and(|s| !s.is_finished()))
            .map(|j| j.array_job_id.unwrap_or(j.job_id))
            .collect();
        if !ids.is_empty() {
            let _ = self.call(Request::CancelJob(flotilla_proto::CancelJob {
                jobs: ids.iter().map(|&i| JobRef::id(i)).collect(),
                ..flotilla_proto::CancelJob::default()
            }));
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if self.jobs().iter().all(|j| j.state.is_some_and(|s| s.is_finished())) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The waits `capture_goldens.py` makes before a case.
    fn before(&self, case: &GoldenCase) {
        let name = case.case.as_str();
        match name {
            "sbatch_test_only_idle" | "sbatch_time_10" | "sbatch_plain" | "sbatch_outpat_single" | "sbatch_fill_A1_gpu4" => {
                self.cancel_all()
            }
            "ls_output_files" => {
                std::thread::sleep(Duration::from_secs(1));
                self.wait_done(&[44, 45, 46, 47], 120);
            }
            "squeue_default_busy" => {
                for id in [57, 58, 61, 62, 63, 65] {
                    self.wait_reason(id, &["None"], 20);
                }
                std::thread::sleep(Duration::from_secs(2));
            }
            "sbatch_sacct_ok" => {
                self.cancel_all();
                std::thread::sleep(Duration::from_secs(2));
            }
            "scancel_running" => {
                self.wait_state(77, &[JobStateWire::Running], 60);
                std::thread::sleep(Duration::from_secs(1));
            }
            "squeue_dependency_never_satisfied" => {
                self.wait_done(&[74, 75, 76, 79, 80, 81, 77], 120);
                self.wait_reason(84, &["None", "Dependency"], 40);
            }
            "scontrol_show_job_timeout" => self.wait_done(&[78], 200),
            "sacct_default" => std::thread::sleep(Duration::from_secs(3)),
            _ => {}
        }
    }

    /// The waits `capture_goldens.py` makes after a case.
    fn after(&self, case: &GoldenCase, stdout: &str) {
        let id = || -> Option<u64> {
            stdout
                .split(|c: char| !c.is_ascii_digit())
                .find(|s| !s.is_empty())
                .and_then(|s| s.parse().ok())
        };
        let name = case.case.as_str();
        let running_or_done = [
            JobStateWire::Running,
            JobStateWire::Completed,
            JobStateWire::Completing,
            JobStateWire::Failed,
        ];
        match name {
            "sbatch_plain" | "sbatch_parsable" | "sbatch_wrap" | "sbatch_J_name" => {
                if let Some(i) = id() {
                    self.wait_done(&[i], 120);
                }
            }
            "sbatch_array_env" => {
                std::thread::sleep(Duration::from_secs(1));
                if let Some(i) = id() {
                    self.wait_done(&[i], 120);
                }
            }
            "sbatch_fill_A1_gpu4" | "sbatch_fill_A2_gpu4" | "sbatch_fill_A3_N2_gpu8" | "sbatch_fill_B1_bob_gpu8" => {
                if let Some(i) = id() {
                    self.wait_state(i, &[JobStateWire::Running], 60);
                }
            }
            "scontrol_requeue_running" => std::thread::sleep(Duration::from_secs(1)),
            _ if name.starts_with("sbatch_") && case.cmd.contains("-o env-%x-%j.out") => {
                if let Some(i) = id() {
                    self.wait_state(i, &running_or_done, 30);
                }
            }
            _ if name.starts_with("scontrol_show_job_d_") && !name.ends_with("_A1") && !name.ends_with("_A3") => {
                if let Some(i) = case.ids.values().next().and_then(|v| v.parse().ok()) {
                    self.wait_done(&[i], 120);
                }
            }
            _ => {}
        }
    }

    fn run_case(&self, case: &GoldenCase) -> (i32, String, String) {
        let mut env: BTreeMap<String, String> = case.env.clone();
        let path = format!(
            "{}:{}:{}",
            self.bin_dir.display(),
            self.stub_dir.display(),
            env.get("PATH").cloned().unwrap_or_default()
        );
        env.insert("PATH".into(), path);
        env.insert("FLOTILLA_CONF".into(), self.conf.display().to_string());
        let mut argv: Vec<String> = Vec::new();
        if case.user != "root" {
            argv.extend(["runuser", "-u", case.user.as_str(), "--"].map(String::from));
        }
        argv.extend(["env", "-i"].map(String::from));
        argv.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        argv.extend(["/bin/bash", "-c", case.cmd.as_str()].map(String::from));
        let cwd = if case.cwd.is_empty() { "/".to_string() } else { case.cwd.clone() };
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(cwd)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if case.stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = cmd.spawn().expect("spawn case");
        if let (Some(input), Some(mut pipe)) = (&case.stdin, child.stdin.take()) {
            let _ = pipe.write_all(input.as_bytes());
        }
        let out = child.wait_with_output().expect("case runs");
        let code = out.status.code().unwrap_or(128);
        (
            code,
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// Slurm's client commands that may be installed on the host (a reference Slurm runs beside
/// the replay on development machines).
const SLURM_COMMANDS: &[&str] = &[
    "sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol", "sdiag", "sinfo", "sprio",
    "squeue", "sreport", "srun", "sshare", "sstat", "strigger",
];

/// Writes `<dir>/stubs/<cmd>` for each of [`SLURM_COMMANDS`] that `bins` lacks: it fails with
/// status 127 like a missing command, so that a case never measures the host's own Slurm.
fn stub_commands(dir: &Path, bins: &Path) -> PathBuf {
    let stubs = dir.join("stubs");
    std::fs::create_dir_all(&stubs).unwrap();
    for c in SLURM_COMMANDS.iter().filter(|c| !bins.join(c).is_file()) {
        let p = stubs.join(c);
        std::fs::write(&p, format!("#!/bin/sh\necho \"{c}: not built by Flotilla (the replay never runs the host's Slurm)\" >&2\nexit 127\n")).unwrap();
        sh(&format!("chmod 755 {}", p.display()));
    }
    sh(&format!("chmod 755 {}", stubs.display()));
    stubs
}

fn read_list(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once('\t') {
            Some((a, b)) => (a.trim().to_string(), b.trim().to_string()),
            None => (l.trim().to_string(), String::new()),
        })
        .collect()
}

const DRIVER: &str = r#"
import json, os, re, sys, fnmatch, difflib
ref, gold_dir, got_dir, div_file, host = sys.argv[1:6]
sys.path.insert(0, ref)
import normalize
divs = []
for line in open(div_file):
    if not line.strip() or line.startswith('#'):
        continue
    pat, rx, rep, _reason = line.rstrip('\n').split('\t')
    divs.append((pat, re.compile(rx, re.M), rep))
res = {}
for f in sorted(os.listdir(got_dir)):
    b = json.load(open(os.path.join(got_dir, f)))
    a = json.load(open(os.path.join(gold_dir, f)))
    na, nb = normalize.normalize_case(a, 'vm'), normalize.normalize_case(b, host)
    name = f[:-5]
    for k in ('stdout', 'stderr'):
        for pat, rx, rep in divs:
            if fnmatch.fnmatch(name, pat):
                na[k] = rx.sub(rep, na[k]); nb[k] = rx.sub(rep, nb[k])
    diff = [k for k in ('exit_code', 'stdout', 'stderr') if na[k] != nb[k]]
    lines = []
    for k in diff:
        if k == 'exit_code':
            lines.append('exit_code: want %s got %s' % (na[k], nb[k]))
            continue
        for l in difflib.unified_diff(na[k].splitlines(), nb[k].splitlines(), 'want', 'got', lineterm='', n=0):
            lines.append('  ' + l)
    res[name] = {'ok': not diff, 'diff': '\n'.join(lines[:40])}
print(json.dumps(res))
"#;

#[test]
fn golden_replay() {
    if !goldens_dir().is_dir() {
        eprintln!("SKIPPED: no goldens at {}", goldens_dir().display());
        return;
    }
    if !nix::unistd::getuid().is_root() {
        eprintln!("SKIPPED: the replay runs cases as alice (2001), bob (2002) and root and their jobs as them; it needs root");
        return;
    }
    if !sh("command -v python3 >/dev/null && command -v runuser >/dev/null") {
        eprintln!("SKIPPED: python3 and runuser are needed");
        return;
    }
    if let Err(e) = ensure_users() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    flotilla_compat_tests::build_binaries();
    let dir = tempfile::Builder::new().prefix("flotilla-replay").tempdir().expect("tempdir");
    sh(&format!("chmod 755 {}", dir.path().display()));
    // The reference configuration, plus the accounting associations the reference made with
    // sacctmgr (alice and bob in account `research`, their default) as Flotilla's quota.conf.
    let confdir = dir.path().join("conf");
    std::fs::create_dir_all(&confdir).unwrap();
    let refconf = shared_dir().join("slurm-reference").join("conf");
    for f in ["slurm.conf", "gres.conf", "topology.conf"] {
        std::fs::copy(refconf.join(f), confdir.join(f)).unwrap();
    }
    std::fs::write(confdir.join("quota.conf"), QUOTA_CONF).unwrap();
    let cluster = LocalCluster::start_with(Some(&confdir), |o| {
        o.fast = false;
        o.bin_dir = Some(flotilla_compat_tests::bin_dir());
        o.ctld_args = vec!["--minute-s".into(), MINUTE_S.to_string()];
    });
    let stub_dir = stub_commands(dir.path(), &flotilla_compat_tests::bin_dir());
    let h = Harness {
        dir,
        socket: cluster.socket(),
        conf: cluster.slurm_conf(),
        bin_dir: flotilla_compat_tests::bin_dir(),
        stub_dir,
    };
    let t0 = Instant::now();
    loop {
        if let Some(Response::Nodes(n)) = h.call(Request::QueryNodes(NodeQuery::default())) {
            if n.len() == 4 && n.iter().all(|n| !n.not_responding && n.state == "IDLE") {
                break;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "nodes did not register");
        std::thread::sleep(Duration::from_millis(50));
    }
    for (user, home) in [("alice", "/home/alice/g"), ("bob", "/home/bob/g")] {
        let _ = std::fs::remove_dir_all(home);
        std::fs::create_dir_all(home).unwrap();
        for (f, body) in SCRIPTS {
            std::fs::write(Path::new(home).join(f), body).unwrap();
        }
        sh(&format!("chmod 755 {home}/*.sh; chown -R {user}:{user} {home}"));
    }
    let got_dir = h.dir.path().join("got");
    std::fs::create_dir_all(&got_dir).unwrap();
    let cases = load_goldens().expect("goldens load");
    let only = std::env::var("FLOTILLA_REPLAY_UNTIL").ok().and_then(|s| s.parse::<u32>().ok());
    for case in &cases {
        if only.is_some_and(|n| case.seq > n) {
            break;
        }
        h.before(case);
        let (code, out, err) = h.run_case(case);
        h.after(case, &out);
        let rec = serde_json::json!({
            "case": case.case, "seq": case.seq, "cmd": case.cmd, "user": case.user,
            "exit_code": code, "stdout": out, "stderr": err,
        });
        let file = format!("{:04}_{}.json", case.seq, sanitize(&case.case));
        std::fs::write(got_dir.join(file), serde_json::to_string(&rec).unwrap()).unwrap();
    }
    if std::env::var_os("FLOTILLA_REPLAY_KEEP").is_some() {
        let keep = std::env::temp_dir().join("flotilla-replay-cluster");
        let _ = std::fs::remove_dir_all(&keep);
        sh(&format!("mkdir -p {k} && cp {d}/*.log {k}/", k = keep.display(), d = cluster.dir().display()));
    }
    drop(cluster);
    let here = flotilla_compat_tests::workspace_root().join("compat-tests");
    let out = Command::new("python3")
        .arg("-c")
        .arg(DRIVER)
        .arg(shared_dir().join("slurm-reference"))
        .arg(goldens_dir())
        .arg(&got_dir)
        .arg(here.join("divergences.tsv"))
        .arg(flotilla_compat_tests::hostname())
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "normalize driver failed: {}", String::from_utf8_lossy(&out.stderr));
    let res: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&out.stdout).expect("driver json");
    let known = read_list(&here.join("known_failures.txt"));
    let mut pass = 0;
    let mut unexpected = Vec::new();
    let mut now_passing = Vec::new();
    let mut report = String::new();
    for (name, r) in &res {
        let ok = r["ok"].as_bool().unwrap_or(false);
        if ok {
            pass += 1;
            if known.get(name).is_some_and(|r| !r.starts_with("FLAKY")) {
                now_passing.push(name.clone());
            }
        } else {
            report.push_str(&format!("--- {name}\n{}\n", r["diff"].as_str().unwrap_or("")));
            if !known.contains_key(name) {
                unexpected.push(name.clone());
            }
        }
    }
    std::fs::write(std::env::temp_dir().join("flotilla-replay-report.txt"), &report).unwrap();
    if std::env::var_os("FLOTILLA_REPLAY_KEEP").is_some() {
        let keep = std::env::temp_dir().join("flotilla-replay-got");
        let _ = std::fs::remove_dir_all(&keep);
        sh(&format!("cp -r {} {}", got_dir.display(), keep.display()));
    }
    eprintln!(
        "golden replay: {pass} of {} goldens pass ({} known failures listed); diffs in {}",
        res.len(),
        known.len(),
        std::env::temp_dir().join("flotilla-replay-report.txt").display()
    );
    if only.is_some() {
        return;
    }
    let mut problems = Vec::new();
    if !unexpected.is_empty() {
        problems.push(format!("goldens failing but not in known_failures.txt:\n  {}", unexpected.join("\n  ")));
    }
    if !now_passing.is_empty() {
        problems.push(format!(
            "goldens now passing: remove them from known_failures.txt:\n  {}",
            now_passing.join("\n  ")
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || "_.-".contains(c) { c } else { '_' }).collect()
}
