//! Takeover time against the size of the state: two real `slurmctld` processes on one
//! PostgreSQL server (`SlurmctldTimeout=2`), the store holding N pending jobs (submitted
//! through the leader by eight client threads; no node daemons, so every job stays pending and
//! is recovered as a queued job). Each run `kill -9`s the leader and measures:
//!
//! - **takeover**: from the kill to the new leader's address file (it took the lease,
//!   recovered the state and listens);
//! - **recovery**: in the new leader's log, from `took the leader lease` to `slurmctld
//!   listening`: reading the state from the database and rebuilding the controller from it,
//!   which is what a standby that follows the store would not have to do at takeover; and
//!   its two parts from the `recovered state` line: `load_ms` (the rows read from the
//!   database and parsed) and `rebuild_ms` (the scheduler and tables rebuilt from them).
//!
//! The killed controller is restarted at once and is the next run's standby, alternately
//! with `--no-follow` (it reads the whole state at takeover: before) and following the
//! store's job rows while it waits ([`flotilla_slurmctld::store::follow`]: after), so both
//! are measured in one run. Prints each run and the medians per size and mode; asserts only
//! that each run ends (60 s) with every job.
//!
//! `cargo bench -p flotilla-slurmctld --bench takeover --profile test [-- SIZE...]` (default
//! 0 10000 50000; `RUNS=n` runs per size and mode, default 3). Without PostgreSQL installed it says so
//! and measures nothing.

#[path = "../tests/backends/mod.rs"]
mod backends;
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/crash_suite/mod.rs"]
mod crash_suite;

use common::*;
use crash_suite::{leader_addr, listen_port, log_of};
use flotilla_proto::{Request, Response};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Seconds of the day of a log line's RFC 3339 timestamp (`2026-12-03T17:11:40.123456Z ...`).
fn stamp(line: &str) -> Option<f64> {
    let t = line
        .split_whitespace()
        .next()?
        .split('T')
        .nth(1)?
        .trim_end_matches('Z');
    let mut f = t.split(':');
    let (h, m, s): (f64, f64, f64) = (
        f.next()?.parse().ok()?,
        f.next()?.parse().ok()?,
        f.next()?.parse().ok()?,
    );
    Some(h * 3600.0 + m * 60.0 + s)
}

/// The last recovery in controller `name`'s log: from its last `took the leader lease` line to
/// the `slurmctld listening` line after it, and the `load_ms` and `rebuild_ms` of its
/// `recovered state` line (the rows read and parsed; the controller rebuilt from them).
fn recovery(env: &Env, name: &str) -> Option<(Duration, Duration, Duration)> {
    let log = log_of(env, name);
    let lines: Vec<&str> = log.lines().collect();
    let took = lines
        .iter()
        .rposition(|l| l.contains("took the leader lease"))?;
    let listening = lines[took..]
        .iter()
        .find(|l| l.contains("slurmctld listening"))?;
    let mut d = stamp(listening)? - stamp(lines[took])?;
    if d < 0.0 {
        d += 86_400.0;
    }
    let recovered = lines[took..]
        .iter()
        .find(|l| l.contains("recovered state"))?;
    let field = |key: &str| -> Option<Duration> {
        let v = recovered
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))?;
        Some(Duration::from_millis(v.parse().ok()?))
    };
    Some((
        Duration::from_secs_f64(d),
        field("load_ms=")?,
        field("rebuild_ms=")?,
    ))
}

/// Submits `n` jobs to `addr` from eight threads.
fn fill(env: &Arc<Env>, addr: std::net::SocketAddr, n: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (env, next) = (env.clone(), next.clone());
            std::thread::spawn(move || {
                while next.fetch_add(1, Ordering::AcqRel) < n {
                    let t = Instant::now();
                    loop {
                        match call(
                            &env,
                            addr,
                            2001,
                            Request::SubmitJob(Box::new(job(2001, 60_000, 0))),
                        ) {
                            Ok(Response::Submitted(_)) => break,
                            other => assert!(
                                t.elapsed() < Duration::from_secs(60),
                                "submission: {other:?}"
                            ),
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Waits up to 60 s for `f`.
fn wait(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{what}: not within 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// How a standby waits: `--no-follow` (reads the whole state at takeover: before) or following
/// the store's job rows (after).
const MODES: [(&str, &[&str]); 2] = [("reads all", &["--no-follow"]), ("follows", &[])];

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![0, 10_000, 50_000]
    } else {
        sizes
    };
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3)
        .max(1);
    let mut table = Vec::new();
    for &size in &sizes {
        let Some(pg) = backends::TestPg::start("takeover bench") else {
            return;
        };
        let env = Env::new(4);
        env.set_storage(pg.keys());
        env.edit_cluster(|c| {
            c.slurmctld_timeout_s = 2;
            c.backup_controllers = vec![("b".into(), "127.0.0.1".into())];
        });
        let env = Arc::new(env);
        let base = ["--tick-ms", "100", "--debounce-ms", "5"];
        let args =
            |mode: usize| -> Vec<&str> { base.iter().chain(MODES[mode].1).copied().collect() };
        let names = ["a", "b"];
        let mut procs = crash_suite::Kill(vec![Ctl::spawn_named(&env, "a", 0, &args(0))]);
        wait("a leads", || leader_addr(&env, "a").is_some());
        let a_addr = leader_addr(&env, "a").unwrap();
        let t = Instant::now();
        fill(&env, a_addr, size);
        let filled = t.elapsed();
        let lines = |name: &str, what: &str| log_of(&env, name).matches(what).count();
        // Run r's standby waits in mode r % 2: the modes alternate, in one run of the bench.
        let start_standby = |procs: &mut crash_suite::Kill, i: usize, port: u16, mode: usize| {
            let (standbys, follows) = (
                lines(names[i], "standby: another controller leads"),
                lines(names[i], "following the store"),
            );
            let child = Ctl::spawn_named(&env, names[i], port, &args(mode));
            if procs.0.len() > i {
                procs.0[i] = child;
            } else {
                procs.0.push(child);
            }
            let pid = procs.0[i].id();
            wait("the standby waits", || {
                listen_port(pid).is_some()
                    && lines(names[i], "standby: another controller leads") > standbys
                    && (mode == 0 || lines(names[i], "following the store") > follows)
            });
            listen_port(pid).unwrap()
        };
        let b_port = start_standby(&mut procs, 1, 0, 0);
        let ports = [a_addr.port(), b_port];
        println!(
            "{size} jobs in the store (submitted in {:.1} s, {:.0}/s)",
            filled.as_secs_f64(),
            size as f64 / filled.as_secs_f64().max(1e-9)
        );
        let mut leader = 0;
        let mut by_mode: [Vec<[Duration; 4]>; 2] = [Vec::new(), Vec::new()];
        for run in 0..2 * runs {
            let mode = run % 2;
            let standby = 1 - leader;
            let _ = std::fs::remove_file(env.path(&format!("ctld{}.addr", names[standby])));
            let killed = Instant::now();
            let _ = procs.0[leader].kill();
            let _ = procs.0[leader].wait();
            wait("the standby leads", || {
                leader_addr(&env, names[standby]).is_some()
            });
            let took = killed.elapsed();
            let (rec, load, rebuild) = recovery(&env, names[standby])
                .expect("the new leader logged its lease, its recovery and its listening");
            let jobs = all_jobs(&env, leader_addr(&env, names[standby]).unwrap()).len();
            assert_eq!(jobs, size, "run {run}: the new leader has every job");
            println!(
                "  run {}: {} -> {} ({}): takeover {}, recovery {} (load {}, rebuild {})",
                run + 1,
                names[leader],
                names[standby],
                MODES[mode].0,
                ms(took),
                ms(rec),
                ms(load),
                ms(rebuild)
            );
            by_mode[mode].push([took, rec, load, rebuild]);
            start_standby(&mut procs, leader, ports[leader], (run + 1) % 2);
            leader = standby;
        }
        let med = |m: usize, k: usize| median(by_mode[m].iter().map(|v| v[k]).collect());
        table.push((size, [0, 1, 2, 3].map(|k| (med(0, k), med(1, k)))));
        drop(procs);
        drop(pg);
    }
    println!("medians of {runs} runs per standby mode (before: reads all at takeover; after: follows the store)");
    println!("| jobs in the store | takeover before | after | recovery before | after | rows read and parsed before | after | controller rebuilt before | after |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (size, cols) in table {
        let cells: Vec<String> = cols
            .iter()
            .map(|(b, a)| format!("{} | {}", ms(*b), ms(*a)))
            .collect();
        println!("| {size} | {} |", cells.join(" | "));
    }
}
