//! Two real `slurmctld` processes on one PostgreSQL state store (`StateStorageType=state/postgres`,
//! `SlurmctldTimeout=2`): one leads, the other waits as a standby.
//!
//! - `kill -9` of the leader under load: the standby takes the lease (its holder's database
//!   session is gone) and serves every acknowledged job; the fake node agents follow it and
//!   every job runs once and completes.
//! - A zombie leader: `SIGSTOP` past its lease; the standby takes over in a new epoch; after
//!   `SIGCONT` the old leader finds its lease lost at its next fence and steps down (its
//!   process ends) without committing anything, and a submission queued in its socket
//!   while it slept is never acknowledged.
//!
//! Every message the (fake) node agents receive carries its sender's epoch
//! (`Frame::ToNodeFenced`); `slurmd`'s refusal of older epochs is tested on the real daemon
//! (`slurmd-rs/tests/fencing.rs`).

mod backends;
mod common;

use common::*;
use flotilla_proto::{read_frame, write_frame, Frame, Hello, JobStateWire, Request, Response, Role, DEFAULT_MAX_FRAME};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn ha_env(test: &str) -> Option<(Env, backends::TestPg)> {
    let pg = backends::TestPg::start(test)?;
    let env = Env::new(4);
    env.set_storage(pg.keys());
    env.edit_cluster(|c| {
        c.slurmctld_timeout_s = 2;
        // Two SlurmctldHost lines (both controllers run here).
        c.backup_controllers = vec![("b".into(), "127.0.0.1".into())];
    });
    Some((env, pg))
}

fn submit(env: &Env, addr: std::net::SocketAddr, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| match call(env, addr, 2001, Request::SubmitJob(Box::new(job(2001, 300, 0)))) {
            Ok(Response::Submitted(s)) => s.job_id,
            other => panic!("submission: {other:?}"),
        })
        .collect()
}

/// The TCP port process `pid` listens on: its socket inodes among `/proc/net/tcp`'s
/// listening rows (a standby writes no address file: it has not taken the lease).
fn listen_port(pid: u32) -> Option<u16> {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']').map(str::to_string))
        .collect();
    std::fs::read_to_string("/proc/net/tcp").ok()?.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 9 && f[3] == "0A" && inodes.contains(f[9])).then(|| u16::from_str_radix(f[1].split(':').nth(1)?, 16).ok())?
    })
}

fn log_of(env: &Env, name: &str) -> String {
    std::fs::read_to_string(env.path(&format!("slurmctld{name}.log"))).unwrap_or_default()
}

#[test]
fn kill9_of_the_leader_hands_over_to_the_standby() {
    let Some((env, _pg)) = ha_env("kill9_of_the_leader_hands_over_to_the_standby") else { return };
    let extra = ["--tick-ms", "100", "--debounce-ms", "5"];
    let mut a = Ctl::wait_ready(&env, "a", Ctl::spawn_named(&env, "a", 0, &extra));
    let b = Ctl::spawn_named(&env, "b", 0, &extra);
    assert!(
        wait_for(20, || log_of(&env, "b").contains("standby: another controller leads")),
        "b waits as a standby: {}",
        log_of(&env, "b")
    );
    // The standby answers pings, and every other request with Slurm's standby error (the
    // commands then try the next SlurmctldHost).
    let mut port = None;
    assert!(wait_for(20, || { port = listen_port(b.id()); port.is_some() }), "b listens");
    let b_early: std::net::SocketAddr = ([127, 0, 0, 1], port.unwrap()).into();
    assert!(matches!(call(&env, b_early, 2001, Request::Ping), Ok(Response::Pong)));
    match call(&env, b_early, 2001, Request::QueryJobs(flotilla_proto::JobQuery::default())) {
        Ok(Response::Error(e)) => assert_eq!(
            (e.code, e.text.as_str()),
            (flotilla_proto::errno::ESLURM_IN_STANDBY_MODE, "Slurm backup controller in standby mode")
        ),
        other => panic!("a standby answered a query: {other:?}"),
    }
    assert!(log_of(&env, "b").contains("Invalid RPC received REQUEST_JOB_INFO while in standby mode"), "{}", log_of(&env, "b"));
    let addr = Arc::new(Mutex::new(a.addr));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let agents: Vec<Agent> = (1..=4).map(|i| Agent::spawn(&env, &format!("gpu{i:02}"), addr.clone(), ledger.clone())).collect();
    let mut acked = submit(&env, a.addr, 40);
    // Killed while jobs run (the first leader bound some).
    assert!(wait_for(30, || !ledger.lock().unwrap().starts.is_empty()), "the first leader started jobs");
    let t = Instant::now();
    a.kill9();
    let b = Ctl::wait_ready(&env, "b", b);
    let takeover = t.elapsed();
    *addr.lock().unwrap() = b.addr;
    assert_eq!(b.addr, b_early, "the new leader serves on the port it listened on as a standby");
    acked.extend(submit(&env, b.addr, 40));
    assert!(
        wait_for(60, || {
            let jobs = all_jobs(&env, b.addr);
            acked.iter().all(|id| jobs.iter().any(|j| j.job_id == *id && j.state == Some(JobStateWire::Completed)))
        }),
        "every acknowledged job completes under the new leader"
    );
    let l = ledger.lock().unwrap();
    assert!(l.violations.is_empty(), "{:?}", l.violations);
    for id in &acked {
        assert_eq!(l.starts.get(&(*id, 0)).copied(), Some(1), "job {id} started once");
    }
    assert!(l.kills.is_empty(), "no running job was killed by the failover: {:?}", l.kills);
    // Every message the nodes got carried its sender's lease epoch: a's 1, then b's 2.
    let msg_epochs: Vec<u64> = l.by_epoch.keys().copied().collect();
    assert_eq!(msg_epochs, vec![1, 2], "messages by epoch: {:?}", l.by_epoch);
    let took = log_of(&env, "b").lines().filter(|l| l.contains("took the leader lease")).count();
    assert_eq!(took, 1, "b took the lease once");
    eprintln!("takeover after kill -9: {} ms (b's lease taken, state recovered, listening)", takeover.as_millis());
    drop(l);
    drop(agents);
}

#[test]
fn a_zombie_leader_steps_down_without_committing() {
    let Some((env, _pg)) = ha_env("a_zombie_leader_steps_down_without_committing") else { return };
    let extra = ["--tick-ms", "100", "--debounce-ms", "5"];
    let a = Ctl::wait_ready(&env, "a", Ctl::spawn_named(&env, "a", 0, &extra));
    let b = Ctl::spawn_named(&env, "b", 0, &extra);
    assert!(wait_for(20, || log_of(&env, "b").contains("standby: another controller leads")), "b waits as a standby");
    let before = submit(&env, a.addr, 5);
    let pid = nix::unistd::Pid::from_raw(a.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    // Past the lease (2 s), b takes over in the next epoch and accepts work.
    let b = Ctl::wait_ready(&env, "b", b);
    let after = submit(&env, b.addr, 5);
    assert!(after.iter().all(|id| !before.contains(id)), "ids go on from the committed ones");
    // A submission sent to the zombie while it sleeps: the kernel completes the connection
    // and queues the hello and the request in its socket before it resumes.
    let mut zombie_conn = std::net::TcpStream::connect(a.addr).unwrap();
    write_frame(&mut zombie_conn, &Frame::Hello(Hello::current(Role::Command))).unwrap();
    let submit_frame = Frame::Request { id: 1, auth: Some(env.cred(2001)), body: Request::SubmitJob(Box::new(job(2001, 300, 0))) };
    write_frame(&mut zombie_conn, &submit_frame).unwrap();
    let zombie_call = std::thread::spawn(move || {
        zombie_conn.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        // Its answers until it closes the connection (it ends: fail-stop).
        let mut answers = Vec::new();
        while let Ok(f) = read_frame(&mut zombie_conn, DEFAULT_MAX_FRAME) {
            answers.push(f);
        }
        answers
    });
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let mut a = a;
    assert!(
        wait_for(20, || a.child.try_wait().unwrap().is_some()),
        "the resumed leader stepped down (its process ended): {}",
        log_of(&env, "a")
    );
    let alog = log_of(&env, "a");
    assert!(alog.contains("lost the leader lease of epoch 1") && alog.contains("stepping down"), "{alog}");
    let answers = zombie_call.join().unwrap();
    assert!(
        !answers.iter().any(|f| matches!(f, Frame::Response { body: Response::Submitted(_), .. })),
        "the zombie acknowledged a submission it could not commit: {answers:?}"
    );
    // Everything acknowledged is with the new leader, and nothing else.
    let jobs = all_jobs(&env, b.addr);
    let mut ids: Vec<u64> = jobs.iter().map(|j| j.job_id).collect();
    ids.sort_unstable();
    let mut want: Vec<u64> = before.iter().chain(&after).copied().collect();
    want.sort_unstable();
    assert_eq!(ids, want, "the zombie committed nothing");
    drop(b);
}

/// `scontrol takeover`'s request: the standby takes the lease at once (no waiting for it to
/// lapse), the old leader finds it lost at its next write or renewal and ends, and the new
/// leader serves what the old one acknowledged. Root and SlurmUser only.
#[test]
fn takeover_moves_the_lead_to_the_standby() {
    let Some((env, _pg)) = ha_env("takeover_moves_the_lead_to_the_standby") else { return };
    let extra = ["--tick-ms", "100", "--debounce-ms", "5"];
    let (mut a, b, b_addr) = leader_and_standby(&env, &extra);
    let before = submit(&env, a.addr, 5);
    match call(&env, b_addr, 2001, Request::Takeover) {
        Ok(Response::Error(e)) => assert_eq!(e.code, flotilla_proto::errno::ESLURM_ACCESS_DENIED),
        other => panic!("a user's takeover: {other:?}"),
    }
    assert!(matches!(call(&env, b_addr, 0, Request::Takeover), Ok(Response::Done)));
    let b = Ctl::wait_ready(&env, "b", b);
    assert!(log_of(&env, "b").contains("takeover requested"), "{}", log_of(&env, "b"));
    assert!(wait_for(20, || a.child.try_wait().unwrap().is_some()), "the old leader stepped down: {}", log_of(&env, "a"));
    assert!(log_of(&env, "a").contains("lost the leader lease of epoch 1"), "{}", log_of(&env, "a"));
    let jobs = all_jobs(&env, b.addr);
    assert!(before.iter().all(|id| jobs.iter().any(|j| j.job_id == *id)), "the new leader has every acknowledged job");
    a.kill9();
}

/// The crash suite's size: (submissions, kills of the leader): the 1,000 across 20
/// kills (11 s in a dev build on a loaded 2-core machine). `FLOTILLA_HA_CRASH_SMALL=1`: 200
/// across 4, for a quick look.
fn crash_size() -> (usize, usize) {
    if std::env::var("FLOTILLA_HA_CRASH_SMALL").as_deref() == Ok("1") {
        (200, 4)
    } else {
        (1000, 20)
    }
}

/// Controller `a` started and leading, then `b` started as its standby: (a, b's process, the
/// address b listens on).
fn leader_and_standby(env: &Env, extra: &[&str]) -> (Ctl, std::process::Child, std::net::SocketAddr) {
    let a = Ctl::wait_ready(env, "a", Ctl::spawn_named(env, "a", 0, extra));
    let b = Ctl::spawn_named(env, "b", 0, extra);
    assert!(wait_for(20, || log_of(env, "b").contains("standby: another controller leads")), "b waits as a standby");
    let mut port = None;
    assert!(wait_for(20, || { port = listen_port(b.id()); port.is_some() }), "b listens");
    (a, b, ([127, 0, 0, 1], port.unwrap()).into())
}

/// Submits one job, following the leader over `addrs` (a controller that cannot be reached or
/// answers as a standby: the next, as the commands do). `Ok(id)` once a controller
/// acknowledged it; a reply lost with its connection is tried again (the job may then exist
/// twice, once unacknowledged: the commands do the same). A submission whose commit failed
/// (the database away, or the first commit on a connection PostgreSQL closed when it
/// restarted) is refused with Slurm's `ESLURM_WRITING_TO_FILE`: nothing was acknowledged or
/// kept, and it is tried again as a user would.
fn submit_following(env: &Env, addrs: &[std::net::SocketAddr], stop: &std::sync::atomic::AtomicBool) -> Option<u64> {
    let t0 = Instant::now();
    loop {
        for a in addrs {
            match call(env, *a, 2001, Request::SubmitJob(Box::new(job(2001, 200, 0)))) {
                Ok(Response::Submitted(s)) => return Some(s.job_id),
                Ok(Response::Error(e))
                    if e.code == flotilla_proto::errno::ESLURM_IN_STANDBY_MODE
                        || e.code == flotilla_proto::errno::ESLURM_WRITING_TO_FILE => {}
                Ok(other) => panic!("submission refused: {other:?}"),
                Err(_) => {}
            }
        }
        if stop.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "no controller took a submission for 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The crash suite: clients submit concurrently while the leader is `kill -9`ed again and
/// again at random moments (a moment after it acknowledged its share of submissions); each
/// killed controller is restarted at once on its port, as systemd's `Restart=` would, and
/// comes back as a standby. Fake node agents run the jobs and follow the leader. After the
/// dust settles: every acknowledged job is present exactly once and completes, no job id was
/// acknowledged twice, no job started twice, no GPU was bound twice, no running job was killed.
#[test]
fn kill9_of_the_leader_again_and_again_under_concurrent_submissions() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let Some((env, _pg)) = ha_env("kill9_of_the_leader_again_and_again_under_concurrent_submissions") else { return };
    let (total, kills) = crash_size();
    let extra = ["--tick-ms", "100", "--debounce-ms", "5"];
    let names = ["a", "b"];
    let mut procs = Kill(vec![Ctl::spawn_named(&env, "a", 0, &extra)]);
    let mut a_addr = None;
    assert!(wait_for(30, || { a_addr = leader_addr(&env, "a"); a_addr.is_some() }), "a leads: {}", log_of(&env, "a"));
    procs.0.push(Ctl::spawn_named(&env, "b", 0, &extra));
    let mut port = None;
    assert!(wait_for(20, || { port = listen_port(procs.0[1].id()); port.is_some() }), "b listens");
    let ports = [a_addr.unwrap().port(), port.unwrap()];
    let mut leader = 0;
    let addrs: Vec<std::net::SocketAddr> = ports.iter().map(|p| ([127, 0, 0, 1], *p).into()).collect();

    let agent_addr = Arc::new(Mutex::new(addrs[0]));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let agents: Vec<Agent> = (1..=4).map(|i| Agent::spawn(&env, &format!("gpu{i:02}"), agent_addr.clone(), ledger.clone())).collect();
    let acked = Arc::new(Mutex::new(Vec::<u64>::new()));
    let next = Arc::new(AtomicUsize::new(0));
    // How many submissions the clients may start: one share ahead of the next kill, so that
    // every kill falls among submissions in flight.
    let share = total / (kills + 1);
    let allowed = Arc::new((Mutex::new((2 * share).min(total)), std::sync::Condvar::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let env = Arc::new(env);
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (env, addrs, acked, next, stop) = (env.clone(), addrs.clone(), acked.clone(), next.clone(), stop.clone());
            let allowed = allowed.clone();
            std::thread::spawn(move || loop {
                let n = next.load(Ordering::Acquire);
                if n >= total {
                    return;
                }
                {
                    // Wait for the main thread to allow submission n (after the next kill).
                    let (limit, moved) = &*allowed;
                    let (guard, waited) = moved.wait_timeout_while(limit.lock().unwrap(), Duration::from_secs(120), |a| n >= *a).unwrap();
                    drop(guard);
                    if waited.timed_out() {
                        return; // the main thread failed; its assertions say why
                    }
                }
                if next.compare_exchange(n, n + 1, Ordering::AcqRel, Ordering::Acquire).is_err() {
                    continue;
                }
                if let Some(id) = submit_following(&env, &addrs, &stop) {
                    acked.lock().unwrap().push(id);
                }
            })
        })
        .collect();
    // A moment: once the leader acknowledged its share and a random part (xorshift, seed
    // printed) of the next share, with the rest of that share in flight.
    let mut seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
    eprintln!("crash suite: {total} submissions, {kills} kills, seed {seed}");
    let mut takeovers = Vec::new();
    for k in 0..kills {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let at = (k + 1) * share + (seed as usize) % (share / 2).max(1);
        assert!(
            wait_for(60, || acked.lock().unwrap().len() >= at),
            "submissions go on (kill {k}): {} acknowledged",
            acked.lock().unwrap().len()
        );
        let t = Instant::now();
        let _ = procs.0[leader].kill();
        let _ = procs.0[leader].wait();
        let standby = 1 - leader;
        assert!(
            wait_for(30, || env.path(&format!("ctld{}.addr", names[standby])).exists()),
            "{} took over after kill {k}: {}",
            names[standby],
            log_of(&env, names[standby])
        );
        takeovers.push(t.elapsed());
        *agent_addr.lock().unwrap() = addrs[standby];
        // Restarted as systemd's Restart= would: a standby on its port.
        procs.0[leader] = Ctl::spawn_named(&env, names[leader], ports[leader], &extra);
        leader = standby;
        let (limit, moved) = &*allowed;
        *limit.lock().unwrap() = if k + 1 == kills { total } else { ((k + 3) * share).min(total) };
        moved.notify_all();
    }
    for c in clients {
        c.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert_eq!(acked.len(), total, "every submission was acknowledged once");
    let unique: std::collections::HashSet<u64> = acked.iter().copied().collect();
    assert_eq!(unique.len(), acked.len(), "no job id acknowledged twice");
    let leader_addr = addrs[leader];
    let mut jobs = Vec::new();
    assert!(
        wait_for(120, || {
            jobs = all_jobs(&env, leader_addr);
            acked.iter().all(|id| jobs.iter().any(|j| j.job_id == *id && j.state == Some(JobStateWire::Completed)))
        }),
        "every acknowledged job completes under the last leader: {} of {} completed",
        acked.iter().filter(|id| jobs.iter().any(|j| j.job_id == **id && j.state == Some(JobStateWire::Completed))).count(),
        acked.len()
    );
    for id in &acked {
        assert_eq!(jobs.iter().filter(|j| j.job_id == *id).count(), 1, "job {id} present once");
    }
    let extra_jobs = jobs.len().saturating_sub(acked.len());
    let l = ledger.lock().unwrap();
    assert!(l.violations.is_empty(), "{:?}", l.violations);
    for (&(id, run), &n) in &l.starts {
        assert_eq!((run, n), (0, 1), "job {id} started once, in its first run");
    }
    for id in &acked {
        assert!(l.starts.contains_key(&(*id, 0)), "job {id} started");
    }
    assert!(l.kills.is_empty(), "no running job was killed by a failover: {:?}", l.kills);
    // Every node message carried its sender's epoch: one per leader (each sends a keepalive
    // at a registration), from 1 to the last leader's.
    drop(l);
    let last = kills as u64 + 1;
    assert!(wait_for(30, || ledger.lock().unwrap().by_epoch.contains_key(&last)), "the nodes reached the last leader");
    let l = ledger.lock().unwrap();
    let epochs: Vec<u64> = l.by_epoch.keys().copied().collect();
    assert!(
        epochs.first() == Some(&1) && epochs.last() == Some(&last),
        "node messages by epoch: {:?}",
        l.by_epoch
    );
    takeovers.sort_unstable();
    eprintln!(
        "crash suite: {total} acknowledged, {extra_jobs} unacknowledged duplicates (replies lost with the leader), \
         takeover after kill -9: median {} ms, max {} ms over {kills}",
        takeovers[takeovers.len() / 2].as_millis(),
        takeovers.last().unwrap().as_millis()
    );
    drop(l);
    stop.store(true, Ordering::Release);
    drop(agents);
}

/// `curl` (a real HTTP client) at `url`: the status code, the `Location` it was sent to (empty
/// when none) and the body. `follow`: curl follows redirects (`-L`), as a scraper does.
fn curl(url: &str, follow: bool) -> (u16, String, String) {
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-sS", "--max-time", "20", "-w", "\n%{http_code} %{redirect_url}"]);
    if follow {
        cmd.arg("-L");
    }
    let out = cmd.arg(url).output().expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, tail) = text.rsplit_once('\n').unwrap_or_else(|| panic!("curl {url}: {text} {}", String::from_utf8_lossy(&out.stderr)));
    let (code, location) = tail.split_once(' ').unwrap_or((tail, ""));
    (code.parse().unwrap_or_else(|_| panic!("curl {url}: {tail}")), location.to_string(), body.to_string())
}

/// The controller's HTTP side on a standby, as Slurm 25.11's backup (`src/slurmctld/http.c`):
/// `/metrics` and the metric sets are `303 See Other` to the same path on the leader (a client
/// that follows it gets the leader's numbers), `/readyz` is 500, `/livez` and `/healthz` 204;
/// once the standby leads (`scontrol takeover`) it serves them itself, on the same port.
#[test]
fn a_standby_sends_http_peers_to_the_leader() {
    let Some((env, _pg)) = ha_env("a_standby_sends_http_peers_to_the_leader") else { return };
    env.edit_cluster(|c| c.metrics_type = Some("metrics/openmetrics".into()));
    let extra = ["--tick-ms", "100", "--debounce-ms", "5"];
    let (mut a, b, b_addr) = leader_and_standby(&env, &extra);
    let submitted = submit(&env, a.addr, 3);
    let (ua, ub) = (format!("http://{}", a.addr), format!("http://{b_addr}"));
    for path in ["/metrics", "/metrics/jobs", "/metrics/nodes", "/metrics/partitions", "/metrics/scheduler", "/metrics/jobs-users-accts"] {
        let (code, location, body) = curl(&format!("{ub}{path}"), false);
        assert_eq!((code, location.as_str()), (303, format!("{ua}{path}").as_str()), "standby {path}: {body}");
        assert!(body.is_empty(), "a redirect has no body: {body}");
    }
    let (code, location, _) = curl(&format!("{ub}/metrics/jobs?since=1"), false);
    assert_eq!((code, location), (303, format!("{ua}/metrics/jobs?since=1")), "the query goes along");
    // Followed, the redirect serves the leader's numbers.
    let (code, _, body) = curl(&format!("{ub}/metrics/jobs"), true);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains(&format!("\nslurm_jobs {}\n", submitted.len())), "the leader's count: {body}");
    assert_eq!(curl(&format!("{ub}/readyz"), false).0, 500, "a standby is not ready (Slurm: not the primary)");
    assert_eq!(curl(&format!("{ub}/livez"), false).0, 204);
    assert_eq!(curl(&format!("{ub}/healthz"), false).0, 204);
    assert_eq!(curl(&format!("{ub}/nope"), false).0, 404, "an unknown path is not sent on");
    assert_eq!(curl(&format!("{ua}/readyz"), false).0, 204, "the leader is ready");
    assert_eq!(curl(&format!("{ua}/metrics/jobs"), false).0, 200, "the leader serves its own");
    // b leads: it serves on the port it listened on as a standby.
    assert!(matches!(call(&env, b_addr, 0, Request::Takeover), Ok(Response::Done)));
    let b = Ctl::wait_ready(&env, "b", b);
    assert_eq!(b.addr, b_addr);
    assert!(wait_for(20, || curl(&format!("{ub}/readyz"), false).0 == 204), "the new leader is ready");
    let (code, location, body) = curl(&format!("{ub}/metrics/jobs"), false);
    assert_eq!((code, location.as_str()), (200, ""), "{body}");
    assert!(body.contains(&format!("\nslurm_jobs {}\n", submitted.len())), "the same jobs: {body}");
    a.kill9();
}

/// Controller processes, killed when the test ends.
struct Kill(Vec<std::process::Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The address controller `name` wrote once it took the lease (`None` before).
fn leader_addr(env: &Env, name: &str) -> Option<std::net::SocketAddr> {
    std::fs::read_to_string(env.path(&format!("ctld{name}.addr"))).ok()?.trim().parse().ok()
}

/// The controller among `addrs` that leads now: the one that answers a job query (a standby
/// answers `ESLURM_IN_STANDBY_MODE`, a dead one not at all).
fn leader_of(env: &Env, addrs: &[std::net::SocketAddr]) -> Option<std::net::SocketAddr> {
    let q = || Request::QueryJobs(flotilla_proto::JobQuery::default());
    addrs.iter().copied().find(|a| matches!(call(env, *a, 0, q()), Ok(Response::Jobs(_))))
}

/// PostgreSQL restarted (a fast shutdown: every connection closed, then started again) under
/// two controllers with jobs running: both controllers live on (each reconnects; the leader
/// keeps or loses the lease as the database decides, and a controller that lost it steps down
/// and is restarted as systemd's `Restart=` would), exactly one leads afterwards, and every
/// acknowledged job, from before and after, completes once.
#[test]
fn postgres_restarted_under_two_controllers() {
    let Some((env, mut pg)) = ha_env("postgres_restarted_under_two_controllers") else { return };
    let extra = ["--tick-ms", "100", "--debounce-ms", "5"];
    let names = ["a", "b"];
    let mut procs = Kill(vec![Ctl::spawn_named(&env, "a", 0, &extra)]);
    let mut a_addr = None;
    assert!(wait_for(30, || { a_addr = leader_addr(&env, "a"); a_addr.is_some() }), "a leads: {}", log_of(&env, "a"));
    let a_addr = a_addr.unwrap();
    procs.0.push(Ctl::spawn_named(&env, "b", 0, &extra));
    assert!(wait_for(20, || log_of(&env, "b").contains("standby: another controller leads")), "b waits as a standby");
    let mut port = None;
    assert!(wait_for(20, || { port = listen_port(procs.0[1].id()); port.is_some() }), "b listens");
    let addrs = [a_addr, ([127, 0, 0, 1], port.unwrap()).into()];
    let ports = [a_addr.port(), port.unwrap()];
    let agent_addr = Arc::new(Mutex::new(a_addr));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let agents: Vec<Agent> = (1..=4).map(|i| Agent::spawn(&env, &format!("gpu{i:02}"), agent_addr.clone(), ledger.clone())).collect();
    let mut acked = submit(&env, a_addr, 20);
    assert!(wait_for(30, || !ledger.lock().unwrap().starts.is_empty()), "jobs run");

    pg.pg.stop("fast").unwrap();
    // The database is away for a lease's length: the controllers wait for it.
    std::thread::sleep(Duration::from_secs(2));
    pg.pg.restart().unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    for _ in 0..20 {
        acked.push(submit_following(&env, &addrs, &stop).expect("a controller took the submission"));
    }
    let mut restarted = Vec::new();
    for (i, p) in procs.0.iter_mut().enumerate() {
        if let Some(status) = p.try_wait().unwrap() {
            eprintln!("{} ended ({status}): restarted as a standby", names[i]);
            restarted.push(names[i]);
            *p = Ctl::spawn_named(&env, names[i], ports[i], &extra);
        }
    }
    let leader = leader_of(&env, &addrs).expect("a controller leads");
    *agent_addr.lock().unwrap() = leader;
    let mut jobs = Vec::new();
    assert!(
        wait_for(60, || {
            jobs = all_jobs(&env, leader);
            acked.iter().all(|id| jobs.iter().any(|j| j.job_id == *id && j.state == Some(JobStateWire::Completed)))
        }),
        "every acknowledged job completes: {} of {}\n{}\n{}",
        acked.iter().filter(|id| jobs.iter().any(|j| j.job_id == **id && j.state == Some(JobStateWire::Completed))).count(),
        acked.len(),
        log_of(&env, "a"),
        log_of(&env, "b")
    );
    let leaders: Vec<_> = addrs.iter().filter(|a| leader_of(&env, &[**a]).is_some()).collect();
    assert_eq!(leaders, vec![&leader], "one controller leads");
    for (i, p) in procs.0.iter_mut().enumerate() {
        assert!(p.try_wait().unwrap().is_none(), "{} lives: {}", names[i], log_of(&env, names[i]));
    }
    let l = ledger.lock().unwrap();
    assert!(l.violations.is_empty(), "{:?}", l.violations);
    for id in &acked {
        assert_eq!(l.starts.get(&(*id, 0)).copied(), Some(1), "job {id} started once");
    }
    eprintln!("PostgreSQL restarted: {} leads afterwards; restarted: {restarted:?}", if leader == addrs[0] { "a" } else { "b" });
    drop(l);
    drop(agents);
}
