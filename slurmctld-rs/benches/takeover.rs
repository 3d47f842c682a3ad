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
//! The killed controller is restarted at once and is the next run's standby. Prints each run
//! and the median per size; asserts only that each run ends (60 s).
//!
//! `cargo bench -p flotilla-slurmctld --bench takeover --profile test [-- SIZE...]` (default
//! 0 10000 50000; `RUNS=n` runs per size, default 3). Without PostgreSQL installed it says so
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

/// `text` without ANSI escapes (the daemon's `tracing` output colours its lines).
fn plain(text: &str) -> String {
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
    let log = plain(&log_of(env, name));
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
        let extra = ["--tick-ms", "100", "--debounce-ms", "5"];
        let names = ["a", "b"];
        let mut procs = crash_suite::Kill(vec![Ctl::spawn_named(&env, "a", 0, &extra)]);
        wait("a leads", || leader_addr(&env, "a").is_some());
        let a_addr = leader_addr(&env, "a").unwrap();
        let t = Instant::now();
        fill(&env, a_addr, size);
        let filled = t.elapsed();
        procs.0.push(Ctl::spawn_named(&env, "b", 0, &extra));
        wait("b waits as a standby", || {
            log_of(&env, "b").contains("standby: another controller leads")
        });
        let mut port = None;
        wait("b listens", || {
            port = listen_port(procs.0[1].id());
            port.is_some()
        });
        let ports = [a_addr.port(), port.unwrap()];
        println!(
            "{size} jobs in the store (submitted in {:.1} s, {:.0}/s)",
            filled.as_secs_f64(),
            size as f64 / filled.as_secs_f64().max(1e-9)
        );
        let mut leader = 0;
        let (mut takeovers, mut recoveries, mut loads, mut rebuilds) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for run in 0..runs {
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
                "  run {}: {} -> {}: takeover {}, recovery {} (load {}, rebuild {})",
                run + 1,
                names[leader],
                names[standby],
                ms(took),
                ms(rec),
                ms(load),
                ms(rebuild)
            );
            takeovers.push(took);
            recoveries.push(rec);
            loads.push(load);
            rebuilds.push(rebuild);
            let log = env.path(&format!("slurmctld{}.log", names[leader]));
            let standby_lines = |p: &std::path::Path| {
                std::fs::read_to_string(p)
                    .unwrap_or_default()
                    .matches("standby: another controller leads")
                    .count()
            };
            let before = standby_lines(&log);
            procs.0[leader] = Ctl::spawn_named(&env, names[leader], ports[leader], &extra);
            wait("the restarted controller waits as a standby", || {
                listen_port(procs.0[leader].id()).is_some() && standby_lines(&log) > before
            });
            leader = standby;
        }
        table.push((
            size,
            median(takeovers),
            median(recoveries),
            median(loads),
            median(rebuilds),
        ));
        drop(procs);
        drop(pg);
    }
    println!("| jobs in the store | takeover (median of {runs}) | of which recovery | rows read and parsed | controller rebuilt |");
    println!("|---|---|---|---|---|");
    for (size, took, rec, load, rebuild) in table {
        println!(
            "| {size} | {} | {} | {} | {} |",
            ms(took),
            ms(rec),
            ms(load),
            ms(rebuild)
        );
    }
}
