//! Listening: TCP (`host:port`) and Unix sockets (`unix:/path`), as slurmrestd's arguments
//! name them, each connection's peer recorded for authentication ([`crate::auth::Peer`]).

use crate::auth::Peer;
use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use axum::Router;
use std::path::PathBuf;
use tokio::net::{TcpListener, UnixListener};

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

impl Connected<IncomingStream<'_, TcpListener>> for Peer {
    fn connect_info(s: IncomingStream<'_, TcpListener>) -> Peer {
        let a = s.remote_addr();
        Peer {
            source: format!("[{}]:{}", a.ip(), a.port()),
            unix_cred: None,
        }
    }
}

impl Connected<IncomingStream<'_, UnixListener>> for Peer {
    fn connect_info(s: IncomingStream<'_, UnixListener>) -> Peer {
        let cred = s.io().peer_cred().ok().map(|c| (c.uid(), c.gid()));
        let source = s
            .io()
            .local_addr()
            .ok()
            .and_then(|a| a.as_pathname().map(|p| format!("unix:{}", p.display())));
        Peer {
            source: source.unwrap_or_else(|| "unix".into()),
            unix_cred: cred,
        }
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

/// Serves `app` on `b` until the process ends.
pub async fn serve(b: Bound, app: Router) -> std::io::Result<()> {
    match b {
        Bound::Tcp(l) => axum::serve(l, app.into_make_service_with_connect_info::<Peer>()).await,
        Bound::Unix(l) => axum::serve(l, app.into_make_service_with_connect_info::<Peer>()).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
