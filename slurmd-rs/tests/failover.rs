//! A failover with real node daemons: two real `slurmctld` processes on one throw-away
//! PostgreSQL state store (`StateStorageType=state/postgres`, `SlurmctldTimeout=2`) and a real
//! `slurmd` (cgroups on as root with `FLOTILLA_TEST_ROOT=1`) with both `SlurmctldHost=` lines.
//!
//! A zombie leader, made two ways while the node runs one of its jobs:
//!
//! - `SIGSTOP`: the process lives and its socket stays open;
//! - cut off from PostgreSQL: the leader runs on, but its database connections go through a
//!   relay of the test's ([`Relay`], a Unix socket in front of the server's) that stops
//!   passing bytes, as a network partition would; the standby reaches the server directly.
//!
//! Either way only liveness tells the node: the leader's keepalives (`CtlToNode::Keepalive`,
//! every third of `SlurmctldTimeout`, sent only while its lease is fresh) stop, and after one
//! and a half `SlurmctldTimeout` of silence the node leaves it for the next `SlurmctldHost`.
//! There the standby has taken the lapsed lease in the next epoch; the node registers with its
//! running job, which the new leader sees running and completes. A submission sent to the
//! zombie meanwhile is never acknowledged. Resumed (`SIGCONT`, or the relay passing bytes
//! again), the old leader finds its lease lost at its next fence and steps down (its process
//! ends) without committing anything: the job ran once, the node's fence stands at the new
//! epoch, and every message of the old epoch that reached the node after its fence rose was
//! refused: the node's refusals (its `refused a message from controller epoch 1` lines) are
//! counted and reported.
//!
//! Without PostgreSQL installed the tests print `SKIPPED: PostgreSQL ...` and pass (CI
//! installs it and fails on that line).

mod common;

#[path = "../../admin/src/pg.rs"]
mod pg;

use common::*;
use flotilla_proto::JobStateWire;
use std::net::SocketAddr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// Starts controller `name` listening on `listen` with configuration file `conf` in the
/// cluster's directory (its own state directory, address file and log
/// `slurmctld-<name>.log`).
fn spawn_ctld(c: &Cluster, name: &str, listen: SocketAddr, conf: &str) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(c.path(&format!("slurmctld-{name}.log")))
        .unwrap();
    Command::new(slurmctld_bin())
        .arg("-D")
        .arg("-f")
        .arg(c.path(conf))
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

/// Log `name` as written (plain text: the daemons colour their lines only on a terminal).
fn log(c: &Cluster, name: &str) -> String {
    std::fs::read_to_string(c.path(name)).unwrap_or_default()
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

/// A relay in front of PostgreSQL's Unix socket for one controller (its `StateStorageHost`
/// names [`Relay::dir`]): every connection to the relay is passed on to the server, byte for
/// byte, until [`Relay::cut`]. Cut, it passes nothing either way and holds every connection,
/// old and new, open and silent, as a network partition would (the controller's calls wait
/// for their timeout); [`Relay::mend`] lets new connections through again and breaks the held
/// ones (as a partition that lasted longer than TCP's patience).
struct Relay {
    dir: tempfile::TempDir,
    gate: Arc<Gate>,
}

/// The relay's switch: cut or not, stopped or not; every change wakes whoever waits on it.
#[derive(Default)]
struct Gate {
    /// (cut, stopped).
    state: std::sync::Mutex<(bool, bool)>,
    changed: std::sync::Condvar,
}

impl Gate {
    fn set(&self, f: impl FnOnce(&mut (bool, bool))) {
        f(&mut self.state.lock().unwrap());
        self.changed.notify_all();
    }

    fn stopped(&self) -> bool {
        self.state.lock().unwrap().1
    }

    /// Waits while the relay is cut (until it is mended or stops): whether it was cut.
    fn hold_while_cut(&self) -> bool {
        let st = self.state.lock().unwrap();
        let was = st.0;
        drop(self.changed.wait_while(st, |(cut, stop)| *cut && !*stop).unwrap());
        was
    }
}

impl Relay {
    /// A relay for the server whose socket is `.s.PGSQL.<port>` in `socket_dir`.
    fn start(socket_dir: &Path, port: u16) -> Relay {
        let dir = tempfile::tempdir().unwrap();
        let name = format!(".s.PGSQL.{port}");
        let listener = UnixListener::bind(dir.path().join(&name)).unwrap();
        let upstream = socket_dir.join(name);
        let gate = Arc::new(Gate::default());
        let g2 = gate.clone();
        // Blocking accepts; Drop wakes the last one with a connection of its own.
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if g2.stopped() {
                    break;
                }
                let Ok(client) = client else { continue };
                let (upstream, gate) = (upstream.clone(), g2.clone());
                std::thread::spawn(move || relay_connection(client, &upstream, &gate));
            }
        });
        Relay { dir, gate }
    }

    /// The directory to name as `StateStorageHost`.
    fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn cut(&self) {
        self.gate.set(|s| s.0 = true);
    }

    fn mend(&self) {
        self.gate.set(|s| s.0 = false);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.gate.set(|s| s.1 = true);
        // Wakes the accepting thread, which then sees the stop.
        if let Ok(e) = std::fs::read_dir(self.dir.path()) {
            for e in e.flatten() {
                let _ = UnixStream::connect(e.path());
            }
        }
    }
}

/// One connection through the relay: held silent while cut, then passed on both ways until
/// either side closes or the relay is cut (then held silent, and broken once mended).
fn relay_connection(client: UnixStream, upstream: &PathBuf, gate: &Gate) {
    if gate.hold_while_cut() || gate.stopped() {
        return; // a connection made during the cut: its client gave up meanwhile
    }
    let Ok(server) = UnixStream::connect(upstream) else { return };
    let pump = |from: UnixStream, to: UnixStream| {
        use std::io::{Read, Write};
        let (mut from, mut to) = (from, to);
        from.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if gate.stopped() || gate.hold_while_cut() {
                break;
            }
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        let _ = from.shutdown(std::net::Shutdown::Both);
        let _ = to.shutdown(std::net::Shutdown::Both);
    };
    std::thread::scope(|s| {
        let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        s.spawn(|| pump(client, server));
        s.spawn(|| pump(s2, c2));
    });
}

/// How the leader becomes a zombie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Zombie {
    /// `SIGSTOP`, later `SIGCONT`.
    Stopped,
    /// Its database connections cut at the relay, later mended.
    CutOff,
}

#[test]
fn a_node_leaves_a_paused_leader_and_its_job_completes_under_the_new_one() {
    zombie_leader(Zombie::Stopped);
}

#[test]
fn a_leader_cut_off_from_postgres_commits_nothing_and_the_node_follows_the_new_one() {
    zombie_leader(Zombie::CutOff);
}

/// The test of the module doc, the leader made a zombie by `how`.
fn zombie_leader(how: Zombie) {
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
    // Cut off: a reaches the server through the relay (its own slurm.conf, the same but for
    // StateStorageHost); b and the node read slurm.conf.
    let relay = Relay::start(&pg.socket_dir(), pg.port);
    let a_conf = std::fs::read_to_string(c.path("slurm.conf")).unwrap().replace(
        &format!("StateStorageHost={}\n", pg.socket_dir().display()),
        &format!("StateStorageHost={}\n", relay.dir().display()),
    );
    assert!(a_conf.contains(&relay.dir().display().to_string()), "a's slurm.conf names the relay");
    std::fs::write(c.path("slurm-a.conf"), a_conf).unwrap();
    let a_conf = if how == Zombie::CutOff { "slurm-a.conf" } else { "slurm.conf" };
    let mut ctls = Ctls(vec![spawn_ctld(&c, "a", a_addr, a_conf)]);
    assert!(wait_for(60, || leads(&c, "a")), "a leads: {}", logs(&c));
    ctls.0.push(spawn_ctld(&c, "b", b_addr, "slurm.conf"));
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

    // The zombie: a stops, or loses the database (its process and sockets live on). b takes
    // the lapsed lease; the node hears no keepalive for 3 s, leaves a, and registers with b
    // with its running job.
    let a_pid = nix::unistd::Pid::from_raw(ctls.0[0].id() as i32);
    match how {
        Zombie::Stopped => nix::sys::signal::kill(a_pid, nix::sys::signal::Signal::SIGSTOP).unwrap(),
        Zombie::CutOff => relay.cut(),
    }
    let zombied = Instant::now();
    // A submission to the zombie meanwhile: queued in its socket (stopped), or taken by a
    // leader that cannot commit it (cut off). Its answers until a closes the connection.
    let zombie_call = {
        let job = job("#!/bin/sh\ntrue\n", &work);
        let cred = c.cred(job.uid);
        std::thread::spawn(move || {
            let mut answers = Vec::new();
            let Ok(mut cl) = flotilla_proto::client::Client::connect_tcp(a_addr, flotilla_proto::Role::Command) else { return answers };
            if let flotilla_proto::client::Stream::Tcp(s) = cl.stream() {
                let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
            }
            let req = flotilla_proto::Frame::Request { id: 1, auth: Some(cred), body: flotilla_proto::Request::SubmitJob(Box::new(job)) };
            if cl.send(&req).is_err() {
                return answers;
            }
            while let Ok(f) = cl.recv() {
                answers.push(f);
            }
            answers
        })
    };
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
    let moved = zombied.elapsed();
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
    match how {
        Zombie::Stopped => nix::sys::signal::kill(a_pid, nix::sys::signal::Signal::SIGCONT).unwrap(),
        Zombie::CutOff => relay.mend(),
    }
    let a = &mut ctls.0[0];
    assert!(wait_for(30, || a.try_wait().unwrap().is_some()), "the resumed leader stepped down: {}", logs(&c));
    let alog = log(&c, "slurmctld-a.log");
    assert!(alog.contains("lost the leader lease of epoch 1") && alog.contains("stepping down"), "{alog}");
    // The daemons write their log files (not a terminal) without colour codes.
    let all = logs(&c);
    assert!(!all.contains('\u{1b}'), "an ANSI escape in a daemon's log file: {all}");
    if how == Zombie::CutOff {
        // It ran on through the cut: its database calls failed there (and it held its work):
        // timed out, or, when the cut caught it inside a turn's transaction, its session ended
        // by the server (`idle_in_transaction_session_timeout`, which frees the lease row for
        // b) and found lost when the relay was mended.
        assert!(
            alog.contains("cannot renew the leader lease")
                || alog.contains("cannot commit controller state")
                || alog.contains("connection was lost before the turn's COMMIT"),
            "the cut-off leader met the cut: {alog}"
        );
    }
    let answers = zombie_call.join().unwrap();
    assert!(
        !answers.iter().any(|f| matches!(f, flotilla_proto::Frame::Response { body: flotilla_proto::Response::Submitted(_), .. })),
        "the zombie acknowledged a submission it could not commit: {answers:?}"
    );
    assert_eq!(std::fs::read_to_string(c.path("spool/gpu01/ctld_epoch")).unwrap(), "2\n", "the node's fence is b's epoch");
    // The zombie committed nothing: b's jobs are the one acknowledged before, and then the
    // next one acknowledged by b (its id follows: a's submission left nothing behind).
    let id2 = c.submit(job("#!/bin/sh\ntrue\n", &work));
    let mut ids: Vec<u64> = c.jobs().iter().map(|j| j.job_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![id, id2], "the zombie committed nothing");
    assert_eq!(id2, id + 1, "ids go on from the committed ones");
    // After the step-down the node is still b's: the job runs there.
    let j2 = c.wait_done(id2, 60);
    assert_eq!(j2.state, Some(JobStateWire::Completed), "{j2:?}\n{}", logs(&c));
    // The node's refusals of the old epoch's messages, counted from its log (one line each,
    // with the count so far). Both zombies stop their keepalives once their lease is stale and
    // step down at their first fence, before sending anything else: no message of epoch 1
    // reached the node after it raised its fence to 2, so it had none to refuse (the refusal
    // itself: slurmd-rs/tests/fencing.rs). No raise after b's: the node took nothing from a.
    let refused = c.log_lines(node_log, "refused a message from controller epoch 1");
    let raises = c.log_lines(node_log, "controller epoch raised");
    assert_eq!(raises, 2, "the node's fence rose to a's epoch, then to b's, and no further: {}", logs(&c));
    eprintln!(
        "zombie {how:?}: node on the new leader {} ms after the old one became a zombie; messages of epoch 1 refused by the node after its fence rose to 2: {refused}",
        moved.as_millis()
    );
    drop(ctls);
    drop(relay);
    drop(pg);
}
