//! The API, one module per family: each gives its routes and its part of the OpenAPI spec.
//!
//! - [`openapi`]: `GET /openapi/v3` (also `/openapi`, `/openapi.json`, `/openapi.yaml`),
//!   the union of every family's spec.
//! - [`ping`]: `/slurm/vX/ping` for every version (the pattern the other modules follow).
//! - [`health`]: `/livez`, `/healthz`, `/readyz` (no authentication).
//! - [`jobs`]: `/slurm/vX/jobs`, `/job/{job_id}` (GET, DELETE, POST), `/job/submit`.
//! - [`nodes`]: `/slurm/vX/nodes`, `/node/{node_name}`, `/partitions`,
//!   `/partition/{partition_name}`.
//! - [`diag`]: the statistics, `/slurm/vX/diag`.
//! - [`v38`]: the same families for v0.0.38 (Slurm 22.05's shapes).
//! - [`slurmdb`]: the accounting endpoints, `/slurmdb/vX/` (GET), every version.
//!
//! [`jobs`], [`nodes`] and [`diag`] serve the data_parser versions (v0.0.41–v0.0.44); their
//! objects are `flotilla_rest::dp`'s. [`common`] holds what they share.
//! - [`fleet`]: the fleet's own `/flotilla/v1` (jobs, deployments, topology, alerts).

pub mod common;
pub mod diag;
pub mod fleet;
pub mod health;
pub mod jobs;
pub mod nodes;
pub mod openapi;
pub mod ping;
pub mod v38;
pub mod slurmdb;
pub mod resv;
pub mod shares;

use crate::app::Shared;
use axum::Router;
use flotilla_rest::Spec;

/// Every route.
pub fn routes() -> Router<Shared> {
    Router::new()
        .merge(openapi::routes())
        .merge(ping::routes())
        .merge(jobs::routes())
        .merge(nodes::routes())
        .merge(diag::routes())
        .merge(v38::routes())
        .merge(slurmdb::routes())
        .merge(fleet::routes())
        .merge(health::routes())
        .merge(resv::routes())
        .merge(shares::routes())
}

/// The spec of every version and family served.
pub fn spec() -> Spec {
    let mut s = Spec::default();
    s.merge(ping::spec());
    s.merge(jobs::spec());
    s.merge(nodes::spec());
    s.merge(diag::spec());
    s.merge(v38::spec());
    s.merge(slurmdb::spec());
    s.merge(fleet::spec());
    s.merge(resv::spec());
    s.merge(shares::spec());
    s
}

#[cfg(test)]
mod tests {
    use flotilla_rest::schema::Schema;

    /// Every `$ref` of every operation resolves, and every component validates the answer
    /// shape it names (an empty answer with one error, as failures are sent).
    #[test]
    fn the_routes_do_not_overlap() {
        // axum panics on a path registered twice (`job/submit` beside `job/{job_id}` is fine).
        let _ = super::routes();
    }

    #[test]
    fn families_that_share_a_component_define_it_alike() {
        let specs = [super::ping::spec(), super::jobs::spec(), super::nodes::spec(), super::diag::spec(), super::v38::spec(), super::slurmdb::spec(), super::fleet::spec()];
        let mut seen: std::collections::BTreeMap<&str, &Schema> = std::collections::BTreeMap::new();
        for s in &specs {
            for n in s.components.names() {
                let def = s.components.get(n).unwrap();
                if let Some(other) = seen.insert(n, def) {
                    assert_eq!(other, def, "{n} is defined two ways");
                }
            }
        }
    }

    #[test]
    fn the_spec_is_closed_and_error_answers_validate() {
        let s = super::spec();
        for op in &s.operations {
            let Schema::Ref(name) = &op.response else { panic!("{} answers an inline schema", op.operation_id) };
            assert!(s.components.get(name).is_some(), "{}: {name} undefined", op.operation_id);
        }
        let doc = s.to_openapi("t", "v");
        assert!(doc["paths"]["/slurm/v0.0.42/job/{job_id}"]["delete"].is_object());
        assert!(doc["components"]["schemas"]["v0.0.42_job_info"].is_object());
        assert!(doc["components"]["schemas"]["v0.0.41_openapi_job_info_resp"].is_object());
        assert!(doc["components"]["schemas"].get("v0.0.41_job_info").is_none());
        // Every `$ref` in the document names a schema it defines.
        let text = doc.to_string();
        for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = &part[..part.find('"').unwrap()];
            assert!(doc["components"]["schemas"].get(name).is_some(), "dangling $ref {name}");
        }
    }
}
