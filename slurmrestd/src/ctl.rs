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
//!
//! Several controllers (slurm.conf's `SlurmctldHost=` lines): a call follows the leader by
//! the commands' rule ([`flotilla_proto::client::LeaderSearch`]): one that cannot be reached
//! or answers `ESLURM_IN_STANDBY_MODE` passes the call to the next, rounds are tried again
//! through a takeover; the next call starts at the controller that answered last.

use flotilla_proto::client::{LeaderSearch, Step};
use flotilla_proto::errno::{ESLURM_IN_STANDBY_MODE, SLURM_COMMUNICATIONS_CONNECTION_ERROR, SLURM_UNEXPECTED_MSG_ERROR};
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

/// Where the controllers listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtlTarget {
    /// `StateSaveLocation/slurmctld.sock`, when it exists on this host: the first
    /// controller's, as the commands take it.
    pub unix: Option<PathBuf>,
    /// The controllers in slurm.conf's order (`SlurmctldHost=` lines), each as (host name,
    /// `address:SlurmctldPort`); at least one.
    pub tcp: Vec<(String, String)>,
    /// The credential daemon's socket, for local callers over TCP.
    pub auth_socket: PathBuf,
    /// `SlurmctldTimeout`: how long a call looks for a leader ([`LeaderSearch`]).
    pub slurmctld_timeout: Duration,
}

impl CtlTarget {
    /// One controller at `tcp` (`address:port`), and the Unix socket `unix`.
    pub fn single(unix: Option<PathBuf>, tcp: &str, auth_socket: PathBuf) -> CtlTarget {
        let host = tcp.rsplit_once(':').map_or(tcp, |(h, _)| h).to_string();
        CtlTarget { unix, tcp: vec![(host, tcp.to_string())], auth_socket, slurmctld_timeout: Duration::from_secs(6) }
    }
}

/// Which connection: controller `i` of [`CtlTarget::tcp`], and whether over the Unix socket.
type Via = (usize, bool);

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
    async fn open(target: &CtlTarget, (i, unix): Via) -> std::io::Result<Conn> {
        let io = match (&target.unix, unix) {
            (Some(p), true) => Io::Unix(tokio::net::UnixStream::connect(p).await?),
            _ => {
                let addr = target.tcp.get(i).map_or("", |(_, a)| a.as_str());
                let s = tokio::net::TcpStream::connect(addr).await?;
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
    /// Idle connections: (to which controller, how, connection, idle since).
    idle: Mutex<Vec<(Via, Conn, std::time::Instant)>>,
    /// Permits for connections in use ([`MAX_IN_USE`]).
    in_use: tokio::sync::Semaphore,
    /// The controller that answered last (the leader as far as this client knows): the next
    /// call starts there.
    leader: std::sync::atomic::AtomicUsize,
}

/// What one try of a call at one controller came to.
enum Tried {
    /// It could not be reached: the call was not sent.
    NotReached,
    /// Its answer, or the failure after the call was sent.
    Answered(Result<Response, SlurmError>),
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
            leader: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Where it goes.
    pub fn target(&self) -> &CtlTarget {
        &self.target
    }

    fn take(&self, via: Via) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        // The controller closes a command connection idle for its IDLE_TIMEOUT (60 s): one
        // idle for MAX_IDLE_AGE is dropped rather than tried.
        idle.retain(|(_, _, since)| since.elapsed() < MAX_IDLE_AGE);
        let i = idle.iter().rposition(|(v, _, _)| *v == via)?;
        Some(idle.swap_remove(i).1)
    }

    fn give_back(&self, via: Via, c: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.iter().filter(|(v, _, _)| *v == via).count() < MAX_IDLE {
            idle.push((via, c, std::time::Instant::now()));
        }
    }

    /// Sends `req` for `caller` and returns the leading controller's answer;
    /// `Response::Error` becomes `Err`. The controllers are tried by [`LeaderSearch`]'s rule,
    /// from the one that answered last. At one controller, a connection that fails is
    /// dropped and the call tried once more on a new one (a pooled connection the controller
    /// closed while idle, or a controller restarted); a controller that cannot be reached is
    /// passed over; none leading is `SLURM_COMMUNICATIONS_CONNECTION_ERROR` (or the last
    /// standby's `ESLURM_IN_STANDBY_MODE`).
    pub async fn call(&self, caller: &Caller, req: Request) -> Result<Response, SlurmError> {
        self.call_with(caller, req, false).await
    }

    /// As [`CtlClient::call`], but one round over the controllers and no waiting: whether a
    /// controller leads now (`slurmrestd`'s `/readyz`).
    pub async fn call_now(&self, caller: &Caller, req: Request) -> Result<Response, SlurmError> {
        self.call_with(caller, req, true).await
    }

    /// Sends `req` to controller `i` of [`CtlTarget::tcp`] only, leader or not (a ping of
    /// each `SlurmctldHost`).
    pub async fn call_at(&self, i: usize, caller: &Caller, req: Request) -> Result<Response, SlurmError> {
        let _permit = self.in_use.acquire().await.map_err(|_| unreachable_ctl())?;
        let r = tokio::time::timeout(CALL_TIMEOUT, self.try_at(i, caller, &req)).await;
        match r {
            Ok(Tried::Answered(Ok(Response::Error(e)))) | Ok(Tried::Answered(Err(e))) => Err(e),
            Ok(Tried::Answered(Ok(r))) => Ok(r),
            Ok(Tried::NotReached) | Err(_) => Err(unreachable_ctl()),
        }
    }

    async fn call_with(&self, caller: &Caller, req: Request, now: bool) -> Result<Response, SlurmError> {
        let r = tokio::time::timeout(CALL_TIMEOUT, self.call_inner(caller, req, now)).await;
        match r {
            Ok(Ok(Response::Error(e))) => Err(e),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(unreachable_ctl()),
        }
    }

    async fn call_inner(&self, caller: &Caller, req: Request, now: bool) -> Result<Response, SlurmError> {
        use std::sync::atomic::Ordering;
        let _permit = self.in_use.acquire().await.map_err(|_| unreachable_ctl())?;
        let hosts = self.target.tcp.len();
        let t0 = std::time::Instant::now();
        let mut search = LeaderSearch::new(hosts, self.leader.load(Ordering::Relaxed), self.target.slurmctld_timeout, t0);
        if now {
            search = search.one_round(t0);
        }
        let mut last = Err(unreachable_ctl());
        loop {
            match search.next(std::time::Instant::now()) {
                Step::Try(i) => match self.try_at(i, caller, &req).await {
                    Tried::NotReached => {}
                    Tried::Answered(Ok(Response::Error(e))) if e.code == ESLURM_IN_STANDBY_MODE && hosts > 1 => last = Err(e),
                    Tried::Answered(r) => {
                        if r.is_ok() {
                            self.leader.store(i, Ordering::Relaxed);
                        }
                        return r;
                    }
                },
                Step::Wait(d) => tokio::time::sleep(d).await,
                Step::GiveUp => return last,
            }
        }
    }

    /// One try of `req` at controller `i`: the first over the Unix socket when it exists.
    async fn try_at(&self, i: usize, caller: &Caller, req: &Request) -> Tried {
        let unix = i == 0 && self.target.unix.as_ref().is_some_and(|p| p.exists());
        let via = (i, unix);
        // A fresh credential for each controller tried: each keeps its own replay cache, and
        // a standby that saw one may lead by the next round.
        let cred = match (caller, unix) {
            (Caller::Local, false) => {
                let sock = self.target.auth_socket.clone();
                let c = tokio::task::spawn_blocking(move || flotilla_proto::client::fetch_credential(&sock)).await;
                match c {
                    Ok(Ok(c)) => Some(c),
                    _ => return Tried::Answered(Err(unreachable_ctl())),
                }
            }
            _ => None,
        };
        for attempt in 0..2 {
            // The second try is always on a new connection: the other pooled ones may be as
            // stale as the first (a controller restart closes them all).
            let pooled = if attempt == 0 { self.take(via) } else { None };
            let fresh = pooled.is_none();
            let mut conn = match pooled {
                Some(c) => c,
                None => match Conn::open(&self.target, via).await {
                    Ok(c) => c,
                    Err(_) => return Tried::NotReached,
                },
            };
            let req = req.clone();
            let r = match caller {
                Caller::Local => {
                    let auth = cred.clone();
                    conn.call(|id| Frame::Request { id, auth, body: req }).await
                }
                Caller::Token(t) => {
                    let auth = t.clone();
                    conn.call(|id| Frame::TokenRequest { id, auth, body: req }).await
                }
            };
            match r {
                Ok(resp) => {
                    self.give_back(via, conn);
                    return Tried::Answered(Ok(resp));
                }
                Err(_) if !fresh && attempt == 0 => {
                    self.idle.lock().unwrap_or_else(|e| e.into_inner()).retain(|(v, _, _)| *v != via);
                    continue;
                }
                Err(_) => return Tried::Answered(Err(unreachable_ctl())),
            }
        }
        Tried::Answered(Err(SlurmError::new(SLURM_UNEXPECTED_MSG_ERROR)))
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
        let c = Arc::new(CtlClient::new(CtlTarget::single(Some(path), "127.0.0.1:1", "/nonexistent".into())));
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
