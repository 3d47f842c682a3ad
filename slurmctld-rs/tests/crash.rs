//! Crash safety (DESIGN.md §4 invariant 7): 1,000 submissions with jobs running on fake node
//! agents while the real `slurmctld` is killed with SIGKILL 20 times at seeded random moments
//! and restarted on the same port and state directory. Afterwards: no acknowledged job is
//! lost, none ran twice, no GPU was bound twice, and running jobs kept running (no agent was
//! told to kill a job that nobody cancelled). The same on SQLite (the default) and on a
//! PostgreSQL server (`StateStorageType=state/postgres`).

mod backends;
mod common;
mod crash_suite;

use common::*;
use flotilla_proto::{GresSpec, Request, Response};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const JOBS: usize = 1000;
const KILLS: usize = 20;
const NODES: usize = 8;

#[test]
fn kill9_under_load_loses_nothing() {
    kill9_under_load(Arc::new(Env::new(NODES)), "SQLite");
}

#[test]
fn kill9_under_load_loses_nothing_on_postgres() {
    let Some(pg) = backends::TestPg::start("kill9_under_load_loses_nothing_on_postgres") else { return };
    let env = Env::new(NODES);
    env.set_storage(pg.keys());
    kill9_under_load(Arc::new(env), "PostgreSQL");
    drop(pg);
}

fn kill9_under_load(env: Arc<Env>, store: &str) {
    let extra = ["--tick-ms", "100", "--sched-interval-ms", "200", "--debounce-ms", "5"];
    let mut ctl = Ctl::start(&env, 0, &extra);
    eprintln!("log: {}", env.path("slurmctld.log").display());
    let port = ctl.addr.port();
    let addr = Arc::new(Mutex::new(ctl.addr));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let agents: Vec<Agent> = (1..=NODES)
        .map(|i| Agent::spawn(&env, &format!("gpu{i:02}"), addr.clone(), ledger.clone()))
        .collect();

    // Submitters: several threads, retrying while the controller is down. An id is recorded
    // only when the controller acknowledged it.
    let acked: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::new()));
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let submitters: Vec<_> = (0..4)
        .map(|t| {
            let (env, acked, next) = (env.clone(), acked.clone(), next.clone());
            let a = *addr.lock().unwrap();
            std::thread::spawn(move || {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1000 + t);
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                    if i >= JOBS {
                        break;
                    }
                    let mut j = job(2001, rng.random_range(20..250), 0);
                    match rng.random_range(0..10) {
                        0 => {
                            j.nodes_min = Some(2);
                            j.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: 8 }];
                        }
                        1..=3 => j.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: rng.random_range(1..=8) }],
                        _ => j.gres = vec![GresSpec { name: "gpu".into(), gpu_type: None, count: 1 << rng.random_range(0..3) }],
                    }
                    // Retry until acknowledged; a submission whose answer was lost in a crash
                    // may exist without an ack, which is allowed (the client saw an error).
                    let t0 = Instant::now();
                    loop {
                        match call(&env, a, 2001, Request::SubmitJob(Box::new(j.clone()))) {
                            Ok(Response::Submitted(s)) => {
                                acked.lock().unwrap().push(s.job_id);
                                break;
                            }
                            Ok(other) => panic!("submission refused: {other:?}"),
                            Err(_) => {
                                assert!(t0.elapsed() < Duration::from_secs(30), "controller unreachable");
                                std::thread::sleep(Duration::from_millis(10));
                            }
                        }
                    }
                }
            })
        })
        .collect();

    // The killer: 20 SIGKILLs at seeded random moments, each followed by a restart.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let t_start = Instant::now();
    for k in 0..KILLS {
        std::thread::sleep(Duration::from_millis(rng.random_range(50..600)));
        ctl.kill9();
        if rng.random_bool(0.5) {
            std::thread::sleep(Duration::from_millis(rng.random_range(0..100)));
        }
        ctl = Ctl::start(&env, port, &extra);
        assert_eq!(ctl.addr.port(), port, "restart {k} on the same port");
    }
    for s in submitters {
        s.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let acked = acked.lock().unwrap().clone();
    assert_eq!(acked.len(), JOBS);

    // Let everything finish.
    let finished = wait_for(60, || {
        let jobs = all_jobs(&env, ctl.addr);
        jobs.iter().all(|j| j.state.is_some_and(|s| s.is_finished()))
    });
    let jobs = all_jobs(&env, ctl.addr);
    let not_done: Vec<_> = jobs.iter().filter(|j| !j.state.unwrap().is_finished()).map(|j| (j.job_id, j.state, j.reason.clone())).take(10).collect();
    assert!(finished, "jobs still active: {not_done:?}");

    let l = ledger.lock().unwrap();
    // The crash suite's checks (shared with ha.rs's suites): none lost, none acknowledged or
    // started twice, no GPU bound twice, every kill a scheduler requeue.
    let counts = crash_suite::check_after_crashes(&jobs, &acked, &l);
    // Ids are sequential from 1 (a job whose ack was lost may exist unacked).
    assert_eq!(jobs.iter().map(|j| j.job_id).min(), Some(1));
    eprintln!(
        "crash test on {store}: {} jobs, {} controller kills, {} backfill preemptions, {} requeues, {} binds received, {:.1} s",
        jobs.len(),
        KILLS,
        l.kills.len(),
        counts.requeues,
        l.binds,
        t_start.elapsed().as_secs_f64()
    );
    drop(l);
    drop(agents);
}
