//! The store's two backends for the tests that run on both: SQLite in a temp dir, and a
//! throw-away PostgreSQL server (Debian's `initdb`/`pg_ctl`, on a Unix socket in a temp dir,
//! [`pg::LocalPg`], the same code `flotilla dev up --ha` starts its server with).
//!
//! Without PostgreSQL installed the PostgreSQL half of a test prints `SKIPPED: PostgreSQL
//! ...` and passes (CI installs it and fails on that line).
#![allow(dead_code)]

#[path = "../../../admin/src/pg.rs"]
pub mod pg;

use flotilla_slurmctld::store::{PgConf, Store, StorageConf, SyncMode};
use std::time::Duration;

/// A PostgreSQL server for one test, and the store configuration that reaches it.
#[derive(Debug)]
pub struct TestPg {
    /// The server (stopped when dropped).
    pub pg: pg::LocalPg,
    /// Its directory.
    pub dir: tempfile::TempDir,
}

impl TestPg {
    /// Starts a server, or `None` (after printing `SKIPPED:`) when PostgreSQL is not
    /// installed. Panics when it is installed but does not start.
    pub fn start(test: &str) -> Option<TestPg> {
        if !pg::available() {
            eprintln!("SKIPPED: PostgreSQL is not installed ({} has no initdb): {test} ran on SQLite only", pg::pg_bin().display());
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let pg = pg::LocalPg::start(&dir.path().join("pg"), 5432, false).unwrap_or_else(|e| panic!("{e}"));
        Some(TestPg { pg, dir })
    }

    /// The controller's configuration for this server (the password read from its file, as
    /// the daemon reads `StateStoragePassFile`).
    pub fn conf(&self) -> PgConf {
        PgConf {
            host: self.pg.socket_dir().display().to_string(),
            port: self.pg.port,
            user: pg::ROLE.into(),
            password: Some(flotilla_slurmctld::store::postgres::read_password_file(&self.pg.password_file).unwrap()),
            dbname: pg::DATABASE.into(),
            call_timeout: Duration::from_secs(10),
            pipeline: true,
            idle_in_transaction_timeout: None,
        }
    }

    /// A store on this server.
    pub fn store(&self) -> Store {
        Store::open_postgres(&self.conf()).unwrap()
    }

    /// slurm.conf's `StateStorage*` keys naming this server.
    pub fn keys(&self) -> flotilla_core::config::StateStorageConf {
        flotilla_core::config::StateStorageConf {
            storage_type: "state/postgres".into(),
            host: self.pg.socket_dir().display().to_string(),
            port: self.pg.port,
            user: Some(pg::ROLE.into()),
            loc: pg::DATABASE.into(),
            pass_file: Some(self.pg.password_file.display().to_string()),
        }
    }

    /// The storage configuration naming this server.
    pub fn storage(&self) -> StorageConf {
        StorageConf::Postgres(self.conf())
    }
}

/// Runs `check` on a fresh SQLite store and then on a fresh PostgreSQL store; `reopen` gives
/// `check` a way to open the same store again (a restart).
pub fn on_both(test: &str, check: impl Fn(&dyn Fn() -> Store)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    check(&|| Store::open(&path, SyncMode::Full).unwrap());
    if let Some(pg) = TestPg::start(test) {
        check(&|| pg.store());
    }
}
