//! The accounting database's rows in SQLite (`sql/0007_assoc.sql`): loading at start and
//! the changes of one turn, written in that turn's transaction ([`write`], from
//! [`crate::store::Store::commit`]).

use flotilla_proto::acctmgr::{AccountRow, AcctData, AdminLevel, AssocRow, ClusterRow, QosRow, UserRow};
use rusqlite::{params, Connection, OptionalExtension, Transaction};

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

/// Writes `ops` in order in `tx`. Errors: SQLite's.
pub fn write(tx: &Transaction<'_>, ops: &[AssocOp]) -> rusqlite::Result<()> {
    for op in ops {
        match op {
            AssocOp::Cluster(c) => {
                tx.prepare_cached("INSERT OR REPLACE INTO acct_clusters (name, control_host, control_port, rpc) VALUES (?1,?2,?3,?4)")?
                    .execute(params![c.name, c.control_host, c.control_port, c.rpc])?;
            }
            AssocOp::DelCluster(n) => {
                tx.prepare_cached("DELETE FROM acct_clusters WHERE name = ?1")?.execute([n])?;
            }
            AssocOp::Account(a) => {
                tx.prepare_cached("INSERT OR REPLACE INTO acct_accounts (name, description, organization) VALUES (?1,?2,?3)")?
                    .execute(params![a.name, a.description, a.organization])?;
            }
            AssocOp::DelAccount(n) => {
                tx.prepare_cached("DELETE FROM acct_accounts WHERE name = ?1")?.execute([n])?;
            }
            AssocOp::User(u) => {
                tx.prepare_cached("INSERT OR REPLACE INTO acct_users (name, default_account, admin_level) VALUES (?1,?2,?3)")?
                    .execute(params![u.name, u.default_account, u.admin_level.as_str()])?;
            }
            AssocOp::DelUser(n) => {
                tx.prepare_cached("DELETE FROM acct_users WHERE name = ?1")?.execute([n])?;
            }
            AssocOp::Assoc(a) => write_assoc(tx, a)?,
            AssocOp::DelAssoc(id) => {
                tx.prepare_cached("DELETE FROM acct_assocs WHERE id = ?1")?.execute([id])?;
            }
            AssocOp::Qos(q) => write_qos(tx, q)?,
            AssocOp::DelQos(n) => {
                tx.prepare_cached("DELETE FROM acct_qos WHERE name = ?1")?.execute([n])?;
            }
            AssocOp::Imported => {
                tx.prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES ('quota_conf_imported', 1)")?.execute([])?;
            }
        }
    }
    Ok(())
}

fn write_assoc(tx: &Transaction<'_>, a: &AssocRow) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO acct_assocs (id, parent_id, account, user, partition, shares, priority, grp_tres, \
         grp_jobs, grp_submit, grp_wall_min, max_jobs, max_submit, max_tres_per_job, max_tres_per_node, max_wall_min, \
         qos, default_qos, guaranteed_gpus) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19)",
    )?
    .execute(params![
        a.id,
        a.parent,
        a.account,
        a.user,
        a.partition,
        i64::from(a.shares),
        opt(a.priority),
        a.grp_tres,
        opt(a.grp_jobs),
        opt(a.grp_submit),
        opt(a.grp_wall_min),
        opt(a.max_jobs),
        opt(a.max_submit),
        a.max_tres_per_job,
        a.max_tres_per_node,
        opt(a.max_wall_min),
        list(&a.qos),
        a.default_qos,
        a.guaranteed_gpus
    ])?;
    Ok(())
}

fn write_qos(tx: &Transaction<'_>, q: &QosRow) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO acct_qos (name, description, priority, grace_time_s, preempt, preempt_mode, \
         preempt_exempt_s, flags, usage_factor, grp_tres, grp_jobs, grp_submit, grp_wall_min, max_tres_per_job, \
         max_tres_per_user, max_jobs_per_user, max_submit_per_user, max_wall_min) \
         VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18)",
    )?
    .execute(params![
        q.name,
        q.description,
        q.priority,
        q.grace_time_s as i64,
        list(&q.preempt),
        q.preempt_mode,
        q.preempt_exempt_s.map(|s| s as i64),
        list(&q.flags),
        q.usage_factor,
        q.grp_tres,
        opt(q.grp_jobs),
        opt(q.grp_submit),
        opt(q.grp_wall_min),
        q.max_tres_per_job,
        q.max_tres_per_user,
        opt(q.max_jobs_per_user),
        opt(q.max_submit_per_user),
        opt(q.max_wall_min)
    ])?;
    Ok(())
}

fn u32_of(v: Option<i64>) -> Option<u32> {
    v.map(|n| n.clamp(0, i64::from(u32::MAX)) as u32)
}

/// Whether `quota.conf` was imported already.
///
/// # Errors
/// SQLite's.
pub fn imported(conn: &Connection) -> rusqlite::Result<bool> {
    Ok(conn
        .query_row("SELECT value FROM meta WHERE key = 'quota_conf_imported'", [], |r| r.get::<_, i64>(0))
        .optional()?
        .is_some())
}

/// Every row, in key order.
///
/// # Errors
/// SQLite's.
pub fn load(conn: &Connection) -> rusqlite::Result<AcctData> {
    let mut d = AcctData::default();
    let mut st = conn.prepare("SELECT name, control_host, control_port, rpc FROM acct_clusters ORDER BY name")?;
    d.clusters = st
        .query_map([], |r| Ok(ClusterRow { name: r.get(0)?, control_host: r.get(1)?, control_port: r.get(2)?, rpc: r.get(3)? }))?
        .collect::<Result<_, _>>()?;
    let mut st = conn.prepare("SELECT name, description, organization FROM acct_accounts ORDER BY name")?;
    d.accounts = st
        .query_map([], |r| Ok(AccountRow { name: r.get(0)?, description: r.get(1)?, organization: r.get(2)? }))?
        .collect::<Result<_, _>>()?;
    let mut st = conn.prepare("SELECT name, default_account, admin_level FROM acct_users ORDER BY name")?;
    d.users = st
        .query_map([], |r| {
            Ok(UserRow {
                name: r.get(0)?,
                default_account: r.get(1)?,
                admin_level: AdminLevel::parse(&r.get::<_, String>(2)?).unwrap_or_default(),
            })
        })?
        .collect::<Result<_, _>>()?;
    let mut st = conn.prepare(
        "SELECT id, parent_id, account, user, partition, shares, priority, grp_tres, grp_jobs, grp_submit, grp_wall_min, \
         max_jobs, max_submit, max_tres_per_job, max_tres_per_node, max_wall_min, qos, default_qos, guaranteed_gpus \
         FROM acct_assocs ORDER BY id",
    )?;
    d.assocs = st
        .query_map([], |r| {
            Ok(AssocRow {
                id: r.get(0)?,
                parent: r.get(1)?,
                account: r.get(2)?,
                user: r.get(3)?,
                partition: r.get(4)?,
                shares: r.get::<_, i64>(5)?.clamp(0, i64::from(u32::MAX)) as u32,
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
        })?
        .collect::<Result<_, _>>()?;
    let mut st = conn.prepare(
        "SELECT name, description, priority, grace_time_s, preempt, preempt_mode, preempt_exempt_s, flags, usage_factor, \
         grp_tres, grp_jobs, grp_submit, grp_wall_min, max_tres_per_job, max_tres_per_user, max_jobs_per_user, \
         max_submit_per_user, max_wall_min FROM acct_qos ORDER BY rowid",
    )?;
    d.qos = st
        .query_map([], |r| {
            Ok(QosRow {
                name: r.get(0)?,
                description: r.get(1)?,
                priority: r.get(2)?,
                grace_time_s: r.get::<_, i64>(3)?.max(0) as u64,
                preempt: unlist(r.get(4)?),
                preempt_mode: r.get(5)?,
                preempt_exempt_s: r.get::<_, Option<i64>>(6)?.map(|s| s.max(0) as u64),
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
        })?
        .collect::<Result<_, _>>()?;
    Ok(d)
}
