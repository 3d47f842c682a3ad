//! A standby following the job rows of the store while it waits for the lease, so that its
//! takeover reads and parses only the rows that changed since its last look instead of every
//! job (`benches/takeover.rs`: at 50,000 jobs, reading and parsing them was three quarters of
//! a takeover).
//!
//! PostgreSQL only (on SQLite one controller owns its state directory: there is no standby).
//! Each row version carries the id of the transaction that wrote it (`xmin`), so a follower
//! keeps, per job, the version it parsed; each [`Store::follow_jobs`] reads every row's id
//! and version (no records), fetches and parses the rows that are new or changed, and drops
//! the jobs whose rows are gone (purged). Versions are only compared for equality, so
//! transaction id wraparound cannot fool it (a row frozen by `VACUUM` keeps its `xmin`; were
//! it to change, the row would just be read again).
//!
//! At takeover ([`Store::load_with`]) the follower looks once more, after the lease is this
//! controller's: no other controller commits from then on (every commit fences the lease),
//! so the rows it then holds are the store's, and the jobs [`Store::load`] would select are
//! taken from it. Nodes, services and the job id sequence are read as at any start.

use super::{Store, StoreError};
use crate::job::JobRecord;
use crate::store::backend::Dialect;
use std::collections::{BTreeMap, HashSet};

/// One followed job row: the version parsed and the record.
#[derive(Debug, Clone)]
struct Followed {
    /// `xmin` of the row version parsed.
    version: String,
    /// The `end_time` column.
    end_time: Option<i64>,
    /// The `state` column.
    state: String,
    rec: JobRecord,
}

/// The job rows a standby follows ([`Store::follow_jobs`]).
#[derive(Debug, Clone, Default)]
pub struct JobFollower {
    rows: BTreeMap<u64, Followed>,
}

/// What one [`Store::follow_jobs`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FollowStats {
    /// Rows read and parsed (new or changed).
    pub fetched: usize,
    /// Jobs dropped (their rows are gone).
    pub dropped: usize,
    /// Jobs followed afterwards.
    pub jobs: usize,
    /// New or changed rows left for a later look ([`Store::follow_jobs_up_to`]).
    pub behind: usize,
}

/// How many new or changed rows a standby reads per look (about a quarter of a second of
/// parsing on a small host): a standby that starts beside 50,000 jobs catches up in ten looks.
pub const STANDBY_FETCH: usize = 5_000;

/// The states [`Store::load`] loads whatever their end time (its `WHERE`).
const LIVE: [&str; 3] = ["PENDING", "RUNNING", "COMPLETING"];

/// How many changed rows one fetch names.
const FETCH_CHUNK: usize = 1000;

impl JobFollower {
    /// The jobs [`Store::load`] would load with `finished_since`, in id order: not finished,
    /// or ended at or after it.
    pub fn jobs(&self, finished_since: i64) -> Vec<JobRecord> {
        self.rows
            .values()
            .filter(|f| {
                LIVE.contains(&f.state.as_str()) || f.end_time.is_some_and(|t| t >= finished_since)
            })
            .map(|f| f.rec.clone())
            .collect()
    }

    /// How many jobs are followed.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no job is followed.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl Store {
    /// Whether a standby on this store can follow it ([`Store::follow_jobs`]): PostgreSQL.
    pub fn can_follow(&self) -> bool {
        self.db.dialect() == Dialect::Postgres
    }

    /// Brings `f` up to the store's job rows: reads every row's id and version, then reads and
    /// parses the rows `f` does not hold at that version, and drops the jobs whose rows are
    /// gone. Errors: the database's, a row that does not parse ([`StoreError::Corrupt`]), a
    /// store that cannot be followed (SQLite: `Corrupt` naming it).
    pub fn follow_jobs(&self, f: &mut JobFollower) -> Result<FollowStats, StoreError> {
        self.follow_jobs_up_to(f, usize::MAX)
    }

    /// [`Store::follow_jobs`], reading at most `max` new or changed rows (in id order): the
    /// others are read by a later look (a standby's look stays short, so that it keeps polling
    /// the lease on time while it catches up with a large store: [`STANDBY_FETCH`]).
    /// [`FollowStats::behind`] says how many were left.
    pub fn follow_jobs_up_to(
        &self,
        f: &mut JobFollower,
        max: usize,
    ) -> Result<FollowStats, StoreError> {
        if !self.can_follow() {
            return Err(StoreError::Corrupt {
                at: self.at.clone(),
                message: "only a PostgreSQL store can be followed".into(),
            });
        }
        let db = &*self.db;
        let e = |e| self.err(e);
        let mut seen = HashSet::new();
        let mut changed = Vec::new();
        for row in db
            .query("SELECT id, xmin::text FROM jobs", &[])
            .map_err(e)?
        {
            let id: i64 = row.get(0).map_err(e)?;
            let version: String = row.get(1).map_err(e)?;
            let id = id as u64;
            seen.insert(id);
            if f.rows.get(&id).is_none_or(|r| r.version != version) {
                changed.push(id);
            }
        }
        let before = f.rows.len();
        f.rows.retain(|id, _| seen.contains(id));
        let dropped = before - f.rows.len();
        let behind = changed.len().saturating_sub(max);
        changed.truncate(max);
        let mut fetched = 0;
        for chunk in changed.chunks(FETCH_CHUNK) {
            // A row changed since the versions were read is fetched at its newer version; one
            // deleted since is not returned and stays out (until the next look sees it gone).
            for id in chunk {
                f.rows.remove(id);
            }
            let list = chunk
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(",");
            let sql = format!(
                "SELECT id, xmin::text, state, end_time, record FROM jobs WHERE id IN ({list})"
            );
            for row in db.query(&sql, &[]).map_err(e)? {
                let id: i64 = row.get(0).map_err(e)?;
                let text: String = row.get(4).map_err(e)?;
                let rec = super::rows::job_from_json(&text).map_err(|err| StoreError::Corrupt {
                    at: self.at.clone(),
                    message: format!("job {id}: {err}"),
                })?;
                f.rows.insert(
                    id as u64,
                    Followed {
                        version: row.get(1).map_err(e)?,
                        state: row.get(2).map_err(e)?,
                        end_time: row.get(3).map_err(e)?,
                        rec,
                    },
                );
                fetched += 1;
            }
        }
        Ok(FollowStats {
            fetched,
            dropped,
            jobs: f.rows.len(),
            behind,
        })
    }
}
