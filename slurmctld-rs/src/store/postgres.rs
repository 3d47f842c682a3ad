//! The store's PostgreSQL backend (`StateStorageType=state/postgres`): `tokio-postgres`, its
//! connection driven by a thread of its own (a current-thread tokio runtime), its calls
//! waited for on the caller's thread.
//!
//! Why a thread: the controller commits from its owner task synchronously, as with SQLite,
//! and must not give the runtime's workers a database round trip to await. The driver thread
//! owns the socket; the owner task sends requests down the client's channel and parks until
//! the answers come, at most [`PgConf::call_timeout`] (then the connection is dropped: a
//! server that stopped answering is a lost server). Statements of [`Backend::exec_many`] are
//! all sent before the first answer is awaited (the driver pipelines them), so a turn of
//! thousands of rows costs a few round trips, not thousands.
//!
//! A lost connection (the server restarted, a socket error) is reconnected at the next call;
//! the transaction it held is gone, which the store sees as a failed commit it may retry
//! ([`super::DbError::may_recover`]).

use super::backend::{numbered_to_dollar, Backend, DbError, Dialect, Param, Queue, Queued, Row, TxFailure, Value};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};
use tokio_postgres::{Client, Statement};

/// Where the PostgreSQL state database is and how to log in (slurm.conf's `StateStorage*`
/// keys).
#[derive(Clone, PartialEq, Eq)]
pub struct PgConf {
    /// `StateStorageHost=`: a host name or address, or a directory holding the server's Unix
    /// socket (a path starting with `/`, as libpq reads `host`).
    pub host: String,
    /// `StateStoragePort=` (default 5432; also names the Unix socket `.s.PGSQL.<port>`).
    pub port: u16,
    /// `StateStorageUser=`: the database role.
    pub user: String,
    /// The role's password (from `StateStoragePassFile=`), if any.
    pub password: Option<String>,
    /// `StateStorageLoc=`: the database name.
    pub dbname: String,
    /// How long one call waits for the server before the connection is given up (also the
    /// connect timeout).
    pub call_timeout: Duration,
    /// Send a turn's transaction in two flights ([`Backend::run_fenced`]): BEGIN, the lease's
    /// fence and every write together, then COMMIT or ROLLBACK once the fence's row count is
    /// read. `false`: one round trip per statement (and per statement kind of a batch), as
    /// before; the submit bench's baseline. slurmctld always pipelines.
    pub pipeline: bool,
    /// The server's `idle_in_transaction_session_timeout` for this controller's sessions
    /// (`None`: the server's setting). A leader paused or cut off from the server in the middle
    /// of a turn's transaction leaves it open on the server, holding the lease row's lock (the
    /// fence's `UPDATE`), and a standby's lease take waits on that lock; through a partition the
    /// server may not notice the dead client for hours (TCP keepalive). With this set, the
    /// server ends such a session after that long idle inside its transaction (rolled back, the
    /// lock released), so the standby can take the lapsed lease. slurmctld sets it to
    /// `SlurmctldTimeout` (at least 2 s): a healthy controller is idle inside a transaction only
    /// between reading the fence's row count and sending COMMIT.
    pub idle_in_transaction_timeout: Option<Duration>,
}

impl std::fmt::Debug for PgConf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConf")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("dbname", &self.dbname)
            .field("call_timeout", &self.call_timeout)
            .field("pipeline", &self.pipeline)
            .field("idle_in_transaction_timeout", &self.idle_in_transaction_timeout)
            .finish()
    }
}

impl PgConf {
    /// `postgres://user@host:port/db` (never the password), for messages.
    pub fn location(&self) -> String {
        format!("postgres://{}@{}:{}/{}", self.user, self.host, self.port, self.dbname)
    }

    fn driver_config(&self) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        if self.host.starts_with('/') {
            c.host_path(&self.host);
        } else {
            c.host(&self.host);
        }
        c.port(self.port)
            .user(&self.user)
            .dbname(&self.dbname)
            .application_name("slurmctld")
            .connect_timeout(self.call_timeout);
        if let Some(p) = &self.password {
            c.password(p.as_bytes());
        }
        if let Some(t) = self.idle_in_transaction_timeout {
            c.options(format!("-c idle_in_transaction_session_timeout={}", t.as_millis().max(1)));
        }
        c
    }
}

/// Errors reading a password file.
#[derive(Debug, thiserror::Error)]
pub enum PassFileError {
    /// It cannot be read.
    #[error("StateStoragePassFile {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Someone besides its owner may read it, or its owner is not the controller's user.
    #[error("StateStoragePassFile {path}: {why}")]
    Unsafe {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// Reads the database password from `path`: the first line, without its line end. The file
/// must be a regular file owned by the controller's effective user and readable by no one
/// else (mode `0600` or `0400`), as the cluster key; anything else is refused before the
/// password is read.
///
/// # Errors
/// [`PassFileError`].
pub fn read_password_file(path: &Path) -> Result<String, PassFileError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let io = |source| PassFileError::Io { path: path.to_path_buf(), source };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    let unsafe_ = |why: String| PassFileError::Unsafe { path: path.to_path_buf(), why };
    if !meta.is_file() {
        return Err(unsafe_("not a regular file".into()));
    }
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid {
        return Err(unsafe_(format!("owned by uid {}, not by the controller's uid {euid}", meta.uid())));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(unsafe_(format!("mode {:04o}: group or others may access it (chmod 600)", meta.mode() & 0o7777)));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut &f, &mut text).map_err(io)?;
    Ok(text.lines().next().unwrap_or("").to_string())
}

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let bad = || -> Box<dyn std::error::Error + Sync + Send> { format!("cannot bind {self:?} as {ty}").into() };
        match *self {
            Param::Null => Ok(IsNull::Yes),
            Param::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(i).map_err(|_| bad())?.to_sql(ty, out),
                Type::INT2 => i16::try_from(i).map_err(|_| bad())?.to_sql(ty, out),
                Type::BOOL => (i != 0).to_sql(ty, out),
                Type::FLOAT8 => (i as f64).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => i.to_string().as_str().to_sql(ty, out),
                _ => Err(bad()),
            },
            Param::Real(r) => match *ty {
                Type::FLOAT8 => r.to_sql(ty, out),
                Type::FLOAT4 => (r as f32).to_sql(ty, out),
                _ => Err(bad()),
            },
            Param::Text(s) => match *ty {
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN => s.to_sql(ty, out),
                Type::INT8 => s.parse::<i64>().map_err(|_| bad())?.to_sql(ty, out),
                _ => Err(bad()),
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for Value {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(match *ty {
            Type::INT8 => Value::Int(i64::from_sql(ty, raw)?),
            Type::INT4 => Value::Int(i64::from(i32::from_sql(ty, raw)?)),
            Type::INT2 => Value::Int(i64::from(i16::from_sql(ty, raw)?)),
            Type::OID => Value::Int(i64::from(u32::from_sql(ty, raw)?)),
            Type::BOOL => Value::Int(i64::from(bool::from_sql(ty, raw)?)),
            Type::FLOAT8 => Value::Real(f64::from_sql(ty, raw)?),
            Type::FLOAT4 => Value::Real(f64::from(f32::from_sql(ty, raw)?)),
            Type::VOID => Value::Null,
            _ => Value::Text(<&str>::from_sql(ty, raw)?.to_string()),
        })
    }

    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Value::Null)
    }

    fn accepts(ty: &Type) -> bool {
        matches!(
            *ty,
            Type::INT8 | Type::INT4 | Type::INT2 | Type::OID | Type::BOOL | Type::FLOAT8 | Type::FLOAT4 | Type::VOID
        ) || <&str as FromSql>::accepts(ty)
    }
}

/// Wakes the parked caller.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls every future of `futs` to its end on this thread (all of them are polled once before
/// any is waited for, so requests they send go out together), or gives up at `deadline`.
/// After that first round each wake polls from the first unfinished future on and stops at the
/// first still pending: the server answers a connection's requests in order, so the later ones
/// are not there either (a turn of hundreds of statements is not polled hundreds of times
/// over).
fn wait_all<F: Future>(futs: Vec<F>, deadline: Instant, limit: Duration) -> Result<Vec<F::Output>, DbError> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut futs: Vec<Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    let mut left = futs.len();
    let (mut first, mut sent) = (0, false);
    loop {
        for (f, o) in futs[first..].iter_mut().zip(out[first..].iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(&mut cx) {
                    Poll::Ready(v) => {
                        *o = Some(v);
                        left -= 1;
                    }
                    Poll::Pending if sent => break,
                    Poll::Pending => {}
                }
            }
        }
        sent = true;
        while out.get(first).is_some_and(Option::is_some) {
            first += 1;
        }
        if left == 0 {
            return Ok(out.into_iter().map(|o| o.expect("every future finished")).collect());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(DbError::Timeout(limit.as_secs()));
        }
        std::thread::park_timeout(deadline - now);
    }
}

/// A live connection: the client, its prepared statements, and the thread driving it.
struct Live {
    client: Client,
    stmts: HashMap<String, Statement>,
}

/// The PostgreSQL backend.
pub struct Postgres {
    conf: PgConf,
    live: RefCell<Option<Live>>,
    /// Between [`Backend::begin`] and [`Backend::commit`]/[`Backend::rollback`]: a connection
    /// lost then is not replaced (its transaction is gone; a COMMIT on a new connection would
    /// answer success for nothing), the calls fail until the transaction ends.
    in_tx: Cell<bool>,
}

impl std::fmt::Debug for Postgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Postgres").field("conf", &self.conf).field("connected", &self.live.borrow().is_some()).finish()
    }
}

impl Postgres {
    /// A backend for `conf`, connected now.
    ///
    /// # Errors
    /// The server cannot be reached or refuses the login.
    pub fn connect(conf: PgConf) -> Result<Postgres, DbError> {
        let pg = Postgres { conf, live: RefCell::new(None), in_tx: Cell::new(false) };
        pg.ensure()?;
        Ok(pg)
    }

    /// The configuration.
    pub fn conf(&self) -> &PgConf {
        &self.conf
    }

    /// Connects on a new driver thread; waits at most the call timeout.
    fn open(&self) -> Result<Live, DbError> {
        let cfg = self.conf.driver_config();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let name = "slurmctld-pg".to_string();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(DbError::Connection(format!("cannot start the connection's runtime: {e}"))));
                        return;
                    }
                };
                rt.block_on(async move {
                    match cfg.connect(tokio_postgres::NoTls).await {
                        Ok((client, conn)) => {
                            if tx.send(Ok(client)).is_ok() {
                                if let Err(e) = conn.await {
                                    tracing::warn!("PostgreSQL connection lost: {e}");
                                }
                            }
                        }
                        Err(e) => {
                            let _ = tx.send(Err(DbError::Postgres(e)));
                        }
                    }
                });
            })
            .map_err(|e| DbError::Connection(format!("cannot start the connection's thread: {e}")))?;
        let wait = self.conf.call_timeout + Duration::from_secs(1);
        let client = rx.recv_timeout(wait).map_err(|_| DbError::Timeout(wait.as_secs()))??;
        Ok(Live { client, stmts: HashMap::new() })
    }

    /// Connects when there is no live connection (refused inside a transaction: its
    /// connection was lost, and with it the transaction).
    fn ensure(&self) -> Result<(), DbError> {
        if self.live.borrow().as_ref().is_some_and(|l| !l.client.is_closed()) {
            return Ok(());
        }
        *self.live.borrow_mut() = None;
        if self.in_tx.get() {
            return Err(DbError::Connection(
                "the connection to the PostgreSQL server was lost inside a transaction (the server rolled it back)".into(),
            ));
        }
        let live = self.open()?;
        *self.live.borrow_mut() = Some(live);
        Ok(())
    }

    /// Runs `f` on the live connection (connecting first if needed); drops the connection
    /// when the call failed with it closed or timed out.
    fn with<T>(&self, f: impl FnOnce(&mut Live, Instant) -> Result<T, DbError>) -> Result<T, DbError> {
        self.ensure()?;
        let deadline = Instant::now() + self.conf.call_timeout;
        let mut guard = self.live.borrow_mut();
        let live = guard.as_mut().expect("connected");
        let r = f(live, deadline);
        if r.is_err() && (live.client.is_closed() || matches!(r, Err(DbError::Timeout(_)))) {
            *guard = None;
        }
        r
    }

    /// The prepared statement of `sql` (SQLite-numbered parameters), prepared once.
    fn statement(&self, live: &mut Live, sql: &str, deadline: Instant) -> Result<Statement, DbError> {
        if let Some(s) = live.stmts.get(sql) {
            return Ok(s.clone());
        }
        let text = numbered_to_dollar(sql);
        let st = wait_all(vec![live.client.prepare(&text)], deadline, self.conf.call_timeout)?
            .pop()
            .expect("one answer")?;
        live.stmts.insert(sql.to_string(), st.clone());
        Ok(st)
    }
}

fn refs<'a>(p: &'a [Param<'a>]) -> Vec<&'a (dyn ToSql + Sync)> {
    p.iter().map(|x| x as &(dyn ToSql + Sync)).collect()
}

impl Backend for Postgres {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn location(&self) -> String {
        self.conf.location()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn exec(&self, sql: &str, params: &[Param<'_>]) -> Result<u64, DbError> {
        let limit = self.conf.call_timeout;
        self.with(|live, deadline| {
            let st = self.statement(live, sql, deadline)?;
            let p = refs(params);
            Ok(wait_all(vec![live.client.execute(&st, &p)], deadline, limit)?.pop().expect("one answer")?)
        })
    }

    fn exec_many(&self, sql: &str, sets: &[Vec<Param<'_>>]) -> Result<(), DbError> {
        if sets.is_empty() {
            return Ok(());
        }
        let limit = self.conf.call_timeout;
        self.with(|live, deadline| {
            let st = self.statement(live, sql, deadline)?;
            let refs: Vec<Vec<&(dyn ToSql + Sync)>> = sets.iter().map(|p| refs(p)).collect();
            let futs: Vec<_> = refs.iter().map(|p| live.client.execute(&st, p)).collect();
            for r in wait_all(futs, deadline, limit)? {
                r?;
            }
            Ok(())
        })
    }

    fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        let limit = self.conf.call_timeout;
        self.with(|live, deadline| {
            let st = self.statement(live, sql, deadline)?;
            let p = refs(params);
            let rows = wait_all(vec![live.client.query(&st, &p)], deadline, limit)?.pop().expect("one answer")?;
            rows.iter()
                .map(|r| (0..r.len()).map(|i| r.try_get::<_, Value>(i)).collect::<Result<Vec<_>, _>>().map(Row))
                .collect::<Result<Vec<_>, _>>()
                .map_err(DbError::Postgres)
        })
    }

    fn batch(&self, sql: &str) -> Result<(), DbError> {
        let limit = self.conf.call_timeout;
        self.with(|live, deadline| Ok(wait_all(vec![live.client.batch_execute(sql)], deadline, limit)?.pop().expect("one answer")?))
    }

    fn begin(&self) -> Result<(), DbError> {
        self.batch("BEGIN")?;
        self.in_tx.set(true);
        Ok(())
    }

    fn commit(&self) -> Result<(), DbError> {
        let r = self.batch("COMMIT");
        self.in_tx.set(false);
        r
    }

    fn rollback(&self) {
        if self.live.borrow().is_some() {
            let _ = self.batch("ROLLBACK");
        }
        self.in_tx.set(false);
    }

    fn pipelines(&self) -> bool {
        self.conf.pipeline
    }

    fn run_fenced(&self, fence: Option<&Queued>, queue: &Queue) -> Result<bool, TxFailure> {
        if !self.conf.pipeline {
            return super::backend::run_stepwise(self, fence, queue);
        }
        let queued = queue.statements();
        let stmts: Vec<&Queued> = fence.into_iter().chain(queued.iter()).collect();
        self.ensure().map_err(TxFailure::BeforeCommit)?;
        let deadline = Instant::now() + self.conf.call_timeout;
        let mut guard = self.live.borrow_mut();
        let live = guard.as_mut().expect("connected");
        let r = self.flights(live, &stmts, fence.is_some(), deadline);
        if let Err(TxFailure::BeforeCommit(e) | TxFailure::AtCommit(e)) = &r {
            if live.client.is_closed() || matches!(e, DbError::Timeout(_)) {
                *guard = None;
            }
        }
        r
    }
}

type Answer<'a> = Pin<Box<dyn Future<Output = Result<u64, tokio_postgres::Error>> + 'a>>;

impl Postgres {
    /// [`Backend::run_fenced`]'s two flights on `live`: `stmts` become fewer, multi-row
    /// statements ([`coalesce`]); those not prepared yet are prepared first (together: one more
    /// round trip, once per statement text); then BEGIN and the statements (the fence first
    /// when `fenced`) go out together, their answers are read, and
    /// COMMIT (the fence changed one row, nothing failed) or ROLLBACK goes out.
    fn flights(&self, live: &mut Live, stmts: &[&Queued], fenced: bool, deadline: Instant) -> Result<bool, TxFailure> {
        let limit = self.conf.call_timeout;
        let before = TxFailure::BeforeCommit;
        let units = coalesce(stmts);
        let mut new: Vec<&str> = units.iter().map(|(sql, _)| sql.as_ref()).filter(|s| !live.stmts.contains_key(*s)).collect();
        new.sort_unstable();
        new.dedup();
        if !new.is_empty() {
            let texts: Vec<_> = new.iter().map(|s| numbered_to_dollar(s)).collect();
            let prepared = wait_all(texts.iter().map(|t| live.client.prepare(t)).collect(), deadline, limit).map_err(before)?;
            for (sql, st) in new.iter().zip(prepared) {
                live.stmts.insert((*sql).to_string(), st.map_err(|e| before(e.into()))?);
            }
        }
        let sts: Vec<&Statement> = units.iter().map(|(sql, _)| &live.stmts[sql.as_ref()]).collect();
        let refs: Vec<Vec<&(dyn ToSql + Sync)>> = units.iter().map(|(_, p)| refs(p)).collect();
        let client = &live.client;
        let mut futs: Vec<Answer<'_>> = Vec::with_capacity(units.len() + 1);
        futs.push(Box::pin(async move { client.batch_execute("BEGIN").await.map(|()| 0) }));
        for (st, p) in sts.iter().zip(&refs) {
            futs.push(Box::pin(client.execute(*st, p)));
        }
        let answers = wait_all(futs, deadline, limit).map_err(before)?;
        // The fence's row count (answer 1, after BEGIN's), and the first error: statements
        // after a failed one fail too (the transaction is aborted), the first says why.
        let fence_rows = answers.get(1).and_then(|a| a.as_ref().ok().copied());
        let failed = answers.into_iter().find_map(Result::err);
        let rollback = |live: &Live| {
            let _ = wait_all(vec![live.client.batch_execute("ROLLBACK")], deadline, limit);
        };
        if let Some(e) = failed {
            rollback(live);
            return Err(before(e.into()));
        }
        if fenced && fence_rows != Some(1) {
            rollback(live);
            return Ok(false);
        }
        wait_all(vec![live.client.batch_execute("COMMIT")], deadline, limit)
            .map_err(TxFailure::AtCommit)?
            .pop()
            .expect("one answer")
            .map_err(|e| TxFailure::AtCommit(e.into()))?;
        Ok(true)
    }
}

/// The most rows one multi-row statement carries ([`coalesce`]).
const MAX_ROWS: usize = 64;

/// A single-row `INSERT INTO t (cols) VALUES (tuple) rest` taken apart for [`coalesce`].
#[derive(Debug, Clone, PartialEq)]
struct Insert<'s> {
    /// Up to and with `VALUES `.
    head: &'s str,
    /// `(?1, ?2, expr, ?3)`: every parameter is in it.
    tuple: &'s str,
    /// `ON CONFLICT ...`, or nothing.
    rest: &'s str,
    /// For `ON CONFLICT (keys) DO UPDATE`: the parameters (1-based) holding the keys, so that
    /// two rows with one key never share a statement (PostgreSQL refuses to update a row twice
    /// in one); `None` otherwise.
    keys: Option<Vec<usize>>,
}

/// Splits `s` at the commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut from) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[from..i].trim());
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[from..].trim());
    out
}

/// `sql` as an [`Insert`], when it is a single-row insert whose parameters are all in its
/// tuple (and no quote makes the scan unsure); `None` for anything else.
fn parse_insert(sql: &str) -> Option<Insert<'_>> {
    if !sql.starts_with("INSERT INTO ") || sql.contains('\'') {
        return None;
    }
    let at = sql.find(" VALUES (")? + " VALUES ".len();
    let (head, after) = sql.split_at(at);
    let mut depth = 0;
    let end = after.char_indices().find_map(|(i, c)| {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        None
    })?;
    let (tuple, rest) = after.split_at(end);
    if rest.contains('?') || rest.contains(" VALUES ") {
        return None;
    }
    let keys = match rest.find("DO UPDATE") {
        None => None,
        Some(_) => {
            let conflict = rest.find("ON CONFLICT")? + "ON CONFLICT".len();
            let open = conflict + rest[conflict..].find('(')?;
            let close = open + rest[open..].find(')')?;
            let cols_open = head.find('(')?;
            let cols_close = head[cols_open..].find(')')? + cols_open;
            let cols = split_top(&head[cols_open + 1..cols_close]);
            let items = split_top(&tuple[1..tuple.len() - 1]);
            let mut keys = Vec::new();
            for k in split_top(&rest[open + 1..close]) {
                let i = cols.iter().position(|c| c.trim_matches('"') == k.trim_matches('"'))?;
                keys.push(items.get(i)?.strip_prefix('?')?.parse().ok()?);
            }
            Some(keys)
        }
    };
    Some(Insert { head, tuple, rest, keys })
}

/// `tuple` with each `?k` written `?{k + offset}`.
fn renumber(tuple: &str, offset: usize, out: &mut String) {
    let mut chars = tuple.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c != '?' {
            out.push(c);
            continue;
        }
        let mut end = i + 1;
        while let Some(&(j, d)) = chars.peek() {
            if !d.is_ascii_digit() {
                break;
            }
            end = j + 1;
            chars.next();
        }
        match tuple[i + 1..end].parse::<usize>() {
            Ok(k) => out.push_str(&format!("?{}", k + offset)),
            Err(_) => out.push_str(&tuple[i..end]),
        }
    }
}

/// A turn's statements as fewer statements: each run of one single-row insert (the rows of a
/// table a turn writes: job rows, scripts, accounting rows) goes out as multi-row inserts of
/// up to [`MAX_ROWS`] rows, a power of two of them (so each table has a handful of prepared
/// forms), never two rows with one `ON CONFLICT ... DO UPDATE` key in one statement (the
/// later row then still wins, as it did one statement after the other). The server runs one
/// statement of 32 rows far faster than 32 statements (one Bind/Execute/Sync each). Anything
/// else goes as it is, in order.
fn coalesce<'q>(stmts: &[&'q Queued]) -> Vec<(Cow<'q, str>, Vec<Param<'q>>)> {
    let mut out = Vec::with_capacity(stmts.len());
    let mut i = 0;
    while i < stmts.len() {
        let q = stmts[i];
        let run = stmts[i..].iter().take_while(|o| o.sql == q.sql).count();
        let ins = if run > 1 { parse_insert(&q.sql) } else { None };
        let Some(ins) = ins else {
            out.extend(stmts[i..i + run].iter().map(|q| (Cow::Borrowed(q.sql.as_str()), q.params())));
            i += run;
            continue;
        };
        let n = q.params.len().max(1);
        let most = MAX_ROWS.min(u16::MAX as usize / n).max(1);
        let end = i + run;
        while i < end {
            let mut take = 0;
            if let Some(keys) = &ins.keys {
                let mut seen: Vec<Vec<&Value>> = Vec::new();
                while i + take < end && take < most {
                    let key: Vec<&Value> = keys.iter().filter_map(|&k| stmts[i + take].params.get(k - 1)).collect();
                    if seen.contains(&key) {
                        break;
                    }
                    seen.push(key);
                    take += 1;
                }
            } else {
                take = (end - i).min(most);
            }
            // A power of two: 1, 2, 4, ... rows.
            let take = 1 << (usize::BITS - 1 - take.max(1).leading_zeros());
            if take == 1 {
                out.push((Cow::Borrowed(stmts[i].sql.as_str()), stmts[i].params()));
            } else {
                let mut sql = String::with_capacity(ins.head.len() + take * (ins.tuple.len() + 8) + ins.rest.len());
                sql.push_str(ins.head);
                let mut params = Vec::with_capacity(take * n);
                for (r, q) in stmts[i..i + take].iter().enumerate() {
                    if r > 0 {
                        sql.push(',');
                    }
                    renumber(ins.tuple, r * q.params.len(), &mut sql);
                    params.extend(q.params());
                }
                sql.push_str(ins.rest);
                out.push((Cow::Owned(sql), params));
            }
            i += take;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::backend::params;

    #[test]
    fn inserts_are_taken_apart() {
        let jobs = "INSERT INTO t (id, \"user\", n) VALUES (?1,?2,?3) ON CONFLICT(id) DO UPDATE SET n=excluded.n";
        let i = parse_insert(jobs).unwrap();
        assert_eq!((i.head, i.tuple, i.keys), ("INSERT INTO t (id, \"user\", n) VALUES ", "(?1,?2,?3)", Some(vec![1])));
        let nodes = "INSERT INTO nodes (name, boot, at, f) VALUES (?1, ?2, CAST(EXTRACT(EPOCH FROM now()) AS BIGINT), ?3) \
                     ON CONFLICT (name) DO UPDATE SET boot = EXCLUDED.boot";
        let i = parse_insert(nodes).unwrap();
        assert_eq!(i.tuple, "(?1, ?2, CAST(EXTRACT(EPOCH FROM now()) AS BIGINT), ?3)");
        assert_eq!(i.keys, Some(vec![1]));
        let steps = "INSERT INTO s (job_id, step, x) VALUES (?1,?2,?3) ON CONFLICT (job_id, step) DO UPDATE SET x = EXCLUDED.x";
        assert_eq!(parse_insert(steps).unwrap().keys, Some(vec![1, 2]));
        assert_eq!(parse_insert("INSERT INTO t (a) VALUES (?1) ON CONFLICT DO NOTHING").unwrap().keys, None);
        assert!(parse_insert("UPDATE meta SET value = ?1 WHERE key = 'next_job_id'").is_none());
        assert!(parse_insert("INSERT INTO x (a) SELECT a FROM y WHERE b = ?1").is_none());
        let mut out = String::new();
        renumber("(?1, ?2, f(?3), ?10)", 10, &mut out);
        assert_eq!(out, "(?11, ?12, f(?13), ?20)");
    }

    #[test]
    fn runs_become_multi_row_statements_without_a_key_twice() {
        let sql = "INSERT INTO t (id, n) VALUES (?1,?2) ON CONFLICT(id) DO UPDATE SET n=excluded.n";
        let q = |id: i64, n: i64| Queued::new(sql, &params![id, n]);
        let fence = Queued::new("UPDATE lease SET e = e WHERE id = 1 AND epoch = ?1", &params![3i64]);
        // Seven rows, the fifth repeating the key of the second: 4 rows, then 2 (the repeat
        // starts a new statement, a power of two), then 1.
        let rows = [q(1, 1), q(2, 1), q(3, 1), q(4, 1), q(2, 2), q(6, 1), q(7, 1)];
        let mut stmts = vec![&fence];
        stmts.extend(rows.iter());
        let units = coalesce(&stmts);
        let shape: Vec<usize> = units.iter().map(|(_, p)| p.len() / 2).collect();
        assert_eq!(units[0].0, fence.sql, "the fence first, alone");
        assert_eq!(&shape[1..], &[4, 2, 1]);
        assert_eq!(units[1].0, "INSERT INTO t (id, n) VALUES (?1,?2),(?3,?4),(?5,?6),(?7,?8) ON CONFLICT(id) DO UPDATE SET n=excluded.n");
        let flat: Vec<Param<'_>> = units[1..].iter().flat_map(|(_, p)| p.clone()).collect();
        let want: Vec<Param<'_>> = rows.iter().flat_map(|r| r.params()).collect();
        assert_eq!(flat, want, "every row once, in order");
    }
}
