//! `GET /slurm/vX/shares` (v0.0.41–v0.0.44; v0.0.38 has none): the fair-share tree as
//! `sshare` reads it (`Request::QueryShares`), in Slurm 25.11's `openapi/slurmctld`
//! `shares.c` shape (`OPENAPI_SHARES_RESP`: `shares: {shares: [ASSOC_SHARES_OBJ_WRAP]}`).
//!
//! Query: `accounts`, `users` (comma-separated; empty: all), as `shares.c`'s
//! `OPENAPI_SHARES_REQ_MSG`; another key is warned about and ignored. Each association:
//! `name` is its user (a user association) or account, `type` `USER` or `ASSOCIATION`,
//! `shares` the raw shares (unset for root, and for `Fairshare=parent`, which Slurm marks
//! with a sentinel Flotilla does not send), `usage` the raw usage rounded to an integer,
//! `fairshare.factor` and `.level` unset where `sshare` prints blank. `tres` and
//! `total_shares` are not tracked and left out (both optional).

use super::common::{answer, ctl_error, only_keys, op, query_pairs, query_param};
use crate::app::{both, version_of, Authed, Shared};
use crate::reply::Reply;
use axum::extract::{RawQuery, State};
use axum::http::Uri;
use axum::routing::get;
use axum::Router;
use flotilla_proto::share::{ShareQuery, ShareRow};
use flotilla_proto::{Request, Response};
use flotilla_rest::dp::{self, name, no_val, unset, Width, VERSIONS};
use flotilla_rest::schema::{array, opt, req, Components, IntFormat, Method, Schema};
use flotilla_rest::{ApiVersion, Spec};
use serde_json::{json, Value};

const V41: ApiVersion = ApiVersion::V0041;

/// `float64_no_val_struct` of `v` (inline in v0.0.41), as `flotilla_rest::dp::db` defines it.
fn float_no_val(v: ApiVersion, c: &mut Components) -> Schema {
    let f = Schema::Object(vec![opt("set", Schema::Bool), opt("infinite", Schema::Bool), opt("number", Schema::Num)]);
    named(v, c, "float64_no_val_struct", f)
}

fn named(v: ApiVersion, c: &mut Components, base: &str, s: Schema) -> Schema {
    if v == V41 {
        return s;
    }
    let n = name(v, base);
    c.add(n, s);
    Schema::Ref(n)
}

/// A float as Slurm's `FLOAT64_NO_VAL` dumps it: infinite (a level fair-share of an
/// association without usage) as `infinite`, NaN as unset.
fn fset(x: f64) -> Value {
    if x.is_infinite() {
        return dp::infinite();
    }
    if x.is_nan() {
        return unset();
    }
    json!({"set": true, "infinite": false, "number": x})
}

fn fmaybe(x: Option<f64>) -> Value {
    x.map_or_else(unset, fset)
}

/// One association's schema (`v0.0.4x_assoc_shares_obj_wrap`).
fn share_schema(v: ApiVersion, c: &mut Components) -> Schema {
    let f = float_no_val(v, c);
    // v0.0.41 (24.05): the fair-share factors are plain numbers.
    let ff = if v == V41 { Schema::Num } else { f.clone() };
    let fair = named(v, c, "assoc_shares_obj_wrap_fairshare", Schema::Object(vec![opt("factor", ff.clone()), opt("level", ff)]));
    let eff = if v == V41 { Schema::Num } else { f.clone() };
    let s = Schema::Object(vec![
        opt("id", Schema::Int(IntFormat::I32)),
        opt("cluster", Schema::Str),
        opt("name", Schema::Str),
        opt("parent", Schema::Str),
        opt("partition", Schema::Str),
        opt("shares_normalized", f.clone()),
        opt("shares", no_val(v, Width::U32)),
        opt("effective_usage", eff),
        opt("usage_normalized", f),
        opt("usage", Schema::Int(IntFormat::I64)),
        opt("fairshare", fair),
        opt("type", array(Schema::Enum(vec!["USER", "ASSOCIATION"]))),
    ]);
    named(v, c, "assoc_shares_obj_wrap", s)
}

/// `fairshare` of `v`: `{factor, level}`, each a `FLOAT64_NO_VAL`; v0.0.41's plain numbers
/// leave out what is unset or infinite.
fn fairshare(v: ApiVersion, r: &ShareRow) -> Value {
    if v != V41 {
        return json!({"factor": fmaybe(r.fairshare), "level": fmaybe(r.level_fs)});
    }
    let mut m = serde_json::Map::new();
    for (k, x) in [("factor", r.fairshare), ("level", r.level_fs)] {
        if let Some(x) = x.filter(|x| x.is_finite()) {
            m.insert(k.into(), json!(x));
        }
    }
    Value::Object(m)
}

/// One association's JSON in `v`.
fn share_value(v: ApiVersion, r: &ShareRow, cluster: &str) -> Value {
    let shares = match r.raw_shares {
        Some(n) if n != u32::MAX => dp::set(n),
        _ => unset(),
    };
    json!({
        "id": r.id,
        "cluster": if r.cluster.is_empty() { cluster } else { &r.cluster },
        "name": r.user.as_deref().unwrap_or(&r.account),
        "parent": r.parent.as_deref().unwrap_or(""),
        "partition": r.partition.as_deref().unwrap_or(""),
        "shares_normalized": fset(r.norm_shares),
        "shares": shares,
        "effective_usage": if v == V41 { json!(if r.effectv_usage.is_finite() { r.effectv_usage } else { 0.0 }) } else { fset(r.effectv_usage) },
        "usage_normalized": fmaybe(r.norm_usage),
        "usage": r.raw_usage.round() as i64,
        "fairshare": fairshare(v, r),
        "type": [if r.user.is_some() { "USER" } else { "ASSOCIATION" }],
    })
}

/// The answer's component name (`v0.0.42_openapi_shares_resp`).
pub fn response_name(v: ApiVersion) -> &'static str {
    name(v, "openapi_shares_resp")
}

/// Adds the answer's schema to `c`; answers its `$ref`.
pub fn add_response(v: ApiVersion, c: &mut Components) -> Schema {
    dp::add_common(v, c);
    let item = share_schema(v, c);
    let msg = named(v, c, "shares_resp_msg", Schema::Object(vec![opt("shares", array(item)), opt("total_shares", Schema::Int(IntFormat::I64))]));
    let mut f = vec![req("shares", msg)];
    f.extend(dp::envelope_fields(v, c));
    c.add(response_name(v), Schema::Object(f));
    Schema::Ref(response_name(v))
}

/// The answer's own key: `shares` (`cluster`: a row's cluster when it names none).
pub fn response(v: ApiVersion, rows: &[ShareRow], cluster: &str) -> Value {
    json!({"shares": {"shares": rows.iter().map(|r| share_value(v, r, cluster)).collect::<Vec<_>>()}})
}

fn list(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(str::to_string).collect()
}

async fn get_shares(State(st): State<Shared>, a: Authed, uri: Uri, RawQuery(raw): RawQuery) -> Reply {
    let v = version_of(uri.path());
    let q = query_pairs(raw.as_deref());
    let warns = only_keys(&q, &["accounts", "users"], "op_handler_shares");
    let mut sq = ShareQuery::default();
    for (k, x) in &q {
        match k.as_str() {
            "accounts" => sq.accounts.extend(list(x)),
            "users" => sq.users.extend(list(x)),
            _ => {}
        }
    }
    match st.ctl.call(&a.caller, Request::QueryShares(sq)).await {
        Ok(Response::Shares(rows)) => answer(&st, &a, v, response(v, &rows, &st.cluster), &[], &warns),
        Ok(_) => answer(&st, &a, v, response(v, &[], &st.cluster), &[], &warns),
        Err(e) => answer(&st, &a, v, response(v, &[], &st.cluster), &[ctl_error(&e, "slurm_associations_get_shares")], &warns),
    }
}

/// The routes, every data_parser version.
pub fn routes() -> Router<Shared> {
    let mut r = Router::new();
    for v in VERSIONS {
        r = both(r, &format!("/slurm/{}/shares", v.as_str()), get(get_shares));
    }
    r
}

/// The spec, every data_parser version.
pub fn spec() -> Spec {
    let mut s = Spec::default();
    for v in VERSIONS {
        let mut c = Components::default();
        let resp = add_response(v, &mut c);
        let params = vec![
            query_param("accounts", Schema::Str, "Accounts to query"),
            query_param("users", Schema::Str, "Users to query"),
        ];
        let ops = vec![op(v, Method::Get, "shares", "get_shares", "get fairshare info", params, None, resp)];
        s.merge(Spec { operations: ops, components: c });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The components resv and shares name are defined as the other families define them
    /// (`api::tests::families_that_share_a_component_define_it_alike` for the new ones).
    #[test]
    fn shared_components_agree_with_the_other_families() {
        use super::super::{diag, fleet, jobs, nodes, ping, resv, slurmdb, v38};
        let others = [ping::spec(), jobs::spec(), nodes::spec(), diag::spec(), v38::spec(), slurmdb::spec(), fleet::spec()];
        let mut n = 0;
        for ours in [spec(), resv::spec()] {
            for name in ours.components.names() {
                for o in &others {
                    if let Some(def) = o.components.get(name) {
                        assert_eq!(def, ours.components.get(name).unwrap(), "{name} is defined two ways");
                        n += 1;
                    }
                }
            }
        }
        assert!(n > 0, "no shared component was compared");
    }

    #[test]
    fn shares_validate_in_every_version() {
        let root = ShareRow { id: 1, cluster: "c".into(), account: "root".into(), norm_shares: 1.0, ..ShareRow::default() };
        let user = ShareRow {
            id: 2,
            cluster: "c".into(),
            account: "research".into(),
            parent: Some("research".into()),
            user: Some("alice".into()),
            raw_shares: Some(10),
            norm_shares: 0.5,
            raw_usage: 12.6,
            norm_usage: Some(0.25),
            effectv_usage: 0.25,
            fairshare: Some(0.75),
            level_fs: Some(f64::INFINITY),
            ..ShareRow::default()
        };
        for v in VERSIONS {
            let mut c = Components::default();
            let r = add_response(v, &mut c);
            let doc = flotilla_rest::meta::envelope(v, &flotilla_rest::ClientInfo::default(), "c", response(v, &[root.clone(), user.clone()], "c"), &[], &[]);
            c.validate(&doc, &r).unwrap();
            let u = &doc["shares"]["shares"][1];
            assert_eq!((u["name"].as_str(), &u["type"], u["usage"].as_i64()), (Some("alice"), &json!(["USER"]), Some(13)));
            assert_eq!(u["shares"]["number"], 10);
            if v == V41 {
                assert_eq!(u["fairshare"], json!({"factor": 0.75}));
            } else {
                assert_eq!(u["fairshare"]["level"], dp::infinite());
            }
            assert_eq!(doc["shares"]["shares"][0]["shares"]["set"], false);
            assert_eq!(doc["shares"]["shares"][0]["type"], json!(["ASSOCIATION"]));
        }
    }
}
