//! The HTTP side of the controller's TCP port (`src/metrics.rs`) against the real binary:
//! proto peers and HTTP peers share the port; hostile HTTP peers (idle floods, oversized
//! heads, bodies, silence) cost little and keep nobody else out; the metrics answer empty
//! without `MetricsType`; when slurm.conf asks for a token, a JWT of an allowed user (root,
//! `SlurmUser`, `MetricsAuthUsers`) is served, another user's is 403, none or a bad one 401.
//!
//! Throughout a flood a local query must be answered within 1 s (as in `attacks_net.rs`); every
//! other wait fails when it times out.

mod common;

use common::*;
use flotilla_proto::client::{Client, Stream};
use flotilla_proto::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// An environment whose slurm.conf is `cluster(1)` changed by `f`.
fn env_with(f: impl FnOnce(&mut flotilla_core::config::ClusterConfig)) -> Env {
    let env = Env::new(1);
    let mut c = cluster(1);
    f(&mut c);
    std::fs::write(env.path("cluster.json"), serde_json::to_string(&c).unwrap()).unwrap();
    env
}

/// Sends `req` raw on a fresh connection and reads until the server closes it (at most 10 s):
/// the status code and the whole text, or `None` when nothing came back.
fn raw(addr: SocketAddr, req: &[u8]) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(req);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text.split(' ').nth(1)?.parse().ok()?;
    Some((code, text))
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    raw(addr, format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap_or_else(|| panic!("no answer to GET {path}"))
}

fn body(text: &str) -> &str {
    text.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// A job query over the Unix socket, answered within 1 s.
fn local_squeue(socket: &Path) -> Result<(), String> {
    let socket = socket.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = UnixStream::connect(&socket).map_err(|e| e.to_string()).and_then(|s| {
            match Client::call_once(Stream::Unix(s), Role::Command, None, Request::QueryJobs(JobQuery::default())) {
                Ok(Response::Jobs(_)) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        });
        let _ = tx.send(r);
    });
    rx.recv_timeout(Duration::from_secs(1)).map_err(|_| "local squeue: no answer within 1 s".to_string())?
}

/// How many of `conns` the server still holds open (a read would block, not see the end).
fn still_open(conns: &mut [TcpStream]) -> usize {
    let mut b = [0u8; 512];
    let mut n = 0;
    for c in conns.iter_mut() {
        c.set_nonblocking(true).unwrap();
        if matches!(c.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
            n += 1;
        }
        c.set_nonblocking(false).unwrap();
    }
    n
}

#[test]
fn http_and_proto_share_the_port_and_metrics_are_off_by_default() {
    let env = Env::new(1);
    let ctl = Ctl::start(&env, 0, &[]);
    // Health: always served, as in Slurm.
    assert_eq!(get(ctl.addr, "/livez").0, 204);
    assert_eq!(get(ctl.addr, "/healthz").0, 204);
    assert_eq!(get(ctl.addr, "/readyz").0, 204, "the owner task answers");
    // Without MetricsType: Slurm's empty answer.
    let (code, text) = get(ctl.addr, "/metrics/jobs");
    assert_eq!((code, body(&text)), (200, ""), "{text}");
    let (code, text) = get(ctl.addr, "/nope");
    assert_eq!(code, 404);
    assert_eq!(body(&text), "slurmctld HTTP server request for 'GET /nope':\nFailed: Invalid or unknown URL path\n");
    // The same port still speaks proto.
    assert_eq!(call(&env, ctl.addr, 2001, Request::Ping).unwrap(), Response::Pong);
}

#[test]
fn metrics_are_served_with_metrics_type_and_refused_when_a_token_is_needed() {
    let env = env_with(|c| c.metrics_type = Some("metrics/openmetrics".into()));
    let ctl = Ctl::start(&env, 0, &[]);
    call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(job(2001, 60_000, 0)))).unwrap();
    let (code, text) = get(ctl.addr, "/metrics/jobs");
    assert_eq!(code, 200, "{text}");
    assert!(body(&text).starts_with("# HELP slurm_jobs "), "{text}");
    assert!(body(&text).contains("\nslurm_jobs 1\n"), "{text}");
    drop(ctl);

    // PrivateData without MetricsParameters=ignore_private_data (Slurm 25.11: 401 always).
    let env = env_with(|c| {
        c.metrics_type = Some("metrics/openmetrics".into());
        c.private_data = vec!["jobs".into()];
    });
    let ctl = Ctl::start(&env, 0, &[]);
    for p in ["/metrics/jobs", "/metrics/scheduler", "/metrics"] {
        assert_eq!(get(ctl.addr, p).0, 401, "{p}");
    }
    assert_eq!(get(ctl.addr, "/livez").0, 204, "health stays open");
    drop(ctl);
    let env = env_with(|c| {
        c.metrics_type = Some("metrics/openmetrics".into());
        c.private_data = vec!["jobs".into()];
        c.metrics_parameters = vec!["ignore_private_data".into()];
    });
    let ctl = Ctl::start(&env, 0, &[]);
    assert_eq!(get(ctl.addr, "/metrics/jobs").0, 200);
}

/// `MetricsAuthUsers=nobody` with `auth/jwt`: tokens from the controller's key decide (Slurm
/// 26.05's `_check_metrics_authorized`); `nobody` and `daemon` are in every Debian passwd.
#[test]
fn metrics_tokens_are_verified_with_the_auth_jwt_key() {
    use flotilla_proto::jwt::JwtKey;
    let env = Env::new(1);
    let key_path = env.path("jwt.key");
    let key = JwtKey::generate(&key_path).unwrap();
    let mut c = cluster(1);
    c.metrics_type = Some("metrics/openmetrics".into());
    c.metrics_auth_users = Some(vec!["nobody".into()]);
    c.auth_alt_types = vec!["auth/jwt".into()];
    c.auth_alt_parameters = format!("jwt_key={}", key_path.display());
    std::fs::write(env.path("cluster.json"), serde_json::to_string(&c).unwrap()).unwrap();
    let ctl = Ctl::start(&env, 0, &[]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let with = |token: &str, bearer: bool| {
        let h = if bearer { format!("Authorization: Bearer {token}") } else { format!("X-SLURM-USER-TOKEN: {token}") };
        let req = format!("GET /metrics/jobs HTTP/1.1\r\nHost: x\r\n{h}\r\nConnection: close\r\n\r\n");
        raw(ctl.addr, req.as_bytes()).expect("an answer").0
    };
    assert_eq!(get(ctl.addr, "/metrics/jobs").0, 401, "no token");
    assert_eq!(with(&key.issue("nobody", now, 60), false), 200, "a listed user");
    assert_eq!(with(&key.issue("root", now, 60), true), 200, "root, as a bearer token");
    assert_eq!(with(&key.issue("daemon", now, 60), false), 403, "a user not listed");
    assert_eq!(with(&key.issue("nobody", now - 100, 10), false), 401, "expired");
    let other = JwtKey::from_bytes(&[3u8; 32]).unwrap();
    assert_eq!(with(&other.issue("root", now, 60), false), 401, "another key");
    assert_eq!(get(ctl.addr, "/livez").0, 204, "health needs no token");
}

/// Oversized heads, bodies, other methods and silence: each answered or closed, quickly.
#[test]
fn hostile_http_requests_are_refused() {
    let env = env_with(|c| c.metrics_type = Some("metrics/openmetrics".into()));
    let ctl = Ctl::start(&env, 0, &[]);
    // A 64 KiB header: refused (431) or the connection closed, never read whole.
    let big = format!("GET /metrics/jobs HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n", "a".repeat(64 << 10));
    if let Some((code, _)) = raw(ctl.addr, big.as_bytes()) {
        assert_eq!(code, 431);
    }
    // A body: 400, the connection closed.
    let (code, _) = raw(ctl.addr, b"GET /metrics/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello").unwrap();
    assert_eq!(code, 400);
    // Other methods: 404, as Slurm's router binds GET only.
    let (code, _) = raw(ctl.addr, b"DELETE /metrics/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    assert_eq!(code, 404);
    // Half a request head, then silence: closed once the head's deadline passes.
    let mut s = TcpStream::connect(ctl.addr).unwrap();
    s.write_all(b"GET /metrics/jobs HTTP/1.1\r\nHost:").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let t0 = Instant::now();
    let mut b = Vec::new();
    let _ = s.read_to_end(&mut b);
    assert!(t0.elapsed() < Duration::from_secs(12), "a silent HTTP peer was held {:?}", t0.elapsed());
    // Everyone else is still served.
    assert_eq!(get(ctl.addr, "/livez").0, 204);
    assert_eq!(call(&env, ctl.addr, 2001, Request::Ping).unwrap(), Response::Pong);
}

/// 1,000 HTTP connections that send half a request head and wait: a local squeue is answered
/// within 1 s throughout, the controller holds at most its HTTP pool (64) of them, and both
/// a new HTTP request and a proto request over TCP are answered.
#[test]
fn idle_http_flood_keeps_squeue_proto_and_new_http_peers() {
    let env = env_with(|c| c.metrics_type = Some("metrics/openmetrics".into()));
    let ctl = Ctl::start(&env, 0, &[]);
    let mut flood = Vec::new();
    for _ in 0..10 {
        for _ in 0..100 {
            let mut s = TcpStream::connect(ctl.addr).unwrap();
            s.write_all(b"GET /metrics/jobs HTTP/1.1\r\n").unwrap();
            flood.push(s);
        }
        local_squeue(&ctl.socket).unwrap_or_else(|e| panic!("after {} idle HTTP connections: {e}", flood.len()));
    }
    assert_eq!(get(ctl.addr, "/livez").0, 204);
    assert_eq!(call(&env, ctl.addr, 2001, Request::Ping).unwrap(), Response::Pong);
    // The controller sees each connection's first bytes asynchronously: count once it has
    // sorted them all (the pool never holds more than its cap, so the count only falls).
    let t0 = Instant::now();
    let held = loop {
        let held = still_open(&mut flood);
        if held <= 64 || t0.elapsed() > Duration::from_secs(10) {
            break held;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("FIGURE idle HTTP flood: {} connections opened, {held} still held", flood.len());
    assert!(held <= 64, "the controller holds {held} idle HTTP connections");
}
