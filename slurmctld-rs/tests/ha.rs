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
//! - The crash suite (`crash_suite`, shared with `crash.rs`'s checks): 1,000 submissions from
//!   concurrent clients, the leader `kill -9`ed 20 times at random moments, GPU jobs running
//!   on four nodes; on PostgreSQL with a standby taking over each time, and the same suite
//!   with the same checks on one controller on SQLite restarted after each kill.
//!
//! Every message the (fake) node agents receive carries its sender's epoch
//! (`Frame::ToNodeFenced`); `slurmd`'s refusal of older epochs is tested on the real daemon
//! (`slurmd-rs/tests/fencing.rs`).

mod backends;
mod common;
mod crash_suite;

use common::*;
use crash_suite::{leader_addr, listen_port, log_of, submit_following, Controllers, Kill};
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

/// The crash suite ([`crash_suite::kill9_again_and_again`]) on two controllers sharing a
/// PostgreSQL store: each killed leader's standby takes over, and the killed one is restarted
/// as a standby.
#[test]
fn kill9_of_the_leader_again_and_again_under_concurrent_submissions() {
    let Some((env, _pg)) = ha_env("kill9_of_the_leader_again_and_again_under_concurrent_submissions") else { return };
    crash_suite::kill9_again_and_again(env, Controllers::PostgresPair);
}

/// The same crash suite, with the same checks, on one controller on SQLite (the embedded
/// default): each kill is followed by a restart on its state directory and port, and the
/// clients retry until it is back.
#[test]
fn kill9_of_a_lone_sqlite_controller_again_and_again_under_concurrent_submissions() {
    let env = Env::new(4);
    env.edit_cluster(|c| c.slurmctld_timeout_s = 2);
    crash_suite::kill9_again_and_again(env, Controllers::LoneSqlite);
}

/// A standby's view of the store ([`flotilla_slurmctld::store::follow`]): a follower brought up
/// to the store at random moments while the leader works (jobs submitted with 1 to 8 GPUs,
/// started and ended by the agents, cancelled pending or running, finished jobs purged past a
/// 2 s `MinJobAge`, nodes drained and resumed) holds, whenever the store is still (the leader
/// `SIGSTOP`ped), exactly the jobs a fresh recovery reads from the store, and recovering through
/// it (`Store::load_with`) gives the same state as `Store::load`.
#[test]
fn a_followed_store_equals_a_fresh_recovery() {
    use flotilla_proto::{CancelJob, GresSpec, JobRef, UpdateNode};
    use rand::{Rng, SeedableRng};
    let Some((env, pg)) = ha_env("a_followed_store_equals_a_fresh_recovery") else { return };
    env.edit_cluster(|c| c.min_job_age_s = 2);
    let extra = ["--tick-ms", "100", "--debounce-ms", "5"];
    let a = Ctl::wait_ready(&env, "a", Ctl::spawn_named(&env, "a", 0, &extra));
    let addr = Arc::new(Mutex::new(a.addr));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let agents: Vec<Agent> = (1..=4).map(|i| Agent::spawn(&env, &format!("gpu{i:02}"), addr.clone(), ledger.clone())).collect();
    let store = pg.store();
    let mut follower = flotilla_slurmctld::store::follow::JobFollower::default();
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    eprintln!("followed store: seed {seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut ids = Vec::new();
    let (mut compared, mut dropped_seen, mut behind_seen) = (0, 0, 0);
    let pid = nix::unistd::Pid::from_raw(a.child.id() as i32);
    for round in 0..12 {
        for _ in 0..rng.random_range(0..25) {
            let mut j = job(2001, rng.random_range(50..1500), 0);
            j.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: 1 << rng.random_range(0..4) }];
            match call(&env, a.addr, 2001, Request::SubmitJob(Box::new(j))) {
                Ok(Response::Submitted(s)) => ids.push(s.job_id),
                other => panic!("submission: {other:?}"),
            }
        }
        for _ in 0..rng.random_range(0..4) {
            if ids.is_empty() {
                break;
            }
            let id = ids[rng.random_range(0..ids.len())];
            let _ = call(&env, a.addr, 2001, Request::CancelJob(CancelJob { jobs: vec![JobRef::id(id)], ..CancelJob::default() }));
        }
        if rng.random_bool(0.3) {
            let node = format!("gpu{:02}", rng.random_range(1..=4));
            let state = if rng.random_bool(0.5) { "DRAIN" } else { "RESUME" };
            let _ = call(
                &env,
                a.addr,
                0,
                Request::UpdateNode(UpdateNode { names: vec![node], state: Some(state.into()), reason: Some("followed".into()), ..Default::default() }),
            );
        }
        // A look while the leader works (the store changing under it), sometimes two, some
        // reading only a few of the changed rows (as a standby catching up does).
        for _ in 0..rng.random_range(1..3) {
            std::thread::sleep(Duration::from_millis(rng.random_range(0..400)));
            let max = if rng.random_bool(0.5) { rng.random_range(1..10) } else { usize::MAX };
            let n = store.follow_jobs_up_to(&mut follower, max).unwrap();
            dropped_seen += n.dropped;
            behind_seen += n.behind;
        }
        // Still: the leader stopped (nothing commits), the follower's look and a fresh load.
        if rng.random_bool(0.5) || round == 11 {
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
            let since = now() as i64 - rng.random_range(0..4);
            store.follow_jobs(&mut follower).unwrap();
            let fresh = store.load(since).unwrap();
            let followed = follower.jobs(since);
            let through = store.load_with(since, Some(&mut follower.clone())).unwrap();
            let rows = store.db().query("SELECT COUNT(*) FROM jobs", &[]).unwrap()[0].get::<i64>(0).unwrap();
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
            assert_eq!(follower.len() as i64, rows, "round {round}: the follower holds every row, and no purged one");
            assert_eq!(followed.len(), fresh.jobs.len(), "round {round}: the followed jobs are the store's");
            for (f, s) in followed.iter().zip(&fresh.jobs) {
                assert_eq!(f, s, "round {round}: job {} as followed and as stored", s.id);
            }
            assert_eq!(through.jobs, fresh.jobs, "round {round}: a recovery through the follower");
            assert_eq!(through.next_job_id, fresh.next_job_id);
            compared += 1;
        }
    }
    assert!(ids.len() > 20, "the rounds submitted jobs");
    eprintln!(
        "followed store: {} jobs submitted, {compared} comparisons, {dropped_seen} purged jobs dropped by the follower, \
         {behind_seen} changed rows left to a later look",
        ids.len()
    );
    drop(agents);
    drop(a);
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
        acked.push(submit_following(&env, &addrs, &stop, &job(2001, 200, 0)).expect("a controller took the submission"));
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
