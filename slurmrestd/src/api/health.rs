//! Health probes for load balancers and orchestrators, unauthenticated and cheap, with the
//! controller's conventions (Slurm 25.11's slurmctld HTTP endpoints): `GET /livez` and
//! `/healthz` answer 204 while the process serves; `GET /readyz` answers 204 when the
//! controller answers a ping (as slurmrestd itself, within the call deadline), else 503 — a
//! slurmrestd that cannot reach its controller takes no traffic.

use crate::app::Shared;
use crate::ctl::Caller;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use flotilla_proto::{Request, Response};

async fn live() -> StatusCode {
    StatusCode::NO_CONTENT
}

async fn ready(State(st): State<Shared>) -> StatusCode {
    match st.ctl.call(&Caller::Local, Request::Ping).await {
        Ok(Response::Pong) => StatusCode::NO_CONTENT,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The routes.
pub fn routes() -> Router<Shared> {
    Router::new().route("/livez", get(live)).route("/healthz", get(live)).route("/readyz", get(ready))
}
