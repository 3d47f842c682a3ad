//! The storage trait under the controller's store: one SQL connection, SQLite's or
//! PostgreSQL's, reached through [`Backend`]. The store's logic (what a turn writes, what
//! recovery reads, accounting queries, migrations' Rust steps) is written once against this
//! trait; the few places where the two dialects differ ask [`Dialect`] for their SQL.
//!
//! SQL text uses SQLite's numbered parameters (`?1`, `?2`, ...); the PostgreSQL backend turns
//! them into `$1`, `$2`, ... once per statement (its statement cache is keyed by the text).
//! Column names PostgreSQL reserves are written quoted (`"user"`), which SQLite reads the
//! same. Integers are 64-bit in both (`INTEGER` in SQLite, `BIGINT` in PostgreSQL's schema,
//! `sql/postgres/`), reals are doubles, text is UTF-8.
//!
//! Must never: read a clock, or hold a statement or a transaction open across turns.

use std::borrow::Cow;

/// Which SQL dialect a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite 3 (the embedded default, `StateStorageType=state/sqlite`).
    Sqlite,
    /// PostgreSQL 15 (`StateStorageType=state/postgres`).
    Postgres,
}

impl Dialect {
    /// An insert that replaces the row with the same key: SQLite's `INSERT OR REPLACE`, and
    /// PostgreSQL's `INSERT ... ON CONFLICT (keys) DO UPDATE SET` every other column. `cols`
    /// are bound to `?1`, `?2`, ... in order; `keys` is the primary key's columns.
    pub fn replace(self, table: &str, cols: &[&str], keys: &[&str]) -> String {
        self.replace_with(table, cols, keys, "")
    }

    /// [`Dialect::replace`], with `extra` (`, col = expr`) appended to PostgreSQL's update
    /// list: what SQLite's delete-and-insert changes besides the columns (a new position in
    /// insertion order, [`Dialect::insertion_order`]).
    pub fn replace_with(self, table: &str, cols: &[&str], keys: &[&str], extra: &str) -> String {
        let list = cols.join(", ");
        let values = (1..=cols.len()).map(|i| format!("?{i}")).collect::<Vec<_>>().join(",");
        match self {
            Dialect::Sqlite => format!("INSERT OR REPLACE INTO {table} ({list}) VALUES ({values})"),
            Dialect::Postgres => {
                let set: Vec<String> =
                    cols.iter().filter(|c| !keys.contains(c)).map(|c| format!("{c} = EXCLUDED.{c}")).collect();
                let action = if set.is_empty() && extra.is_empty() {
                    "NOTHING".to_string()
                } else {
                    let set = set.join(", ");
                    let extra = if set.is_empty() { extra.trim_start_matches(',').trim() } else { extra };
                    format!("UPDATE SET {set}{extra}")
                };
                format!("INSERT INTO {table} ({list}) VALUES ({values}) ON CONFLICT ({}) DO {action}", keys.join(", "))
            }
        }
    }

    /// An insert that leaves an existing row with the same key alone.
    pub fn insert_ignore(self, table: &str, cols: &[&str]) -> String {
        let list = cols.join(", ");
        let values = (1..=cols.len()).map(|i| format!("?{i}")).collect::<Vec<_>>().join(",");
        match self {
            Dialect::Sqlite => format!("INSERT OR IGNORE INTO {table} ({list}) VALUES ({values})"),
            Dialect::Postgres => format!("INSERT INTO {table} ({list}) VALUES ({values}) ON CONFLICT DO NOTHING"),
        }
    }

    /// The database's clock in whole seconds since the epoch, as an SQL expression.
    pub fn now_epoch(self) -> &'static str {
        match self {
            Dialect::Sqlite => "CAST(strftime('%s','now') AS INTEGER)",
            Dialect::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS BIGINT)",
        }
    }

    /// The column that orders a table's rows by insertion, a replaced row counting as new:
    /// SQLite's `rowid`, the `ord` column PostgreSQL's schema gives such tables.
    pub fn insertion_order(self) -> &'static str {
        match self {
            Dialect::Sqlite => "rowid",
            Dialect::Postgres => "ord",
        }
    }

    /// An SQL condition: `col` holds a decimal number (`0`, `12`; SQLite only looks at the
    /// first character, as the store always did).
    pub fn is_number(self, col: &str) -> String {
        match self {
            Dialect::Sqlite => format!("{col} GLOB '[0-9]*'"),
            Dialect::Postgres => format!("{col} ~ '^[0-9]+$'"),
        }
    }

    /// Bytes of a text column, as an SQL expression.
    pub fn octets(self, col: &str) -> String {
        match self {
            Dialect::Sqlite => format!("LENGTH(CAST({col} AS BLOB))"),
            Dialect::Postgres => format!("OCTET_LENGTH({col})"),
        }
    }
}

/// A parameter of a statement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Param<'a> {
    /// `NULL`.
    Null,
    /// A 64-bit integer (booleans are 0 and 1).
    Int(i64),
    /// A double.
    Real(f64),
    /// UTF-8 text.
    Text(&'a str),
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl From<$t> for Param<'_> {
            fn from(v: $t) -> Self {
                Param::Int(i64::from(v))
            }
        }
    )*};
}
int_param!(i64, i32, u32, u16, u8, bool);

impl From<u64> for Param<'_> {
    /// As the store always stored them: the bits of the `u64` as an `i64` (a GPU mask of 64
    /// GPUs reads back the same).
    fn from(v: u64) -> Self {
        Param::Int(v as i64)
    }
}

impl From<f64> for Param<'_> {
    fn from(v: f64) -> Self {
        Param::Real(v)
    }
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(v: &'a str) -> Self {
        Param::Text(v)
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(v: &'a String) -> Self {
        Param::Text(v)
    }
}

impl<'a> From<&'a Option<String>> for Param<'a> {
    fn from(v: &'a Option<String>) -> Self {
        v.as_deref().map_or(Param::Null, Param::Text)
    }
}

impl<'a, T: Into<Param<'a>>> From<Option<T>> for Param<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Param::Null, Into::into)
    }
}

/// Statement parameters: `params![a, &b, c]` is `[Param::from(a), Param::from(&b), ...]`.
#[macro_export]
macro_rules! params {
    () => { [] as [$crate::store::backend::Param<'_>; 0] };
    ($($e:expr),+ $(,)?) => { [$($crate::store::backend::Param::from($e)),+] };
}
pub use params;

/// A value read from a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `NULL`.
    Null,
    /// An integer (PostgreSQL's `SMALLINT`, `INTEGER`, `BIGINT` and `BOOLEAN` read as one).
    Int(i64),
    /// A double.
    Real(f64),
    /// Text.
    Text(String),
}

impl Value {
    /// The value as a parameter (to write back what was read).
    pub fn as_param(&self) -> Param<'_> {
        match self {
            Value::Null => Param::Null,
            Value::Int(v) => Param::Int(*v),
            Value::Real(v) => Param::Real(*v),
            Value::Text(s) => Param::Text(s),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) => "integer",
            Value::Real(_) => "real",
            Value::Text(_) => "text",
        }
    }
}

/// One row of a query's answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row(pub Vec<Value>);

/// A Rust type a column reads into.
pub trait FromValue: Sized {
    /// Converts `v`, or says what it is instead (`Err`: the value's description).
    fn from_value(v: &Value) -> Result<Self, String>;
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Int(i) => Ok(*i),
            o => Err(o.kind().into()),
        }
    }
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: &Value) -> Result<Self, String> {
                let i = i64::from_value(v)?;
                <$t>::try_from(i).map_err(|_| format!("{i}, out of range for {}", stringify!($t)))
            }
        }
    )*};
}
int_value!(i32, u32, u16, u8);

impl FromValue for bool {
    fn from_value(v: &Value) -> Result<Self, String> {
        i64::from_value(v).map(|i| i != 0)
    }
}

impl FromValue for f64 {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Real(r) => Ok(*r),
            Value::Int(i) => Ok(*i as f64),
            o => Err(o.kind().into()),
        }
    }
}

impl FromValue for String {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            o => Err(o.kind().into()),
        }
    }
}

impl FromValue for Value {
    fn from_value(v: &Value) -> Result<Self, String> {
        Ok(v.clone())
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

impl Row {
    /// Column `i` as a `T`. Errors: no such column, or a value of another type
    /// ([`DbError::Type`]).
    pub fn get<T: FromValue>(&self, i: usize) -> Result<T, DbError> {
        let v = self.0.get(i).ok_or_else(|| DbError::Type(format!("no column {i}")))?;
        T::from_value(v).map_err(|got| DbError::Type(format!("column {i}: {got} for {}", std::any::type_name::<T>())))
    }

    /// Column `i` as an unsigned 64-bit number stored as its `i64` bits (see
    /// [`Param`]'s `From<u64>`).
    pub fn get_u64_bits(&self, i: usize) -> Result<u64, DbError> {
        self.get::<i64>(i).map(|v| v as u64)
    }
}

/// An error of the SQL layer.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite's.
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL's (or the driver's: a lost connection, a refused login).
    #[error("{}", pg_message(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// The PostgreSQL server did not answer in time; the connection was dropped.
    #[error("no answer from the PostgreSQL server within {0} s")]
    Timeout(u64),
    /// The PostgreSQL connection cannot be made or was lost (what the driver said).
    #[error("{0}")]
    Connection(String),
    /// A value of an unexpected type.
    #[error("unexpected value: {0}")]
    Type(String),
}

/// The server's own message (`ERROR 23505: duplicate key value ...`), or the driver's with
/// its cause (`error connecting to server: No such file or directory`).
fn pg_message(e: &tokio_postgres::Error) -> String {
    if let Some(d) = e.as_db_error() {
        return format!("{} {}: {}", d.severity(), d.code().code(), d.message());
    }
    let mut s = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

impl DbError {
    /// Whether the connection to the server was found lost (closed, a socket error, the
    /// server terminating the session as it shuts down): after a reconnect the same request
    /// may succeed. Not a timeout (a server that does not answer may still hold the
    /// session's locks) and never SQLite's.
    pub fn connection_lost(&self) -> bool {
        match self {
            DbError::Connection(_) => true,
            DbError::Postgres(e) => {
                if let Some(c) = e.code() {
                    let c = c.code();
                    return c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03");
                }
                e.is_closed() || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
            }
            DbError::Sqlite(_) | DbError::Timeout(_) | DbError::Type(_) => false,
        }
    }

    /// Whether the error may go away by itself (a full disk, an I/O error, a lock held, a
    /// database server restarting or unreachable), so that the controller waits and retries
    /// instead of failing stop. A constraint violated (a GPU bound twice) is not.
    pub fn may_recover(&self) -> bool {
        match self {
            DbError::Sqlite(rusqlite::Error::SqliteFailure(f, _)) => {
                use rusqlite::ErrorCode as C;
                matches!(
                    f.code,
                    C::DiskFull | C::SystemIoFailure | C::CannotOpen | C::ReadOnly | C::DatabaseBusy | C::DatabaseLocked
                )
            }
            DbError::Sqlite(_) | DbError::Type(_) => false,
            DbError::Timeout(_) | DbError::Connection(_) => true,
            DbError::Postgres(e) => match e.code() {
                // No SQLSTATE: the connection closed, a socket error, a timeout.
                None => true,
                // Class 08 (connection exception), 53 (insufficient resources: disk full, out
                // of memory, too many connections), 57P01-57P03 (the server shutting down,
                // crashed or starting), 58 (system error: I/O), 40001/40P01 (retry).
                Some(c) => {
                    let c = c.code();
                    c.starts_with("08") || c.starts_with("53") || c.starts_with("58") || matches!(c, "57P01" | "57P02" | "57P03" | "40001" | "40P01")
                }
            },
        }
    }
}

/// One SQL connection of the store. Statements run in autocommit unless between
/// [`Backend::begin`] and [`Backend::commit`]. Methods take `&self` (statement caches use
/// interior mutability) so that the store's read paths can be called from `&Store`.
pub trait Backend: std::fmt::Debug + Send {
    /// The dialect of its SQL.
    fn dialect(&self) -> Dialect;

    /// Where the data lives, for messages (a file, or `postgres://user@host:port/db`).
    fn location(&self) -> String;

    /// The backend as `Any` (its own settings: SQLite's `PRAGMA`s).
    fn as_any(&self) -> &dyn std::any::Any;

    /// Runs one statement; returns the rows it changed.
    fn exec(&self, sql: &str, params: &[Param<'_>]) -> Result<u64, DbError>;

    /// Runs one statement once per parameter set, in order. PostgreSQL sends them all before
    /// it waits for the first answer (pipelined); the first error is returned.
    fn exec_many(&self, sql: &str, sets: &[Vec<Param<'_>>]) -> Result<(), DbError> {
        for p in sets {
            self.exec(sql, p)?;
        }
        Ok(())
    }

    /// Runs a query; returns every row.
    fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError>;

    /// Runs a query and hands its rows to `each` in order. SQLite holds one row at a time
    /// (`sacct` over 150,000 jobs keeps no 150,000 rows of values beside the jobs made of
    /// them); the default collects them first ([`Backend::query`]). Errors: the database's,
    /// or the first of `each`'s, which stops the query.
    fn query_each(&self, sql: &str, params: &[Param<'_>], each: &mut dyn FnMut(Row) -> Result<(), DbError>) -> Result<(), DbError> {
        for r in self.query(sql, params)? {
            each(r)?;
        }
        Ok(())
    }

    /// Runs several statements without parameters (a migration's SQL).
    fn batch(&self, sql: &str) -> Result<(), DbError>;

    /// Starts a transaction.
    fn begin(&self) -> Result<(), DbError>;

    /// Commits the transaction: when it returns `Ok` the data is durable as the backend is
    /// set up to make it (SQLite's `synchronous`, PostgreSQL's `synchronous_commit`).
    fn commit(&self) -> Result<(), DbError>;

    /// Rolls the transaction back (best effort: a lost connection rolled it back already).
    fn rollback(&self);

    /// Gives freed space back after rows were deleted (best effort, logged). SQLite: the
    /// incremental vacuum and a WAL checkpoint; PostgreSQL's autovacuum does it alone.
    fn reclaim(&self) {}

    /// Whether a fenced transaction goes through [`Backend::run_fenced`] as a [`Queue`] of
    /// statements sent together (PostgreSQL: a network round trip per flight) rather than
    /// statement by statement inside [`Tx`] (SQLite: a call costs no round trip).
    fn pipelines(&self) -> bool {
        false
    }

    /// Runs one transaction: `fence` (a statement that must change exactly one row: the
    /// lease's, [`super::lease`]), then the statements of `queue` in order; COMMIT when the
    /// fence changed one row and every statement succeeded, ROLLBACK otherwise.
    /// `Ok(false)`: the fence changed no row, nothing was kept.
    ///
    /// This default runs them one by one (every backend can); PostgreSQL sends BEGIN, the
    /// fence and every statement in one flight, reads the fence's row count, then sends
    /// COMMIT or ROLLBACK: two round trips per transaction.
    ///
    /// Errors: [`TxFailure`], which says whether COMMIT had been sent.
    fn run_fenced(&self, fence: Option<&Queued>, queue: &Queue) -> Result<bool, TxFailure> {
        run_stepwise(self, fence, queue)
    }

    /// The first row of a query, if any.
    fn query_opt(&self, sql: &str, params: &[Param<'_>]) -> Result<Option<Row>, DbError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// The first column of the first row of a query, which must return one.
    fn query_value<T: FromValue>(&self, sql: &str, params: &[Param<'_>]) -> Result<T, DbError>
    where
        Self: Sized,
    {
        let row = self.query_opt(sql, params)?.ok_or_else(|| DbError::Type(format!("no row from {sql}")))?;
        row.get(0)
    }
}

/// Where a transaction failed.
#[derive(Debug)]
pub enum TxFailure {
    /// Before its COMMIT was sent: nothing of it was kept (a server rolls back the open
    /// transaction of a connection it loses), so it may be run again.
    BeforeCommit(DbError),
    /// At its COMMIT: when the connection was lost then, whether it was kept is unknown, so it
    /// must never be run again blindly.
    AtCommit(DbError),
}

impl TxFailure {
    /// The error.
    pub fn into_error(self) -> DbError {
        match self {
            TxFailure::BeforeCommit(e) | TxFailure::AtCommit(e) => e,
        }
    }
}

/// One statement of a [`Queue`], with its own copy of its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    /// SQL (SQLite-numbered parameters).
    pub sql: String,
    /// Parameters.
    pub params: Vec<Value>,
}

impl Queued {
    /// A statement of `sql` with `params` copied.
    pub fn new(sql: impl Into<String>, params: &[Param<'_>]) -> Queued {
        Queued { sql: sql.into(), params: params.iter().map(Value::from).collect() }
    }

    /// Its parameters as [`Param`]s.
    pub fn params(&self) -> Vec<Param<'_>> {
        self.params.iter().map(Value::as_param).collect()
    }
}

impl From<&Param<'_>> for Value {
    fn from(p: &Param<'_>) -> Value {
        match *p {
            Param::Null => Value::Null,
            Param::Int(i) => Value::Int(i),
            Param::Real(r) => Value::Real(r),
            Param::Text(s) => Value::Text(s.to_string()),
        }
    }
}

/// A transaction's writes recorded instead of run, for [`Backend::run_fenced`]: the store's
/// writers (`acct::write`, `svcstore::commit`, ...) issue their statements on it as on a
/// connection. A queued statement has not run yet: [`Backend::exec`] answers 0 rows, and
/// reads ([`Backend::query`]) are refused (a transaction that must read before it writes is
/// not queued).
#[derive(Debug)]
pub struct Queue {
    dialect: Dialect,
    stmts: std::cell::RefCell<Vec<Queued>>,
}

impl Queue {
    /// An empty queue of statements in `dialect`.
    pub fn new(dialect: Dialect) -> Queue {
        Queue { dialect, stmts: std::cell::RefCell::new(Vec::new()) }
    }

    /// The statements, in the order they were issued.
    pub fn statements(&self) -> std::cell::Ref<'_, Vec<Queued>> {
        self.stmts.borrow()
    }

    fn refused(what: &str) -> DbError {
        DbError::Type(format!("{what} inside a queued transaction (its statements have not run yet)"))
    }
}

impl Backend for Queue {
    fn dialect(&self) -> Dialect {
        self.dialect
    }

    fn location(&self) -> String {
        "a queued transaction".into()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn exec(&self, sql: &str, params: &[Param<'_>]) -> Result<u64, DbError> {
        self.stmts.borrow_mut().push(Queued::new(sql, params));
        Ok(0)
    }

    fn exec_many(&self, sql: &str, sets: &[Vec<Param<'_>>]) -> Result<(), DbError> {
        self.stmts.borrow_mut().extend(sets.iter().map(|p| Queued::new(sql, p)));
        Ok(())
    }

    fn query(&self, _: &str, _: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        Err(Queue::refused("a read"))
    }

    fn batch(&self, _: &str) -> Result<(), DbError> {
        Err(Queue::refused("a batch of SQL"))
    }

    fn begin(&self) -> Result<(), DbError> {
        Err(Queue::refused("BEGIN"))
    }

    fn commit(&self) -> Result<(), DbError> {
        Err(Queue::refused("COMMIT"))
    }

    fn rollback(&self) {}
}

/// [`Backend::run_fenced`] statement by statement, through the connection's own calls.
pub(super) fn run_stepwise<B: Backend + ?Sized>(db: &B, fence: Option<&Queued>, queue: &Queue) -> Result<bool, TxFailure> {
    db.begin().map_err(TxFailure::BeforeCommit)?;
    let body = || -> Result<bool, DbError> {
        if let Some(f) = fence {
            if db.exec(&f.sql, &f.params())? != 1 {
                return Ok(false);
            }
        }
        for q in queue.statements().iter() {
            db.exec(&q.sql, &q.params())?;
        }
        Ok(true)
    };
    match body() {
        Ok(true) => db.commit().map(|()| true).map_err(TxFailure::AtCommit),
        Ok(false) => {
            db.rollback();
            Ok(false)
        }
        Err(e) => {
            db.rollback();
            Err(TxFailure::BeforeCommit(e))
        }
    }
}

/// [`Backend::query_value`] for a `dyn Backend`.
pub fn query_value<T: FromValue>(db: &dyn Backend, sql: &str, params: &[Param<'_>]) -> Result<T, DbError> {
    let row = db.query_opt(sql, params)?.ok_or_else(|| DbError::Type(format!("no row from {sql}")))?;
    row.get(0)
}

/// A transaction over `db` that rolls back when dropped uncommitted (an error returned with
/// `?` half-way through).
#[derive(Debug)]
pub struct Tx<'a> {
    db: &'a dyn Backend,
    done: bool,
}

impl<'a> Tx<'a> {
    /// Begins a transaction.
    pub fn begin(db: &'a dyn Backend) -> Result<Tx<'a>, DbError> {
        db.begin()?;
        Ok(Tx { db, done: false })
    }

    /// The connection, inside the transaction.
    pub fn db(&self) -> &'a dyn Backend {
        self.db
    }

    /// Commits.
    pub fn commit(mut self) -> Result<(), DbError> {
        self.done = true;
        self.db.commit()
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.db.rollback();
        }
    }
}

/// SQLite through rusqlite.
#[derive(Debug)]
pub struct Sqlite {
    conn: rusqlite::Connection,
    path: std::path::PathBuf,
}

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match *self {
            Param::Null => ValueRef::Null,
            Param::Int(i) => ValueRef::Integer(i),
            Param::Real(r) => ValueRef::Real(r),
            Param::Text(s) => ValueRef::Text(s.as_bytes()),
        }))
    }
}

fn sqlite_value(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(t) | ValueRef::Blob(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
    }
}

impl Sqlite {
    /// Wraps an open connection to the database file `path`.
    pub fn new(conn: rusqlite::Connection, path: std::path::PathBuf) -> Sqlite {
        Sqlite { conn, path }
    }

    /// The connection (SQLite's own settings: `PRAGMA`s).
    pub fn conn(&self) -> &rusqlite::Connection {
        &self.conn
    }
}

impl Backend for Sqlite {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn exec(&self, sql: &str, params: &[Param<'_>]) -> Result<u64, DbError> {
        let mut st = self.conn.prepare_cached(sql)?;
        Ok(st.execute(rusqlite::params_from_iter(params.iter()))? as u64)
    }

    fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, DbError> {
        let mut out = Vec::new();
        self.query_each(sql, params, &mut |r| {
            out.push(r);
            Ok(())
        })?;
        Ok(out)
    }

    fn query_each(&self, sql: &str, params: &[Param<'_>], each: &mut dyn FnMut(Row) -> Result<(), DbError>) -> Result<(), DbError> {
        let mut st = self.conn.prepare_cached(sql)?;
        let n = st.column_count();
        let mut rows = st.query(rusqlite::params_from_iter(params.iter()))?;
        while let Some(r) = rows.next()? {
            let mut row = Vec::with_capacity(n);
            for i in 0..n {
                row.push(sqlite_value(r.get_ref(i)?));
            }
            each(Row(row))?;
        }
        Ok(())
    }

    fn batch(&self, sql: &str) -> Result<(), DbError> {
        Ok(self.conn.execute_batch(sql)?)
    }

    fn begin(&self) -> Result<(), DbError> {
        Ok(self.conn.execute_batch("BEGIN")?)
    }

    fn commit(&self) -> Result<(), DbError> {
        Ok(self.conn.execute_batch("COMMIT")?)
    }

    fn rollback(&self) {
        if !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }

    fn reclaim(&self) {
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
}

/// Text of `sql` with SQLite's `?N` parameters written as PostgreSQL's `$N`.
pub fn numbered_to_dollar(sql: &str) -> Cow<'_, str> {
    if !sql.contains('?') {
        return Cow::Borrowed(sql);
    }
    let mut out = String::with_capacity(sql.len());
    let mut in_str = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                in_str = !in_str;
                out.push(c);
            }
            '?' if !in_str => out.push('$'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_in_both_dialects() {
        let cols = ["id", "name", "record"];
        assert_eq!(
            Dialect::Sqlite.replace("services", &cols, &["id"]),
            "INSERT OR REPLACE INTO services (id, name, record) VALUES (?1,?2,?3)"
        );
        assert_eq!(
            Dialect::Postgres.replace("services", &cols, &["id"]),
            "INSERT INTO services (id, name, record) VALUES (?1,?2,?3) ON CONFLICT (id) DO UPDATE SET \
             name = EXCLUDED.name, record = EXCLUDED.record"
        );
        assert_eq!(
            Dialect::Postgres.replace("t", &["a", "b"], &["a", "b"]),
            "INSERT INTO t (a, b) VALUES (?1,?2) ON CONFLICT (a, b) DO NOTHING"
        );
        assert_eq!(
            Dialect::Postgres.replace_with("t", &["a", "b"], &["a"], ", ord = DEFAULT"),
            "INSERT INTO t (a, b) VALUES (?1,?2) ON CONFLICT (a) DO UPDATE SET b = EXCLUDED.b, ord = DEFAULT"
        );
        assert_eq!(
            Dialect::Postgres.replace_with("t", &["a"], &["a"], ", ord = DEFAULT"),
            "INSERT INTO t (a) VALUES (?1) ON CONFLICT (a) DO UPDATE SET ord = DEFAULT"
        );
    }

    #[test]
    fn parameters_renumbered_outside_strings() {
        assert_eq!(numbered_to_dollar("SELECT a FROM t WHERE b = ?1 AND c = '?' AND d = ?12"), "SELECT a FROM t WHERE b = $1 AND c = '?' AND d = $12");
        assert!(matches!(numbered_to_dollar("SELECT 1"), Cow::Borrowed(_)));
    }

    #[test]
    fn rows_convert_and_refuse() {
        let r = Row(vec![Value::Int(7), Value::Null, Value::Text("x".into()), Value::Int(-1)]);
        assert_eq!(r.get::<u32>(0).unwrap(), 7);
        assert_eq!(r.get::<Option<i64>>(1).unwrap(), None);
        assert_eq!(r.get::<String>(2).unwrap(), "x");
        assert!(r.get::<u32>(3).is_err(), "negative into u32");
        assert!(r.get::<i64>(2).is_err(), "text into an integer");
        assert!(r.get::<i64>(9).is_err(), "no column");
        assert_eq!(r.get_u64_bits(3).unwrap(), u64::MAX);
    }

    /// A queued transaction: statements recorded in order (reads refused), then run after
    /// the fence: committed when it changed one row, rolled back when it changed none.
    #[test]
    fn a_queue_runs_after_its_fence_or_not_at_all() {
        let db = Sqlite::new(rusqlite::Connection::open_in_memory().unwrap(), "mem".into());
        db.batch("CREATE TABLE lease (id INTEGER PRIMARY KEY, epoch INTEGER); INSERT INTO lease VALUES (1, 7); CREATE TABLE t (k INTEGER)")
            .unwrap();
        let q = Queue::new(Dialect::Sqlite);
        assert_eq!(q.exec("INSERT INTO t (k) VALUES (?1)", &params![1i64]).unwrap(), 0, "not run yet");
        q.exec_many("INSERT INTO t (k) VALUES (?1)", &[params![2i64].to_vec(), params![3i64].to_vec()]).unwrap();
        assert!(q.query("SELECT k FROM t", &[]).is_err(), "a read inside a queue is refused");
        assert_eq!(q.statements().len(), 3);
        let count = || query_value::<i64>(&db, "SELECT COUNT(*) FROM t", &[]).unwrap();
        assert_eq!(count(), 0);
        let fence = |epoch: i64| Queued::new("UPDATE lease SET epoch = epoch WHERE id = 1 AND epoch = ?1", &params![epoch]);
        assert!(!db.run_fenced(Some(&fence(6)), &q).unwrap(), "a lost fence keeps nothing");
        assert_eq!(count(), 0);
        assert!(db.run_fenced(Some(&fence(7)), &q).unwrap());
        assert_eq!(count(), 3);
        let bad = Queue::new(Dialect::Sqlite);
        bad.exec("INSERT INTO nowhere (k) VALUES (1)", &[]).unwrap();
        assert!(matches!(db.run_fenced(None, &bad), Err(TxFailure::BeforeCommit(_))));
        assert_eq!(count(), 3);
    }

    #[test]
    fn sqlite_backend_round_trip() {
        let db = Sqlite::new(rusqlite::Connection::open_in_memory().unwrap(), "mem".into());
        db.batch("CREATE TABLE t (k INTEGER PRIMARY KEY, \"user\" TEXT, r REAL)").unwrap();
        let sql = Dialect::Sqlite.replace("t", &["k", "\"user\"", "r"], &["k"]);
        db.exec_many(&sql, &[params![1i64, "a", 0.5].to_vec(), params![2i64, &None::<String>, 1.0].to_vec()]).unwrap();
        let tx = Tx::begin(&db).unwrap();
        tx.db().exec(&sql, &params![1i64, "b", 2.0]).unwrap();
        drop(tx);
        let rows = db.query("SELECT k, \"user\", r FROM t ORDER BY k", &[]).unwrap();
        assert_eq!(rows[0].get::<String>(1).unwrap(), "a", "rolled back");
        assert_eq!(rows[1].get::<Option<String>>(1).unwrap(), None);
        assert_eq!(query_value::<i64>(&db, "SELECT COUNT(*) FROM t WHERE r > ?1", &params![0.1]).unwrap(), 2);
    }
}
