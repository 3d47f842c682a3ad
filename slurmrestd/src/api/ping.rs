//! `GET /slurm/vX/ping`: is the controller up (Slurm's `slurm_ping` per `SlurmctldHost`).
//!
//! v0.0.38: `pings[] {hostname, ping: "UP"|"DOWN", status, mode}`; the data_parser versions:
//! `pings[] {hostname, pinged, latency (µs), mode_ok, responding, primary}`.

use crate::app::{both, Authed, Shared};
use crate::reply::Reply;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::routing::get;
use axum::Router;
use flotilla_proto::Request;
use flotilla_rest::schema::{array, opt, req, IntFormat, Method, Operation, Schema};
use flotilla_rest::{ApiVersion, Components, Spec};
use serde_json::json;
use std::time::Instant;

fn response_name(v: ApiVersion) -> &'static str {
    match v {
        ApiVersion::V0038 => "v0.0.38_pings",
        ApiVersion::V0041 => "v0.0.41_openapi_ping_array_resp",
        ApiVersion::V0042 => "v0.0.42_openapi_ping_array_resp",
        ApiVersion::V0043 => "v0.0.43_openapi_ping_array_resp",
        ApiVersion::V0044 => "v0.0.44_openapi_ping_array_resp",
    }
}

/// A controller's mode by its place in slurm.conf (Slurm 22.05 v0.0.38 `_op_handler_ping`,
/// 25.11 data_parser `CONTROLLER_PING_MODE`): `primary`, `backup` when there are two, else
/// `backup<i>`.
fn mode(i: usize, count: usize) -> String {
    match i {
        0 => "primary".into(),
        1 if count == 2 => "backup".into(),
        i => format!("backup{i}"),
    }
}

/// Every `SlurmctldHost` pinged in slurm.conf's order (Slurm's `ping_all_controllers`): a
/// standby answers pings, so it is `UP` too.
async fn ping(State(st): State<Shared>, a: Authed, uri: Uri) -> Reply {
    let v = crate::app::version_of(uri.path());
    let hosts = st.ctl.target().tcp.clone();
    let mut pings = Vec::with_capacity(hosts.len());
    for (i, (host, _)) in hosts.iter().enumerate() {
        let t0 = Instant::now();
        let r = st.ctl.call_at(i, &a.caller, Request::Ping).await;
        let up = r.is_ok();
        // A controller that answers with an error is up; only a refused caller is not told so.
        if let Err(e) = &r {
            if crate::reply::status_of(e) == StatusCode::UNAUTHORIZED {
                let (client, cluster) = (&a.client, &st.cluster);
                return Reply::slurm_error(StatusCode::UNAUTHORIZED, v, client, cluster, e, "slurm_ping");
            }
        }
        pings.push(if v.is_data_parser() {
            json!({
                "hostname": host,
                "pinged": if up { "UP" } else { "DOWN" },
                "latency": t0.elapsed().as_micros() as i64,
                "mode_ok": up,
                "responding": up,
                "primary": i == 0,
            })
        } else {
            json!({"hostname": host, "ping": if up { "UP" } else { "DOWN" }, "status": if up { 0 } else { -1 }, "mode": mode(i, hosts.len())})
        });
    }
    Reply::enveloped(StatusCode::OK, v, &a.client, &st.cluster, json!({"pings": pings}), &[], &[])
}

/// The routes, every version.
pub fn routes() -> Router<Shared> {
    let mut r = Router::new();
    for v in ApiVersion::ALL {
        r = both(r, &format!("/slurm/{}/ping/", v.as_str()), get(ping));
    }
    r
}

/// The spec, every version.
pub fn spec() -> Spec {
    let mut s = Spec::default();
    for v in ApiVersion::ALL {
        let mut c = Components::default();
        let (meta, err, warn) = flotilla_rest::meta::add_schemas(v, &mut c);
        let ping = if v.is_data_parser() {
            Schema::Object(vec![
                opt("hostname", Schema::Str),
                opt("pinged", Schema::Str),
                opt("latency", Schema::Int(IntFormat::I64)),
                opt("mode_ok", Schema::Bool),
                opt("responding", Schema::Bool),
                opt("primary", Schema::Bool),
            ])
        } else {
            Schema::Object(vec![
                opt("hostname", Schema::Str),
                opt("ping", Schema::Enum(vec!["UP", "DOWN"])),
                opt("status", Schema::Int(IntFormat::I32)),
                opt("mode", Schema::Str),
            ])
        };
        let mut fields = vec![
            opt("meta", Schema::Ref(meta)),
            opt("errors", array(Schema::Ref(err))),
        ];
        if let Some(w) = warn {
            fields.push(opt("warnings", array(Schema::Ref(w))));
        }
        fields.push(req("pings", array(ping)));
        c.add(response_name(v), Schema::Object(fields));
        s.merge(Spec {
            operations: vec![Operation {
                method: Method::Get,
                path: format!("/slurm/{}/ping/", v.as_str()),
                operation_id: format!("slurm_{}_get_ping", v.short()),
                summary: "ping test",
                tag: "slurm",
                params: vec![],
                body: None,
                response: Schema::Ref(response_name(v)),
            }],
            components: c,
        });
    }
    s
}
