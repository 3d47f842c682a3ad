//! `GET /slurm/vX/diag` for the data_parser versions (v0.0.41–v0.0.44): the controller's
//! statistics (`sdiag`), as Slurm 25.11's `openapi/slurmctld` `diag.c` (`slurm_get_statistics`);
//! `rpcs_by_user` names each uid from the password database.

use super::common::{answer, ctl_error, op, user_name};
use crate::app::{both, version_of, Authed, Shared};
use crate::reply::Reply;
use axum::extract::State;
use axum::http::Uri;
use axum::routing::get;
use axum::Router;
use flotilla_proto::diag::Diag;
use flotilla_proto::{Request, Response};
use flotilla_rest::dp::diag::{self, Ctx};
use flotilla_rest::dp::VERSIONS;
use flotilla_rest::schema::Method;
use flotilla_rest::{Components, Spec};
use serde_json::json;

async fn get_diag(State(st): State<Shared>, a: Authed, uri: Uri) -> Reply {
    let v = version_of(uri.path());
    match st.ctl.call(&a.caller, Request::Diag).await {
        Ok(Response::Diag(d)) => {
            let user_names = d.rpc_users.iter().map(|u| (u.uid, user_name(u.uid))).collect();
            answer(&st, &a, v, diag::response(v, &d, &Ctx { user_names }), &[], &[])
        }
        Ok(_) => answer(&st, &a, v, diag::response(v, &Diag::default(), &Ctx::default()), &[], &[]),
        Err(e) => {
            let mut err = ctl_error(&e, "slurm_get_statistics()");
            if e.messages.is_empty() {
                err.description = "request failed".into();
            }
            answer(&st, &a, v, json!({"statistics": {}}), &[err], &[])
        }
    }
}

/// The routes, every data_parser version.
pub fn routes() -> Router<Shared> {
    let mut r = Router::new();
    for v in VERSIONS {
        r = both(r, &format!("/slurm/{}/diag/", v.as_str()), get(get_diag));
    }
    r
}

/// The spec, every data_parser version.
pub fn spec() -> Spec {
    let mut s = Spec::default();
    for v in VERSIONS {
        let mut c = Components::default();
        let resp = diag::add_response(v, &mut c);
        let ops = vec![op(v, Method::Get, "diag/", "get_diag", "get diagnostics", vec![], None, resp)];
        s.merge(Spec { operations: ops, components: c });
    }
    s
}
