//! A site's Slurm accounting database as an import source: when `slurm.conf` says
//! `AccountingStorageType=accounting_storage/slurmdbd` and the `slurmdbd.conf` beside it says
//! `StorageType=accounting_storage/mysql`, the controller reads that MySQL/MariaDB database
//! once, read-only, at its first start ([`super::open`]) and copies the site's accounts,
//! users, associations, default accounts, shares and the limits Flotilla enforces into its
//! own accounting database. Afterwards `sacctmgr` edits Flotilla's copy; slurmdbd's database
//! is never written and not read again.
//!
//! What is read (Slurm 22.05's schema, `accounting_storage_mysql.c`'s table definitions in
//! `create_cluster_assoc_table` and `_as_mysql_acct_check_tables`; only rows with
//! `deleted = 0`):
//! - `<cluster>_assoc_table` of this controller's `ClusterName` (lower case, as Slurm's
//!   `_validate_and_set_defaults` makes it): `user`, `acct`, `partition`, `parent_acct` (an account's
//!   parent account; a user's association sits under the association of its `acct`),
//!   `is_def` (the user's default account; `as_mysql_get_assocs`/`_cluster_get_assocs` report it), `lft`
//!   (nested-set order: parents come before their children), `shares`, `max_jobs`,
//!   `max_submit_jobs`, `grp_jobs`, `grp_submit_jobs`, `max_wall_pj`, `grp_wall`,
//!   `priority`, `grp_tres`, `max_tres_pj`, `max_tres_pn` (TRES ids, translated through
//!   `tres_table`: cpu, mem, node, billing, `gres/gpu`; others are left out), `qos` and
//!   `def_qos_id` (QOS ids, through `qos_table`);
//! - `acct_table` (`name`, `description`, `organization`) for the accounts with an
//!   association here, `user_table` (`name`, `admin_level`: 1 None, 2 Operator,
//!   3 Administrator, Slurm's `slurmdb_admin_level_t`) for the users with one, `qos_table`
//!   (`name`, `description`, `priority`, `usage_factor`) for the QOS associations name.
//!
//! `slurmdbd.conf` is read as slurmdbd's `read_slurmdbd_conf` does for the keys used here:
//! `StorageType`, `StorageHost` (default `localhost`), `StoragePort` (default 3306),
//! `StorageUser` (default: the controller's login, root), `StoragePass`, `StorageLoc`
//! (default `slurm_acct_db`). Any failure (no or bad file, unreachable server, refused login,
//! missing tables) is a warning naming the cause, never the password; the controller then
//! starts without the site's associations and tries again at its next start while its own
//! database still holds none.

use super::AssocDb;
use flotilla_proto::acctmgr::{AccountRow, AdminLevel, AssocRow, UserRow};
use mysql::prelude::Queryable;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Where slurmdbd keeps its database (`slurmdbd.conf`'s `Storage*` keys).
#[derive(Clone, PartialEq, Eq)]
pub struct StorageConf {
    /// `StorageHost`.
    pub host: String,
    /// `StoragePort`.
    pub port: u16,
    /// `StorageUser`.
    pub user: String,
    /// `StoragePass` (never logged).
    pub pass: String,
    /// `StorageLoc`: the database name.
    pub loc: String,
}

impl std::fmt::Debug for StorageConf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "mysql://{}@{}:{}/{}",
            self.user, self.host, self.port, self.loc
        )
    }
}

impl std::fmt::Display for StorageConf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// The import source a controller was started with: `None` when `slurm.conf` does not name
/// `accounting_storage/slurmdbd`; `Some(Err(why))` when it does but `slurmdbd.conf` cannot be
/// used (the reason is logged as a warning at the first start).
pub type Source = Option<Result<StorageConf, String>>;

/// The import source for `slurm_conf` whose global keys are `raw`: reads `slurmdbd.conf`
/// beside it when `AccountingStorageType=accounting_storage/slurmdbd`.
pub fn source(slurm_conf: &Path, raw: &[(String, String)]) -> Source {
    let ty = raw
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("AccountingStorageType"))
        .map(|(_, v)| v.trim());
    if !ty.is_some_and(|t| t.eq_ignore_ascii_case("accounting_storage/slurmdbd")) {
        return None;
    }
    let path = slurm_conf
        .parent()
        .unwrap_or(Path::new("."))
        .join("slurmdbd.conf");
    Some(match std::fs::read_to_string(&path) {
        Ok(text) => parse_conf(&text).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) => Err(format!("reading {}: {e}", path.display())),
    })
}

/// Parses `slurmdbd.conf` (`Key=Value` lines, `#` comments, keys in any case). Errors: a
/// `StorageType` other than `accounting_storage/mysql` (or none), a bad `StoragePort`.
pub fn parse_conf(text: &str) -> Result<StorageConf, String> {
    let mut keys: BTreeMap<String, String> = BTreeMap::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some((k, v)) = line.split_once('=') {
            keys.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    match keys.get("storagetype").map(String::as_str) {
        Some(t) if t.eq_ignore_ascii_case("accounting_storage/mysql") => {}
        Some(t) => {
            return Err(format!(
                "StorageType={t}: only accounting_storage/mysql can be imported"
            ))
        }
        None => return Err("no StorageType (accounting_storage/mysql expected)".into()),
    }
    let port = match keys.get("storageport") {
        Some(p) => p
            .parse::<u16>()
            .map_err(|_| format!("invalid StoragePort={p}"))?,
        None => 3306,
    };
    let get = |k: &str, d: &str| {
        keys.get(k)
            .filter(|v| !v.is_empty())
            .cloned()
            .unwrap_or_else(|| d.to_string())
    };
    Ok(StorageConf {
        host: get("storagehost", "localhost"),
        port,
        user: get("storageuser", "root"),
        pass: keys.get("storagepass").cloned().unwrap_or_default(),
        loc: get("storageloc", "slurm_acct_db"),
    })
}

/// One association row of `<cluster>_assoc_table`, TRES and QOS already named.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteAssoc {
    /// `user` (empty: an account's association).
    pub user: String,
    /// `acct`.
    pub acct: String,
    /// `partition`.
    pub partition: String,
    /// `parent_acct`.
    pub parent_acct: String,
    /// `is_def`.
    pub is_def: bool,
    /// `shares`.
    pub shares: u32,
    /// `max_jobs`, `max_submit_jobs`, `grp_jobs`, `grp_submit_jobs`, `max_wall_pj`,
    /// `grp_wall`, `priority` (NULL or negative: unset).
    pub max_jobs: Option<u32>,
    /// See `max_jobs`.
    pub max_submit: Option<u32>,
    /// See `max_jobs`.
    pub grp_jobs: Option<u32>,
    /// See `max_jobs`.
    pub grp_submit: Option<u32>,
    /// See `max_jobs` (minutes).
    pub max_wall_min: Option<u32>,
    /// See `max_jobs` (minutes).
    pub grp_wall_min: Option<u32>,
    /// See `max_jobs`.
    pub priority: Option<u32>,
    /// `grp_tres`, `max_tres_pj`, `max_tres_pn` as TRES names (`cpu=4,gres/gpu=8`).
    pub grp_tres: String,
    /// See `grp_tres`.
    pub max_tres_pj: String,
    /// See `grp_tres`.
    pub max_tres_pn: String,
    /// `qos` as names.
    pub qos: Vec<String>,
    /// `def_qos_id` as a name (empty: none).
    pub def_qos: String,
}

/// What was read from a site's database for one cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Site {
    /// Accounts with an association on the cluster: name, description, organization.
    pub accounts: Vec<AccountRow>,
    /// Users with an association on the cluster and their admin level.
    pub users: Vec<(String, AdminLevel)>,
    /// Associations in `lft` order (parents first).
    pub assocs: Vec<SiteAssoc>,
    /// QOS the associations name: name, description, priority, usage factor.
    pub qos: Vec<(String, String, u32, f64)>,
}

/// How much [`apply`] added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Accounts added.
    pub accounts: usize,
    /// Users added.
    pub users: usize,
    /// Associations added or updated.
    pub assocs: usize,
    /// QOS added.
    pub qos: usize,
}

fn uint(v: Option<i64>) -> Option<u32> {
    v.filter(|n| *n >= 0)
        .map(|n| n.min(i64::from(u32::MAX)) as u32)
}

/// Translates a TRES list by id (`1=4,2=1000,1001=8`, as slurmdbd stores it) to names
/// through `tres` (id → `cpu`, `mem`, `node`, `billing`, `gres/gpu`); ids of other TRES are
/// left out.
pub fn tres_names(s: &str, tres: &BTreeMap<i64, String>) -> String {
    s.split(',')
        .filter_map(|item| {
            let (id, n) = item.split_once('=')?;
            let name = tres.get(&id.trim().parse::<i64>().ok()?)?;
            matches!(
                name.as_str(),
                "cpu" | "mem" | "node" | "billing" | "gres/gpu"
            )
            .then(|| format!("{name}={}", n.trim()))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads the site's accounting rows of cluster `cluster` from the database `conf` names
/// (over TCP, also for `localhost`, where Slurm's MySQL client library takes the Unix socket;
/// no TLS; connect timeout 5 s, reads 10 s, SELECT only).
///
/// # Errors
/// The connection's or a query's error (a missing table among them), as text that names the
/// server and user but not the password; a cluster name that cannot name a table.
pub fn read(conf: &StorageConf, cluster: &str) -> Result<Site, String> {
    let cluster = cluster.to_ascii_lowercase();
    if cluster.is_empty()
        || !cluster
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "ClusterName={cluster} cannot name slurmdbd's tables"
        ));
    }
    let opts = mysql::OptsBuilder::new()
        .ip_or_hostname(Some(conf.host.clone()))
        .tcp_port(conf.port)
        .user(Some(conf.user.clone()))
        .pass(Some(conf.pass.clone()))
        .db_name(Some(conf.loc.clone()))
        .prefer_socket(false)
        .tcp_connect_timeout(Some(Duration::from_secs(5)))
        .read_timeout(Some(Duration::from_secs(10)))
        .write_timeout(Some(Duration::from_secs(10)));
    let mut c = mysql::Conn::new(opts).map_err(|e| format!("connecting to {conf}: {e}"))?;
    let q = |c: &mut mysql::Conn, sql: &str| -> Result<Vec<mysql::Row>, String> {
        c.query(sql).map_err(|e| format!("{conf}: {e}"))
    };
    let text = |r: &mysql::Row, i: usize| -> String {
        r.get_opt::<Option<String>, _>(i)
            .and_then(Result::ok)
            .flatten()
            .unwrap_or_default()
    };
    let int = |r: &mysql::Row, i: usize| -> Option<i64> {
        r.get_opt::<Option<i64>, _>(i)
            .and_then(Result::ok)
            .flatten()
    };
    let tres: BTreeMap<i64, String> = q(
        &mut c,
        "SELECT id, type, name FROM tres_table WHERE deleted = 0",
    )?
    .iter()
    .filter_map(|r| {
        let (ty, name) = (text(r, 1), text(r, 2));
        Some((
            int(r, 0)?,
            if name.is_empty() {
                ty
            } else {
                format!("{ty}/{name}")
            },
        ))
    })
    .collect();
    let qos_rows = q(
        &mut c,
        "SELECT id, name, description, priority, usage_factor FROM qos_table WHERE deleted = 0",
    )?;
    let qos_name: BTreeMap<i64, String> = qos_rows
        .iter()
        .filter_map(|r| Some((int(r, 0)?, text(r, 1))))
        .collect();
    let sql = format!(
        "SELECT user, acct, `partition`, parent_acct, is_def, shares, max_jobs, max_submit_jobs, grp_jobs, \
         grp_submit_jobs, max_wall_pj, grp_wall, priority, grp_tres, max_tres_pj, max_tres_pn, qos, def_qos_id \
         FROM `{cluster}_assoc_table` WHERE deleted = 0 ORDER BY lft"
    );
    let mut site = Site::default();
    for r in q(&mut c, &sql)? {
        let ids = |s: String| -> Vec<String> {
            s.split(',')
                .filter_map(|x| x.trim().parse::<i64>().ok())
                .filter_map(|id| qos_name.get(&id).cloned())
                .collect()
        };
        site.assocs.push(SiteAssoc {
            user: text(&r, 0),
            acct: text(&r, 1),
            partition: text(&r, 2),
            parent_acct: text(&r, 3),
            is_def: int(&r, 4).unwrap_or(0) != 0,
            shares: uint(int(&r, 5)).unwrap_or(1),
            max_jobs: uint(int(&r, 6)),
            max_submit: uint(int(&r, 7)),
            grp_jobs: uint(int(&r, 8)),
            grp_submit: uint(int(&r, 9)),
            max_wall_min: uint(int(&r, 10)),
            grp_wall_min: uint(int(&r, 11)),
            priority: uint(int(&r, 12)),
            grp_tres: tres_names(&text(&r, 13), &tres),
            max_tres_pj: tres_names(&text(&r, 14), &tres),
            max_tres_pn: tres_names(&text(&r, 15), &tres),
            qos: ids(text(&r, 16)),
            def_qos: int(&r, 17)
                .and_then(|id| qos_name.get(&id).cloned())
                .unwrap_or_default(),
        });
    }
    let named = |list: &[String], name: &str| list.iter().any(|x| x == name);
    let accts: Vec<String> = site.assocs.iter().map(|a| a.acct.clone()).collect();
    for r in q(
        &mut c,
        "SELECT name, description, organization FROM acct_table WHERE deleted = 0 ORDER BY name",
    )? {
        let name = text(&r, 0);
        if named(&accts, &name) {
            site.accounts.push(AccountRow {
                name,
                description: text(&r, 1),
                organization: text(&r, 2),
            });
        }
    }
    let users: Vec<String> = site.assocs.iter().map(|a| a.user.clone()).collect();
    for r in q(
        &mut c,
        "SELECT name, admin_level FROM user_table WHERE deleted = 0 ORDER BY name",
    )? {
        let name = text(&r, 0);
        if named(&users, &name) {
            let level = match int(&r, 1) {
                Some(3) => AdminLevel::Administrator,
                Some(2) => AdminLevel::Operator,
                _ => AdminLevel::None,
            };
            site.users.push((name, level));
        }
    }
    let used: Vec<String> = site
        .assocs
        .iter()
        .flat_map(|a| a.qos.iter().cloned().chain([a.def_qos.clone()]))
        .collect();
    for r in &qos_rows {
        let name = text(r, 1);
        if named(&used, &name) {
            let factor = r
                .get_opt::<Option<f64>, _>(4)
                .and_then(Result::ok)
                .flatten()
                .unwrap_or(1.0);
            site.qos
                .push((name, text(r, 2), uint(int(r, 3)).unwrap_or(0), factor));
        }
    }
    Ok(site)
}

/// Adds `site` to `db` (which holds Slurm's default objects): accounts, QOS, users,
/// associations under their parents (an account whose parent is unknown goes under `root`,
/// a user's association under its account's), the `is_def` association's account as the
/// user's `DefaultAccount` (else the user's first account), shares and limits. The root
/// account's and root user's associations take the site's shares and limits.
pub fn apply(db: &mut AssocDb, site: &Site) -> Counts {
    let mut n = Counts::default();
    for a in &site.accounts {
        if !db.accounts.contains_key(&a.name) {
            db.put_account(a.clone());
            n.accounts += 1;
        }
    }
    for (name, description, priority, factor) in &site.qos {
        if !db.qos.iter().any(|q| &q.name == name) {
            let mut q = super::new_qos(name);
            q.description = if description.is_empty() {
                name.clone()
            } else {
                description.clone()
            };
            q.priority = *priority;
            q.usage_factor = *factor;
            db.put_qos(q);
            n.qos += 1;
        }
    }
    let root = db.find("root", "", "");
    for s in &site.assocs {
        if !db.accounts.contains_key(&s.acct) {
            // An association whose account row is missing (or deleted): Slurm would not
            // list it either.
            continue;
        }
        let parent = if s.user.is_empty() {
            if s.acct == "root" {
                None
            } else {
                db.find(&s.parent_acct, "", "").or(root)
            }
        } else {
            db.find(&s.acct, "", "").or(root)
        };
        let mut a = match db.find(&s.acct, &s.user, &s.partition) {
            Some(id) => db.assocs[&id].clone(),
            None => AssocRow::new(db.next_id(), parent, &s.acct, &s.user, &s.partition),
        };
        a.shares = s.shares;
        a.max_jobs = s.max_jobs;
        a.max_submit = s.max_submit;
        a.grp_jobs = s.grp_jobs;
        a.grp_submit = s.grp_submit;
        a.max_wall_min = s.max_wall_min;
        a.grp_wall_min = s.grp_wall_min;
        a.priority = s.priority;
        a.grp_tres = s.grp_tres.clone();
        a.max_tres_per_job = s.max_tres_pj.clone();
        a.max_tres_per_node = s.max_tres_pn.clone();
        if !s.qos.is_empty() {
            a.qos = s.qos.clone();
        }
        a.default_qos = s.def_qos.clone();
        db.put_assoc(a);
        n.assocs += 1;
    }
    let level = |u: &str| site.users.iter().find(|(n, _)| n == u).map(|(_, l)| *l);
    for (user, _) in &site.users {
        if db.users.contains_key(user) {
            continue;
        }
        let mine: Vec<&SiteAssoc> = site
            .assocs
            .iter()
            .filter(|a| &a.user == user && db.accounts.contains_key(&a.acct))
            .collect();
        let Some(first) = mine.first() else { continue };
        let default = mine.iter().find(|a| a.is_def).unwrap_or(first).acct.clone();
        db.put_user(UserRow {
            name: user.clone(),
            default_account: default,
            admin_level: level(user).unwrap_or_default(),
        });
        n.users += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurmdbd_conf_keys_and_defaults() {
        let c = parse_conf("# x\nstoragetype=accounting_storage/mysql\nStorageHost=db1 # comment\nStoragePass=s3cret\n").unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.user.as_str(), c.loc.as_str()),
            ("db1", 3306, "root", "slurm_acct_db")
        );
        assert_eq!(c.pass, "s3cret");
        assert!(
            !format!("{c} {c:?}").contains("s3cret"),
            "the password is never shown"
        );
        let e = parse_conf("StorageType=accounting_storage/pgsql\n").unwrap_err();
        assert!(e.contains("only accounting_storage/mysql"), "{e}");
        assert!(parse_conf("").unwrap_err().contains("no StorageType"));
        assert!(
            parse_conf("StorageType=accounting_storage/mysql\nStoragePort=x\n")
                .unwrap_err()
                .contains("StoragePort=x")
        );
    }

    #[test]
    fn source_only_for_accounting_storage_slurmdbd() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("slurm.conf");
        assert_eq!(source(&conf, &[]), None);
        let raw = vec![(
            "AccountingStorageType".to_string(),
            "accounting_storage/slurmdbd".to_string(),
        )];
        assert!(source(&conf, &raw)
            .unwrap()
            .unwrap_err()
            .contains("slurmdbd.conf"));
        std::fs::write(
            d.path().join("slurmdbd.conf"),
            "StorageType=accounting_storage/mysql\nStoragePort=3307\n",
        )
        .unwrap();
        assert_eq!(source(&conf, &raw).unwrap().unwrap().port, 3307);
    }

    #[test]
    fn tres_ids_become_names() {
        let t: BTreeMap<i64, String> = [(1, "cpu"), (2, "mem"), (3, "energy"), (1001, "gres/gpu")]
            .into_iter()
            .map(|(k, v)| (k, v.to_string()))
            .collect();
        assert_eq!(
            tres_names("1=4,3=9,1001=8,2=1000", &t),
            "cpu=4,gres/gpu=8,mem=1000"
        );
        assert_eq!(tres_names("", &t), "");
    }

    #[test]
    fn site_tree_defaults_and_limits() {
        let mut db = AssocDb {
            cluster: "c".into(),
            ..AssocDb::default()
        };
        db.ensure_defaults("h", 6817);
        let acct = |n: &str| AccountRow {
            name: n.into(),
            description: n.into(),
            organization: "o".into(),
        };
        let assoc = |user: &str, acct: &str, parent: &str, is_def: bool| SiteAssoc {
            user: user.into(),
            acct: acct.into(),
            parent_acct: parent.into(),
            is_def,
            shares: 1,
            ..SiteAssoc::default()
        };
        let site = Site {
            accounts: vec![acct("root"), acct("research"), acct("nlp")],
            users: vec![
                ("alice".into(), AdminLevel::None),
                ("bob".into(), AdminLevel::Operator),
            ],
            assocs: vec![
                assoc("", "root", "", false),
                assoc("", "research", "root", false),
                SiteAssoc {
                    shares: 40,
                    max_jobs: Some(3),
                    grp_tres: "gres/gpu=8".into(),
                    ..assoc("", "nlp", "research", false)
                },
                assoc("alice", "nlp", "", false),
                assoc("alice", "research", "", true),
                assoc("bob", "nlp", "", true),
            ],
            qos: vec![],
        };
        let n = apply(&mut db, &site);
        assert_eq!(
            n,
            Counts {
                accounts: 2,
                users: 2,
                assocs: 6,
                qos: 0
            }
        );
        let nlp = &db.assocs[&db.find("nlp", "", "").unwrap()];
        assert_eq!(nlp.parent, db.find("research", "", ""));
        assert_eq!(
            (nlp.shares, nlp.max_jobs, nlp.grp_tres.as_str()),
            (40, Some(3), "gres/gpu=8")
        );
        assert_eq!(
            db.assocs[&db.find("nlp", "alice", "").unwrap()].parent,
            Some(nlp.id)
        );
        assert_eq!(
            db.users["alice"].default_account, "research",
            "is_def, not the first account"
        );
        assert_eq!(db.users["bob"].admin_level, AdminLevel::Operator);
        let d = super::super::model::derive(&db, Default::default());
        assert_eq!(d.default_accounts["alice"], "research");
        assert!(d.pairs.contains(&("bob".into(), "nlp".into())));
    }
}
