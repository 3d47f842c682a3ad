//! A throw-away PostgreSQL server in a directory: Debian's `initdb` and `pg_ctl`
//! (`/usr/lib/postgresql/15/bin`, or `FLOTILLA_PG_BIN`), listening only on a Unix socket in
//! that directory, with a password-protected role that owns one database. `flotilla dev up
//! --ha` starts one for its controllers; the controller's tests include this file too
//! (`#[path]`), so that both start PostgreSQL the same way.
//!
//! `initdb` refuses to run as root: as root, the server runs as the `postgres` user (Debian's
//! package creates it) and the directory is handed to that user; otherwise as the caller. The
//! server's files are its own (`data/`, `postgres.log`); the password file the controller reads
//! (`StateStoragePassFile`) is written by the caller's user, mode 0600.
//!
//! Depends only on std and nix, so that it can be included by path.
#![allow(dead_code)]

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where Debian's PostgreSQL 15 keeps its programs.
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

/// The role the controllers log in as.
pub const ROLE: &str = "flotilla";

/// The database of the state.
pub const DATABASE: &str = "flotilla";

/// A PostgreSQL server started in a directory. Dropping it stops the server (fast shutdown).
#[derive(Debug)]
pub struct LocalPg {
    /// The directory (`data/`, the socket, the log, `password`).
    pub dir: PathBuf,
    /// The TCP-less port number naming the socket (`.s.PGSQL.<port>`).
    pub port: u16,
    /// The role's password.
    pub password: String,
    /// The file holding the password (mode 0600, the caller's).
    pub password_file: PathBuf,
    bin: PathBuf,
    run_as: Option<(u32, u32)>,
    opts: String,
    stopped: bool,
}

fn err(what: &str, e: impl std::fmt::Display) -> String {
    format!("{what}: {e}")
}

/// The directory of PostgreSQL's programs: `FLOTILLA_PG_BIN`, else [`PG_BIN`].
pub fn pg_bin() -> PathBuf {
    std::env::var_os("FLOTILLA_PG_BIN").map_or_else(|| PathBuf::from(PG_BIN), PathBuf::from)
}

/// Whether PostgreSQL's programs are installed.
pub fn available() -> bool {
    pg_bin().join("initdb").is_file() && pg_bin().join("pg_ctl").is_file()
}

impl LocalPg {
    /// Creates a cluster in `dir` (which must not hold one yet) and starts it on a Unix socket
    /// there, named by `port` (no TCP). `fsync`: whether the server flushes its WAL at commit
    /// (benchmarks and crash tests of PostgreSQL itself want it; others may skip it).
    ///
    /// # Errors
    /// PostgreSQL is not installed, `initdb` or `pg_ctl` failed (their output in the error).
    pub fn start(dir: &Path, port: u16, fsync: bool) -> Result<LocalPg, String> {
        let bin = pg_bin();
        if !available() {
            return Err(format!(
                "PostgreSQL is not installed: no initdb in {} (apt-get install postgresql)",
                bin.display()
            ));
        }
        std::fs::create_dir_all(dir).map_err(|e| err(&dir.display().to_string(), e))?;
        let run_as = if nix::unistd::geteuid().is_root() {
            let u = nix::unistd::User::from_name("postgres")
                .ok()
                .flatten()
                .ok_or("running as root and there is no user `postgres` to run PostgreSQL as")?;
            Some((u.uid.as_raw(), u.gid.as_raw()))
        } else {
            None
        };
        // The server's user must reach the directory through its parents (a temp dir is 0700).
        if run_as.is_some() {
            let mut p = Some(dir);
            while let Some(d) = p {
                if d.starts_with(std::env::temp_dir()) && d != std::env::temp_dir() {
                    let mode = std::fs::metadata(d).map(|m| m.permissions().mode()).unwrap_or(0o755);
                    let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode | 0o711));
                }
                p = d.parent();
            }
        }
        let password = format!("pw-{}-{}", std::process::id(), port);
        let password_file = dir.join("password");
        write_private(&password_file, &password)?;
        let server = dir.join("server");
        std::fs::create_dir_all(&server).map_err(|e| err("server dir", e))?;
        let pwfile = server.join("initdb.pw");
        std::fs::write(&pwfile, &password).map_err(|e| err("initdb password file", e))?;
        if let Some((uid, gid)) = run_as {
            chown_r(&server, uid, gid)?;
        }
        let mut pg =
            LocalPg { dir: dir.to_path_buf(), port, password, password_file, bin, run_as, opts: String::new(), stopped: true };
        let data = pg.data();
        pg.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                ROLE.as_ref(),
                "--pwfile".as_ref(),
                pwfile.as_os_str(),
                "--auth=scram-sha-256".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--locale=C".as_ref(),
                "-N".as_ref(),
            ],
        )?;
        let _ = std::fs::remove_file(&pwfile);
        pg.stopped = false;
        pg.opts = format!(
            "-k {} -p {port} -c listen_addresses='' -c fsync={} -c max_connections=100 -c shared_buffers=32MB",
            pg.socket_dir().display(),
            if fsync { "on" } else { "off" }
        );
        let opts = pg.opts.clone();
        pg.pg_ctl_start(&opts)?;
        pg.run(
            "psql",
            &[
                "-h".as_ref(),
                pg.socket_dir().as_os_str(),
                "-p".as_ref(),
                port.to_string().as_ref(),
                "-U".as_ref(),
                ROLE.as_ref(),
                "-d".as_ref(),
                "postgres".as_ref(),
                "-v".as_ref(),
                "ON_ERROR_STOP=1".as_ref(),
                "-c".as_ref(),
                format!("CREATE DATABASE {DATABASE}").as_ref(),
            ],
        )?;
        Ok(pg)
    }

    /// The data directory.
    pub fn data(&self) -> PathBuf {
        self.dir.join("server/data")
    }

    /// The directory holding the server's socket (`StateStorageHost=`).
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("server")
    }

    /// The server's log.
    pub fn log(&self) -> PathBuf {
        self.dir.join("server/postgres.log")
    }

    /// slurm.conf lines that point a controller at this server.
    pub fn conf_lines(&self) -> String {
        format!(
            "StateStorageType=state/postgres\nStateStorageHost={}\nStateStoragePort={}\nStateStorageUser={ROLE}\n\
             StateStorageLoc={DATABASE}\nStateStoragePassFile={}\n",
            self.socket_dir().display(),
            self.port,
            self.password_file.display()
        )
    }

    fn pg_ctl_start(&self, opts: &str) -> Result<(), String> {
        let data = self.data();
        let log = self.log();
        self.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "-o".as_ref(),
                opts.as_ref(),
                "start".as_ref(),
            ],
        )
    }

    /// Stops the server: `mode` is `pg_ctl`'s (`fast`: clients are disconnected and the server
    /// shuts down cleanly; `immediate`: it quits without a checkpoint, recovering at the next
    /// start, as after a crash).
    ///
    /// # Errors
    /// `pg_ctl` failed.
    pub fn stop(&mut self, mode: &str) -> Result<(), String> {
        if self.stopped {
            return Ok(());
        }
        let data = self.data();
        self.run("pg_ctl", &["-D".as_ref(), data.as_os_str(), "-m".as_ref(), mode.as_ref(), "-w".as_ref(), "stop".as_ref()])?;
        self.stopped = true;
        Ok(())
    }

    /// Starts a stopped server again, as it was configured.
    ///
    /// # Errors
    /// `pg_ctl` failed.
    pub fn restart(&mut self) -> Result<(), String> {
        if !self.stopped {
            return Ok(());
        }
        let opts = self.opts.clone();
        self.pg_ctl_start(&opts)?;
        self.stopped = false;
        Ok(())
    }

    /// The server's process id (the postmaster's), while it runs.
    pub fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.data().join("postmaster.pid")).ok()?.lines().next()?.trim().parse().ok()
    }

    /// Runs one of PostgreSQL's programs as the server's user; its output in the error.
    fn run(&self, prog: &str, args: &[&std::ffi::OsStr]) -> Result<(), String> {
        let mut cmd = Command::new(self.bin.join(prog));
        cmd.args(args).stdin(Stdio::null()).env("PGPASSWORD", &self.password).env("LC_ALL", "C");
        if let Some((uid, gid)) = self.run_as {
            cmd.uid(uid).gid(gid).current_dir("/");
        }
        let out = cmd.output().map_err(|e| err(prog, e))?;
        if !out.status.success() {
            return Err(format!(
                "{prog} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }
}

impl LocalPg {
    /// Leaves the server running past this value (its owner stops it later by its pid, as
    /// `flotilla dev down` does).
    pub fn detach(mut self) {
        self.stopped = true;
    }
}

impl Drop for LocalPg {
    fn drop(&mut self) {
        let _ = self.stop("fast");
    }
}

/// Writes `text` to a new file `path` readable by its owner only.
fn write_private(path: &Path, text: &str) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| err(&path.display().to_string(), e))?;
    writeln!(f, "{text}").map_err(|e| err(&path.display().to_string(), e))
}

fn chown_r(p: &Path, uid: u32, gid: u32) -> Result<(), String> {
    std::os::unix::fs::chown(p, Some(uid), Some(gid)).map_err(|e| err(&p.display().to_string(), e))?;
    if p.is_dir() {
        for e in std::fs::read_dir(p).map_err(|e| err(&p.display().to_string(), e))? {
            let e = e.map_err(|e| err(&p.display().to_string(), e))?;
            chown_r(&e.path(), uid, gid)?;
        }
    }
    Ok(())
}
