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

use crate::job::JobRecord;
use flotilla_core::sched::Allocation;
use rusqlite::{params, Connection, OptionalExtension, Transaction};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod migrate;
mod usage;
pub mod rows;
pub mod runs;

/// One numbered migration: SQL from `sql/`, and for some a Rust step run after the SQL in the
/// same transaction (rows rewritten, [`migrate`]).
struct Migration {
    version: u32,
    sql: &'static str,
    step: Option<fn(&Transaction<'_>) -> rusqlite::Result<()>>,
}

/// Numbered migrations, applied in order, each in one transaction that also records its
/// version in `schema_migrations`. There is no number 3; numbers are never reused.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        sql: include_str!("../../sql/0001_init.sql"),
        step: None,
    },
    Migration {
        version: 2,
        sql: include_str!("../../sql/0002_acct.sql"),
        step: None,
    },
    Migration {
        version: 4,
        sql: include_str!("../../sql/0004_services.sql"),
        step: None,
    },
    Migration {
        version: 5,
        sql: include_str!("../../sql/0005_row_format.sql"),
        step: Some(migrate::rows_to_format_1),
    },
    Migration {
        version: 6,
        sql: include_str!("../../sql/0006_purge.sql"),
        step: None,
    },
    Migration {
        version: 7,
        sql: include_str!("../../sql/0007_assoc.sql"),
        step: None,
    },
    Migration {
        version: 8,
        sql: include_str!("../../sql/0008_usage.sql"),
        step: None,
    },
    Migration {
        version: 9,
        sql: include_str!("../../sql/0009_usage.sql"),
        step: None,
    },
];

/// SQLite `synchronous` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// `NORMAL`: survives process crashes.
    Normal,
    /// `FULL`: survives power loss too.
    Full,
}

/// Store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("state database {path}: {source}")]
    Sqlite {
        /// Database file.
        path: PathBuf,
        /// Cause.
        source: rusqlite::Error,
    },
    /// A stored record cannot be read.
    #[error("state database {path}: corrupt record: {message}")]
    Corrupt {
        /// Database file.
        path: PathBuf,
        /// What.
        message: String,
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
    /// `EDQUOT`), a file that cannot be opened or is read-only for now, a lock held. A
    /// constraint violated (a GPU bound twice) or a corrupt database is not: the controller
    /// fails stop on those.
    pub fn may_recover(&self) -> bool {
        use rusqlite::ErrorCode as C;
        match self {
            StoreError::Sqlite {
                source: rusqlite::Error::SqliteFailure(f, _),
                ..
            } => matches!(
                f.code,
                C::DiskFull | C::SystemIoFailure | C::CannotOpen | C::ReadOnly | C::DatabaseBusy | C::DatabaseLocked
            ),
            // ENOSPC, EDQUOT.
            StoreError::Dir { source, .. } => matches!(source.raw_os_error(), Some(28 | 122)),
            _ => false,
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
    /// Step rows taken at the event (the batch step of a requeued run, `srun` steps), written
    /// before `steps`'.
    pub step_rows: Vec<StepRow>,
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
    conn: Connection,
    path: PathBuf,
    /// Commits fail as on a full disk ([`Store::set_commit_fault`]).
    commit_fault: std::cell::Cell<bool>,
}

fn i(v: u64) -> i64 {
    v as i64
}

impl Store {
    /// Opens (creating if needed) `<dir>/flotilla.db` and applies pending migrations.
    pub fn open(dir: &Path, sync: SyncMode) -> Result<Store, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join("flotilla.db");
        let conn = Connection::open(&path).map_err(|source| StoreError::Sqlite {
            path: path.clone(),
            source,
        })?;
        let mut s = Store {
            conn,
            path,
            commit_fault: std::cell::Cell::new(false),
        };
        let sync = match sync {
            SyncMode::Normal => "NORMAL",
            SyncMode::Full => "FULL",
        };
        // Space freed by purged jobs goes back to the file system (incremental vacuum after
        // each purge, [`Store::commit`]); a new database is created so, an older one is
        // converted once (VACUUM), when the disk has room for the copy.
        let fresh: i64 = s.conn.query_row("PRAGMA page_count", [], |r| r.get(0)).map_err(|e| s.err(e))?;
        if fresh == 0 {
            s.conn.execute_batch("PRAGMA auto_vacuum=INCREMENTAL;").map_err(|e| s.err(e))?;
        }
        // The WAL is truncated back to 16 MiB after a checkpoint, so that one large
        // transaction does not keep its size on disk.
        let pragmas = format!(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous={sync}; PRAGMA foreign_keys=ON; PRAGMA busy_timeout=5000; \
             PRAGMA journal_size_limit=16777216;"
        );
        s.conn.execute_batch(&pragmas).map_err(|e| s.err(e))?;
        s.migrate()?;
        let mode: i64 = s.conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).map_err(|e| s.err(e))?;
        if mode != 2 {
            if let Err(e) = s.conn.execute_batch("PRAGMA auto_vacuum=INCREMENTAL; VACUUM;") {
                tracing::warn!(path = %s.path.display(), "cannot convert the state database to incremental vacuum: {e}");
            }
        }
        Ok(s)
    }

    /// Deletes the rows of jobs that finished before `finished_before` (those [`Store::load`]
    /// does not load: purged by an earlier run, or ended while the controller was down) and
    /// every script row no job row names, then returns the freed pages to the file system.
    /// Accounting stays. Returns how many job rows went.
    ///
    /// Errors: SQLite's (a full disk among them: the caller may go on, the rows stay).
    pub fn purge_finished(&mut self, finished_before: i64) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let e = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(e)?;
        let n = tx
            .execute(
                "DELETE FROM jobs WHERE state NOT IN ('PENDING','RUNNING','COMPLETING') \
                 AND (end_time IS NULL OR end_time < ?1)",
                [finished_before],
            )
            .map_err(e)?;
        tx.execute(
            "DELETE FROM job_scripts WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = job_scripts.job_id) \
             AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.array_job_id = job_scripts.job_id)",
            [],
        )
        .map_err(e)?;
        tx.commit().map_err(e)?;
        self.vacuum();
        Ok(n)
    }

    /// Returns free pages to the file system (best effort: a failure is logged): the
    /// incremental vacuum moves them to the end of the database and cuts it, the checkpoint
    /// writes that into the database file and truncates the WAL.
    fn vacuum(&self) {
        let r = self
            .conn
            .prepare("PRAGMA incremental_vacuum")
            .and_then(|mut st| {
                // Each step frees pages; run it to its end.
                let mut rows = st.query([])?;
                while rows.next()?.is_some() {}
                Ok(())
            })
            .and_then(|()| self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())));
        if let Err(e) = r {
            tracing::warn!(path = %self.path.display(), "incremental vacuum failed: {e}");
        }
    }

    /// Makes every later commit fail (`fail`: true) with `SQLITE_FULL`, "database or disk is
    /// full", as on a full disk, or work again (false): the tests of that path run without
    /// root and without filling a disk.
    pub fn set_commit_fault(&self, fail: bool) {
        self.commit_fault.set(fail);
    }

    /// SQLite's `auto_vacuum` mode (2: incremental, as [`Store::open`] sets it).
    ///
    /// Errors: the query's.
    pub fn auto_vacuum(&self) -> Result<i64, StoreError> {
        self.conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0)).map_err(|e| self.err(e))
    }

    /// Bytes of scripts and environments held (`job_scripts`), for tests and statistics.
    ///
    /// Errors: the query's.
    pub fn script_bytes(&self) -> Result<u64, StoreError> {
        self.conn
            .query_row(
                "SELECT COALESCE(SUM(LENGTH(CAST(script AS BLOB)) + LENGTH(CAST(environment AS BLOB))), 0) FROM job_scripts",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n.max(0) as u64)
            .map_err(|e| self.err(e))
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// The connection (read-only uses: accounting queries, [`crate::acct::query`]).
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Schema version (highest migration applied).
    pub fn schema_version(&self) -> Result<u32, StoreError> {
        self.conn
            .query_row("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", [], |r| r.get(0))
            .map_err(|e| self.err(e))
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);")
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
            let path = self.path.clone();
            let e = |source| StoreError::Sqlite {
                path: path.clone(),
                source,
            };
            let tx = self.conn.transaction().map_err(e)?;
            tx.execute_batch(m.sql).map_err(e)?;
            if let Some(step) = m.step {
                step(&tx).map_err(e)?;
            }
            tx.execute(
                "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)",
                params![version, now],
            )
            .map_err(e)?;
            tx.commit().map_err(e)?;
            tracing::info!(version, "applied state migration");
        }
        Ok(())
    }

    /// Refuses a database holding rows in a format newer than [`rows::FORMAT`] (written by a
    /// newer controller): reading them with this one's row types could lose fields.
    fn check_formats(&self) -> Result<(), StoreError> {
        for table in ["jobs", "services", "nodes"] {
            let newest: u32 = self
                .conn
                .query_row(&format!("SELECT COALESCE(MAX(format), 0) FROM {table}"), [], |r| r.get(0))
                .map_err(|e| self.err(e))?;
            if newest > rows::FORMAT {
                return Err(StoreError::Corrupt {
                    path: self.path.clone(),
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
        self.check_formats()?;
        let next_job_id: i64 = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = 'next_job_id'", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, record FROM jobs WHERE state IN ('PENDING','RUNNING','COMPLETING') \
                 OR end_time >= ?1 ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([finished_since], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .map_err(|e| self.err(e))?;
        let mut jobs = Vec::new();
        for row in rows {
            let (id, text) = row.map_err(|e| self.err(e))?;
            let rec = rows::job_from_json(&text).map_err(|e| StoreError::Corrupt {
                path: self.path.clone(),
                message: format!("job {id}: {e}"),
            })?;
            jobs.push(rec);
        }
        let mut stmt = self
            .conn
            .prepare("SELECT name, boot_epoch, avail FROM nodes ORDER BY name")
            .map_err(|e| self.err(e))?;
        let nodes = stmt
            .query_map([], |r| {
                Ok(NodeRow {
                    name: r.get(0)?,
                    boot_epoch: r.get::<_, i64>(1)? as u64,
                    avail: r.get(2)?,
                })
            })
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))?;
        let svc = crate::svcstore::load(&self.conn).map_err(|e| self.err(e))?;
        Ok(Loaded {
            next_job_id: next_job_id.max(1) as u64,
            jobs,
            nodes,
            svc,
        })
    }

    /// The script and environment (JSON) of a job. Read for every node a job launches on:
    /// the statement is prepared once and cached (`query_row` prepares it on every call).
    pub fn script(&self, job_id: u64) -> Result<Option<(String, String)>, StoreError> {
        self.conn
            .prepare_cached("SELECT script, environment FROM job_scripts WHERE job_id = ?1")
            .and_then(|mut st| st.query_row([i(job_id)], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(|e| self.err(e))
    }

    /// The fair-share usage saved last (empty when none). Errors: the query's.
    pub fn load_usage(&self) -> Result<flotilla_core::fairshare::Usage, StoreError> {
        usage::load(&self.conn).map_err(|e| self.err(e))
    }

    /// Commits one batch in one transaction. `job` looks up a record by id.
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
            return Err(self.err(rusqlite::Error::SqliteFailure(full, Some("database or disk is full".into()))));
        }
        let path = self.path.clone();
        let e = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(e)?;
        if let Some(n) = batch.next_job_id {
            tx.prepare_cached("UPDATE meta SET value = ?1 WHERE key = 'next_job_id'")
                .and_then(|mut s| s.execute([i(n)]))
                .map_err(e)?;
        }
        {
            let mut ins = tx
                .prepare_cached("INSERT OR IGNORE INTO job_scripts (job_id, script, environment) VALUES (?1, ?2, ?3)")
                .map_err(e)?;
            for (id, script, env) in &batch.scripts {
                ins.execute(params![i(*id), script, env]).map_err(e)?;
            }
        }
        {
            let mut up = tx
                .prepare_cached(
                    "INSERT INTO jobs (id, array_job_id, array_task_id, state, user, uid, name, partition, \
                     submit_time, start_time, end_time, record, format) \
                     VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13) \
                     ON CONFLICT(id) DO UPDATE SET array_job_id=excluded.array_job_id, \
                     array_task_id=excluded.array_task_id, state=excluded.state, name=excluded.name, \
                     partition=excluded.partition, start_time=excluded.start_time, \
                     end_time=excluded.end_time, record=excluded.record, format=excluded.format",
                )
                .map_err(e)?;
            for &id in &batch.jobs {
                let Some(r) = job(id) else { continue };
                let json = rows::job_to_json(r);
                up.execute(params![
                    i(r.id),
                    r.array_job_id.map(i),
                    r.array_task_id,
                    r.state.as_str(),
                    r.user,
                    r.uid,
                    r.name,
                    r.partition,
                    r.submit_time,
                    r.start_time,
                    r.end_time,
                    json,
                    rows::FORMAT
                ])
                .map_err(e)?;
            }
        }
        write_allocs(&tx, &batch.allocs).map_err(e)?;
        {
            let mut up = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO nodes (name, boot_epoch, avail, updated_at, format) \
                     VALUES (?1, ?2, ?3, strftime('%s','now'), ?4)",
                )
                .map_err(e)?;
            for n in &batch.nodes {
                up.execute(params![n.name, i(n.boot_epoch), n.avail, rows::FORMAT]).map_err(e)?;
            }
        }
        {
            let current: Vec<crate::acct::AcctRow> =
                batch.acct.iter().filter_map(|&id| job(id)).filter_map(crate::acct::current_row).collect();
            let mut steps = batch.step_rows.clone();
            steps.extend(batch.steps.iter().filter_map(|&id| job(id)).filter_map(crate::acct::batch_step_row));
            crate::acct::write(&tx, &batch.acct_rows, &current, &steps).map_err(e)?;
        }
        runs::write_usage(&tx, &batch.usage).map_err(e)?;
        crate::svcstore::commit(&tx, &batch.svc).map_err(e)?;
        crate::assoc::db::write(&tx, &batch.assoc).map_err(e)?;
        if let Some(u) = &batch.fair_usage {
            usage::write(&tx, u).map_err(e)?;
        }
        if !batch.purged.is_empty() {
            let mut del = tx.prepare_cached("DELETE FROM jobs WHERE id = ?1").map_err(e)?;
            let mut dels = tx
                .prepare_cached(
                    "DELETE FROM job_scripts WHERE job_id = ?1 AND NOT EXISTS (SELECT 1 FROM jobs WHERE id = ?1) \
                     AND NOT EXISTS (SELECT 1 FROM jobs WHERE array_job_id = ?1)",
                )
                .map_err(e)?;
            for &(id, _) in &batch.purged {
                del.execute([i(id)]).map_err(e)?;
            }
            for &(_, key) in &batch.purged {
                dels.execute([i(key)]).map_err(e)?;
            }
        }
        tx.commit().map_err(e)?;
        if !batch.purged.is_empty() {
            self.vacuum();
        }
        Ok(())
    }

    /// The next `srun` step id of a job: one past the highest numeric step recorded (0 when
    /// none), so that step ids stay unique across a controller restart.
    ///
    /// Errors: the query's.
    pub fn next_step_id(&self, job_id: u64) -> Result<u32, StoreError> {
        let max: Option<i64> = self
            .conn
            .query_row(
                "SELECT MAX(CAST(step AS INTEGER)) FROM job_steps WHERE job_id = ?1 AND step GLOB '[0-9]*'",
                params![job_id as i64],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        Ok(max.map_or(0, |m| (m + 1).max(0) as u32))
    }

}

/// Writes allocation changes in order: an insert adds the `allocations` row and, for whole
/// GPUs, one `alloc_gpus` row per GPU (whose primary key refuses a GPU bound twice); a delete
/// drops every row of the job. Errors: SQLite's (a GPU bound twice among them).
fn write_allocs(tx: &Transaction<'_>, ops: &[AllocOp]) -> rusqlite::Result<()> {
    let mut ins = tx.prepare_cached(
        "INSERT INTO allocations (alloc_id, job_id, node, gpu_mask, gpu_milli, cpu_milli, mem_mib, created_at) \
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8)",
    )?;
    let mut gpu = tx.prepare_cached("INSERT INTO alloc_gpus (node, gpu, job_id) VALUES (?1, ?2, ?3)")?;
    let mut del = tx.prepare_cached("DELETE FROM allocations WHERE job_id = ?1")?;
    let mut delg = tx.prepare_cached("DELETE FROM alloc_gpus WHERE job_id = ?1")?;
    for op in ops {
        match op {
            AllocOp::Insert { job_id, node, alloc } => {
                ins.execute(params![
                    i(alloc.id.0),
                    i(*job_id),
                    node,
                    i(alloc.part.gpus.0),
                    alloc.part.gpu_milli,
                    i(alloc.part.cpu_milli),
                    i(alloc.part.mem_mib),
                    i(alloc.created_at)
                ])?;
                if alloc.part.gpu_milli >= flotilla_core::cluster::MILLI {
                    for g in alloc.part.gpus.iter() {
                        gpu.execute(params![node, g, i(*job_id)])?;
                    }
                }
            }
            AllocOp::DeleteJob(job_id) => {
                del.execute([i(*job_id)])?;
                delg.execute([i(*job_id)])?;
            }
        }
    }
    Ok(())
}
