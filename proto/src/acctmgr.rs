//! `sacctmgr`'s messages: the accounting database's rows (clusters, accounts, users,
//! associations, QOS) as the controller sends them, and a change (`add`, `modify`, `delete`)
//! with its `where`/`set` clauses as the command parsed them.
//!
//! Limits travel as Slurm prints them: TRES lists as text (`cpu=4,gres/gpu=8`, empty: none),
//! counts as `Option` (`None`: unset, Slurm's `INFINITE`), times in minutes.

use serde::{Deserialize, Serialize};

/// `AdminLevel` of a user (Slurm's `slurmdb_admin_level_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AdminLevel {
    /// `None`.
    #[default]
    None,
    /// `Operator`: may change everything but admins.
    Operator,
    /// `Administrator`.
    Administrator,
}

impl AdminLevel {
    /// Slurm's name (`slurmdb_admin_level_str`).
    pub fn as_str(self) -> &'static str {
        match self {
            AdminLevel::None => "None",
            AdminLevel::Operator => "Operator",
            AdminLevel::Administrator => "Administrator",
        }
    }

    /// From `AdminLevel=` (`None`, `Operator`, `Admin`/`Administrator`, case-insensitive,
    /// Slurm's `str_2_slurmdb_admin_level`); `None` for anything else.
    pub fn parse(s: &str) -> Option<AdminLevel> {
        let l = s.to_ascii_lowercase();
        if l.starts_with("none") {
            Some(AdminLevel::None)
        } else if l.starts_with("oper") {
            Some(AdminLevel::Operator)
        } else if l.starts_with("admin") {
            Some(AdminLevel::Administrator)
        } else {
            None
        }
    }
}

/// A cluster (`sacctmgr show cluster`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterRow {
    /// `ClusterName`.
    pub name: String,
    /// The controller's address.
    pub control_host: String,
    /// `SlurmctldPort`.
    pub control_port: u32,
    /// Protocol version Slurm shows as `RPC` (22.05: 9728).
    pub rpc: u32,
}

/// An account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountRow {
    /// Name.
    pub name: String,
    /// `Description` (`Descr`).
    pub description: String,
    /// `Organization` (`Org`).
    pub organization: String,
}

/// A user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRow {
    /// Name.
    pub name: String,
    /// `DefaultAccount` (`Def Acct`).
    pub default_account: String,
    /// `AdminLevel`.
    pub admin_level: AdminLevel,
}

/// An association: an account's (`user` empty) or a user's in an account, all partitions
/// (`partition` empty) or one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssocRow {
    /// `ID` (the database's, stable).
    pub id: u32,
    /// The parent account's association; `None` for `root`.
    pub parent: Option<u32>,
    /// Account.
    pub account: String,
    /// User; empty for an account association.
    pub user: String,
    /// Partition; empty: all.
    pub partition: String,
    /// `Fairshare=` shares; `u32::MAX`: `parent`.
    pub shares: u32,
    /// `Priority=`.
    pub priority: Option<u32>,
    /// `GrpTRES=`.
    pub grp_tres: String,
    /// `GrpJobs=`.
    pub grp_jobs: Option<u32>,
    /// `GrpSubmitJobs=`.
    pub grp_submit: Option<u32>,
    /// `GrpWall=` (minutes).
    pub grp_wall_min: Option<u32>,
    /// `MaxJobs=`.
    pub max_jobs: Option<u32>,
    /// `MaxSubmitJobs=`.
    pub max_submit: Option<u32>,
    /// `MaxTRES=` (`MaxTRESPerJob`).
    pub max_tres_per_job: String,
    /// `MaxTRESPerNode=`.
    pub max_tres_per_node: String,
    /// `MaxWall=` (minutes).
    pub max_wall_min: Option<u32>,
    /// `QOS=`; empty: inherited.
    pub qos: Vec<String>,
    /// `DefaultQOS=`; empty: inherited.
    pub default_qos: String,
    /// Flotilla's `GuaranteedGPUs=`.
    pub guaranteed_gpus: u32,
}

impl AssocRow {
    /// A new association with Slurm's defaults (`sacctmgr add`): `Fairshare=1`, no
    /// priority, no limits, no QOS of its own, no guarantee. `user`/`partition` empty: an
    /// account's association / all partitions.
    pub fn new(id: u32, parent: Option<u32>, account: &str, user: &str, partition: &str) -> AssocRow {
        AssocRow {
            id,
            parent,
            account: account.to_string(),
            user: user.to_string(),
            partition: partition.to_string(),
            shares: 1,
            priority: None,
            grp_tres: String::new(),
            grp_jobs: None,
            grp_submit: None,
            grp_wall_min: None,
            max_jobs: None,
            max_submit: None,
            max_tres_per_job: String::new(),
            max_tres_per_node: String::new(),
            max_wall_min: None,
            qos: Vec::new(),
            default_qos: String::new(),
            guaranteed_gpus: 0,
        }
    }
}

/// A QOS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QosRow {
    /// Name.
    pub name: String,
    /// `Description=`.
    pub description: String,
    /// `Priority=`.
    pub priority: u32,
    /// `GraceTime=` (s).
    pub grace_time_s: u64,
    /// `Preempt=`: the QOS it may preempt.
    pub preempt: Vec<String>,
    /// `PreemptMode=` (`cluster`, `cancel`, `requeue`, `suspend`).
    pub preempt_mode: String,
    /// `PreemptExemptTime=` (s).
    pub preempt_exempt_s: Option<u64>,
    /// `Flags=`.
    pub flags: Vec<String>,
    /// `UsageFactor=`.
    pub usage_factor: f64,
    /// `GrpTRES=`.
    pub grp_tres: String,
    /// `GrpJobs=`.
    pub grp_jobs: Option<u32>,
    /// `GrpSubmitJobs=`.
    pub grp_submit: Option<u32>,
    /// `GrpWall=` (minutes).
    pub grp_wall_min: Option<u32>,
    /// `MaxTRESPerJob=` (`MaxTRES`).
    pub max_tres_per_job: String,
    /// `MaxTRESPerUser=` (`MaxTRESPU`).
    pub max_tres_per_user: String,
    /// `MaxJobsPerUser=` (`MaxJobsPU`).
    pub max_jobs_per_user: Option<u32>,
    /// `MaxSubmitJobsPerUser=` (`MaxSubmitPU`).
    pub max_submit_per_user: Option<u32>,
    /// `MaxWall=` (minutes).
    pub max_wall_min: Option<u32>,
}

/// Everything `sacctmgr show` reads, in the database's order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcctData {
    /// Clusters.
    pub clusters: Vec<ClusterRow>,
    /// Accounts, by name.
    pub accounts: Vec<AccountRow>,
    /// Users, by name.
    pub users: Vec<UserRow>,
    /// Associations, by id.
    pub assocs: Vec<AssocRow>,
    /// QOS, by name.
    pub qos: Vec<QosRow>,
}

/// What a command acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Entity {
    /// `account`.
    Account,
    /// `user`.
    User,
    /// `association`.
    Assoc,
    /// `qos`.
    Qos,
    /// `cluster`.
    Cluster,
}

impl Entity {
    /// From the command's word (Slurm's prefixes: `acc`, `ass`, `clu`, `qos`, `user`).
    pub fn parse(w: &str) -> Option<Entity> {
        let l = w.to_ascii_lowercase();
        let pre = |name: &str, min: usize| l.len() >= min && name.starts_with(&l);
        if pre("accounts", 3) {
            Some(Entity::Account)
        } else if pre("associations", 3) {
            Some(Entity::Assoc)
        } else if pre("clusters", 2) {
            Some(Entity::Cluster)
        } else if pre("qos", 1) {
            Some(Entity::Qos)
        } else if pre("users", 1) {
            Some(Entity::User)
        } else {
            None
        }
    }
}

/// A change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    /// `add`, `create`.
    Add,
    /// `modify`, `update`.
    Modify,
    /// `delete`, `remove`.
    Delete,
}

/// The words after the entity, sorted as Slurm's parser sorts them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clauses {
    /// Bare words before `where`/`set` (names; comma lists split).
    pub names: Vec<String>,
    /// `where` conditions, and `Key=Value` before `where`/`set` outside `add`: (key as
    /// typed, value).
    pub conds: Vec<(String, String)>,
    /// `set` values, and every `Key=Value` of `add`: (key as typed, value).
    pub sets: Vec<(String, String)>,
    /// `format=` fields, as typed.
    pub format: Vec<String>,
    /// `withassoc` (or `-s`), `tree`, `withdeleted`...: lower case.
    pub options: Vec<String>,
}

/// Splits the words after the entity (Slurm's `sacctmgr` grammar): `where` and `set` switch
/// what `Key=Value` words are; a bare word is a name (a condition on the name) and may be a
/// comma list; `format=` is kept apart; words without `=` in a `where`/`set` part are
/// options. In `add`, every `Key=Value` is a value to set (`add user alice Account=a`),
/// where conditions only are names.
pub fn parse_clauses(words: &[String], add: bool) -> Clauses {
    #[derive(PartialEq)]
    enum Mode {
        Start,
        Where,
        Set,
    }
    let mut c = Clauses::default();
    let mut mode = Mode::Start;
    for w in words {
        let l = w.to_ascii_lowercase();
        if l == "where" {
            mode = Mode::Where;
            continue;
        }
        if l == "set" {
            mode = Mode::Set;
            continue;
        }
        if let Some((k, v)) = w.split_once('=') {
            let kl = k.to_ascii_lowercase();
            if kl == "format" {
                c.format.extend(v.split(',').filter(|s| !s.is_empty()).map(str::to_string));
                continue;
            }
            let kv = (k.to_string(), v.to_string());
            match mode {
                Mode::Set => c.sets.push(kv),
                Mode::Where => c.conds.push(kv),
                Mode::Start if add => c.sets.push(kv),
                Mode::Start => c.conds.push(kv),
            }
        } else if matches!(l.as_str(), "withassoc" | "-s" | "tree" | "withdeleted" | "withcoord" | "withsubaccounts")
            || (l.len() >= 5 && "withassoc".starts_with(&l))
        {
            c.options.push(if l == "-s" || l.starts_with("witha") { "withassoc".into() } else { l });
        } else {
            c.names.extend(w.split(',').filter(|s| !s.is_empty()).map(str::to_string));
        }
    }
    c
}

/// A change as the command asks for it. `commit: false` checks it and describes what it
/// would do without changing anything (Slurm makes the change, prints it and asks before
/// its commit; Flotilla asks between the two requests).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctMgrChange {
    /// What.
    pub action: Action,
    /// On what.
    pub entity: Entity,
    /// The words.
    pub clauses: Clauses,
    /// Make the change (else describe it only).
    pub commit: bool,
}

/// What a change did (or would do): what `sacctmgr` prints, and its exit status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcctMgrOutcome {
    /// Text for standard output (the summary: ` Adding Account(s)`, ` Modified user
    /// associations...`, ` Nothing new added.`).
    pub stdout: String,
    /// Text for standard error (Slurm's error lines).
    pub stderr: String,
    /// Exit status (Slurm's `exit_code`: 1 after an error).
    pub exit_code: i32,
    /// Something changed (or would): the commit question is asked.
    pub changed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn clauses_follow_slurms_grammar() {
        let c = parse_clauses(&w("alice set MaxJobs=4 where account=research"), false);
        assert_eq!(c.names, vec!["alice"]);
        assert_eq!(c.sets, vec![("MaxJobs".into(), "4".into())]);
        assert_eq!(c.conds, vec![("account".into(), "research".into())]);
        let c = parse_clauses(&w("bob,carol Account=research DefaultAccount=research"), true);
        assert_eq!(c.names, vec!["bob", "carol"]);
        assert_eq!(c.sets.len(), 2);
        assert!(c.conds.is_empty());
        let c = parse_clauses(&w("where user=alice format=User,Account%20 withassoc -s tree"), false);
        assert_eq!(c.format, vec!["User", "Account%20"]);
        assert_eq!(c.options, vec!["withassoc", "withassoc", "tree"]);
        assert_eq!(c.conds, vec![("user".into(), "alice".into())]);
        assert_eq!(Entity::parse("associations"), Some(Entity::Assoc));
        assert_eq!(Entity::parse("Acc"), Some(Entity::Account));
        assert_eq!(Entity::parse("ac"), None);
        assert_eq!(AdminLevel::parse("Admin"), Some(AdminLevel::Administrator));
    }
}
