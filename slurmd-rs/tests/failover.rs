//! A failover with real node daemons: two real `slurmctld` processes on one throw-away
//! PostgreSQL state store (`StateStorageType=state/postgres`, `SlurmctldTimeout=2`) and a real
//! `slurmd` (cgroups on as root with `FLOTILLA_TEST_ROOT=1`) with both `SlurmctldHost=` lines.
//!
//! A zombie leader: the leader is `SIGSTOP`ped while the node runs one of its jobs. The process
//! lives and its socket stays open, so only liveness tells the node: the leader's keepalives
//! (`CtlToNode::Keepalive`, every third of `SlurmctldTimeout`) stop, and after one and a half
//! `SlurmctldTimeout` of silence the node leaves it for the next `SlurmctldHost`. There the
//! standby has taken the lapsed lease in the next epoch; the node registers with its running
//! job, which the new leader sees running and completes. `SIGCONT`ed, the old leader finds its
//! lease lost at its next fence and steps down (its process ends) without reaching the node:
//! the job ran once, the node's fence stands at the new epoch.
//!
//! Without PostgreSQL installed the test prints `SKIPPED: PostgreSQL ...` and passes (CI
//! installs it and fails on that line).

mod common;

#[path = "../../admin/src/pg.rs"]
mod pg;

use common::*;
use flotilla_proto::JobStateWire;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// The two controllers, killed when the test ends.
struct Ctls(Vec<Child>);

impl Drop for Ctls {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts controller `name` listening on `listen` (its own state directory, address file and
/// log `slurmctld-<name>.log`).
fn spawn_ctld(c: &Cluster, name: &str, listen: SocketAddr) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(c.path(&format!("slurmctld-{name}.log")))
        .unwrap();
    Command::new(slurmctld_bin())
        .arg("-D")
        .arg("-f")
        .arg(c.path("slurm.conf"))
        .arg("--key")
        .arg(c.path("slurm.key"))
        .arg("--state-dir")
        .arg(c.path(&format!("state-{name}")))
        .arg("--listen")
        .arg(listen.to_string())
        .arg("--addr-file")
        .arg(c.path(&format!("ctld-{name}.addr")))
        .args(["--tick-ms", "100", "--sched-interval-ms", "100", "--debounce-ms", "5", "--sync", "normal"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn slurmctld")
}

/// Log `name` without its colours (the daemons' `tracing` output writes ANSI escapes).
fn log(c: &Cluster, name: &str) -> String {
    let text = std::fs::read_to_string(c.path(name)).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            for e in chars.by_ref() {
                if e.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

/// Every log of the test, for failure messages.
fn logs(c: &Cluster) -> String {
    let mut out = c.logs();
    for n in ["slurmctld-a.log", "slurmctld-b.log"] {
        out.push_str(&format!("---- {n} ----\n{}\n", log(c, n)));
    }
    out
}

/// Whether controller `name` leads (its address file, written once it took the lease).
fn leads(c: &Cluster, name: &str) -> bool {
    c.path(&format!("ctld-{name}.addr")).exists()
}

#[test]
fn a_node_leaves_a_paused_leader_and_its_job_completes_under_the_new_one() {
    if !pg::available() {
        eprintln!("SKIPPED: PostgreSQL is not installed ({} has no initdb): the failover test did not run", pg::pg_bin().display());
        return;
    }
    let pg_dir = tempfile::tempdir().unwrap();
    let pg = pg::LocalPg::start(&pg_dir.path().join("pg"), 5432, false).unwrap_or_else(|e| panic!("{e}"));
    // One port on two addresses: a on 127.0.0.1 (the first SlurmctldHost), b on 127.0.0.5.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let a_addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let b_addr: SocketAddr = ([127, 0, 0, 5], port).into();
    let mut c = Cluster::configure(
        1,
        &format!("SlurmctldHost=backup(127.0.0.5)\nSlurmctldPort={port}\nSlurmctldTimeout=2\n{}", pg.conf_lines()),
    );
    let mut ctls = Ctls(vec![spawn_ctld(&c, "a", a_addr)]);
    assert!(wait_for(60, || leads(&c, "a")), "a leads: {}", logs(&c));
    ctls.0.push(spawn_ctld(&c, "b", b_addr));
    assert!(
        wait_for(30, || log(&c, "slurmctld-b.log").contains("standby: another controller leads")),
        "b waits as a standby: {}",
        logs(&c)
    );
    c.addr = a_addr;
    c.start_nodes(1);

    // A job that runs until the test lets it end, and counts its starts.
    let work = c.path("work");
    std::fs::create_dir_all(&work).unwrap();
    let (flag, starts) = (work.join("go"), work.join("starts"));
    let script = format!(
        "#!/bin/sh\necho started >> {}\nwhile [ ! -e {} ]; do sleep 0.1; done\necho done\n",
        starts.display(),
        flag.display()
    );
    let id = c.submit(job(&script, &work));
    c.wait_running(id, 30);
    assert!(wait_for(30, || std::fs::read_to_string(&starts).is_ok_and(|s| s.lines().count() == 1)), "the job started");
    let node_log = "slurmd-gpu01.log";
    assert!(c.log_lines(node_log, "controller epoch raised") >= 1, "the node saw a's epoch: {}", logs(&c));

    // The zombie: a stops (its socket stays open). b takes the lapsed lease; the node hears no
    // keepalive for 3 s, leaves a, and registers with b with its running job.
    let a_pid = nix::unistd::Pid::from_raw(ctls.0[0].id() as i32);
    nix::sys::signal::kill(a_pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let stopped = Instant::now();
    assert!(wait_for(30, || leads(&c, "b")), "b took the lease: {}", logs(&c));
    assert!(
        wait_for(30, || c.log_lines(node_log, "no keepalive from the controller") >= 1),
        "the node left the silent leader: {}",
        logs(&c)
    );
    assert!(
        wait_for(30, || log(&c, node_log).lines().any(|l| l.contains("registered") && l.contains(&b_addr.to_string()) && l.contains("running=1"))),
        "the node registered with b, its job running: {}",
        logs(&c)
    );
    let moved = stopped.elapsed();
    c.addr = b_addr;
    let j = c.job(id).expect("b has the job");
    assert_eq!(j.state, Some(JobStateWire::Running), "b sees the job running: {j:?}");
    let nodes = c.nodes();
    assert!(nodes.iter().any(|n| n.name == "gpu01" && !n.not_responding), "b sees the node responding: {nodes:?}");

    // The job ends under b.
    std::fs::write(&flag, "").unwrap();
    let j = c.wait_done(id, 60);
    assert_eq!(j.state, Some(JobStateWire::Completed), "{j:?}\n{}", logs(&c));
    assert_eq!(std::fs::read_to_string(&starts).unwrap(), "started\n", "the job ran once");

    // a resumes: it finds its lease lost at its next fence and steps down (its process ends);
    // it never reaches the node, which stays at b's epoch.
    nix::sys::signal::kill(a_pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let a = &mut ctls.0[0];
    assert!(wait_for(30, || a.try_wait().unwrap().is_some()), "the resumed leader stepped down: {}", logs(&c));
    let alog = log(&c, "slurmctld-a.log");
    assert!(alog.contains("lost the leader lease of epoch 1") && alog.contains("stepping down"), "{alog}");
    assert_eq!(std::fs::read_to_string(c.path("spool/gpu01/ctld_epoch")).unwrap(), "2\n", "the node's fence is b's epoch");
    // After the step-down the node is still b's: a job submitted now runs there.
    let id2 = c.submit(job("#!/bin/sh\ntrue\n", &work));
    let j2 = c.wait_done(id2, 60);
    assert_eq!(j2.state, Some(JobStateWire::Completed), "{j2:?}\n{}", logs(&c));
    let refused = c.log_lines(node_log, "refused a message from controller epoch 1");
    eprintln!(
        "node on the new leader {} ms after SIGSTOP of the old one; messages of epoch 1 refused after it: {refused}",
        moved.as_millis()
    );
    drop(ctls);
    drop(pg);
}
