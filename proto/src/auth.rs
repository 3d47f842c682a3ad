//! Credentials: who is asking, vouched for by a daemon that asked the kernel.
//!
//! DESIGN.md §3: a command connects to a local Unix socket whose owner (the controller, a node
//! daemon, or `sackd`) reads `SO_PEERCRED` and signs a short-lived [`Credential`] with the
//! cluster key; the command presents it to the controller over TCP. Daemons authenticate each
//! other with credentials signed by the same key.
//!
//! The MAC is HMAC-SHA256 over a domain tag, uid, gid, host, issue time, expiry and a 16-byte
//! nonce. The verifier rejects forged MACs, expired credentials, credentials issued in the
//! future (beyond a clock skew allowance) or valid for longer than it accepts, and replays: a
//! nonce is remembered until its credential expires ([`ReplayCache`]). The cache is bounded
//! ([`MAX_REPLAY_ENTRIES`] in all, [`MAX_REPLAY_ENTRIES_PER_UID`] per uid): when full, a new
//! credential is refused ([`AuthError::ReplayCacheFull`]) rather than the cache growing or
//! forgetting a live nonce. It lives in memory only, so a verifier also refuses credentials
//! issued before it was created ([`Verifier::new`]'s `not_before`, the daemon's start): a
//! restart forgets the nonces, and this is what keeps a credential seen before the restart
//! from being replayed after it.
//!
//! The key file is like Slurm's `slurm.key`: at least 32 bytes, readable by its owner only
//! (mode `0600` or `0400`); a key file readable by group or others is refused.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

type HmacSha256 = Hmac<Sha256>;

/// Domain separation tag of the MAC input.
const TAG: &[u8] = b"flotilla-credential-v1\0";
/// Minimum key length in bytes.
pub const MIN_KEY_BYTES: usize = 32;
/// Default lifetime of a credential (s), as munge's default TTL.
pub const DEFAULT_TTL_S: u64 = 300;
/// Clock skew tolerated for `issued_at` in the future (s).
pub const MAX_SKEW_S: u64 = 60;
/// Most nonces a [`ReplayCache`] remembers at once (about 90 bytes each: ~47 MiB when full).
/// Commands sign credentials valid [`DEFAULT_TTL_S`] seconds, so this admits ~1,700 fresh
/// credentials a second, sustained.
pub const MAX_REPLAY_ENTRIES: usize = 1 << 19;
/// Most nonces a [`ReplayCache`] remembers for one uid, so that one user asking a local
/// daemon for credentials in a loop fills only its own share, not the whole cache.
pub const MAX_REPLAY_ENTRIES_PER_UID: usize = 1 << 17;

/// A signed statement "the kernel says this peer is uid/gid on host", valid until `expires_at`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Host the credential was issued on.
    pub host: String,
    /// Issue time (s since the Unix epoch).
    pub issued_at: u64,
    /// Expiry (s since the Unix epoch).
    pub expires_at: u64,
    /// Random nonce; a credential is accepted once.
    pub nonce: [u8; 16],
    /// HMAC-SHA256 over the fields above.
    pub mac: [u8; 32],
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("uid", &self.uid)
            .field("gid", &self.gid)
            .field("host", &self.host)
            .field("issued_at", &self.issued_at)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// Why a credential or key was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    /// The MAC does not match: forged, altered, or signed with another key.
    #[error("credential signature invalid")]
    Forged,
    /// Past its expiry.
    #[error("credential expired")]
    Expired,
    /// Issued in the future, or valid for longer than accepted.
    #[error("credential times out of range")]
    BadTimes,
    /// Its nonce was seen before.
    #[error("credential replayed")]
    Replayed,
    /// Issued before the verifier started (its replay cache does not know what came before).
    #[error("credential issued before the controller started")]
    BeforeStart,
    /// The replay cache holds its maximum of live nonces (in all, or for this uid).
    #[error("credential replay cache full ({0}); try again later")]
    ReplayCacheFull(String),
    /// No credential where one is required.
    #[error("no credential")]
    Missing,
    /// The key file cannot be read or written.
    #[error("key file {path}: {message}")]
    KeyFile {
        /// Path.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The key file is readable by group or others.
    #[error("key file {path} has mode {mode:o}; it must be readable by its owner only")]
    KeyPermissions {
        /// Path.
        path: PathBuf,
        /// Its mode bits.
        mode: u32,
    },
    /// Fewer than [`MIN_KEY_BYTES`] bytes.
    #[error("key is {0} bytes; at least 32 are needed")]
    KeyTooShort(usize),
}

impl AuthError {
    /// Slurm's error code for the refusal answered to the peer.
    pub fn slurm_code(&self) -> i32 {
        match self {
            AuthError::Expired => crate::errno::ESLURM_AUTH_EXPIRED,
            _ => crate::errno::ESLURM_AUTH_CRED_INVALID,
        }
    }
}

/// The cluster key (`slurm.key`). Its bytes are never printed.
#[derive(Clone)]
pub struct ClusterKey(Vec<u8>);

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterKey(..)")
    }
}

/// `n` random bytes from the kernel.
pub fn random_bytes(n: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}

impl ClusterKey {
    /// A key from bytes (at least 32).
    pub fn from_bytes(bytes: &[u8]) -> Result<ClusterKey, AuthError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(AuthError::KeyTooShort(bytes.len()));
        }
        Ok(ClusterKey(bytes.to_vec()))
    }

    /// Reads the key file, refusing one that group or others may read.
    pub fn load(path: &Path) -> Result<ClusterKey, AuthError> {
        let err = |e: std::io::Error| AuthError::KeyFile {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let meta = std::fs::metadata(path).map_err(err)?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(AuthError::KeyPermissions {
                path: path.to_path_buf(),
                mode,
            });
        }
        let bytes = std::fs::read(path).map_err(err)?;
        ClusterKey::from_bytes(&bytes)
    }

    /// Creates a new random 64-byte key file with mode `0600` (refuses to overwrite).
    pub fn generate(path: &Path) -> Result<ClusterKey, AuthError> {
        let err = |e: std::io::Error| AuthError::KeyFile {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let bytes = random_bytes(64).map_err(err)?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(err)?;
        f.write_all(&bytes).map_err(err)?;
        f.sync_all().map_err(err)?;
        ClusterKey::from_bytes(&bytes)
    }

    fn mac(&self, c: &Credential) -> HmacSha256 {
        let mut m = HmacSha256::new_from_slice(&self.0).expect("hmac takes any key length");
        m.update(TAG);
        m.update(&c.uid.to_be_bytes());
        m.update(&c.gid.to_be_bytes());
        m.update(&(c.host.len() as u64).to_be_bytes());
        m.update(c.host.as_bytes());
        m.update(&c.issued_at.to_be_bytes());
        m.update(&c.expires_at.to_be_bytes());
        m.update(&c.nonce);
        m
    }

    /// Signs a credential for `uid`/`gid` on `host`, issued `now`, valid `ttl_s` seconds.
    pub fn sign(&self, uid: u32, gid: u32, host: &str, now: u64, ttl_s: u64) -> Credential {
        let mut nonce = [0u8; 16];
        match random_bytes(16) {
            Ok(b) => nonce.copy_from_slice(&b),
            Err(_) => {
                // /dev/urandom unavailable: fall back to a process-unique counter + time.
                static CTR: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let c = CTR.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                nonce[..8].copy_from_slice(&c.to_be_bytes());
                nonce[8..].copy_from_slice(&(u64::from(std::process::id()) << 32 ^ now).to_be_bytes());
            }
        }
        let mut c = Credential {
            uid,
            gid,
            host: host.to_string(),
            issued_at: now,
            expires_at: now.saturating_add(ttl_s),
            nonce,
            mac: [0; 32],
        };
        c.mac = self.mac(&c).finalize().into_bytes().into();
        c
    }

    /// Checks signature and times (not replays; see [`Verifier`]). `max_ttl_s` bounds how long
    /// a credential may claim to be valid.
    pub fn verify(&self, c: &Credential, now: u64, max_ttl_s: u64) -> Result<(), AuthError> {
        self.mac(c).verify_slice(&c.mac).map_err(|_| AuthError::Forged)?;
        if c.expires_at <= now {
            return Err(AuthError::Expired);
        }
        if c.issued_at > now + MAX_SKEW_S || c.expires_at < c.issued_at || c.expires_at - c.issued_at > max_ttl_s {
            return Err(AuthError::BadTimes);
        }
        Ok(())
    }
}

/// Nonces seen, each kept until its credential expires; at most `max` in all and
/// `max_per_uid` per uid ([`MAX_REPLAY_ENTRIES`], [`MAX_REPLAY_ENTRIES_PER_UID`] by default).
#[derive(Debug)]
pub struct ReplayCache {
    seen: HashMap<[u8; 16], u64>,
    by_expiry: BTreeMap<(u64, [u8; 16]), u32>,
    per_uid: HashMap<u32, usize>,
    max: usize,
    max_per_uid: usize,
}

impl Default for ReplayCache {
    fn default() -> ReplayCache {
        ReplayCache::with_limits(MAX_REPLAY_ENTRIES, MAX_REPLAY_ENTRIES_PER_UID)
    }
}

impl ReplayCache {
    /// An empty cache holding at most `max` nonces, `max_per_uid` for one uid.
    pub fn with_limits(max: usize, max_per_uid: usize) -> ReplayCache {
        ReplayCache {
            seen: HashMap::new(),
            by_expiry: BTreeMap::new(),
            per_uid: HashMap::new(),
            max,
            max_per_uid,
        }
    }

    /// Records the credential's nonce; `Err(Replayed)` if it was seen and has not expired,
    /// `Err(ReplayCacheFull)` if the cache (or the uid's share) holds its maximum of live
    /// nonces — the credential is then not recorded, and not accepted.
    pub fn check_and_insert(&mut self, c: &Credential, now: u64) -> Result<(), AuthError> {
        self.prune(now);
        if self.seen.contains_key(&c.nonce) {
            return Err(AuthError::Replayed);
        }
        if self.seen.len() >= self.max {
            return Err(AuthError::ReplayCacheFull(format!("{} live credentials", self.max)));
        }
        let n = self.per_uid.entry(c.uid).or_insert(0);
        if *n >= self.max_per_uid {
            return Err(AuthError::ReplayCacheFull(format!("{} live credentials of uid {}", self.max_per_uid, c.uid)));
        }
        *n += 1;
        self.seen.insert(c.nonce, c.expires_at);
        self.by_expiry.insert((c.expires_at, c.nonce), c.uid);
        Ok(())
    }

    /// Forgets nonces of credentials that have expired.
    pub fn prune(&mut self, now: u64) {
        while let Some((&(exp, nonce), &uid)) = self.by_expiry.iter().next() {
            if exp > now {
                break;
            }
            self.by_expiry.remove(&(exp, nonce));
            self.seen.remove(&nonce);
            if let Some(n) = self.per_uid.get_mut(&uid) {
                *n -= 1;
                if *n == 0 {
                    self.per_uid.remove(&uid);
                }
            }
        }
    }

    /// Nonces remembered.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

/// Key + replay cache: what a server needs to accept a credential once. Shared between
/// connection tasks (the lock is never held across an await).
#[derive(Debug)]
pub struct Verifier {
    key: ClusterKey,
    max_ttl_s: u64,
    not_before: u64,
    cache: Mutex<ReplayCache>,
}

impl Verifier {
    /// A verifier accepting credentials valid for at most `max_ttl_s` seconds and issued at
    /// or after `not_before` (s since the epoch: the daemon's start, since the replay cache
    /// starts empty; 0 accepts any issue time).
    pub fn new(key: ClusterKey, max_ttl_s: u64, not_before: u64) -> Verifier {
        Verifier::with_cache(key, max_ttl_s, not_before, ReplayCache::default())
    }

    /// [`Verifier::new`] with a given (empty) replay cache, e.g. one with small limits.
    pub fn with_cache(key: ClusterKey, max_ttl_s: u64, not_before: u64, cache: ReplayCache) -> Verifier {
        Verifier {
            key,
            max_ttl_s,
            not_before,
            cache: Mutex::new(cache),
        }
    }

    /// The key (to sign credentials with).
    pub fn key(&self) -> &ClusterKey {
        &self.key
    }

    /// Verifies signature, times, and that the credential was not used before.
    pub fn accept(&self, c: &Credential, now: u64) -> Result<(), AuthError> {
        self.key.verify(c, now, self.max_ttl_s)?;
        if c.issued_at < self.not_before {
            return Err(AuthError::BeforeStart);
        }
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .check_and_insert(c, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ClusterKey {
        ClusterKey::from_bytes(&[7u8; 32]).unwrap()
    }

    #[test]
    fn sign_verify_forge_expire_replay() {
        let k = key();
        let v = Verifier::new(k.clone(), DEFAULT_TTL_S, 0);
        let c = k.sign(2001, 2001, "login1", 1000, 300);
        assert_eq!(v.accept(&c, 1001), Ok(()));
        assert_eq!(v.accept(&c, 1002), Err(AuthError::Replayed));
        // Forged: uid changed after signing.
        let mut f = k.sign(2001, 2001, "login1", 1000, 300);
        f.uid = 0;
        assert_eq!(v.accept(&f, 1001), Err(AuthError::Forged));
        // Another key.
        let other = ClusterKey::from_bytes(&[8u8; 32]).unwrap().sign(0, 0, "x", 1000, 300);
        assert_eq!(v.accept(&other, 1001), Err(AuthError::Forged));
        // Expired.
        let e = k.sign(2001, 2001, "login1", 1000, 300);
        assert_eq!(v.accept(&e, 1300), Err(AuthError::Expired));
        // Too long-lived, or from the future.
        let long = k.sign(2001, 2001, "login1", 1000, 100_000);
        assert_eq!(v.accept(&long, 1001), Err(AuthError::BadTimes));
        let future = k.sign(2001, 2001, "login1", 5000, 300);
        assert_eq!(v.accept(&future, 1001), Err(AuthError::BadTimes));
    }

    #[test]
    fn replay_cache_forgets_after_expiry() {
        let k = key();
        let mut rc = ReplayCache::default();
        let c = k.sign(1, 1, "h", 100, 10);
        rc.check_and_insert(&c, 100).unwrap();
        assert_eq!(rc.check_and_insert(&c, 105), Err(AuthError::Replayed));
        rc.prune(111);
        assert!(rc.is_empty());
    }

    /// The cache is bounded in all and per uid; expiry frees room; a full cache refuses
    /// rather than forgetting a live nonce.
    #[test]
    fn replay_cache_is_bounded() {
        let k = key();
        let mut rc = ReplayCache::with_limits(4, 2);
        rc.check_and_insert(&k.sign(1, 1, "h", 100, 10), 100).unwrap();
        rc.check_and_insert(&k.sign(1, 1, "h", 100, 50), 100).unwrap();
        let third = k.sign(1, 1, "h", 100, 10);
        assert!(matches!(rc.check_and_insert(&third, 100), Err(AuthError::ReplayCacheFull(m)) if m.contains("uid 1")));
        rc.check_and_insert(&k.sign(2, 2, "h", 100, 10), 100).unwrap();
        rc.check_and_insert(&k.sign(3, 3, "h", 100, 10), 100).unwrap();
        assert!(matches!(rc.check_and_insert(&k.sign(4, 4, "h", 100, 10), 100), Err(AuthError::ReplayCacheFull(_))));
        assert_eq!(rc.len(), 4);
        // The 10 s credentials expire: room again, for uid 1 too.
        rc.check_and_insert(&third, 111).unwrap();
        assert_eq!(rc.len(), 2);
    }

    /// A verifier refuses credentials issued before it started (a restart forgets nonces).
    #[test]
    fn credentials_from_before_the_start_are_refused() {
        let k = key();
        let v = Verifier::new(k.clone(), DEFAULT_TTL_S, 1000);
        assert_eq!(v.accept(&k.sign(1, 1, "h", 999, 300), 1001), Err(AuthError::BeforeStart));
        assert_eq!(v.accept(&k.sign(1, 1, "h", 1000, 300), 1001), Ok(()));
    }

    #[test]
    fn key_file_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("slurm.key");
        let k = ClusterKey::generate(&p).unwrap();
        let l = ClusterKey::load(&p).unwrap();
        assert_eq!(k.0, l.0);
        assert!(ClusterKey::generate(&p).is_err(), "never overwrites");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(ClusterKey::load(&p), Err(AuthError::KeyPermissions { .. })));
        let short = dir.path().join("short.key");
        std::fs::write(&short, b"abc").unwrap();
        std::fs::set_permissions(&short, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(ClusterKey::load(&short).unwrap_err(), AuthError::KeyTooShort(3));
    }
}
