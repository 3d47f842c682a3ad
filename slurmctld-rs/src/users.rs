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
    }
}
