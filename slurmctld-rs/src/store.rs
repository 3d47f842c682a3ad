//! The controller's durable state in SQLite: numbered migrations from `sql/`, one transaction
//! per batch (group commit), and loading at start.
//!
//! Durability: WAL journal. `synchronous=FULL` (the default, [`SyncMode::Full`]) fsyncs the
//! WAL at every commit, so a reply sent after a commit ("Submitted batch job N") survives a
//! power loss, not only `kill -9`. `synchronous=NORMAL` ([`SyncMode::Normal`]) survives any
//! crash of the controller process (the WAL is in the kernel's page cache once `write`
//! returns) but may lose the last commits on an OS crash or power loss; it is offered for
//! benchmarks and development. Because commits are batched, FULL costs one fsync per batch,
//! not per job.

//! The controller's durable state: numbered migrations from `sql/` (SQLite) and
//! `sql/postgres/` (PostgreSQL, the same numbers), one transaction per batch (group commit),
//! and loading at start. The SQL connection is a [`Backend`]: SQLite's file in the state
//! directory (the default, `StateStorageType=state/sqlite`) or a PostgreSQL database
//! (`StateStorageType=state/postgres`, [`postgres`]); the logic here is written once for both.
//!
//! Durability on SQLite: WAL journal. `synchronous=FULL` (the default, [`SyncMode::Full`])
//! fsyncs the WAL at every commit, so a reply sent after a commit ("Submitted batch job N")
//! survives a power loss, not only `kill -9`. `synchronous=NORMAL` ([`SyncMode::Normal`])
//! survives any crash of the controller process (the WAL is in the kernel's page cache once
//! `write` returns) but may lose the last commits on an OS crash or power loss; it is offered
//! for benchmarks and development. Because commits are batched, FULL costs one fsync per
//! batch, not per job. On PostgreSQL a commit returns once the server has flushed its WAL
//! (`synchronous_commit=on`, PostgreSQL's default).

use crate::job::JobRecord;
use backend::{params, query_value, Backend, DbError, Dialect, Param, Queue, Tx, TxFailure};
use flotilla_core::sched::Allocation;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub mod backend;
pub mod follow;
pub mod lease;
mod migrate;
pub mod postgres;
mod usage;
pub mod rows;
pub mod runs;

pub use lease::{Acquired, FenceWatch, Lease, LeaseRow};
pub use postgres::PgConf;

/// One numbered migration: SQL from `sql/` and `sql/postgres/`, and for some a Rust step run
/// after the SQL in the same transaction (rows rewritten, [`migrate`]).
struct Migration {
    version: u32,
    sqlite: &'static str,
    postgres: &'static str,
    step: Option<MigrationStep>,
}

/// A migration's Rust step, run inside its transaction.
type MigrationStep = fn(&dyn Backend) -> Result<(), DbError>;

macro_rules! migration {
    ($v:expr, $file:literal, $step:expr) => {
        Migration {
            version: $v,
            sqlite: include_str!(concat!("../../sql/", $file)),
            postgres: include_str!(concat!("../../sql/postgres/", $file)),
            step: $step,
        }
    };
}

/// Numbered migrations, applied in order, each in one transaction that also records its
/// version in `schema_migrations`. There is no number 3; numbers are never reused. Each
/// number has a file in both dialects with the same tables, columns and meaning.
const MIGRATIONS: &[Migration] = &[
    migration!(1, "0001_init.sql", None),
    migration!(2, "0002_acct.sql", None),
    migration!(4, "0004_services.sql", None),
    migration!(5, "0005_row_format.sql", Some(migrate::rows_to_format_1)),
    migration!(6, "0006_purge.sql", None),
    migration!(7, "0007_assoc.sql", None),
    migration!(8, "0008_usage.sql", None),
    migration!(9, "0009_usage.sql", None),
    migration!(10, "0010_lease.sql", None),
    migration!(11, "0011_run_steps.sql", None),
    migration!(12, "0012_constraints.sql", None),
    migration!(13, "0013_exit_details.sql", None),
    migration!(14, "0014_reason_prev.sql", None),
    migration!(15, "0015_step_cpus.sql", None),
];

/// The highest migration number: the schema version a store of this controller has.
pub const SCHEMA_VERSION: u32 = 15;

/// SQLite `synchronous` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// `NORMAL`: survives process crashes.
    Normal,
    /// `FULL`: survives power loss too.
    Full,
}

/// Where the state lives (slurm.conf's `StateStorageType`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageConf {
    /// `state/sqlite` (the default): `flotilla.db` in the state directory.
    Sqlite {
        /// The directory (`StateSaveLocation`).
        dir: PathBuf,
        /// Durability.
        sync: SyncMode,
    },
    /// `state/postgres`: a PostgreSQL database.
    Postgres(PgConf),
}

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed.
    #[error("state database {at}: {source}")]
    Db {
        /// Database file or server.
        at: String,
        /// Cause.
        source: DbError,
    },
    /// A stored record cannot be read.
    #[error("state database {at}: corrupt record: {message}")]
    Corrupt {
        /// Database file or server.
        at: String,
        /// What.
        message: String,
    },
    /// This controller's leader lease was taken by another ([`lease`]): it must not write
    /// again and steps down.
    #[error("lost the leader lease of epoch {epoch}: {now}")]
    LeaseLost {
        /// The epoch this controller held.
        epoch: u64,
        /// Who holds the lease now.
        now: String,
    },
    /// The state directory cannot be created.
    #[error("state directory {path}: {source}")]
    Dir {
        /// Directory.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

impl StoreError {
    /// Whether the error may go away without a new controller: the disk or its quota full
    /// (`SQLITE_FULL`), an I/O error (`SQLITE_IOERR`, which is also what SQLite reports for
    /// `EDQUOT`), a file that cannot be opened or is read-only for now, a lock held; a
    /// PostgreSQL server restarting, unreachable or out of space ([`DbError::may_recover`]).
    /// A constraint violated (a GPU bound twice) or a corrupt database is not: the controller
    /// fails stop on those.
    pub fn may_recover(&self) -> bool {
        match self {
            StoreError::Db { source, .. } => source.may_recover(),
            // ENOSPC, EDQUOT.
            StoreError::Dir { source, .. } => matches!(source.raw_os_error(), Some(28 | 122)),
            StoreError::Corrupt { .. } | StoreError::LeaseLost { .. } => false,
        }
    }
}

/// A node row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    /// Node name.
    pub name: String,
    /// Boot epoch last registered.
    pub boot_epoch: u64,
    /// Availability: the JSON of the store's row type, [`rows::avail_to_json`] (read it with
    /// [`rows::avail_from_json`]).
    pub avail: String,
}

/// One change of the allocation tables.
#[derive(Debug, Clone)]
pub enum AllocOp {
    /// A new allocation of `job_id` on node `node`.
    Insert {
        /// Job.
        job_id: u64,
        /// Node name.
        node: String,
        /// The allocation.
        alloc: Allocation,
    },
    /// Every allocation of `job_id` is released.
    DeleteJob(u64),
    /// `job_id`'s allocation on node `node` is released (an elastic job shrank, a node was
    /// lost).
    DeleteNode {
        /// Job.
        job_id: u64,
        /// Node name.
        node: String,
    },
}

/// What one commit writes. Jobs are named by id; their records are looked up at commit.
#[derive(Debug, Default)]
pub struct WriteBatch {
    /// New value of the job id sequence.
    pub next_job_id: Option<u64>,
    /// Jobs whose record changed.
    pub jobs: BTreeSet<u64>,
    /// Jobs whose accounting row changed.
    pub acct: BTreeSet<u64>,
    /// Jobs whose batch step ended.
    pub steps: BTreeSet<u64>,
    /// Scripts of new jobs: (job id, script, environment as JSON).
    pub scripts: Vec<(u64, String, String)>,
    /// Allocation changes, in order.
    pub allocs: Vec<AllocOp>,
    /// Node rows.
    pub nodes: Vec<NodeRow>,
    /// Step rows taken at the event (`srun` steps), written before `steps`'.
    pub step_rows: Vec<StepRow>,
    /// Runs that ended in a requeue, in order: their steps move out of `job_steps` into
    /// `job_run_steps` before this commit's step rows are written ([`runs::archive_run`]).
    pub run_steps: Vec<runs::RunSteps>,
    /// Services, alerts and per-run accounting ([`crate::svcstore`]).
    pub svc: crate::svcstore::SvcBatch,
    /// Accounting rows taken at the event (a requeued run), written before `acct`'s.
    pub acct_rows: Vec<crate::acct::AcctRow>,
    /// Finished jobs purged after `MinJobAge`: (job id, script row's id: the array's id for an
    /// array task). Their `jobs` rows are deleted, and the script row once no job row names it.
    pub purged: Vec<(u64, u64)>,
    /// Steps' usage as node daemons reported it ([`runs::write_usage`]).
    pub usage: Vec<flotilla_proto::StepUsage>,
    /// Accounting database rows changed by `sacctmgr` ([`crate::assoc::db::write`]).
    pub assoc: Vec<crate::assoc::db::AssocOp>,
    /// Fair-share usage to save (replacing what is stored), at most every
    /// `PriorityCalcPeriod`.
    pub fair_usage: Option<flotilla_core::fairshare::Usage>,
}

/// One `job_steps` row (the batch step, or an `srun` step: `step` = `"0"`, `"1"`, ...), or with
/// `StepRow<u32>` one `job_runs` row.
pub use runs::StepRow;

impl WriteBatch {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.next_job_id.is_none()
            && self.jobs.is_empty()
            && self.acct.is_empty()
            && self.steps.is_empty()
            && self.scripts.is_empty()
            && self.allocs.is_empty()
            && self.nodes.is_empty()
            && self.step_rows.is_empty()
            && self.run_steps.is_empty()
            && self.svc.is_empty()
            && self.acct_rows.is_empty()
            && self.purged.is_empty()
            && self.usage.is_empty()
            && self.assoc.is_empty()
            && self.fair_usage.is_none()
    }
}

/// What is loaded at start.
#[derive(Debug)]
pub struct Loaded {
    /// Next job id.
    pub next_job_id: u64,
    /// Jobs not finished, and finished jobs that ended at or after the cutoff.
    pub jobs: Vec<JobRecord>,
    /// Nodes.
    pub nodes: Vec<NodeRow>,
    /// Services, sequences and recent alerts.
    pub svc: crate::svcstore::SvcLoaded,
}

/// The state database.
#[derive(Debug)]
pub struct Store {
    db: Box<dyn Backend>,
    at: String,
    /// Commits fail as on a full disk ([`Store::set_commit_fault`]).
    commit_fault: std::cell::Cell<bool>,
    /// The leader lease held, whose epoch every commit checks ([`lease`]).
    lease: Option<Lease>,
    /// When the lease was last renewed (by a commit or a renewal).
    fenced_at: Option<std::time::Instant>,
    /// The same, for the server's node sessions ([`lease::FenceWatch`]).
    fence_watch: lease::FenceWatch,
    /// A test's clock for the lease ([`Store::set_lease_clock`]).
    lease_clock: Option<String>,
    /// The job rows followed while this controller waited as a standby, for its recovery
    /// ([`Store::set_follower`], [`Store::load_with`]).
    follower: Option<follow::JobFollower>,
}

impl Drop for Store {
    /// A store dropped with its lease frees it (a controller stopped or restarted in process).
    fn drop(&mut self) {
        self.release_lease();
    }
}

/// The columns of `jobs` a turn writes, in their parameter order.
const JOB_COLS: &[&str] = &[
    "id", "array_job_id", "array_task_id", "state", "\"user\"", "uid", "name", "partition", "submit_time", "start_time",
    "end_time", "record", "format",
];

impl Store {
    /// Opens (creating if needed) `<dir>/flotilla.db` and applies pending migrations.
    pub fn open(dir: &Path, sync: SyncMode) -> Result<Store, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join("flotilla.db");
        let at = path.display().to_string();
        let e = |source: rusqlite::Error| StoreError::Db {
            at: at.clone(),
            source: source.into(),
        };
        let conn = rusqlite::Connection::open(&path).map_err(e)?;
        let sync = match sync {
            SyncMode::Normal => "NORMAL",
            SyncMode::Full => "FULL",
        };
        // Space freed by purged jobs goes back to the file system (incremental vacuum after
        // each purge, [`Store::commit`]); a new database is created so, an older one is
        // converted once (VACUUM), when the disk has room for the copy.
        let fresh: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0)).map_err(e)?;
        if fresh == 0 {
            conn.execute_batch("PRAGMA auto_vacuum=INCREMENTAL;").map_err(e)?;
        }
        // The WAL is truncated back to 16 MiB after a checkpoint, so that one large
        // transaction does not keep its size on disk.
        let pragmas = format!(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous={sync}; PRAGMA foreign_keys=ON; PRAGMA busy_timeout=5000; \
             PRAGMA journal_size_limit=16777216;"
        );
        conn.execute_batch(&pragmas).map_err(e)?;
        let s = Store::over(Box::new(backend::Sqlite::new(conn, path.clone())))?;
        let conn = s.sqlite().expect("a SQLite store");
        let mode: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).map_err(e)?;
        if mode != 2 {
            if let Err(e) = conn.execute_batch("PRAGMA auto_vacuum=INCREMENTAL; VACUUM;") {
                tracing::warn!(path = %path.display(), "cannot convert the state database to incremental vacuum: {e}");
            }
        }
        Ok(s)
    }

    /// Connects to the PostgreSQL database of `conf` and applies pending migrations.
    ///
    /// # Errors
    /// The server cannot be reached, refuses the login, or a migration fails.
    pub fn open_postgres(conf: &PgConf) -> Result<Store, StoreError> {
        let pg = postgres::Postgres::connect(conf.clone()).map_err(|source| StoreError::Db {
            at: conf.location(),
            source,
        })?;
        Store::over(Box::new(pg))
    }

    /// Opens the store `conf` names ([`Store::open`] or [`Store::open_postgres`]).
    ///
    /// # Errors
    /// Theirs.
    pub fn open_conf(conf: &StorageConf) -> Result<Store, StoreError> {
        match conf {
            StorageConf::Sqlite { dir, sync } => Store::open(dir, *sync),
            StorageConf::Postgres(pg) => Store::open_postgres(pg),
        }
    }

    /// A store over an open connection: applies pending migrations.
    fn over(db: Box<dyn Backend>) -> Result<Store, StoreError> {
        let s = Store {
            at: db.location(),
            db,
            commit_fault: std::cell::Cell::new(false),
            lease: None,
            fenced_at: None,
            fence_watch: lease::FenceWatch::default(),
            lease_clock: None,
            follower: None,
        };
        s.migrate()?;
        Ok(s)
    }

    /// The SQLite connection, when the store is SQLite.
    fn sqlite(&self) -> Option<&rusqlite::Connection> {
        (self.db.dialect() == Dialect::Sqlite).then(|| {
            let any: &dyn std::any::Any = self.db.as_any();
            any.downcast_ref::<backend::Sqlite>().expect("the SQLite backend").conn()
        })
    }

    /// Deletes the rows of jobs that finished before `finished_before` (those [`Store::load`]
    /// does not load: purged by an earlier run, or ended while the controller was down) and
    /// every script row no job row names, then returns the freed pages to the file system.
    /// Accounting stays. Returns how many job rows went.
    ///
    /// Errors: the database's (a full disk among them: the caller may go on, the rows stay).
    pub fn purge_finished(&mut self, finished_before: i64) -> Result<usize, StoreError> {
        let n = (|| {
            let tx = Tx::begin(&*self.db)?;
            if !self.fence(tx.db())? {
                return Ok(None);
            }
            let n = tx.db().exec(
                "DELETE FROM jobs WHERE state NOT IN ('PENDING','RUNNING','COMPLETING') \
                 AND (end_time IS NULL OR end_time < ?1)",
                &params![finished_before],
            )?;
            tx.db().exec(
                "DELETE FROM job_scripts WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = job_scripts.job_id) \
                 AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.array_job_id = job_scripts.job_id)",
                &[],
            )?;
            tx.commit()?;
            Ok(Some(n))
        })()
        .map_err(|e| self.err(e))?;
        let Some(n) = n else { return Err(self.lease_lost()) };
        self.db.reclaim();
        Ok(n as usize)
    }

    /// Makes every later commit fail (`fail`: true) with `SQLITE_FULL`, "database or disk is
    /// full", as on a full disk, or work again (false): the tests of that path run without
    /// root and without filling a disk.
    pub fn set_commit_fault(&self, fail: bool) {
        self.commit_fault.set(fail);
    }

    /// SQLite's `auto_vacuum` mode (2: incremental, as [`Store::open`] sets it); `None` on
    /// PostgreSQL.
    ///
    /// Errors: the query's.
    pub fn auto_vacuum(&self) -> Result<Option<i64>, StoreError> {
        match self.sqlite() {
            Some(c) => c.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).map(Some).map_err(|e| self.err(e.into())),
            None => Ok(None),
        }
    }

    /// Bytes of scripts and environments held (`job_scripts`), for tests and statistics.
    ///
    /// Errors: the query's.
    pub fn script_bytes(&self) -> Result<u64, StoreError> {
        let d = self.db.dialect();
        let sql = format!(
            "SELECT CAST(COALESCE(SUM({} + {}), 0) AS BIGINT) FROM job_scripts",
            d.octets("script"),
            d.octets("environment")
        );
        query_value::<i64>(&*self.db, &sql, &[]).map(|n| n.max(0) as u64).map_err(|e| self.err(e))
    }

    fn err(&self, source: DbError) -> StoreError {
        StoreError::Db {
            at: self.at.clone(),
            source,
        }
    }

    /// The connection (read-only uses: accounting queries, [`crate::acct::query`]; and the
    /// tests').
    pub fn db(&self) -> &dyn Backend {
        &*self.db
    }

    /// The database file, or the PostgreSQL server and database (`postgres://...`).
    pub fn location(&self) -> &str {
        &self.at
    }

    /// Schema version (highest migration applied).
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        query_value::<i64>(&*self.db, "SELECT CAST(COALESCE(MAX(version), 0) AS BIGINT) FROM schema_migrations", &[])
            .map(|v| v as u32)
            .map_err(|e| self.err(e))
    }

    /// Applies pending migrations. On PostgreSQL several controllers may start at once on
    /// one database: an advisory lock (held for the migration, released after) lets one
    /// migrate while the others wait, then find nothing left to do. (On SQLite the state
    /// directory's lock keeps a second controller out, [`crate::daemon::lock_state_dir`].)
    fn migrate(&self) -> Result<(), StoreError> {
        const MIGRATION_LOCK: i64 = 0x666c_6f74_6d69; // "flotmi"
        if self.db.dialect() == Dialect::Postgres {
            self.db.query("SELECT pg_advisory_lock(?1)", &params![MIGRATION_LOCK]).map_err(|e| self.err(e))?;
            let r = self.migrate_locked();
            let _ = self.db.query("SELECT pg_advisory_unlock(?1)", &params![MIGRATION_LOCK]);
            return r;
        }
        self.migrate_locked()
    }

    fn migrate_locked(&self) -> Result<(), StoreError> {
        self.db
            .batch("CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL);")
            .map_err(|e| self.err(e))?;
        let current = self.schema_version()?;
        for m in MIGRATIONS {
            let version = m.version;
            if version <= current {
                continue;
            }
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            let sql = match self.db.dialect() {
                Dialect::Sqlite => m.sqlite,
                Dialect::Postgres => m.postgres,
            };
            (|| {
                let tx = Tx::begin(&*self.db)?;
                tx.db().batch(sql)?;
                if let Some(step) = m.step {
                    step(tx.db())?;
                }
                tx.db().exec(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)",
                    &params![version, now],
                )?;
                tx.commit()
            })()
            .map_err(|e| self.err(e))?;
            tracing::info!(version, "applied state migration");
        }
        Ok(())
    }

    /// Refuses a database holding rows in a format newer than [`rows::FORMAT`] (written by a
    /// newer controller): reading them with this one's row types could lose fields.
    fn check_formats(&self) -> Result<(), StoreError> {
        for table in ["jobs", "services", "nodes"] {
            let newest: i64 = query_value(&*self.db, &format!("SELECT CAST(COALESCE(MAX(format), 0) AS BIGINT) FROM {table}"), &[])
                .map_err(|e| self.err(e))?;
            if newest > i64::from(rows::FORMAT) {
                return Err(StoreError::Corrupt {
                    at: self.at.clone(),
                    message: format!(
                        "{table} holds rows of format {newest}, newer than this controller's ({})",
                        rows::FORMAT
                    ),
                });
            }
        }
        Ok(())
    }

    /// Loads the state. Finished jobs are loaded when they ended at or after `finished_since`.
    pub fn load(&self, finished_since: i64) -> Result<Loaded, StoreError> {
        self.load_with(finished_since, None)
    }

    /// Keeps `f`, the job rows followed while this controller was a standby, for
    /// [`Store::take_follower`] at its recovery.
    pub fn set_follower(&mut self, f: follow::JobFollower) {
        self.follower = Some(f);
    }

    /// The follower kept by [`Store::set_follower`], once.
    pub fn take_follower(&mut self) -> Option<follow::JobFollower> {
        self.follower.take()
    }

    /// [`Store::load`], the jobs taken from `follower` (brought up to the store first,
    /// [`Store::follow_jobs`]: only new and changed rows are read) when one is given.
    pub fn load_with(&self, finished_since: i64, follower: Option<&mut follow::JobFollower>) -> Result<Loaded, StoreError> {
        self.check_formats()?;
        let db = &*self.db;
        let e = |e| self.err(e);
        let next_job_id: i64 = query_value(db, "SELECT value FROM meta WHERE key = 'next_job_id'", &[]).map_err(e)?;
        let jobs = match follower {
            Some(f) => {
                let n = self.follow_jobs(f)?;
                tracing::info!(fetched = n.fetched, dropped = n.dropped, jobs = n.jobs, "job rows taken from the followed store");
                f.jobs(finished_since)
            }
            None => self.load_jobs(finished_since)?,
        };
        let nodes = db
            .query("SELECT name, boot_epoch, avail FROM nodes ORDER BY name", &[])
            .map_err(e)?
            .into_iter()
            .map(|r| {
                Ok(NodeRow {
                    name: r.get(0)?,
                    boot_epoch: r.get_u64_bits(1)?,
                    avail: r.get(2)?,
                })
            })
            .collect::<Result<Vec<_>, DbError>>()
            .map_err(e)?;
        let svc = crate::svcstore::load(db).map_err(e)?;
        Ok(Loaded {
            next_job_id: next_job_id.max(1) as u64,
            jobs,
            nodes,
            svc,
        })
    }

    /// The jobs [`Store::load`] loads: not finished, or ended at or after `finished_since`.
    fn load_jobs(&self, finished_since: i64) -> Result<Vec<JobRecord>, StoreError> {
        let e = |e| self.err(e);
        let rows = self
            .db
            .query(
                "SELECT id, record FROM jobs WHERE state IN ('PENDING','RUNNING','COMPLETING') \
                 OR end_time >= ?1 ORDER BY id",
                &params![finished_since],
            )
            .map_err(e)?;
        let mut jobs = Vec::with_capacity(rows.len());
        for row in rows {
            let id: i64 = row.get(0).map_err(e)?;
            let text: String = row.get(1).map_err(e)?;
            let rec = rows::job_from_json(&text).map_err(|e| StoreError::Corrupt {
                at: self.at.clone(),
                message: format!("job {id}: {e}"),
            })?;
            jobs.push(rec);
        }
        Ok(jobs)
    }

    /// The script and environment (JSON) of a job. Read for every node a job launches on:
    /// both backends prepare the statement once and cache it.
    pub fn script(&self, job_id: u64) -> Result<Option<(String, String)>, StoreError> {
        let row = self
            .db
            .query_opt("SELECT script, environment FROM job_scripts WHERE job_id = ?1", &params![job_id])
            .map_err(|e| self.err(e))?;
        row.map(|r| Ok((r.get(0)?, r.get(1)?))).transpose().map_err(|e| self.err(e))
    }

    /// The fair-share usage saved last (empty when none). Errors: the query's.
    pub fn load_usage(&self) -> Result<flotilla_core::fairshare::Usage, StoreError> {
        usage::load(&*self.db).map_err(|e| self.err(e))
    }

    /// Commits one batch in one transaction. `job` looks up a record by id. With a lease
    /// held, the transaction first checks (and renews) it: [`StoreError::LeaseLost`] when
    /// another controller took it, and nothing is written.
    pub fn commit<'a>(
        &mut self,
        batch: &WriteBatch,
        job: &dyn Fn(u64) -> Option<&'a JobRecord>,
    ) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        if self.commit_fault.get() {
            let full = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL);
            return Err(self.err(rusqlite::Error::SqliteFailure(full, Some("database or disk is full".into())).into()));
        }
        let started = std::time::Instant::now();
        if !self.write_batch(batch, job).map_err(|e| self.err(e))? {
            return Err(self.lease_lost());
        }
        if self.lease.is_some() {
            self.fenced(started);
        }
        if !batch.purged.is_empty() {
            self.db.reclaim();
        }
        Ok(())
    }

    /// Writes `batch` in one transaction after the lease's fence; `Ok(false)`: the fence
    /// found the lease lost and nothing was written.
    ///
    /// When the transaction failed because the connection was lost before its COMMIT was
    /// sent (a PostgreSQL server restarted since the last turn: its client is closed, or BEGIN
    /// fails on a dead socket), nothing of it was kept (the server rolls back the open
    /// transaction of a session it loses), so it runs once more on a new connection. A
    /// failure at the COMMIT itself has an unknown outcome and is never run again: the turn's
    /// requests are refused as before.
    fn write_batch<'a>(&self, batch: &WriteBatch, job: &dyn Fn(u64) -> Option<&'a JobRecord>) -> Result<bool, DbError> {
        match self.write_batch_once(batch, job) {
            Err(TxFailure::BeforeCommit(e)) if e.connection_lost() => {
                tracing::warn!(at = %self.at, "the state database's connection was lost before the turn's COMMIT (nothing of it was kept): reconnecting and running it once more: {e}");
                self.write_batch_once(batch, job).map_err(TxFailure::into_error)
            }
            r => r.map_err(TxFailure::into_error),
        }
    }

    /// [`Store::write_batch`]'s one attempt: through [`Backend::run_fenced`] when the backend
    /// pipelines (PostgreSQL: two round trips), else statement by statement.
    fn write_batch_once<'a>(&self, batch: &WriteBatch, job: &dyn Fn(u64) -> Option<&'a JobRecord>) -> Result<bool, TxFailure> {
        let before = TxFailure::BeforeCommit;
        if self.db.pipelines() {
            let queue = Queue::new(self.db.dialect());
            write_rows(&queue, batch, job).map_err(before)?;
            return self.db.run_fenced(self.fence_statement().as_ref(), &queue);
        }
        let tx = Tx::begin(&*self.db).map_err(before)?;
        if !self.fence(tx.db()).map_err(before)? {
            return Ok(false);
        }
        write_rows(tx.db(), batch, job).map_err(before)?;
        tx.commit().map_err(TxFailure::AtCommit)?;
        Ok(true)
    }

    /// The next `srun` step id of a job: one past the highest numeric step recorded (0 when
    /// none), so that step ids stay unique across a controller restart.
    ///
    /// Errors: the query's.
    pub fn next_step_id(&self, job_id: u64) -> Result<u32, StoreError> {
        let sql = format!(
            "SELECT CAST(MAX(CAST(step AS INTEGER)) AS BIGINT) FROM job_steps WHERE job_id = ?1 AND {}",
            self.db.dialect().is_number("step")
        );
        let max: Option<i64> = query_value(&*self.db, &sql, &params![job_id]).map_err(|e| self.err(e))?;
        Ok(max.map_or(0, |m| (m + 1).max(0) as u32))
    }
}

/// The statements of `batch` on `db` (inside a transaction, or a [`Queue`]), in an order
/// that respects the tables' keys. `job` looks up a record by id. Errors: the database's.
fn write_rows<'a>(db: &dyn Backend, batch: &WriteBatch, job: &dyn Fn(u64) -> Option<&'a JobRecord>) -> Result<(), DbError> {
    let d = db.dialect();
    if let Some(n) = batch.next_job_id {
        db.exec("UPDATE meta SET value = ?1 WHERE key = 'next_job_id'", &params![n])?;
    }
    let scripts: Vec<Vec<Param<'_>>> =
        batch.scripts.iter().map(|(id, script, env)| params![*id, script, env].to_vec()).collect();
    db.exec_many(&d.insert_ignore("job_scripts", &["job_id", "script", "environment"]), &scripts)?;
    let recs: Vec<(&JobRecord, String)> =
        batch.jobs.iter().filter_map(|&id| job(id)).map(|r| (r, rows::job_to_json(r))).collect();
    let sets: Vec<Vec<Param<'_>>> = recs
        .iter()
        .map(|(r, json)| {
            params![
                r.id,
                r.array_job_id,
                r.array_task_id,
                r.state.as_str(),
                &r.user,
                r.uid,
                &r.name,
                &r.partition,
                r.submit_time,
                r.start_time,
                r.end_time,
                json,
                rows::FORMAT
            ]
            .to_vec()
        })
        .collect();
    // The job's owner (`user`, `uid`) and submit time never change once written.
    let upsert = format!(
        "INSERT INTO jobs ({}) VALUES ({}) \
         ON CONFLICT(id) DO UPDATE SET array_job_id=excluded.array_job_id, \
         array_task_id=excluded.array_task_id, state=excluded.state, name=excluded.name, \
         partition=excluded.partition, start_time=excluded.start_time, \
         end_time=excluded.end_time, record=excluded.record, format=excluded.format",
        JOB_COLS.join(", "),
        (1..=JOB_COLS.len()).map(|i| format!("?{i}")).collect::<Vec<_>>().join(",")
    );
    db.exec_many(&upsert, &sets)?;
    write_allocs(db, &batch.allocs)?;
    let nodes: Vec<Vec<Param<'_>>> =
        batch.nodes.iter().map(|n| params![&n.name, n.boot_epoch, &n.avail, rows::FORMAT].to_vec()).collect();
    let node_sql = match d {
        Dialect::Sqlite => "INSERT OR REPLACE INTO nodes (name, boot_epoch, avail, updated_at, format) \
             VALUES (?1, ?2, ?3, strftime('%s','now'), ?4)"
            .to_string(),
        Dialect::Postgres => format!(
            "INSERT INTO nodes (name, boot_epoch, avail, updated_at, format) VALUES (?1, ?2, ?3, {}, ?4) \
             ON CONFLICT (name) DO UPDATE SET boot_epoch = EXCLUDED.boot_epoch, avail = EXCLUDED.avail, \
             updated_at = EXCLUDED.updated_at, format = EXCLUDED.format",
            d.now_epoch()
        ),
    };
    db.exec_many(&node_sql, &nodes)?;
    {
        let current: Vec<crate::acct::AcctRow> =
            batch.acct.iter().filter_map(|&id| job(id)).filter_map(crate::acct::current_row).collect();
        for r in &batch.run_steps {
            runs::archive_run(db, r)?;
        }
        let mut steps = batch.step_rows.clone();
        steps.extend(batch.steps.iter().filter_map(|&id| job(id)).filter_map(crate::acct::batch_step_row));
        crate::acct::write(db, &batch.acct_rows, &current, &steps)?;
    }
    runs::write_usage(db, &batch.usage)?;
    crate::svcstore::commit(db, &batch.svc)?;
    crate::assoc::db::write(db, &batch.assoc)?;
    if let Some(u) = &batch.fair_usage {
        usage::write(db, u)?;
    }
    if !batch.purged.is_empty() {
        let ids: Vec<Vec<Param<'_>>> = batch.purged.iter().map(|&(id, _)| params![id].to_vec()).collect();
        db.exec_many("DELETE FROM jobs WHERE id = ?1", &ids)?;
        let keys: Vec<Vec<Param<'_>>> = batch.purged.iter().map(|&(_, key)| params![key].to_vec()).collect();
        db.exec_many(
            "DELETE FROM job_scripts WHERE job_id = ?1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE id = ?1) \
             AND NOT EXISTS (SELECT 1 FROM jobs WHERE array_job_id = ?1)",
            &keys,
        )?;
    }
    Ok(())
}

/// Writes allocation changes in order: an insert adds the `allocations` row and, for whole
/// GPUs, one `alloc_gpus` row per GPU (whose primary key refuses a GPU bound twice); a delete
/// drops every row of the job (or, for `DeleteNode`, of the job on that node). Consecutive
/// operations of one kind go out together. Errors: the database's (a GPU bound twice among
/// them).
fn write_allocs(db: &dyn Backend, ops: &[AllocOp]) -> Result<(), DbError> {
    const INS: &str = "INSERT INTO allocations (alloc_id, job_id, node, gpu_mask, gpu_milli, cpu_milli, mem_mib, created_at) \
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8)";
    const GPU: &str = "INSERT INTO alloc_gpus (node, gpu, job_id) VALUES (?1, ?2, ?3)";
    for run in ops.chunk_by(|a, b| matches!(a, AllocOp::Insert { .. }) == matches!(b, AllocOp::Insert { .. })) {
        let (mut ins, mut gpus, mut dels, mut node_dels) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for op in run {
            match op {
                AllocOp::Insert { job_id, node, alloc } => {
                    ins.push(
                        params![
                            alloc.id.0,
                            *job_id,
                            node,
                            alloc.part.gpus.0,
                            alloc.part.gpu_milli,
                            alloc.part.cpu_milli,
                            alloc.part.mem_mib,
                            alloc.created_at
                        ]
                        .to_vec(),
                    );
                    if alloc.part.gpu_milli >= flotilla_core::cluster::MILLI {
                        for g in alloc.part.gpus.iter() {
                            gpus.push(params![node, g, *job_id].to_vec());
                        }
                    }
                }
                AllocOp::DeleteJob(job_id) => dels.push(params![*job_id].to_vec()),
                AllocOp::DeleteNode { job_id, node } => node_dels.push(params![*job_id, node].to_vec()),
            }
        }
        db.exec_many(INS, &ins)?;
        db.exec_many(GPU, &gpus)?;
        db.exec_many("DELETE FROM allocations WHERE job_id = ?1", &dels)?;
        db.exec_many("DELETE FROM alloc_gpus WHERE job_id = ?1", &dels)?;
        db.exec_many("DELETE FROM allocations WHERE job_id = ?1 AND node = ?2", &node_dels)?;
        db.exec_many("DELETE FROM alloc_gpus WHERE job_id = ?1 AND node = ?2", &node_dels)?;
    }
    Ok(())
}
