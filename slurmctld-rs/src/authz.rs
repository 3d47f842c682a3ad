//! Authorisation: who may submit what, where, as whom — the checks Slurm 22.05's controller
//! makes beside admission's shape checks, kept here so each rule has one place.
//!
//! - Identity (`proc_req.c` `_valid_id`): a user who is not root or `SlurmUser` may submit
//!   only as their authenticated uid (`Invalid user id`) and gid (`Invalid group id`).
//! - Accounts: when associations exist ([`Associations`], today `quota.conf`'s `Users=`),
//!   a job may name only an account its user is associated with; with
//!   `AccountingStorageEnforce=associations` a user without one is refused too (`Invalid
//!   account or account/partition combination specified`).
//! - Partitions (`job_mgr.c` `_part_access_check`, `partition_mgr.c` `validate_group`,
//!   `part_policy_valid_acct`/`_qos`): `RootOnly`, `DisableRootJobs`, `AllowGroups`,
//!   `AllowAccounts`/`DenyAccounts`, `AllowQos`/`DenyQos`. Slurm refuses the account and QOS
//!   lists at submission only with `EnforcePartLimits` and otherwise leaves the job pending
//!   forever; Flotilla always refuses at submission (never a job that cannot run).
//! - `PrivateData`: what non-admins may see of other users.
//! - Services (Flotilla's own): an admin, or a user of an account `ServiceAccounts` names,
//!   within the `ServiceMax*` caps.
//!
//! Group membership (`AllowGroups`) is read from NSS once, when the controller is assembled
//! ([`resolve_groups`]); a member added later is refused until the controller restarts
//! (fail closed).

use crate::ctld::Ident;
use flotilla_core::assoc::Enforce;
use flotilla_core::config::{ClusterConfig, PartitionAccess};
use flotilla_proto::errno::*;
use flotilla_proto::SlurmError;
use std::collections::{BTreeMap, BTreeSet};

/// Users' associations with accounts: `user → accounts`. Empty: no association data (every
/// account is accepted unless `AccountingStorageEnforce=associations`). Fed from
/// `quota.conf` today ([`Associations::from_pairs`]); a real association table feeds the
/// same structure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Associations {
    by_user: BTreeMap<String, BTreeSet<String>>,
}

impl Associations {
    /// From `(user, account)` pairs ([`flotilla_core::quota::QuotaTree::associations`]).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Associations {
        let mut by_user: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (u, a) in pairs {
            by_user.entry(u.to_string()).or_default().insert(a.to_string());
        }
        Associations { by_user }
    }

    /// Whether any association is known.
    pub fn exist(&self) -> bool {
        !self.by_user.is_empty()
    }

    /// Whether `user` is associated with `account`.
    pub fn allows(&self, user: &str, account: &str) -> bool {
        self.by_user.get(user).is_some_and(|a| a.contains(account))
    }

    /// Whether `user` has any association.
    pub fn has_user(&self, user: &str) -> bool {
        self.by_user.contains_key(user)
    }
}

/// A partition's access rules with `AllowGroups` resolved to uids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartAccess {
    /// The keys as configured.
    pub keys: PartitionAccess,
    /// `AllowGroups` resolved; `None` when every group may.
    pub allow: Option<GroupMembers>,
    /// `DisableRootJobs` after the global default.
    pub no_root: bool,
}

/// The members of `AllowGroups`' groups: a job may use the partition when its uid is a
/// listed member or its gid (the authenticated one, [`valid_id`]) is one of the groups
/// (Slurm checks the user's primary group from the password database; the kernel's gid of
/// the submitting process is the primary group, or one `sg`/`newgrp` let the user into).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupMembers {
    /// The groups' gids.
    pub gids: BTreeSet<u32>,
    /// Their listed members' uids.
    pub uids: BTreeSet<u32>,
}

impl GroupMembers {
    fn admits(&self, uid: u32, gid: u32) -> bool {
        self.uids.contains(&uid) || self.gids.contains(&gid)
    }
}

/// `PrivateData=` as the controller honours it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrivateData {
    /// `jobs`: others' jobs and steps are hidden (squeue, scontrol show job, sacct).
    pub jobs: bool,
    /// `nodes`: node queries are refused.
    pub nodes: bool,
    /// `partitions`: only partitions the user may use are shown.
    pub partitions: bool,
}

/// Who may create services, and the caps on a non-admin's services.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServicePolicy {
    /// `ServiceAccounts=`; `None`: admins only.
    pub accounts: Option<Vec<String>>,
    /// `ServiceMaxPriority=`.
    pub max_priority: u32,
    /// `ServiceMaxReplicas=` per user (sum of max replicas).
    pub max_replicas: u32,
    /// `ServiceMaxGPUs=` per user (sum of max replicas × GPUs per replica).
    pub max_gpus: u32,
}

/// Everything the controller's authorisation needs, assembled at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Associations (accounts per user).
    pub associations: Associations,
    /// `AccountingStorageEnforce=associations` (or `limits`, `qos`, `safe`, which imply it).
    pub enforce_associations: bool,
    /// `AccountingStorageEnforce` as a whole ([`parse_enforce`]); what the controller hands
    /// the core with the accounting model ([`flotilla_core::assoc::Accounting::enforce`]).
    pub enforce: Enforce,
    /// Per partition, by name.
    pub partitions: BTreeMap<String, PartAccess>,
    /// `PrivateData=`.
    pub private: PrivateData,
    /// Services.
    pub services: ServicePolicy,
}

/// Why a configuration cannot be honoured: the controller refuses to start (never fails
/// open). The text names the key.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{key}={value} cannot be honoured by Flotilla ({why}); remove it or change it")]
pub struct Unsupported {
    /// The key.
    pub key: &'static str,
    /// The value.
    pub value: String,
    /// Why.
    pub why: &'static str,
}

impl Access {
    /// The rules of `cluster`'s slurm.conf with `associations`; `groups` resolves an
    /// `AllowGroups` list to uids ([`resolve_groups`] in the daemon, a fake in tests).
    /// Errors: an `AccountingStorageEnforce` or `PrivateData` value Flotilla cannot honour.
    pub fn from_config(
        cluster: &ClusterConfig,
        associations: Associations,
        groups: &dyn Fn(&[String]) -> GroupMembers,
    ) -> Result<Access, Unsupported> {
        let enforce = parse_enforce(&cluster.accounting_storage_enforce)?;
        let enforce_associations = enforce.associations;
        let mut private = PrivateData::default();
        for v in &cluster.private_data {
            match v.as_str() {
                "jobs" => private.jobs = true,
                "nodes" => private.nodes = true,
                "partitions" => private.partitions = true,
                // What these protect (sacctmgr's accounts, users, events; sreport/sshare usage;
                // reservations; cloud nodes) Flotilla does not serve: nothing to hide.
                "accounts" | "cloud" | "events" | "reservations" | "usage" | "users" => {}
                _ => return Err(unsupported("PrivateData", v, "not a value Slurm 22.05 knows")),
            }
        }
        let partitions = cluster
            .partitions
            .iter()
            .map(|p| {
                let a = PartAccess {
                    allow: p.access.allow_groups.as_deref().map(groups),
                    no_root: p.access.disable_root_jobs.unwrap_or(cluster.disable_root_jobs),
                    keys: p.access.clone(),
                };
                (p.name.clone(), a)
            })
            .collect();
        Ok(Access {
            associations,
            enforce_associations,
            enforce,
            partitions,
            private,
            services: ServicePolicy {
                accounts: cluster.service_accounts.clone(),
                max_priority: cluster.service_max_priority,
                max_replicas: cluster.service_max_replicas,
                max_gpus: cluster.service_max_gpus,
            },
        })
    }

    /// May `ident` see `uid`'s jobs (`PrivateData=jobs`)?
    pub fn sees_jobs_of(&self, ident: Ident, uid: u32) -> bool {
        !self.hides_others_jobs(ident) || ident.uid == uid
    }

    /// Whether `PrivateData=jobs` hides other users' jobs from `ident` (not an admin).
    pub fn hides_others_jobs(&self, ident: Ident) -> bool {
        self.private.jobs && !ident.admin
    }

    /// The account a job of `user` that named `account` is charged to when associations are
    /// not enforced (Slurm 22.05 `job_create` in `job_mgr.c`: with accounting and without
    /// `AccountingStorageEnforce=associations`, an account the user has no association with
    /// is replaced by the user's default account, "to avoid getting trash in the accounting
    /// records"): `Some(default)` when that applies, else `None` (the account stands, or the
    /// check of [`Access::check_account`] refuses it).
    pub fn unassociated_account_fallback(&self, user: &str, account: &str, default: Option<&str>) -> Option<String> {
        let fallback = !self.enforce_associations && !account.is_empty() && !self.associations.allows(user, account);
        default.filter(|d| fallback && !d.is_empty()).map(str::to_string)
    }

    /// The account check of a job or service of `user` charged to `account` (`""`: none).
    /// Errors: `ESLURM_INVALID_ACCOUNT`.
    pub fn check_account(&self, user: &str, account: &str) -> Result<(), SlurmError> {
        let ok = if account.is_empty() {
            !self.enforce_associations || self.associations.has_user(user)
        } else {
            (!self.associations.exist() && !self.enforce_associations) || self.associations.allows(user, account)
        };
        if ok {
            Ok(())
        } else {
            Err(SlurmError::new(ESLURM_INVALID_ACCOUNT))
        }
    }

    /// Slurm's partition access check for a job of `job_uid` submitted by `ident`, charged
    /// to `account` with `qos`, in `partition`. Errors, in Slurm's order: `RootOnly`
    /// (`ESLURM_ACCESS_DENIED`), `DisableRootJobs` (`ESLURM_USER_ID_MISSING`), `AllowGroups`
    /// (`ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP`), accounts (`ESLURM_INVALID_ACCOUNT`),
    /// QOS (`ESLURM_INVALID_QOS`).
    pub fn check_partition(
        &self,
        ident: Ident,
        (job_uid, job_gid): (u32, u32),
        partition: &str,
        account: &str,
        qos: &str,
    ) -> Result<(), SlurmError> {
        let Some(p) = self.partitions.get(partition) else {
            return Ok(());
        };
        if p.keys.root_only && !ident.admin {
            return Err(SlurmError::new(ESLURM_ACCESS_DENIED));
        }
        if job_uid == 0 && p.no_root {
            return Err(SlurmError::new(ESLURM_USER_ID_MISSING));
        }
        if let Some(m) = &p.allow {
            // Root and SlurmUser may run anywhere (`validate_group`).
            let superuser = job_uid == 0 || (ident.admin && job_uid == ident.uid);
            if !superuser && !m.admits(job_uid, job_gid) {
                return Err(SlurmError::new(ESLURM_JOB_MISSING_REQUIRED_PARTITION_GROUP));
            }
        }
        let listed = |l: &[String], v: &str| l.iter().any(|x| x == v);
        let bad_account = match &p.keys.allow_accounts {
            Some(allow) => account.is_empty() || !listed(allow, account),
            None => !account.is_empty() && listed(&p.keys.deny_accounts, account),
        };
        if bad_account {
            // Slurm logs the rule (`part_policy_valid_acct`); the user sees the error only.
            tracing::info!(partition, account, "job's account not permitted to use this partition ({})", account_rule(&p.keys, account));
            return Err(SlurmError::new(ESLURM_INVALID_ACCOUNT));
        }
        let bad_qos = match &p.keys.allow_qos {
            Some(allow) => !listed(allow, qos),
            None => listed(&p.keys.deny_qos, qos),
        };
        if bad_qos {
            return Err(SlurmError::new(ESLURM_INVALID_QOS));
        }
        Ok(())
    }

    /// May `ident` see partition `name` (`PrivateData=partitions`: only those it may use)?
    pub fn sees_partition(&self, ident: Ident, name: &str) -> bool {
        if !self.private.partitions || ident.admin {
            return true;
        }
        self.partitions.get(name).is_none_or(|p| {
            !p.keys.root_only && p.allow.as_ref().is_none_or(|m| m.admits(ident.uid, ident.gid))
        })
    }
}

impl ServicePolicy {
    /// May `ident` create `c`, charged to `account`, beside its services `mine`? Admins
    /// always may. Others need an account `ServiceAccounts` names, a priority at most
    /// `ServiceMaxPriority`, and with `mine` at most `ServiceMaxReplicas` replicas and
    /// `ServiceMaxGPUs` GPUs (counted at `max_replicas`, what the service may grow to).
    /// Errors: `ESLURM_ACCESS_DENIED` with a line saying which rule.
    pub fn check<'a>(
        &self,
        ident: Ident,
        c: &flotilla_proto::ServiceCreate,
        account: &str,
        mine: impl Iterator<Item = &'a flotilla_proto::ServiceCreate>,
    ) -> Result<(), SlurmError> {
        if ident.admin {
            return Ok(());
        }
        let deny = |m: String| Err(SlurmError::with_message(ESLURM_ACCESS_DENIED, m));
        match &self.accounts {
            None => return deny("services may be created by root or SlurmUser only (ServiceAccounts is not set)".into()),
            Some(a) if !a.iter().any(|x| x == account) => {
                return deny(format!("account `{account}' may not create services (ServiceAccounts={})", a.join(",")))
            }
            Some(_) => {}
        }
        if c.priority > self.max_priority {
            return deny(format!("service priority {} exceeds ServiceMaxPriority={}", c.priority, self.max_priority));
        }
        let (mut replicas, mut gpus) = (u64::from(c.max_replicas), u64::from(c.max_replicas) * u64::from(c.gpus_per_replica));
        for m in mine {
            replicas += u64::from(m.max_replicas);
            gpus += u64::from(m.max_replicas) * u64::from(m.gpus_per_replica);
        }
        if replicas > u64::from(self.max_replicas) {
            return deny(format!("{replicas} service replicas would exceed ServiceMaxReplicas={}", self.max_replicas));
        }
        if gpus > u64::from(self.max_gpus) {
            return deny(format!("{gpus} service GPUs would exceed ServiceMaxGPUs={}", self.max_gpus));
        }
        Ok(())
    }
}

fn account_rule(k: &PartitionAccess, account: &str) -> String {
    match &k.allow_accounts {
        Some(a) => format!("allows {} not {account}", a.join(",")),
        None => format!("denies {} including {account}", k.deny_accounts.join(",")),
    }
}

/// `AccountingStorageEnforce=` values as Slurm 22.05 reads them (`read_config.c`): `limits`
/// and `qos` imply `associations`; `safe` implies `associations,limits`. `safe` adds nothing
/// else here: what it protects (`GrpTRESMins`, `GrpWall`, `MaxTRESMinsPerJob`) is not in
/// Flotilla's accounting model.
///
/// # Errors
/// `wckeys` (and `all`, which includes it), `nojobs`/`nosteps` and unknown values: Flotilla
/// cannot honour them and refuses to start.
pub fn parse_enforce(values: &[String]) -> Result<Enforce, Unsupported> {
    let mut e = Enforce::default();
    for v in values {
        match v.as_str() {
            "associations" => e.associations = true,
            "limits" => (e.associations, e.limits) = (true, true),
            "qos" => (e.associations, e.qos) = (true, true),
            "safe" => (e.associations, e.limits, e.safe) = (true, true, true),
            "wckeys" => return Err(unsupported("AccountingStorageEnforce", v, "Flotilla has no WCKeys")),
            "nojobs" | "nosteps" => return Err(unsupported("AccountingStorageEnforce", v, "Flotilla always records jobs and steps")),
            "all" => return Err(unsupported("AccountingStorageEnforce", v, "it includes wckeys")),
            _ => return Err(unsupported("AccountingStorageEnforce", v, "not a value Slurm 22.05 knows")),
        }
    }
    Ok(e)
}

fn unsupported(key: &'static str, value: &str, why: &'static str) -> Unsupported {
    Unsupported { key, value: value.to_string(), why }
}

/// Slurm's `_valid_id`: a caller who is not root or `SlurmUser` may act only as their
/// authenticated uid and gid. Errors: `ESLURM_USER_ID_MISSING` (`Invalid user id`),
/// `ESLURM_GROUP_ID_MISSING` (`Invalid group id`). Slurm 22.05 compares the gid with the
/// authenticated one only (not the supplementary groups): `sg grp sbatch` gives the
/// kernel's gid `grp`, so a user's other groups stay usable.
pub fn valid_id(ident: Ident, uid: u32, gid: u32) -> Result<(), SlurmError> {
    if ident.admin {
        return Ok(());
    }
    if uid != ident.uid {
        return Err(SlurmError::new(ESLURM_USER_ID_MISSING));
    }
    if gid != ident.gid {
        return Err(SlurmError::new(ESLURM_GROUP_ID_MISSING));
    }
    Ok(())
}

/// The members `AllowGroups=groups` lets in, from NSS: the groups' gids and their listed
/// members' uids (Slurm's `get_group_members`). An unknown group adds no one.
pub fn resolve_groups(groups: &[String]) -> GroupMembers {
    use nix::unistd::{Group, User};
    let mut m = GroupMembers::default();
    for g in groups {
        let Ok(Some(grp)) = Group::from_name(g) else {
            tracing::warn!(group = %g, "AllowGroups names a group NSS does not know: no members");
            continue;
        };
        m.gids.insert(grp.gid.as_raw());
        for name in &grp.mem {
            if let Ok(Some(u)) = User::from_name(name) {
                m.uids.insert(u.uid.as_raw());
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(uid: u32, gid: u32, admin: bool) -> Ident {
        Ident { uid, gid, admin }
    }

    #[test]
    fn forged_uid_and_gid_are_refused_unless_admin() {
        assert_eq!(valid_id(id(2001, 2001, false), 2001, 2001), Ok(()));
        assert_eq!(valid_id(id(2001, 2001, false), 2001, 0).unwrap_err().text, "Invalid group id");
        assert_eq!(valid_id(id(2001, 2001, false), 0, 2001).unwrap_err().text, "Invalid user id");
        assert_eq!(valid_id(id(0, 0, true), 2001, 5), Ok(()));
    }

    #[test]
    fn accounts_need_an_association_once_any_exists() {
        let none = Access::default();
        assert_eq!(none.check_account("alice", "anything"), Ok(()));
        let a = Access {
            associations: Associations::from_pairs([("alice", "research")]),
            ..Access::default()
        };
        assert_eq!(a.check_account("alice", "research"), Ok(()));
        assert_eq!(a.check_account("alice", "other").unwrap_err().code, ESLURM_INVALID_ACCOUNT);
        assert_eq!(a.check_account("bob", "research").unwrap_err().code, ESLURM_INVALID_ACCOUNT);
        assert_eq!(a.check_account("bob", ""), Ok(()), "no association, no account: not enforced");
        let e = Access { enforce_associations: true, ..a.clone() };
        assert_eq!(e.check_account("bob", "").unwrap_err().code, ESLURM_INVALID_ACCOUNT);
        assert_eq!(e.check_account("alice", ""), Ok(()));
        // Not enforced: an unassociated account gives way to the user's default one (Slurm's
        // job_create); enforced, or without a default, it stands (and is refused above).
        assert_eq!(a.unassociated_account_fallback("alice", "other", Some("research")).as_deref(), Some("research"));
        assert_eq!(a.unassociated_account_fallback("alice", "research", Some("research")), None);
        assert_eq!(a.unassociated_account_fallback("alice", "other", None), None);
        assert_eq!(a.unassociated_account_fallback("alice", "", Some("research")), None);
        assert_eq!(e.unassociated_account_fallback("alice", "other", Some("research")), None);
    }

    #[test]
    fn keys_that_cannot_be_honoured_refuse_the_start() {
        let text = "ClusterName=c\nAccountingStorageEnforce=associations,wckeys\nNodeName=n1\n\
                    PartitionName=p Nodes=n1 AllowGroups=root RootOnly=YES DenyAccounts=a,b\n";
        let c = flotilla_core::config::parse_cluster(("slurm.conf", text), None, None, &mut flotilla_core::config::no_includes).unwrap();
        let p = &c.partitions[0].access;
        assert_eq!((p.allow_groups.as_deref(), p.root_only, p.deny_accounts.len()), (Some(&["root".to_string()][..]), true, 2));
        let e = Access::from_config(&c, Associations::default(), &resolve_groups).unwrap_err();
        assert!(e.to_string().starts_with("AccountingStorageEnforce=wckeys cannot be honoured"), "{e}");
        let mut c2 = c.clone();
        c2.accounting_storage_enforce = vec!["limits".into()];
        c2.private_data = vec!["jobs".into(), "bogus".into()];
        let e = Access::from_config(&c2, Associations::default(), &resolve_groups).unwrap_err();
        assert!(e.to_string().starts_with("PrivateData=bogus"), "{e}");
        c2.private_data = vec!["jobs".into(), "usage".into()];
        let a = Access::from_config(&c2, Associations::default(), &resolve_groups).unwrap();
        assert!(a.enforce_associations && a.private.jobs && !a.private.nodes);
        assert!(a.partitions["p"].allow.as_ref().is_some_and(|m| m.admits(1, 0)));
    }

    #[test]
    fn enforce_values_imply_as_in_slurm() {
        let e = |v: &[&str]| parse_enforce(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(e(&[]), Ok(Enforce::default()));
        assert_eq!(e(&["qos"]), Ok(Enforce { associations: true, qos: true, ..Enforce::default() }));
        assert_eq!(e(&["safe"]), Ok(Enforce { associations: true, limits: true, safe: true, qos: false }));
        assert_eq!(
            e(&["associations", "limits", "qos", "safe"]),
            Ok(Enforce { associations: true, limits: true, qos: true, safe: true })
        );
        assert!(e(&["all"]).unwrap_err().to_string().contains("wckeys"));
        assert!(e(&["nojobs"]).is_err());
    }

    #[test]
    fn groups_resolve_from_nss() {
        assert!(resolve_groups(&["root".into()]).admits(5555, 0), "group root's gid");
        assert!(!resolve_groups(&["root".into()]).admits(5555, 5555));
        assert_eq!(resolve_groups(&["no-such-group-s17".into()]), GroupMembers::default());
    }
}
