//! A throw-away MariaDB server in a directory, as a site's slurmdbd would use one: Debian's
//! `mariadb-install-db` and `mariadbd` (package `mariadb-server`), listening on 127.0.0.1 at
//! a free port and on a Unix socket in the directory, with one database and a user that may
//! log in with a password (`mysql_native_password`, MariaDB's default). Dropping it stops the
//! server. The tests of the controller's slurmdbd import start one each.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A MariaDB server started in a directory.
#[derive(Debug)]
pub struct LocalMariaDb {
    /// The directory (`data/`, the socket, `mariadb.log`).
    pub dir: PathBuf,
    /// The TCP port on 127.0.0.1.
    pub port: u16,
    child: Child,
}

/// Whether MariaDB's programs are installed.
pub fn available() -> bool {
    Path::new("/usr/bin/mariadb-install-db").is_file()
        && Path::new("/usr/sbin/mariadbd").is_file()
        && Path::new("/usr/bin/mariadb").is_file()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl LocalMariaDb {
    /// Creates a data directory in `dir` and starts the server there (as root: `--user=root`).
    /// Waits until it answers (60 s at most).
    ///
    /// # Errors
    /// MariaDB is not installed, `mariadb-install-db` failed, or the server did not answer
    /// (its log's tail in the error).
    pub fn start(dir: &Path) -> Result<LocalMariaDb, String> {
        if !available() {
            return Err("MariaDB is not installed: no mariadb-install-db/mariadbd (apt-get install mariadb-server)".into());
        }
        let data = dir.join("data");
        std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
        let user = if nix::unistd::geteuid().is_root() {
            "--user=root".to_string()
        } else {
            String::new()
        };
        let mut install = Command::new("/usr/bin/mariadb-install-db");
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg("--auth-root-authentication-method=normal")
            .arg("--skip-test-db");
        if !user.is_empty() {
            install.arg(&user);
        }
        let out = install
            .output()
            .map_err(|e| format!("mariadb-install-db: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mariadb-install-db: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let port = free_port();
        let log = std::fs::File::create(dir.join("mariadb.log"))
            .map_err(|e| format!("mariadb.log: {e}"))?;
        let mut cmd = Command::new("/usr/sbin/mariadbd");
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", dir.join("mysqld.sock").display()))
            .arg(format!("--pid-file={}", dir.join("mariadbd.pid").display()))
            .arg(format!("--port={port}"))
            .arg("--bind-address=127.0.0.1")
            .arg("--skip-log-bin")
            .arg("--innodb-buffer-pool-size=16M")
            .arg("--innodb-flush-log-at-trx-commit=0")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log);
        if !user.is_empty() {
            cmd.arg(&user);
        }
        let child = cmd.spawn().map_err(|e| format!("mariadbd: {e}"))?;
        let mut db = LocalMariaDb {
            dir: dir.to_path_buf(),
            port,
            child,
        };
        let mut exited = None;
        let answered = crate::wait::poll_until(Duration::from_secs(60), || {
            exited = db.child.try_wait().ok().flatten();
            exited.is_some() || db.sql("SELECT 1").is_ok()
        });
        match exited {
            Some(status) => Err(format!("mariadbd exited ({status}): {}", db.log_tail())),
            None if answered => Ok(db),
            None => Err(format!("mariadbd did not answer within 60 s: {}", db.log_tail())),
        }
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("mariadb.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Runs `sql` as the server's root over its socket (the `mariadb` client, batch mode).
    ///
    /// # Errors
    /// The client's exit status and output.
    pub fn sql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new("/usr/bin/mariadb")
            .arg("--no-defaults")
            .arg(format!(
                "--socket={}",
                self.dir.join("mysqld.sock").display()
            ))
            .args(["-uroot", "--batch", "--skip-column-names", "-e", sql])
            .output()
            .map_err(|e| format!("mariadb: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!("mariadb: {}", String::from_utf8_lossy(&out.stderr)))
        }
    }
}

impl Drop for LocalMariaDb {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        if crate::wait::poll_until(Duration::from_secs(30), || matches!(self.child.try_wait(), Ok(Some(_)))) {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
