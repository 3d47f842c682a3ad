//! Failover time: two real `slurmctld` processes on one PostgreSQL server (the default lease,
//! `SlurmctldTimeout=6`), four fake node agents (`tests/common`'s, which follow the leader the
//! bench names), and a client submitting through the `SlurmctldHost` order as the commands do.
//! Each run `kill -9`s the leader and measures, from the kill:
//!
//! - **accepted**: the first submission acknowledged by the new leader (the client retries
//!   from the moment of the kill, trying both controllers in turn);
//! - **started**: that job's launch reaching its node (the agents reconnect to the new leader
//!   once its address file appears, polled every 5 ms).
//!
//! The killed controller is restarted at once (as systemd's `Restart=`) and comes back as the
//! standby of the next run. Prints each run and the median and maximum; asserts nothing but
//! that each run ends (a run that does not within 60 s is a failure).
//!
//! `cargo bench -p flotilla-slurmctld --bench failover [-- RUNS]` (default 20). Without
//! PostgreSQL installed it says so and measures nothing.

#[path = "../tests/backends/mod.rs"]
mod backends;
#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use flotilla_proto::{Request, Response};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn addr_of(env: &Env, name: &str) -> Option<SocketAddr> {
    std::fs::read_to_string(env.path(&format!("ctld{name}.addr"))).ok()?.trim().parse().ok()
}

/// The TCP port process `pid` listens on (a standby writes no address file).
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

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn summary(name: &str, mut v: Vec<Duration>) -> String {
    v.sort_unstable();
    format!("{name}: median {}, max {} over {} runs", ms(v[v.len() / 2]), ms(*v.last().unwrap()), v.len())
}

fn main() {
    let runs: usize = std::env::args().skip(1).find(|a| !a.starts_with('-')).and_then(|a| a.parse().ok()).unwrap_or(20);
    let Some(pg) = backends::TestPg::start("failover bench") else { return };
    let env = Env::new(4);
    env.set_storage(pg.keys());
    env.edit_cluster(|c| c.backup_controllers = vec![("b".into(), "127.0.0.1".into())]);
    let extra = ["--tick-ms", "100", "--debounce-ms", "5"];
    let names = ["a", "b"];
    let mut procs = vec![Ctl::spawn_named(&env, "a", 0, &extra)];
    let t0 = Instant::now();
    while addr_of(&env, "a").is_none() {
        assert!(t0.elapsed() < Duration::from_secs(60), "a did not lead");
        std::thread::sleep(Duration::from_millis(5));
    }
    procs.push(Ctl::spawn_named(&env, "b", 0, &extra));
    let b_port = loop {
        if let Some(p) = listen_port(procs[1].id()) {
            break p;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "b did not listen");
        std::thread::sleep(Duration::from_millis(5));
    };
    let addrs = [addr_of(&env, "a").unwrap(), SocketAddr::from(([127, 0, 0, 1], b_port))];
    let agent_addr = Arc::new(Mutex::new(addrs[0]));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let agents: Vec<Agent> = (1..=4).map(|i| Agent::spawn(&env, &format!("gpu{i:02}"), agent_addr.clone(), ledger.clone())).collect();
    let sub = || Request::SubmitJob(Box::new(job(2001, 50, 0)));
    let mut leader = 0;
    let (mut accepted, mut started) = (Vec::new(), Vec::new());
    for run in 0..runs {
        // The leader serves and its nodes run jobs before it dies.
        let warm = loop {
            if let Ok(Response::Submitted(s)) = call(&env, addrs[leader], 2001, sub()) {
                break s.job_id;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let t = Instant::now();
        while !ledger.lock().unwrap().started_at.contains_key(&(warm, 0)) {
            assert!(t.elapsed() < Duration::from_secs(60), "run {run}: the warm-up job did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
        let standby = 1 - leader;
        let _ = std::fs::remove_file(env.path(&format!("ctld{}.addr", names[standby])));
        let killed = Instant::now();
        let _ = procs[leader].kill();
        let _ = procs[leader].wait();
        // The agents follow the new leader as soon as it writes its address.
        let watch = {
            let (agent_addr, path, addr) = (agent_addr.clone(), env.path(&format!("ctld{}.addr", names[standby])), addrs[standby]);
            std::thread::spawn(move || {
                let t = Instant::now();
                while !path.exists() && t.elapsed() < Duration::from_secs(60) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                *agent_addr.lock().unwrap() = addr;
            })
        };
        let id = loop {
            let mut got = None;
            for a in [addrs[standby], addrs[leader]] {
                if let Ok(Response::Submitted(s)) = call(&env, a, 2001, sub()) {
                    got = Some(s.job_id);
                    break;
                }
            }
            if let Some(id) = got {
                break id;
            }
            assert!(killed.elapsed() < Duration::from_secs(60), "run {run}: no controller accepted a job for 60 s");
            std::thread::sleep(Duration::from_millis(10));
        };
        let acc = killed.elapsed();
        while !ledger.lock().unwrap().started_at.contains_key(&(id, 0)) {
            assert!(killed.elapsed() < Duration::from_secs(60), "run {run}: job {id} did not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        let st = ledger.lock().unwrap().started_at[&(id, 0)] - killed;
        watch.join().unwrap();
        println!("run {:>2}: {} -> {}: accepted {}, started {}", run + 1, names[leader], names[standby], ms(acc), ms(st));
        accepted.push(acc);
        started.push(st);
        // Restarted, the controller waits as a standby before the next kill.
        let log = env.path(&format!("slurmctld{}.log", names[leader]));
        let standby_lines = |p: &std::path::Path| {
            std::fs::read_to_string(p).unwrap_or_default().lines().filter(|l| l.contains("standby: another controller leads")).count()
        };
        let before = standby_lines(&log);
        procs[leader] = Ctl::spawn_named(&env, names[leader], addrs[leader].port(), &extra);
        let t = Instant::now();
        while listen_port(procs[leader].id()).is_none() || standby_lines(&log) == before {
            assert!(t.elapsed() < Duration::from_secs(60), "run {run}: the restarted controller did not come back as a standby");
            std::thread::sleep(Duration::from_millis(10));
        }
        leader = standby;
    }
    println!("{}", summary("kill -9 to the first job accepted by the new leader", accepted));
    println!("{}", summary("kill -9 to the first job started by the new leader", started));
    println!("(goal: <= 10 s median; Slurm's backup controller waits SlurmctldTimeout, 120 s by default)");
    drop(agents);
    for p in &mut procs {
        let _ = p.kill();
        let _ = p.wait();
    }
}
