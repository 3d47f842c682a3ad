//! The accounting database: Slurm's clusters, accounts, users, associations and QOS, kept
//! in the controller's SQLite file (`sql/0007_assoc.sql`) and edited with `sacctmgr`.
//!
//! **The database is the only source of truth.** At the first start (no
//! `quota_conf_imported` mark in `meta`) the controller creates Slurm's default objects —
//! the cluster (`ClusterName`), account `root` with the root association, user `root` in
//! account root (`AdminLevel=Administrator`), QOS `normal` — and imports `quota.conf` beside
//! slurm.conf once ([`import`]): its `Account=` lines become accounts under their `Parent`
//! (else `root`), `User=` lines and `Users=` lists user associations, `GuaranteedGPUs=` the
//! associations' `GuaranteedGPUs`, `MaxGPUs=N` `GrpTRES=gres/gpu=N`, `MaxJobs`/
//! `MaxSubmitJobs` the same limits, and each user's first account their `DefaultAccount`.
//! After that `quota.conf` is not read again: an admin changes accounting with `sacctmgr`
//! (or, to apply an edited file, by re-creating the state database).
//!
//! From the database the controller builds, at start and after every `sacctmgr` change in
//! the same turn ([`model::derive`]): the core's `Accounting`, the quota tree (account and
//! user associations as scopes, `user@account`), the job limits and the accounts each user
//! may charge. A change is written in the turn's transaction ([`db::write`]); while commits
//! fail it is refused with `ESLURM_WRITING_TO_FILE` before it changes anything.
//!
//! **A site's Slurm accounting database** ([`slurmdbd`]): when `slurm.conf` says
//! `AccountingStorageType=accounting_storage/slurmdbd` and `slurmdbd.conf` beside it names
//! `StorageType=accounting_storage/mysql`, the first start that finds no associations here
//! (beyond Slurm's default objects) copies that database's accounts, users, associations,
//! default accounts, shares and limits of this `ClusterName` into this one, read-only, before
//! `quota.conf` is applied on top; a failure is a warning and the controller starts without
//! them (and tries again at its next start while it still holds none).
//!
//! `rpc` carries out `sacctmgr`'s changes with Slurm 22.05's texts.

pub mod db;
pub mod import;
pub mod model;
pub mod rpc;
mod rpc_delete;
pub mod slurmdbd;
mod rpc_modify;

use db::AssocOp;
use flotilla_proto::acctmgr::{AccountRow, AcctData, AdminLevel, AssocRow, ClusterRow, QosRow, UserRow};
use std::collections::BTreeMap;

/// Slurm 22.05's protocol version, shown as `RPC` by `sacctmgr show cluster`.
pub const RPC_VERSION: u32 = 9728;

/// The accounting database in memory, and the rows changed since [`AssocDb::take_ops`].
#[derive(Debug, Clone, Default)]
pub struct AssocDb {
    /// This controller's `ClusterName`.
    pub cluster: String,
    /// Clusters.
    pub clusters: BTreeMap<String, ClusterRow>,
    /// Accounts.
    pub accounts: BTreeMap<String, AccountRow>,
    /// Users.
    pub users: BTreeMap<String, UserRow>,
    /// Associations by id.
    pub assocs: BTreeMap<u32, AssocRow>,
    /// QOS in creation order.
    pub qos: Vec<QosRow>,
    ops: Vec<AssocOp>,
}

/// A QOS with Slurm's defaults.
pub fn new_qos(name: &str) -> QosRow {
    QosRow {
        name: name.to_string(),
        description: name.to_string(),
        priority: 0,
        grace_time_s: 0,
        preempt: Vec::new(),
        preempt_mode: "cluster".into(),
        preempt_exempt_s: None,
        flags: Vec::new(),
        usage_factor: 1.0,
        grp_tres: String::new(),
        grp_jobs: None,
        grp_submit: None,
        grp_wall_min: None,
        max_tres_per_job: String::new(),
        max_tres_per_user: String::new(),
        max_jobs_per_user: None,
        max_submit_per_user: None,
        max_wall_min: None,
    }
}

impl AssocDb {
    /// From the stored rows of cluster `cluster`.
    pub fn from_data(cluster: &str, d: AcctData) -> AssocDb {
        AssocDb {
            cluster: cluster.to_string(),
            clusters: d.clusters.into_iter().map(|c| (c.name.clone(), c)).collect(),
            accounts: d.accounts.into_iter().map(|a| (a.name.clone(), a)).collect(),
            users: d.users.into_iter().map(|u| (u.name.clone(), u)).collect(),
            assocs: d.assocs.into_iter().map(|a| (a.id, a)).collect(),
            qos: d.qos,
            ops: Vec::new(),
        }
    }

    /// The rows as `sacctmgr show` receives them.
    pub fn data(&self) -> AcctData {
        AcctData {
            clusters: self.clusters.values().cloned().collect(),
            accounts: self.accounts.values().cloned().collect(),
            users: self.users.values().cloned().collect(),
            assocs: self.assocs.values().cloned().collect(),
            qos: self.qos.clone(),
        }
    }

    /// Creates Slurm's default objects that are missing: cluster `cluster` (reached at
    /// `host:port`), account `root` and its association, user `root` (Administrator) in
    /// account root, QOS `normal` (the root association's QOS).
    pub fn ensure_defaults(&mut self, host: &str, port: u32) {
        let cluster = self.cluster.clone();
        if !self.clusters.contains_key(&cluster) {
            self.put_cluster(ClusterRow { name: cluster, control_host: host.to_string(), control_port: port, rpc: RPC_VERSION });
        }
        if !self.accounts.contains_key("root") {
            self.put_account(AccountRow { name: "root".into(), description: "default root account".into(), organization: "root".into() });
        }
        if !self.qos.iter().any(|q| q.name == "normal") {
            self.put_qos(new_qos("normal"));
        }
        let root = match self.find("root", "", "") {
            Some(id) => id,
            None => {
                let mut a = AssocRow::new(self.next_id(), None, "root", "", "");
                a.qos = vec!["normal".into()];
                let id = a.id;
                self.put_assoc(a);
                id
            }
        };
        if !self.users.contains_key("root") {
            self.put_user(UserRow { name: "root".into(), default_account: "root".into(), admin_level: AdminLevel::Administrator });
        }
        if self.find("root", "root", "").is_none() {
            let a = AssocRow::new(self.next_id(), Some(root), "root", "root", "");
            self.put_assoc(a);
        }
    }

    /// The id of association (account, user, partition).
    pub fn find(&self, account: &str, user: &str, partition: &str) -> Option<u32> {
        self.assocs
            .values()
            .find(|a| a.account == account && a.user == user && a.partition == partition)
            .map(|a| a.id)
    }

    /// The next unused association id.
    pub fn next_id(&self) -> u32 {
        self.assocs.keys().next_back().map_or(1, |m| m + 1)
    }

    /// The rows changed since the last call, for the turn's commit.
    pub fn take_ops(&mut self) -> Vec<AssocOp> {
        std::mem::take(&mut self.ops)
    }

    /// Records `op` for the commit (the in-memory change is the caller's).
    pub fn record(&mut self, op: AssocOp) {
        self.ops.push(op);
    }

    /// Inserts or replaces a cluster.
    pub fn put_cluster(&mut self, c: ClusterRow) {
        self.ops.push(AssocOp::Cluster(c.clone()));
        self.clusters.insert(c.name.clone(), c);
    }

    /// Inserts or replaces an account.
    pub fn put_account(&mut self, a: AccountRow) {
        self.ops.push(AssocOp::Account(a.clone()));
        self.accounts.insert(a.name.clone(), a);
    }

    /// Inserts or replaces a user.
    pub fn put_user(&mut self, u: UserRow) {
        self.ops.push(AssocOp::User(u.clone()));
        self.users.insert(u.name.clone(), u);
    }

    /// Inserts or replaces an association.
    pub fn put_assoc(&mut self, a: AssocRow) {
        self.ops.push(AssocOp::Assoc(a.clone()));
        self.assocs.insert(a.id, a);
    }

    /// Inserts or replaces a QOS.
    pub fn put_qos(&mut self, q: QosRow) {
        self.ops.push(AssocOp::Qos(q.clone()));
        match self.qos.iter_mut().find(|x| x.name == q.name) {
            Some(x) => *x = q,
            None => self.qos.push(q),
        }
    }

    /// Deletes an association.
    pub fn del_assoc(&mut self, id: u32) {
        if self.assocs.remove(&id).is_some() {
            self.ops.push(AssocOp::DelAssoc(id));
        }
    }

    /// Whether `user` may change the database: `AdminLevel` Operator or Administrator
    /// (root and `SlurmUser` are admins through the connection's identity).
    pub fn is_operator(&self, user: &str) -> bool {
        self.users.get(user).is_some_and(|u| u.admin_level >= AdminLevel::Operator)
    }
}

/// Loads the accounting database of `store` for `cluster`, creating the default objects,
/// importing the site's slurmdbd database (`slurmdbd`, [`slurmdbd::source`]) while the store
/// holds no associations of its own and it was not imported before, and `quotas` (from
/// `quota.conf`) at the first start; the rows this writes are committed before it returns.
///
/// # Errors
/// The store's.
pub fn open(
    store: &mut crate::store::Store,
    cluster: &flotilla_core::config::ClusterConfig,
    quotas: &flotilla_core::quota::QuotaTree,
    slurmdbd: &slurmdbd::Source,
) -> Result<AssocDb, crate::store::StoreError> {
    let loaded = db::load(store.db()).map_err(|source| crate::store::StoreError::Db { at: store.location().into(), source })?;
    let only_defaults = loaded.assocs.iter().all(|a| a.account == "root" && (a.user.is_empty() || a.user == "root"));
    let mut db = AssocDb::from_data(&cluster.cluster_name, loaded);
    let host = if cluster.control_addr.is_empty() { "127.0.0.1" } else { cluster.control_addr.as_str() };
    db.ensure_defaults(host, u32::from(cluster.slurmctld_port));
    let db_err = |source| crate::store::StoreError::Db { at: store.location().into(), source };
    if let Some(src) = slurmdbd {
        if only_defaults && !db::slurmdbd_imported(store.db()).map_err(db_err)? {
            import_slurmdbd(&mut db, src);
        }
    }
    let imported = db::imported(store.db()).map_err(|source| crate::store::StoreError::Db { at: store.location().into(), source })?;
    if !imported {
        import::quota_tree(&mut db, quotas);
        db.record(AssocOp::Imported);
    }
    let ops = db.take_ops();
    if !ops.is_empty() {
        // Through the store's commit: fenced by the lease like every other write.
        store.commit(&crate::store::WriteBatch { assoc: ops, ..Default::default() }, &|_| None)?;
    }
    Ok(db)
}

/// The one-way import of [`slurmdbd`]: logs the counts, or a warning with the cause.
fn import_slurmdbd(db: &mut AssocDb, src: &Result<slurmdbd::StorageConf, String>) {
    let conf = match src {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("AccountingStorageType=accounting_storage/slurmdbd: {e}; starting without the site's associations");
            return;
        }
    };
    match slurmdbd::read(conf, &db.cluster) {
        Ok(site) => {
            let n = slurmdbd::apply(db, &site);
            db.record(AssocOp::SlurmdbdImported);
            tracing::info!(
                accounts = n.accounts,
                users = n.users,
                associations = n.assocs,
                qos = n.qos,
                "imported cluster {}'s associations from slurmdbd's database {conf} (read-only, once; sacctmgr edits them from now on)",
                db.cluster
            );
        }
        Err(e) => tracing::warn!(
            "could not import the associations of cluster {} from slurmdbd's database: {e}; starting without them (tried again at the next start)",
            db.cluster
        ),
    }
}
