//! The REST API and the metrics under load, on a local cluster in production mode (root), with
//! slurmrestd on its Unix socket (`rest_auth/local`):
//!
//! 1. `POST /slurm/v0.0.42/job/submit` from C concurrent keep-alive connections (default
//!    1,000) until N held jobs (default 10,000) are in: jobs/s. Durable: the controller
//!    commits each submission before it answers.
//! 2. `GET /slurm/v0.0.42/jobs` with those N jobs, 5 times: median, min, max, bytes.
//! 3. `GET /metrics/jobs` on the controller's port, 5 times (median), with the same jobs.
//!    Then the queue is filled to M jobs (default 100,000) and the scrape measured again:
//!    the wall time of the scrape bounds the controller's time for it.
//!
//! With `SLURM_REFERENCE_JOBS_MS` (real slurmrestd 22.05's median `GET /slurm/v0.0.38/jobs`
//! with as many jobs, timed by `bench/rest-reference.sh` just before it runs this), the ratio
//! is printed. Prints a Markdown table;
//! asserts nothing. Needs root (`FLOTILLA_TEST_ROOT=1`).
//!
//! `FLOTILLA_TEST_ROOT=1 cargo bench -p flotilla-compat-tests --bench rest [--profile dev] [-- N C M]`

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::restd::Restd;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// One request on a kept-alive stream; the status and the body's length.
fn exchange<S: Read + Write>(s: &mut S, method: &str, path: &str, body: Option<&str>) -> (u16, usize) {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\n");
    if let Some(b) = body {
        req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    if let Some(b) = body {
        req.push_str(b);
    }
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::with_capacity(1 << 16);
    let mut chunk = [0u8; 1 << 16];
    loop {
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "closed mid-answer");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let status: u16 = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("status");
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                .expect("content-length");
            while buf.len() < end + 4 + len {
                let n = s.read(&mut chunk).expect("read");
                assert!(n > 0, "closed mid-body");
                buf.extend_from_slice(&chunk[..n]);
            }
            return (status, len);
        }
    }
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// `GET path` 5 times on fresh connections to `sock`: (median, min, max) seconds and bytes.
fn time_get(sock: &Path, path: &str) -> ((f64, f64, f64), usize) {
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..5 {
        let mut s = UnixStream::connect(sock).expect("connect");
        let t = Instant::now();
        let (status, len) = exchange(&mut s, "GET", path, None);
        times.push(t.elapsed().as_secs_f64());
        assert_eq!(status, 200, "GET {path}");
        bytes = len;
    }
    (stats(times), bytes)
}

fn scrape(addr: std::net::SocketAddr) -> ((f64, f64, f64), usize) {
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..5 {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        let t = Instant::now();
        let (status, len) = exchange(&mut s, "GET", "/metrics/jobs", None);
        times.push(t.elapsed().as_secs_f64());
        assert_eq!(status, 200);
        bytes = len;
        // The text of a set is reused for 500 ms: wait it out, so that each scrape counts.
        std::thread::sleep(std::time::Duration::from_millis(600));
    }
    (stats(times), bytes)
}

/// Submits held jobs from `conns` keep-alive connections until `total` are in: seconds.
fn submit(sock: &Path, conns: usize, total: usize, dir: &str) -> f64 {
    let body = format!(
        r##"{{"script":"#!/bin/sh\ntrue\n","job":{{"name":"b","hold":true,"current_working_directory":"{dir}","environment":["PATH=/bin"]}}}}"##
    );
    let left = Arc::new(AtomicUsize::new(total));
    let t = Instant::now();
    let threads: Vec<_> = (0..conns)
        .map(|_| {
            let (sock, body, left) = (sock.to_path_buf(), body.clone(), left.clone());
            std::thread::Builder::new()
                .stack_size(256 << 10)
                .spawn(move || {
                    let mut s = UnixStream::connect(&sock).expect("connect");
                    while left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok() {
                        let (status, _) = exchange(&mut s, "POST", "/slurm/v0.0.42/job/submit", Some(&body));
                        assert_eq!(status, 200, "submit");
                    }
                })
                .expect("thread")
        })
        .collect();
    for th in threads {
        th.join().expect("submitter");
    }
    t.elapsed().as_secs_f64()
}

fn main() {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") {
        eprintln!("SKIPPED: the REST benchmark runs a local cluster as root (FLOTILLA_TEST_ROOT=1)");
        return;
    }
    let nums: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let n = nums.first().copied().unwrap_or(10_000);
    let conns = nums.get(1).copied().unwrap_or(1_000);
    let m = nums.get(2).copied().unwrap_or(100_000);
    flotilla_compat_tests::build_binaries();
    let conf = tempfile::tempdir().unwrap();
    let (body, topo) = flotilla_admin::dev::default_config(4, 8);
    let body = body + &format!("MaxJobCount={}\nMetricsType=metrics/openmetrics\n", m + n + 10);
    std::fs::write(conf.path().join("slurm.conf"), body).unwrap();
    std::fs::write(conf.path().join("topology.conf"), topo).unwrap();
    let c = LocalCluster::start(Some(conf.path()));
    let r = Restd::start(&c, &["--max-connections", &(conns + 16).to_string()], &[]);
    let work = c.dir().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let dir = work.to_string_lossy().into_owned();

    let submit_s = submit(&r.unix, conns, n, &dir);
    let (jobs_t, jobs_bytes) = time_get(&r.unix, "/slurm/v0.0.42/jobs");
    let (scrape_n, scrape_n_bytes) = scrape(c.ctld_addr());
    let reference: Option<f64> = std::env::var("SLURM_REFERENCE_JOBS_MS").ok().and_then(|s| s.parse().ok());
    let fill_s = if m > n { submit(&r.unix, conns.min(256), m - n, &dir) } else { 0.0 };
    let (scrape_m, scrape_m_bytes) = scrape(c.ctld_addr());

    println!("| measure | value |\n|---|---|");
    println!("| {n} held jobs submitted over {conns} keep-alive connections | {submit_s:.2} s, {:.0} jobs/s |", n as f64 / submit_s);
    println!(
        "| GET /slurm/v0.0.42/jobs, {n} jobs (median of 5; min, max) | {:.1} ms ({:.1}, {:.1}), {jobs_bytes} bytes |",
        jobs_t.0 * 1e3,
        jobs_t.1 * 1e3,
        jobs_t.2 * 1e3
    );
    if let Some(ms) = reference {
        println!(
            "| real slurmrestd 22.05 GET /slurm/v0.0.38/jobs, as many jobs (median of 5) | {ms:.1} ms; ours {:.1}x faster |",
            ms / (jobs_t.0 * 1e3)
        );
    }
    println!("| GET /metrics/jobs, {n} jobs (median of 5) | {:.2} ms, {scrape_n_bytes} bytes |", scrape_n.0 * 1e3);
    if m > n {
        println!("| filling to {m} jobs | {fill_s:.1} s, {:.0} jobs/s |", (m - n) as f64 / fill_s);
    }
    println!(
        "| GET /metrics/jobs, {} jobs (median of 5; min, max) | {:.2} ms ({:.2}, {:.2}), {scrape_m_bytes} bytes |",
        m.max(n),
        scrape_m.0 * 1e3,
        scrape_m.1 * 1e3,
        scrape_m.2 * 1e3
    );
}
