//! Framing and handshake.
//!
//! A frame is a `u32` big-endian body length followed by the postcard encoding of a [`Frame`].
//! Bodies longer than the maximum (default [`DEFAULT_MAX_FRAME`], 16 MiB) are refused before
//! any allocation. [`decode_frame`] is pure and never panics on any input (fuzzed with
//! proptest below and in the controller's tests).
//!
//! Handshake: the connecting side sends [`Frame::Hello`] with the protocol versions it speaks;
//! the listening side answers [`Frame::HelloOk`] with the highest common version, or
//! [`Frame::Refused`] (Slurm's `SLURM_PROTOCOL_VERSION_ERROR`) and closes.

use crate::auth::Credential;
use crate::errno::{self, SlurmError};
use crate::msg::{CtlToNode, NodeToCtl, Request, Response, Role};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};

/// Default maximum frame body size: 16 MiB.
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;
/// Maximum frame body (bytes) a listener reads from a peer it has not authenticated yet: the
/// hello, and the head of a request up to the end of its credential
/// ([`peek_request_auth`]). The largest such head is about 350 bytes (a request id, a
/// credential with a 253-byte host name); 4 KiB leaves room. A larger frame is read only
/// once the credential at its head has been verified.
pub const PREAUTH_MAX_FRAME: usize = 4096;
/// Maximum frame body (bytes) a command's or tool's [`crate::client::Client`] reads as an
/// answer from the controller it called as an authenticated user: 1 GiB. Answers grow with
/// the cluster — `sacct` over 150,000 jobs is about 30 MB, past [`DEFAULT_MAX_FRAME`] — and
/// memory past [`READ_RESERVE_MAX`] still grows with the bytes that arrive, not with the
/// length announced ([`read_frame`]). Daemons' sessions keep [`DEFAULT_MAX_FRAME`] and every
/// handshake answer [`PREAUTH_MAX_FRAME`] ([`crate::client::answer_limit`]).
pub const MAX_ANSWER_FRAME: usize = 1 << 30;
/// The most [`read_frame`] reserves for a frame's body before its bytes arrive: 16 MiB. A
/// peer that announces more gets that much at first and more only as its bytes come.
pub const READ_RESERVE_MAX: usize = 16 << 20;
/// Oldest protocol version this build speaks.
pub const PROTOCOL_VERSION_MIN: u16 = 1;
/// Newest protocol version this build speaks.
pub const PROTOCOL_VERSION_MAX: u16 = 1;

/// Errors of framing and encoding.
#[derive(Debug, thiserror::Error)]
pub enum ProtoError {
    /// The length prefix announces a body over the maximum.
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    FrameTooLarge {
        /// Announced length.
        len: usize,
        /// Maximum accepted.
        max: usize,
    },
    /// The body is not a valid postcard `Frame`, or has bytes left over.
    #[error("undecodable frame: {0}")]
    Decode(String),
    /// Encoding failed (a frame too large to send).
    #[error("cannot encode frame: {0}")]
    Encode(String),
    /// The peer closed the connection.
    #[error("connection closed")]
    Closed,
    /// I/O error on the connection.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl ProtoError {
    /// The Slurm error answered to a peer that sent this.
    pub fn to_slurm(&self) -> SlurmError {
        match self {
            ProtoError::FrameTooLarge { .. } => SlurmError::new(errno::SLURM_PROTOCOL_INSANE_MSG_LENGTH),
            _ => SlurmError::new(errno::SLURM_UNEXPECTED_MSG_ERROR),
        }
    }
}

/// The first message of a connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Oldest protocol version the sender speaks.
    pub min_version: u16,
    /// Newest protocol version the sender speaks.
    pub max_version: u16,
    /// What the sender is.
    pub role: Role,
}

impl Hello {
    /// This build's hello for `role`.
    pub fn current(role: Role) -> Hello {
        Hello {
            min_version: PROTOCOL_VERSION_MIN,
            max_version: PROTOCOL_VERSION_MAX,
            role,
        }
    }
}

/// Everything that travels on a connection. Append-only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Frame {
    /// Handshake, first frame from the connecting side.
    Hello(Hello),
    /// Handshake accepted at this version.
    HelloOk {
        /// Negotiated version.
        version: u16,
    },
    /// Handshake or connection refused; the sender closes after it.
    Refused(SlurmError),
    /// A request. `auth` is required on TCP; on a local Unix socket the kernel's peer
    /// credentials are used instead.
    Request {
        /// Correlation id, echoed in the response.
        id: u64,
        /// Signed credential.
        auth: Option<Credential>,
        /// The request.
        body: Request,
    },
    /// The answer to the request with the same id.
    Response {
        /// Correlation id.
        id: u64,
        /// The answer.
        body: Response,
    },
    /// Controller to node daemon, on a registered node session.
    ToNode(CtlToNode),
    /// Node daemon to controller, on a registered node session.
    FromNode(NodeToCtl),
    /// A request authenticated by a JSON Web Token instead of a [`Credential`]: what
    /// `slurmrestd` forwards for an HTTP client that sent `X-SLURM-USER-NAME` and
    /// `X-SLURM-USER-TOKEN` (Slurm's `auth/jwt`). The controller verifies the token
    /// (`AuthAltTypes=auth/jwt`, `AuthAltParameters=jwt_key=`) and acts as the user it names;
    /// `auth.user_name` may differ from the token's user only when that user is an admin.
    TokenRequest {
        /// Correlation id, echoed in the response.
        id: u64,
        /// The token and the user to act as.
        auth: TokenAuth,
        /// The request.
        body: Request,
    },
    /// Controller to node daemon, on a registered node session, from the controller that
    /// leads in `epoch`: the leader lease's fencing token (`slurmctld`'s `store::lease`). A
    /// node daemon remembers the highest epoch it has seen (kept in its spool across restarts)
    /// and refuses a message of a lower one, so that a paused or cut-off old leader can launch,
    /// kill or requeue nothing. A plain [`Frame::ToNode`] counts as epoch 0.
    ToNodeFenced {
        /// The sender's lease epoch (1 or more).
        epoch: u64,
        /// The message.
        msg: CtlToNode,
    },
}

/// A JSON Web Token and the user name sent with it (Slurm's `X-SLURM-USER-NAME` and
/// `X-SLURM-USER-TOKEN` headers). The token is never printed.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenAuth {
    /// The user to act as (`X-SLURM-USER-NAME`); empty: the token's own user.
    pub user_name: String,
    /// The token (`X-SLURM-USER-TOKEN`), compact JWS: `header.payload.signature`.
    pub token: String,
}

impl std::fmt::Debug for TokenAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAuth").field("user_name", &self.user_name).finish_non_exhaustive()
    }
}

/// Picks the protocol version for a peer's hello: the highest version both speak, or the
/// refusal to send.
pub fn negotiate(peer: &Hello) -> Result<u16, SlurmError> {
    let hi = peer.max_version.min(PROTOCOL_VERSION_MAX);
    let lo = peer.min_version.max(PROTOCOL_VERSION_MIN);
    if peer.min_version > peer.max_version || hi < lo {
        return Err(SlurmError::with_message(
            errno::SLURM_PROTOCOL_VERSION_ERROR,
            format!(
                "peer speaks protocol versions {}-{}, this controller {}-{}",
                peer.min_version, peer.max_version, PROTOCOL_VERSION_MIN, PROTOCOL_VERSION_MAX
            ),
        ));
    }
    Ok(hi)
}

/// Encodes a frame: length prefix and postcard body.
pub fn encode_frame(frame: &Frame) -> Result<Vec<u8>, ProtoError> {
    let mut out = postcard::to_extend(frame, vec![0u8; 4]).map_err(|e| ProtoError::Encode(e.to_string()))?;
    let len = out.len() - 4;
    let len32 = u32::try_from(len).map_err(|_| ProtoError::Encode(format!("{len} bytes")))?;
    out[..4].copy_from_slice(&len32.to_be_bytes());
    Ok(out)
}

/// Decodes one frame from the start of `buf` with the default maximum size.
/// `Ok(None)`: more bytes are needed. `Ok(Some((frame, used)))`: a frame and the bytes it took.
pub fn decode_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, ProtoError> {
    decode_frame_max(buf, DEFAULT_MAX_FRAME)
}

/// [`decode_frame`] with an explicit maximum body size.
pub fn decode_frame_max(buf: &[u8], max: usize) -> Result<Option<(Frame, usize)>, ProtoError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
    if len > max {
        return Err(ProtoError::FrameTooLarge { len, max });
    }
    let Some(body) = buf.get(4..4 + len) else {
        return Ok(None);
    };
    let (frame, rest) =
        postcard::take_from_bytes::<Frame>(body).map_err(|e| ProtoError::Decode(e.to_string()))?;
    if !rest.is_empty() {
        return Err(ProtoError::Decode(format!("{} trailing bytes", rest.len())));
    }
    Ok(Some((frame, 4 + len)))
}

/// The frame `encode_frame(&Frame::Response { id, body })` gives, from `body` already encoded
/// (postcard) — for answers encoded without building the `Response` (see
/// [`crate::jobview::encode_jobs_response`]).
pub fn encode_response_frame(id: u64, body: &[u8]) -> Result<Vec<u8>, ProtoError> {
    // The variant's index and the id, as the derived encoding writes them before the body.
    let mut out = postcard::to_extend(&(RESPONSE_VARIANT, id), vec![0u8; 4]).map_err(|e| ProtoError::Encode(e.to_string()))?;
    out.extend_from_slice(body);
    let len = out.len() - 4;
    let len32 = u32::try_from(len).map_err(|_| ProtoError::Encode(format!("{len} bytes")))?;
    out[..4].copy_from_slice(&len32.to_be_bytes());
    Ok(out)
}

/// `Frame::Response`'s index among `Frame`'s variants (postcard's varint tag).
const RESPONSE_VARIANT: u32 = 4;
/// `Frame::Request`'s index among `Frame`'s variants.
const REQUEST_VARIANT: u32 = 3;
/// `Frame::TokenRequest`'s index among `Frame`'s variants.
const TOKEN_REQUEST_VARIANT: u32 = 7;

/// The head of a frame body, read before the rest of it: for a `Frame::Request`, its id and
/// credential (`Some((id, auth))`), which a listener verifies before it reads a body larger
/// than [`PREAUTH_MAX_FRAME`]; `None` for another frame or a head that does not decode
/// (yet: `head` may be cut anywhere). Pure, never panics.
pub fn peek_request_auth(head: &[u8]) -> Option<(u64, Option<Credential>)> {
    let (tag, rest) = postcard::take_from_bytes::<u32>(head).ok()?;
    if tag != REQUEST_VARIANT {
        return None;
    }
    let ((id, auth), _) = postcard::take_from_bytes::<(u64, Option<Credential>)>(rest).ok()?;
    Some((id, auth))
}

/// [`peek_request_auth`] for a `Frame::TokenRequest`: its id and token, from the bytes up to
/// the token's end (which a listener verifies before it reads a larger body). `None` for
/// another frame or a head that does not decode yet. Pure, never panics.
pub fn peek_token_auth(head: &[u8]) -> Option<(u64, TokenAuth)> {
    let (tag, rest) = postcard::take_from_bytes::<u32>(head).ok()?;
    if tag != TOKEN_REQUEST_VARIANT {
        return None;
    }
    let ((id, auth), _) = postcard::take_from_bytes::<(u64, TokenAuth)>(rest).ok()?;
    Some((id, auth))
}

/// Blocking write of one frame (commands, tests).
pub fn write_frame<W: Write>(w: &mut W, frame: &Frame) -> Result<(), ProtoError> {
    let bytes = encode_frame(frame)?;
    w.write_all(&bytes)?;
    w.flush()?;
    Ok(())
}

/// Blocking read of one frame (commands, tests).
pub fn read_frame<R: Read>(r: &mut R, max: usize) -> Result<Frame, ProtoError> {
    let mut prefix = [0u8; 4];
    match r.read_exact(&mut prefix) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(ProtoError::Closed),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(prefix) as usize;
    if len > max {
        return Err(ProtoError::FrameTooLarge { len, max });
    }
    // The announced length is reserved up to `READ_RESERVE_MAX` (one allocation, no doubling
    // while a 10 MB answer arrives); beyond that memory grows with the bytes that arrive, not
    // with the length the peer announced.
    let mut buf = Vec::with_capacity(4 + len.min(READ_RESERVE_MAX));
    buf.extend_from_slice(&prefix);
    let got = r.take(len as u64).read_to_end(&mut buf)?;
    if got < len {
        return Err(ProtoError::Decode("connection closed inside a frame".into()));
    }
    // `squeue`'s answer is a short head and then its rows' bytes up to the frame's end: they
    // stay where they arrived (moved to the buffer's front) and become the answer's, instead
    // of a copy into a second buffer as large (10+ MB of fresh pages at 150,000 jobs).
    if let Some((id, count, at, part)) = queue_rows_at(&buf[4..]) {
        buf.drain(..4 + at);
        let rows = crate::QueueRows { count, bytes: buf };
        let body = if part { Response::QueuePart(rows) } else { Response::Queue(rows) };
        return Ok(Frame::Response { id, body });
    }
    match decode_frame_max(&buf, max)? {
        Some((f, _)) => Ok(f),
        None => Err(ProtoError::Decode("short frame".into())),
    }
}

/// For a frame body that is a `Frame::Response` of a `Response::Queue` or
/// `Response::QueuePart` whose rows' bytes run to the body's end (as [`encode_frame`] writes
/// it): the id, the job count, where the rows' bytes start in `body`, and whether it is a
/// part. `None` for anything else (which the full decode reads or refuses as before). Pure,
/// never panics.
fn queue_rows_at(body: &[u8]) -> Option<(u64, u64, usize, bool)> {
    static VARIANTS: std::sync::OnceLock<Option<(u32, u32)>> = std::sync::OnceLock::new();
    let (queue, part) = (*VARIANTS.get_or_init(|| {
        let tag = |r: &Response| {
            let head = postcard::to_allocvec(r).ok()?;
            postcard::take_from_bytes::<u32>(&head).ok().map(|(t, _)| t)
        };
        Some((tag(&Response::Queue(crate::QueueRows::default()))?, tag(&Response::QueuePart(crate::QueueRows::default()))?))
    }))?;
    let (tag, rest) = postcard::take_from_bytes::<u32>(body).ok()?;
    if tag != RESPONSE_VARIANT {
        return None;
    }
    let (id, rest) = postcard::take_from_bytes::<u64>(rest).ok()?;
    let (variant, rest) = postcard::take_from_bytes::<u32>(rest).ok()?;
    if variant != queue && variant != part {
        return None;
    }
    let (count, rest) = postcard::take_from_bytes::<u64>(rest).ok()?;
    let (len, rest) = postcard::take_from_bytes::<usize>(rest).ok()?;
    (rest.len() == len).then_some((id, count, body.len() - len, variant == part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_request_head_names_its_id_and_token() {
        let auth = TokenAuth { user_name: "alice".into(), token: "a.b.c".into() };
        let f = Frame::TokenRequest { id: 9, auth: auth.clone(), body: Request::Ping };
        let bytes = encode_frame(&f).unwrap();
        assert_eq!(peek_token_auth(&bytes[4..]), Some((9, auth)));
        assert_eq!(peek_request_auth(&bytes[4..]), None);
        for cut in 0..bytes.len() - 5 {
            let _ = peek_token_auth(&bytes[4..4 + cut]);
        }
        let req = encode_frame(&Frame::Request { id: 3, auth: None, body: Request::Ping }).unwrap();
        assert_eq!(peek_token_auth(&req[4..]), None);
        assert_eq!(decode_frame(&bytes).unwrap().unwrap().0, f);
    }
    use crate::msg::*;
    use proptest::prelude::*;

    fn sample() -> Frame {
        Frame::Request {
            id: 7,
            auth: None,
            body: Request::SubmitJob(Box::new(SubmitJob {
                name: Some("train".into()),
                script: "#!/bin/sh\ntrue\n".into(),
                gres: vec![GresSpec {
                    name: "gpu".into(),
                    gpu_type: Some("h100".into()),
                    count: 4,
                }],
                array: Some(ArraySpec {
                    ranges: vec![ArrayRange { start: 0, end: 5, step: 1 }],
                    max_running: Some(2),
                }),
                ..SubmitJob::default()
            })),
        }
    }

    /// A response frame built from an encoded body is the frame `encode_frame` gives.
    #[test]
    fn response_frames_from_encoded_bodies() {
        let bodies = [
            Response::Pong,
            Response::Error(SlurmError::new(crate::errno::ESLURM_INVALID_JOB_ID)),
            Response::Jobs(vec![JobInfo { job_id: 42, name: "x".into(), ..JobInfo::default() }]),
        ];
        for (i, body) in bodies.into_iter().enumerate() {
            let id = [0u64, 1, 300, u64::MAX][i];
            let enc = postcard::to_allocvec(&body).unwrap();
            let frame = encode_response_frame(id, &enc).unwrap();
            assert_eq!(frame, encode_frame(&Frame::Response { id, body: body.clone() }).unwrap());
            assert_eq!(read_frame(&mut &frame[..], DEFAULT_MAX_FRAME).unwrap(), Frame::Response { id, body });
        }
    }

    #[test]
    fn round_trip() {
        let f = sample();
        let bytes = encode_frame(&f).unwrap();
        let (g, used) = decode_frame(&bytes).unwrap().unwrap();
        assert_eq!(f, g);
        assert_eq!(used, bytes.len());
        // Partial input asks for more.
        for cut in 0..bytes.len() {
            assert!(decode_frame(&bytes[..cut]).unwrap().is_none());
        }
        // Two frames back to back.
        let mut two = bytes.clone();
        two.extend_from_slice(&bytes);
        let (_, used) = decode_frame(&two).unwrap().unwrap();
        assert_eq!(used, bytes.len());
    }

    /// The fenced node message is a variant of its own at the end: the plain `ToNode` frame
    /// is encoded as before (variant 5, then the message), the fenced one after every older
    /// variant.
    #[test]
    fn fenced_node_messages_round_trip_after_the_older_frames() {
        let kill = CtlToNode::Kill { job_id: 9 };
        let plain = encode_frame(&Frame::ToNode(kill.clone())).unwrap();
        assert_eq!(&plain[4..], &[5, 2, 9], "Frame::ToNode(Kill {{ job_id: 9 }}) as it always was");
        let f = Frame::ToNodeFenced { epoch: 300, msg: kill };
        let bytes = encode_frame(&f).unwrap();
        assert_eq!(&bytes[4..], &[8, 0xac, 0x02, 2, 9], "variant 8, epoch 300 as a varint, then the message");
        assert_eq!(decode_frame(&bytes).unwrap().unwrap().0, f);
    }

    #[test]
    fn health_report_round_trips() {
        let f = Frame::FromNode(NodeToCtl::Health {
            verdict: HealthLevel::Quarantine,
            reason: "Xid 79 on gpu 3: GPU has fallen off the bus".into(),
            events: vec!["Xid { gpu: 3, xid: 79 }".into()],
        });
        let bytes = encode_frame(&f).unwrap();
        assert_eq!(decode_frame(&bytes).unwrap().unwrap().0, f);
    }

    #[test]
    fn too_large_refused_before_reading_body() {
        let mut buf = (DEFAULT_MAX_FRAME as u32 + 1).to_be_bytes().to_vec();
        buf.push(0);
        assert!(matches!(decode_frame(&buf), Err(ProtoError::FrameTooLarge { .. })));
        assert!(matches!(decode_frame_max(&[0, 0, 0, 9], 8), Err(ProtoError::FrameTooLarge { len: 9, max: 8 })));
    }

    /// The head of a request frame gives its id and credential, from the bytes up to the
    /// credential's end; other frames and cut heads give nothing.
    #[test]
    fn request_heads() {
        let key = crate::auth::ClusterKey::from_bytes(&[3u8; 32]).unwrap();
        let cred = key.sign(2001, 2001, &"h".repeat(253), 1000, 300);
        let f = Frame::Request { id: 9, auth: Some(cred.clone()), body: Request::Ping };
        let bytes = encode_frame(&f).unwrap();
        let body = &bytes[4..];
        assert!(body.len() < PREAUTH_MAX_FRAME);
        assert_eq!(peek_request_auth(body), Some((9, Some(cred.clone()))));
        // Without its body (what a listener has of a large frame) the head still decodes.
        assert_eq!(peek_request_auth(&body[..body.len() - 1]), Some((9, Some(cred))));
        assert_eq!(peek_request_auth(&body[..10]), None);
        let anon = encode_frame(&Frame::Request { id: 1, auth: None, body: Request::Ping }).unwrap();
        assert_eq!(peek_request_auth(&anon[4..]), Some((1, None)));
        let hello = encode_frame(&Frame::Hello(Hello::current(Role::Command))).unwrap();
        assert_eq!(peek_request_auth(&hello[4..]), None);
        assert!(hello.len() - 4 < PREAUTH_MAX_FRAME);
    }

    /// A short frame is an error for the blocking reader, also one announcing more than it
    /// reserves ([`READ_RESERVE_MAX`]; past that, memory grows as bytes arrive).
    #[test]
    fn blocking_read_of_a_short_frame() {
        for len in [DEFAULT_MAX_FRAME, MAX_ANSWER_FRAME] {
            let mut bytes = (len as u32).to_be_bytes().to_vec();
            bytes.extend_from_slice(&[0u8; 10]);
            assert!(matches!(read_frame(&mut &bytes[..], MAX_ANSWER_FRAME), Err(ProtoError::Decode(_))));
        }
    }

    /// `squeue`'s answer (whole or a part) read in place is the answer the full decode gives,
    /// for any rows' bytes, id and count; a cut or padded one is refused as before, and other responses
    /// are decoded as before.
    #[test]
    fn queue_answers_read_in_place_as_decoded() {
        let cases = [(0, 0, 0), (3, 1, 1), (u64::MAX, 150_000, 127), (7, 2, 128), (9, u64::MAX, 70_000)];
        for ((id, count, n), part) in cases.into_iter().flat_map(|c| [(c, false), (c, true)]) {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
            let rows = crate::QueueRows { count, bytes };
            let f = Frame::Response { id, body: if part { Response::QueuePart(rows) } else { Response::Queue(rows) } };
            let frame = encode_frame(&f).unwrap();
            assert!(queue_rows_at(&frame[4..]).is_some(), "read in place: {n} bytes");
            assert_eq!(decode_frame(&frame).unwrap().unwrap().0, f);
            assert_eq!(read_frame(&mut &frame[..], MAX_ANSWER_FRAME).unwrap(), f);
            // One byte more or less than the rows announce: refused as the decode refuses it.
            let mut long = frame.clone();
            long.push(0);
            let len = (long.len() - 4) as u32;
            long[..4].copy_from_slice(&len.to_be_bytes());
            assert!(queue_rows_at(&long[4..]).is_none());
            assert!(matches!(read_frame(&mut &long[..], MAX_ANSWER_FRAME), Err(ProtoError::Decode(_))));
            if n > 0 {
                let mut short = frame.clone();
                short.pop();
                let len = (short.len() - 4) as u32;
                short[..4].copy_from_slice(&len.to_be_bytes());
                assert!(queue_rows_at(&short[4..]).is_none());
                assert!(matches!(read_frame(&mut &short[..], MAX_ANSWER_FRAME), Err(ProtoError::Decode(_))));
            }
        }
        for f in [Frame::Response { id: 4, body: Response::Pong }, Frame::Request { id: 5, auth: None, body: Request::Ping }] {
            let frame = encode_frame(&f).unwrap();
            assert!(queue_rows_at(&frame[4..]).is_none());
            assert_eq!(read_frame(&mut &frame[..], MAX_ANSWER_FRAME).unwrap(), f);
        }
    }

    /// Frames shorter and longer than the reservation read whole.
    #[test]
    fn frames_past_the_reservation_read_whole() {
        for n in [0, 1000, READ_RESERVE_MAX + 1000] {
            let body = Response::Queue(crate::QueueRows { count: 0, bytes: vec![7; n] });
            let frame = encode_frame(&Frame::Response { id: 3, body: body.clone() }).unwrap();
            assert_eq!(read_frame(&mut &frame[..], MAX_ANSWER_FRAME).unwrap(), Frame::Response { id: 3, body });
        }
    }

    #[test]
    fn trailing_bytes_refused() {
        let mut bytes = encode_frame(&Frame::HelloOk { version: 1 }).unwrap();
        bytes.push(0);
        let len = (bytes.len() - 4) as u32;
        bytes[..4].copy_from_slice(&len.to_be_bytes());
        assert!(matches!(decode_frame(&bytes), Err(ProtoError::Decode(_))));
    }

    #[test]
    fn handshake_range() {
        assert_eq!(negotiate(&Hello::current(Role::Command)).unwrap(), PROTOCOL_VERSION_MAX);
        let future = Hello {
            min_version: PROTOCOL_VERSION_MAX + 1,
            max_version: PROTOCOL_VERSION_MAX + 5,
            role: Role::Command,
        };
        assert_eq!(negotiate(&future).unwrap_err().code, errno::SLURM_PROTOCOL_VERSION_ERROR);
        let newer = Hello {
            min_version: 1,
            max_version: 9,
            role: Role::NodeDaemon,
        };
        assert_eq!(negotiate(&newer).unwrap(), PROTOCOL_VERSION_MAX);
        let backwards = Hello {
            min_version: 3,
            max_version: 1,
            role: Role::Command,
        };
        assert!(negotiate(&backwards).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_frame(&bytes);
            let _ = decode_frame_max(&bytes, 64);
        }

        #[test]
        fn peek_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = peek_request_auth(&bytes);
        }

        #[test]
        fn decode_never_panics_with_valid_prefix(body in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut bytes = (body.len() as u32).to_be_bytes().to_vec();
            bytes.extend_from_slice(&body);
            let _ = decode_frame(&bytes);
        }

        #[test]
        fn mutated_valid_frames_never_panic(idx in 0usize..4096, val in any::<u8>(), cut in 0usize..4096) {
            let mut bytes = encode_frame(&sample()).unwrap();
            let i = idx % bytes.len();
            bytes[i] = val;
            let c = cut % (bytes.len() + 1);
            let _ = decode_frame(&bytes[..c]);
            let _ = decode_frame(&bytes);
        }
    }
}
