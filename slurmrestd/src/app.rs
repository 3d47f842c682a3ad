//! The application: shared state, the caller of each request ([`Authed`]), and the router
//! assembled from the API modules ([`crate::api`]).

use crate::auth::{caller, AuthModes, AuthRefusal, Peer};
use crate::ctl::{Caller, CtlClient};
use crate::reply::Reply;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use flotilla_proto::errno::ESLURM_AUTH_CRED_INVALID;
use flotilla_proto::SlurmError;
use flotilla_rest::{ApiVersion, ClientInfo};
use std::sync::Arc;

/// Largest request body taken (bytes); a larger one is refused with 413 unread.
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// What every handler shares.
#[derive(Debug)]
pub struct AppState {
    /// The controller.
    pub ctl: CtlClient,
    /// The `rest_auth` plugins on.
    pub modes: AuthModes,
    /// slurmrestd's own uid (`rest_auth/local` serves only it).
    pub my_uid: u32,
    /// `ClusterName`, for `meta.slurm.cluster`.
    pub cluster: String,
}

/// The shared state as handlers take it.
pub type Shared = Arc<AppState>;

/// An authenticated request: who, and how `meta.client` names them.
#[derive(Debug, Clone)]
pub struct Authed {
    /// For the controller.
    pub caller: Caller,
    /// For `meta.client`.
    pub client: ClientInfo,
}

/// The API version a request path names (`/slurm/v0.0.42/...`, `/slurmdb/v0.0.38/...`),
/// the newest for other paths.
pub fn version_of(path: &str) -> ApiVersion {
    path.split('/')
        .nth(2)
        .and_then(ApiVersion::parse)
        .unwrap_or(ApiVersion::V0044)
}

impl FromRequestParts<Shared> for Authed {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, st: &Shared) -> Result<Authed, Response> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<Peer>>()
            .map(|c| c.0.clone())
            .unwrap_or(Peer {
                source: String::new(),
                unix_cred: None,
            });
        let version = version_of(parts.uri.path());
        match caller(&parts.headers, &peer, st.modes, st.my_uid) {
            Ok(c) => {
                let user = match &c {
                    Caller::Token(t) => t.user_name.clone(),
                    Caller::Local => String::new(),
                };
                Ok(Authed {
                    caller: c,
                    client: ClientInfo {
                        source: peer.source,
                        user,
                        group: String::new(),
                    },
                })
            }
            Err(why) => {
                let detail = match why {
                    AuthRefusal::Missing => {
                        "authentication required (X-SLURM-USER-TOKEN, or a local socket)"
                            .to_string()
                    }
                    AuthRefusal::WrongUid(u) => format!("rejecting socket connection with uid {u}"),
                };
                tracing::info!(peer = %peer.source, "{detail}");
                let e = SlurmError::with_message(ESLURM_AUTH_CRED_INVALID, detail);
                // The fleet API has its own error shape (no Slurm envelope).
                if parts.uri.path().starts_with("/flotilla/") {
                    return Err(crate::api::fleet::refused(StatusCode::UNAUTHORIZED, &e).into_response());
                }
                let client = ClientInfo {
                    source: peer.source,
                    ..ClientInfo::default()
                };
                Err(Reply::slurm_error(
                    StatusCode::UNAUTHORIZED,
                    version,
                    &client,
                    &st.cluster,
                    &e,
                    "rest_auth",
                )
                .into_response())
            }
        }
    }
}

/// Registers `path` and `path/` (Slurm's paths end in `/`; clients send either).
pub fn both(
    r: Router<Shared>,
    path: &str,
    m: axum::routing::MethodRouter<Shared>,
) -> Router<Shared> {
    let trimmed = path.trim_end_matches('/');
    r.route(trimmed, m.clone()).route(&format!("{trimmed}/"), m)
}

/// The whole application for `st`.
pub fn router(st: Shared) -> Router {
    crate::api::routes()
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(st)
}
