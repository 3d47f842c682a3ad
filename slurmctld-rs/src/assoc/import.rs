//! `quota.conf` as an import format: read once, at the first start, into the accounting
//! database (see the module docs of [`super`] for the mapping).

use super::AssocDb;
use flotilla_proto::acctmgr::AssocRow;
use flotilla_core::quota::QuotaTree;
use flotilla_proto::acctmgr::{AccountRow, AdminLevel, UserRow};

/// Adds `tree`'s accounts, users, associations and limits to `db` (which holds at least
/// the default objects). Accounts come parents first whatever the file's order; an account
/// whose parent is missing goes under `root`.
pub fn quota_tree(db: &mut AssocDb, tree: &QuotaTree) {
    let Some(root) = db.find("root", "", "") else { return };
    let accounts: Vec<_> = tree.scopes.iter().filter(|s| !s.name.contains('@')).collect();
    let mut placed: Vec<String> = vec!["root".into()];
    // Parents before children: repeat until no account can be placed.
    let mut left = accounts.clone();
    while !left.is_empty() {
        let before = left.len();
        left.retain(|s| {
            let parent = s.parent.clone().unwrap_or_else(|| "root".into());
            if !placed.contains(&parent) && accounts.iter().any(|a| a.name == parent) {
                return true;
            }
            let pid = db.find(&parent, "", "").unwrap_or(root);
            add_account(db, &s.name, pid);
            let id = db.find(&s.name, "", "").expect("just added");
            let mut a = db.assocs[&id].clone();
            a.guaranteed_gpus = s.guaranteed_gpus;
            a.grp_tres = s.max_gpus.map(|g| format!("gres/gpu={g}")).unwrap_or_default();
            a.max_jobs = s.max_jobs;
            a.max_submit = s.max_submit_jobs;
            db.put_assoc(a);
            placed.push(s.name.clone());
            false
        });
        if left.len() == before {
            break;
        }
    }
    for (user, account) in tree.associations() {
        add_user_assoc(db, user, account);
    }
    for s in tree.scopes.iter().filter(|s| s.name.contains('@')) {
        let (user, account) = s.name.split_once('@').expect("contains @");
        let id = add_user_assoc(db, user, account);
        let mut a = db.assocs[&id].clone();
        a.guaranteed_gpus = s.guaranteed_gpus;
        a.grp_tres = s.max_gpus.map(|g| format!("gres/gpu={g}")).unwrap_or_default();
        a.max_jobs = s.max_jobs;
        a.max_submit = s.max_submit_jobs;
        db.put_assoc(a);
    }
}

fn add_account(db: &mut AssocDb, name: &str, parent: u32) {
    if !db.accounts.contains_key(name) {
        let org = db.assocs.get(&parent).map_or("root", |p| p.account.as_str());
        let org = if org == "root" { name.to_string() } else { org.to_string() };
        db.put_account(AccountRow { name: name.into(), description: name.into(), organization: org });
    }
    if db.find(name, "", "").is_none() {
        let a = AssocRow::new(db.next_id(), Some(parent), name, "", "");
        db.put_assoc(a);
    }
}

/// The association of `user` in `account` (created, with the account under root if it is
/// missing); the user's first account becomes their `DefaultAccount`.
fn add_user_assoc(db: &mut AssocDb, user: &str, account: &str) -> u32 {
    if db.find(account, "", "").is_none() {
        let root = db.find("root", "", "").expect("defaults exist");
        add_account(db, account, root);
    }
    if !db.users.contains_key(user) {
        db.put_user(UserRow { name: user.into(), default_account: account.into(), admin_level: AdminLevel::None });
    }
    match db.find(account, user, "") {
        Some(id) => id,
        None => {
            let parent = db.find(account, "", "");
            let a = AssocRow::new(db.next_id(), parent, account, user, "");
            let id = a.id;
            db.put_assoc(a);
            id
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_core::quota::parse_quota_conf;

    #[test]
    fn quota_conf_becomes_accounts_users_and_limits() {
        let text = "User=alice Account=nlp GuaranteedGPUs=16\nAccount=nlp Parent=research GuaranteedGPUs=256 MaxGPUs=768 MaxJobs=3\n\
                    Account=research GuaranteedGPUs=512 MaxGPUs=1024 Users=bob\n";
        let tree = parse_quota_conf(text, "quota.conf").unwrap();
        let mut db = AssocDb { cluster: "c".into(), ..AssocDb::default() };
        db.ensure_defaults("h", 6817);
        quota_tree(&mut db, &tree);
        let nlp = &db.assocs[&db.find("nlp", "", "").unwrap()];
        let research = db.find("research", "", "").unwrap();
        assert_eq!(nlp.parent, Some(research));
        assert_eq!((nlp.guaranteed_gpus, nlp.grp_tres.as_str(), nlp.max_jobs), (256, "gres/gpu=768", Some(3)));
        let alice = &db.assocs[&db.find("nlp", "alice", "").unwrap()];
        assert_eq!((alice.guaranteed_gpus, alice.parent), (16, Some(nlp.id)));
        assert_eq!(db.users["bob"].default_account, "research");
        assert_eq!(db.users["alice"].default_account, "nlp");
        let d = super::super::model::derive(&db, Default::default());
        assert!(d.quotas.has_limits());
        assert_eq!(d.quotas.job_limits("alice", "nlp"), (None, Some(3)), "MaxJobs inherited from nlp");
        assert!(d.pairs.contains(&("bob".into(), "research".into())));
        assert_eq!(d.accounting.tree.find("alice", "nlp", None).unwrap().guaranteed_gpus, 16);
    }
}
