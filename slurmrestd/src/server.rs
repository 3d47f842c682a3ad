//! Listening: TCP (`host:port`) and Unix sockets (`unix:/path`), as slurmrestd's arguments
//! name them, each connection's peer recorded for authentication ([`crate::auth::Peer`]).
//!
//! Every peer is unauthenticated until its request's headers are read, so connections are
//! bounded before anything else ([`Limits`]): a cap over all clients and one per client (a
//! TCP peer's address, a Unix peer's uid) — HTTP/1.1 answers one request at a time per
//! connection, so the per-client cap is also the client's concurrency — with a newcomer over
//! a cap closed at once; the headers of each request must arrive within
//! [`Limits::header_timeout`] of the connection's start or of the previous answer (a slow or
//! idle peer is closed); headers are at most [`MAX_HEADER_BYTES`]; bodies are capped by the
//! router ([`crate::app::MAX_BODY_BYTES`]). Behind this, the controller guards itself from
//! slurmrestd's calls exactly as from the commands' (its own pools and deadlines).

use crate::auth::Peer;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, UnixListener};
use tower::ServiceExt as _;

/// The largest request head (request line and headers) read (bytes); a JWT is at most
/// [`crate::auth::MAX_TOKEN_BYTES`].
pub const MAX_HEADER_BYTES: usize = 64 << 10;

/// Connection caps and deadlines (Slurm's slurmrestd has no such options; these are ours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once over all clients.
    pub connections: usize,
    /// Connections open at once per client (TCP: source address; Unix: uid).
    pub per_client: usize,
    /// The most a request's headers may take to arrive, from the connection's start or the
    /// previous answer (Slurm's `MessageTimeout` default, 10 s).
    pub header_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { connections: 4096, per_client: 1024, header_timeout: Duration::from_secs(10) }
    }
}

/// Who a connection counts against in [`Limits::per_client`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ClientKey {
    Ip(std::net::IpAddr),
    Uid(u32),
    Unknown,
}

/// Open connections, in all and per client.
#[derive(Debug, Default)]
struct Open {
    total: usize,
    per: HashMap<ClientKey, usize>,
}

/// A connection's place in [`Open`], given back when dropped.
struct Admitted {
    open: Arc<Mutex<Open>>,
    key: ClientKey,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut o = self.open.lock().unwrap_or_else(|e| e.into_inner());
        o.total -= 1;
        if let Some(n) = o.per.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                o.per.remove(&self.key);
            }
        }
    }
}

/// A place for a connection of `key`, or `None` over a cap.
fn admit(open: &Arc<Mutex<Open>>, key: ClientKey, limits: Limits) -> Option<Admitted> {
    let mut o = open.lock().unwrap_or_else(|e| e.into_inner());
    let mine = o.per.get(&key).copied().unwrap_or(0);
    if o.total >= limits.connections || mine >= limits.per_client {
        return None;
    }
    o.total += 1;
    *o.per.entry(key.clone()).or_insert(0) += 1;
    Some(Admitted { open: open.clone(), key })
}

/// One listening address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// `host:port` (`:port` for every address).
    Tcp(String),
    /// `unix:/path`.
    Unix(PathBuf),
}

impl Listen {
    /// Parses one of slurmrestd's listen arguments.
    pub fn parse(s: &str) -> Result<Listen, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err(format!("Unable to parse {s}"));
            }
            return Ok(Listen::Unix(PathBuf::from(p)));
        }
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("Unable to parse {s}"))?;
        port.parse::<u16>()
            .map_err(|_| format!("Unable to parse {s}"))?;
        let host = if host.is_empty() {
            "0.0.0.0"
        } else {
            host.trim_start_matches('[').trim_end_matches(']')
        };
        Ok(Listen::Tcp(format!("{host}:{port}")))
    }
}

/// A bound listener.
#[derive(Debug)]
pub enum Bound {
    /// TCP.
    Tcp(TcpListener),
    /// Unix (the socket file is removed first if it exists and is a socket).
    Unix(UnixListener),
}

/// Binds `l`. A stale socket at a Unix path is removed first (never a file of another kind;
/// neither the check nor the unlink follows a symlink). The socket's mode is the umask's: no
/// path is chmod-ed, and `rest_auth/local` serves only slurmrestd's own uid anyway.
pub async fn bind(l: &Listen) -> std::io::Result<Bound> {
    match l {
        Listen::Tcp(a) => Ok(Bound::Tcp(TcpListener::bind(a.as_str()).await?)),
        Listen::Unix(p) => {
            use std::os::unix::fs::FileTypeExt;
            if let Ok(m) = std::fs::symlink_metadata(p) {
                if m.file_type().is_socket() {
                    std::fs::remove_file(p)?;
                }
            }
            Ok(Bound::Unix(UnixListener::bind(p)?))
        }
    }
}

/// Serves `app` on `b` within `limits` until the process ends. An accept that fails (out of
/// file descriptors) is logged and retried after 100 ms; it never ends the server.
pub async fn serve(b: Bound, app: Router, limits: Limits) -> std::io::Result<()> {
    let open = Arc::new(Mutex::new(Open::default()));
    loop {
        let accepted = match &b {
            Bound::Tcp(l) => l.accept().await.map(|(s, a)| {
                let _ = s.set_nodelay(true);
                let peer = Peer { source: format!("[{}]:{}", a.ip(), a.port()), unix_cred: None };
                (Conn::Tcp(s), peer, ClientKey::Ip(a.ip()))
            }),
            Bound::Unix(l) => l.accept().await.map(|(s, _)| {
                let cred = s.peer_cred().ok().map(|c| (c.uid(), c.gid()));
                let source = s.local_addr().ok().and_then(|a| a.as_pathname().map(|p| format!("unix:{}", p.display())));
                let key = cred.map_or(ClientKey::Unknown, |(uid, _)| ClientKey::Uid(uid));
                (Conn::Unix(s), Peer { source: source.unwrap_or_else(|| "unix".into()), unix_cred: cred }, key)
            }),
        };
        let (conn, peer, key) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!("accept failed: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(place) = admit(&open, key, limits) else {
            tracing::debug!(peer = %peer.source, "connection refused: too many connections");
            continue;
        };
        let svc = app.clone().map_request(move |mut r: axum::http::Request<hyper::body::Incoming>| {
            r.extensions_mut().insert(ConnectInfo(peer.clone()));
            r
        });
        tokio::spawn(async move {
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout).max_buf_size(MAX_HEADER_BYTES);
            let svc = TowerToHyperService::new(svc);
            let _ = match conn {
                Conn::Tcp(s) => http.serve_connection(TokioIo::new(s), svc).await,
                Conn::Unix(s) => http.serve_connection(TokioIo::new(s), svc).await,
            };
            drop(place);
        });
    }
}

/// An accepted connection.
enum Conn {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_capped_in_all_and_per_client() {
        let open = Arc::new(Mutex::new(Open::default()));
        let limits = Limits { connections: 3, per_client: 2, ..Limits::default() };
        let a = ClientKey::Uid(1);
        let b = ClientKey::Ip("10.0.0.1".parse().unwrap());
        let a1 = admit(&open, a.clone(), limits).unwrap();
        let _a2 = admit(&open, a.clone(), limits).unwrap();
        assert!(admit(&open, a.clone(), limits).is_none(), "a's third");
        let b1 = admit(&open, b.clone(), limits).unwrap();
        assert!(admit(&open, ClientKey::Unknown, limits).is_none(), "the total");
        drop(b1);
        assert!(admit(&open, ClientKey::Unknown, limits).is_some(), "room again");
        drop(a1);
        assert_eq!(open.lock().unwrap().per.get(&a), Some(&1));
    }

    #[test]
    fn listen_arguments_parse_as_slurmrestds() {
        assert_eq!(
            Listen::parse(":6820"),
            Ok(Listen::Tcp("0.0.0.0:6820".into()))
        );
        assert_eq!(
            Listen::parse("127.0.0.1:6820"),
            Ok(Listen::Tcp("127.0.0.1:6820".into()))
        );
        assert_eq!(
            Listen::parse("unix:/run/r.sock"),
            Ok(Listen::Unix("/run/r.sock".into()))
        );
        assert!(Listen::parse("localhost").is_err());
        assert!(Listen::parse("unix:").is_err());
    }
}
