//! The crash suite, shared by its two topologies (`ha.rs`) and by `crash.rs`'s checks:
//!
//! - [`Controllers::PostgresPair`]: two controllers on one PostgreSQL store; the leader is
//!   `kill -9`ed and the standby takes the lease; the killed one is restarted as a standby.
//! - [`Controllers::LoneSqlite`]: one controller on its SQLite state directory, `kill -9`ed
//!   and restarted on its port (as systemd's `Restart=` would); the clients retry until it is
//!   back.
//!
//! Both run [`kill9_again_and_again`]: 1,000 submissions (GPU jobs of 1 to 8 GPUs) from four
//! client threads, the leader killed 20 times at seeded random moments among submissions in
//! flight, fake node agents running the jobs and following the leader; then
//! [`check_after_crashes`]: no acknowledged job lost or acknowledged twice, none started twice,
//! no GPU bound twice, no running job killed except by the scheduler's own requeue.
#![allow(dead_code)]

use crate::common::*;
use flotilla_proto::{GresSpec, JobInfo, JobStateWire, Request, Response};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Controller processes, killed when the test ends.
pub struct Kill(pub Vec<std::process::Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The TCP port process `pid` listens on: its socket inodes among `/proc/net/tcp`'s
/// listening rows (a standby writes no address file: it has not taken the lease).
pub fn listen_port(pid: u32) -> Option<u16> {
    let inodes: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            l.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')
                .map(str::to_string)
        })
        .collect();
    std::fs::read_to_string("/proc/net/tcp")
        .ok()?
        .lines()
        .skip(1)
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 9 && f[3] == "0A" && inodes.contains(f[9]))
                .then(|| u16::from_str_radix(f[1].split(':').nth(1)?, 16).ok())?
        })
}

/// Controller `name`'s log.
pub fn log_of(env: &Env, name: &str) -> String {
    std::fs::read_to_string(env.path(&format!("slurmctld{name}.log"))).unwrap_or_default()
}

/// The address controller `name` wrote once it took the lease (`None` before).
pub fn leader_addr(env: &Env, name: &str) -> Option<std::net::SocketAddr> {
    std::fs::read_to_string(env.path(&format!("ctld{name}.addr")))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The crash suite's size: (submissions, kills of the leader): the 1,000 across 20
/// kills. `FLOTILLA_HA_CRASH_SMALL=1`: 200 across 4, for a quick look.
pub fn crash_size() -> (usize, usize) {
    if std::env::var("FLOTILLA_HA_CRASH_SMALL").as_deref() == Ok("1") {
        (200, 4)
    } else {
        (1000, 20)
    }
}

/// Submission `n` of the suite: a 200 ms job of 1, 2, 4 or 8 GPUs (by `n`), so that the
/// nodes' GPU bindings are checked.
pub fn gpu_job(n: usize) -> flotilla_proto::SubmitJob {
    let mut j = job(2001, 200, 0);
    j.gres = vec![GresSpec {
        name: "gpu".into(),
        gpu_type: None,
        count: 1 << (n % 4),
    }];
    j
}

/// Submits `j`, following the leader over `addrs` (a controller that cannot be reached or
/// answers as a standby: the next, as the commands do). `Some(id)` once a controller
/// acknowledged it; a reply lost with its connection is tried again (the job may then exist
/// twice, once unacknowledged: the commands do the same). A submission whose commit failed
/// (the database away, or a connection lost at its COMMIT, whose outcome is unknown; a
/// connection lost before its COMMIT runs the turn again and refuses nothing) is refused with Slurm's `ESLURM_WRITING_TO_FILE`: nothing was acknowledged or
/// kept, and it is tried again as a user would. `None` once `stop` is set.
pub fn submit_following(
    env: &Env,
    addrs: &[std::net::SocketAddr],
    stop: &AtomicBool,
    j: &flotilla_proto::SubmitJob,
) -> Option<u64> {
    let t0 = Instant::now();
    loop {
        for a in addrs {
            match call(env, *a, 2001, Request::SubmitJob(Box::new(j.clone()))) {
                Ok(Response::Submitted(s)) => return Some(s.job_id),
                Ok(Response::Error(e))
                    if e.code == flotilla_proto::errno::ESLURM_IN_STANDBY_MODE
                        || e.code == flotilla_proto::errno::ESLURM_WRITING_TO_FILE => {}
                Ok(other) => panic!("submission refused: {other:?}"),
                Err(_) => {}
            }
        }
        if stop.load(Ordering::Acquire) {
            return None;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no controller took a submission for 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What [`check_after_crashes`] counted.
#[derive(Debug, Clone, Copy)]
pub struct Counts {
    /// Jobs present without an acknowledgement (a committed submission whose reply died with
    /// the controller, tried again by its client).
    pub unacked: usize,
    /// Runs the scheduler itself ended and requeued (backfill preemption), each followed by
    /// the next run.
    pub requeues: usize,
}

/// The crash suite's checks, once every job finished: `acked` (every acknowledged id, in
/// any order) against the controller's `jobs` (with finished ones) and what the node agents
/// saw (`l`).
///
/// - no job id was acknowledged twice, and each job is present once;
/// - every acknowledged job is present and `COMPLETED` (none lost);
/// - every (job, run) started exactly once on its batch host, and each acknowledged job's
///   runs `0..=restarts` all started (none ran twice, none skipped);
/// - no GPU was bound to two jobs at once on a node (the agents' violations);
/// - a running job was killed only by the scheduler's own requeue (a backfill job preempted
///   when a reservation's holder can start): each killed run has a successor that started
///   once, and there are no more kills than requeues. A kill caused by a controller crash
///   would leave a killed run without a successor.
///
/// Panics (the test fails) on the first broken rule.
pub fn check_after_crashes(jobs: &[JobInfo], acked: &[u64], l: &Ledger) -> Counts {
    let unique: std::collections::HashSet<u64> = acked.iter().copied().collect();
    assert_eq!(unique.len(), acked.len(), "no job id acknowledged twice");
    let mut by_id = std::collections::HashMap::new();
    for j in jobs {
        assert!(
            by_id.insert(j.job_id, j).is_none(),
            "job {} present twice",
            j.job_id
        );
    }
    assert!(
        l.violations.is_empty(),
        "GPU bound twice: {:?}",
        l.violations
    );
    for id in acked {
        let j = by_id
            .get(id)
            .unwrap_or_else(|| panic!("acknowledged job {id} lost"));
        assert_eq!(
            j.state,
            Some(JobStateWire::Completed),
            "job {id}: {:?} {}",
            j.state,
            j.reason
        );
        for run in 0..=j.restarts {
            assert_eq!(
                l.starts.get(&(*id, run)).copied(),
                Some(1),
                "job {id} run {run} started {:?} times",
                l.starts.get(&(*id, run))
            );
        }
    }
    for ((id, run), n) in &l.starts {
        assert_eq!(*n, 1, "job {id} run {run} started {n} times");
    }
    for (id, run) in &l.kills {
        assert_eq!(
            l.starts.get(&(*id, run + 1)).copied(),
            Some(1),
            "job {id} run {run} was killed and never ran again"
        );
    }
    let requeues: u32 = jobs.iter().map(|j| j.restarts).sum();
    // (A preempted job may finish on its own before the signal lands: requeued, not killed.)
    assert!(
        l.kills.len() as u32 <= requeues,
        "every kill is a scheduler requeue: {} kills, {requeues} requeues",
        l.kills.len()
    );
    Counts {
        unacked: jobs.len().saturating_sub(acked.len()),
        requeues: requeues as usize,
    }
}

/// The controllers a crash suite kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controllers {
    /// One controller (`a`) on SQLite: killed, then restarted on its port at once; the
    /// clients retry until it is back.
    LoneSqlite,
    /// Two controllers (`a`, `b`) on the environment's PostgreSQL store: the standby takes
    /// over, the killed one is restarted as a standby.
    PostgresPair,
}

/// What a crash suite run measured.
#[derive(Debug)]
pub struct Run {
    /// Per kill: from the kill to the next leader's address file (the lease taken, the state
    /// recovered, listening). On SQLite this includes the restart of the process.
    pub takeovers: Vec<Duration>,
    /// The checks' counts.
    pub counts: Counts,
}

/// The crash suite (see the module doc) on `env` with `controllers`, at [`crash_size`].
/// Kills fall once the leader acknowledged its share of the submissions and a random part
/// (xorshift, seed printed) of the next share, with the rest of that share in flight.
///
/// Every node message carries its sender's epoch (`Frame::ToNodeFenced`): each leader is a
/// new epoch (a restarted SQLite controller takes the lease anew), so the nodes' messages
/// run from epoch 1 to the last leader's, `kills + 1`.
pub fn kill9_again_and_again(env: Env, controllers: Controllers) -> Run {
    let (total, kills) = crash_size();
    let extra = ["--tick-ms", "100", "--debounce-ms", "5"];
    let names: &[&str] = match controllers {
        Controllers::LoneSqlite => &["a"],
        Controllers::PostgresPair => &["a", "b"],
    };
    let mut procs = Kill(vec![Ctl::spawn_named(&env, "a", 0, &extra)]);
    let mut a_addr = None;
    assert!(
        wait_for(30, || {
            a_addr = leader_addr(&env, "a");
            a_addr.is_some()
        }),
        "a leads: {}",
        log_of(&env, "a")
    );
    let mut ports = vec![a_addr.unwrap().port()];
    if controllers == Controllers::PostgresPair {
        procs.0.push(Ctl::spawn_named(&env, "b", 0, &extra));
        let mut port = None;
        assert!(
            wait_for(20, || {
                port = listen_port(procs.0[1].id());
                port.is_some()
            }),
            "b listens"
        );
        ports.push(port.unwrap());
    }
    let mut leader = 0;
    let addrs: Vec<std::net::SocketAddr> =
        ports.iter().map(|p| ([127, 0, 0, 1], *p).into()).collect();

    let agent_addr = Arc::new(Mutex::new(addrs[0]));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let agents: Vec<Agent> = (1..=4)
        .map(|i| {
            Agent::spawn(
                &env,
                &format!("gpu{i:02}"),
                agent_addr.clone(),
                ledger.clone(),
            )
        })
        .collect();
    let acked = Arc::new(Mutex::new(Vec::<u64>::new()));
    let next = Arc::new(AtomicUsize::new(0));
    // How many submissions the clients may start: one share ahead of the next kill, so that
    // every kill falls among submissions in flight.
    let share = total / (kills + 1);
    let allowed = Arc::new((
        Mutex::new((2 * share).min(total)),
        std::sync::Condvar::new(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let env = Arc::new(env);
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (env, addrs, acked, next, stop) = (
                env.clone(),
                addrs.clone(),
                acked.clone(),
                next.clone(),
                stop.clone(),
            );
            let allowed = allowed.clone();
            std::thread::spawn(move || loop {
                let n = next.load(Ordering::Acquire);
                if n >= total {
                    return;
                }
                {
                    // Wait for the main thread to allow submission n (after the next kill).
                    let (limit, moved) = &*allowed;
                    let (guard, waited) = moved
                        .wait_timeout_while(limit.lock().unwrap(), Duration::from_secs(120), |a| {
                            n >= *a
                        })
                        .unwrap();
                    drop(guard);
                    if waited.timed_out() {
                        return; // the main thread failed; its assertions say why
                    }
                }
                if next
                    .compare_exchange(n, n + 1, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    continue;
                }
                if let Some(id) = submit_following(&env, &addrs, &stop, &gpu_job(n)) {
                    acked.lock().unwrap().push(id);
                }
            })
        })
        .collect();
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash suite ({controllers:?}): {total} submissions, {kills} kills, seed {seed}");
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
        let next_leader = match controllers {
            // Restarted at once on its port, as systemd's Restart= would; it leads again once
            // it took the lease and recovered its state.
            Controllers::LoneSqlite => {
                procs.0[0] = Ctl::spawn_named(&env, "a", ports[0], &extra);
                0
            }
            Controllers::PostgresPair => 1 - leader,
        };
        assert!(
            wait_for(30, || leader_addr(&env, names[next_leader]).is_some()),
            "{} leads after kill {k}: {}",
            names[next_leader],
            log_of(&env, names[next_leader])
        );
        takeovers.push(t.elapsed());
        *agent_addr.lock().unwrap() = addrs[next_leader];
        if controllers == Controllers::PostgresPair {
            // Restarted as systemd's Restart= would: a standby on its port.
            procs.0[leader] = Ctl::spawn_named(&env, names[leader], ports[leader], &extra);
        }
        leader = next_leader;
        let (limit, moved) = &*allowed;
        *limit.lock().unwrap() = if k + 1 == kills {
            total
        } else {
            ((k + 3) * share).min(total)
        };
        moved.notify_all();
    }
    for c in clients {
        c.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert_eq!(acked.len(), total, "every submission was acknowledged once");
    let leader_addr = addrs[leader];
    let mut jobs = Vec::new();
    assert!(
        wait_for(120, || {
            jobs = all_jobs(&env, leader_addr);
            jobs.iter()
                .all(|j| j.state.is_some_and(|s| s.is_finished()))
        }),
        "every job finishes under the last leader: {} of {} finished",
        jobs.iter()
            .filter(|j| j.state.is_some_and(|s| s.is_finished()))
            .count(),
        jobs.len()
    );
    let counts = check_after_crashes(&jobs, &acked, &ledger.lock().unwrap());
    // Every node message carried its sender's epoch: one per leader (each sends a keepalive
    // at a registration), from 1 to the last leader's.
    let last = kills as u64 + 1;
    assert!(
        wait_for(30, || ledger.lock().unwrap().by_epoch.contains_key(&last)),
        "the nodes reached the last leader"
    );
    let l = ledger.lock().unwrap();
    let epochs: Vec<u64> = l.by_epoch.keys().copied().collect();
    assert!(
        epochs.first() == Some(&1) && epochs.last() == Some(&last),
        "node messages by epoch: {:?}",
        l.by_epoch
    );
    let mut sorted = takeovers.clone();
    sorted.sort_unstable();
    eprintln!(
        "crash suite ({controllers:?}): {total} acknowledged, {} unacknowledged duplicates (replies lost with the leader), \
         {} scheduler requeues, {} binds; next leader after kill -9: median {} ms, max {} ms over {kills}",
        counts.unacked,
        counts.requeues,
        l.binds,
        sorted[sorted.len() / 2].as_millis(),
        sorted.last().unwrap().as_millis()
    );
    drop(l);
    stop.store(true, Ordering::Release);
    drop(agents);
    Run { takeovers, counts }
}
