//! The API, one module per family: each gives its routes and its part of the OpenAPI spec.
//!
//! - [`openapi`]: `GET /openapi/v3` (also `/openapi`, `/openapi.json`, `/openapi.yaml`),
//!   the union of every family's spec.
//! - [`ping`]: `/slurm/vX/ping` for every version (the pattern the other modules follow).
//! - [`health`]: `/livez`, `/healthz`, `/readyz` (no authentication).
//! - [`fleet`]: the fleet's own `/flotilla/v1` (jobs, deployments, topology, alerts).

pub mod fleet;
pub mod health;
pub mod openapi;
pub mod ping;

use crate::app::Shared;
use axum::Router;
use flotilla_rest::Spec;

/// Every route.
pub fn routes() -> Router<Shared> {
    Router::new().merge(openapi::routes()).merge(ping::routes()).merge(fleet::routes()).merge(health::routes())
}

/// The spec of every version and family served.
pub fn spec() -> Spec {
    let mut s = Spec::default();
    s.merge(ping::spec());
    s.merge(fleet::spec());
    s
}
