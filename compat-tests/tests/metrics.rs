//! The controller's own metrics endpoints (Slurm 25.11 `MetricsType=metrics/openmetrics`,
//! `slurmctld-rs/src/metrics.rs`), end to end: a local cluster with the key set runs a job and
//! holds another; every endpoint is fetched over HTTP on the controller's TCP port (the port
//! its node daemons speak proto frames on); the values agree with `squeue` and `sinfo`; every
//! body passes `promtool check metrics`; and a real Prometheus scraping every path each second
//! for a minute while a job runs scrapes each of them successfully every time (60 scrapes
//! each, none failed) and answers job-count queries as `squeue` counts.
//!
//! Needs `prometheus` and `promtool` on PATH (Debian: `apt-get install prometheus`); the test
//! fails, naming them, when they are missing.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::wait::{wait_settled, wait_until};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The metric sets' paths.
const PATHS: [&str; 5] = ["/metrics/jobs", "/metrics/nodes", "/metrics/partitions", "/metrics/scheduler", "/metrics/jobs-users-accts"];

/// A tool this test needs, from PATH; fails the test naming it when missing.
fn tool(name: &str) -> PathBuf {
    let out = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output().expect("sh runs");
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && !p.is_empty(),
        "{name} is not on PATH: this test needs Prometheus's `prometheus` and `promtool` (Debian: apt-get install prometheus)"
    );
    PathBuf::from(p)
}

/// An HTTP/1.1 answer: status, headers (names lower case), body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// One request on a fresh connection (`Connection: close`), read to its end; panics when
/// there is no answer.
fn http(addr: SocketAddr, method: &str, path: &str, extra: &str) -> Answer {
    try_http(addr, method, path, extra).unwrap_or_else(|e| panic!("{e}"))
}

/// [`http`], or why there was no answer.
fn try_http(addr: SocketAddr, method: &str, path: &str, extra: &str) -> Result<Answer, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n").map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("{method} {path}: {e}"))?;
    let text = String::from_utf8(raw).map_err(|e| format!("{method} {path}: {e}"))?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("no header end in {text:?}"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| format!("status line {status_line:?}"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Answer { status, headers, body: body.to_string() })
}

/// The value of the sample `series` (name and labels as printed) in a metrics body.
fn sample(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|r| r.strip_prefix(' ')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no sample {series} in:\n{body}"))
}

/// Lines `cmd` prints on this cluster (as root, or whoever runs the test).
fn lines_of(c: &LocalCluster, cmd: &str, args: &[&str]) -> Vec<String> {
    let o = c.run(cmd, args, c.dir());
    assert!(o.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).filter(|l| !l.trim().is_empty()).collect()
}

fn squeue_count(c: &LocalCluster, state: &str) -> usize {
    lines_of(c, "squeue", &["-h", "-t", state, "-o", "%i"]).len()
}

/// `promtool check metrics` on `body`; its findings when it fails.
fn promtool_check(promtool: &Path, body: &str) -> Result<(), String> {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    child.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    if o.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
    }
}

/// Percent-encodes a PromQL query for a URL.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// A Prometheus process, killed (by its pid) when dropped.
struct Prom {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prom {
    /// An instant query's result vector: (the `job` label, value).
    fn query(&self, q: &str) -> Result<Vec<(String, f64)>, String> {
        let a = try_http(self.addr, "GET", &format!("/api/v1/query?query={}", encode(q)), "")?;
        if a.status != 200 {
            return Err(format!("{q}: HTTP {} {}", a.status, a.body));
        }
        let v: serde_json::Value = serde_json::from_str(&a.body).map_err(|e| format!("{q}: {e}: {}", a.body))?;
        let rows = v["data"]["result"].as_array().ok_or_else(|| format!("{q}: {}", a.body))?;
        Ok(rows
            .iter()
            .map(|r| {
                let job = r["metric"]["job"].as_str().unwrap_or("").to_string();
                let val = r["value"][1].as_str().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN);
                (job, val)
            })
            .collect())
    }

    /// What Prometheus says of its targets, and the tail of its log (for failures).
    fn diag(&self) -> String {
        let t = try_http(self.addr, "GET", "/api/v1/targets", "").map_or_else(|e| e, |a| a.body);
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        format!("targets: {t}\nprometheus log (last lines first):\n{}", tail.join("\n"))
    }
}

/// Starts Prometheus on 127.0.0.1 with a scrape job per metrics path of `ctld`, every second.
fn start_prometheus(bin: &Path, dir: &Path, ctld: SocketAddr) -> Prom {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut conf = String::from("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n");
    for p in PATHS {
        let job = p.trim_start_matches("/metrics/");
        conf.push_str(&format!(
            "  - job_name: '{job}'\n    metrics_path: '{p}'\n    static_configs:\n      - targets: ['{ctld}']\n"
        ));
    }
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, conf).unwrap();
    let log = dir.join("prometheus.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("prometheus starts");
    Prom { child, addr: SocketAddr::from(([127, 0, 0, 1], port)), log }
}

#[test]
fn metrics_endpoints_agree_with_squeue_and_sinfo_and_prometheus_scrapes_them() {
    let (prometheus, promtool) = (tool("prometheus"), tool("promtool"));
    flotilla_compat_tests::build_binaries();
    let conf = tempfile::tempdir().unwrap();
    let (slurm_conf, topo) = flotilla_admin::dev::default_config(2, 4);
    std::fs::write(conf.path().join("slurm.conf"), format!("MetricsType=metrics/openmetrics\n{slurm_conf}")).unwrap();
    std::fs::write(conf.path().join("topology.conf"), topo).unwrap();
    let c = LocalCluster::start(Some(conf.path()));
    let ctld = c.ctld_addr();

    // One job runs (2 of gpu01's 4 GPUs, or gpu02's), one is held.
    let w = c.dir();
    for args in [&["--gres=gpu:2", "-o", "/dev/null", "--wrap", "sleep 600"][..], &["-H", "-o", "/dev/null", "--wrap", "true"][..]] {
        let o = c.run("sbatch", args, w);
        assert!(o.status.success(), "sbatch {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    wait_settled(&c.socket(), Duration::from_secs(30)).expect("cycles");
    wait_until("the first job to run", Duration::from_secs(60), || squeue_count(&c, "R") == 1, || {
        lines_of(&c, "squeue", &[]).join("\n")
    });

    // Health and indexes, as Slurm answers them; anything else is 404.
    for p in ["/livez", "/healthz", "/readyz"] {
        assert_eq!(http(ctld, "GET", p, "").status, 204, "{p}");
    }
    let root = http(ctld, "GET", "/", "");
    assert_eq!((root.status, root.body.starts_with("slurmctld index of endpoints:\n")), (200, true), "{root:?}");
    let index = http(ctld, "GET", "/metrics", "");
    assert!(PATHS.iter().all(|p| index.body.contains(&format!("'{p}'"))), "{index:?}");
    assert_eq!(http(ctld, "GET", "/metrics/nope", "").status, 404);
    assert_eq!(http(ctld, "POST", "/metrics/jobs", "Content-Length: 0\r\n").status, 404);

    // Every set: 200, Prometheus text (OpenMetrics when asked), valid for promtool.
    let mut bodies = std::collections::BTreeMap::new();
    for p in PATHS {
        let a = http(ctld, "GET", p, "");
        assert_eq!(a.status, 200, "{p}: {a:?}");
        assert_eq!(a.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"), "{p}");
        assert!(a.body.ends_with("\n# EOF\n"), "{p}: {}", a.body);
        if let Err(e) = promtool_check(&promtool, &a.body) {
            panic!("promtool check metrics on {p}:\n{e}\n{}", a.body);
        }
        let om = http(ctld, "GET", p, "Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n");
        assert_eq!(om.header("content-type"), Some("application/openmetrics-text; version=1.0.0; charset=utf-8"), "{p}");
        bodies.insert(p, a.body);
    }

    // The values agree with squeue and sinfo (nothing changes meanwhile: one job sleeps, one
    // is held).
    let jobs = &bodies["/metrics/jobs"];
    let (running, pending) = (squeue_count(&c, "R"), squeue_count(&c, "PD"));
    assert_eq!((running, pending), (1, 1));
    assert_eq!(sample(jobs, "slurm_jobs_running"), running as f64);
    assert_eq!(sample(jobs, "slurm_jobs_pending"), pending as f64);
    assert_eq!(sample(jobs, "slurm_jobs_hold"), 1.0);
    assert_eq!(sample(jobs, "slurm_jobs"), 2.0);
    assert_eq!(sample(jobs, "slurm_jobs_nodes_alloc"), 1.0);
    let nodes = &bodies["/metrics/nodes"];
    let states = lines_of(&c, "sinfo", &["-h", "-N", "-o", "%N %t"]);
    let count = |t: &str| states.iter().filter(|l| l.split_whitespace().nth(1) == Some(t)).count() as f64;
    assert_eq!(sample(nodes, "slurm_nodes"), states.len() as f64, "{states:?}");
    assert_eq!((sample(nodes, "slurm_nodes_mixed"), sample(nodes, "slurm_nodes_idle")), (count("mix"), count("idle")), "{states:?}");
    assert_eq!((count("mix"), count("idle")), (1.0, 1.0), "{states:?}");
    let parts = &bodies["/metrics/partitions"];
    assert_eq!(sample(parts, "slurm_partitions"), lines_of(&c, "sinfo", &["-h", "-o", "%P"]).len() as f64);
    assert_eq!(sample(parts, "slurm_partition_nodes{partition=\"batch\"}"), states.len() as f64);
    assert_eq!(sample(parts, "slurm_partition_jobs_running{partition=\"batch\"}"), running as f64);
    assert_eq!(sample(parts, "slurm_partition_jobs_pending{partition=\"batch\"}"), pending as f64);
    // One node has 2 GPUs free, the other 4: 4 fit on one node, 6 in the pod, and one node is
    // entirely free.
    assert_eq!(sample(parts, "flotilla_largest_placeable{partition=\"batch\",topology=\"node\"}"), 4.0);
    assert_eq!(sample(parts, "flotilla_free_nodes_full{partition=\"batch\"}"), 1.0);
    // No elastic job: nothing grown, and the figures if growth were taken back are today's
    // (sinfo --largest's GROWN and R_ columns).
    assert_eq!(sample(parts, "flotilla_elastic_reclaimable_gpus{partition=\"batch\"}"), 0.0);
    let largest = lines_of(&c, "sinfo", &["--largest", "-h"]);
    assert_eq!(largest.len(), 1, "{largest:?}");
    let cols: Vec<f64> = largest[0].split_whitespace().skip(1).map(|v| v.parse().unwrap()).collect();
    assert_eq!(cols[3], 0.0, "{largest:?}");
    for (i, topo) in ["node", "pod", "any"].iter().enumerate() {
        let now = sample(parts, &format!("flotilla_largest_placeable{{partition=\"batch\",topology=\"{topo}\"}}"));
        let back = sample(parts, &format!("flotilla_largest_placeable_if_reclaimed{{partition=\"batch\",topology=\"{topo}\"}}"));
        assert_eq!((now, back), (cols[i], cols[4 + i]), "{topo}: {largest:?}");
        assert_eq!(now, back, "{topo}");
    }
    let sched = &bodies["/metrics/scheduler"];
    let cycles = sample(sched, "slurm_schedule_cycle_cnt");
    assert!(cycles >= 1.0, "{sched}");
    assert_eq!(sample(sched, "flotilla_sched_cycle_seconds_count"), cycles, "one snapshot: the histogram counts the same cycles");
    // The running job started with 2 GPUs; the held one never started.
    assert_eq!(sample(sched, "flotilla_queue_wait_seconds_count{gang_gpus=\"2-8\"}"), 1.0);
    assert_eq!(sample(sched, "flotilla_queue_wait_seconds_count{gang_gpus=\"0\"}"), 0.0);
    let me = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap().trim().to_string();
    let ua = &bodies["/metrics/jobs-users-accts"];
    assert_eq!(sample(ua, &format!("slurm_user_jobs_running{{username=\"{me}\"}}")), running as f64);
    assert_eq!(sample(ua, &format!("slurm_user_jobs{{username=\"{me}\"}}")), 2.0);

    // A real Prometheus scrapes every path each second for a minute: each target is scraped
    // successfully 60 times, none failed, and its view of the job counts is squeue's.
    let tmp = tempfile::tempdir().unwrap();
    let prom = start_prometheus(&prometheus, tmp.path(), ctld);
    let scraped_a_minute = || {
        let scrapes = prom.query("count_over_time(up[10m])");
        let worst = prom.query("min_over_time(up[10m])");
        let (Ok(s), Ok(w)) = (&scrapes, &worst) else { return false };
        assert!(w.iter().all(|(_, v)| *v == 1.0), "a scrape failed: {w:?}\n{}", prom.diag());
        s.len() == PATHS.len() && s.iter().all(|(_, n)| *n >= 60.0)
    };
    let diag = || format!("{:?}\n{}", prom.query("count_over_time(up[10m])"), prom.diag());
    wait_until("Prometheus to scrape every path 60 times", Duration::from_secs(180), scraped_a_minute, diag);
    let got = prom.query("slurm_jobs_running").unwrap_or_else(|e| panic!("{e}\n{}", prom.diag()));
    assert_eq!(got, vec![("jobs".to_string(), running as f64)], "{}", prom.diag());
    let got = prom.query("slurm_jobs_pending").unwrap_or_else(|e| panic!("{e}\n{}", prom.diag()));
    assert_eq!(got, vec![("jobs".to_string(), squeue_count(&c, "PD") as f64)], "{}", prom.diag());
    let hist = prom.query("flotilla_sched_cycle_seconds_count").unwrap_or_else(|e| panic!("{e}"));
    assert!(hist.first().is_some_and(|(_, n)| *n >= cycles), "{hist:?}");
}
