//! JSON Web Tokens as Slurm's `auth/jwt` issues and accepts them: compact JWS
//! (`header.payload.signature`, each part base64url without padding), HMAC-SHA256 (`HS256`)
//! with the key of `AuthAltParameters=jwt_key=PATH`, claims `iat` and `exp` (s since the Unix
//! epoch) and `sun` (the Slurm user name; `username` is read when `sun` is absent).
//!
//! The rules, from Slurm 22.05's `auth_p_verify` and `auth_p_token_generate`
//! (`src/plugins/auth/jwt/auth_jwt.c`), in our words:
//! - the header's `alg` must be `HS256` (any case); `none`, `RS256` (we load no JWKS) and
//!   anything else are refused before any claim is read;
//! - the signature must verify under the key (compared in constant time);
//! - `exp` must not be in the past (a token without `exp` counts as expired, as Slurm reads a
//!   missing grant as 0);
//! - the user is `sun`, else `username`; a token without either is refused.
//!
//! Who the token may act as (the `X-SLURM-USER-NAME` header) is the verifier's caller's
//! business: Slurm lets only root and `SlurmUser` act for another user
//! ([`may_act_as`]).
//!
//! The key file follows the cluster key's rules ([`crate::auth::ClusterKey::load`]): at least
//! [`crate::auth::MIN_KEY_BYTES`] bytes, readable by its owner only. Slurm reads any length;
//! a shorter key is refused here because an HS256 key is only as strong as its length.

use crate::auth::{random_bytes, AuthError, MIN_KEY_BYTES};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

type HmacSha256 = Hmac<Sha256>;

/// Slurm's `DEFAULT_AUTH_TOKEN_LIFESPAN` (s): what `scontrol token` gets without `lifespan=`.
pub const DEFAULT_LIFESPAN_S: i64 = 1800;
/// The longest token accepted (bytes); Slurm's are about 150.
pub const MAX_TOKEN_BYTES: usize = 8192;
/// The file name of the key in `StateSaveLocation` when `jwt_key=` is not given (Slurm's
/// default for slurmctld).
pub const DEFAULT_KEY_FILE: &str = "jwt_hs256.key";

/// Why a token was refused. The reason is for the verifier's log; the client is told only
/// Slurm's `Protocol authentication error`, as Slurm tells it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// Not three base64url parts, or a part is not a JSON object.
    #[error("malformed token")]
    Malformed,
    /// The header names another algorithm (`none` included).
    #[error("no support for alg={0}")]
    Algorithm(String),
    /// The signature does not verify under the key.
    #[error("signature does not verify")]
    Signature,
    /// `exp` is in the past (or absent).
    #[error("token expired")]
    Expired,
    /// Neither `sun` nor `username`.
    #[error("token names no user")]
    NoUser,
    /// Longer than [`MAX_TOKEN_BYTES`].
    #[error("token too long")]
    TooLong,
}

/// What a verified token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The user (`sun`, else `username`).
    pub user: String,
    /// Issue time (s), when present.
    pub iat: Option<i64>,
    /// Expiry (s).
    pub exp: i64,
}

/// The HS256 key. Its bytes are never printed.
#[derive(Clone)]
pub struct JwtKey(Vec<u8>);

impl std::fmt::Debug for JwtKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtKey").field("bytes", &self.0.len()).finish_non_exhaustive()
    }
}

impl JwtKey {
    /// A key from its bytes. Errors: [`AuthError::KeyTooShort`] under [`MIN_KEY_BYTES`].
    pub fn from_bytes(bytes: &[u8]) -> Result<JwtKey, AuthError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(AuthError::KeyTooShort(bytes.len()));
        }
        Ok(JwtKey(bytes.to_vec()))
    }

    /// Reads the key file. Errors: unreadable ([`AuthError::KeyFile`]), readable by group or
    /// others ([`AuthError::KeyPermissions`]), too short.
    pub fn load(path: &Path) -> Result<JwtKey, AuthError> {
        let err = |e: std::io::Error| AuthError::KeyFile { path: path.to_path_buf(), message: e.to_string() };
        let meta = std::fs::metadata(path).map_err(err)?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(AuthError::KeyPermissions { path: path.to_path_buf(), mode });
        }
        JwtKey::from_bytes(&std::fs::read(path).map_err(err)?)
    }

    /// Creates a new random 32-byte key file, mode `0600` (refuses to overwrite), as Slurm's
    /// documentation makes one (`dd if=/dev/random of=jwt_hs256.key bs=32 count=1`).
    pub fn generate(path: &Path) -> Result<JwtKey, AuthError> {
        let err = |e: std::io::Error| AuthError::KeyFile { path: path.to_path_buf(), message: e.to_string() };
        let bytes = random_bytes(32).map_err(err)?;
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(err)?;
        f.write_all(&bytes).map_err(err)?;
        f.sync_all().map_err(err)?;
        JwtKey::from_bytes(&bytes)
    }

    fn mac(&self, signed: &[u8]) -> HmacSha256 {
        let mut m = HmacSha256::new_from_slice(&self.0).expect("hmac takes any key length");
        m.update(signed);
        m
    }

    /// A token for `user`, issued at `now` (s) and valid `lifespan_s` seconds (negative: already
    /// expired, as Slurm would issue it). Claims in Slurm's order: `iat`, `exp`, `sun`.
    pub fn issue(&self, user: &str, now: i64, lifespan_s: i64) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let claims = serde_json::json!({"iat": now, "exp": now.saturating_add(lifespan_s), "sun": user});
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        let signed = format!("{header}.{payload}");
        let sig = URL_SAFE_NO_PAD.encode(self.mac(signed.as_bytes()).finalize().into_bytes());
        format!("{signed}.{sig}")
    }

    /// Verifies `token` at `now` (s) by the rules in the module docs.
    pub fn verify(&self, token: &str, now: i64) -> Result<Claims, JwtError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(JwtError::TooLong);
        }
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(JwtError::Malformed);
        };
        let header = json_object(h)?;
        let alg = header.get("alg").and_then(|a| a.as_str()).unwrap_or("");
        if !alg.eq_ignore_ascii_case("HS256") {
            return Err(JwtError::Algorithm(alg.chars().take(32).collect()));
        }
        let sig = URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).map_err(|_| JwtError::Signature)?;
        let signed_len = h.len() + 1 + p.len();
        self.mac(&token.as_bytes()[..signed_len]).verify_slice(&sig).map_err(|_| JwtError::Signature)?;
        let claims = json_object(p)?;
        let exp = claims.get("exp").and_then(|v| v.as_i64()).unwrap_or(0);
        if exp < now {
            return Err(JwtError::Expired);
        }
        let user = claims
            .get("sun")
            .and_then(|v| v.as_str())
            .or_else(|| claims.get("username").and_then(|v| v.as_str()))
            .filter(|u| !u.is_empty())
            .ok_or(JwtError::NoUser)?;
        Ok(Claims { user: user.to_string(), iat: claims.get("iat").and_then(|v| v.as_i64()), exp })
    }
}

/// One part of a token decoded as a JSON object.
fn json_object(part: &str) -> Result<serde_json::Map<String, serde_json::Value>, JwtError> {
    let bytes = URL_SAFE_NO_PAD.decode(part.trim_end_matches('=')).map_err(|_| JwtError::Malformed)?;
    match serde_json::from_slice(&bytes) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        _ => Err(JwtError::Malformed),
    }
}

/// Whether a token of `token_uid` may act as another user (Slurm's rule in `auth_p_verify`:
/// only root and `SlurmUser`).
pub fn may_act_as(token_uid: u32, slurm_uid: u32) -> bool {
    token_uid == 0 || token_uid == slurm_uid
}

/// The `jwt_key=` path of an `AuthAltParameters=` value, else `StateSaveLocation`'s
/// [`DEFAULT_KEY_FILE`] (Slurm's `_init_hs256`); options are comma-separated.
pub fn key_path(alt_parameters: &str, state_save_location: &str) -> std::path::PathBuf {
    alt_parameters
        .split(',')
        .find_map(|o| o.trim().strip_prefix("jwt_key="))
        .filter(|p| !p.is_empty())
        .map_or_else(|| Path::new(state_save_location).join(DEFAULT_KEY_FILE), std::path::PathBuf::from)
}

/// The options of `AuthAltParameters=` that govern issuing tokens (`_slurm_rpc_auth_token`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IssuePolicy {
    /// `disable_token_creation`: only root and `SlurmUser` may get tokens.
    pub disabled: bool,
    /// `max_token_lifespan=N` (s): longest lifespan a user may ask for; also caps the
    /// default. `None`: no limit (a value under 1 is no limit, as Slurm logs and ignores it).
    pub max_lifespan_s: Option<i64>,
}

impl IssuePolicy {
    /// Reads the options from an `AuthAltParameters=` value.
    pub fn parse(alt_parameters: &str) -> IssuePolicy {
        let mut p = IssuePolicy::default();
        for o in alt_parameters.split(',').map(str::trim) {
            if o.eq_ignore_ascii_case("disable_token_creation") {
                p.disabled = true;
            } else if let Some(v) = o.strip_prefix("max_token_lifespan=") {
                p.max_lifespan_s = v.parse::<i64>().ok().filter(|n| *n >= 1);
            }
        }
        p
    }

    /// The lifespan a request gets: its own when non-zero, else the default capped by the
    /// maximum.
    pub fn lifespan(&self, requested: i64) -> i64 {
        if requested != 0 {
            requested
        } else {
            self.max_lifespan_s.map_or(DEFAULT_LIFESPAN_S, |m| m.min(DEFAULT_LIFESPAN_S))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(b: u8) -> JwtKey {
        JwtKey::from_bytes(&[b; 32]).unwrap()
    }

    fn forge(header: &str, claims: &str, k: &JwtKey) -> String {
        let signed = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(claims));
        let sig = URL_SAFE_NO_PAD.encode(k.mac(signed.as_bytes()).finalize().into_bytes());
        format!("{signed}.{sig}")
    }

    #[test]
    fn an_issued_token_verifies_until_it_expires() {
        let k = key(1);
        let t = k.issue("alice", 1000, 1800);
        let c = k.verify(&t, 1000).unwrap();
        assert_eq!(c, Claims { user: "alice".into(), iat: Some(1000), exp: 2800 });
        assert!(k.verify(&t, 2800).is_ok(), "exp itself is still valid (Slurm: exp < now expires)");
        assert_eq!(k.verify(&t, 2801), Err(JwtError::Expired));
    }

    #[test]
    fn forged_wrong_key_and_other_algorithms_are_refused() {
        let k = key(1);
        let t = k.issue("alice", 1000, 1800);
        assert_eq!(key(2).verify(&t, 1000), Err(JwtError::Signature), "another key");
        // The payload changed to another user, signature kept.
        let parts: Vec<&str> = t.split('.').collect();
        let bob = URL_SAFE_NO_PAD.encode(r#"{"iat":1000,"exp":2800,"sun":"root"}"#);
        assert_eq!(k.verify(&format!("{}.{bob}.{}", parts[0], parts[2]), 1000), Err(JwtError::Signature));
        // alg=none with an empty signature, and with a valid HS256 signature.
        let none = format!("{}.{}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#), parts[1]);
        assert_eq!(k.verify(&none, 1000), Err(JwtError::Algorithm("none".into())));
        let none_signed = forge(r#"{"alg":"none","typ":"JWT"}"#, r#"{"exp":2800,"sun":"alice"}"#, &k);
        assert_eq!(k.verify(&none_signed, 1000), Err(JwtError::Algorithm("none".into())));
        let rs = forge(r#"{"alg":"RS256"}"#, r#"{"exp":2800,"sun":"alice"}"#, &k);
        assert_eq!(k.verify(&rs, 1000), Err(JwtError::Algorithm("RS256".into())));
        // Any case of HS256 is Slurm's.
        assert!(k.verify(&forge(r#"{"alg":"hs256"}"#, r#"{"exp":2800,"sun":"a"}"#, &k), 1000).is_ok());
    }

    #[test]
    fn claims_follow_slurms_rules() {
        let k = key(3);
        let no_exp = forge(r#"{"alg":"HS256"}"#, r#"{"sun":"alice"}"#, &k);
        assert_eq!(k.verify(&no_exp, 1), Err(JwtError::Expired), "a missing exp reads as 0");
        let by_username = forge(r#"{"alg":"HS256"}"#, r#"{"exp":10,"username":"bob"}"#, &k);
        assert_eq!(k.verify(&by_username, 5).unwrap().user, "bob");
        let both = forge(r#"{"alg":"HS256"}"#, r#"{"exp":10,"username":"bob","sun":"carol"}"#, &k);
        assert_eq!(k.verify(&both, 5).unwrap().user, "carol", "sun is preferred");
        let nobody = forge(r#"{"alg":"HS256"}"#, r#"{"exp":10}"#, &k);
        assert_eq!(k.verify(&nobody, 5), Err(JwtError::NoUser));
        assert_eq!(k.verify("a.b", 5), Err(JwtError::Malformed));
        assert_eq!(k.verify("a.b.c.d", 5), Err(JwtError::Malformed));
        assert_eq!(k.verify(&"x".repeat(MAX_TOKEN_BYTES + 1), 5), Err(JwtError::TooLong));
    }

    #[test]
    fn keys_and_parameters() {
        assert!(JwtKey::from_bytes(&[0; 31]).is_err());
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("jwt.key");
        let k = JwtKey::generate(&p).unwrap();
        assert!(JwtKey::generate(&p).is_err(), "never overwrites");
        let t = k.issue("u", 0, 10);
        assert!(JwtKey::load(&p).unwrap().verify(&t, 0).is_ok());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(JwtKey::load(&p), Err(AuthError::KeyPermissions { mode: 0o640, .. })));
        assert_eq!(key_path("jwt_key=/etc/k,disable_token_creation", "/s"), Path::new("/etc/k"));
        assert_eq!(key_path("", "/var/spool/ctld"), Path::new("/var/spool/ctld/jwt_hs256.key"));
        let pol = IssuePolicy::parse("disable_token_creation,max_token_lifespan=600");
        assert_eq!(pol, IssuePolicy { disabled: true, max_lifespan_s: Some(600) });
        assert_eq!(pol.lifespan(0), 600);
        assert_eq!(pol.lifespan(60), 60);
        assert_eq!(IssuePolicy::parse("max_token_lifespan=0").max_lifespan_s, None);
        assert_eq!(IssuePolicy::default().lifespan(0), DEFAULT_LIFESPAN_S);
        assert!(may_act_as(0, 64030) && may_act_as(64030, 64030) && !may_act_as(1000, 64030));
    }

    proptest! {
        /// Any change to any byte of a valid token is refused (or, for the few bytes
        /// base64url leaves unused at a part's end, still means the same token).
        #[test]
        fn tampering_never_verifies_as_another_claim(i in 0usize..200, b in any::<u8>()) {
            let k = key(9);
            let t = k.issue("alice", 100, 1000);
            let mut bytes = t.clone().into_bytes();
            let i = i % bytes.len();
            prop_assume!(bytes[i] != b);
            bytes[i] = b;
            if let Ok(s) = String::from_utf8(bytes) {
                if let Ok(c) = k.verify(&s, 100) {
                    prop_assert_eq!(c, k.verify(&t, 100).unwrap());
                }
            }
        }
    }
}
