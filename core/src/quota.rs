//! Hierarchical GPU quotas: Slurm's account tree (organisation → team → user) with a
//! guaranteed and a maximum GPU count per scope.
//!
//! Capacity a scope uses beyond its guarantee is *borrowed*: it may be reclaimed, newest
//! borrowed first (LIFO: the newest work has the least progress to lose). Guaranteed
//! capacity is never preempted (invariant 4). A scope never exceeds its `max_gpus`, nor does
//! any ancestor.
//!
//! The model does not assume a file: [`QuotaTree`] is built from [`QuotaScope`]s, and
//! [`parse_quota_conf`] reads the text format Flotilla keeps beside slurm.conf (`quota.conf`),
//! one scope per line in slurm.conf's `Key=Value` style:
//!
//! ```text
//! # organisation, teams, users
//! Account=research  GuaranteedGPUs=512 MaxGPUs=1024
//! Account=nlp       Parent=research GuaranteedGPUs=256 MaxGPUs=768
//! User=alice        Account=nlp GuaranteedGPUs=16
//! ```
//!
//! Keys are case-insensitive; `#` starts a comment; a `User=` scope is named `user@account`.
//! `MaxSubmitJobs=N` and `MaxJobs=N` (Slurm's association limits: a user's jobs in the scope,
//! pending and running / running; `-1` or `unlimited`: none) may be given on any line and are
//! inherited by the scopes below.
//!
//! Associations (Slurm's `sacctmgr add user alice account=research`): a `User=` line, or
//! `Users=alice,bob` on an `Account=` line (members without a scope of their own), associates
//! users with an account. A user's *default account* — what a job submitted without `-A` is
//! charged to — is the account of the user's first association in file order, as `sacctmgr`
//! makes the first account a user is added to their `DefaultAccount`:
//!
//! ```text
//! Account=research GuaranteedGPUs=512 Users=alice,bob   # default account of alice and bob
//! ```

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// Index of a scope in [`QuotaTree::scopes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ScopeId(pub u32);

/// One scope of the account tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaScope {
    /// Name: the account (`nlp`) or `user@account` for a user scope.
    pub name: String,
    /// Parent scope name; `None` for a root.
    pub parent: Option<String>,
    /// GPUs guaranteed to the scope (never preempted while used within it).
    pub guaranteed_gpus: u32,
    /// Most GPUs the scope (with its descendants) may use; `None` = no limit.
    pub max_gpus: Option<u32>,
    /// Slurm's association `MaxSubmitJobs`: most jobs (pending and running, each array task
    /// one) a user may have in the scope at once; a user scope without one inherits its
    /// account's ([`QuotaTree::job_limits`]). `None` = no limit.
    #[serde(default)]
    pub max_submit_jobs: Option<u32>,
    /// Slurm's association `MaxJobs`: most running jobs of a user in the scope; inherited
    /// as `max_submit_jobs`. `None` = no limit.
    #[serde(default)]
    pub max_jobs: Option<u32>,
}

/// Why a quota file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuotaError {
    /// A malformed line.
    #[error("{file}:{line}: {message}")]
    Syntax {
        /// File name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A scope names a parent that does not exist, or the tree has a cycle.
    #[error("quota scope `{0}`: {1}")]
    Tree(String, String),
}

/// The account tree with each scope's usage.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QuotaTree {
    /// Scopes; parents may come after children in input but are resolved here.
    pub scopes: Vec<QuotaScope>,
    parent: Vec<Option<ScopeId>>,
    by_name: BTreeMap<String, ScopeId>,
    /// Associations `(user, account)` in file order (see the module docs).
    #[serde(default)]
    associations: Vec<(String, String)>,
}

impl QuotaTree {
    /// Builds the tree. Errors: unknown parent, duplicate name, or a cycle.
    pub fn new(scopes: Vec<QuotaScope>) -> Result<QuotaTree, QuotaError> {
        let mut by_name = BTreeMap::new();
        for (i, s) in scopes.iter().enumerate() {
            if by_name.insert(s.name.clone(), ScopeId(i as u32)).is_some() {
                return Err(QuotaError::Tree(s.name.clone(), "defined twice".into()));
            }
        }
        let mut parent = Vec::with_capacity(scopes.len());
        for s in &scopes {
            parent.push(match &s.parent {
                None => None,
                Some(p) => Some(
                    *by_name
                        .get(p)
                        .ok_or_else(|| QuotaError::Tree(s.name.clone(), format!("unknown parent `{p}`")))?,
                ),
            });
        }
        let t = QuotaTree {
            scopes,
            parent,
            by_name,
            associations: Vec::new(),
        };
        for i in 0..t.scopes.len() {
            let mut seen = 0;
            let mut cur = Some(ScopeId(i as u32));
            while let Some(c) = cur {
                seen += 1;
                if seen > t.scopes.len() {
                    return Err(QuotaError::Tree(t.scopes[i].name.clone(), "cycle in parents".into()));
                }
                cur = t.parent[c.0 as usize];
            }
        }
        Ok(t)
    }

    /// The users associated with accounts, `(user, account)` in file order.
    pub fn associations(&self) -> &[(String, String)] {
        &self.associations
    }

    /// The account `user` is charged to without `-A`: the account of their first association;
    /// `None` when the user has none.
    pub fn default_account(&self, user: &str) -> Option<&str> {
        self.associations.iter().find(|(u, _)| u == user).map(|(_, a)| a.as_str())
    }

    /// Every user's default account ([`QuotaTree::default_account`]), by user name.
    pub fn default_accounts(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        for (u, a) in &self.associations {
            m.entry(u.clone()).or_insert_with(|| a.clone());
        }
        m
    }

    /// The scope a job charges: `user@account` if defined, else `account`, else none (no
    /// guarantee, no limit).
    pub fn scope_of(&self, user: &str, account: &str) -> Option<ScopeId> {
        self.by_name
            .get(&format!("{user}@{account}"))
            .or_else(|| self.by_name.get(account))
            .copied()
    }

    /// The scope and its ancestors, leaf first.
    pub fn chain(&self, scope: ScopeId) -> impl Iterator<Item = ScopeId> + '_ {
        let mut cur = Some(scope);
        std::iter::from_fn(move || {
            let c = cur?;
            cur = self.parent[c.0 as usize];
            Some(c)
        })
    }

    /// The scope's definition.
    pub fn scope(&self, id: ScopeId) -> &QuotaScope {
        &self.scopes[id.0 as usize]
    }

    /// The job-count limits `(MaxSubmitJobs, MaxJobs)` of `user`'s jobs charged to `account`:
    /// each the nearest one set on the user's scope or up its chain of accounts (Slurm's
    /// associations inherit these from their parent). `(None, None)` when the pair has no
    /// scope or nothing sets them.
    pub fn job_limits(&self, user: &str, account: &str) -> (Option<u32>, Option<u32>) {
        let Some(s) = self.scope_of(user, account) else { return (None, None) };
        let chain: Vec<&QuotaScope> = self.chain(s).map(|id| self.scope(id)).collect();
        let submit = chain.iter().find_map(|q| q.max_submit_jobs);
        let running = chain.iter().find_map(|q| q.max_jobs);
        (submit, running)
    }

    /// Whether any scope sets `MaxSubmitJobs` or `MaxJobs`.
    pub fn has_job_limits(&self) -> bool {
        self.scopes.iter().any(|s| s.max_submit_jobs.is_some() || s.max_jobs.is_some())
    }

    /// Number of scopes.
    pub fn len(&self) -> usize {
        self.scopes.len()
    }

    /// True when there are no scopes (quotas off).
    pub fn is_empty(&self) -> bool {
        self.scopes.is_empty()
    }

    /// True when some scope sets `GuaranteedGPUs=` or `MaxGPUs=`: a tree that only names
    /// accounts and their users (default accounts) sets no quotas.
    pub fn has_limits(&self) -> bool {
        self.scopes.iter().any(|s| s.guaranteed_gpus > 0 || s.max_gpus.is_some())
    }
}

/// Parses `quota.conf` text (format in the module docs). `file` names it in errors.
pub fn parse_quota_conf(text: &str, file: &str) -> Result<QuotaTree, QuotaError> {
    let mut scopes = Vec::new();
    let mut associations = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |message: String| QuotaError::Syntax { file: file.to_string(), line: i + 1, message };
        let mut kv: BTreeMap<String, String> = BTreeMap::new();
        for tok in line.split_whitespace() {
            let (k, v) = tok
                .split_once('=')
                .ok_or_else(|| err(format!("expected Key=Value, found `{tok}`")))?;
            let k = k.to_ascii_lowercase();
            if !matches!(
                k.as_str(),
                "account" | "user" | "users" | "parent" | "guaranteedgpus" | "maxgpus" | "maxsubmitjobs" | "maxjobs"
            ) {
                return Err(err(format!("unknown key `{k}`")));
            }
            if kv.insert(k.clone(), v.to_string()).is_some() {
                return Err(err(format!("key `{k}` given twice")));
            }
        }
        let num = |k: &str| -> Result<Option<u32>, QuotaError> {
            match kv.get(k) {
                None => Ok(None),
                Some(v) if v.eq_ignore_ascii_case("unlimited") => Ok(None),
                Some(v) => v.parse().map(Some).map_err(|_| err(format!("`{k}` is not a GPU count: `{v}`"))),
            }
        };
        let jobs = |k: &str| -> Result<Option<u32>, QuotaError> {
            match kv.get(k) {
                None => Ok(None),
                Some(v) if v.eq_ignore_ascii_case("unlimited") || v == "-1" => Ok(None),
                Some(v) => v.parse().map(Some).map_err(|_| err(format!("`{k}` is not a job count: `{v}`"))),
            }
        };
        let account = kv.get("account").cloned().ok_or_else(|| err("missing Account=".into()))?;
        let (name, parent) = match kv.get("user") {
            Some(u) => {
                if kv.contains_key("users") {
                    return Err(err("`Users=` belongs on an `Account=` line, not a `User=` line".into()));
                }
                associations.push((u.clone(), account.clone()));
                (format!("{u}@{account}"), Some(account.clone()))
            }
            None => (account.clone(), kv.get("parent").cloned()),
        };
        for u in kv.get("users").map(|v| v.split(',')).into_iter().flatten() {
            if u.is_empty() {
                return Err(err(format!("empty user name in `Users={}`", kv["users"])));
            }
            associations.push((u.to_string(), account.clone()));
        }
        scopes.push(QuotaScope {
            name,
            parent,
            guaranteed_gpus: num("guaranteedgpus")?.unwrap_or(0),
            max_gpus: num("maxgpus")?,
            max_submit_jobs: jobs("maxsubmitjobs")?,
            max_jobs: jobs("maxjobs")?,
        });
    }
    let mut t = QuotaTree::new(scopes)?;
    t.associations = associations;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = "# org\nAccount=research GuaranteedGPUs=512 MaxGPUs=1024\n\
        Account=nlp Parent=research GuaranteedGPUs=256 maxgpus=768 # team\n\
        User=alice Account=nlp GuaranteedGPUs=16\n";

    #[test]
    fn parses_the_tree() {
        let t = parse_quota_conf(CONF, "quota.conf").unwrap();
        assert_eq!(t.len(), 3);
        let alice = t.scope_of("alice", "nlp").unwrap();
        assert_eq!(t.scope(alice).guaranteed_gpus, 16);
        let chain: Vec<&str> = t.chain(alice).map(|s| t.scope(s).name.as_str()).collect();
        assert_eq!(chain, ["alice@nlp", "nlp", "research"]);
        assert_eq!(t.scope_of("bob", "nlp"), t.scope_of("x", "nlp"));
        assert_eq!(t.scope_of("bob", "other"), None);
        assert_eq!(t.scope(t.scope_of("bob", "nlp").unwrap()).max_gpus, Some(768));
    }

    #[test]
    fn default_accounts_are_the_first_association() {
        // The reference cluster: `sacctmgr add user alice,bob account=research`.
        let t = parse_quota_conf("Account=research Users=alice,bob\n", "quota.conf").unwrap();
        assert_eq!(t.default_account("alice"), Some("research"));
        assert_eq!(t.default_account("bob"), Some("research"));
        assert_eq!(t.default_account("carol"), None);
        assert_eq!(t.len(), 1, "Users= adds no scope");
        let t = parse_quota_conf(
            "Account=org\nAccount=nlp Parent=org users=carol\nUser=alice Account=nlp GuaranteedGPUs=4\nAccount=cv Parent=org Users=alice\n",
            "q",
        )
        .unwrap();
        assert_eq!(t.default_account("alice"), Some("nlp"));
        assert_eq!(t.default_account("carol"), Some("nlp"));
        assert_eq!(t.associations().len(), 3);
        let all = t.default_accounts();
        assert_eq!(all.len(), 2);
        assert_eq!(all["alice"], "nlp");
        let e = parse_quota_conf("Account=a Users=x,,y\n", "q").unwrap_err();
        assert_eq!(e.to_string(), "q:1: empty user name in `Users=x,,y`");
        let e = parse_quota_conf("Account=a\nUser=x Account=a Users=y\n", "q").unwrap_err();
        assert!(e.to_string().starts_with("q:2: `Users=` belongs on an `Account=` line"));
    }

    #[test]
    fn job_limits_are_inherited_down_the_tree() {
        let t = parse_quota_conf(
            "Account=org MaxSubmitJobs=100 MaxJobs=10\nAccount=nlp Parent=org MaxJobs=4 Users=bob\n\
             User=alice Account=nlp MaxSubmitJobs=2\nAccount=free\n",
            "q",
        )
        .unwrap();
        assert_eq!(t.job_limits("alice", "nlp"), (Some(2), Some(4)));
        assert_eq!(t.job_limits("bob", "nlp"), (Some(100), Some(4)));
        assert_eq!(t.job_limits("carol", "org"), (Some(100), Some(10)));
        assert_eq!(t.job_limits("carol", "free"), (None, None));
        assert_eq!(t.job_limits("carol", "nosuch"), (None, None));
        assert!(t.has_job_limits());
        let e = parse_quota_conf("Account=a MaxJobs=x\n", "q").unwrap_err();
        assert_eq!(e.to_string(), "q:1: `maxjobs` is not a job count: `x`");
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse_quota_conf("Account=a\nAccount=b Bogus=1\n", "q.conf").unwrap_err();
        assert_eq!(e.to_string(), "q.conf:2: unknown key `bogus`");
        let e = parse_quota_conf("Account=a GuaranteedGPUs=x\n", "q.conf").unwrap_err();
        assert!(e.to_string().starts_with("q.conf:1: `guaranteedgpus` is not a GPU count"));
        let e = parse_quota_conf("Account=a Parent=zz\n", "q.conf").unwrap_err();
        assert_eq!(e.to_string(), "quota scope `a`: unknown parent `zz`");
        let e = parse_quota_conf("Account=a Parent=b\nAccount=b Parent=a\n", "q.conf").unwrap_err();
        assert!(e.to_string().contains("cycle"));
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(s in "\\PC*") {
            let _ = parse_quota_conf(&s, "q");
        }
    }
}
