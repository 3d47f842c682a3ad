//! slurmrestd end to end: started beside a local cluster, answering on its Unix socket
//! (`rest_auth/local` for the test's own uid) and refusing what it cannot authenticate.

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::restd::{Restd, Via};
use flotilla_compat_tests::wait::wait_until;

#[test]
fn ping_answers_every_version_and_unauthenticated_tcp_is_refused() {
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let r = Restd::start(&c, &[], &[]);
    for v in ["v0.0.38", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44"] {
        let a = r.get(&format!("/slurm/{v}/ping/"));
        assert_eq!(a.status, 200, "{v}: {}", a.body);
        let j = a.json();
        assert_eq!(j["errors"], serde_json::json!([]), "{v}");
        let up = if v == "v0.0.38" {
            &j["pings"][0]["ping"]
        } else {
            &j["pings"][0]["pinged"]
        };
        assert_eq!(up, "UP", "{v}: {j}");
    }
    let refused = r.call(Via::Tcp, "GET", "/slurm/v0.0.42/ping", &[], None);
    assert_eq!(refused.status, 401, "{}", refused.body);
    assert_eq!(refused.json()["errors"][0]["error_number"], 6000);
    // Health probes need no authentication, even on TCP.
    for p in ["/livez", "/healthz", "/readyz"] {
        assert_eq!(r.call(Via::Tcp, "GET", p, &[], None).status, 204, "{p}");
    }
    let spec = r.get("/openapi/v3").json();
    assert!(
        spec["paths"]["/slurm/v0.0.38/ping/"]["get"].is_object(),
        "{spec}"
    );
    // Without its controller slurmrestd is alive but not ready.
    let ctld = nix::unistd::Pid::from_raw(c.pids()[0]);
    nix::sys::signal::kill(ctld, nix::sys::signal::Signal::SIGKILL).expect("kill slurmctld");
    // Dead (a zombie until reaped, its sockets closed) before the probe.
    let stat = || std::fs::read_to_string(format!("/proc/{ctld}/stat")).unwrap_or_default();
    wait_until("slurmctld to die", std::time::Duration::from_secs(10), || stat().is_empty() || stat().contains(") Z "), stat);
    assert_eq!(r.get("/readyz").status, 503);
    assert_eq!(r.get("/livez").status, 204);
}

/// Connections are capped (`--max-connections 64` here, all from one uid: the 65th is closed
/// unanswered, and a place freed is taken again; the per-client cap is the same code, unit
/// tested), and a peer that sends no complete request head within the header deadline
/// (10 s) is closed, idle or half-way through its headers.
#[test]
fn connections_are_capped_per_client_and_slow_peers_are_closed() {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::time::Duration;
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    let r = Restd::start(&c, &["--max-connections", "64"], &[]);
    let ping = b"GET /slurm/v0.0.42/ping HTTP/1.1\r\nHost: x\r\n\r\n";
    // One answered request on a kept-alive connection: the answer's head and body.
    let answered = |s: &mut UnixStream| -> bool {
        if s.write_all(ping).is_err() {
            return false;
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                return false;
            }
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len: usize = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                    .expect("content-length");
                if body.len() >= len {
                    return head.starts_with("HTTP/1.1 200");
                }
            }
        }
        false
    };
    let connect = || {
        let s = UnixStream::connect(&r.unix).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    };
    let mut held: Vec<UnixStream> = (0..64).map(|_| connect()).collect();
    for (i, s) in held.iter_mut().enumerate() {
        assert!(answered(s), "connection {i} within the cap");
    }
    let mut over = connect();
    assert!(!answered(&mut over), "the 65th connection is closed unanswered");
    drop(held.pop());
    wait_until("the freed place to be given again", Duration::from_secs(10), || answered(&mut connect()), || r.log_text());
    drop(held);

    // Over TCP (another client, so none of the places above matter): an idle peer and one
    // that sent half a request head are both closed by the deadline (the read ends: EOF or
    // reset), while a complete request on a third connection is answered (401: no token).
    let tcp = || {
        let s = std::net::TcpStream::connect(r.tcp).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    };
    // The places the Unix connections held come back as the server sees them close.
    let whole = || {
        let mut s = tcp();
        let _ = s.write_all(b"GET /slurm/v0.0.42/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
    };
    wait_until("the places to be given back", Duration::from_secs(10), || whole().starts_with("HTTP/1.1 401"), || r.log_text());
    let mut idle = tcp();
    let mut half = tcp();
    half.write_all(b"GET /slurm/v0.0.42/ping HTTP/1.1\r\nHost: x\r\n").unwrap();
    let answer = whole();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    for (what, s) in [("idle", &mut idle), ("half a head", &mut half)] {
        let mut rest = Vec::new();
        match s.read_to_end(&mut rest) {
            Ok(_) => assert!(!String::from_utf8_lossy(&rest).contains("200 OK"), "{what}: answered"),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("{what}: not closed within 30 s ({e})"),
        }
    }
}
