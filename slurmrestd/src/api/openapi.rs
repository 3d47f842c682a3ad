//! `GET /openapi/v3` (also `/openapi`, `/openapi.json`, `/openapi.yaml`): the OpenAPI 3
//! document of every version served, built once from the families' specs
//! ([`crate::api::spec`]). No authentication, as Slurm's.

use crate::app::Shared;
use crate::reply::Reply;
use axum::http::{header, HeaderValue};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use serde_json::Value;
use std::sync::OnceLock;

/// The document (built on first use).
pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let (major, minor, micro) = flotilla_rest::version::SLURM_RELEASE;
        crate::api::spec().to_openapi(
            "Slurm REST API",
            &format!(
                "Slurm-{major}.{minor:02}.{micro}&openapi/slurmctld&openapi/slurmdbd&flotilla"
            ),
        )
    })
}

async fn json_doc() -> Reply {
    Reply::ok(document().clone())
}

/// JSON is YAML 1.2: the YAML form is the same document.
async fn yaml_doc() -> axum::response::Response {
    let mut r = Reply::ok(document().clone()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-yaml"),
    );
    r
}

/// The routes.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/openapi/v3", get(json_doc))
        .route("/openapi", get(json_doc))
        .route("/openapi.json", get(json_doc))
        .route("/openapi.yaml", get(yaml_doc))
}
