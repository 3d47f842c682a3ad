//! The way to the controller: an async client of `proto` with a pool of open connections,
//! so that slurmrestd stays stateless (every answer comes from the controller) and a burst of
//! HTTP requests does not open a connection per request.
//!
//! Two kinds of caller ([`Caller`]): a JWT (`X-SLURM-USER-TOKEN`), forwarded as
//! [`Frame::TokenRequest`] for the controller to verify — slurmrestd never decides who a
//! token's user is — and `rest_auth/local`, a Unix-socket peer with slurmrestd's own uid, for
//! which slurmrestd asks as itself: over the controller's Unix socket (the kernel names the
//! uid) or, where that socket is not on this host, with a credential from the local
//! credential daemon (`sackd`, `FLOTILLA_AUTH_SOCKET`).

use flotilla_proto::errno::{SLURM_COMMUNICATIONS_CONNECTION_ERROR, SLURM_UNEXPECTED_MSG_ERROR};
use flotilla_proto::{
    decode_frame_max, encode_frame, Frame, Hello, Request, Response, Role, SlurmError, TokenAuth,
};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Largest answer read from the controller (bytes): job lists of 100,000 jobs fit.
pub const MAX_ANSWER: usize = 256 << 20;
/// How long one call may take, connect included, before it fails with
/// `SLURM_COMMUNICATIONS_CONNECTION_ERROR`.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// A pooled connection idle this long is not reused (below the controller's 60 s idle
/// timeout, after which it closes the connection).
pub const MAX_IDLE_AGE: Duration = Duration::from_secs(45);
/// Most idle connections kept open per kind.
pub const MAX_IDLE: usize = 64;

/// Who an HTTP request is from, as the controller will be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// `rest_auth/local`: slurmrestd's own user.
    Local,
    /// `rest_auth/jwt`: the token and the user name sent with it.
    Token(TokenAuth),
}

/// Where the controller listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtlTarget {
    /// `StateSaveLocation/slurmctld.sock`, when it exists on this host.
    pub unix: Option<PathBuf>,
    /// `ControlAddr:SlurmctldPort`.
    pub tcp: String,
    /// The credential daemon's socket, for local callers over TCP.
    pub auth_socket: PathBuf,
}

enum Io {
    Unix(tokio::net::UnixStream),
    Tcp(tokio::net::TcpStream),
}

struct Conn {
    io: Io,
    next_id: u64,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(target: &CtlTarget, unix: bool) -> std::io::Result<Conn> {
        let io = match (&target.unix, unix) {
            (Some(p), true) => Io::Unix(tokio::net::UnixStream::connect(p).await?),
            _ => {
                let s = tokio::net::TcpStream::connect(target.tcp.as_str()).await?;
                let _ = s.set_nodelay(true);
                Io::Tcp(s)
            }
        };
        let mut c = Conn {
            io,
            next_id: 1,
            buf: Vec::new(),
        };
        c.write(&Frame::Hello(Hello::current(Role::Command)))
            .await?;
        match c.read().await? {
            Frame::HelloOk { .. } => Ok(c),
            _ => Err(std::io::Error::other("controller refused the handshake")),
        }
    }

    async fn write(&mut self, f: &Frame) -> std::io::Result<()> {
        let bytes = encode_frame(f).map_err(std::io::Error::other)?;
        match &mut self.io {
            Io::Unix(s) => s.write_all(&bytes).await,
            Io::Tcp(s) => s.write_all(&bytes).await,
        }
    }

    async fn read(&mut self) -> std::io::Result<Frame> {
        loop {
            if let Some((f, used)) =
                decode_frame_max(&self.buf, MAX_ANSWER).map_err(std::io::Error::other)?
            {
                self.buf.drain(..used);
                return Ok(f);
            }
            let mut chunk = [0u8; 64 << 10];
            let n = match &mut self.io {
                Io::Unix(s) => s.read(&mut chunk).await?,
                Io::Tcp(s) => s.read(&mut chunk).await?,
            };
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    async fn call(&mut self, frame: impl FnOnce(u64) -> Frame) -> std::io::Result<Response> {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&frame(id)).await?;
        loop {
            match self.read().await? {
                Frame::Response { id: rid, body } if rid == id || rid == 0 => return Ok(body),
                Frame::Response { .. } => continue,
                _ => {
                    return Err(std::io::Error::other(
                        "unexpected frame from the controller",
                    ))
                }
            }
        }
    }
}

/// Controller connections in use at once; more calls wait for one (within the call
/// deadline). Below the controller's pool for one non-admin uid on its socket (64): slurmrestd
/// runs as its own unprivileged user, and a connection refused there is a failed call, while
/// a wait here is only a later one (the owner task handles one request at a time anyway).
pub const MAX_IN_USE: usize = 48;

/// The pooled client. Cheap to share (`Arc`).
pub struct CtlClient {
    target: CtlTarget,
    /// Idle connections: (over the Unix socket?, connection, idle since).
    idle: Mutex<Vec<(bool, Conn, std::time::Instant)>>,
    /// Permits for connections in use ([`MAX_IN_USE`]).
    in_use: tokio::sync::Semaphore,
}

impl std::fmt::Debug for CtlClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CtlClient")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

fn unreachable_ctl() -> SlurmError {
    SlurmError::new(SLURM_COMMUNICATIONS_CONNECTION_ERROR)
}

impl CtlClient {
    /// A client of the controller at `target`.
    pub fn new(target: CtlTarget) -> CtlClient {
        CtlClient {
            target,
            idle: Mutex::new(Vec::new()),
            in_use: tokio::sync::Semaphore::new(MAX_IN_USE),
        }
    }

    /// Where it goes.
    pub fn target(&self) -> &CtlTarget {
        &self.target
    }

    fn take(&self, unix: bool) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        // The controller closes a command connection idle for its IDLE_TIMEOUT (60 s): one
        // idle for MAX_IDLE_AGE is dropped rather than tried.
        idle.retain(|(_, _, since)| since.elapsed() < MAX_IDLE_AGE);
        let i = idle.iter().rposition(|(u, _, _)| *u == unix)?;
        Some(idle.swap_remove(i).1)
    }

    fn give_back(&self, unix: bool, c: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.iter().filter(|(u, _, _)| *u == unix).count() < MAX_IDLE {
            idle.push((unix, c, std::time::Instant::now()));
        }
    }

    /// Sends `req` for `caller` and returns the controller's answer; `Response::Error`
    /// becomes `Err`. A connection that fails is dropped and the call tried once more on a
    /// new one (a pooled connection the controller closed while idle); an unreachable
    /// controller is `SLURM_COMMUNICATIONS_CONNECTION_ERROR`.
    pub async fn call(&self, caller: &Caller, req: Request) -> Result<Response, SlurmError> {
        let r = tokio::time::timeout(CALL_TIMEOUT, self.call_inner(caller, req)).await;
        match r {
            Ok(Ok(Response::Error(e))) => Err(e),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(unreachable_ctl()),
        }
    }

    async fn call_inner(&self, caller: &Caller, req: Request) -> Result<Response, SlurmError> {
        let unix = self.target.unix.as_ref().is_some_and(|p| p.exists());
        let cred = match (caller, unix) {
            (Caller::Local, false) => {
                let sock = self.target.auth_socket.clone();
                let c = tokio::task::spawn_blocking(move || {
                    flotilla_proto::client::fetch_credential(&sock)
                })
                .await
                .map_err(|_| unreachable_ctl())?
                .map_err(|_| unreachable_ctl())?;
                Some(c)
            }
            _ => None,
        };
        let _permit = self.in_use.acquire().await.map_err(|_| unreachable_ctl())?;
        for attempt in 0..2 {
            // The second try is always on a new connection: the other pooled ones may be as
            // stale as the first (a controller restart closes them all).
            let pooled = if attempt == 0 { self.take(unix) } else { None };
            let fresh = pooled.is_none();
            let mut conn = match pooled {
                Some(c) => c,
                None => Conn::open(&self.target, unix)
                    .await
                    .map_err(|_| unreachable_ctl())?,
            };
            let req = req.clone();
            let r = match caller {
                Caller::Local => {
                    let auth = cred.clone();
                    conn.call(|id| Frame::Request {
                        id,
                        auth,
                        body: req,
                    })
                    .await
                }
                Caller::Token(t) => {
                    let auth = t.clone();
                    conn.call(|id| Frame::TokenRequest {
                        id,
                        auth,
                        body: req,
                    })
                    .await
                }
            };
            match r {
                Ok(resp) => {
                    self.give_back(unix, conn);
                    return Ok(resp);
                }
                Err(_) if !fresh && attempt == 0 => {
                    self.idle.lock().unwrap_or_else(|e| e.into_inner()).retain(|(u, _, _)| *u != unix);
                    continue;
                }
                Err(_) => return Err(unreachable_ctl()),
            }
        }
        Err(SlurmError::new(SLURM_UNEXPECTED_MSG_ERROR))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A controller stand-in on a Unix socket: the hello, then `Pong` to every request, until
    /// `close` fires (as the controller's idle timeout or a restart closes every connection).
    async fn stand_in(path: PathBuf, close: Arc<tokio::sync::Notify>, open: Arc<AtomicUsize>) {
        let l = tokio::net::UnixListener::bind(&path).unwrap();
        loop {
            let (mut s, _) = l.accept().await.unwrap();
            let (close, open) = (close.clone(), open.clone());
            open.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    tokio::select! {
                        n = s.read(&mut chunk) => match n {
                            Ok(0) | Err(_) => break,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        },
                        _ = close.notified() => break,
                    }
                    while let Ok(Some((f, used))) = decode_frame_max(&buf, 1 << 20) {
                        buf.drain(..used);
                        let answer = match f {
                            Frame::Hello(_) => Frame::HelloOk { version: flotilla_proto::frame::PROTOCOL_VERSION_MAX },
                            Frame::Request { id, .. } | Frame::TokenRequest { id, .. } => Frame::Response { id, body: Response::Pong },
                            _ => continue,
                        };
                        s.write_all(&encode_frame(&answer).unwrap()).await.unwrap();
                    }
                }
                open.fetch_sub(1, Ordering::SeqCst);
            });
        }
    }

    /// Every pooled connection closed by the controller (a restart): the next call still
    /// succeeds, on a new connection, however many stale ones the pool held.
    #[tokio::test]
    async fn stale_pooled_connections_do_not_fail_a_call() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctld.sock");
        let (close, open) = (Arc::new(tokio::sync::Notify::new()), Arc::new(AtomicUsize::new(0)));
        tokio::spawn(stand_in(path.clone(), close.clone(), open.clone()));
        while !path.exists() {
            tokio::task::yield_now().await;
        }
        let c = Arc::new(CtlClient::new(CtlTarget { unix: Some(path), tcp: "127.0.0.1:1".into(), auth_socket: "/nonexistent".into() }));
        // Four calls at once leave four idle connections in the pool.
        let calls: Vec<_> = (0..4).map(|_| { let c = c.clone(); tokio::spawn(async move { c.call(&Caller::Local, Request::Ping).await }) }).collect();
        for t in calls {
            assert_eq!(t.await.unwrap(), Ok(Response::Pong));
        }
        assert!(open.load(Ordering::SeqCst) >= 2, "several pooled connections");
        close.notify_waiters();
        while open.load(Ordering::SeqCst) > 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(c.call(&Caller::Local, Request::Ping).await, Ok(Response::Pong));
        assert_eq!(c.call(&Caller::Local, Request::Ping).await, Ok(Response::Pong));
    }
}
