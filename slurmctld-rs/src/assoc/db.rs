//! The accounting database's rows in the state database (`sql/0007_assoc.sql`): loading at start and
//! the changes of one turn, written in that turn's transaction ([`write`], from
//! [`crate::store::Store::commit`]).

use flotilla_proto::acctmgr::{AccountRow, AcctData, AdminLevel, AssocRow, ClusterRow, QosRow, UserRow};
use crate::store::backend::{params, Backend, DbError, Row};

/// One row written or deleted.
#[derive(Debug, Clone, PartialEq)]
pub enum AssocOp {
    /// Insert or replace a cluster.
    Cluster(ClusterRow),
    /// Delete a cluster.
    DelCluster(String),
    /// Insert or replace an account.
    Account(AccountRow),
    /// Delete an account.
    DelAccount(String),
    /// Insert or replace a user.
    User(UserRow),
    /// Delete a user.
    DelUser(String),
    /// Insert or replace an association.
    Assoc(AssocRow),
    /// Delete an association.
    DelAssoc(u32),
    /// Insert or replace a QOS.
    Qos(QosRow),
    /// Delete a QOS.
    DelQos(String),
    /// Record that `quota.conf` was imported (meta `quota_conf_imported`): it is not read
    /// again.
    Imported,
    /// Record that a site's slurmdbd database was imported (meta `slurmdbd_imported`,
    /// [`super::slurmdbd`]): it is not read again.
    SlurmdbdImported,
}

fn list(v: &[String]) -> String {
    v.join(",")
}

fn unlist(s: String) -> Vec<String> {
    s.split(',').filter(|x| !x.is_empty()).map(str::to_string).collect()
}

fn opt(v: Option<u32>) -> Option<i64> {
    v.map(i64::from)
}

const CLUSTER_COLS: &[&str] = &["name", "control_host", "control_port", "rpc"];
const ACCOUNT_COLS: &[&str] = &["name", "description", "organization"];
const USER_COLS: &[&str] = &["name", "default_account", "admin_level"];
const ASSOC_COLS: &[&str] = &[
    "id", "parent_id", "account", "\"user\"", "partition", "shares", "priority", "grp_tres", "grp_jobs", "grp_submit",
    "grp_wall_min", "max_jobs", "max_submit", "max_tres_per_job", "max_tres_per_node", "max_wall_min", "qos",
    "default_qos", "guaranteed_gpus",
];
const QOS_COLS: &[&str] = &[
    "name", "description", "priority", "grace_time_s", "preempt", "preempt_mode", "preempt_exempt_s", "flags",
    "usage_factor", "grp_tres", "grp_jobs", "grp_submit", "grp_wall_min", "max_tres_per_job", "max_tres_per_user",
    "max_jobs_per_user", "max_submit_per_user", "max_wall_min",
];

/// Writes `ops` in order in `tx`. Errors: the database's.
pub fn write(tx: &dyn Backend, ops: &[AssocOp]) -> Result<(), DbError> {
    let d = tx.dialect();
    for op in ops {
        match op {
            AssocOp::Cluster(c) => {
                tx.exec(&d.replace("acct_clusters", CLUSTER_COLS, &["name"]), &params![&c.name, &c.control_host, c.control_port, c.rpc])?;
            }
            AssocOp::DelCluster(n) => {
                tx.exec("DELETE FROM acct_clusters WHERE name = ?1", &params![n])?;
            }
            AssocOp::Account(a) => {
                tx.exec(&d.replace("acct_accounts", ACCOUNT_COLS, &["name"]), &params![&a.name, &a.description, &a.organization])?;
            }
            AssocOp::DelAccount(n) => {
                tx.exec("DELETE FROM acct_accounts WHERE name = ?1", &params![n])?;
            }
            AssocOp::User(u) => {
                tx.exec(&d.replace("acct_users", USER_COLS, &["name"]), &params![&u.name, &u.default_account, u.admin_level.as_str()])?;
            }
            AssocOp::DelUser(n) => {
                tx.exec("DELETE FROM acct_users WHERE name = ?1", &params![n])?;
            }
            AssocOp::Assoc(a) => write_assoc(tx, a)?,
            AssocOp::DelAssoc(id) => {
                tx.exec("DELETE FROM acct_assocs WHERE id = ?1", &params![*id])?;
            }
            AssocOp::Qos(q) => write_qos(tx, q)?,
            AssocOp::DelQos(n) => {
                tx.exec("DELETE FROM acct_qos WHERE name = ?1", &params![n])?;
            }
            AssocOp::Imported => {
                tx.exec(&d.replace("meta", &["key", "value"], &["key"]), &params!["quota_conf_imported", 1i64])?;
            }
            AssocOp::SlurmdbdImported => {
                tx.exec(&d.replace("meta", &["key", "value"], &["key"]), &params!["slurmdbd_imported", 1i64])?;
            }
        }
    }
    Ok(())
}

fn write_assoc(tx: &dyn Backend, a: &AssocRow) -> Result<(), DbError> {
    tx.exec(
        &tx.dialect().replace("acct_assocs", ASSOC_COLS, &["id"]),
        &params![
            a.id,
            a.parent,
            &a.account,
            &a.user,
            &a.partition,
            i64::from(a.shares),
            opt(a.priority),
            &a.grp_tres,
            opt(a.grp_jobs),
            opt(a.grp_submit),
            opt(a.grp_wall_min),
            opt(a.max_jobs),
            opt(a.max_submit),
            &a.max_tres_per_job,
            &a.max_tres_per_node,
            opt(a.max_wall_min),
            &list(&a.qos),
            &a.default_qos,
            a.guaranteed_gpus
        ],
    )?;
    Ok(())
}

fn write_qos(tx: &dyn Backend, q: &QosRow) -> Result<(), DbError> {
    // SQLite's replace deletes and inserts: a changed QOS moves to the end of the insertion
    // order `sacctmgr show qos` lists; PostgreSQL's row takes a new `ord` to match.
    tx.exec(
        &tx.dialect().replace_with("acct_qos", QOS_COLS, &["name"], ", ord = DEFAULT"),
        &params![
            &q.name,
            &q.description,
            q.priority,
            q.grace_time_s as i64,
            &list(&q.preempt),
            &q.preempt_mode,
            q.preempt_exempt_s.map(|s| s as i64),
            &list(&q.flags),
            q.usage_factor,
            &q.grp_tres,
            opt(q.grp_jobs),
            opt(q.grp_submit),
            opt(q.grp_wall_min),
            &q.max_tres_per_job,
            &q.max_tres_per_user,
            opt(q.max_jobs_per_user),
            opt(q.max_submit_per_user),
            opt(q.max_wall_min)
        ],
    )?;
    Ok(())
}

fn u32_of(v: Option<i64>) -> Option<u32> {
    v.map(|n| n.clamp(0, i64::from(u32::MAX)) as u32)
}

/// Whether `quota.conf` was imported already.
///
/// # Errors
/// The database's.
pub fn imported(db: &dyn Backend) -> Result<bool, DbError> {
    Ok(db.query_opt("SELECT value FROM meta WHERE key = 'quota_conf_imported'", &[])?.is_some())
}

/// Whether a site's slurmdbd database was imported already ([`super::slurmdbd`]).
///
/// # Errors
/// The database's.
pub fn slurmdbd_imported(db: &dyn Backend) -> Result<bool, DbError> {
    Ok(db.query_opt("SELECT value FROM meta WHERE key = 'slurmdbd_imported'", &[])?.is_some())
}

fn rows<T>(db: &dyn Backend, sql: &str, f: impl Fn(&Row) -> Result<T, DbError>) -> Result<Vec<T>, DbError> {
    db.query(sql, &[])?.iter().map(f).collect()
}

/// Every row, in key order.
///
/// # Errors
/// The database's.
pub fn load(db: &dyn Backend) -> Result<AcctData, DbError> {
    let clusters = rows(db, "SELECT name, control_host, control_port, rpc FROM acct_clusters ORDER BY name", |r| {
        Ok(ClusterRow { name: r.get(0)?, control_host: r.get(1)?, control_port: r.get(2)?, rpc: r.get(3)? })
    })?;
    let accounts = rows(db, "SELECT name, description, organization FROM acct_accounts ORDER BY name", |r| {
        Ok(AccountRow { name: r.get(0)?, description: r.get(1)?, organization: r.get(2)? })
    })?;
    let users = rows(db, "SELECT name, default_account, admin_level FROM acct_users ORDER BY name", |r| {
        Ok(UserRow {
            name: r.get(0)?,
            default_account: r.get(1)?,
            admin_level: AdminLevel::parse(&r.get::<String>(2)?).unwrap_or_default(),
        })
    })?;
    let sql = format!("SELECT {} FROM acct_assocs ORDER BY id", ASSOC_COLS.join(", "));
    let assocs = rows(db, &sql, |r| {
            Ok(AssocRow {
                id: r.get(0)?,
                parent: r.get(1)?,
                account: r.get(2)?,
                user: r.get(3)?,
                partition: r.get(4)?,
                shares: r.get::<i64>(5)?.clamp(0, i64::from(u32::MAX)) as u32,
                priority: u32_of(r.get(6)?),
                grp_tres: r.get(7)?,
                grp_jobs: u32_of(r.get(8)?),
                grp_submit: u32_of(r.get(9)?),
                grp_wall_min: u32_of(r.get(10)?),
                max_jobs: u32_of(r.get(11)?),
                max_submit: u32_of(r.get(12)?),
                max_tres_per_job: r.get(13)?,
                max_tres_per_node: r.get(14)?,
                max_wall_min: u32_of(r.get(15)?),
                qos: unlist(r.get(16)?),
                default_qos: r.get(17)?,
                guaranteed_gpus: r.get(18)?,
            })
    })?;
    let sql = format!("SELECT {} FROM acct_qos ORDER BY {}", QOS_COLS.join(", "), db.dialect().insertion_order());
    let qos = rows(db, &sql, |r| {
            Ok(QosRow {
                name: r.get(0)?,
                description: r.get(1)?,
                priority: r.get(2)?,
                grace_time_s: r.get::<i64>(3)?.max(0) as u64,
                preempt: unlist(r.get(4)?),
                preempt_mode: r.get(5)?,
                preempt_exempt_s: r.get::<Option<i64>>(6)?.map(|s| s.max(0) as u64),
                flags: unlist(r.get(7)?),
                usage_factor: r.get(8)?,
                grp_tres: r.get(9)?,
                grp_jobs: u32_of(r.get(10)?),
                grp_submit: u32_of(r.get(11)?),
                grp_wall_min: u32_of(r.get(12)?),
                max_tres_per_job: r.get(13)?,
                max_tres_per_user: r.get(14)?,
                max_jobs_per_user: u32_of(r.get(15)?),
                max_submit_per_user: u32_of(r.get(16)?),
                max_wall_min: u32_of(r.get(17)?),
            })
    })?;
    Ok(AcctData { clusters, accounts, users, assocs, qos })
}
