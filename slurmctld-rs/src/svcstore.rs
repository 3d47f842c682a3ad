//! Durable state of services, alerts and per-run accounting (migration `sql/0004_services.sql`),
//! written inside the controller's one transaction per batch ([`crate::store::Store::commit`])
//! and read back at start.

use crate::store::backend::{params, Backend, DbError, Param};

/// One alert or page as stored (and as handed to `AlertProgram`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertRow {
    /// Sequence number (from 1).
    pub id: u64,
    /// When (s since epoch).
    pub time: i64,
    /// Kind (`PreemptionBudgetWarn`, `Page`, ...).
    pub kind: String,
    /// Job concerned (controller id).
    pub job_id: Option<u64>,
    /// Service concerned.
    pub service: Option<u32>,
    /// Text.
    pub message: String,
    /// The core's decision as JSON.
    pub decision: String,
}

/// One ended run of a job (`sacct --duplicates` shows one line per run): a `job_runs` row,
/// keyed by the run (the job's requeue count when it ran; state `PREEMPTED`, `REQUEUED`, or
/// the job's final state). The same row type as a `job_steps` row ([`crate::store::runs`]).
pub type RunRow = crate::store::StepRow<u32>;

/// A change of the services table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceOp {
    /// Insert or replace service `id` (`record`: the controller's record as the JSON of the
    /// store's row type, [`crate::store::rows::service_to_json`]).
    Upsert {
        /// Id.
        id: u32,
        /// Name.
        name: String,
        /// Record.
        record: String,
    },
    /// Delete service `id`.
    Delete(u32),
}

/// What one commit writes to these tables.
#[derive(Debug, Default)]
pub struct SvcBatch {
    /// Service changes, in order.
    pub services: Vec<ServiceOp>,
    /// New value of the service id sequence.
    pub next_service_id: Option<u32>,
    /// New alerts.
    pub alerts: Vec<AlertRow>,
    /// Ended runs.
    pub runs: Vec<RunRow>,
}

impl SvcBatch {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
            && self.next_service_id.is_none()
            && self.alerts.is_empty()
            && self.runs.is_empty()
    }
}

/// What is loaded at start.
#[derive(Debug, Default)]
pub struct SvcLoaded {
    /// Service records (JSON of the store's row type; read them with
    /// [`crate::store::rows::service_from_json`]), by id.
    pub services: Vec<(u32, String)>,
    /// Next service id.
    pub next_service_id: u32,
    /// Next replica id as an older controller kept it (its replicas had ids from
    /// `REPLICA_ID_BASE`); replicas now take job ids and the job id sequence, and this is
    /// no longer written.
    pub next_replica_id: u64,
    /// The most recent alerts (at most [`ALERTS_KEPT`]), oldest first.
    pub alerts: Vec<AlertRow>,
}

/// Alerts kept in memory and loaded at start (older ones stay in the table).
pub const ALERTS_KEPT: usize = 1000;

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Writes `b` inside `tx`.
pub fn commit(tx: &dyn Backend, b: &SvcBatch) -> Result<(), DbError> {
    let d = tx.dialect();
    let upsert = d.replace("services", &["id", "name", "record", "format"], &["id"]);
    for op in &b.services {
        match op {
            ServiceOp::Upsert { id, name, record } => {
                tx.exec(&upsert, &params![*id, name, record, crate::store::rows::FORMAT])?;
            }
            ServiceOp::Delete(id) => {
                tx.exec("DELETE FROM services WHERE id = ?1", &params![*id])?;
            }
        }
    }
    let meta = d.replace("meta", &["key", "value"], &["key"]);
    if let Some(n) = b.next_service_id {
        tx.exec(&meta, &params!["next_service_id", n])?;
    }
    let alerts: Vec<Vec<Param<'_>>> = b
        .alerts
        .iter()
        .map(|a| params![i(a.id), a.time, &a.kind, a.job_id.map(i), a.service, &a.message, &a.decision].to_vec())
        .collect();
    tx.exec_many(
        &d.replace("alerts", &["id", "time", "kind", "job_id", "service", "message", "decision"], &["id"]),
        &alerts,
    )?;
    crate::store::runs::write(tx, crate::store::runs::JOB_RUNS, &b.runs)?;
    Ok(())
}

/// Loads services, sequences and recent alerts.
pub fn load(db: &dyn Backend) -> Result<SvcLoaded, DbError> {
    let meta = |k: &str| -> Result<Option<i64>, DbError> {
        db.query_opt("SELECT value FROM meta WHERE key = ?1", &params![k])?.map(|r| r.get(0)).transpose()
    };
    let services = db
        .query("SELECT id, record FROM services ORDER BY id", &[])?
        .into_iter()
        .map(|r| Ok((r.get::<u32>(0)?, r.get::<String>(1)?)))
        .collect::<Result<Vec<_>, DbError>>()?;
    let mut alerts = db
        .query(
            "SELECT id, time, kind, job_id, service, message, decision FROM alerts ORDER BY id DESC LIMIT ?1",
            &params![ALERTS_KEPT as i64],
        )?
        .into_iter()
        .map(|r| {
            Ok(AlertRow {
                id: r.get::<i64>(0)? as u64,
                time: r.get(1)?,
                kind: r.get(2)?,
                job_id: r.get::<Option<i64>>(3)?.map(|v| v as u64),
                service: r.get(4)?,
                message: r.get(5)?,
                decision: r.get(6)?,
            })
        })
        .collect::<Result<Vec<_>, DbError>>()?;
    alerts.reverse();
    Ok(SvcLoaded {
        services,
        next_service_id: meta("next_service_id")?.unwrap_or(1).max(1) as u32,
        next_replica_id: meta("next_replica_id")?.unwrap_or(0).max(0) as u64,
        alerts,
    })
}

/// The runs of `job_id` before run `before` recorded so far, oldest first (`sacct
/// --duplicates`: the runs before the job's current one).
pub fn runs(db: &dyn Backend, job_id: u64, before: u32) -> Result<Vec<RunRow>, DbError> {
    let t = crate::store::runs::JOB_RUNS;
    crate::store::runs::read(db, t, "job_id = ?1 AND run < ?2", "run", &params![i(job_id), before])
}
