//! The RPC server (mini-redis mechanics): a TCP listener for node daemons and remote commands
//! presenting signed credentials, a local Unix socket whose peers are identified by the kernel
//! (`SO_PEERCRED`), connection pools, shutdown passed in as a watch, and the pure
//! [`flotilla_proto::decode_frame_max`] on a read buffer.
//!
//! Hostile peers (issue #17): every kind of peer has its own pool ([`Limits`]), so one kind
//! filling its pool never keeps another out, and accepting never waits for room. An
//! unauthenticated TCP peer may hold one of a few slots per source address (the oldest is
//! closed for a newcomer), send frames of at most [`PREAUTH_MAX_FRAME`] bytes — a larger
//! request is read past its head only once the credential at its head verified — and must
//! authenticate within [`PREAUTH_TIMEOUT`]. Every frame, once begun, must arrive within
//! [`FRAME_TIMEOUT`]; authenticated command connections idle at most [`IDLE_TIMEOUT`];
//! buffers grow with the bytes that arrived, never with an announced length, and large
//! frames in flight share [`MAX_FRAME_BYTES_IN_FLIGHT`]. Node registrations must come from
//! the node's `NodeAddr` ([`Shared::node_addrs`]).
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
use flotilla_core::time::NO_VAL;
use flotilla_proto::errno::*;
use flotilla_proto::frame::{peek_request_auth, peek_token_auth, TokenAuth, PREAUTH_MAX_FRAME};
use flotilla_proto::jwt::{may_act_as, IssuePolicy, JwtKey};
use flotilla_proto::{
    decode_frame_max, encode_frame, negotiate, CtlToNode, Frame, ProtoError, Request, Response, SlurmError, Verifier,
};
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, oneshot, watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tracing::{debug, error, info, warn};

/// Slurm's `MessageTimeout` default (slurm.conf(5): 10 s), the unit of the deadlines below.
pub const MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// From accept to the end of the handshake (Unix) or to the first request whose credential
/// verifies (TCP): a peer that has not authenticated by then is closed.
pub const PREAUTH_TIMEOUT: Duration = MESSAGE_TIMEOUT;
/// Once the first byte of a frame has arrived, the whole frame must arrive within this, plus
/// one second per [`FRAME_BYTES_PER_S`] of its announced length (a 16 MiB frame: 26 s).
pub const FRAME_TIMEOUT: Duration = MESSAGE_TIMEOUT;
/// The slowest transfer a frame may take (bytes/s) before [`FRAME_TIMEOUT`] runs out.
pub const FRAME_BYTES_PER_S: usize = 1 << 20;
/// An authenticated command connection silent for this long between requests is closed
/// (Slurm's commands make one call per connection; ours too, but for `srun`'s few).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of frame bodies larger than [`PREAUTH_MAX_FRAME`] read at once over all
/// connections (authenticated peers only); a frame waits for room within its deadline.
pub const MAX_FRAME_BYTES_IN_FLIGHT: usize = 256 << 20;

/// Connection caps, one pool per kind of peer, so that one kind filling its pool cannot keep
/// another out (Slurm has no such keys; these are the defaults of [`Limits::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// TCP connections not authenticated yet (all peers). When full, the oldest is closed
    /// to make room: a legitimate peer authenticates within milliseconds of connecting.
    pub tcp_preauth: usize,
    /// TCP connections not authenticated yet, per source address (oldest closed first).
    pub tcp_preauth_per_ip: usize,
    /// Authenticated command connections over TCP (remote commands), all uids. A request
    /// arriving over the cap is answered, then its connection closed.
    pub tcp_commands: usize,
    /// Authenticated command connections over TCP per uid (the credential's).
    pub tcp_commands_per_uid: usize,
    /// Unix-socket connections of users other than root and `SlurmUser`, all together;
    /// a peer over the cap is refused at once.
    pub unix: usize,
    /// Unix-socket connections per uid (`SO_PEERCRED`), other than root and `SlurmUser`.
    pub unix_per_uid: usize,
    /// Unix-socket connections of root and `SlurmUser`.
    pub unix_admin: usize,
    /// Registered node sessions (the daemon sets it to twice the configured nodes, plus 16).
    pub node_sessions: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            tcp_preauth: 512,
            tcp_preauth_per_ip: 64,
            tcp_commands: 1024,
            tcp_commands_per_uid: 64,
            unix: 1024,
            unix_per_uid: 64,
            unix_admin: 256,
            node_sessions: 16,
        }
    }
}

/// State shared by all connections.
#[derive(Debug)]
pub struct Shared {
    /// The owner task's inbox; `None` for `sackd`.
    pub tx: Option<mpsc::Sender<Event>>,
    /// Verifies credentials (and signs them for local peers).
    pub verifier: Verifier,
    /// Maximum frame body (bytes) from an authenticated peer.
    pub max_frame: usize,
    /// Uid of `SlurmUser` (admin like root).
    pub slurm_uid: u32,
    /// This host's name (in issued credentials).
    pub host: String,
    /// Lifetime of issued credentials (s).
    pub issue_ttl_s: u64,
    /// Requests refused by authentication.
    pub auth_failures: Arc<AtomicU64>,
    /// Connection caps.
    pub limits: Limits,
    /// Node name -> the address its registrations must come from (`NodeAddr=`, else
    /// `NodeHostname=`, else the name). Empty for `sackd`.
    pub node_addrs: HashMap<String, String>,
    /// Names of the users requests are for (never the name a command claims).
    pub user_names: crate::users::UserNames,
    /// The `auth/jwt` key (`AuthAltTypes=auth/jwt`): verifies [`Frame::TokenRequest`]s and
    /// signs `scontrol token`'s tokens. `None`: every token is refused.
    pub jwt: Option<JwtKey>,
    /// Who may get tokens, for how long (`AuthAltParameters=`).
    pub jwt_policy: IssuePolicy,
    /// HTTP peers of the TCP port: metrics and health endpoints ([`crate::metrics`]).
    pub http: Arc<crate::metrics::HttpGate>,
    pools: Mutex<Pools>,
    /// KiB of large frame bodies being read ([`MAX_FRAME_BYTES_IN_FLIGHT`]).
    frame_budget: Arc<Semaphore>,
    next_conn: AtomicU64,
    /// The leader lease's epoch this controller leads in, set once it took the lease (0
    /// before): every message to a node goes out as [`Frame::ToNodeFenced`] with it, and the
    /// node refuses it once it has seen a higher one ([`crate::store::lease`]). A controller
    /// never regains a lease it lost (it steps down), so the epoch never changes once set.
    pub epoch: AtomicU64,
    /// A standby: this controller waits for the leader lease. It answers pings and issues
    /// local credentials; every other request gets Slurm's `ESLURM_IN_STANDBY_MODE` (Slurm
    /// 22.05 `backup.c`, `_background_process_msg`), so that clients try the next
    /// `SlurmctldHost=` instead of waiting. Only with backup controllers configured; false
    /// for `sackd` and once leading.
    pub standby: std::sync::atomic::AtomicBool,
    /// `scontrol takeover` asked this standby to take the lease now (`daemon::take_lease`).
    pub takeover: std::sync::atomic::AtomicBool,
    /// The leader lease's freshness, set once this controller leads: node sessions send
    /// their keepalives only while it is fresh ([`node_keepalive`]). Unset (a controller in
    /// process without a lease): always sent.
    pub lease: std::sync::OnceLock<crate::store::FenceWatch>,
    /// While a standby: the leader's `host:port` as the lease row names it
    /// (`daemon::take_lease` keeps it), where HTTP peers are sent ([`Shared::standing`]).
    pub leader: Mutex<Option<String>>,
    /// How long a node session waits without any other message to its node before it sends
    /// [`CtlToNode::Keepalive`]: slurm.conf's rule ([`flotilla_core::config::ClusterConfig::keepalive`]:
    /// a third of `SlurmdTimeout` with one controller, of `SlurmctldTimeout` with backups),
    /// which the nodes' silence check follows. 2 s unless the daemon sets it.
    pub keepalive_every: std::time::Duration,
}

impl Shared {
    /// Shared state.
    pub fn new(
        tx: Option<mpsc::Sender<Event>>,
        verifier: Verifier,
        slurm_uid: u32,
        host: String,
        auth_failures: Arc<AtomicU64>,
        limits: Limits,
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
            limits,
            node_addrs: HashMap::new(),
            user_names: crate::users::UserNames::new(),
            jwt: None,
            jwt_policy: IssuePolicy::default(),
            http: Arc::new(crate::metrics::HttpGate::new(crate::metrics::MetricsConf::default())),
            pools: Mutex::new(Pools::default()),
            frame_budget: Arc::new(Semaphore::new(MAX_FRAME_BYTES_IN_FLIGHT >> 10)),
            next_conn: AtomicU64::new(1),
            epoch: AtomicU64::new(0),
            standby: std::sync::atomic::AtomicBool::new(false),
            takeover: std::sync::atomic::AtomicBool::new(false),
            lease: std::sync::OnceLock::new(),
            leader: Mutex::new(None),
            keepalive_every: std::time::Duration::from_secs(2),
        }
    }

    /// Whether this controller leads, for an HTTP peer ([`crate::metrics::Standing`]).
    pub fn standing(&self) -> crate::metrics::Standing {
        if self.standby.load(Ordering::Acquire) {
            let leader = self.leader.lock().unwrap_or_else(|p| p.into_inner()).clone();
            crate::metrics::Standing::Standby { leader }
        } else {
            crate::metrics::Standing::Leader
        }
    }

    /// Whether a node session may send its keepalive now: the lease is fresh, or none is
    /// held (a controller in process).
    fn lease_fresh(&self) -> bool {
        self.lease.get().is_none_or(|w| w.fresh())
    }

    fn is_admin(&self, uid: u32) -> bool {
        uid == 0 || uid == self.slurm_uid
    }

    fn pools(&self) -> std::sync::MutexGuard<'_, Pools> {
        self.pools.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections held now: (TCP not authenticated, TCP commands, Unix, node sessions).
    pub fn connections(&self) -> (usize, usize, usize, usize) {
        let p = self.pools();
        (p.preauth.len(), p.commands, p.unix + p.unix_admin, p.nodes)
    }
}

/// What each pool holds (the lock is never held across an await).
#[derive(Debug, Default)]
struct Pools {
    /// Unauthenticated TCP connections by connection id (oldest first).
    preauth: BTreeMap<u64, (IpAddr, Arc<Notify>)>,
    preauth_by_ip: HashMap<IpAddr, usize>,
    commands: usize,
    commands_by_uid: HashMap<u32, usize>,
    unix: usize,
    unix_admin: usize,
    unix_by_uid: HashMap<u32, usize>,
    nodes: usize,
}

fn dec<K: std::hash::Hash + Eq>(m: &mut HashMap<K, usize>, k: &K) {
    if let Some(n) = m.get_mut(k) {
        *n -= 1;
        if *n == 0 {
            m.remove(k);
        }
    }
}

/// Which pool a connection counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotKind {
    PreAuth { ip: IpAddr },
    Command { uid: u32 },
    Unix { uid: u32, admin: bool },
    Node,
    /// Counted nowhere (after a failed promotion: the connection closes after its answer).
    None,
}

/// A connection's place in its pool, given back when dropped.
struct Slot {
    shared: Arc<Shared>,
    conn: u64,
    kind: SlotKind,
    /// Notified when the connection is evicted to make room (pre-auth TCP only).
    evicted: Arc<Notify>,
}

impl Slot {
    /// A new TCP connection from `ip`: always admitted; the oldest unauthenticated
    /// connection of `ip` (or of anyone, when the pool is full) is evicted for it.
    fn tcp(shared: &Arc<Shared>, ip: IpAddr) -> Slot {
        let conn = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        let evicted = Arc::new(Notify::new());
        let lim = shared.limits;
        let mut p = shared.pools();
        let victim = if p.preauth_by_ip.get(&ip).copied().unwrap_or(0) >= lim.tcp_preauth_per_ip {
            p.preauth.iter().find(|(_, (i, _))| *i == ip).map(|(c, _)| *c)
        } else if p.preauth.len() >= lim.tcp_preauth {
            p.preauth.keys().next().copied()
        } else {
            None
        };
        if let Some(v) = victim {
            if let Some((vip, n)) = p.preauth.remove(&v) {
                dec(&mut p.preauth_by_ip, &vip);
                n.notify_one();
            }
        }
        p.preauth.insert(conn, (ip, evicted.clone()));
        *p.preauth_by_ip.entry(ip).or_insert(0) += 1;
        drop(p);
        Slot { shared: shared.clone(), conn, kind: SlotKind::PreAuth { ip }, evicted }
    }

    /// A new Unix-socket connection of `uid`, or `Err(why)` when its pool is full.
    fn unix(shared: &Arc<Shared>, uid: u32) -> Result<Slot, String> {
        let admin = shared.is_admin(uid);
        let lim = shared.limits;
        let mut p = shared.pools();
        if admin {
            if p.unix_admin >= lim.unix_admin {
                return Err(format!("{} connections of root and SlurmUser", lim.unix_admin));
            }
            p.unix_admin += 1;
        } else {
            if p.unix_by_uid.get(&uid).copied().unwrap_or(0) >= lim.unix_per_uid {
                return Err(format!("{} connections of uid {uid}", lim.unix_per_uid));
            }
            if p.unix >= lim.unix {
                return Err(format!("{} connections of users", lim.unix));
            }
            p.unix += 1;
            *p.unix_by_uid.entry(uid).or_insert(0) += 1;
        }
        drop(p);
        let conn = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        Ok(Slot { shared: shared.clone(), conn, kind: SlotKind::Unix { uid, admin }, evicted: Arc::new(Notify::new()) })
    }

    fn authenticated(&self) -> bool {
        !matches!(self.kind, SlotKind::PreAuth { .. })
    }

    /// Moves a pre-auth TCP connection into the command pool of `uid`; false (and the
    /// connection counted nowhere, to be closed after its answer) when that pool is full.
    fn promote_command(&mut self, uid: u32) -> bool {
        if !matches!(self.kind, SlotKind::PreAuth { .. }) {
            return self.kind != SlotKind::None;
        }
        let lim = self.shared.limits;
        let shared = self.shared.clone();
        let mut p = shared.pools();
        self.release(&mut p);
        if p.commands >= lim.tcp_commands || p.commands_by_uid.get(&uid).copied().unwrap_or(0) >= lim.tcp_commands_per_uid {
            self.kind = SlotKind::None;
            return false;
        }
        p.commands += 1;
        *p.commands_by_uid.entry(uid).or_insert(0) += 1;
        self.kind = SlotKind::Command { uid };
        true
    }

    /// Moves the connection into the node-session pool; false when it is full.
    fn promote_node(&mut self) -> bool {
        let lim = self.shared.limits;
        let shared = self.shared.clone();
        let mut p = shared.pools();
        if p.nodes >= lim.node_sessions {
            return false;
        }
        self.release(&mut p);
        p.nodes += 1;
        self.kind = SlotKind::Node;
        true
    }

    fn release(&mut self, p: &mut Pools) {
        match self.kind {
            SlotKind::PreAuth { ip } => {
                if p.preauth.remove(&self.conn).is_some() {
                    dec(&mut p.preauth_by_ip, &ip);
                }
            }
            SlotKind::Command { uid } => {
                p.commands -= 1;
                dec(&mut p.commands_by_uid, &uid);
            }
            SlotKind::Unix { admin: true, .. } => p.unix_admin -= 1,
            SlotKind::Unix { uid, admin: false } => {
                p.unix -= 1;
                dec(&mut p.unix_by_uid, &uid);
            }
            SlotKind::Node => p.nodes -= 1,
            SlotKind::None => {}
        }
        self.kind = SlotKind::None;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let shared = self.shared.clone();
        let mut p = shared.pools();
        self.release(&mut p);
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

/// Accepts TCP connections until shutdown. Accepting never waits for room: a new peer
/// takes the place of the oldest unauthenticated one ([`Limits::tcp_preauth`]).
pub async fn serve_tcp(listener: TcpListener, shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    loop {
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
        let slot = Slot::tcp(&shared, addr.ip().to_canonical());
        let shared = shared.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(sniff(stream, addr, slot, shared, shutdown));
    }
}

/// Tells an HTTP peer ([`crate::metrics`]) from a proto peer by the connection's first byte
/// ([`crate::metrics::looks_like_http`]), holding the pre-auth slot while it waits: a peer
/// silent for [`PREAUTH_TIMEOUT`], or evicted meanwhile, is closed, as [`connection`] would.
async fn sniff(stream: tokio::net::TcpStream, addr: SocketAddr, slot: Slot, shared: Arc<Shared>, shutdown: watch::Receiver<bool>) {
    let mut first = [0u8; 1];
    let (evicted, mut stop) = (slot.evicted.clone(), shutdown.clone());
    let peeked = tokio::select! {
        r = tokio::time::timeout(PREAUTH_TIMEOUT, stream.peek(&mut first)) => r,
        _ = evicted.notified() => return,
        _ = stop.changed() => return,
    };
    match peeked {
        Ok(Ok(1..)) if crate::metrics::looks_like_http(first[0]) => {
            drop(slot);
            let (gate, tx) = (shared.http.clone(), shared.tx.clone());
            let standing: Arc<dyn Fn() -> crate::metrics::Standing + Send + Sync> = Arc::new(move || shared.standing());
            crate::metrics::serve(stream, addr.ip().to_canonical(), gate, tx, standing, shutdown).await;
        }
        Ok(Ok(1..)) => connection(stream, Peer::Tcp(addr), slot, shared, shutdown).await,
        _ => debug!(peer = %addr, "connection closed before its first byte"),
    }
}

/// Accepts Unix-socket connections until shutdown; peers are identified by `SO_PEERCRED`
/// and counted per uid ([`Limits::unix_per_uid`]); one over its cap is refused at once.
pub async fn serve_unix(listener: UnixListener, shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>) {
    loop {
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
        let Peer::Unix { uid, .. } = peer else { continue };
        match Slot::unix(&shared, uid) {
            Ok(slot) => {
                let shared = shared.clone();
                let shutdown = shutdown.clone();
                tokio::spawn(connection(stream, peer, slot, shared, shutdown));
            }
            Err(why) => {
                debug!(peer = %peer, "connection refused: at most {why}");
                let refusal = Frame::Refused(SlurmError::with_message(
                    SLURM_COMMUNICATIONS_CONNECTION_ERROR,
                    format!("too many connections: at most {why}"),
                ));
                tokio::spawn(async move {
                    let mut stream = stream;
                    let _ = tokio::time::timeout(Duration::from_secs(1), write_frame(&mut stream, &refusal)).await;
                });
            }
        }
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

/// How one read of a frame is bounded.
#[derive(Debug, Clone, Copy)]
struct Rules {
    /// Largest body accepted.
    max: usize,
    /// Bodies over [`PREAUTH_MAX_FRAME`] need a verified credential at their head (TCP
    /// requests); otherwise the peer is authenticated already (Unix, node session).
    gate: bool,
    /// The latest instant the frame's first byte may arrive (`None`: any time).
    start_by: Option<Instant>,
}

/// Why a frame was not read.
#[derive(Debug)]
enum ReadError {
    /// Framing, I/O, or the peer closed.
    Proto(ProtoError),
    /// Nothing arrived before `start_by`.
    Idle,
    /// A frame began but did not complete within its deadline.
    Slow,
    /// A large frame whose head carries no valid credential (answered to request `id`).
    Auth(u64, SlurmError),
    /// No room in [`MAX_FRAME_BYTES_IN_FLIGHT`] within the frame's deadline.
    Busy,
}

impl From<ProtoError> for ReadError {
    fn from(e: ProtoError) -> ReadError {
        ReadError::Proto(e)
    }
}

/// What a read gives: the frame, the identity verified at its head (large TCP requests),
/// and the share of [`MAX_FRAME_BYTES_IN_FLIGHT`] it holds until dropped.
type Read = (Frame, Option<Ident>, Option<OwnedSemaphorePermit>);

/// Reads one frame. Memory grows with the bytes that arrive (at most 64 KiB per read),
/// never from the announced length; a body over [`PREAUTH_MAX_FRAME`] is read past its head
/// only once the head's credential verified (`rules.gate`) and room is taken in the frame
/// budget; the frame must complete within [`FRAME_TIMEOUT`] (scaled by its length) of its
/// first byte.
async fn read_frame<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut Vec<u8>,
    rules: Rules,
    peer: &Peer,
    shared: &Shared,
) -> Result<Read, ReadError> {
    if buf.is_empty() {
        buf.reserve(PREAUTH_MAX_FRAME + 4);
        let n = match rules.start_by {
            Some(t) => tokio::time::timeout_at(t, (&mut *rd).take((PREAUTH_MAX_FRAME + 4) as u64).read_buf(buf))
                .await
                .map_err(|_| ReadError::Idle)?,
            None => (&mut *rd).take((PREAUTH_MAX_FRAME + 4) as u64).read_buf(buf).await,
        }
        .map_err(ProtoError::from)?;
        if n == 0 {
            return Err(ProtoError::Closed.into());
        }
    }
    let begun = Instant::now();
    let mut deadline = begun + FRAME_TIMEOUT;
    let mut verified: Option<Ident> = None;
    let mut permit = None;
    let mut len = None;
    loop {
        if len.is_none() && buf.len() >= 4 {
            let l = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if l > rules.max {
                return Err(ProtoError::FrameTooLarge { len: l, max: rules.max }.into());
            }
            len = Some(l);
            deadline = begun + FRAME_TIMEOUT + Duration::from_secs((l / FRAME_BYTES_PER_S) as u64);
        }
        let large = len.is_some_and(|l| l > PREAUTH_MAX_FRAME);
        if large && rules.gate && verified.is_none() && buf.len() >= 4 + PREAUTH_MAX_FRAME {
            let l = len.unwrap_or(0);
            let checked = if let Some((id, auth)) = peek_request_auth(&buf[4..]) {
                (id, authenticate(peer, auth.as_ref(), shared))
            } else if let Some((id, auth)) = peek_token_auth(&buf[4..]) {
                (id, authenticate_token(peer, &auth, shared).await)
            } else {
                return Err(ProtoError::FrameTooLarge { len: l, max: PREAUTH_MAX_FRAME }.into());
            };
            match checked {
                (_, Ok(ident)) => verified = Some(ident),
                (id, Err(e)) => return Err(ReadError::Auth(id, e)),
            }
        }
        if large && permit.is_none() && (!rules.gate || verified.is_some()) {
            let kib = u32::try_from((len.unwrap_or(0) >> 10) + 1).unwrap_or(u32::MAX);
            let p = tokio::time::timeout_at(deadline, shared.frame_budget.clone().acquire_many_owned(kib)).await;
            match p {
                Ok(Ok(p)) => permit = Some(p),
                _ => return Err(ReadError::Busy),
            }
        }
        if let Some((f, used)) = decode_frame_max(buf, rules.max)? {
            buf.drain(..used);
            if buf.capacity() > 1 << 16 && buf.len() < 1 << 16 {
                buf.shrink_to(1 << 16);
            }
            return Ok((f, verified, permit));
        }
        // How much more to read: up to the frame's end, its head while it is unverified,
        // and 64 KiB at a time.
        let want = match len {
            None => PREAUTH_MAX_FRAME + 4,
            Some(_) if large && rules.gate && verified.is_none() => PREAUTH_MAX_FRAME + 4,
            Some(l) => l + 4,
        }
        .saturating_sub(buf.len())
        .clamp(1, 1 << 16);
        buf.reserve(want);
        let n = tokio::time::timeout_at(deadline, (&mut *rd).take(want as u64).read_buf(buf))
            .await
            .map_err(|_| ReadError::Slow)?
            .map_err(ProtoError::from)?;
        if n == 0 {
            return Err(ProtoError::Decode("connection closed inside a frame".into()).into());
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
        Reply::Parts(mut parts) => {
            while let Some(body) = parts.recv().await {
                write_frame(wr, &Frame::Response { id, body }).await?;
            }
            Ok(())
        }
    }
}

/// A submission or service carries the name of the uid it is for, from the password
/// database ([`crate::users`]), whatever name the command sent (the owner task refuses a uid
/// that is not the caller's unless the caller is an admin). The uid is looked up only when
/// the caller may submit for it (its own, or any for an admin): a refused request costs no
/// NSS lookup of a uid the caller chose.
async fn name_the_user(req: Request, ident: &Ident, shared: &Shared) -> Request {
    let may = |uid: u32| ident.admin || uid == ident.uid;
    // An unset (`NO_VAL`) uid and gid is the caller's, as slurmctld fills an unset
    // `user_id`/`group_id` from the request's authentication (slurmrestd's fleet API).
    let caller = |uid: &mut u32, gid: &mut u32| {
        if *uid == NO_VAL {
            *uid = ident.uid;
            *gid = ident.gid;
        }
    };
    match req {
        Request::SubmitJob(mut s) => {
            caller(&mut s.uid, &mut s.gid);
            s.user = if may(s.uid) { shared.user_names.name(s.uid).await } else { String::new() };
            Request::SubmitJob(s)
        }
        Request::SubmitElastic(mut s) => {
            caller(&mut s.job.uid, &mut s.job.gid);
            s.job.user = if may(s.job.uid) { shared.user_names.name(s.job.uid).await } else { String::new() };
            Request::SubmitElastic(s)
        }
        Request::ServiceCreate(mut c) => {
            caller(&mut c.uid, &mut c.gid);
            c.user = if may(c.uid) { shared.user_names.name(c.uid).await } else { String::new() };
            Request::ServiceCreate(c)
        }
        r => r,
    }
}

fn authenticate(peer: &Peer, auth: Option<&flotilla_proto::Credential>, shared: &Shared) -> Result<Ident, SlurmError> {
    match peer {
        Peer::Unix { uid, gid, .. } => Ok(Ident {
            uid: *uid,
            gid: *gid,
            admin: shared.is_admin(*uid),
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
                    admin: shared.is_admin(c.uid),
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

/// Authenticates a [`Frame::TokenRequest`] (slurmrestd's `X-SLURM-USER-TOKEN`): the token
/// must verify under the `auth/jwt` key ([`flotilla_proto::jwt`]) and name a user the password
/// database knows; `auth.user_name` (`X-SLURM-USER-NAME`), when it names another user, is
/// honoured only for a token of root or `SlurmUser` (Slurm's `auth_p_verify`). The identity
/// is that user's, with that user's rights, whatever the peer is. Every refusal is answered
/// with Slurm's bare `Protocol authentication error` (no hint for a forger); the reason is
/// logged and counted with the other authentication failures.
async fn authenticate_token(peer: &Peer, auth: &TokenAuth, shared: &Shared) -> Result<Ident, SlurmError> {
    let refuse = |why: &dyn std::fmt::Display| {
        shared.auth_failures.fetch_add(1, Ordering::Relaxed);
        warn!(peer = %peer, header_user = %auth.user_name, "token refused: {why}");
        SlurmError::new(SLURM_PROTOCOL_AUTHENTICATION_ERROR)
    };
    let Some(key) = &shared.jwt else {
        return Err(refuse(&"auth/jwt is not configured (AuthAltTypes=auth/jwt)"));
    };
    let claims = key.verify(&auth.token, wall_now()).map_err(|e| refuse(&e))?;
    let Some((uid, gid)) = shared.user_names.user(&claims.user).await else {
        return Err(refuse(&format_args!("the token's user {} is unknown", claims.user)));
    };
    if auth.user_name.is_empty() || auth.user_name == claims.user {
        return Ok(Ident { uid, gid, admin: shared.is_admin(uid) });
    }
    if !may_act_as(uid, shared.slurm_uid) {
        return Err(refuse(&format_args!(
            "attempt to authenticate as alternate user {} from non-SlurmUser {}",
            auth.user_name, claims.user
        )));
    }
    match shared.user_names.user(&auth.user_name).await {
        Some((uid, gid)) => Ok(Ident { uid, gid, admin: shared.is_admin(uid) }),
        None => Err(refuse(&format_args!("user {} is unknown", auth.user_name))),
    }
}

/// `scontrol token` (Slurm's `_slurm_rpc_auth_token`): a token for the caller, or for
/// `username` when the caller is root or `SlurmUser` (another user's name is otherwise
/// `ESLURM_USER_ID_MISSING`); `disable_token_creation` leaves tokens to root and `SlurmUser`
/// (`ESLURM_ACCESS_DENIED`); `max_token_lifespan=` caps what others may ask for
/// (`ESLURM_INVALID_TIME_LIMIT`). `Token(None)` without a key, as Slurm answers then.
async fn issue_token(ident: &Ident, username: Option<String>, lifespan: i64, shared: &Shared) -> Response {
    let slurm_user = may_act_as(ident.uid, shared.slurm_uid);
    let policy = shared.jwt_policy;
    if policy.disabled && !slurm_user {
        warn!(uid = ident.uid, "token refused: token creation disabled (AuthAltParameters=disable_token_creation)");
        return Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED));
    }
    let own = shared.user_names.name(ident.uid).await;
    let user = match username {
        Some(u) if slurm_user || u == own => u,
        Some(u) => {
            warn!(uid = ident.uid, "token refused: attempt to retrieve a token for a different user={u}");
            return Response::Error(SlurmError::new(ESLURM_USER_ID_MISSING));
        }
        None if own == ident.uid.to_string() => {
            warn!(uid = ident.uid, "token refused: the caller's uid has no user name");
            return Response::Error(SlurmError::new(ESLURM_USER_ID_MISSING));
        }
        None => own,
    };
    let life = policy.lifespan(lifespan);
    if !slurm_user && policy.max_lifespan_s.is_some_and(|m| life > m) {
        warn!(uid = ident.uid, "token refused: lifespan {life} s exceeds max_token_lifespan");
        return Response::Error(SlurmError::new(ESLURM_INVALID_TIME_LIMIT));
    }
    Response::Token(shared.jwt.as_ref().map(|k| k.issue(&user, wall_now(), life)))
}

/// How a request says who sent it.
enum Auth {
    /// A cluster credential (TCP) or nothing (Unix: the kernel says).
    Credential(Option<flotilla_proto::Credential>),
    /// A JSON Web Token (slurmrestd).
    Token(TokenAuth),
}

/// Reads the next frame of a connection in `slot`: a pre-auth TCP connection is bounded by
/// [`PREAUTH_TIMEOUT`] from `accepted` and closed if evicted; an authenticated one may idle
/// [`IDLE_TIMEOUT`]. `Ok(None)`: shutdown or eviction, close quietly.
async fn next_frame<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut Vec<u8>,
    peer: &Peer,
    slot: &Slot,
    accepted: Instant,
    shared: &Shared,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Option<Read>, ReadError> {
    let rules = Rules {
        max: shared.max_frame,
        gate: matches!(peer, Peer::Tcp(_)),
        start_by: Some(if slot.authenticated() { Instant::now() + IDLE_TIMEOUT } else { accepted + PREAUTH_TIMEOUT }),
    };
    let preauth_deadline = tokio::time::sleep_until(accepted + PREAUTH_TIMEOUT);
    tokio::select! {
        f = read_frame(rd, buf, rules, peer, shared) => f.map(Some),
        _ = slot.evicted.notified(), if !slot.authenticated() => Ok(None),
        _ = preauth_deadline, if !slot.authenticated() => Err(ReadError::Slow),
        _ = shutdown.changed() => Ok(None),
    }
}

/// The hello: small, within the pre-auth deadline, on every kind of connection. False:
/// refused or gone (close).
async fn handshake<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    rd: &mut R,
    wr: &mut W,
    buf: &mut Vec<u8>,
    peer: &Peer,
    slot: &Slot,
    accepted: Instant,
    shared: &Shared,
) -> bool {
    let hello_rules = Rules { max: PREAUTH_MAX_FRAME, gate: false, start_by: Some(accepted + PREAUTH_TIMEOUT) };
    let hello = tokio::select! {
        r = read_frame(rd, buf, hello_rules, peer, shared) => r,
        _ = slot.evicted.notified() => return false,
        _ = tokio::time::sleep_until(accepted + PREAUTH_TIMEOUT) => return false,
    };
    let hello = match hello {
        Ok((Frame::Hello(h), _, _)) => h,
        Ok(_) => {
            warn!(peer = %peer, "first frame is not a hello");
            let _ = write_frame(wr, &Frame::Refused(SlurmError::new(SLURM_UNEXPECTED_MSG_ERROR))).await;
            return false;
        }
        Err(ReadError::Proto(e)) if !matches!(e, ProtoError::Closed) => {
            warn!(peer = %peer, "bad handshake frame: {e}");
            let _ = write_frame(wr, &Frame::Refused(e.to_slurm())).await;
            return false;
        }
        Err(_) => return false,
    };
    match negotiate(&hello) {
        Ok(version) => {
            if write_frame(wr, &Frame::HelloOk { version }).await.is_err() {
                return false;
            }
        }
        Err(e) => {
            warn!(peer = %peer, "handshake refused: {}", e.messages.join("; "));
            let _ = write_frame(wr, &Frame::Refused(e)).await;
            return false;
        }
    }
    true
}

/// Answers (where there is an answer) and logs a read that failed; the connection closes.
async fn answer_read_error<W: AsyncWrite + Unpin>(wr: &mut W, peer: &Peer, slot: &Slot, e: ReadError) {
    match e {
        ReadError::Proto(ProtoError::Closed) => {}
        ReadError::Idle => debug!(peer = %peer, "idle connection closed"),
        ReadError::Slow => {
            warn!(peer = %peer, authenticated = slot.authenticated(), "connection closed: a deadline passed (authentication or a frame's transfer)");
        }
        ReadError::Auth(id, e) => {
            // The rest of the frame is never read.
            let _ = write_frame(wr, &Frame::Response { id, body: Response::Error(e) }).await;
        }
        ReadError::Busy => {
            warn!(peer = %peer, "frame refused: no room for large frames within its deadline");
            let e = SlurmError::with_message(SLURM_COMMUNICATIONS_CONNECTION_ERROR, "server busy with large messages, try again");
            let _ = write_frame(wr, &Frame::Response { id: 0, body: Response::Error(e) }).await;
        }
        ReadError::Proto(e) => {
            // The stream's framing is lost.
            warn!(peer = %peer, "bad frame: {e}");
            let _ = write_frame(wr, &Frame::Response { id: 0, body: Response::Error(e.to_slurm()) }).await;
        }
    }
}

async fn connection<S>(stream: S, peer: Peer, mut slot: Slot, shared: Arc<Shared>, mut shutdown: watch::Receiver<bool>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let accepted = Instant::now();
    let (mut rd, mut wr) = tokio::io::split(stream);
    let mut buf = Vec::new();
    if !handshake(&mut rd, &mut wr, &mut buf, &peer, &slot, accepted, &shared).await {
        return;
    }
    let mut close_after_answer = false;
    loop {
        let frame = next_frame(&mut rd, &mut buf, &peer, &slot, accepted, &shared, &mut shutdown).await;
        let (id, auth, body, verified, _permit) = match frame {
            Ok(None) => return,
            Ok(Some((Frame::Request { id, auth, body }, verified, permit))) => {
                (id, Auth::Credential(auth), body, verified, permit)
            }
            Ok(Some((Frame::TokenRequest { id, auth, body }, verified, permit))) => {
                (id, Auth::Token(auth), body, verified, permit)
            }
            Ok(Some((other, _, _))) => {
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
            Err(e) => {
                answer_read_error(&mut wr, &peer, &slot, e).await;
                return;
            }
        };
        let checked = match (verified, &auth) {
            (Some(i), _) => Ok(i),
            (None, Auth::Credential(c)) => authenticate(&peer, c.as_ref(), &shared),
            (None, Auth::Token(t)) => authenticate_token(&peer, t, &shared).await,
        };
        let by_token = matches!(auth, Auth::Token(_));
        let ident = match checked {
            Ok(i) => i,
            Err(e) => {
                if write_frame(&mut wr, &Frame::Response { id, body: Response::Error(e) }).await.is_err() {
                    return;
                }
                continue;
            }
        };
        if !slot.authenticated() && !matches!(body, Request::Register(_)) && !slot.promote_command(ident.uid) {
            debug!(peer = %peer, uid = ident.uid, "command connection pool full: closing after the answer");
            close_after_answer = true;
        }
        let body: Reply = match body {
            _ if shared.standby.load(Ordering::Acquire) && !matches!(body, Request::Ping | Request::IssueCredential | Request::Takeover) => {
                warn!(peer = %peer, "Invalid RPC received {} while in standby mode", body.kind());
                Response::Error(SlurmError::new(ESLURM_IN_STANDBY_MODE)).into()
            }
            // A token stands for a user, not for a host or a daemon: it gets no credential
            // (that would outlive it), no token (a leaked token would renew itself), and no
            // node session.
            Request::IssueCredential | Request::IssueToken { .. } | Request::Register(_) if by_token => {
                warn!(peer = %peer, uid = ident.uid, "{} refused on a token-authenticated request", body.kind());
                Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED)).into()
            }
            Request::IssueToken { username, lifespan } => issue_token(&ident, username, lifespan, &shared).await.into(),
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
            // Slurm 22.05 `backup.c` (`_background_process_msg`): root and SlurmUser only; a
            // controller that leads already has nothing to do.
            Request::Takeover if !shared.is_admin(ident.uid) => Response::Error(SlurmError::new(ESLURM_ACCESS_DENIED)).into(),
            Request::Takeover => {
                if shared.standby.load(Ordering::Acquire) {
                    info!(peer = %peer, uid = ident.uid, "Performing background RPC: REQUEST_TAKEOVER");
                    shared.takeover.store(true, Ordering::Release);
                } else {
                    info!(peer = %peer, "REQUEST_TAKEOVER: this controller leads already");
                }
                Response::Done.into()
            }
            Request::Register(reg) => match register_refusal(&peer, &ident, &reg, &shared).await {
                Some(e) => Response::Error(e).into(),
                None if !slot.promote_node() => {
                    error!(peer = %peer, node = %reg.node, "node registration refused: {} node sessions open", shared.limits.node_sessions);
                    Response::Error(SlurmError::new(SLURM_COMMUNICATIONS_CONNECTION_ERROR)).into()
                }
                None => match shared.tx.clone() {
                    Some(tx) => {
                        node_session(rd, wr, buf, tx, id, reg, shared.clone(), shutdown).await;
                        return;
                    }
                    None => Response::Error(SlurmError::new(ESLURM_NOT_SUPPORTED)).into(),
                },
            },
            req => match &shared.tx {
                Some(tx) => {
                    let req = name_the_user(req, &ident, &shared).await;
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
        if write_reply(&mut wr, id, body).await.is_err() || close_after_answer {
            return;
        }
    }
}

/// Why a node registration is refused before it reaches the owner task, if it is: the
/// caller is not an admin (the cluster key signs node daemons' credentials as root), or the
/// connection does not come from the node's address. A registration binds to the node by
/// where it comes from: the TCP peer address must be one of `NodeAddr`'s addresses, or a
/// loopback address when `NodeAddr` is an address of this host (a node daemon on the
/// controller's host, and dev clusters where every `NodeAddr` is 127.0.0.1); on the Unix
/// socket the peer is on this host, so the same rule applies as for loopback. A node name
/// not in the configuration is left to the owner task (`Invalid node name specified`).
async fn register_refusal(peer: &Peer, ident: &Ident, reg: &flotilla_proto::Register, shared: &Shared) -> Option<SlurmError> {
    if !ident.admin {
        warn!(peer = %peer, uid = ident.uid, "node registration by a non-admin refused");
        return Some(SlurmError::new(ESLURM_ACCESS_DENIED));
    }
    let addr = shared.node_addrs.get(&reg.node)?;
    let from = match peer {
        Peer::Tcp(a) => a.ip().to_canonical(),
        Peer::Unix { .. } => IpAddr::from([127, 0, 0, 1]),
    };
    let resolved: Vec<IpAddr> = match addr.parse::<IpAddr>() {
        Ok(ip) => vec![ip.to_canonical()],
        Err(_) => match tokio::time::timeout(MESSAGE_TIMEOUT, tokio::net::lookup_host((addr.as_str(), 0))).await {
            Ok(Ok(it)) => it.map(|a| a.ip().to_canonical()).collect(),
            _ => Vec::new(),
        },
    };
    let local = |ip: &IpAddr| ip.is_loopback() || std::net::UdpSocket::bind((*ip, 0)).is_ok();
    if resolved.contains(&from) || (from.is_loopback() && resolved.iter().any(local)) {
        return None;
    }
    error!(peer = %peer, node = %reg.node, node_addr = %addr, ?resolved, "node registration refused: it does not come from the node's NodeAddr");
    Some(SlurmError::with_message(
        ESLURM_ACCESS_DENIED,
        format!("registration of node {} from {from}, which is not its NodeAddr {addr}", reg.node),
    ))
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
    let ok = matches!(resp, Reply::Msg(Response::Registered));
    if write_reply(&mut wr, id, resp).await.is_err() || !ok {
        return;
    }
    info!(node = %node, conn, "node session open");
    // A node session is authenticated: the large frame, no idle limit (the owner's
    // SlurmdTimeout judges a silent node), but each frame within its deadline.
    let peer = Peer::Unix { uid: 0, gid: 0, pid: 0 };
    let rules = Rules { max: shared.max_frame, gate: false, start_by: None };
    // The first tick is at once: the node hears the keepalive right after its registration
    // (it arms the node's silence check). After that a keepalive goes out only when
    // `keepalive_every` (slurm.conf's rule: Slurm's ping cadence with one controller, a third
    // of the lease with backups) passed without any other message to the node: every message counts as
    // liveness there, so a busy node gets none (5,000 frames/s fewer at 10,000 nodes). Each
    // message the owner sends follows a turn that fenced or checked the lease, so it proves
    // leadership as a keepalive does. A Pong is no such proof and restarts nothing.
    //
    // The keepalive frame is encoded once per session (its epoch does not change once this
    // controller leads; it is checked anyway), not once per tick.
    let mut keepalive = tokio::time::interval(shared.keepalive_every);
    keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut armed = false;
    let mut keepalive_frame: Option<(u64, Vec<u8>)> = None;
    loop {
        tokio::select! {
            f = read_frame(&mut rd, &mut buf, rules, &peer, &shared) => match f {
                Ok((Frame::FromNode(msg), _, _)) => {
                    if tx.send(Event::NodeMsg { conn, node: node.clone(), msg }).await.is_err() {
                        break;
                    }
                }
                Ok((Frame::Request { id, body: Request::Ping, .. }, _, _)) => {
                    if write_frame(&mut wr, &Frame::Response { id, body: Response::Pong }).await.is_err() {
                        break;
                    }
                }
                Ok(_) => warn!(node = %node, "unexpected frame on a node session"),
                Err(e) => {
                    if !matches!(e, ReadError::Proto(ProtoError::Closed)) {
                        warn!(node = %node, conn, "node session closed: {e:?}");
                    }
                    break;
                }
            },
            m = nrx.recv() => match m {
                Some(m) => {
                    if write_frame(&mut wr, &to_node(&shared, m)).await.is_err() {
                        break;
                    }
                    if armed {
                        keepalive.reset();
                    }
                }
                None => break,
            },
            _ = keepalive.tick() => {
                if shared.lease_fresh() {
                    let epoch = shared.epoch.load(Ordering::Acquire);
                    if keepalive_frame.as_ref().is_none_or(|(e, _)| *e != epoch) {
                        match encode_frame(&to_node(&shared, CtlToNode::Keepalive)) {
                            Ok(bytes) => keepalive_frame = Some((epoch, bytes)),
                            Err(_) => break,
                        }
                    }
                    let Some((_, bytes)) = &keepalive_frame else { break };
                    if wr.write_all(bytes).await.is_err() {
                        break;
                    }
                    armed = true;
                }
            }
            _ = shutdown.changed() => break,
        }
    }
    // Closed first, so that the owner sees this session gone (`tx.is_closed()`) even before
    // it handles `NodeGone` — a restarted daemon's registration may overtake it.
    drop(nrx);
    let _ = tx.send(Event::NodeGone { conn, node }).await;
}

/// A message to a node as this controller sends it: with its lease epoch once it leads
/// ([`Frame::ToNodeFenced`]), plain before.
fn to_node(shared: &Shared, msg: CtlToNode) -> Frame {
    match shared.epoch.load(Ordering::Acquire) {
        0 => Frame::ToNode(msg),
        epoch => Frame::ToNodeFenced { epoch, msg },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_proto::{ClusterKey, SubmitJob};

    fn shared(limits: Limits) -> Arc<Shared> {
        let key = ClusterKey::from_bytes(&[5u8; 32]).unwrap();
        Arc::new(Shared::new(None, Verifier::new(key, 300, 0), 0, "h".into(), Arc::new(AtomicU64::new(0)), limits, 1 << 20))
    }

    /// A submission for another uid than the caller's is not named (no NSS lookup of a uid
    /// the caller chose) unless the caller is an admin; the caller's own uid is.
    #[tokio::test]
    async fn only_a_uid_the_caller_may_use_is_looked_up() {
        let sh = shared(Limits::default());
        let sub = |uid| Request::SubmitJob(Box::new(SubmitJob { uid, user: "claimed".into(), ..SubmitJob::default() }));
        let user = |r: Request| match r {
            Request::SubmitJob(s) => s.user,
            _ => unreachable!(),
        };
        let alice = Ident { uid: 2001, gid: 2001, admin: false };
        assert_eq!(user(name_the_user(sub(0), &alice, &sh).await), "");
        assert_eq!(user(name_the_user(sub(2001), &alice, &sh).await), crate::users::lookup(2001));
        match name_the_user(sub(NO_VAL), &alice, &sh).await {
            Request::SubmitJob(s) => assert_eq!((s.uid, s.gid, s.user), (2001, 2001, crate::users::lookup(2001)), "NO_VAL is the caller"),
            _ => unreachable!(),
        }
        let root = Ident { uid: 0, gid: 0, admin: true };
        assert_eq!(user(name_the_user(sub(2002), &root, &sh).await), crate::users::lookup(2002));
    }

    fn with_jwt(policy: IssuePolicy) -> Arc<Shared> {
        let key = ClusterKey::from_bytes(&[5u8; 32]).unwrap();
        let mut s = Shared::new(None, Verifier::new(key, 300, 0), 0, "h".into(), Arc::new(AtomicU64::new(0)), Limits::default(), 1 << 20);
        s.jwt = Some(JwtKey::from_bytes(&[6u8; 32]).unwrap());
        s.jwt_policy = policy;
        Arc::new(s)
    }

    fn code(r: Result<Ident, SlurmError>) -> i32 {
        r.map_or_else(|e| e.code, |i| panic!("accepted as {i:?}"))
    }

    /// A token stands for its user (`nobody`, uid 65534, and `root` are in every Debian
    /// password database); only root's may name another user; every refusal is Slurm's bare
    /// `Protocol authentication error` and counted.
    #[tokio::test]
    async fn a_token_authenticates_its_user_and_only_an_admin_token_acts_for_another() {
        let sh = with_jwt(IssuePolicy::default());
        let peer = Peer::Tcp("127.0.0.1:1".parse().unwrap());
        let key = sh.jwt.clone().unwrap();
        let now = wall_now();
        let tok = |user: &str, header: &str| TokenAuth { user_name: header.into(), token: key.issue(user, now, 60) };
        let nobody = authenticate_token(&peer, &tok("nobody", ""), &sh).await.unwrap();
        assert_eq!((nobody.uid, nobody.admin), (65534, false));
        let same = authenticate_token(&peer, &tok("nobody", "nobody"), &sh).await.unwrap();
        assert_eq!(same.uid, 65534);
        assert_eq!(code(authenticate_token(&peer, &tok("nobody", "root"), &sh).await), SLURM_PROTOCOL_AUTHENTICATION_ERROR);
        let acting = authenticate_token(&peer, &tok("root", "nobody"), &sh).await.unwrap();
        assert_eq!((acting.uid, acting.admin), (65534, false), "root's token acting for nobody has nobody's rights");
        let root = authenticate_token(&peer, &tok("root", ""), &sh).await.unwrap();
        assert!(root.admin);
        let expired = TokenAuth { user_name: String::new(), token: key.issue("root", now - 100, 10) };
        assert_eq!(code(authenticate_token(&peer, &expired, &sh).await), SLURM_PROTOCOL_AUTHENTICATION_ERROR);
        let other = TokenAuth { user_name: String::new(), token: JwtKey::from_bytes(&[7u8; 32]).unwrap().issue("root", now, 60) };
        let e = authenticate_token(&peer, &other, &sh).await.unwrap_err();
        assert_eq!((e.code, e.messages.len()), (SLURM_PROTOCOL_AUTHENTICATION_ERROR, 0), "no reason told to the client");
        assert_eq!(code(authenticate_token(&peer, &tok("no-such-user-flotilla", ""), &sh).await), SLURM_PROTOCOL_AUTHENTICATION_ERROR);
        assert_eq!(sh.auth_failures.load(Ordering::Relaxed), 4);
        let without = shared(Limits::default());
        assert_eq!(code(authenticate_token(&peer, &tok("root", ""), &without).await), SLURM_PROTOCOL_AUTHENTICATION_ERROR);
    }

    /// `scontrol token`'s rules (`_slurm_rpc_auth_token`): another user's token for admins
    /// only, `disable_token_creation`, `max_token_lifespan`, and no token without a key.
    #[tokio::test]
    async fn tokens_are_issued_by_slurms_rules() {
        let user = Ident { uid: 65534, gid: 65534, admin: false };
        let root = Ident { uid: 0, gid: 0, admin: true };
        let err = |r: Response| match r {
            Response::Error(e) => e.code,
            r => panic!("issued: {r:?}"),
        };
        let claims = |sh: &Shared, r: Response| match r {
            Response::Token(Some(t)) => sh.jwt.as_ref().unwrap().verify(&t, wall_now()).unwrap(),
            r => panic!("no token: {r:?}"),
        };
        let sh = with_jwt(IssuePolicy { disabled: false, max_lifespan_s: Some(600) });
        let own = claims(&sh, issue_token(&user, None, 0, &sh).await);
        assert_eq!((own.user.as_str(), own.exp - own.iat.unwrap()), ("nobody", 600), "the default is capped by the maximum");
        let named = claims(&sh, issue_token(&user, Some("nobody".into()), 60, &sh).await);
        assert_eq!(named.exp - named.iat.unwrap(), 60);
        assert_eq!(err(issue_token(&user, Some("root".into()), 0, &sh).await), ESLURM_USER_ID_MISSING);
        assert_eq!(err(issue_token(&user, None, 601, &sh).await), ESLURM_INVALID_TIME_LIMIT);
        let long = claims(&sh, issue_token(&root, Some("nobody".into()), 7200, &sh).await);
        assert_eq!((long.user.as_str(), long.exp - long.iat.unwrap()), ("nobody", 7200), "admins are not capped");
        let off = with_jwt(IssuePolicy { disabled: true, max_lifespan_s: None });
        assert_eq!(err(issue_token(&user, None, 0, &off).await), ESLURM_ACCESS_DENIED);
        let c = claims(&off, issue_token(&root, None, 0, &off).await);
        assert_eq!(c.exp - c.iat.unwrap(), 1800);
        assert_eq!(issue_token(&root, None, 0, &shared(Limits::default())).await, Response::Token(None));
    }

    /// Pools: a full pre-auth address evicts its oldest connection; Unix peers are capped
    /// per uid with admins apart; slots go back when dropped.
    #[test]
    fn pools_cap_and_evict() {
        let sh = shared(Limits { tcp_preauth: 3, tcp_preauth_per_ip: 2, unix_per_uid: 1, unix_admin: 1, ..Limits::default() });
        let a = IpAddr::from([10, 0, 0, 1]);
        let b = IpAddr::from([10, 0, 0, 2]);
        let s1 = Slot::tcp(&sh, a);
        let s2 = Slot::tcp(&sh, a);
        let s3 = Slot::tcp(&sh, a); // evicts s1
        assert_eq!(sh.connections().0, 2);
        let _s4 = Slot::tcp(&sh, b);
        let _s5 = Slot::tcp(&sh, b); // the pool is full: evicts the oldest (s2)
        assert_eq!(sh.connections().0, 3);
        let evicted = |s: &Slot| {
            let n = s.evicted.notified();
            ready_now(n)
        };
        assert!(evicted(&s1) && evicted(&s2) && !evicted(&s3));
        let u1 = Slot::unix(&sh, 2001).unwrap();
        assert!(Slot::unix(&sh, 2001).err().is_some_and(|e| e.contains("uid 2001")));
        let _r = Slot::unix(&sh, 0).unwrap();
        assert!(Slot::unix(&sh, 0).is_err());
        drop(u1);
        assert!(Slot::unix(&sh, 2001).is_ok());
        drop((s1, s2, s3));
        assert_eq!(sh.connections().0, 2);
    }

    /// Whether a `Notified` future is ready at once (it holds a stored permit).
    fn ready_now(n: tokio::sync::futures::Notified<'_>) -> bool {
        let mut n = std::pin::pin!(n);
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        std::future::Future::poll(n.as_mut(), &mut cx).is_ready()
    }
}
