//! The job supervisor (Slurm's `slurmstepd` for the batch step): `slurmd --stepd <jobdir>`.
//!
//! The daemon starts one per batch job; it outlives the daemon, so a restarted daemon finds
//! its jobs running. It starts a session of its own, becomes a child subreaper (so every
//! process of the job, even one that daemonized, stays its descendant), holds `stepd.lock`
//! for as long as it lives, and listens on `stepd.sock` for one-line commands from the daemon:
//!
//! - `signal <n> <batch_only 0|1>`: deliver signal `n` to every process of the job (or the
//!   batch shell only);
//! - `kill`: SIGKILL every process of the job;
//! - `ping`;
//! - `notice <text>`: append `text` and a newline to the job's stderr file
//!   ([`crate::notice::append_as_user`], as the job's user), as slurmstepd writes its stop
//!   notice.
//!
//! It forks the batch script as the user (supplementary groups, gid, uid — never root unless
//! the user is root), in its working directory, with its output files, and waits. When the
//! script ends it SIGKILLs what the script left behind, writes `exit.json`, and exits.
//! `--signal` is delivered here, `secs_before` the time limit counted from the bind.
//!
//! Confinement ([`crate::jobcg`]): with [`StepdCgroups`] the script joins the batch step's
//! cgroup (`job_<id>/step_batch`) in the forked child before it execs, signals go to that
//! cgroup, and a kill (the `kill` command, and what the script left at its end) goes to the
//! job's whole cgroup on this node, `srun` step tasks included; OOM kills are read from the
//! job's tree. The supervisor removes the batch step's cgroup; the daemon removes the job's.
//! Without cgroups the process tree (descendants of the supervisor) is the job.

use crate::confine::JobCgroup;
use crate::outdir;
use crate::spool::{self, ExitRecord, JobDir, JobFile};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{Duration, Instant};

/// Wall clock in seconds since the epoch.
pub fn wall_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Parent pid of every process (from `/proc/<pid>/stat`).
fn process_table() -> HashMap<i32, i32> {
    let mut t = HashMap::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return t };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
            t.insert(pid, ppid);
        }
    }
    t
}

/// Every descendant of `root` (not `root` itself).
pub fn descendants(root: i32) -> Vec<i32> {
    let table = process_table();
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, &ppid) in &table {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            if seen.insert(c) {
                out.push(c);
                stack.push(c);
            }
        }
    }
    out
}

/// Errors that stop the supervisor before the job started.
#[derive(Debug, thiserror::Error)]
pub enum StepdError {
    /// Spool.
    #[error(transparent)]
    Spool(#[from] spool::SpoolError),
    /// A system call failed.
    #[error("{what}: {source}")]
    Sys {
        /// What was attempted.
        what: String,
        /// Cause.
        source: nix::Error,
    },
    /// I/O.
    #[error("{what}: {source}")]
    Io {
        /// What was attempted.
        what: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// The cgroups of a confined batch job on its batch host ([`crate::jobcg::BatchCgroups::open`]).
#[derive(Debug)]
pub struct StepdCgroups {
    /// The job's cgroup (`job_<id>`): kills and OOM kills.
    pub job: Box<dyn JobCgroup>,
    /// The batch step's (`job_<id>/step_batch`): the script joins it; signals.
    pub batch: Box<dyn JobCgroup>,
}

/// The supervisor's state.
struct Stepd {
    dir: JobDir,
    job: JobFile,
    main: Pid,
    cgroup: Option<StepdCgroups>,
    signal_at: Option<Instant>,
}

impl Stepd {
    fn me() -> i32 {
        std::process::id() as i32
    }

    /// Signals every process of the batch script; SIGKILL goes to every process of the job on
    /// this node (step tasks included). Other signals reach step tasks from the daemon.
    fn signal_all(&self, sig: Signal) {
        if let Some(cg) = &self.cgroup {
            let target = if sig == Signal::SIGKILL { &cg.job } else { &cg.batch };
            let _ = target.signal_all(sig as i32);
        }
        for p in descendants(Self::me()) {
            let _ = kill(Pid::from_raw(p), sig);
        }
    }

    fn signal(&self, sig: i32, batch_only: bool) {
        let Ok(sig) = Signal::try_from(sig) else { return };
        if batch_only {
            let _ = kill(self.main, sig);
        } else {
            if sig == Signal::SIGTERM || sig == Signal::SIGKILL {
                // Stopped jobs get SIGCONT first so that they can act on SIGTERM.
                self.signal_all(Signal::SIGCONT);
            }
            self.signal_all(sig);
        }
    }

    fn command(&self, line: &str) -> String {
        if let Some(text) = line.strip_prefix("notice ") {
            let text = format!("{}\n", text.trim_end_matches(['\r', '\n']));
            // Written as the job's user, never as root: the path is the user's.
            let writer = nix::unistd::geteuid().is_root().then(|| crate::notice::Writer {
                uid: self.job.bind.uid,
                gid: self.job.bind.gid,
                groups: self.job.groups.clone(),
            });
            return match crate::notice::append_as_user(Path::new(&self.job.stderr), writer.as_ref(), &text) {
                Ok(()) => "ok".into(),
                Err(e) => format!("error {e}"),
            };
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["ping"] => "ok".into(),
            ["kill"] => {
                self.signal_all(Signal::SIGKILL);
                "ok".into()
            }
            ["signal", n, b] => match n.parse::<i32>() {
                Ok(n) => {
                    self.signal(n, *b == "1");
                    "ok".into()
                }
                Err(_) => "error bad signal".into(),
            },
            _ => "error unknown command".into(),
        }
    }

    fn serve(&self, listener: &UnixListener) {
        while let Ok((s, _)) = listener.accept() {
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut line = String::new();
            let mut rd = BufReader::new(&s);
            if rd.read_line(&mut line).is_ok() {
                let answer = self.command(&line);
                let mut w = &s;
                let _ = writeln!(w, "{answer}");
            }
        }
    }

    /// Kills and reaps every process left, until none is left.
    fn kill_rest(&self) {
        for _ in 0..500 {
            let left = descendants(Self::me());
            let cg_left = self.cgroup.as_ref().and_then(|c| c.job.pids().ok()).unwrap_or_default();
            if left.is_empty() && cg_left.is_empty() {
                return;
            }
            self.signal_all(Signal::SIGKILL);
            reap_all();
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Reaps every exited child; returns the statuses.
fn reap_all() -> Vec<WaitStatus> {
    let mut out = Vec::new();
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return out,
            Ok(s) => out.push(s),
        }
    }
}

fn cstring(s: &str) -> std::ffi::CString {
    std::ffi::CString::new(s.replace('\0', "")).expect("NULs removed")
}

/// In the forked child: join the batch step's cgroup, become the user, set up files, exec the
/// script. Never returns.
fn exec_job(dir: &JobDir, job: &JobFile, cgroup: Option<&dyn JobCgroup>, launch: std::os::fd::OwnedFd) -> ! {
    use nix::unistd::{Gid, Uid};
    let fail = |msg: String| -> ! {
        let _ = writeln!(std::io::stderr(), "slurmstepd: error: {msg}");
        std::process::exit(1);
    };
    // An output file that cannot be opened is a launch failure (`ESLURMD_IO_ERROR`), told
    // to the supervisor through `launch` (closed by a successful exec).
    let io_fail = |msg: String| -> ! {
        let _ = nix::unistd::write(&launch, &ESLURMD_IO_ERROR.to_le_bytes());
        fail(msg)
    };
    // First, so that nothing of the job runs outside its cgroup.
    if let Some(cg) = cgroup {
        if let Err(e) = cg.add_pid(std::process::id() as i32) {
            fail(format!("cannot join the job's cgroup: {e}"));
        }
    }
    let b = &job.bind;
    let _ = nix::unistd::setsid();
    let umask = job
        .env
        .iter()
        .find(|(k, _)| k == "SLURM_UMASK")
        .and_then(|(_, v)| u32::from_str_radix(v, 8).ok())
        .unwrap_or(0o022);
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(umask));
    if nix::unistd::geteuid().is_root() {
        let mut groups: Vec<Gid> = job.groups.iter().map(|&g| Gid::from_raw(g)).collect();
        if groups.is_empty() {
            groups.push(Gid::from_raw(b.gid));
        }
        if let Err(e) = nix::unistd::setgroups(&groups) {
            fail(format!("setgroups: {e}"));
        }
        if let Err(e) = nix::unistd::setgid(Gid::from_raw(b.gid)) {
            fail(format!("setgid({}): {e}", b.gid));
        }
        if let Err(e) = nix::unistd::setuid(Uid::from_raw(b.uid)) {
            fail(format!("setuid({}): {e}", b.uid));
        }
    } else if nix::unistd::getuid().as_raw() != b.uid {
        fail(format!("cannot run a job of uid {} as uid {}", b.uid, nix::unistd::getuid()));
    }
    // Output files, opened as the user; a missing directory is waited for (`outdir`).
    let open = |p: &Path| {
        let mut o = std::fs::OpenOptions::new();
        o.create(true).write(true);
        if job.append {
            o.append(true);
        } else {
            o.truncate(true);
        }
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o644);
        o.open(p)
    };
    let open_waiting = |p: &str| outdir::open_waiting_for_dir(Path::new(p), outdir::OUTPUT_DIR_WAIT, outdir::POLL, open);
    let out = match open_waiting(&job.stdout) {
        Ok(f) => f,
        Err(e) => io_fail(format!("Could not open stdout file {}: {e}", job.stdout)),
    };
    // A stderr that cannot be opened fails the job as a stdout does (its output would
    // otherwise land in the supervisor's root-owned log).
    let err = if job.stderr == job.stdout {
        out.try_clone().ok()
    } else {
        match open_waiting(&job.stderr) {
            Ok(f) => Some(f),
            Err(e) => io_fail(format!("Could not open stderr file {}: {e}", job.stderr)),
        }
    };
    if let Err(e) = nix::unistd::dup2_stdout(&out) {
        fail(format!("dup2 stdout: {e}"));
    }
    if let Some(e) = err.as_ref() {
        let _ = nix::unistd::dup2_stderr(e);
    }
    if let Ok(d) = std::fs::File::open("/dev/null") {
        let _ = nix::unistd::dup2_stdin(&d);
    }
    if let Err(e) = std::env::set_current_dir(&b.work_dir) {
        let _ = writeln!(
            std::io::stderr(),
            "slurmstepd: error: couldn't chdir to `{}': {e}: going to /tmp instead",
            b.work_dir
        );
        let _ = std::env::set_current_dir("/tmp");
    }
    reset_signals();
    let pid = std::process::id();
    // SLURM_UMASK is applied above and, as slurmstepd's `_set_umask` does, not passed on.
    let mut env: Vec<std::ffi::CString> = job
        .env
        .iter()
        .filter(|(k, _)| k != "SLURM_UMASK")
        .map(|(k, v)| cstring(&format!("{k}={v}")))
        .collect();
    env.push(cstring(&format!("SLURM_TASK_PID={pid}")));
    let script = cstring(&dir.script().to_string_lossy());
    let mut argv = vec![script.clone()];
    argv.extend(b.argv.iter().map(|a| cstring(a)));
    let e = nix::unistd::execve(&script, &argv, &env).unwrap_err();
    if e == nix::errno::Errno::ENOEXEC {
        let sh = cstring("/bin/sh");
        let mut argv2 = vec![sh.clone()];
        argv2.extend(argv);
        let e2 = nix::unistd::execve(&sh, &argv2, &env).unwrap_err();
        fail(format!("execve /bin/sh: {e2}"));
    }
    fail(format!("execve {}: {e}", dir.script().display()))
}

/// The job starts with no signal blocked and the default action for every signal a job may
/// be sent or rely on, as `slurmstepd` does before it execs (Slurm 22.05 `xsignal_default`):
/// ignored and blocked signals survive `execve`, and this process inherited both (Rust ignores
/// SIGPIPE; the daemons' starters block SIGINT, SIGTERM and SIGHUP to wait for them), which
/// would make a job's `trap ... TERM` (its checkpoint on preemption) never run.
#[allow(unsafe_code)]
fn reset_signals() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal};
    let dfl = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    for sig in [
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGPIPE,
        Signal::SIGTERM,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGALRM,
        Signal::SIGCHLD,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
        Signal::SIGXCPU,
        Signal::SIGXFSZ,
    ] {
        // SAFETY: installing SIG_DFL runs no handler code; this is the forked child, alone.
        let _ = unsafe { sigaction(sig, &dfl) };
    }
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
}

/// Slurm's `ESLURMD_IO_ERROR` (4021, `slurm_errno.h`): slurmstepd could not open the batch
/// script's output files. Slurm 22.05 sends it as the job's return code, which its tools
/// decode as a wait status: signal 4021 & 0x7f = 53, so the job ends `FAILED`,
/// `JobLaunchFailure`, `ExitCode=0:53` (`job_mgr.c` `job_complete`, WIFSIGNALED;
/// goldens-extra 0220).
const ESLURMD_IO_ERROR: i32 = 4021;

/// Forks the job. The supervisor is single-threaded, so the child may allocate. Returns the
/// child and the read end of its launch report: empty when the script was executed, else the
/// Slurm error number (4 bytes, little-endian) of a launch failure.
#[allow(unsafe_code)]
fn fork_job(dir: &JobDir, job: &JobFile, cgroup: Option<&dyn JobCgroup>) -> Result<(Pid, std::fs::File), StepdError> {
    let (report_r, report_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|source| StepdError::Sys {
        what: "pipe".into(),
        source,
    })?;
    // SAFETY: the supervisor runs no other thread (it is started with `--stepd` before any
    // thread is created), so the child of fork() may allocate and run ordinary Rust code.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Parent { child }) => {
            drop(report_w);
            Ok((child, std::fs::File::from(report_r)))
        }
        Ok(nix::unistd::ForkResult::Child) => {
            drop(report_r);
            exec_job(dir, job, cgroup, report_w)
        }
        Err(source) => Err(StepdError::Sys {
            what: "fork".into(),
            source,
        }),
    }
}

/// The launch failure the child reported, read once it has exited (so the pipe holds all it
/// will ever hold): Slurm's error number, or `None` when the script was executed.
fn launch_failure(mut report: std::fs::File) -> Option<i32> {
    use std::io::Read;
    let mut b = [0u8; 4];
    report.read_exact(&mut b).ok().map(|()| i32::from_le_bytes(b))
}

/// The supervisor's main: runs the job of `dir` to its end. `cgroup`: the job's cgroups when
/// it is confined.
pub fn run(dir: &Path, cgroup: Option<StepdCgroups>) -> Result<(), StepdError> {
    let dir = JobDir(dir.to_path_buf());
    let _ = nix::unistd::setsid();
    nix::sys::prctl::set_child_subreaper(true).map_err(|source| StepdError::Sys {
        what: "PR_SET_CHILD_SUBREAPER".into(),
        source,
    })?;
    let lock_path = dir.lock();
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| StepdError::Io {
            what: format!("open {}", lock_path.display()),
            source,
        })?;
    let _lock = nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusiveNonblock).map_err(|(_, source)| {
        StepdError::Sys {
            what: format!("lock {} (another supervisor runs this job)", lock_path.display()),
            source,
        }
    })?;
    let job: JobFile = spool::read_json(&dir.job_file())?.ok_or_else(|| StepdError::Io {
        what: format!("read {}", dir.job_file().display()),
        source: std::io::ErrorKind::NotFound.into(),
    })?;
    let sock = dir.socket();
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).map_err(|source| StepdError::Io {
        what: format!("bind {}", sock.display()),
        source,
    })?;
    let _ = std::fs::set_permissions(&sock, std::os::unix::fs::PermissionsExt::from_mode(0o600));
    listener.set_nonblocking(true).map_err(|source| StepdError::Io {
        what: "nonblocking socket".into(),
        source,
    })?;
    let (main, launch_report) = fork_job(&dir, &job, cgroup.as_ref().map(|c| c.batch.as_ref()))?;
    // `--signal=B:SIG@T` is the batch shell's, delivered here; without `B:` the controller
    // sends it to the job's steps.
    let signal_at = job.details.as_ref().and_then(|d| d.signal.as_ref()).filter(|s| s.batch_only).and_then(|s| {
        let limit = job.bind.time_limit_s? as i64;
        let at = job.started_at + limit - i64::from(s.secs_before);
        let wait = (at - wall_now()).max(0) as u64;
        Some(Instant::now() + Duration::from_secs(wait))
    });
    let mut st = Stepd {
        dir,
        job,
        main,
        cgroup,
        signal_at,
    };
    let status = loop {
        st.serve(&listener);
        if let Some(at) = st.signal_at {
            if Instant::now() >= at {
                st.signal_at = None;
                if let Some(s) = st.job.details.as_ref().and_then(|d| d.signal.clone()) {
                    st.signal(s.signal, true);
                }
            }
        }
        let done = reap_all().into_iter().find_map(|s| match s {
            WaitStatus::Exited(p, code) if p == st.main => Some((code, 0)),
            WaitStatus::Signaled(p, sig, _) if p == st.main => Some((0, sig as i32)),
            _ => None,
        });
        if let Some(s) = done {
            break s;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // A launch failure's error number stands for the status, decoded as Slurm's tools decode
    // it (see `ESLURMD_IO_ERROR`).
    let status = match launch_failure(launch_report) {
        Some(code) if code & 0x7f != 0 => (0, code & 0x7f),
        Some(code) => ((code >> 8) & 0xff, 0),
        None => status,
    };
    st.kill_rest();
    let oom = st.cgroup.as_ref().and_then(|c| c.job.oom_killed().ok()).unwrap_or(false);
    let usage = batch_usage(st.cgroup.as_ref());
    if let Some(cg) = &st.cgroup {
        let _ = cg.batch.destroy();
    }
    let rec = ExitRecord {
        exit_code: status.0,
        signal: status.1,
        oom,
        end_time: wall_now(),
        usage: Some(usage),
    };
    spool::write_json(&st.dir.exit(), &rec)?;
    let _ = std::fs::remove_file(&sock);
    Ok(())
}

/// What the batch step used, once everything of it ended and was reaped: its cgroup's
/// accounting when confined (CPU times from this supervisor's reaped children where the
/// cgroup keeps none: v1 without `cpuacct`), else the reaped children's
/// ([`crate::usage::children_usage`]).
fn batch_usage(cgroup: Option<&StepdCgroups>) -> flotilla_proto::Usage {
    let children = crate::usage::children_usage();
    match cgroup.and_then(|c| c.batch.usage()) {
        Some(mut u) => {
            if u.total_usec == 0 {
                (u.user_usec, u.system_usec, u.total_usec) = (children.user_usec, children.system_usec, children.total_usec);
            }
            u
        }
        None => children,
    }
}

/// Sends one command to a job's supervisor; `Err` when it is not there.
pub fn send_command(dir: &JobDir, cmd: &str) -> std::io::Result<String> {
    let s = std::os::unix::net::UnixStream::connect(dir.socket())?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut w = &s;
    writeln!(w, "{cmd}")?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line)?;
    Ok(line.trim().to_string())
}

/// True while a supervisor holds the job's lock.
pub fn alive(dir: &JobDir) -> bool {
    let Ok(f) = std::fs::OpenOptions::new().write(true).open(dir.lock()) else {
        return false;
    };
    match nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(_guard) => false,
        Err(_) => true,
    }
}
