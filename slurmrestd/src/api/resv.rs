//! `GET /slurm/vX/reservations`, `/reservation/{reservation_name}` and `/licenses`, every
//! version (v0.0.38 and v0.0.41–v0.0.44).
//!
//! Flotilla has no advance reservations (`scontrol create reservation` is not built) and no
//! licenses (`Licenses=` is not built), so both lists are always empty, as Slurm answers with
//! none defined (the 22.05.8 recordings `goldens-rest/v0.0.38/{reservations,licenses}.json`).
//! A named reservation is therefore never found:
//!
//! - data_parser versions: Slurm 25.11's `openapi/slurmctld` `reservations.c`
//!   (`_get_single_reservation`) answers an unknown name with `ESLURM_REST_INVALID_QUERY`
//!   "Unable to find reservation NAME" (status 422 here, `flotilla_rest::dp::http_status`).
//!   (With no reservation at all 25.11 answers error number 0 "Unable to query
//!   reservations"; Flotilla gives the unknown-name error, which says what went wrong.)
//! - v0.0.38: 22.05's `openapi/v0.0.38` `reservations.c` (`_op_handler_reservations`)
//!   answers `ESLURM_RESERVATION_INVALID` (status 500, as 22.05 answers every such error).
//!
//! `update_time` (reservations) is read as a number and refused otherwise
//! (`ESLURM_REST_INVALID_QUERY`); at or after the controller's start (when its reservations,
//! none, last changed) the answer is 304 Not Modified without a body, in every version.
//!
//! The item schemas (`v0.0.4x_reservation_info`, `v0.0.4x_license`, `v0.0.38_reservation`,
//! `v0.0.38_license`) are the `slurmrestapi` 25.11.4 / `openapi-slurm-0-0-38-client` models'
//! fields; no item is ever sent.

use super::common::{answer, error, only_keys, op, path_param, query_pairs, unchanged, update_time};
use crate::app::{both, version_of, Authed, Shared};
use crate::reply::Reply;
use axum::extract::{Path, RawQuery, State};
use axum::http::Uri;
use axum::routing::get;
use axum::Router;
use flotilla_rest::dp::{self, name, no_val, Width, ESLURM_REST_INVALID_QUERY, VERSIONS};
use flotilla_rest::schema::{array, opt, req, Components, Field, IntFormat, Method, Schema};
use flotilla_rest::{ApiVersion, RestError, Spec};
use serde_json::{json, Value};

/// `ESLURM_RESERVATION_INVALID` (`slurm_errno.h`).
pub const ESLURM_RESERVATION_INVALID: i32 = 2053;

const V38: ApiVersion = ApiVersion::V0038;

fn i32_() -> Schema {
    Schema::Int(IntFormat::I32)
}

fn i64_() -> Schema {
    Schema::Int(IntFormat::I64)
}

/// One reservation of `v` (`v0.0.4x_reservation_info`; v0.0.41's inline item).
fn reservation_schema(v: ApiVersion) -> Schema {
    let s = Schema::Str;
    let (start, end, watts, count) = if v == V38 {
        (i64_(), i64_(), i64_(), i64_())
    } else {
        (no_val(v, Width::U64), no_val(v, Width::U64), no_val(v, Width::U32), i32_())
    };
    let mut f = vec![
        opt("accounts", s.clone()),
        opt("burst_buffer", s.clone()),
        opt("core_count", count.clone()),
    ];
    if v == V38 {
        f.push(opt("core_spec_cnt", i64_()));
    }
    f.extend([
        opt("end_time", end),
        opt("features", s.clone()),
        opt("flags", array(Schema::Str)),
        opt("groups", s.clone()),
        opt("licenses", s.clone()),
        opt("max_start_delay", count.clone()),
        opt("name", s.clone()),
        opt("node_count", count),
        opt("node_list", s.clone()),
        opt("partition", s.clone()),
        opt("start_time", start),
        opt("watts", watts),
        opt("tres", s.clone()),
        opt("users", s),
    ]);
    Schema::Object(f)
}

/// One license of `v` (`v0.0.4x_license`; Slurm's capitalised keys).
fn license_schema(v: ApiVersion) -> Schema {
    let n = if v == V38 { i64_() } else { i32_() };
    let mut f = vec![
        opt("LicenseName", Schema::Str),
        opt("Total", n.clone()),
        opt("Used", n.clone()),
        opt("Free", n.clone()),
        opt("Remote", Schema::Bool),
        opt("Reserved", n.clone()),
    ];
    if v != V38 {
        f.extend([opt("LastConsumed", n.clone()), opt("LastDeficit", n), opt("LastUpdate", i64_())]);
    }
    Schema::Object(f)
}

/// The answers' component names: (reservations, licenses).
pub fn response_names(v: ApiVersion) -> (&'static str, &'static str) {
    if v == V38 {
        return ("v0.0.38_reservations_response", "v0.0.38_licenses");
    }
    (name(v, "openapi_reservation_resp"), name(v, "openapi_licenses_resp"))
}

/// Adds the answers' schemas of `v` to `c`; answers their `$ref`s (reservations, licenses).
pub fn add_responses(v: ApiVersion, c: &mut Components) -> (Schema, Schema) {
    let (rn, ln) = response_names(v);
    let with = |mut env: Vec<Field>, extra: Vec<Field>| {
        let mut f = extra;
        f.append(&mut env);
        Schema::Object(f)
    };
    if v == V38 {
        let (m, e, _) = flotilla_rest::meta::add_schemas(v, c);
        c.add("v0.0.38_reservation", reservation_schema(v));
        c.add("v0.0.38_license", license_schema(v));
        let env = vec![opt("meta", Schema::Ref(m)), opt("errors", array(Schema::Ref(e)))];
        c.add(rn, with(env.clone(), vec![opt("reservations", array(Schema::Ref("v0.0.38_reservation")))]));
        c.add(ln, with(env, vec![opt("licenses", array(Schema::Ref("v0.0.38_license")))]));
        return (Schema::Ref(rn), Schema::Ref(ln));
    }
    dp::add_common(v, c);
    let env = dp::envelope_fields(v, c);
    let (mut r, mut l) = (reservation_schema(v), license_schema(v));
    if v != ApiVersion::V0041 {
        c.add(name(v, "reservation_info"), r);
        c.add(name(v, "license"), l);
        r = Schema::Ref(name(v, "reservation_info"));
        l = Schema::Ref(name(v, "license"));
    }
    let last = || req("last_update", no_val(v, Width::U64));
    c.add(rn, with(env.clone(), vec![req("reservations", array(r)), last()]));
    c.add(ln, with(env, vec![req("licenses", array(l)), last()]));
    (Schema::Ref(rn), Schema::Ref(ln))
}

/// The (empty) reservations answer's own keys in `v`.
fn reservations_body(v: ApiVersion) -> Value {
    if v == V38 {
        return json!({"reservations": []});
    }
    json!({"reservations": [], "last_update": dp::set(super::common::now())})
}

/// The (empty) licenses answer's own keys in `v`.
fn licenses_body(v: ApiVersion) -> Value {
    if v == V38 {
        return json!({"licenses": []});
    }
    json!({"licenses": [], "last_update": dp::set(super::common::now())})
}

/// `update_time` of a query, refused when it is not a number.
fn check_query(v: ApiVersion, raw: Option<&str>, source: &str) -> (Result<(), RestError>, Vec<flotilla_rest::RestWarning>) {
    let q = query_pairs(raw);
    let warns = if v == V38 { Vec::new() } else { only_keys(&q, &["update_time"], source) };
    if let Some((_, t)) = q.iter().find(|(k, _)| k == "update_time") {
        if t.parse::<i64>().is_err() {
            let desc = format!("Rejecting request. Failure parsing query: update_time {t:?}");
            return (Err(error(ESLURM_REST_INVALID_QUERY, desc, source)), warns);
        }
    }
    (Ok(()), warns)
}

async fn get_reservations(State(st): State<Shared>, a: Authed, uri: Uri, RawQuery(raw): RawQuery) -> Reply {
    let v = version_of(uri.path());
    // Nothing changed since update_time: 304 (Flotilla has no reservations: they last
    // changed when the controller started).
    if unchanged(&st, &a, update_time(&query_pairs(raw.as_deref())), |u| u.reservations).await {
        return Reply::not_modified();
    }
    match check_query(v, raw.as_deref(), "op_handler_reservations") {
        (Ok(()), w) => answer(&st, &a, v, reservations_body(v), &[], &w),
        (Err(e), w) => answer(&st, &a, v, reservations_body(v), &[e], &w),
    }
}

async fn get_reservation(State(st): State<Shared>, a: Authed, uri: Uri, Path(n): Path<String>, RawQuery(raw): RawQuery) -> Reply {
    let v = version_of(uri.path());
    if unchanged(&st, &a, update_time(&query_pairs(raw.as_deref())), |u| u.reservations).await {
        return Reply::not_modified();
    }
    let (q, w) = check_query(v, raw.as_deref(), "_get_single_reservation");
    let e = match q {
        Err(e) => e,
        Ok(()) if v == V38 => RestError {
            error_number: ESLURM_RESERVATION_INVALID,
            error: "Requested reservation is invalid".into(),
            description: format!("Unable to find reservation {n}"),
            source: "slurm_load_reservations".into(),
        },
        Ok(()) => error(ESLURM_REST_INVALID_QUERY, format!("Unable to find reservation {n}"), "_get_single_reservation"),
    };
    answer(&st, &a, v, reservations_body(v), &[e], &w)
}

async fn get_licenses(State(st): State<Shared>, a: Authed, uri: Uri) -> Reply {
    let v = version_of(uri.path());
    answer(&st, &a, v, licenses_body(v), &[], &[])
}

fn all_versions() -> impl Iterator<Item = ApiVersion> {
    std::iter::once(V38).chain(VERSIONS)
}

/// The routes, every version.
pub fn routes() -> Router<Shared> {
    let mut r = Router::new();
    for v in all_versions() {
        let p = |s: &str| format!("/slurm/{}/{s}", v.as_str());
        r = both(r, &p("reservations/"), get(get_reservations));
        r = both(r, &p("reservation/{reservation_name}"), get(get_reservation));
        r = both(r, &p("licenses/"), get(get_licenses));
    }
    r
}

/// The spec, every version.
pub fn spec() -> Spec {
    let mut s = Spec::default();
    for v in all_versions() {
        let mut c = Components::default();
        let (rr, lr) = add_responses(v, &mut c);
        let upd = || {
            super::common::query_param("update_time", i64_(), "Query reservations updated more recently than this time (UNIX timestamp)")
        };
        let ops = vec![
            op(v, Method::Get, "reservations/", "get_reservations", "get all reservation info", vec![upd()], None, rr.clone()),
            op(
                v,
                Method::Get,
                "reservation/{reservation_name}",
                "get_reservation",
                "get reservation info",
                vec![path_param("reservation_name", "Reservation name"), upd()],
                None,
                rr,
            ),
            op(v, Method::Get, "licenses/", "get_licenses", "get all Slurm tracked license info", vec![], None, lr),
        ];
        s.merge(Spec { operations: ops, components: c });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_answers_and_errors_validate_in_every_version() {
        for v in all_versions() {
            let mut c = Components::default();
            let (rr, lr) = add_responses(v, &mut c);
            let env = |b| flotilla_rest::meta::envelope(v, &flotilla_rest::ClientInfo::default(), "c", b, &[], &[]);
            c.validate(&env(reservations_body(v)), &rr).unwrap();
            c.validate(&env(licenses_body(v)), &lr).unwrap();
            let e = error(ESLURM_REST_INVALID_QUERY, "x", "y");
            let d = flotilla_rest::meta::envelope(v, &flotilla_rest::ClientInfo::default(), "c", reservations_body(v), &[e], &[]);
            c.validate(&d, &rr).unwrap();
        }
    }
}
