//! Health probes for load balancers and orchestrators, unauthenticated and cheap, with the
//! controller's conventions (Slurm 25.11's slurmctld HTTP endpoints): `GET /livez` and
//! `/healthz` answer 204 while the process serves; `GET /readyz` answers 204 when a
//! controller leads and answers (as slurmrestd itself, one round over the `SlurmctldHost=`
//! lines, no waiting for a takeover), else 503 — a slurmrestd that cannot reach a leading
//! controller takes no traffic. A standby answers pings, so the probe asks for the update
//! times (a small answer only the leader gives; a standby's is `ESLURM_IN_STANDBY_MODE`).

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
    match st.ctl.call_now(&Caller::Local, Request::QueryUpdateTimes).await {
        Ok(Response::UpdateTimes(_)) => StatusCode::NO_CONTENT,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The routes.
pub fn routes() -> Router<Shared> {
    Router::new().route("/livez", get(live)).route("/healthz", get(live)).route("/readyz", get(ready))
}
