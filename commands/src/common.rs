//! What every command shares: its I/O sinks ([`Io`]), reaching the controller ([`Ctl`]),
//! user and group names, and small output helpers.
//!
//! How a command reaches the controller (DESIGN.md §3): it reads slurm.conf (`SLURM_CONF`,
//! else `FLOTILLA_CONF`, else `/etc/slurm/slurm.conf`), then connects to the controller's own
//! Unix socket `<StateSaveLocation>/slurmctld.sock` when it exists (the kernel vouches for the
//! user, `SO_PEERCRED`); otherwise it asks a local daemon's socket (`FLOTILLA_AUTH_SOCKET`,
//! else sackd's `/run/slurm/sackd.sock`) for a short-lived credential and presents it to the
//! controller over TCP at `SlurmctldHost`'s address and `SlurmctldPort`. A fresh credential is
//! fetched for every request (credentials are single-use: the controller keeps a replay cache).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use flotilla_core::config::ClusterConfig;
use flotilla_proto::client::{fetch_credential, Client, LeaderSearch, Step};
use flotilla_proto::errno::ESLURM_IN_STANDBY_MODE;
use flotilla_proto::{Request, Response, Role, SlurmError};

/// Where output goes and where the environment and standard input come from; lets tests run
/// a command's `run` in-process.
pub struct Io<'a> {
    /// Standard output.
    pub out: &'a mut dyn Write,
    /// Standard error.
    pub err: &'a mut dyn Write,
    /// The environment (`getenv`).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Standard input (`None`: the process's own).
    pub stdin: Option<&'a mut dyn Read>,
}

impl std::fmt::Debug for Io<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Io").finish_non_exhaustive()
    }
}

impl Io<'_> {
    /// Writes to stdout, ignoring a closed pipe (as `printf` does).
    pub fn out(&mut self, s: &str) {
        let _ = self.out.write_all(s.as_bytes());
    }

    /// Writes to stderr.
    pub fn err(&mut self, s: &str) {
        let _ = self.err.write_all(s.as_bytes());
    }

    /// Reads all of standard input.
    pub fn read_stdin(&mut self) -> std::io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        match self.stdin.as_mut() {
            Some(r) => {
                r.read_to_end(&mut buf)?;
            }
            None => {
                std::io::stdin().lock().read_to_end(&mut buf)?;
            }
        }
        Ok(buf)
    }
}

/// Runs a command's `run` function as a process: real stdout/stderr/environment, then exits
/// with its status.
pub fn main_with(run: fn(&[String], &mut Io<'_>) -> i32) -> ! {
    let args: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = stderr.lock();
    let getenv = |k: &str| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned());
    let code = run(
        &args,
        &mut Io {
            out: &mut out,
            err: &mut err,
            env: &getenv,
            stdin: None,
        },
    );
    let _ = out.flush();
    drop(out);
    std::process::exit(code);
}

/// Slurm's `SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR`.
pub const CONNECTION_ERROR: i32 = 1001;

/// The error a command reports when the controller cannot be reached.
pub fn connection_error() -> SlurmError {
    SlurmError {
        code: CONNECTION_ERROR,
        text: "Unable to contact slurm controller (connect failure)".into(),
        messages: Vec::new(),
    }
}

/// Why a request did not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    /// slurm.conf could not be loaded.
    #[error(transparent)]
    Conf(#[from] flotilla_conf::ConfError),
    /// The controller (or the credential daemon) could not be reached.
    #[error("Unable to contact slurm controller (connect failure)")]
    Connect,
    /// The controller answered with an error.
    #[error("{0}")]
    Slurm(SlurmError),
}

impl CtlError {
    /// The Slurm error to print (`Unable to contact slurm controller (connect failure)` for
    /// every failure to reach it).
    pub fn slurm(&self) -> SlurmError {
        match self {
            CtlError::Slurm(e) => e.clone(),
            _ => connection_error(),
        }
    }
}

/// A way to the controller, from slurm.conf.
#[derive(Debug)]
pub struct Ctl {
    /// The cluster configuration read.
    pub conf: ClusterConfig,
    socket: Option<PathBuf>,
    auth_socket: PathBuf,
    tcp: String,
}

impl Ctl {
    /// Reads slurm.conf and works out how to reach the controller.
    pub fn new(env: &dyn Fn(&str) -> Option<String>) -> Result<Ctl, CtlError> {
        let conf = flotilla_conf::load(env)?;
        Ok(Ctl::from_conf(conf, env))
    }

    /// The same from an already loaded configuration.
    pub fn from_conf(conf: ClusterConfig, env: &dyn Fn(&str) -> Option<String>) -> Ctl {
        let socket = (!conf.state_save_location.is_empty())
            .then(|| Path::new(&conf.state_save_location).join("slurmctld.sock"));
        let auth_socket = env("FLOTILLA_AUTH_SOCKET")
            .filter(|s| !s.is_empty())
            .map_or_else(|| PathBuf::from("/run/slurm/sackd.sock"), PathBuf::from);
        let host = if conf.control_addr.is_empty() {
            "127.0.0.1".to_string()
        } else {
            conf.control_addr.clone()
        };
        let tcp = format!("{host}:{}", conf.slurmctld_port);
        Ctl {
            conf,
            socket,
            auth_socket,
            tcp,
        }
    }

    /// The controllers of slurm.conf in its order (`SlurmctldHost=` lines: the primary, then
    /// the backups), each as `(host name, address)` ([`ClusterConfig::controllers`]).
    pub fn controllers(&self) -> Vec<(String, String)> {
        self.conf.controllers()
    }

    /// Whether the controller at `addr` (`SlurmctldPort`) answers a ping (Slurm's
    /// `slurm_ping`): over TCP with a credential from `sackd`, else from the local
    /// controller's socket; at most 10 s (Slurm's default `MessageTimeout`) to connect and as
    /// long for the answer (a stopped controller is `DOWN`).
    pub fn ping(&self, addr: &str) -> bool {
        let timeout = std::time::Duration::from_secs(10);
        let Some(cred) = self.credential() else { return false };
        let Ok(addrs) = std::net::ToSocketAddrs::to_socket_addrs(&(addr, self.conf.slurmctld_port)) else { return false };
        addrs.into_iter().any(|a| {
            let Ok(s) = std::net::TcpStream::connect_timeout(&a, timeout) else { return false };
            let _ = s.set_read_timeout(Some(timeout));
            let _ = s.set_nodelay(true);
            matches!(
                Client::call_once(flotilla_proto::client::Stream::Tcp(s), Role::Command, Some(cred.clone()), Request::Ping),
                Ok(Response::Pong)
            )
        })
    }

    /// Sends one request and returns the answer (`Response::Error` becomes `Err`).
    ///
    /// With several `SlurmctldHost=` lines the controllers are tried in slurm.conf's order
    /// and the one that leads answers, by [`LeaderSearch`]'s rule (Slurm 22.05
    /// `slurm_send_recv_controller_msg`): one that cannot be reached, or answers
    /// `ESLURM_IN_STANDBY_MODE` (a standby), passes the request to the next; rounds are
    /// tried again for a while (a takeover in progress), then the last answer is the error.
    /// A request is sent again only when the controller tried before never got it (its
    /// connection failed) or refused it as a standby, so nothing is submitted twice.
    pub fn call(&self, req: Request) -> Result<Response, CtlError> {
        self.call_with_parts(req, None)
    }

    /// [`Ctl::call`] for a request answered in parts ([`Request::QueryQueueParts`]): each
    /// part goes to `on_part` as it arrives (only from the controller that leads: a standby
    /// refuses before any), and the last answer is returned.
    pub fn call_parts(&self, req: Request, on_part: &mut dyn FnMut(flotilla_proto::QueueRows)) -> Result<Response, CtlError> {
        self.call_with_parts(req, Some(on_part))
    }

    fn call_with_parts(&self, req: Request, mut on_part: Option<&mut dyn FnMut(flotilla_proto::QueueRows)>) -> Result<Response, CtlError> {
        let hosts = self.controllers();
        let timeout = std::time::Duration::from_secs(self.conf.slurmctld_timeout_s);
        let mut search = LeaderSearch::new(hosts.len(), 0, timeout, std::time::Instant::now());
        let mut last = Err(CtlError::Connect);
        loop {
            match search.next(std::time::Instant::now()) {
                Step::Try(i) => {
                    let addr = match hosts.get(i) {
                        Some((_, a)) if i > 0 => format!("{a}:{}", self.conf.slurmctld_port),
                        _ => self.tcp.clone(),
                    };
                    let part = on_part.as_mut().map(|f| &mut **f as &mut dyn FnMut(flotilla_proto::QueueRows));
                    match self.attempt(i, &addr, req.clone(), part) {
                        Attempt::NotReached => {}
                        Attempt::Done(Err(CtlError::Slurm(e))) if e.code == ESLURM_IN_STANDBY_MODE && hosts.len() > 1 => last = Err(CtlError::Slurm(e)),
                        Attempt::Done(r) => return r,
                    }
                }
                Step::Wait(d) => std::thread::sleep(d),
                Step::GiveUp => return last,
            }
        }
    }

    /// Sends `req` to controller `i` of [`Ctl::controllers`] only (Slurm's
    /// `slurm_open_controller_conn_spec`): `scontrol takeover` asks a given backup.
    pub fn call_at(&self, i: usize, req: Request) -> Result<Response, CtlError> {
        let hosts = self.controllers();
        let Some((_, addr)) = hosts.get(i) else { return Err(CtlError::Connect) };
        let addr = if i == 0 { self.tcp.clone() } else { format!("{addr}:{}", self.conf.slurmctld_port) };
        match self.attempt(i, &addr, req, None) {
            Attempt::NotReached => Err(CtlError::Connect),
            Attempt::Done(r) => r,
        }
    }

    /// One try of `req` at controller `i` of [`Ctl::controllers`] (`addr`: `host:port`): the
    /// first through the local socket when it exists, else over TCP with a credential.
    fn attempt(&self, i: usize, addr: &str, req: Request, on_part: Option<&mut dyn FnMut(flotilla_proto::QueueRows)>) -> Attempt {
        let (stream, cred) = match self.socket.as_deref().filter(|p| i == 0 && p.exists()) {
            Some(sock) => match std::os::unix::net::UnixStream::connect(sock) {
                Ok(s) => (flotilla_proto::client::Stream::Unix(s), None),
                Err(_) => return Attempt::NotReached,
            },
            None => {
                let Some(cred) = self.credential() else { return Attempt::Done(Err(CtlError::Connect)) };
                let Ok(mut addrs) = std::net::ToSocketAddrs::to_socket_addrs(addr) else { return Attempt::NotReached };
                let Some(s) = addrs.find_map(|a| std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(10)).ok()) else {
                    return Attempt::NotReached;
                };
                let _ = s.set_nodelay(true);
                (flotilla_proto::client::Stream::Tcp(s), Some(cred))
            }
        };
        // One call per connection, pipelined (hello and request in one write).
        Attempt::Done(match Client::call_once_parts(stream, Role::Command, cred, req, on_part) {
            Err(_) => Err(CtlError::Connect),
            Ok(Response::Error(e)) => Err(CtlError::Slurm(e)),
            Ok(r) => Ok(r),
        })
    }

    /// A credential for TCP: from `sackd`, else from the local controller's socket.
    fn credential(&self) -> Option<flotilla_proto::Credential> {
        fetch_credential(&self.auth_socket)
            .ok()
            .or_else(|| self.socket.as_deref().filter(|p| p.exists()).and_then(|p| fetch_credential(p).ok()))
    }
}

/// What one try of a request at one controller came to.
enum Attempt {
    /// The controller could not be reached: the request was not sent.
    NotReached,
    /// Its answer, or the failure after the request was sent.
    Done(Result<Response, CtlError>),
}

/// The `State=` word of each partition of `parts` that is not up (`DOWN`, `DRAIN`,
/// `INACTIVE`), asked of the controller only when one is not (`PartitionInfo` says up or
/// not); by name. A controller that cannot answer leaves them `DOWN`.
pub fn partition_states(ctl: &Ctl, parts: &[flotilla_proto::PartitionInfo]) -> std::collections::BTreeMap<String, String> {
    if parts.iter().all(|p| p.up) {
        return Default::default();
    }
    match ctl.call(flotilla_proto::Request::QueryPartitionStates) {
        Ok(flotilla_proto::Response::PartitionStates(s)) => s.into_iter().map(|s| (s.name, s.state)).collect(),
        _ => Default::default(),
    }
}

/// The real uid of this process.
pub fn my_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// The real gid of this process.
pub fn my_gid() -> u32 {
    nix::unistd::getgid().as_raw()
}

/// A user's name (`uid` as digits when unknown).
pub fn user_name(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

/// A group's name (`gid` as digits when unknown).
pub fn group_name(gid: u32) -> String {
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .ok()
        .flatten()
        .map_or_else(|| gid.to_string(), |g| g.name)
}

/// A user's uid from a name or digits.
pub fn uid_of(name: &str) -> Option<u32> {
    if let Ok(n) = name.parse() {
        return Some(n);
    }
    nix::unistd::User::from_name(name).ok().flatten().map(|u| u.uid.as_raw())
}

/// A uid from a user name, or from digits naming a uid the user database knows (Slurm
/// 22.05 `uid.c` `uid_from_string`: the name first; a number as `strtol` reads it, whole,
/// 0 to `INT_MAX`). `None`: neither.
pub fn uid_from_string(name: &str) -> Option<u32> {
    if let Ok(Some(u)) = nix::unistd::User::from_name(name) {
        return Some(u.uid.as_raw());
    }
    let n = strtol_id(name)?;
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(n)).ok().flatten().map(|_| n)
}

/// A gid from a group name, or from digits naming a gid the group database knows (Slurm
/// 22.05 `uid.c` `gid_from_string`, as [`uid_from_string`]).
pub fn gid_from_string(name: &str) -> Option<u32> {
    if let Ok(Some(g)) = nix::unistd::Group::from_name(name) {
        return Some(g.gid.as_raw());
    }
    let n = strtol_id(name)?;
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(n)).ok().flatten().map(|_| n)
}

/// A whole decimal number as C's `strtol` reads it: leading blanks and one sign allowed,
/// nothing after the digits. `None`: not such a number; `Some(Err(negative))`: past `long`'s
/// range, below or above.
fn strtol_whole(s: &str) -> Option<Result<i64, bool>> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'+') => (false, &t[1..]),
        Some(b'-') => (true, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(match digits.parse::<i64>() {
        Ok(v) if neg => Ok(-v),
        Ok(v) => Ok(v),
        Err(_) => Err(neg),
    })
}

/// How many bytes of `s` C's `strtol(s, &end, 10)` reads: leading blanks, one sign and the
/// digits after them; 0 when there are no digits (`end` is `s`).
pub fn strtol_prefix_len(s: &str) -> usize {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let sign = usize::from(matches!(t.as_bytes().first(), Some(b'+' | b'-')));
    let digits = t.as_bytes()[sign..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        0
    } else {
        s.len() - t.len() + sign + digits
    }
}

/// Whether `s` starts with `prefix`, ASCII case aside (C's `strncasecmp(s, prefix,
/// strlen(prefix)) == 0`, as Slurm's option setters match words by their first letters).
pub fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Slurm 22.05's `parse_uint16` (`proc_args.c`): `strtoll` must read the whole string (an
/// empty one is 0), and the value be 0 to 65533 (below `NO_VAL16`).
pub fn parse_uint16(s: &str) -> Option<u16> {
    parse_uint_below(s, 0xfffe).map(|v| v as u16)
}

/// Slurm 22.05's `parse_uint32` (`proc_args.c`): as [`parse_uint16`], the value 0 to
/// 4294967293 (below `NO_VAL`).
pub fn parse_uint32(s: &str) -> Option<u32> {
    parse_uint_below(s, 0xffff_fffe).map(|v| v as u32)
}

/// Slurm 22.05's `parse_uint64` (`proc_args.c`): as [`parse_uint16`], a value from 0 (read as
/// a signed 64-bit number here: a sign or a unit is refused, as `2G` and `-1` are by Slurm).
pub fn parse_uint64(s: &str) -> Option<u64> {
    parse_uint_below(s, i64::MAX).map(|v| v as u64)
}

/// The `parse_uintNN` rule: `strtoll` reads the whole of `s` (an empty one is 0) and the
/// value is at least 0 and below `no_val`.
fn parse_uint_below(s: &str, no_val: i64) -> Option<i64> {
    if strtol_prefix_len(s) < s.len() {
        return None;
    }
    let v = strtol_prefix(s);
    (0..no_val).contains(&v).then_some(v)
}

/// The value C's `strtol(s, NULL, 10)` (or `strtoll`) returns: the number [`strtol_prefix_len`]
/// reads, 0 when none, clamped to `long`'s range.
pub fn strtol_prefix(s: &str) -> i64 {
    let n = strtol_prefix_len(s);
    if n == 0 {
        return 0;
    }
    let t = s[..n].trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    t.parse::<i64>().unwrap_or(if t.starts_with('-') { i64::MIN } else { i64::MAX })
}

/// A uid or gid as digits (`uid_from_string`'s `strtol` test): 0 to `INT_MAX`.
fn strtol_id(s: &str) -> Option<u32> {
    match strtol_whole(s)? {
        Ok(v) if (0..=i64::from(i32::MAX)).contains(&v) => Some(v as u32),
        _ => None,
    }
}

/// Slurm 22.05's `parse_int` (`proc_args.c`), shared by sbatch, salloc and srun: the whole
/// value as `strtol` reads it (leading blanks and a sign allowed, nothing after the digits),
/// not negative, and above zero when `positive`. The error is Slurm's message, printed after
/// the command's prefix with exit status 1 (its `exit(1)`, not the 255 of the options whose
/// setter returns an error): `Invalid numeric value "VALUE" for OPTION.`, or for a value past
/// `long`'s range `Numeric argument (9223372036854775807) to big for OPTION.`. A value past
/// `int`'s range, which Slurm truncates and takes, is refused here as too big.
///
/// # Errors
/// The message above.
pub fn parse_int(a: &str, opt: &str, positive: bool) -> Result<i32, String> {
    let invalid = || format!("Invalid numeric value \"{a}\" for {opt}.");
    match strtol_whole(a) {
        None | Some(Err(true)) => Err(invalid()),
        Some(Err(false)) => Err(format!("Numeric argument ({}) to big for {opt}.", i64::MAX)),
        Some(Ok(v)) if v < 0 || (positive && v == 0) => Err(invalid()),
        Some(Ok(v)) => i32::try_from(v).map_err(|_| format!("Numeric argument ({v}) to big for {opt}.")),
    }
}

/// This host's name.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Now, seconds since the epoch: the clock the commands read (the calendar functions of
/// [`flotilla_core::time::calendar`] take it as a parameter).
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Slurm's `%.Ns`/`%-Ns` field printing: `width` 0 means natural width; `right` pads on the
/// left; longer values are truncated to the width.
pub fn field(s: &str, width: usize, right: bool) -> String {
    let mut out = String::with_capacity(width.max(s.len()));
    push_field(&mut out, s, width, right);
    out
}

/// [`field`] appended to `out` instead of returned: `s` padded to `width` characters (on the
/// left when `right`), or cut to `width`; `width` 0 leaves it as it is.
pub fn push_field(out: &mut String, s: &str, width: usize, right: bool) {
    if width == 0 {
        out.push_str(s);
        return;
    }
    let n = if s.is_ascii() { s.len() } else { s.chars().count() };
    if n >= width {
        match s.char_indices().nth(width) {
            Some((cut, _)) => out.push_str(&s[..cut]),
            None => out.push_str(s),
        }
        return;
    }
    let pad = width - n;
    if right {
        push_spaces(out, pad);
        out.push_str(s);
    } else {
        out.push_str(s);
        push_spaces(out, pad);
    }
}

/// `n` spaces at the end of `out`, a slice at a time (not a `char` at a time: squeue pads
/// eight columns of 150,000 lines).
fn push_spaces(out: &mut String, mut n: usize) {
    const SPACES: &str = "                                                                ";
    while n > 0 {
        let k = n.min(SPACES.len());
        out.push_str(&SPACES[..k]);
        n -= k;
    }
}

/// `0-3`, `0,5,7-9`: sorted indices as Slurm's ranges (GPU `IDX:`, `CPU_IDs=`, task lists).
pub fn ranges(idx: &[u32]) -> String {
    flotilla_core::cores::ranges(idx)
}

/// A GPU GRES name with its count: `gpu:h100:4`, or `gpu:4` without a model.
pub fn gpu_name(ty: Option<&str>, n: u32) -> String {
    match ty {
        Some(t) => format!("gpu:{t}:{n}"),
        None => format!("gpu:{n}"),
    }
}

/// C's `atoi`: optional sign and leading digits, 0 otherwise.
pub fn atoi(s: &str) -> i32 {
    let s = s.trim_start();
    let (neg, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let v: i32 = digits.parse().unwrap_or(0);
    if neg {
        -v
    } else {
        v
    }
}

/// Slurm 22.05's first step in a command, `slurm_conf_init` (`read_config.c`, called at the
/// top of `scontrol.c`'s `main`): the configuration is read before anything else, and a file
/// Slurm cannot read ends the command with its messages on stderr and exit status 1.
/// Returns that status, or `None` when the configuration reads (or when the default
/// `/etc/slurm/slurm.conf` is absent and neither `SLURM_CONF` nor `FLOTILLA_CONF` names a
/// file: Flotilla's leniency, so that the commands that need no controller, `scontrol show
/// hostnames`, still run on a host without a configuration; Slurm stops there too).
///
/// The messages are Slurm's (`parse_config.c`'s `s_p_parse_file`, `_parse_next_key`,
/// `_handle_common` and `s_p_handle_uint32`, `read_config.c`'s `_validate_and_set_defaults`),
/// each as `PROG: error: ...`, then `PROG: fatal: Unable to process configuration file`.
pub fn conf_fatal(prog: &str, io: &mut Io<'_>) -> Option<i32> {
    let named = ["SLURM_CONF", "FLOTILLA_CONF"].iter().any(|k| (io.env)(k).is_some_and(|v| !v.is_empty()));
    let path = flotilla_conf::conf_path(io.env);
    let e = match flotilla_conf::load_from(&path) {
        Ok(_) => return None,
        Err(flotilla_conf::ConfError::Io { source, .. }) if !named && source.kind() == std::io::ErrorKind::NotFound => {
            return None
        }
        Err(e) => e,
    };
    for line in conf_error_lines(&e) {
        io.err(&format!("{prog}: error: {line}\n"));
    }
    io.err(&format!("{prog}: fatal: Unable to process configuration file\n"));
    Some(1)
}

/// Slurm's message for a value that is not a number (`parse_value.c`): a 16-bit key's
/// (`s_p_handle_uint16`) quotes the value, the others' put it in parentheses.
fn not_a_number(key: &str, value: &str) -> String {
    use flotilla_core::config::keys::{lookup, KeyLookup, Scope, ValueType};
    let short = [Scope::Global, Scope::Node, Scope::Partition]
        .into_iter()
        .any(|scope| matches!(lookup(scope, key), KeyLookup::Used(k) if matches!(k.ty, ValueType::U16)));
    if short {
        format!("{key} value \"{value}\" is not a valid number")
    } else {
        format!("{key} value ({value}) is not a valid number")
    }
}

/// Slurm's `error()` lines for a configuration that does not read (see [`conf_fatal`]).
fn conf_error_lines(e: &flotilla_conf::ConfError) -> Vec<String> {
    use flotilla_core::config::ConfigError;
    let cannot_stat = |path: &str| {
        format!("s_p_parse_file: cannot stat file {path}: No such file or directory, retrying in 1sec up to 60sec")
    };
    match e {
        flotilla_conf::ConfError::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
            // Slurm goes on with an empty configuration, which then lacks its one required key.
            vec![cannot_stat(&path.display().to_string()), "ClusterName needs to be specified".into()]
        }
        flotilla_conf::ConfError::Config(ConfigError::UnknownKey { key, .. }) => {
            vec![format!("_parse_next_key: Parsing error at unrecognized key: {key}")]
        }
        flotilla_conf::ConfError::Config(ConfigError::Leftover { at, text }) => {
            vec![format!("Parse error in file {} line {}: \"{text}\"", at.file, at.line)]
        }
        // A bad pair on a NodeName/PartitionName line: the value handler's own message
        // (`parse_value.c` `s_p_handle_boolean`, `s_p_handle_uint32`; `s_p_parse_line` for an
        // unknown key), then the rest of the line Slurm did not read (goldens-extra 0815).
        flotilla_conf::ConfError::Config(ConfigError::InLine { error, at, leftover }) => {
            let mut v = match &**error {
                ConfigError::UnknownKey { key, .. } => vec![format!("Parsing error at unrecognized key: {key}")],
                ConfigError::InvalidValue { key, value, reason, .. } if reason == "expected YES or NO" => {
                    vec![format!("\"{value}\" is not a valid option for \"{key}\"")]
                }
                ConfigError::InvalidValue { key, value, reason, .. } if reason == "not a number" => {
                    vec![not_a_number(key, value)]
                }
                _ => Vec::new(),
            };
            v.push(format!("Parse error in file {} line {}: \"{leftover}\"", at.file, at.line));
            v
        }
        flotilla_conf::ConfError::Config(ConfigError::InvalidValue { at, key, value, .. }) if value.is_empty() => {
            vec![format!("Parse error in file {} line {}: \"{key}=\"", at.file, at.line)]
        }
        flotilla_conf::ConfError::Config(ConfigError::InvalidValue { key, value, reason, .. })
            if reason == "not a number" =>
        {
            vec![not_a_number(key, value)]
        }
        flotilla_conf::ConfError::Config(ConfigError::InvalidValue { at, key, value, .. }) => {
            vec![format!("Parse error in file {} line {}: \"{key}={value}\"", at.file, at.line)]
        }
        flotilla_conf::ConfError::Config(ConfigError::Include { at, path, reason }) => {
            let mut v = Vec::new();
            if reason.contains("No such file or directory") {
                v.push(cannot_stat(path));
            }
            v.push(format!("\"Include\" failed in file {} line {}", at.file, at.line));
            v
        }
        other => vec![other.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--uid`/`--gid` digits as Slurm's `uid_from_string` reads them with `strtol`.
    #[test]
    fn ids_read_as_strtol_reads_them() {
        assert_eq!(strtol_id("2001"), Some(2001));
        assert_eq!(strtol_id("  +7"), Some(7));
        assert_eq!(strtol_id("-0"), Some(0));
        assert_eq!(strtol_id("-1"), None);
        assert_eq!(strtol_id("12x"), None);
        assert_eq!(strtol_id(""), None);
        assert_eq!(strtol_id("+"), None);
        assert_eq!(strtol_id("2147483647"), Some(2_147_483_647));
        assert_eq!(strtol_id("2147483648"), None);
        assert_eq!(strtol_id("99999999999999999999999"), None);
        // A number must name a known user or group; a name comes first.
        assert_eq!(uid_from_string("root"), Some(0));
        assert_eq!(uid_from_string("0"), Some(0));
        assert_eq!(gid_from_string("0"), Some(0));
        assert_eq!(uid_from_string("no-such-user-here"), None);
        assert_eq!(uid_from_string("2147483000"), None);
    }

    /// Slurm's `parse_int` (`proc_args.c`) on the values its users give; the messages are
    /// those the reference printed (`sbatch -n x`, `--mincpus=0`, `-n '2 '`, `-n 9999...`).
    #[test]
    fn parse_int_reads_and_refuses_as_slurm() {
        assert_eq!(parse_int("4", "--ntasks", true), Ok(4));
        assert_eq!(parse_int(" 2", "--ntasks", true), Ok(2));
        assert_eq!(parse_int("0", "--wait-all-nodes", false), Ok(0));
        assert_eq!(parse_int("-0", "--wait-all-nodes", false), Ok(0));
        assert_eq!(parse_int("x", "--ntasks", true), Err("Invalid numeric value \"x\" for --ntasks.".into()));
        assert_eq!(parse_int("0", "--mincpus", true), Err("Invalid numeric value \"0\" for --mincpus.".into()));
        assert_eq!(parse_int("-1", "--mincpus", true), Err("Invalid numeric value \"-1\" for --mincpus.".into()));
        assert_eq!(parse_int("2 ", "--ntasks", true), Err("Invalid numeric value \"2 \" for --ntasks.".into()));
        assert_eq!(parse_int("", "--mincpus", true), Err("Invalid numeric value \"\" for --mincpus.".into()));
        assert_eq!(
            parse_int("99999999999999999999", "--ntasks", true),
            Err("Numeric argument (9223372036854775807) to big for --ntasks.".into())
        );
        assert_eq!(parse_int("-99999999999999999999", "--ntasks", true), Err("Invalid numeric value \"-99999999999999999999\" for --ntasks.".into()));
    }

    #[test]
    fn push_field_is_field_appended() {
        for s in ["", "a", "abc", "abcdef", "héllo", "日本語テキスト", "JobHeldUser", "(Resources)"] {
            for width in [0, 1, 2, 3, 5, 8, 11, 20] {
                for right in [false, true] {
                    let mut out = String::from(">");
                    push_field(&mut out, s, width, right);
                    assert_eq!(out, format!(">{}", field(s, width, right)), "{s:?} {width} {right}");
                }
            }
        }
    }

    /// Padding is one space per missing character, also past the 64 one slice holds.
    #[test]
    fn padding_is_one_space_per_missing_character() {
        for s in ["", "abc", "日本"] {
            let n = s.chars().count();
            for width in n.max(1)..=200 {
                let pad = " ".repeat(width - n);
                assert_eq!(field(s, width, true), format!("{pad}{s}"), "{s:?} {width}");
                assert_eq!(field(s, width, false), format!("{s}{pad}"), "{s:?} {width}");
            }
        }
    }

    #[test]
    fn fields() {
        assert_eq!(field("abc", 5, true), "  abc");
        assert_eq!(field("abc", 5, false), "abc  ");
        assert_eq!(field("abcdef", 4, true), "abcd");
        assert_eq!(field("abc", 0, true), "abc");
    }
    /// Slurm 22.05.8's messages for files it cannot read (goldens-extra a08, recorded with
    /// `scontrol show hostnames`): a missing named file, an unknown key, a bad number, an
    /// empty value, a missing `Include`.
    #[test]
    fn conf_fatal_prints_slurms_messages() {
        let d = tempfile::tempdir().unwrap();
        let base = "ClusterName=c\nSlurmctldHost=h\nNodeName=n1 CPUs=4\nPartitionName=p Nodes=n1\n";
        let run = |text: Option<&str>| {
            let path = d.path().join("slurm.conf");
            let _ = std::fs::remove_file(&path);
            if let Some(t) = text {
                std::fs::write(&path, t).unwrap();
            }
            let p = path.display().to_string();
            let env = move |k: &str| (k == "SLURM_CONF").then(|| p.clone());
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let code = conf_fatal("scontrol", &mut Io { out: &mut out, err: &mut err, env: &env, stdin: None });
            assert!(out.is_empty());
            (code, String::from_utf8(err).unwrap().replace(&d.path().display().to_string(), "DIR"))
        };
        let fatal = "scontrol: fatal: Unable to process configuration file\n";
        assert_eq!(run(Some(base)), (None, String::new()));
        assert_eq!(
            run(Some(&format!("FooBarKey=1\n{base}"))),
            (Some(1), format!("scontrol: error: _parse_next_key: Parsing error at unrecognized key: FooBarKey\n{fatal}"))
        );
        assert_eq!(
            run(Some(&format!("{base}MaxJobCount=lots\n"))),
            (Some(1), format!("scontrol: error: MaxJobCount value (lots) is not a valid number\n{fatal}"))
        );
        assert_eq!(
            run(Some(&format!("{base}MaxJobCount=\n"))),
            (Some(1), format!("scontrol: error: Parse error in file DIR/slurm.conf line 5: \"MaxJobCount=\"\n{fatal}"))
        );
        // One key per line outside NodeName/PartitionName lines; what is left is quoted with
        // its blanks (goldens-extra 0813, 0814, 0821).
        assert_eq!(
            run(Some(&format!("{base}MaxJobCount=100\tMinJobAge=10\n"))),
            (Some(1), format!("scontrol: error: Parse error in file DIR/slurm.conf line 5: \"\tMinJobAge=10\"\n{fatal}"))
        );
        assert_eq!(
            run(Some(&format!("{base}MaxJobCount\n"))),
            (Some(1), format!("scontrol: error: Parse error in file DIR/slurm.conf line 5: \"MaxJobCount\"\n{fatal}"))
        );
        // A bad pair on a node line: its own message, then the rest of the line (0815, 0823).
        assert_eq!(
            run(Some(&base.replace("NodeName=n1", "NodeName=n1 Sockets=two RealMemory=5"))),
            (
                Some(1),
                format!(
                    "scontrol: error: Sockets value \"two\" is not a valid number\nscontrol: error: Parse error in file \
                     DIR/slurm.conf line 3: \" Sockets=two RealMemory=5 CPUs=4\"\n{fatal}"
                )
            )
        );
        assert_eq!(
            run(Some(&format!("{base}Include /nonexistent/x.conf\n"))),
            (
                Some(1),
                format!(
                    "scontrol: error: s_p_parse_file: cannot stat file /nonexistent/x.conf: No such file or directory, \
                     retrying in 1sec up to 60sec\nscontrol: error: \"Include\" failed in file DIR/slurm.conf line 5\n{fatal}"
                )
            )
        );
        assert_eq!(
            run(None),
            (
                Some(1),
                format!(
                    "scontrol: error: s_p_parse_file: cannot stat file DIR/slurm.conf: No such file or directory, \
                     retrying in 1sec up to 60sec\nscontrol: error: ClusterName needs to be specified\n{fatal}"
                )
            )
        );
    }
}
