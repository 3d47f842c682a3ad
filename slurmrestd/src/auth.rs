//! Who an HTTP request is from (Slurm's `rest_auth` plugins).
//!
//! - `rest_auth/jwt`: headers `X-SLURM-USER-NAME` and `X-SLURM-USER-TOKEN` (22.05's names;
//!   `X-SLURM-USER-TOKEN` without a name acts as the token's own user). The token goes to the
//!   controller unchecked: the controller holds the key and decides ([`Caller::Token`]).
//! - `rest_auth/local`: a peer on a Unix socket whose uid (`SO_PEERCRED`) is slurmrestd's own
//!   (Slurm's rule: local auth proxies for the user slurmrestd runs as, nobody else).
//!
//! Anything else is refused before the controller hears of it, with 401.

use crate::ctl::Caller;
use axum::http::HeaderMap;
use flotilla_proto::TokenAuth;

/// Which `rest_auth` plugins are on (`-a rest_auth/local,rest_auth/jwt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthModes {
    /// `rest_auth/local`.
    pub local: bool,
    /// `rest_auth/jwt`.
    pub jwt: bool,
}

/// The connection an HTTP request came on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// `[127.0.0.1]:40000`, or `unix:/path` for a Unix socket (as `meta.client.source`).
    pub source: String,
    /// The peer's uid and gid from the kernel, on a Unix socket.
    pub unix_cred: Option<(u32, u32)>,
}

/// Why a request is refused before it reaches the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthRefusal {
    /// No credential slurmrestd accepts.
    Missing,
    /// A Unix peer whose uid is not slurmrestd's.
    WrongUid(u32),
}

/// Longest `X-SLURM-USER-TOKEN` taken (bytes); a longer one is refused unread.
pub const MAX_TOKEN_BYTES: usize = 8192;
/// Longest `X-SLURM-USER-NAME` (bytes).
pub const MAX_USER_BYTES: usize = 256;

/// The caller of a request with `headers` on `peer`, for a slurmrestd running as `my_uid`.
pub fn caller(
    headers: &HeaderMap,
    peer: &Peer,
    modes: AuthModes,
    my_uid: u32,
) -> Result<Caller, AuthRefusal> {
    let header = |n: &str, max: usize| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .filter(|s| !s.is_empty() && s.len() <= max)
            .map(str::to_string)
    };
    if modes.jwt {
        if let Some(token) = header("x-slurm-user-token", MAX_TOKEN_BYTES) {
            let user_name = header("x-slurm-user-name", MAX_USER_BYTES).unwrap_or_default();
            return Ok(Caller::Token(TokenAuth { user_name, token }));
        }
    }
    match peer.unix_cred {
        Some((uid, _)) if modes.local && uid == my_uid => Ok(Caller::Local),
        Some((uid, _)) if modes.local => Err(AuthRefusal::WrongUid(uid)),
        _ => Err(AuthRefusal::Missing),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(cred: Option<(u32, u32)>) -> Peer {
        Peer {
            source: "x".into(),
            unix_cred: cred,
        }
    }

    #[test]
    fn a_token_wins_and_local_needs_our_own_uid() {
        let both = AuthModes {
            local: true,
            jwt: true,
        };
        let mut h = HeaderMap::new();
        assert_eq!(caller(&h, &peer(Some((5, 5))), both, 5), Ok(Caller::Local));
        assert_eq!(
            caller(&h, &peer(Some((6, 6))), both, 5),
            Err(AuthRefusal::WrongUid(6))
        );
        assert_eq!(caller(&h, &peer(None), both, 5), Err(AuthRefusal::Missing));
        h.insert("X-SLURM-USER-TOKEN", "a.b.c".parse().unwrap());
        h.insert("X-SLURM-USER-NAME", "alice".parse().unwrap());
        let t = Caller::Token(TokenAuth {
            user_name: "alice".into(),
            token: "a.b.c".into(),
        });
        assert_eq!(caller(&h, &peer(None), both, 5), Ok(t));
        let local_only = AuthModes {
            local: true,
            jwt: false,
        };
        assert_eq!(
            caller(&h, &peer(None), local_only, 5),
            Err(AuthRefusal::Missing)
        );
    }
}
