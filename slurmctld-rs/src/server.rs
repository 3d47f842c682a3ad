//! The RPC server (mini-redis mechanics): a TCP listener for node daemons and remote commands
//! presenting signed credentials, a local Unix socket whose peers are identified by the kernel
//! (`SO_PEERCRED`), a semaphore capping connections, shutdown passed in as a watch, and the
//! pure [`flotilla_proto::decode_frame_max`] on a read buffer.
//!
//! A connection starts with the version handshake. A request is authenticated (credential on
//! TCP, peer credentials on the Unix socket), then forwarded to the owner task, whose answer
//! comes back after the owner committed. A request that fails authentication is logged and
//! answered with Slurm's `Protocol authentication error`; an undecodable frame is answered with
//! an error and the connection closed (its framing can no longer be trusted); the server keeps
//! serving everyone else. A `Register` turns the connection into a node session.
//!
//! The same server, without an owner task, is `sackd`: it only issues credentials to local
//! peers.

use crate::ctld::{wall_now, Event, Ident, Reply};
use flotilla_proto::errno::*;
use flotilla_proto::{
    decode_frame_max, encode_frame, negotiate, Frame, ProtoError, Request, Response, SlurmError, Verifier,
};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tracing::{debug, info, warn};

/// How long a peer has to send its hello.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// State shared by all connections.
#[derive(Debug)]
pub struct Shared {
    /// The owner task's inbox; `None` for `sackd`.
    pub tx: Option<mpsc::Sender<Event>>,
    /// Verifies credentials (and signs them for local peers).
    pub verifier: Verifier,
    /// Maximum frame body (bytes).
    pub max_frame: usize,
    /// Uid of `SlurmUser` (admin like root).
    pub slurm_uid: u32,
    /// This host's name (in issued credentials).
    pub host: String,
    /// Lifetime of issued credentials (s).
    pub issue_ttl_s: u64,
    /// Requests refused by authentication.
    pub auth_failures: Arc<AtomicU64>,
    /// Caps concurrent connections.
    pub conns: Arc<Semaphore>,
    /// Names of the users requests are for (never the name a command claims).
    pub user_names: crate::users::UserNames,
    next_conn: AtomicU64,
}

impl Shared {
    /// Shared state.
    pub fn new(
        tx: Option<mpsc::Sender<Event>>,
        verifier: Verifier,
        slurm_uid: u32,
        host: String,
        auth_failures: Arc<AtomicU64>,
        max_conns: usize,
        max_frame: usize,
    ) -> Shared {
        Shared {
            tx,
            verifier,
            max_frame,
            slurm_uid,
            host,
            issue_ttl_s: flotilla_proto::auth::DEFAULT_TTL_S,
            auth_failures,
            conns: Arc::new(Semaphore::new(max_conns)),
            user_names: crate::users::UserNames::new(),
            next_conn: AtomicU64::new(1),
        }
    }
}

/// Who is on the other end.
#[derive(Debug, Clone, Copy)]
enum Peer {
    Tcp(SocketAddr),
    Unix { uid: u32, gid: u32, pid: i32 },
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Tcp(a) => write!(f, "{a}"),
            Peer::Unix { uid, pid, .. } => write!(f, "unix(uid={uid},pid={pid})"),
        }
    }
}

/// Accepts TCP connections until shutdown.
pub async fn serve_tcp(listener: TcpListener, shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let Ok(permit) = shared.conns.clone().acquire_owned().await else { return };
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        let (stream, addr) = match accepted {
            Ok(x) => x,
            Err(e) => {
                warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            connection(stream, Peer::Tcp(addr), shared, shutdown).await;
            drop(permit);
        });
    }
}

/// Accepts Unix-socket connections until shutdown; peers are identified by `SO_PEERCRED`.
pub async fn serve_unix(listener: UnixListener, shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let Ok(permit) = shared.conns.clone().acquire_owned().await else { return };
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let peer = match nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials) {
            Ok(c) => Peer::Unix {
                uid: c.uid(),
                gid: c.gid(),
                pid: c.pid(),
            },
            Err(e) => {
                warn!("SO_PEERCRED failed: {e}");
                continue;
            }
        };
        let shared = shared.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            connection(stream, peer, shared, shutdown).await;
            drop(permit);
        });
    }
}

/// Binds the Unix socket at `path` (replacing a stale one), connectable by every local user.
pub fn bind_unix(path: &std::path::Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let l = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(l)
}

async fn read_frame<R: AsyncRead + Unpin>(rd: &mut R, buf: &mut Vec<u8>, max: usize) -> Result<Frame, ProtoError> {
    loop {
        if let Some((f, used)) = decode_frame_max(buf, max)? {
            buf.drain(..used);
            return Ok(f);
        }
        buf.reserve(8192);
        let n = rd.read_buf(buf).await?;
        if n == 0 {
            return Err(if buf.is_empty() {
                ProtoError::Closed
            } else {
                ProtoError::Decode("connection closed inside a frame".into())
            });
        }
    }
}

async fn write_frame<W: AsyncWrite + Unpin>(wr: &mut W, f: &Frame) -> Result<(), ProtoError> {
    let bytes = encode_frame(f)?;
    wr.write_all(&bytes).await?;
    Ok(())
}

/// Writes the owner task's answer to request `id`.
async fn write_reply<W: AsyncWrite + Unpin>(wr: &mut W, id: u64, reply: Reply) -> Result<(), ProtoError> {
    match reply {
        Reply::Msg(body) => write_frame(wr, &Frame::Response { id, body }).await,
        Reply::Encoded(body) => {
            wr.write_all(&flotilla_proto::encode_response_frame(id, &body)?).await?;
            Ok(())
        }
    }
}

/// A submission or service carries the name of the uid it is for, from the password
/// database ([`crate::users`]), whatever name the command sent (the owner task refuses a uid
/// that is not the caller's unless the caller is an admin).
async fn name_the_user(req: Request, shared: &Shared) -> Request {
    match req {
        Request::SubmitJob(mut s) => {
            s.user = shared.user_names.name(s.uid).await;
            Request::SubmitJob(s)
        }
        Request::ServiceCreate(mut c) => {
            c.user = shared.user_names.name(c.uid).await;
            Request::ServiceCreate(c)
        }
        r => r,
    }
}

fn authenticate(peer: &Peer, auth: Option<&flotilla_proto::Credential>, shared: &Shared) -> Result<Ident, SlurmError> {
    let admin = |uid: u32| uid == 0 || uid == shared.slurm_uid;
    match peer {
        Peer::Unix { uid, gid, .. } => Ok(Ident {
            uid: *uid,
            gid: *gid,
            admin: admin(*uid),
        }),
        Peer::Tcp(addr) => {
            let r = match auth {
                None => Err(flotilla_proto::AuthError::Missing),
                Some(c) => shared.verifier.accept(c, wall_now().max(0) as u64).map(|()| c),
            };
            match r {
                Ok(c) => Ok(Ident {
                    uid: c.uid,
                    gid: c.gid,
                    admin: admin(c.uid),
                }),
                Err(e) => {
                    shared.auth_failures.fetch_add(1, Ordering::Relaxed);
                    warn!(peer = %addr, claimed_uid = auth.map(|c| c.uid), "request refused: {e}");
                    Err(SlurmError::with_message(SLURM_PROTOCOL_AUTHENTICATION_ERROR, e.to_string()))
                }
            }
        }
    }
}

async fn connection<S>(stream: S, peer: Peer, shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut buf = Vec::with_capacity(8192);
    let max = shared.max_frame;
    let hello = match tokio::time::timeout(HANDSHAKE_TIMEOUT, read_frame(&mut rd, &mut buf, max)).await {
        Ok(Ok(Frame::Hello(h))) => h,
        Ok(Ok(_)) => {
            warn!(peer = %peer, "first frame is not a hello");
            let _ = write_frame(&mut wr, &Frame::Refused(SlurmError::new(SLURM_UNEXPECTED_MSG_ERROR))).await;
            return;
        }
        Ok(Err(ProtoError::Closed)) | Err(_) => return,
        Ok(Err(e)) => {
            warn!(peer = %peer, "bad handshake frame: {e}");
            let _ = write_frame(&mut wr, &Frame::Refused(e.to_slurm())).await;
            return;
        }
    };
    match negotiate(&hello) {
        Ok(version) => {
            if write_frame(&mut wr, &Frame::HelloOk { version }).await.is_err() {
                return;
            }
        }
        Err(e) => {
            warn!(peer = %peer, "handshake refused: {}", e.messages.join("; "));
            let _ = write_frame(&mut wr, &Frame::Refused(e)).await;
            return;
        }
    }
    loop {
        let frame = tokio::select! {
            f = read_frame(&mut rd, &mut buf, max) => f,
            _ = shutdown.changed() => return,
        };
        let (id, auth, body) = match frame {
            Ok(Frame::Request { id, auth, body }) => (id, auth, body),
            Ok(other) => {
                debug!(peer = %peer, "unexpected frame {:?}", std::mem::discriminant(&other));
                let r = Frame::Response {
                    id: 0,
                    body: Response::Error(SlurmError::new(SLURM_UNEXPECTED_MSG_ERROR)),
                };
                if write_frame(&mut wr, &r).await.is_err() {
                    return;
                }
                continue;
            }
            Err(ProtoError::Closed) => return,
            Err(e) => {
                // The stream's framing is lost: answer and close.
                warn!(peer = %peer, "bad frame: {e}");
                let r = Frame::Response {
                    id: 0,
                    body: Response::Error(e.to_slurm()),
                };
                let _ = write_frame(&mut wr, &r).await;
                return;
            }
        };
        let ident = match authenticate(&peer, auth.as_ref(), &shared) {
            Ok(i) => i,
            Err(e) => {
                if write_frame(&mut wr, &Frame::Response { id, body: Response::Error(e) }).await.is_err() {
                    return;
                }
                continue;
            }
        };
        let body: Reply = match body {
            Request::IssueCredential => match peer {
                Peer::Unix { uid, gid, .. } => Response::Credential(shared.verifier.key().sign(
                    uid,
                    gid,
                    &shared.host,
                    wall_now().max(0) as u64,
                    shared.issue_ttl_s,
                ))
                .into(),
                Peer::Tcp(_) => Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED)).into(),
            },
            Request::Ping => Response::Pong.into(),
            Request::Register(reg) => {
                if !ident.admin {
                    warn!(peer = %peer, uid = ident.uid, "node registration by a non-admin refused");
                    Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED)).into()
                } else if let Some(tx) = shared.tx.clone() {
                    node_session(rd, wr, buf, tx, id, reg, shared.clone(), shutdown).await;
                    return;
                } else {
                    Response::Error(SlurmError::new(ESLURM_NOT_SUPPORTED)).into()
                }
            }
            req => match &shared.tx {
                Some(tx) => {
                    let req = name_the_user(req, &shared).await;
                    let (otx, orx) = oneshot::channel();
                    if tx.send(Event::Rpc { ident, req, reply: otx }).await.is_err() {
                        return;
                    }
                    match orx.await {
                        Ok(r) => r,
                        Err(_) => return,
                    }
                }
                None => Response::Error(SlurmError::new(ESLURM_NOT_SUPPORTED)).into(),
            },
        };
        if write_reply(&mut wr, id, body).await.is_err() {
            return;
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn node_session<R, W>(
    mut rd: R,
    mut wr: W,
    mut buf: Vec<u8>,
    tx: mpsc::Sender<Event>,
    id: u64,
    reg: flotilla_proto::Register,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let conn = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let node = reg.node.clone();
    let (ntx, mut nrx) = mpsc::unbounded_channel();
    let (otx, orx) = oneshot::channel();
    if tx
        .send(Event::NodeRegister {
            conn,
            reg,
            tx: ntx,
            reply: otx,
        })
        .await
        .is_err()
    {
        return;
    }
    let Ok(resp) = orx.await else { return };
    let ok = resp == Reply::Msg(Response::Registered);
    if write_reply(&mut wr, id, resp).await.is_err() || !ok {
        return;
    }
    info!(node = %node, conn, "node session open");
    loop {
        tokio::select! {
            f = read_frame(&mut rd, &mut buf, shared.max_frame) => match f {
                Ok(Frame::FromNode(msg)) => {
                    if tx.send(Event::NodeMsg { conn, node: node.clone(), msg }).await.is_err() {
                        break;
                    }
                }
                Ok(Frame::Request { id, body: Request::Ping, .. }) => {
                    if write_frame(&mut wr, &Frame::Response { id, body: Response::Pong }).await.is_err() {
                        break;
                    }
                }
                Ok(_) => warn!(node = %node, "unexpected frame on a node session"),
                Err(_) => break,
            },
            m = nrx.recv() => match m {
                Some(m) => {
                    if write_frame(&mut wr, &Frame::ToNode(m)).await.is_err() {
                        break;
                    }
                }
                None => break,
            },
            _ = shutdown.changed() => break,
        }
    }
    let _ = tx.send(Event::NodeGone { conn, node }).await;
}
