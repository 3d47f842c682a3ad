//! The controllers' leader lease (`ha_lease`, `sql/0010_lease.sql`) and its fencing token, the
//! epoch.
//!
//! One row says who leads: `holder`, `epoch`, `expires_at` (milliseconds by the *database's*
//! clock, never a controller's), the holder's database `session` and its address. The rules:
//!
//! - **Acquire**: one `UPDATE` that takes the row only when it is free, expired, or (on
//!   PostgreSQL) its holder's session is gone (the process died: its connection closed), and
//!   increments the epoch. So each epoch has exactly one holder, decided by the database.
//! - **Fence**: every state-changing transaction of the leader starts with an `UPDATE` of the
//!   row where holder and epoch are its own (renewing the expiry); if it changes no row the
//!   transaction rolls back and the controller has lost the lease ([`StoreError::LeaseLost`]):
//!   it stops writing and steps down at once (fail-stop). On PostgreSQL the row lock orders a
//!   fence against a concurrent acquire: whichever commits first wins, the other sees its
//!   condition false. So no two controllers ever commit in one epoch.
//! - **Renew**: the fence alone, in a transaction of its own, when a third of the lease has
//!   passed without a commit.
//! - **Release**: at a clean shutdown the row is freed (a standby takes over at once).
//!
//! The lease is the same on SQLite, where one controller holds the state directory's lock file
//! for its life ([`crate::daemon`]): a controller restarted after a crash then knows its
//! predecessor is dead and takes the lease at once (`force`).
//!
//! Slurm's own backup controller (Slurm 22.05 `src/slurmctld/backup.c`, `_ping_controller`
//! and `run_backup`) pings the primary and takes over after `SlurmctldTimeout` of silence,
//! guarding against split brain with the heartbeat file in the shared `StateSaveLocation`;
//! here the database is the arbiter and the epoch fences every write and every node message.

use super::backend::{params, DbError, Dialect, Queued, Tx};
use super::{Store, StoreError};
use std::time::{Duration, Instant};

/// The lease a controller holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Who holds it: `host:pid:nonce`, unique per process.
    pub holder: String,
    /// The fencing token.
    pub epoch: u64,
    /// How long a renewal keeps it (`SlurmctldTimeout`).
    pub ttl: Duration,
    /// Where the holder listens (`host:port`).
    pub addr: String,
}

/// The lease's row as another controller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    /// Holder (`""`: free).
    pub holder: String,
    /// Epoch of the last acquire.
    pub epoch: u64,
    /// Where the holder listens.
    pub addr: String,
    /// Milliseconds until it expires by the database's clock (negative: expired).
    pub expires_in_ms: i64,
}

/// What an acquire attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// This controller leads now, in this epoch.
    Leader(u64),
    /// Another holds it.
    Held(LeaseRow),
}

/// When the lease was last fenced (renewed by a commit or a renewal), and for how long a renewal
/// keeps it, shared between the store's owner and the server's node sessions: a session sends
/// its keepalives ([`flotilla_proto::CtlToNode::Keepalive`]) only while the lease is fresh, so
/// that node daemons leave a leader that is paused, hung or cut off from the database (it
/// cannot renew) and go on to the next `SlurmctldHost`. Clones share one value.
#[derive(Debug, Clone, Default)]
pub struct FenceWatch(std::sync::Arc<std::sync::Mutex<Option<(Instant, Duration)>>>);

impl FenceWatch {
    fn set(&self, at: Instant, ttl: Duration) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some((at, ttl));
    }

    /// Whether the lease was fenced less than its length ago (by this process's monotonic
    /// clock, from the start of the renewing transaction: a conservative view of the
    /// database's expiry). False before the first fence.
    pub fn fresh(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_some_and(|(at, ttl)| at.elapsed() < ttl)
    }

    /// The lease's length (`SlurmctldTimeout`), once a lease was taken.
    pub fn ttl(&self) -> Option<Duration> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).map(|(_, ttl)| ttl)
    }
}

impl Store {
    /// Records a fence of the lease held (started at `at`).
    pub(super) fn fenced(&mut self, at: Instant) {
        self.fenced_at = Some(at);
        if let Some(l) = &self.lease {
            self.fence_watch.set(at, l.ttl);
        }
    }

    /// The lease's [`FenceWatch`] (shared: it follows every later fence of this store).
    pub fn fence_watch(&self) -> FenceWatch {
        self.fence_watch.clone()
    }

    /// The database clock in milliseconds as an SQL expression (a test's clock instead when
    /// [`Store::set_lease_clock`] set one).
    fn now_ms(&self) -> String {
        match &self.lease_clock {
            Some(c) => c.clone(),
            None => match self.db.dialect() {
                Dialect::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)".into(),
                Dialect::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)".into(),
            },
        }
    }

    /// The database session of this connection, as an SQL expression.
    fn session(&self) -> &'static str {
        match self.db.dialect() {
            Dialect::Sqlite => "0",
            Dialect::Postgres => "pg_backend_pid()",
        }
    }

    /// Replaces the database clock of the lease's statements by the SQL expression `expr`
    /// (`None`: the database's clock again): the property tests drive time themselves.
    pub fn set_lease_clock(&mut self, expr: Option<String>) {
        self.lease_clock = expr;
    }

    /// The lease this store holds, if any.
    pub fn lease(&self) -> Option<&Lease> {
        self.lease.as_ref()
    }

    /// The fencing token of the lease held (0: none held).
    pub fn epoch(&self) -> u64 {
        self.lease.as_ref().map_or(0, |l| l.epoch)
    }

    /// Tries to take the lease for `holder` listening at `addr`, for `ttl`. It is taken when
    /// free, expired, its holder's session is gone (PostgreSQL), or `force` (the caller knows
    /// the holder is dead: it holds the SQLite state directory's lock). Taking it increments
    /// the epoch. Errors: the database's.
    pub fn acquire_lease(&mut self, holder: &str, addr: &str, ttl: Duration, force: bool) -> Result<Acquired, StoreError> {
        let now = self.now_ms();
        let gone = match self.db.dialect() {
            Dialect::Sqlite => String::new(),
            Dialect::Postgres => {
                " OR (session <> 0 AND NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = ha_lease.session))".into()
            }
        };
        let sql = format!(
            "UPDATE ha_lease SET holder = ?1, epoch = epoch + 1, expires_at = {now} + ?2, session = {}, addr = ?3 \
             WHERE id = 1 AND (holder = '' OR expires_at < {now} OR ?4 = 1{gone}) RETURNING epoch",
            self.session()
        );
        let ttl_ms = ttl.as_millis() as i64;
        let row = self.db.query_opt(&sql, &params![holder, ttl_ms, addr, force]).map_err(|e| self.err(e))?;
        match row {
            Some(r) => {
                let epoch = r.get_u64_bits(0).map_err(|e| self.err(e))?;
                self.lease = Some(Lease { holder: holder.into(), epoch, ttl, addr: addr.into() });
                self.fenced(Instant::now());
                Ok(Acquired::Leader(epoch))
            }
            None => Ok(Acquired::Held(self.lease_row()?)),
        }
    }

    /// The lease's row now. Errors: the database's.
    pub fn lease_row(&self) -> Result<LeaseRow, StoreError> {
        let sql = format!("SELECT holder, epoch, addr, expires_at - {} FROM ha_lease WHERE id = 1", self.now_ms());
        let r = self
            .db
            .query_opt(&sql, &[])
            .and_then(|r| r.ok_or_else(|| DbError::Type("no lease row".into())))
            .map_err(|e| self.err(e))?;
        (|| {
            Ok(LeaseRow { holder: r.get(0)?, epoch: r.get_u64_bits(1)?, addr: r.get(2)?, expires_in_ms: r.get(3)? })
        })()
        .map_err(|e| self.err(e))
    }

    /// The fence, inside the transaction of `db`: renews the lease where holder and epoch are
    /// this store's. `Ok(false)`: no row changed, the lease is lost. Without a lease held (a
    /// store used by tests and tools, not by a controller) there is nothing to check.
    pub(super) fn fence(&self, db: &dyn super::Backend) -> Result<bool, DbError> {
        let Some(f) = self.fence_statement() else { return Ok(true) };
        Ok(db.exec(&f.sql, &f.params())? == 1)
    }

    /// The fence's statement (it must change exactly one row), when a lease is held.
    pub(super) fn fence_statement(&self) -> Option<Queued> {
        let l = self.lease.as_ref()?;
        let sql = format!(
            "UPDATE ha_lease SET expires_at = {} + ?3, session = {} WHERE id = 1 AND holder = ?1 AND epoch = ?2",
            self.now_ms(),
            self.session()
        );
        Some(Queued::new(sql, &params![&l.holder, l.epoch, l.ttl.as_millis() as i64]))
    }

    /// The error of a lost lease: who holds it now, if the database says.
    pub(super) fn lease_lost(&self) -> StoreError {
        let epoch = self.epoch();
        let now = self.lease_row().map(|r| format!("{} holds it in epoch {}", if r.holder.is_empty() { "no one" } else { &r.holder }, r.epoch));
        StoreError::LeaseLost { epoch, now: now.unwrap_or_else(|e| format!("the lease cannot be read: {e}")) }
    }

    /// Renews the lease in a transaction of its own when a third of it has passed since the
    /// last fence (a commit fences too); does nothing otherwise or without a lease.
    ///
    /// Errors: [`StoreError::LeaseLost`] (step down), or the database's (the caller retries at
    /// its next turn; if that lasts a lease, another controller may take over and the next
    /// fence finds the lease lost).
    pub fn renew_lease_if_due(&mut self) -> Result<(), StoreError> {
        let Some(l) = &self.lease else { return Ok(()) };
        if self.fenced_at.is_some_and(|t| t.elapsed() < l.ttl / 3) {
            return Ok(());
        }
        self.renew_lease()
    }

    /// Renews the lease now (see [`Store::renew_lease_if_due`]).
    ///
    /// Errors: as [`Store::renew_lease_if_due`].
    pub fn renew_lease(&mut self) -> Result<(), StoreError> {
        if self.lease.is_none() {
            return Ok(());
        }
        let started = Instant::now();
        let held = (|| {
            let tx = Tx::begin(&*self.db)?;
            if !self.fence(tx.db())? {
                return Ok(false);
            }
            tx.commit()?;
            Ok(true)
        })()
        .map_err(|e| self.err(e))?;
        if !held {
            return Err(self.lease_lost());
        }
        self.fenced(started);
        Ok(())
    }

    /// Whether this store still holds its lease (a read: before node messages of a turn that
    /// committed nothing). Errors: [`StoreError::LeaseLost`], or the database's.
    pub fn check_lease(&self) -> Result<(), StoreError> {
        let Some(l) = &self.lease else { return Ok(()) };
        let row = self
            .db
            .query_opt("SELECT 1 FROM ha_lease WHERE id = 1 AND holder = ?1 AND epoch = ?2", &params![&l.holder, l.epoch])
            .map_err(|e| self.err(e))?;
        match row {
            Some(_) => Ok(()),
            None => Err(self.lease_lost()),
        }
    }

    /// Frees the lease at a clean shutdown, so that a standby takes over at once (best
    /// effort: a failure is logged, and the lease then expires by itself).
    pub fn release_lease(&mut self) {
        let Some(l) = self.lease.take() else { return };
        let r = self.db.exec(
            "UPDATE ha_lease SET holder = '', expires_at = 0, session = 0 WHERE id = 1 AND holder = ?1 AND epoch = ?2",
            &params![&l.holder, l.epoch],
        );
        match r {
            Ok(_) => tracing::info!(epoch = l.epoch, "released the leader lease"),
            Err(e) => tracing::warn!(epoch = l.epoch, "cannot release the leader lease (it expires by itself): {e}"),
        }
    }
}
