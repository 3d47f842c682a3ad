//! `flotilla dev up`, `status`, `down` as a user runs them. Needs `slurmctld` and `slurmd`
//! built beside `flotilla` (`cargo test --workspace` builds them).

use flotilla_admin::dev;
use std::path::Path;
use std::process::Command;

/// The shared data directory: `$FLOTILLA_SHARED_DIR`, else `<workspace root>/../shared` (as
/// `flotilla_compat_tests::shared_dir`, which this crate cannot depend on: the end-to-end tests
/// depend on this crate).
fn shared_dir() -> std::path::PathBuf {
    match std::env::var_os("FLOTILLA_SHARED_DIR") {
        Some(d) => d.into(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    }
}

fn flotilla(args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_flotilla"))
        .args(args)
        .output()
        .expect("run flotilla");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// `--cgroup` of the clusters here: production mode (`auto`) as root with
/// `FLOTILLA_TEST_ROOT=1`, else `none`.
fn cgroup() -> &'static str {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() == Ok("1") && nix::unistd::geteuid().is_root() {
        "auto"
    } else {
        "none"
    }
}

/// Fails naming the daemons `dev up` starts that were not built beside `flotilla` (each is an
/// integration-tested binary of its package, so `cargo test --workspace` builds it).
fn daemons_built() {
    let bin = Path::new(env!("CARGO_BIN_EXE_flotilla")).parent().unwrap();
    let missing: Vec<&str> = ["slurmctld", "slurmd", "slurmrestd"]
        .into_iter()
        .filter(|b| !bin.join(b).is_file())
        .collect();
    assert!(missing.is_empty(), "not built in {}: {missing:?}", bin.display());
}

fn up_status_down(dir: &Path, config: Option<&Path>) -> String {
    daemons_built();
    let d = dir.to_str().unwrap();
    let mut args = vec!["dev", "up", "--dir", d, "--cgroup", cgroup()];
    let c;
    if let Some(p) = config {
        c = p.to_string_lossy().into_owned();
        args.extend(["--config", c.as_str()]);
    }
    let (rc, out, err) = flotilla(&args);
    assert_eq!(rc, 0, "up failed: {err}");
    let canon = std::fs::canonicalize(dir).unwrap();
    let (conf_line, restd_line) = out.split_once('\n').unwrap_or((&out, ""));
    assert_eq!(conf_line, format!("export SLURM_CONF={}/slurm.conf", canon.display()), "{err}");
    // slurmrestd beside the daemons, JWT on a loopback port.
    let url = restd_line
        .strip_prefix("export FLOTILLA_RESTD_URL=http://127.0.0.1:")
        .and_then(|p| p.strip_suffix('\n'))
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("no FLOTILLA_RESTD_URL line: {out:?}"));
    assert!(std::net::TcpStream::connect(("127.0.0.1", url)).is_ok(), "slurmrestd listens on {url}");
    let (_, daemons) = dev::read_record(dir).unwrap();
    assert_eq!(daemons.len(), 6);
    assert_eq!(daemons.last().map(|d| d.kind.as_str()), Some("slurmrestd"));
    assert!(daemons.iter().all(|x| dev::alive(x.pid, x.start)));
    let (rc, status, err) = flotilla(&["dev", "status", "--dir", d]);
    assert_eq!(rc, 0, "status: {status}{err}");
    let (rc, _, err) = flotilla(&["dev", "down", "--dir", d, "--grace", "5"]);
    assert_eq!(rc, 0, "down: {err}");
    for x in &daemons {
        assert!(
            !dev::alive(x.pid, x.start),
            "{} {} pid {} still runs",
            x.kind,
            x.node,
            x.pid
        );
    }
    assert!(!dir.join(dev::DAEMONS_FILE).exists());
    assert!(
        dir.join("slurm.conf").exists(),
        "down removes nothing but the record"
    );
    let (rc, _, _) = flotilla(&["dev", "status", "--dir", d]);
    assert_ne!(rc, 0);
    status
}

#[test]
fn up_status_down_leaves_nothing() {
    let t = tempfile::tempdir_in("/tmp").unwrap();
    let status = up_status_down(t.path(), None);
    for n in ["gpu01", "gpu02", "gpu03", "gpu04"] {
        assert!(
            status
                .lines()
                .any(|l| l.contains(n) && l.contains("running") && l.contains("IDLE")),
            "{status}"
        );
    }
    assert!(status.contains("answers"), "{status}");
    assert_eq!(std::fs::read_to_string(t.path().join("cgroup.conf")).unwrap(), dev::DEFAULT_CGROUP_CONF);
    let topo = std::fs::read_to_string(t.path().join("topology.conf")).unwrap();
    assert!(
        topo.contains("leaf1 Nodes=gpu[01-02]") && topo.contains("leaf2 Nodes=gpu[03-04]"),
        "{topo}"
    );
}

#[test]
fn up_with_the_reference_config_registers_its_nodes() {
    let conf = shared_dir().join("slurm-reference/conf");
    if !conf.join("slurm.conf").exists() {
        println!("SKIPPED: {} not found", conf.display());
        return;
    }
    let t = tempfile::tempdir_in("/tmp").unwrap();
    let status = up_status_down(t.path(), Some(&conf));
    for n in ["gpu01", "gpu02", "gpu03", "gpu04"] {
        assert!(
            status.lines().any(|l| l.contains(n) && l.contains("IDLE")),
            "{status}"
        );
    }
    assert!(!t.path().join("cgroup.conf").exists(), "the reference has no cgroup.conf: Slurm's defaults");
    let text = std::fs::read_to_string(t.path().join("slurm.conf")).unwrap();
    assert!(
        text.contains("ClusterName=oracle") && text.contains("NodeName=gpu01 NodeAddr=127.0.0.1 Port=17001"),
        "{text}"
    );
}

#[test]
fn cgroup_scopes_differ_by_directory() {
    let a = dev::cgroup_scope(Path::new("/tmp/a"), "dev");
    let b = dev::cgroup_scope(Path::new("/tmp/b"), "dev");
    assert_ne!(a, b);
    assert_eq!(a, dev::cgroup_scope(Path::new("/tmp/a"), "dev"), "stable");
    assert!(a.starts_with("dev-") && a.len() == 12 && a[4..].chars().all(|c| c.is_ascii_hexdigit()), "{a}");
    assert!(dev::cgroup_scope(Path::new("/tmp/a"), "oracle").starts_with("oracle-"));
}

#[test]
fn rewrite_puts_nodes_on_localhost() {
    let (body, name) = dev::rewrite_config(
        "ClusterName=x\nSlurmctldHost=vm(10.0.0.1)\nNodeName=a[1-2] NodeAddr=10.0.0.5 Port=17001 Gres=gpu:8\nPartitionName=p Nodes=a[1-2]\n",
    );
    assert_eq!(name, "x");
    assert_eq!(
        body,
        "NodeName=a[1-2] NodeAddr=127.0.0.1 Port=17001 Gres=gpu:8\nPartitionName=p Nodes=a[1-2]\n"
    );
}

/// Pids whose command line mentions `dir`.
fn processes_in(dir: &Path) -> Vec<String> {
    let d = dir.to_string_lossy().into_owned();
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(&d) && !cmd.contains(" dev ") {
            v.push(format!("{} {cmd}", e.file_name().to_string_lossy()));
        }
    }
    v
}

#[test]
fn interrupted_up_leaves_nothing() {
    for delay_ms in [30, 120] {
        let t = tempfile::tempdir_in("/tmp").unwrap();
        let d = t.path().to_str().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_flotilla"))
            .args(["dev", "up", "--dir", d, "--cgroup", "none"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let st = child.wait().unwrap();
        if st.code() == Some(0) {
            // It finished before the signal: stop it the ordinary way.
            assert_eq!(flotilla(&["dev", "down", "--dir", d]).0, 0);
        } else {
            assert_eq!(st.code(), Some(130), "{st}");
        }
        let mut left = Vec::new();
        let gone = wait_until(10, || {
            left = processes_in(t.path());
            left.is_empty()
        });
        assert!(gone, "processes left after an interrupted up: {left:?}");
    }
}

/// Runs command `run` (the commands' library, as its binary would) with environment `env`:
/// exit status, stdout, stderr.
fn command(run: fn(&[String], &mut flotilla_commands::common::Io<'_>) -> i32, args: &[&str], env: &[(String, String)]) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let getenv = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let rc = run(&args, &mut flotilla_commands::common::Io { out: &mut out, err: &mut err, env: &getenv, stdin: None });
    (rc, String::from_utf8_lossy(&out).into_owned(), String::from_utf8_lossy(&err).into_owned())
}

/// Submits `--wrap true` and waits (at most 60 s) until the job completed; the job id.
fn job_runs(env: &[(String, String)], dir: &Path) -> u64 {
    let d = dir.to_str().unwrap();
    let (rc, out, err) = command(flotilla_commands::sbatch::run, &["sbatch", "--parsable", "-D", d, "-o", "/dev/null", "--wrap", "true"], env);
    assert_eq!(
        rc,
        0,
        "sbatch: {out}{err}\nslurmctld.log:\n{}\nslurmctld-b.log:\n{}\nsackd.log:\n{}",
        dev::log_tail(dir, "slurmctld.log", 15),
        dev::log_tail(dir, "slurmctld-b.log", 15),
        dev::log_tail(dir, "sackd.log", 5)
    );
    let id: u64 = out.trim().parse().unwrap_or_else(|_| panic!("sbatch --parsable: {out:?}"));
    let getenv = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let ctl = flotilla_commands::common::Ctl::new(&getenv).unwrap();
    let mut state = None;
    let done = wait_until(60, || {
        let jobs = match ctl.call(flotilla_proto::Request::QueryJobs(flotilla_proto::JobQuery { include_finished: true, ..Default::default() })) {
            Ok(flotilla_proto::Response::Jobs(v)) => v,
            other => panic!("job query: {other:?}"),
        };
        state = jobs.iter().find(|j| j.job_id == id).and_then(|j| j.state);
        state == Some(flotilla_proto::JobStateWire::Completed)
    });
    assert!(done, "job {id} did not complete: {state:?}");
    id
}

/// Asks `done` every 100 ms until it says true (true) or `secs` seconds passed (false: the
/// caller fails with what it saw).
fn wait_until(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    loop {
        if done() {
            return true;
        }
        if t0.elapsed() >= std::time::Duration::from_secs(secs) {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// `flotilla dev up --ha`: PostgreSQL in `<dir>/pg`, two controllers on it and sackd; the
/// printed environment reaches the cluster, a job runs, `scontrol ping` shows the primary and
/// the backup UP; after `scontrol takeover` the commands follow the new leader (a job runs
/// again) and the supervisor restarts the stepped-down primary as a standby; `kill -9` of the
/// leader (the backup, then the primary) makes the other lead and the killed one come back as
/// a standby (ping both UP, a job runs); `down` stops every process, PostgreSQL included.
#[test]
fn up_ha_runs_two_controllers_on_postgres() {
    if !flotilla_admin::pg::available() {
        println!("SKIPPED: PostgreSQL is not installed ({})", flotilla_admin::pg::PG_BIN);
        return;
    }
    daemons_built();
    let bin = Path::new(env!("CARGO_BIN_EXE_flotilla")).parent().unwrap();
    assert!(bin.join("sackd").is_file(), "sackd not built in {}", bin.display());
    let t = tempfile::tempdir_in("/tmp").unwrap();
    let d = t.path().to_str().unwrap();
    let (rc, out, err) = flotilla(&["dev", "up", "--ha", "--dir", d, "--cgroup", cgroup()]);
    assert_eq!(rc, 0, "up --ha failed: {err}");
    // A failing assertion still stops the cluster (its temp dir goes with `t`).
    struct Down<'a>(&'a str);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            let _ = flotilla(&["dev", "down", "--dir", self.0, "--grace", "5"]);
        }
    }
    let down = Down(d);
    let canon = std::fs::canonicalize(t.path()).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first().copied(), Some(format!("export SLURM_CONF={}/slurm.conf", canon.display()).as_str()), "{out}");
    assert_eq!(lines.get(1).copied(), Some(format!("export FLOTILLA_AUTH_SOCKET={}/state/sackd.sock", canon.display()).as_str()), "{out}");
    assert!(lines.get(2).is_some_and(|l| l.starts_with("export FLOTILLA_RESTD_URL=http://127.0.0.1:")), "{out}");
    let (_, daemons) = dev::read_record(t.path()).unwrap();
    let kinds: Vec<&str> = daemons.iter().map(|x| x.kind.as_str()).collect();
    assert_eq!(kinds, ["postgres", "slurmctld", "sackd", "slurmctld", "slurmd", "slurmd", "slurmd", "slurmd", "slurmrestd", "supervisor"], "{daemons:?}");
    assert!(daemons.iter().all(|x| dev::alive(x.pid, x.start)));
    let conf = std::fs::read_to_string(t.path().join("slurm.conf")).unwrap();
    assert!(conf.contains("StateStorageType=state/postgres\n") && conf.contains("(127.0.0.2)\n"), "{conf}");
    let env: Vec<(String, String)> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let host = conf.lines().find_map(|l| l.strip_prefix("SlurmctldHost=")?.split_once('(').map(|(h, _)| h.to_string())).unwrap();
    let ping = || command(flotilla_commands::scontrol::run, &["scontrol", "ping"], &env);
    let both_up = format!("Slurmctld(primary) at {host} is UP\nSlurmctld(backup) at {host}-b is UP\n");
    job_runs(&env, t.path());
    assert_eq!(ping(), (0, both_up.clone(), String::new()));
    let port = conf.lines().find_map(|l| l.strip_prefix("SlurmctldPort=")).unwrap().to_string();
    let (a, b) = (format!("127.0.0.1:{port}"), format!("127.0.0.2:{port}"));
    let recorded = |node: &str| dev::read_record(t.path()).unwrap().1.into_iter().find(|x| x.kind == "slurmctld" && x.node == node).unwrap();
    // Waits (at most 60 s) until the controller of `node` runs again under a pid other than
    // `old`, `scontrol ping` shows both UP and `dev status` names one controller the leader and
    // the other a standby; returns the leader's address.
    let ids = |v: Vec<dev::Daemon>| v.into_iter().map(|x| (x.kind, x.node, x.pid, x.start)).collect::<Vec<_>>();
    let mut seen = ids(dev::read_record(t.path()).unwrap().1);
    let mut restarted = |node: &str, old: i32| -> String {
        let (mut leader_now, mut last) = (None, String::new());
        let back = wait_until(60, || {
            let now = recorded(node);
            let status = dev::status(t.path()).unwrap();
            let p = ping();
            let leads = |x: &str, y: &str| status.0.contains(&format!("controller {x} answers (leader)\n")) && status.0.contains(&format!("controller {y} answers (standby)\n"));
            let leader = [(&a, &b), (&b, &a)].into_iter().find(|(x, y)| leads(x, y)).map(|(x, _)| x.clone());
            assert!(status.0.contains(" running  restarts the controllers\n"), "{}", status.0);
            leader_now = leader.filter(|_| now.pid != old && dev::alive(now.pid, now.start) && status.1 && p.1 == both_up);
            last = format!("record pid {}; status:\n{}ping: {p:?}", now.pid, status.0);
            leader_now.is_some()
        });
        assert!(back, "slurmctld {node} (pid {old}) not back: {last}\nsupervisor.log:\n{}", dev::log_tail(t.path(), "supervisor.log", 10));
        seen.extend(ids(dev::read_record(t.path()).unwrap().1));
        leader_now.unwrap()
    };
    // The backup takes over; the old leader steps down (its process ends) and the supervisor
    // starts it again: it comes back as a standby (the backup holds the lease).
    let (rc, out, err) = command(flotilla_commands::scontrol::run, &["scontrol", "takeover"], &env);
    assert_eq!(rc, 0, "takeover: {out}{err}");
    let primary = &daemons[1];
    assert_eq!(restarted("-", primary.pid), b, "the backup leads after the takeover");
    job_runs(&env, t.path());
    // kill -9 the leader (now the backup): its database session ends with it, so the standby
    // takes the lease at its next try (every SlurmctldTimeout/6 = 1 s), before the supervisor
    // restarts the killed one (2 s), which comes back as a standby. Then the same with the
    // primary leading: the backup takes over.
    for (node, other) in [("b", &a), ("-", &b)] {
        let leader = recorded(node);
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(leader.pid), nix::sys::signal::Signal::SIGKILL).unwrap();
        assert_eq!(&restarted(node, leader.pid), other, "after kill -9 of slurmctld {node}, the other leads");
        job_runs(&env, t.path());
    }
    let log = std::fs::read_to_string(t.path().join("supervisor.log")).unwrap();
    assert_eq!(log.matches(" restarted (pid ").count(), 3, "{log}");
    std::mem::forget(down);
    let (rc, _, err) = flotilla(&["dev", "down", "--dir", d, "--grace", "5"]);
    assert_eq!(rc, 0, "down: {err}");
    for (kind, node, pid, start) in &seen {
        assert!(!dev::alive(*pid, *start), "{kind} {node} pid {pid} still runs");
    }
    assert_eq!(processes_in(t.path()), Vec::<String>::new());
    assert!(!t.path().join("pg/server/data/postmaster.pid").exists(), "PostgreSQL stopped cleanly");
}

/// `up --ha` returns only once its supervisor has read the controllers' command lines, so a
/// controller that exits as soon as `up` returns is restarted. Here the supervisor is paused
/// (SIGSTOP) the moment `up` returns, the primary is killed, and the supervisor resumes
/// (SIGCONT) once the primary is gone, as compat-tests' `restd_ha` does around a takeover.
/// Before `up` waited, a supervisor still starting when paused looked only after the exit,
/// could not read the gone controller's command line, and ended with an error (`Error: ...
/// does not run` and anyhow's backtrace in `supervisor.log`), leaving the cluster
/// unsupervised: the primary never came back.
#[test]
fn up_ha_supervisor_restarts_a_controller_gone_as_up_returns() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    if !flotilla_admin::pg::available() {
        println!("SKIPPED: PostgreSQL is not installed ({})", flotilla_admin::pg::PG_BIN);
        return;
    }
    daemons_built();
    let t = tempfile::tempdir_in("/tmp").unwrap();
    let mut o = dev::UpOptions::new(t.path());
    o.ha = true;
    o.fast = true;
    o.nodes = 1;
    o.cgroup = cgroup().into();
    o.timeout = std::time::Duration::from_secs(60);
    o.bin_dir = Some(Path::new(env!("CARGO_BIN_EXE_flotilla")).parent().unwrap().to_path_buf());
    let never = std::sync::atomic::AtomicBool::new(false);
    // A failing assertion still stops the cluster (the supervisor resumed first).
    struct Stop(dev::DevCluster, Pid);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = kill(self.1, Signal::SIGCONT);
            self.0.stop(std::time::Duration::from_secs(5));
        }
    }
    let c = dev::up(&o, &never).unwrap_or_else(|e| panic!("up --ha: {e:#}"));
    let sup = c.daemons.iter().find(|d| d.kind == "supervisor").expect("a supervisor").pid;
    kill(Pid::from_raw(sup), Signal::SIGSTOP).unwrap();
    let c = Stop(c, Pid::from_raw(sup));
    let primary = c.0.daemons.iter().find(|d| d.kind == "slurmctld" && d.node == "-").expect("the primary");
    let (old, old_start) = (primary.pid, primary.start);
    kill(Pid::from_raw(old), Signal::SIGKILL).unwrap();
    assert!(wait_until(30, || !dev::alive(old, old_start)), "slurmctld (pid {old}) still runs after SIGKILL");
    kill(Pid::from_raw(sup), Signal::SIGCONT).unwrap();
    let back = wait_until(60, || {
        dev::read_record(t.path())
            .is_ok_and(|(_, r)| r.iter().any(|d| d.kind == "slurmctld" && d.node == "-" && d.pid != old && dev::alive(d.pid, d.start)))
    });
    assert!(back, "slurmctld (pid {old}) not restarted; supervisor.log:\n{}", dev::log_tail(t.path(), "supervisor.log", 60));
    drop(c);
}
