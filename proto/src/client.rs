//! A blocking client (commands, tests, benchmarks): connect, handshake, call.

use crate::auth::Credential;
use crate::errno::SlurmError;
use crate::frame::{
    encode_frame, read_frame, write_frame, Frame, Hello, ProtoError, TokenAuth, DEFAULT_MAX_FRAME, MAX_ANSWER_FRAME, PREAUTH_MAX_FRAME,
};
use crate::msg::{Request, Response, Role};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// A TCP or Unix-socket connection.
#[derive(Debug)]
pub enum Stream {
    /// TCP.
    Tcp(TcpStream),
    /// Unix socket.
    Unix(UnixStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
        }
    }
}

/// Errors of a call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Framing or I/O.
    #[error(transparent)]
    Proto(#[from] ProtoError),
    /// The peer refused the handshake.
    #[error("connection refused by peer: {0}")]
    Refused(SlurmError),
    /// The peer answered something else than expected.
    #[error("unexpected answer from peer")]
    Unexpected,
}

/// A connection after a successful handshake.
#[derive(Debug)]
pub struct Client {
    stream: Stream,
    next_id: u64,
    /// Negotiated protocol version.
    pub version: u16,
    max_frame: usize,
}

/// The largest frame (body bytes) a client in `role` reads after the handshake.
///
/// Only a command or tool ([`Role::Command`], [`Role::Tool`]) reads answers up to
/// [`MAX_ANSWER_FRAME`]: it called the controller as an authenticated user (the kernel's peer
/// credential on the Unix socket, a credential or token on TCP), and job lists, `sacct` and
/// node lists grow with the cluster. A daemon's session (`slurmd`, `sackd`, the controller
/// calling out) keeps [`DEFAULT_MAX_FRAME`], so that whatever answers at a configured address
/// cannot make a root process take a gigabyte. The handshake answer, sent before either side
/// has proved anything, is read with [`PREAUTH_MAX_FRAME`] in every role.
pub fn answer_limit(role: Role) -> usize {
    match role {
        Role::Command | Role::Tool => MAX_ANSWER_FRAME,
        Role::NodeDaemon | Role::Sackd | Role::Controller => DEFAULT_MAX_FRAME,
    }
}

impl Client {
    /// Connects over TCP and shakes hands as `role`.
    pub fn connect_tcp(addr: impl ToSocketAddrs, role: Role) -> Result<Client, ClientError> {
        let s = TcpStream::connect(addr).map_err(ProtoError::from)?;
        let _ = s.set_nodelay(true);
        Client::handshake(Stream::Tcp(s), role)
    }

    /// Connects to a Unix socket and shakes hands as `role`.
    pub fn connect_unix(path: &Path, role: Role) -> Result<Client, ClientError> {
        let s = UnixStream::connect(path).map_err(ProtoError::from)?;
        Client::handshake(Stream::Unix(s), role)
    }

    /// Shakes hands on an open stream.
    pub fn handshake(mut stream: Stream, role: Role) -> Result<Client, ClientError> {
        write_frame(&mut stream, &Frame::Hello(Hello::current(role)))?;
        match read_frame(&mut stream, PREAUTH_MAX_FRAME)? {
            Frame::HelloOk { version } => Ok(Client {
                stream,
                next_id: 1,
                version,
                max_frame: answer_limit(role),
            }),
            Frame::Refused(e) => Err(ClientError::Refused(e)),
            _ => Err(ClientError::Unexpected),
        }
    }

    /// Connects to a Unix socket and makes ONE call, pipelined: the hello and the request go
    /// out in one write, without waiting for the peer's `HelloOk` first, which saves a round
    /// trip (and two process wake-ups) for commands that make a single call. The server reads
    /// frames from a buffer, so a request behind the hello is simply the next frame.
    ///
    /// Errors: as [`Client::connect_unix`] and [`Client::call`]; a refused handshake is
    /// [`ClientError::Refused`] (the request is then never looked at by the server).
    pub fn call_once_unix(path: &Path, role: Role, auth: Option<Credential>, body: Request) -> Result<Response, ClientError> {
        let s = UnixStream::connect(path).map_err(ProtoError::from)?;
        Client::call_once(Stream::Unix(s), role, auth, body)
    }

    /// [`Client::call_once_unix`] over TCP.
    pub fn call_once_tcp(
        addr: impl ToSocketAddrs,
        role: Role,
        auth: Option<Credential>,
        body: Request,
    ) -> Result<Response, ClientError> {
        let s = TcpStream::connect(addr).map_err(ProtoError::from)?;
        let _ = s.set_nodelay(true);
        Client::call_once(Stream::Tcp(s), role, auth, body)
    }

    /// One pipelined call on an open stream (see [`Client::call_once_unix`]): hello and request
    /// (id 1) written together, then the handshake answer and the response read in order.
    pub fn call_once(stream: Stream, role: Role, auth: Option<Credential>, body: Request) -> Result<Response, ClientError> {
        Client::call_once_parts(stream, role, auth, body, None)
    }

    /// [`Client::call_once`] for a request answered in parts ([`Request::QueryQueueParts`]):
    /// each [`Response::QueuePart`] goes to `on_part` as it arrives, and the last frame (a
    /// `Response::Queue`, or an error) is returned. Without `on_part`, a part is returned as
    /// any answer is.
    ///
    /// Errors: as [`Client::call_once`]; a connection lost between two parts is an error
    /// after the parts before it were handed over.
    pub fn call_once_parts(
        mut stream: Stream,
        role: Role,
        auth: Option<Credential>,
        body: Request,
        mut on_part: Option<&mut dyn FnMut(crate::QueueRows)>,
    ) -> Result<Response, ClientError> {
        let mut bytes = encode_frame(&Frame::Hello(Hello::current(role)))?;
        bytes.extend_from_slice(&encode_frame(&Frame::Request { id: 1, auth, body })?);
        stream.write_all(&bytes).map_err(ProtoError::from)?;
        stream.flush().map_err(ProtoError::from)?;
        let version = match read_frame(&mut stream, PREAUTH_MAX_FRAME)? {
            Frame::HelloOk { version } => version,
            Frame::Refused(e) => return Err(ClientError::Refused(e)),
            _ => return Err(ClientError::Unexpected),
        };
        let mut c = Client {
            stream,
            next_id: 2,
            version,
            max_frame: answer_limit(role),
        };
        loop {
            match (c.recv()?, on_part.as_deref_mut()) {
                (Frame::Response { id: 1, body: Response::QueuePart(rows) }, Some(f)) => f(rows),
                (Frame::Response { id, body }, _) if id == 1 || id == 0 => return Ok(body),
                (Frame::Response { .. }, _) => continue,
                _ => return Err(ClientError::Unexpected),
            }
        }
    }

    /// Sends a request and waits for its response.
    pub fn call(&mut self, auth: Option<Credential>, body: Request) -> Result<Response, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        write_frame(&mut self.stream, &Frame::Request { id, auth, body })?;
        loop {
            match self.recv()? {
                Frame::Response { id: rid, body } if rid == id || rid == 0 => return Ok(body),
                Frame::Response { .. } => continue,
                _ => return Err(ClientError::Unexpected),
            }
        }
    }

    /// [`Client::call`] authenticated by a JSON Web Token ([`Frame::TokenRequest`]).
    pub fn call_token(&mut self, auth: TokenAuth, body: Request) -> Result<Response, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        write_frame(&mut self.stream, &Frame::TokenRequest { id, auth, body })?;
        loop {
            match self.recv()? {
                Frame::Response { id: rid, body } if rid == id || rid == 0 => return Ok(body),
                Frame::Response { .. } => continue,
                _ => return Err(ClientError::Unexpected),
            }
        }
    }

    /// Sends any frame.
    pub fn send(&mut self, f: &Frame) -> Result<(), ClientError> {
        write_frame(&mut self.stream, f)?;
        Ok(())
    }

    /// Receives the next frame.
    pub fn recv(&mut self) -> Result<Frame, ClientError> {
        Ok(read_frame(&mut self.stream, self.max_frame)?)
    }

    /// The underlying stream (to set timeouts, or to write raw bytes in tests).
    pub fn stream(&mut self) -> &mut Stream {
        &mut self.stream
    }
}

/// Asks a local daemon (sackd, slurmd, the controller's Unix socket) for a credential.
pub fn fetch_credential(socket: &Path) -> Result<Credential, ClientError> {
    match Client::call_once_unix(socket, Role::Command, None, Request::IssueCredential)? {
        Response::Credential(cred) => Ok(cred),
        Response::Error(e) => Err(ClientError::Refused(e)),
        _ => Err(ClientError::Unexpected),
    }
}

/// Following the leader over several controllers (slurm.conf's `SlurmctldHost=` lines, in
/// order), as Slurm 22.05's `slurm_send_recv_controller_msg` does: one copy of the rule for
/// every client that asks a controller (the commands' `Ctl::call`, `slurmrestd`), each
/// driving it with its own I/O, blocking or async.
///
/// The rule: try the controllers one after another, starting at `start` (slurm.conf's first
/// for a command; the one that led last for a long-lived client); a controller that cannot be
/// reached, or answers `ESLURM_IN_STANDBY_MODE` (a standby), passes the request to the next
/// ([`Step::Try`]); the first other answer ends the search. After a round with no leader the
/// round starts again after half `SlurmctldTimeout` (at least 1 s, [`Step::Wait`]) until one
/// and a half `SlurmctldTimeout` have passed since the search began (a takeover in
/// progress), then [`Step::GiveUp`] (the caller's last answer is its error). With one
/// controller there is one try and no wait. The caller sends a request again only where the
/// controller tried before never got it (it was not reached) or refused it as a standby, so
/// nothing is done twice. Pure: the caller passes the time.
#[derive(Debug, Clone)]
pub struct LeaderSearch {
    hosts: usize,
    start: usize,
    tried: usize,
    round_wait: std::time::Duration,
    deadline: std::time::Instant,
}

/// What to do next in a [`LeaderSearch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Try controller `i` (an index into slurm.conf's order).
    Try(usize),
    /// Wait this long, then ask again.
    Wait(std::time::Duration),
    /// No controller led in time.
    GiveUp,
}

impl LeaderSearch {
    /// A search over `hosts` controllers from `start` (taken modulo `hosts`) with
    /// `SlurmctldTimeout` = `slurmctld_timeout` (at least 1 s), begun at `now`.
    pub fn new(hosts: usize, start: usize, slurmctld_timeout: std::time::Duration, now: std::time::Instant) -> LeaderSearch {
        let timeout = slurmctld_timeout.max(std::time::Duration::from_secs(1));
        LeaderSearch {
            hosts: hosts.max(1),
            start: start % hosts.max(1),
            tried: 0,
            round_wait: (timeout / 2).max(std::time::Duration::from_secs(1)),
            deadline: now + timeout * 3 / 2,
        }
    }

    /// One round only, no waiting (a readiness probe: is there a leader now?).
    pub fn one_round(mut self, now: std::time::Instant) -> LeaderSearch {
        self.deadline = now;
        self
    }

    /// The next step at `now`, after the last [`Step::Try`] passed the request on (an answer
    /// that ends the search ends it: the caller does not ask again).
    pub fn next(&mut self, now: std::time::Instant) -> Step {
        if self.tried < self.hosts {
            let i = (self.start + self.tried) % self.hosts;
            self.tried += 1;
            return Step::Try(i);
        }
        if self.hosts == 1 || now >= self.deadline {
            return Step::GiveUp;
        }
        self.tried = 0;
        Step::Wait(self.round_wait.min(self.deadline - now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::negotiate;
    use std::time::Duration;

    /// A peer that reads BOTH frames before it answers the hello: a client that waited for
    /// `HelloOk` before sending its request would leave it without a request (the read times
    /// out and the test fails instead of hanging).
    fn pipelined_peer(mut s: UnixStream, refuse: bool) -> std::thread::JoinHandle<Result<(Hello, Frame), String>> {
        std::thread::spawn(move || {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let hello = match read_frame(&mut s, DEFAULT_MAX_FRAME).map_err(|e| e.to_string())? {
                Frame::Hello(h) => h,
                f => return Err(format!("first frame {f:?}")),
            };
            let req = read_frame(&mut s, DEFAULT_MAX_FRAME).map_err(|e| format!("no request behind the hello: {e}"))?;
            if refuse {
                write_frame(&mut s, &Frame::Refused(SlurmError::new(crate::errno::SLURM_PROTOCOL_VERSION_ERROR))).unwrap();
                return Ok((hello, req));
            }
            let version = negotiate(&hello).unwrap();
            write_frame(&mut s, &Frame::HelloOk { version }).unwrap();
            // A stray response for another id first: the client must skip it.
            write_frame(&mut s, &Frame::Response { id: 7, body: Response::Error(SlurmError::new(1)) }).unwrap();
            write_frame(&mut s, &Frame::Response { id: 1, body: Response::Pong }).unwrap();
            Ok((hello, req))
        })
    }

    #[test]
    fn leader_search_one_controller_is_one_try() {
        let t0 = std::time::Instant::now();
        let mut s = LeaderSearch::new(1, 0, std::time::Duration::from_secs(6), t0);
        assert_eq!(s.next(t0), Step::Try(0));
        assert_eq!(s.next(t0), Step::GiveUp);
    }

    /// Rounds in order from `start`, half `SlurmctldTimeout` apart, for one and a half
    /// `SlurmctldTimeout`; the last wait is cut to the deadline.
    #[test]
    fn leader_search_rounds_until_the_deadline() {
        use std::time::Duration;
        let t0 = std::time::Instant::now();
        let mut s = LeaderSearch::new(3, 1, Duration::from_secs(4), t0);
        assert_eq!([s.next(t0), s.next(t0), s.next(t0)], [Step::Try(1), Step::Try(2), Step::Try(0)]);
        assert_eq!(s.next(t0), Step::Wait(Duration::from_secs(2)));
        let t = t0 + Duration::from_secs(2);
        assert_eq!([s.next(t), s.next(t), s.next(t)], [Step::Try(1), Step::Try(2), Step::Try(0)]);
        let t = t0 + Duration::from_millis(5_500);
        assert_eq!(s.next(t), Step::Wait(Duration::from_millis(500)), "cut to the deadline (6 s)");
        let t = t0 + Duration::from_secs(6);
        assert_eq!(s.next(t), Step::Try(1));
        s.next(t);
        s.next(t);
        assert_eq!(s.next(t), Step::GiveUp);
        // A short SlurmctldTimeout still waits 1 s between rounds; start wraps.
        let mut s = LeaderSearch::new(2, 5, Duration::from_secs(0), t0);
        assert_eq!([s.next(t0), s.next(t0), s.next(t0)], [Step::Try(1), Step::Try(0), Step::Wait(Duration::from_secs(1))]);
        let mut s = LeaderSearch::new(2, 1, Duration::from_secs(6), t0).one_round(t0);
        assert_eq!([s.next(t0), s.next(t0), s.next(t0)], [Step::Try(1), Step::Try(0), Step::GiveUp]);
    }

    #[test]
    fn call_once_sends_hello_and_request_together() {
        let (a, b) = UnixStream::pair().unwrap();
        let peer = pipelined_peer(b, false);
        let resp = Client::call_once(Stream::Unix(a), Role::Command, None, Request::Ping).unwrap();
        assert_eq!(resp, Response::Pong);
        let (hello, req) = peer.join().unwrap().unwrap();
        assert_eq!(hello, Hello::current(Role::Command));
        match req {
            Frame::Request { id: 1, auth: None, body: Request::Ping } => {}
            f => panic!("request frame {f:?}"),
        }
    }

    #[test]
    fn call_once_reports_a_refused_handshake() {
        let (a, b) = UnixStream::pair().unwrap();
        let peer = pipelined_peer(b, true);
        match Client::call_once(Stream::Unix(a), Role::Command, None, Request::Ping) {
            Err(ClientError::Refused(e)) => assert_eq!(e.code, crate::errno::SLURM_PROTOCOL_VERSION_ERROR),
            r => panic!("{r:?}"),
        }
        peer.join().unwrap().unwrap();
    }

    /// A peer that answers the hello, reads one request and answers it with an error whose
    /// message is `len` bytes (a frame a little over `len`).
    fn big_answer_peer(mut s: UnixStream, len: usize) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let Ok(Frame::Hello(h)) = read_frame(&mut s, DEFAULT_MAX_FRAME) else { return };
            write_frame(&mut s, &Frame::HelloOk { version: negotiate(&h).unwrap() }).unwrap();
            let Ok(Frame::Request { id, .. }) = read_frame(&mut s, DEFAULT_MAX_FRAME) else { return };
            let body = Response::Error(SlurmError::with_message(1, "x".repeat(len)));
            // The client may hang up once it has read the length: ignore a broken pipe.
            let _ = write_frame(&mut s, &Frame::Response { id, body });
        })
    }

    #[test]
    fn a_command_reads_an_answer_past_the_default_frame_limit() {
        let (a, b) = UnixStream::pair().unwrap();
        let len = DEFAULT_MAX_FRAME + 1024;
        let peer = big_answer_peer(b, len);
        match Client::call_once(Stream::Unix(a), Role::Command, None, Request::Ping) {
            Ok(Response::Error(e)) => assert_eq!(e.messages.iter().map(String::len).collect::<Vec<_>>(), [len]),
            r => panic!("{:?}", r.map(|_| ())),
        }
        peer.join().unwrap();
    }

    #[test]
    fn a_daemon_session_keeps_the_default_frame_limit() {
        let (a, b) = UnixStream::pair().unwrap();
        let peer = big_answer_peer(b, DEFAULT_MAX_FRAME + 1024);
        let mut c = Client::handshake(Stream::Unix(a), Role::NodeDaemon).unwrap();
        match c.call(None, Request::Ping) {
            Err(ClientError::Proto(ProtoError::FrameTooLarge { max, .. })) => assert_eq!(max, DEFAULT_MAX_FRAME),
            r => panic!("{:?}", r.map(|_| ())),
        }
        drop(c);
        peer.join().unwrap();
    }

    #[test]
    fn a_handshake_answer_is_read_with_the_pre_auth_limit() {
        for role in [Role::Command, Role::NodeDaemon] {
            let (a, mut b) = UnixStream::pair().unwrap();
            let peer = std::thread::spawn(move || {
                let _ = read_frame(&mut b, DEFAULT_MAX_FRAME);
                let refusal = SlurmError::with_message(1, "x".repeat(PREAUTH_MAX_FRAME));
                let _ = write_frame(&mut b, &Frame::Refused(refusal));
            });
            match Client::handshake(Stream::Unix(a), role) {
                Err(ClientError::Proto(ProtoError::FrameTooLarge { max, .. })) => assert_eq!(max, PREAUTH_MAX_FRAME),
                r => panic!("{role:?}: {:?}", r.map(|_| ())),
            }
            peer.join().unwrap();
        }
    }
}
