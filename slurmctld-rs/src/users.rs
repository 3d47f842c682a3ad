//! User names, as the controller names them: from the password database (NSS) by the uid the
//! request was authenticated for, never from what a command claims (Slurm's slurmctld takes
//! `uid_to_string(job_desc->user_id)` too). A claimed name would pick another user's default
//! account (quota.conf `Users=`) and show under their name.
//!
//! Lookups are cached (a name changes rarely; a restart forgets) and made off the async
//! workers on a miss (`spawn_blocking`: NSS may be LDAP or sssd over the network).

use std::collections::HashMap;
use std::sync::Mutex;

/// Cached uid → name lookups.
#[derive(Debug, Default)]
pub struct UserNames {
    cache: Mutex<HashMap<u32, String>>,
    /// Name → (uid, primary gid), found entries only (a token's user, [`UserNames::user`]).
    by_name: Mutex<HashMap<String, (u32, u32)>>,
}

impl UserNames {
    /// An empty cache.
    pub fn new() -> UserNames {
        UserNames::default()
    }

    /// The name of `uid`; its decimal digits when the password database has no entry (as Slurm
    /// shows a uid without one).
    pub async fn name(&self, uid: u32) -> String {
        if let Some(n) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(&uid) {
            return n.clone();
        }
        let name = tokio::task::spawn_blocking(move || lookup(uid)).await.unwrap_or_else(|_| uid.to_string());
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).insert(uid, name.clone());
        name
    }
}

impl UserNames {
    /// The uid and primary gid of the user `name` from the password database (the user a
    /// verified JSON Web Token names); `None` when it has no entry. Found entries are cached;
    /// a miss is looked up again next time (only a holder of a valid token can ask).
    pub async fn user(&self, name: &str) -> Option<(u32, u32)> {
        if let Some(u) = self.by_name.lock().unwrap_or_else(|e| e.into_inner()).get(name) {
            return Some(*u);
        }
        let owned = name.to_string();
        let found = tokio::task::spawn_blocking(move || {
            nix::unistd::User::from_name(&owned).ok().flatten().map(|u| (u.uid.as_raw(), u.gid.as_raw()))
        })
        .await
        .ok()
        .flatten()?;
        let mut m = self.by_name.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= 65_536 {
            m.clear();
        }
        m.insert(name.to_string(), found);
        Some(found)
    }
}

/// One uncached lookup.
pub fn lookup(uid: u32) -> String {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn names_come_from_the_password_database() {
        let names = UserNames::new();
        assert_eq!(names.name(0).await, "root");
        // A uid no entry has: its digits (u32::MAX - 7 is nobody's on any sane host).
        let odd = u32::MAX - 7;
        assert_eq!(names.name(odd).await, odd.to_string());
        assert_eq!(names.cache.lock().unwrap().len(), 2, "both cached");
        assert_eq!(names.name(0).await, "root");
        assert_eq!(names.user("root").await, Some((0, 0)));
        assert_eq!(names.user("no-such-user-flotilla").await, None);
        assert_eq!(names.by_name.lock().unwrap().len(), 1, "only found entries are cached");
    }
}
