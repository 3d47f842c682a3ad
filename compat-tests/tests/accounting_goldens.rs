//! Replays the accounting goldens of real Slurm 22.05 (`compat-tests/goldens/accounting`,
//! recorded by its `capture.py` on slurmdbd + MariaDB) in recorded order against Flotilla's
//! local clusters ([`LocalCluster`], in production mode as root with `FLOTILLA_TEST_ROOT=1`),
//! with Flotilla's commands first on `PATH` and stand-ins failing with status 127 for the
//! Slurm commands Flotilla does not build (never the host's Slurm).
//!
//! The recording has two phases with their own slurm.conf (`conf-phase1/`, `conf-phase2/`:
//! priority/basic without enforcement, then `AccountingStorageEnforce=associations,limits,
//! qos,safe` and priority/multifactor, on which the reference's slurmctld was restarted). A
//! local cluster cannot restart its controller on another slurm.conf, so the replay runs
//! phase 1 on a cluster of `conf-phase1`, then starts a fresh cluster of `conf-phase2` and
//! brings it to phase 1's end state first: it reruns, without comparing, phase 1's commands
//! that change the accounting (`sacctmgr` without `show`/`list`), then the setup steps the
//! capture ran before phase 2 (`phase2-setup.txt`), then compares phase 2's cases. The waits
//! of `capture.py` are repeated on the events they need (a job running, a step running, a job
//! ended), each with a deadline: a wait that times out fails its case. After every command
//! that can change the controller's state the replay waits until no scheduling cycle is due.
//!
//! Job ids: a case `sbatch_<SYM>` that printed an id defines `{SYM}`; later templates run with
//! Flotilla's id for it. Outputs are compared as printed (a fresh cluster numbers from 1, as
//! the reference did after `setup.sh --fresh`).
//!
//! Comparison: both sides go through the reference `normalize.py`, then through the rules of
//! `volatile.tsv` (values that differ between two runs of real Slurm: usage, ages, cycle times,
//! RPC counts; a regex `<sort lines>` sorts the lines of output whose order Slurm does not fix),
//! applied to both sides. Two recordings (each after `setup.sh --fresh`) agree on all 226 cases
//! after these rules. A case that still differs must be listed in
//! `known_failures.txt` next to the goldens with a reason; a listed case that passes fails the
//! test (the list may only shrink), and so does a failing case not listed. Needs root (alice
//! and bob run their cases and jobs); otherwise prints `SKIPPED: <reason>`.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::wait::{wait_cycles, wait_settled};
use flotilla_compat_tests::{load_goldens_from, shared_dir, workspace_root, GoldenCase};
use flotilla_proto::client::Client;
use flotilla_proto::{JobQuery, JobRef, JobStateWire, Request, Response, Role};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The reference's accounting after `setup.sh` (its `sacctmgr` lines, run as root on each
/// fresh cluster as they were on the reference): account `research` of organisation `oracle`
/// with alice and bob.
const SETUP_SACCTMGR: &[&str] = &[
    "sacctmgr -i add account research Description=research Organization=oracle >/dev/null",
    "sacctmgr -i add user alice,bob Account=research >/dev/null",
];

/// The job scripts of `capture.py` (`SCRIPTS`), in alice's and bob's `~/g`.
const SCRIPTS: &[(&str, &str)] = &[
    ("sleep.sh", "#!/bin/bash\nsleep ${1:-600}\n"),
    (
        "burn.sh",
        "#!/bin/bash\npython3 -c 'import time\nb=bytearray(200*1024*1024)\nfor i in range(0,len(b),4096): b[i]=1\nt=time.time()\nwhile time.time()-t<2: pass'\n",
    ),
    ("steps.sh", "#!/bin/bash\nsrun sleep 600\n"),
];

const WAIT: Duration = Duration::from_secs(120);

fn acct_dir() -> PathBuf {
    workspace_root()
        .join("compat-tests")
        .join("goldens")
        .join("accounting")
}

/// The phase of a case (`phase` of its JSON; 1 when absent).
fn phase_of(dir: &Path, case: &GoldenCase) -> u64 {
    let name = format!("{:04}_{}.json", case.seq, sanitize(&case.case));
    std::fs::read(dir.join(name))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["phase"].as_u64())
        .unwrap_or(1)
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One phase's cluster and how cases run on it.
struct Phase {
    cluster: LocalCluster,
    bin_dir: PathBuf,
    stub_dir: PathBuf,
    _conf: tempfile::TempDir,
}

impl Phase {
    /// The cluster of phase `n`, or why it did not start (the error `LocalCluster` panics
    /// with: a configuration Flotilla refuses, say).
    fn start(n: u32, stubs: &Path) -> Result<Phase, String> {
        let conf = tempfile::Builder::new()
            .prefix("flt-acct-conf")
            .tempdir()
            .expect("tempdir");
        let src = acct_dir().join(format!("conf-phase{n}"));
        for f in ["slurm.conf", "gres.conf", "topology.conf"] {
            std::fs::copy(src.join(f), conf.path().join(f))
                .unwrap_or_else(|e| panic!("{}: {e}", src.join(f).display()));
        }
        let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            LocalCluster::start_with(Some(conf.path()), |o| {
                o.fast = false;
                o.bin_dir = Some(flotilla_compat_tests::bin_dir());
            })
        }));
        let cluster = started.map_err(|e| {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
            let why = why.unwrap_or_default();
            // The last line of the controller's log tail says why.
            why.lines()
                .rev()
                .find(|l| l.starts_with("Error:"))
                .unwrap_or(why.lines().next().unwrap_or(""))
                .to_string()
        })?;
        flotilla_compat_tests::sh(&format!(
            "chmod 755 {} {}",
            conf.path().display(),
            cluster.dir().display()
        ));
        let phase = Phase {
            cluster,
            bin_dir: flotilla_compat_tests::bin_dir(),
            stub_dir: stubs.to_path_buf(),
            _conf: conf,
        };
        for cmd in SETUP_SACCTMGR {
            let (code, _, err) = phase.run("root", &Phase::root_env(), "/", None, cmd);
            if code != 0 {
                return Err(format!("setup `{cmd}` exited {code}: {err}"));
            }
        }
        Ok(phase)
    }

    fn call(&self, req: Request) -> Option<Response> {
        let mut c = Client::connect_unix(&self.cluster.socket(), Role::Command).ok()?;
        c.call(None, req).ok()
    }

    fn states_of(&self, id: u64) -> Vec<JobStateWire> {
        let q = JobQuery {
            jobs: vec![JobRef::id(id)],
            include_finished: true,
            ..JobQuery::default()
        };
        match self.call(Request::QueryJobs(q)) {
            Some(Response::Jobs(j)) => j.iter().filter_map(|j| j.state).collect(),
            _ => Vec::new(),
        }
    }

    fn live_jobs(&self) -> Vec<u64> {
        let q = JobQuery {
            include_finished: true,
            ..JobQuery::default()
        };
        match self.call(Request::QueryJobs(q)) {
            Some(Response::Jobs(j)) => j
                .iter()
                .filter(|j| j.state.is_some_and(|s| !s.is_finished()))
                .map(|j| j.job_id)
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Until `f` holds, checked again after each scheduling cycle of the controller (the
    /// barrier of [`wait_cycles`]: what the cases wait for, a job or step running or gone,
    /// comes in a turn, and a cycle runs at least every scheduler interval); `Err(what)` after
    /// `timeout`.
    fn wait(
        &self,
        what: &str,
        timeout: Duration,
        mut f: impl FnMut() -> bool,
    ) -> Result<(), String> {
        let t0 = Instant::now();
        while !f() {
            let left = timeout.saturating_sub(t0.elapsed());
            if left.is_zero() {
                return Err(format!("timed out after {timeout:?} waiting for {what}"));
            }
            wait_cycles(&self.cluster.socket(), 1, left)
                .map_err(|e| format!("waiting for {what}: {e}"))?;
        }
        Ok(())
    }

    fn wait_running(&self, id: u64) -> Result<(), String> {
        self.wait(&format!("job {id} to run"), Duration::from_secs(60), || {
            self.states_of(id).contains(&JobStateWire::Running)
        })
    }

    fn wait_gone(&self, id: u64) -> Result<(), String> {
        self.wait(&format!("job {id} to end"), WAIT, || {
            !self.live_jobs().contains(&id)
        })
    }

    /// Until job `id` has a running step other than its batch step.
    fn wait_step(&self, id: u64) -> Result<(), String> {
        let q = JobQuery {
            jobs: vec![JobRef::id(id)],
            ..JobQuery::default()
        };
        self.wait(&format!("step {id}.0 to run"), Duration::from_secs(60), || {
            matches!(self.call(Request::QuerySteps(q.clone())), Some(Response::Steps(s)) if s.iter().any(|s| s.job_id == id && s.step_id == 0))
        })
    }

    fn cancel_all(&self) -> Result<(), String> {
        let live = self.live_jobs();
        if !live.is_empty() {
            let _ = self.call(Request::CancelJob(flotilla_proto::CancelJob {
                jobs: live.iter().map(|&i| JobRef::id(i)).collect(),
                ..flotilla_proto::CancelJob::default()
            }));
        }
        self.wait(
            "every job to end after cancelling all",
            Duration::from_secs(60),
            || self.live_jobs().is_empty(),
        )
    }

    fn settle(&self) -> Result<(), String> {
        wait_settled(&self.cluster.socket(), Duration::from_secs(30)).map(|_| ())
    }

    /// Runs `cmd` as `user` in `cwd` with exactly `env` plus our PATH and slurm.conf.
    fn run(
        &self,
        user: &str,
        env: &BTreeMap<String, String>,
        cwd: &str,
        stdin: Option<&str>,
        cmd: &str,
    ) -> (i32, String, String) {
        let mut env = env.clone();
        let path = format!(
            "{}:{}:{}",
            self.bin_dir.display(),
            self.stub_dir.display(),
            env.get("PATH").cloned().unwrap_or_default()
        );
        env.insert("PATH".into(), path);
        env.insert(
            "FLOTILLA_CONF".into(),
            self.cluster.slurm_conf().display().to_string(),
        );
        let mut argv: Vec<String> = Vec::new();
        if user != "root" {
            argv.extend(["runuser", "-u", user, "--"].map(String::from));
        }
        argv.extend(["env", "-i"].map(String::from));
        argv.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
        argv.extend(["/bin/bash", "-c", cmd].map(String::from));
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(if cwd.is_empty() { "/" } else { cwd })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("spawn case");
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let _ = pipe.write_all(input.as_bytes());
        }
        let out = child.wait_with_output().expect("case runs");
        (
            out.status.code().unwrap_or(128),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Root's environment of the recording (`capture.py` `user_env("root")`).
    fn root_env() -> BTreeMap<String, String> {
        [
            ("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"),
            ("HOME", "/"),
            ("USER", "root"),
            ("LOGNAME", "root"),
            ("SHELL", "/bin/bash"),
            ("LANG", "C.UTF-8"),
            ("TZ", "UTC"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }
}

/// `template` with each `{SYM}` as Flotilla's id of that submission.
fn command(case: &GoldenCase, ids: &BTreeMap<String, u64>) -> String {
    if case.ids.is_empty() {
        return case.cmd.clone();
    }
    let mut cmd = case.template.clone();
    for sym in case.ids.keys() {
        let id = ids
            .get(sym)
            .map_or_else(|| case.ids[sym].clone(), u64::to_string);
        cmd = cmd.replace(&format!("{{{sym}}}"), &id);
    }
    cmd.replace("{{", "{").replace("}}", "}")
}

/// True when `cmd` may change the controller's or the accounting's state.
fn changes_state(cmd: &str) -> bool {
    [
        "sbatch",
        "scancel",
        "srun",
        "sacctmgr",
        "sdiag -r",
        "sdiag --reset",
    ]
    .iter()
    .any(|w| cmd.contains(w))
}

/// The waits `capture.py` makes before a case.
fn before(p: &Phase, case: &GoldenCase, ids: &BTreeMap<String, u64>) -> Result<(), String> {
    let id = |s: &str| {
        ids.get(s)
            .copied()
            .ok_or_else(|| format!("no job {s} (its sbatch case printed no id)"))
    };
    match case.case.as_str() {
        "sbatch_G2" => p.wait_running(id("G1")?),
        "sbatch_MJ2" => p.wait_running(id("MJ1")?),
        "sbatch_GJ2" => p.wait_running(id("GJ1")?),
        "sstat_j" => {
            p.wait_running(id("ST")?)?;
            p.wait_step(id("ST")?)
        }
        "sacct_A_research" => {
            p.wait_gone(id("BURN")?)?;
            p.cancel_all()
        }
        _ => Ok(()),
    }
}

const DRIVER: &str = r#"
import json, os, re, sys, fnmatch, difflib
ref, gold_dir, got_dir, rules_file, host = sys.argv[1:6]
sys.path.insert(0, ref)
import normalize
rules = []
for line in open(rules_file):
    if not line.strip() or line.startswith('#'):
        continue
    pat, rx, rep, _reason = line.rstrip('\n').split('\t')
    rules.append((pat, None if rx == '<sort lines>' else re.compile(rx, re.M), rep))
res = {}
for f in sorted(os.listdir(got_dir)):
    b = json.load(open(os.path.join(got_dir, f)))
    a = json.load(open(os.path.join(gold_dir, f)))
    na, nb = normalize.normalize_case(a, 'vm'), normalize.normalize_case(b, host)
    name = f[:-5]
    for k in ('stdout', 'stderr'):
        for pat, rx, rep in rules:
            if fnmatch.fnmatch(name, pat) and rx is None:
                na[k] = ''.join(sorted(na[k].splitlines(True))); nb[k] = ''.join(sorted(nb[k].splitlines(True)))
            elif fnmatch.fnmatch(name, pat):
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

fn prepare_homes() {
    for (user, home) in [("alice", "/home/alice/g"), ("bob", "/home/bob/g")] {
        let _ = std::fs::remove_dir_all(home);
        std::fs::create_dir_all(home).unwrap();
        for (f, body) in SCRIPTS {
            std::fs::write(Path::new(home).join(f), body).unwrap();
        }
        flotilla_compat_tests::sh(&format!(
            "chmod 755 {home}/*.sh; chown -R {user}:{user} {home}"
        ));
    }
}

#[test]
fn accounting_goldens() {
    let dir = acct_dir();
    if !nix::unistd::getuid().is_root() {
        eprintln!(
            "SKIPPED: the replay runs cases as alice (2001), bob (2002) and root; it needs root"
        );
        return;
    }
    if !flotilla_compat_tests::sh("command -v python3 >/dev/null && command -v runuser >/dev/null && id alice >/dev/null 2>&1 && id bob >/dev/null 2>&1") {
        eprintln!("SKIPPED: python3, runuser and the users alice and bob are needed (golden_replay creates them)");
        return;
    }
    flotilla_compat_tests::build_binaries();
    let cases = load_goldens_from(&dir).expect("accounting goldens load");
    assert!(cases.len() >= 70, "{} accounting goldens", cases.len());
    let tmp = tempfile::Builder::new()
        .prefix("flt-acct-replay")
        .tempdir()
        .expect("tempdir");
    let stubs = flotilla_compat_tests::stub_commands(tmp.path(), &flotilla_compat_tests::bin_dir());
    let got_dir = tmp.path().join("got");
    std::fs::create_dir_all(&got_dir).unwrap();
    prepare_homes();
    let mut ids: BTreeMap<String, u64> = BTreeMap::new();
    let mut wait_failures: BTreeMap<String, String> = BTreeMap::new();
    let mut phase = 1;
    let mut cluster = Some(
        Phase::start(1, &stubs)
            .unwrap_or_else(|e| panic!("the phase 1 cluster did not start: {e}")),
    );
    let mut no_cluster = String::new();
    for case in &cases {
        let name = format!("{:04}_{}", case.seq, sanitize(&case.case));
        if phase_of(&dir, case) == 2 && phase == 1 {
            drop(cluster.take());
            phase = 2;
            match Phase::start(2, &stubs) {
                Ok(p) => cluster = Some(p),
                Err(e) => no_cluster = e,
            }
            if let Some(p) = cluster.as_ref() {
                // Phase 1's end state of the accounting, then capture.py's setup of phase 2.
                let root = Phase::root_env();
                for c in cases.iter().filter(|c| phase_of(&dir, c) == 1) {
                    let changes = c.cmd.starts_with("sacctmgr")
                        && !c.cmd.contains(" show ")
                        && !c.cmd.contains(" list ");
                    if changes {
                        p.run(&c.user, &c.env, &c.cwd, c.stdin.as_deref(), &c.cmd);
                    }
                }
                let setup = std::fs::read_to_string(dir.join("phase2-setup.txt"))
                    .expect("phase2-setup.txt");
                for step in setup
                    .lines()
                    .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
                {
                    p.run("root", &root, "/", None, step);
                }
            }
        }
        let Some(p) = cluster.as_ref() else {
            // Every case of a phase whose cluster did not start fails.
            wait_failures.insert(name.clone(), format!("no cluster: {no_cluster}"));
            let rec = serde_json::json!({"case": case.case, "seq": case.seq, "cmd": case.cmd, "user": case.user,
                "exit_code": -1, "stdout": "", "stderr": ""});
            std::fs::write(
                got_dir.join(format!("{name}.json")),
                serde_json::to_string(&rec).unwrap(),
            )
            .unwrap();
            continue;
        };
        let mut failed = Vec::new();
        if let Err(e) = before(p, case, &ids) {
            failed.push(format!("before it: {e}"));
        }
        let cmd = command(case, &ids);
        let (code, out, err) = p.run(
            &case.user,
            &case.env,
            &case.cwd,
            case.stdin.as_deref(),
            &cmd,
        );
        if let Some(sym) = case.case.strip_prefix("sbatch_").filter(|s| {
            case.template.contains("--parsable")
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }) {
            if let Ok(id) = out.trim().parse::<u64>() {
                ids.insert(sym.to_string(), id);
            }
        }
        if changes_state(&cmd) {
            if let Err(e) = p.settle() {
                failed.push(format!("after it: {e}"));
            }
        }
        if !failed.is_empty() {
            wait_failures.insert(name.clone(), failed.join("; "));
        }
        let rec = serde_json::json!({
            "case": case.case, "seq": case.seq, "cmd": case.cmd, "user": case.user, "ran": cmd,
            "exit_code": code, "stdout": out, "stderr": err,
        });
        std::fs::write(
            got_dir.join(format!("{name}.json")),
            serde_json::to_string(&rec).unwrap(),
        )
        .unwrap();
    }
    drop(cluster);
    let out = Command::new("python3")
        .arg("-c")
        .arg(DRIVER)
        .arg(shared_dir().join("slurm-reference"))
        .arg(&dir)
        .arg(&got_dir)
        .arg(dir.join("volatile.tsv"))
        .arg(flotilla_compat_tests::hostname())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "normalize driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let res: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&out.stdout).expect("driver json");
    let known = flotilla_compat_tests::read_list(&dir.join("known_failures.txt"));
    let (mut pass, mut unexpected, mut now_passing, mut report) =
        (0, Vec::new(), Vec::new(), String::new());
    for (name, r) in &res {
        if r["ok"].as_bool().unwrap_or(false) && !wait_failures.contains_key(name) {
            pass += 1;
            if known.contains_key(name) {
                now_passing.push(name.clone());
            }
        } else {
            let waited = wait_failures
                .get(name)
                .map_or(String::new(), |e| format!("  wait: {e}\n"));
            report.push_str(&format!(
                "--- {name}\n{waited}{}\n",
                r["diff"].as_str().unwrap_or("")
            ));
            if !known.contains_key(name) {
                unexpected.push(name.clone());
            }
        }
    }
    let report_path = std::env::temp_dir().join("flotilla-accounting-replay-report.txt");
    std::fs::write(&report_path, &report).unwrap();
    eprintln!(
        "accounting replay: {pass} of {} goldens pass ({} known failures listed); diffs in {}",
        res.len(),
        known.len(),
        report_path.display()
    );
    let mut problems = Vec::new();
    if !unexpected.is_empty() {
        problems.push(format!(
            "goldens failing but not in known_failures.txt:\n  {}",
            unexpected.join("\n  ")
        ));
    }
    if !now_passing.is_empty() {
        problems.push(format!(
            "goldens now passing: remove them from known_failures.txt:\n  {}",
            now_passing.join("\n  ")
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Templates run with Flotilla's ids; the doubled braces of the rivosinc lines are literal.
#[test]
fn commands_substitute_flotilla_ids() {
    let case: GoldenCase = serde_json::from_value(serde_json::json!({
        "case": "sstat_j", "seq": 1, "cmd": "sstat -j 10", "template": "sstat -j {ST} -o '{{\"a\": 1}}'",
        "ids": {"ST": "10"}, "env": {}, "exit_code": 0, "stdout": "", "stderr": ""
    }))
    .unwrap();
    let ids: BTreeMap<String, u64> = [("ST".to_string(), 12)].into();
    assert_eq!(command(&case, &ids), "sstat -j 12 -o '{\"a\": 1}'");
    assert!(changes_state("sacctmgr -i add account x"));
    assert!(!changes_state("sshare -a"));
}
