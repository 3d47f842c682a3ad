//! Attacks on the node daemon by a user with a job (issue #17), each refused: the daemons run
//! as production runs them (as root, cgroups on: `--cgroup auto` with `FLOTILLA_TEST_ROOT=1`,
//! each test cluster in its own cgroup scope), the jobs as alice (uid 2001), the other user
//! is bob (uid 2002).
//!
//! - a step's `-o` naming a symlink to a root-owned file (root must not open it);
//! - a batch job's output directory swapped for a symlink to a root-owned directory;
//! - the stop notice's directory swapped for a symlink into a root-only directory;
//! - another user reading a job's `job.json` (script and environment) in the spool;
//! - a second `slurmd` on the same spool;
//! - an `srun` I/O endpoint that accepts and never reads (root threads blocked).
//!
//! The root tests run when `FLOTILLA_TEST_ROOT=1` and the test runs as root (CI does both);
//! otherwise they say `SKIPPED:` and why. The last two need no root and always run.
//!
//! `srun` is played by the test: it asks the controller for a step (`Request::CreateStep`)
//! with its own I/O port and reads (or does not read) what the node daemon sends there.

mod common;

use common::*;
use flotilla_proto::step::{read_msg, StepIo, StepLayout, StepRequest};
use flotilla_proto::{JobStateWire, Request, Response};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

/// True when the root tests may run (else prints why not).
fn root() -> bool {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") {
        println!("SKIPPED: set FLOTILLA_TEST_ROOT=1 and run as root to attack the node daemon as another user");
        return false;
    }
    assert!(nix::unistd::geteuid().is_root(), "FLOTILLA_TEST_ROOT=1 but not running as root");
    true
}

/// `(uid, gid)` of `name`, created with `useradd` (as .ci/run does) when missing.
fn ensure_user(name: &str, uid: u32) -> (u32, u32) {
    if nix::unistd::User::from_name(name).ok().flatten().is_none() {
        let st = std::process::Command::new("useradd")
            .args(["-u", &uid.to_string(), "-m", "-s", "/bin/bash", name])
            .status()
            .expect("run useradd");
        assert!(st.success(), "useradd {name}");
    }
    let u = nix::unistd::User::from_name(name).unwrap().unwrap();
    (u.uid.as_raw(), u.gid.as_raw())
}

/// A directory of `c` owned by `(uid, gid)`, mode 0755.
fn user_dir(c: &Cluster, name: &str, (uid, gid): (u32, u32)) -> std::path::PathBuf {
    let d = c.path(name);
    std::fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(uid), Some(gid)).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// A batch job of alice's (`(uid, gid)`) running `script` in `work`.
fn alice_job(script: &str, work: &Path, (uid, gid): (u32, u32)) -> flotilla_proto::SubmitJob {
    let mut s = job(script, work);
    s.uid = uid;
    s.gid = gid;
    s.user = "alice".into();
    s
}

/// Plays `srun`: asks for a one-task step of `job_id` as `(uid, gid)` running `argv` in `work`
/// with `-o stdout`, and returns the node daemon's accepted I/O connection (its `Hello`
/// read) with the layout.
fn fake_srun(c: &Cluster, ids: (u32, u32), job_id: u64, argv: &[&str], work: &Path, stdout: Option<&str>) -> (TcpStream, StepLayout) {
    fake_srun_n(c, ids, job_id, 1, argv, work, stdout)
}

/// [`fake_srun`] with `ntasks` tasks.
fn fake_srun_n(
    c: &Cluster,
    (uid, gid): (u32, u32),
    job_id: u64,
    ntasks: u32,
    argv: &[&str],
    work: &Path,
    stdout: Option<&str>,
) -> (TcpStream, StepLayout) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let key = vec![7u8; 16];
    let req = StepRequest {
        job_id,
        ntasks: Some(ntasks),
        name: argv[0].into(),
        argv: argv.iter().map(|a| a.to_string()).collect(),
        environment: vec![("PATH".into(), "/usr/bin:/bin".into())],
        work_dir: work.to_string_lossy().into_owned(),
        stdout: stdout.map(String::from),
        srun_addr: listener.local_addr().unwrap().to_string(),
        io_key: key.clone(),
        uid,
        gid,
        // The test ends no step (no StepComplete): the next one shares the CPUs.
        overlap: true,
        ..StepRequest::default()
    };
    let layout = match c.call(uid, Request::CreateStep(Box::new(req))) {
        Ok(Response::StepCreated(l)) => l,
        other => panic!("step not created: {other:?}\n{}", c.logs()),
    };
    // The node daemon's connection, accepted by a thread; not within 30 s fails the test.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(listener.accept().map(|(s, _)| s));
    });
    let s = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => panic!("accept: {e}"),
        Err(_) => panic!("the node daemon never connected\n{}", c.logs()),
    };
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = &s;
    match read_msg::<_, StepIo>(&mut r) {
        Ok(StepIo::Hello { job_id: j, io_key, .. }) => assert_eq!((j, io_key), (job_id, key)),
        other => panic!("expected the node's hello: {other:?}"),
    }
    (s, layout)
}

/// Reads the step's frames until its one task's exit; returns (stderr text, exit code).
fn read_until_exit(s: &TcpStream) -> (String, i32) {
    read_until_exits(s, 1)
}

/// Reads the step's frames until `n` task exits; returns (stderr text, worst exit code).
fn read_until_exits(s: &TcpStream, mut n: usize) -> (String, i32) {
    let mut err = Vec::new();
    let mut worst = 0;
    let mut r = s;
    loop {
        match read_msg::<_, StepIo>(&mut r) {
            Ok(StepIo::Stderr { data, .. }) => err.extend(data),
            Ok(StepIo::TaskExit { exit_code, .. }) => {
                worst = worst.max(exit_code);
                n -= 1;
                if n == 0 {
                    return (String::from_utf8_lossy(&err).into_owned(), worst);
                }
            }
            Ok(_) => {}
            Err(e) => panic!("the step's connection ended without the task's exit: {e}"),
        }
    }
}

/// `srun -o out.txt` where `out.txt` is alice's symlink to a root-owned 0600 file: root used to
/// open (create, truncate) it and the task's output overwrote the file. Now the task's child
/// opens it as alice: refused with slurmstepd's message, exit code 2, the root file untouched.
#[test]
fn step_output_symlink_to_a_root_file_is_opened_as_the_user() {
    if !root() {
        return;
    }
    let alice = ensure_user("alice", 2001);
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(1);
    let work = user_dir(&c, "alice", alice);
    let victim = c.path("root-secret");
    std::fs::write(&victim, "root's\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = work.join("out.txt");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(alice.0), Some(alice.1)).unwrap();
    let mut s = alice_job("#!/bin/sh\nsleep 300\n", &work, alice);
    s.ntasks = Some(2);
    let id = c.submit(s);
    c.wait_running(id, 30);

    let (s, _) = fake_srun(&c, alice, id, &["sh", "-c", "echo overwritten"], &work, Some("out.txt"));
    let (err, code) = read_until_exit(&s);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's\n", "the root file is untouched");
    assert_eq!(std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(
        err,
        format!("slurmstepd: error: Could not open stdout file {}: Permission denied\n", link.display()),
        "{}",
        c.logs()
    );
    assert_eq!(code, 2);

    // The same step with a file of alice's: written, as alice.
    let (s, _) = fake_srun(&c, alice, id, &["sh", "-c", "echo mine"], &work, Some("mine_%t.txt"));
    let (err, code) = read_until_exit(&s);
    assert_eq!((err.as_str(), code), ("", 0));
    let mine = work.join("mine_0.txt");
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "mine\n");
    assert_eq!(std::fs::metadata(&mine).unwrap().uid(), alice.0, "created by alice");

    // Two tasks sharing one file (it held something before): truncated once, both lines kept.
    let shared = work.join("shared.txt");
    std::fs::write(&shared, "old contents that must go\n").unwrap();
    std::os::unix::fs::chown(&shared, Some(alice.0), Some(alice.1)).unwrap();
    let (s, _) = fake_srun_n(&c, alice, id, 2, &["sh", "-c", "echo task $SLURM_PROCID"], &work, Some("shared.txt"));
    let (err, code) = read_until_exits(&s, 2);
    assert_eq!((err.as_str(), code), ("", 0));
    let mut lines: Vec<String> = std::fs::read_to_string(&shared).unwrap().lines().map(String::from).collect();
    lines.sort();
    assert_eq!(lines, ["task 0", "task 1"]);
}

/// A batch job whose output directory does not exist yet (the job waits for it) is given a
/// symlink to a root-owned directory instead: the output is opened as alice, so the job fails
/// and nothing is created there.
#[test]
fn batch_output_directory_swapped_for_a_root_directory() {
    if !root() {
        return;
    }
    let alice = ensure_user("alice", 2001);
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(1);
    let work = user_dir(&c, "alice", alice);
    let rootdir = c.path("root-dir");
    std::fs::create_dir_all(&rootdir).unwrap();
    std::fs::set_permissions(&rootdir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut s = alice_job("#!/bin/sh\necho ran\n", &work, alice);
    s.stdout = Some(format!("{}/logs/%j.out", work.display()));
    let id = c.submit(s);
    // Submitted; the job waits for its output directory, which turns up as a symlink.
    let link = work.join("logs");
    std::os::unix::fs::symlink(&rootdir, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(alice.0), Some(alice.1)).unwrap();
    let j = c.wait_done(id, 60);
    // A launch failure, as Slurm 22.05 shows it (ESLURMD_IO_ERROR read as a wait status).
    assert_eq!(
        (j.state, j.exit_code, j.exit_signal, j.reason.as_str()),
        (Some(JobStateWire::Failed), 0, 53, "JobLaunchFailure"),
        "{}",
        c.logs()
    );
    let left: Vec<_> = std::fs::read_dir(&rootdir).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "nothing created in the root directory: {left:?}");
}

/// The stop notice on cancel is written into the job's stderr file, whose directory alice
/// swapped (after the job opened it) for a symlink into a root-only (0700) directory holding a
/// file of hers: the root supervisor used to follow it and append there; now the notice is
/// written as alice, who cannot reach that directory.
#[test]
fn stop_notice_through_a_swapped_directory() {
    if !root() {
        return;
    }
    let alice = ensure_user("alice", 2001);
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(1);
    let work = user_dir(&c, "alice", alice);
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::os::unix::fs::chown(&logs, Some(alice.0), Some(alice.1)).unwrap();
    let mut s = alice_job("#!/bin/sh\necho started\nsleep 300\n", &work, alice);
    s.stdout = Some(format!("{}/job.out", logs.display()));
    let id = c.submit(s);
    c.wait_running(id, 30);
    let out = logs.join("job.out");
    assert!(wait_for(30, || std::fs::read_to_string(&out).is_ok_and(|t| t == "started\n")), "the job never started\n{}", c.logs());
    // The root-only directory, with a file of alice's of the same name.
    let hidden = c.path("root-only");
    std::fs::create_dir_all(&hidden).unwrap();
    std::fs::set_permissions(&hidden, std::fs::Permissions::from_mode(0o700)).unwrap();
    let target = hidden.join("job.out");
    std::fs::write(&target, "kept\n").unwrap();
    std::os::unix::fs::chown(&target, Some(alice.0), Some(alice.1)).unwrap();
    std::fs::rename(&logs, work.join("logs.old")).unwrap();
    std::os::unix::fs::symlink(&hidden, &logs).unwrap();
    std::os::unix::fs::lchown(&logs, Some(alice.0), Some(alice.1)).unwrap();

    let r = c.call(
        alice.0,
        Request::CancelJob(flotilla_proto::CancelJob {
            jobs: vec![flotilla_proto::JobRef::id(id)],
            ..Default::default()
        }),
    );
    assert!(r.is_ok(), "{r:?}");
    let j = c.wait_done(id, 30);
    assert_eq!(j.state, Some(JobStateWire::Cancelled));
    // The notice came before the signal that ended the job (the daemon handles both in order).
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "kept\n", "the root-only directory is untouched\n{}", c.logs());
    assert_eq!(c.log_lines("slurmd-gpu01.log", "stop notice: supervisor answered error"), 1, "{}", c.logs());
}

/// Another user (bob) reads neither a running job's `job.json` (its script and whole
/// environment, e.g. a token) nor the job's directory in the spool; alice (the job's user)
/// does not read `job.json` either, while her script runs.
#[test]
fn another_user_cannot_read_the_spool() {
    if !root() {
        return;
    }
    let alice = ensure_user("alice", 2001);
    let bob = ensure_user("bob", 2002);
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(1);
    let work = user_dir(&c, "alice", alice);
    let mut s = alice_job("#!/bin/sh\ntouch started\nsleep 300\n", &work, alice);
    s.environment.push(("HF_TOKEN".into(), "hf_secret".into()));
    let id = c.submit(s);
    c.wait_running(id, 30);
    assert!(wait_for(30, || work.join("started").exists()), "alice's script never ran\n{}", c.logs());
    let dir = c.path(&format!("spool/gpu01/jobs/{id}.0"));
    let job_json = dir.join("job.json");
    assert!(std::fs::read_to_string(&job_json).unwrap().contains("hf_secret"));
    // The user with her own group alone (setpriv, util-linux).
    let as_user = |(uid, gid): (u32, u32), args: &[&str]| {
        std::process::Command::new("setpriv")
            .args([format!("--reuid={uid}"), format!("--regid={gid}"), "--clear-groups".into()])
            .args(args)
            .output()
            .unwrap()
    };
    let jj = job_json.to_str().unwrap();
    for (who, ids) in [("bob", bob), ("alice", alice)] {
        let o = as_user(ids, &["cat", jj]);
        assert!(!o.status.success() && !String::from_utf8_lossy(&o.stdout).contains("hf_secret"), "{who} read job.json: {o:?}");
    }
    let o = as_user(bob, &["ls", dir.to_str().unwrap()]);
    assert!(!o.status.success(), "bob listed the job directory: {o:?}");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&job_json), 0o600);
    assert_eq!(mode(&dir.join("stepd.log")), 0o600);
    assert_eq!(mode(&dir) & 0o007, 0, "nothing for others: {:o}", mode(&dir));
}

/// A second `slurmd` on a spool that a running one holds exits at once, non-zero, saying why;
/// the running one goes on.
#[test]
fn a_second_slurmd_on_the_same_spool_is_refused() {
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(1);
    let mut second = std::process::Command::new(env!("CARGO_BIN_EXE_slurmd"))
        .args(["-D", "-N", "gpu01", "--fake-gpus", "8", "--cgroup", "none", "--health", "none"])
        .arg("-f")
        .arg(c.path("slurm.conf"))
        .arg("--key")
        .arg(c.path("slurm.key"))
        .arg("--ctld")
        .arg(c.addr.to_string())
        .arg("--boot-id-file")
        .arg(c.path("boot_id.gpu01"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // It must end by itself; killed after 30 s so that the test fails instead of hanging.
    let pid = nix::unistd::Pid::from_raw(second.id() as i32);
    let mut stderr = second.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(second.wait());
    });
    let status = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(st) => Some(st.unwrap()),
        Err(_) => {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = rx.recv();
            None
        }
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut err).unwrap();
    let status = status.unwrap_or_else(|| panic!("the second slurmd kept running on the same spool: {err}"));
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("another slurmd is running on spool directory {}", c.path("spool/gpu01").display())),
        "{err}"
    );
    // The first one still serves: a job runs on gpu01.
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let id = c.submit(job("#!/bin/sh\ntrue\n", &work));
    let j = c.wait_done(id, 30);
    assert_eq!(j.state, Some(JobStateWire::Completed), "{}", c.logs());
}

/// An `srun` whose I/O endpoint accepts the node daemon's connection and never reads, while
/// the task writes without end: as under slurmstepd the task's output waits (the task blocks
/// on its pipe) for as long as the task runs, and the daemon says so once; when the job is
/// cancelled the task dies, its output in flight gives up within the write timeout (10 s), and
/// the step's thread ends (it used to block forever in a write).
#[test]
fn an_srun_that_never_reads_does_not_hold_the_step() {
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(1);
    let me = (nix::unistd::getuid().as_raw(), nix::unistd::getgid().as_raw());
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let id = c.submit(job("#!/bin/sh\nsleep 300\n", &work));
    c.wait_running(id, 30);
    let (stalled, layout) = fake_srun(&c, me, id, &["sh", "-c", "exec cat /dev/zero"], &work, None);
    assert_eq!(layout.step_id, 0);
    let waiting = "srun has taken no output for 10 s; its task still runs";
    assert!(
        wait_for(60, || c.log_lines("slurmd-gpu01.log", waiting) >= 1),
        "the daemon never waited on the paused srun\n{}",
        c.logs()
    );
    assert_eq!(c.log_lines("slurmd-gpu01.log", "step tasks ended"), 0, "a paused srun does not lose its step\n{}", c.logs());
    assert_eq!(c.job(id).and_then(|j| j.state), Some(JobStateWire::Running));
    let r = c.call(
        0,
        Request::CancelJob(flotilla_proto::CancelJob { jobs: vec![flotilla_proto::JobRef::id(id)], ..Default::default() }),
    );
    assert!(r.is_ok(), "{r:?}");
    // The task is killed with the job; its output then gets the write timeout (10 s): well
    // within 60 s.
    assert!(
        wait_for(60, || c.log_lines("slurmd-gpu01.log", "step tasks ended") == 1),
        "the step never ended with srun not reading\n{}",
        c.logs()
    );
    drop(stalled);
}
