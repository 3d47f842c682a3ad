//! Replays the project's own goldens of real Slurm 22.05 (`compat-tests/goldens-extra`,
//! recorded by `goldens-extra/capture.py` against the reference cluster, issue #23) against
//! Flotilla: a local cluster configured like the reference (its `slurm.conf`, `gres.conf`,
//! `topology.conf`, and its accounting associations as `quota.conf`), in production mode as
//! root (`FLOTILLA_TEST_ROOT=1`), with Flotilla's commands first on `PATH`.
//!
//! Each case is a bash snippet that sources `lib.sh` (the same file the recording used) and
//! prints only what does not depend on job ids: its submissions are named `J1`, `J2`, ... So
//! the cases are independent of each other and of the order they run in; before each one the
//! replay waits until no job is pending or running (each case cancels its own jobs), as the
//! recording did. Both sides go through the reference `normalize.py` (times, host names,
//! volatile columns), and must then be equal: stdout, stderr and exit status. Cases listed
//! in `goldens-extra/known_failures.txt` must fail (the list only shrinks); every other case
//! must pass. `FLOTILLA_EXTRA_ONLY=a01,a05` replays the cases of some areas only (the lists
//! are then checked for those cases).
//!
//! Needs root (the cases run as alice, bob and root) and `FLOTILLA_TEST_ROOT=1`; otherwise
//! prints `SKIPPED: <reason>`.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::{load_goldens_from, shared_dir, workspace_root, GoldenCase};
use flotilla_proto::client::Client;
use flotilla_proto::{JobQuery, JobRef, NodeQuery, Request, Response, Role};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use flotilla_compat_tests::wait::{poll_until, wait_until};
use std::time::Duration;

/// The reference's accounting associations (`setup.sh`: alice and bob in account `research`,
/// their default), as Flotilla's `quota.conf`.
const QUOTA_CONF: &str = "# The reference cluster's accounting associations.\nAccount=research Users=alice,bob\n";

/// The job scripts the cases use (`cases.py`'s `SCRIPTS`).
const SCRIPTS: &[(&str, &str)] = &[("sleep.sh", "#!/bin/bash\nsleep ${1:-600}\n"), ("true.sh", "#!/bin/bash\ntrue\n")];

fn extra_dir() -> PathBuf {
    workspace_root().join("compat-tests").join("goldens-extra")
}

fn call(socket: &Path, req: Request) -> Option<Response> {
    let mut c = Client::connect_unix(socket, Role::Command).ok()?;
    c.call(None, req).ok()
}

/// The jobs (array jobs as one) that are pending, running or completing; `[0]` when the
/// controller does not answer.
fn live_jobs(socket: &Path) -> Vec<u64> {
    match call(socket, Request::QueryJobs(JobQuery { include_finished: true, ..JobQuery::default() })) {
        Some(Response::Jobs(j)) => {
            let mut ids: Vec<u64> =
                j.iter().filter(|j| j.state.is_some_and(|s| !s.is_finished())).map(|j| j.array_job_id.unwrap_or(j.job_id)).collect();
            ids.dedup();
            ids
        }
        _ => vec![0],
    }
}

/// Until no job is pending, running or completing (120 s at most); a case that failed
/// before its `fin` left jobs behind, so they are cancelled first (as `capture.py` does).
fn wait_idle(socket: &Path) -> Result<(), String> {
    let left = live_jobs(socket);
    if !left.is_empty() && left != [0] {
        let _ = call(
            socket,
            Request::CancelJob(flotilla_proto::CancelJob { jobs: left.iter().map(|&i| JobRef::id(i)).collect(), ..Default::default() }),
        );
    }
    let mut live = Vec::new();
    if poll_until(Duration::from_secs(120), || {
        live = live_jobs(socket);
        live.is_empty()
    }) {
        Ok(())
    } else {
        Err(format!("jobs still live after 120 s: {live:?}"))
    }
}

/// Runs `case` as its user, in its directory, with exactly its environment plus our binaries
/// first on `PATH` and `FLOTILLA_CONF`.
fn run_case(case: &GoldenCase, path_prefix: &str, conf: &Path) -> (i32, String, String) {
    let mut env = case.env.clone();
    env.insert("PATH".into(), format!("{path_prefix}:{}", env.get("PATH").cloned().unwrap_or_default()));
    env.insert("FLOTILLA_CONF".into(), conf.display().to_string());
    let mut argv: Vec<String> = Vec::new();
    if case.user != "root" {
        argv.extend(["runuser", "-u", case.user.as_str(), "--"].map(String::from));
    }
    argv.extend(["env", "-i"].map(String::from));
    argv.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    argv.extend(["/bin/bash", "-c", case.cmd.as_str()].map(String::from));
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(if case.cwd.is_empty() { "/" } else { &case.cwd })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if case.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .spawn()
        .expect("spawn case");
    if let (Some(input), Some(mut pipe)) = (&case.stdin, child.stdin.take()) {
        let _ = pipe.write_all(input.as_bytes());
    }
    let out = child.wait_with_output().expect("case runs");
    (out.status.code().unwrap_or(128), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Compares every case of `got_dir` with its recording after `normalize.py` (the recording
/// with its own host name, ours with this host's); prints `{name: {ok, diff}}` as JSON.
const DRIVER: &str = r#"
import json, os, sys, difflib
ref, gold_dir, got_dir, host = sys.argv[1:5]
sys.path.insert(0, ref)
import normalize
res = {}
for f in sorted(os.listdir(got_dir)):
    b = json.load(open(os.path.join(got_dir, f)))
    a = json.load(open(os.path.join(gold_dir, f)))
    na, nb = normalize.normalize_case(a, a.get('host', 'vm')), normalize.normalize_case(b, host)
    diff = [k for k in ('exit_code', 'stdout', 'stderr') if na[k] != nb[k]]
    lines = []
    for k in diff:
        if k == 'exit_code':
            lines.append('exit_code: want %s got %s' % (na[k], nb[k]))
            continue
        for l in difflib.unified_diff(na[k].splitlines(), nb[k].splitlines(), 'want', 'got', lineterm='', n=0):
            lines.append('  ' + l)
    res[f[:-5]] = {'ok': not diff, 'diff': '\n'.join(lines[:40])}
print(json.dumps(res))
"#;

#[test]
fn extra_goldens() {
    if !flotilla_compat_tests::root_tests("the extra goldens run cases as alice (2001), bob (2002) and root") {
        return;
    }
    if !flotilla_compat_tests::sh("command -v python3 >/dev/null && command -v runuser >/dev/null") {
        eprintln!("SKIPPED: python3 and runuser are needed");
        return;
    }
    flotilla_compat_tests::ensure_user("alice", 2001);
    flotilla_compat_tests::ensure_user("bob", 2002);
    flotilla_compat_tests::build_binaries();
    let only: Option<Vec<String>> =
        std::env::var("FLOTILLA_EXTRA_ONLY").ok().map(|s| s.split(',').map(|a| a.trim().to_string()).collect());
    let cases: Vec<GoldenCase> = load_goldens_from(&extra_dir())
        .expect("extra goldens load")
        .into_iter()
        .filter(|c| only.as_ref().is_none_or(|o| o.iter().any(|a| c.case.starts_with(a.as_str()))))
        .collect();
    assert!(!cases.is_empty(), "no extra goldens in {}", extra_dir().display());

    let dir = tempfile::Builder::new().prefix("flotilla-extra").tempdir().expect("tempdir");
    flotilla_compat_tests::sh(&format!("chmod 755 {}", dir.path().display()));
    let confdir = dir.path().join("conf");
    std::fs::create_dir_all(&confdir).unwrap();
    let refconf = shared_dir().join("slurm-reference").join("conf");
    for f in ["slurm.conf", "gres.conf", "topology.conf"] {
        std::fs::copy(refconf.join(f), confdir.join(f)).unwrap();
    }
    // Job ids from 5000 (`FirstJobId`): `lib.sh`'s `m` writes every number equal to one of
    // a case's job ids as `J<n>`, so small ids (a fresh cluster's 1, 2, ...) would take a
    // case's own numbers (`rc=1`, a time limit of 90) for ids. Four digits, as the
    // reference's ids were when the cases were recorded (`%5j` pads them with one zero).
    let mut slurm_conf = std::fs::read_to_string(confdir.join("slurm.conf")).unwrap();
    slurm_conf.push_str("FirstJobId=5000\n");
    std::fs::write(confdir.join("slurm.conf"), slurm_conf).unwrap();
    std::fs::write(confdir.join("quota.conf"), QUOTA_CONF).unwrap();
    let cluster = LocalCluster::start_with(Some(&confdir), |o| {
        o.fast = false;
        o.bin_dir = Some(flotilla_compat_tests::bin_dir());
    });
    let socket = cluster.socket();
    wait_until(
        "the 4 nodes to register IDLE",
        Duration::from_secs(30),
        || matches!(call(&socket, Request::QueryNodes(NodeQuery::default())),
            Some(Response::Nodes(n)) if n.len() == 4 && n.iter().all(|n| !n.not_responding && n.state == "IDLE")),
        || format!("{:?}", call(&socket, Request::QueryNodes(NodeQuery::default()))),
    );
    for user in ["alice", "bob"] {
        let home = PathBuf::from(format!("/home/{user}/x"));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).unwrap();
        std::fs::copy(extra_dir().join("lib.sh"), home.join("lib.sh")).unwrap();
        for (f, body) in SCRIPTS {
            std::fs::write(home.join(f), body).unwrap();
        }
        flotilla_compat_tests::sh(&format!("chmod 755 {h}/*.sh; chown -R {user}:{user} {h}", h = home.display()));
    }
    let bins = flotilla_compat_tests::bin_dir();
    let stubs = flotilla_compat_tests::stub_commands(dir.path(), &bins);
    let path_prefix = format!("{}:{}", bins.display(), stubs.display());
    let got_dir = dir.path().join("got");
    std::fs::create_dir_all(&got_dir).unwrap();
    let mut wait_failures = BTreeMap::new();
    for case in &cases {
        let name = format!("{:04}_{}", case.seq, case.case);
        if let Err(e) = wait_idle(&socket) {
            wait_failures.insert(name.clone(), e);
        }
        let (code, out, err) = run_case(case, &path_prefix, &cluster.slurm_conf());
        let rec = serde_json::json!({"case": case.case, "seq": case.seq, "cmd": case.cmd, "user": case.user,
            "exit_code": code, "stdout": out, "stderr": err});
        std::fs::write(got_dir.join(format!("{name}.json")), serde_json::to_string(&rec).unwrap()).unwrap();
    }
    drop(cluster);
    let out = Command::new("python3")
        .arg("-c")
        .arg(DRIVER)
        .arg(shared_dir().join("slurm-reference"))
        .arg(extra_dir())
        .arg(&got_dir)
        .arg(flotilla_compat_tests::hostname())
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "normalize driver failed: {}", String::from_utf8_lossy(&out.stderr));
    let res: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&out.stdout).expect("driver json");
    let known = flotilla_compat_tests::read_list(&extra_dir().join("known_failures.txt"));
    let (mut pass, mut unexpected, mut now_passing, mut report) = (0, Vec::new(), Vec::new(), String::new());
    for (name, r) in &res {
        let ok = r["ok"].as_bool().unwrap_or(false) && !wait_failures.contains_key(name);
        if ok {
            pass += 1;
            if known.contains_key(name) {
                now_passing.push(name.clone());
            }
        } else {
            let waited = wait_failures.get(name).map_or(String::new(), |e| format!("  wait: {e}\n"));
            report.push_str(&format!("--- {name}\n{waited}{}\n", r["diff"].as_str().unwrap_or("")));
            if !known.contains_key(name) {
                unexpected.push(name.clone());
            }
        }
    }
    let report_path = std::env::temp_dir().join("flotilla-extra-report.txt");
    std::fs::write(&report_path, &report).unwrap();
    eprintln!("extra goldens: {pass} of {} pass; diffs in {}", res.len(), report_path.display());
    let mut problems = Vec::new();
    if !unexpected.is_empty() {
        problems.push(format!("extra goldens failing but not in known_failures.txt:\n{report}"));
    }
    if !now_passing.is_empty() {
        problems.push(format!("extra goldens now passing: remove them from known_failures.txt:\n  {}", now_passing.join("\n  ")));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
