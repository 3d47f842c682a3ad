//! A blocking client (commands, tests, benchmarks): connect, handshake, call.

use crate::auth::Credential;
use crate::errno::SlurmError;
use crate::frame::{read_frame, write_frame, Frame, Hello, ProtoError, DEFAULT_MAX_FRAME};
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
        match read_frame(&mut stream, DEFAULT_MAX_FRAME)? {
            Frame::HelloOk { version } => Ok(Client {
                stream,
                next_id: 1,
                version,
                max_frame: DEFAULT_MAX_FRAME,
            }),
            Frame::Refused(e) => Err(ClientError::Refused(e)),
            _ => Err(ClientError::Unexpected),
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
    let mut c = Client::connect_unix(socket, Role::Command)?;
    match c.call(None, Request::IssueCredential)? {
        Response::Credential(cred) => Ok(cred),
        Response::Error(e) => Err(ClientError::Refused(e)),
        _ => Err(ClientError::Unexpected),
    }
}
