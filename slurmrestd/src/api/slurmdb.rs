//! The accounting endpoints, `/slurmdb/vX/` (GET only), for the data_parser versions
//! (v0.0.41–v0.0.44, Slurm 25.11's `openapi/slurmdbd`) and v0.0.38 (22.05's
//! `openapi/dbv0.0.38`):
//!
//! - `jobs/` (query `users`, `account`, `partition`, `job_name`, `state`, `qos`, `node`,
//!   `start_time`, `end_time`, `show_duplicates`; CSV lists, times in seconds since the
//!   epoch): the controller's accounting records (`sacct`'s, [`Request::QueryAcct`]),
//!   every time when no `start_time`/`end_time` is given (Slurm's `slurmdb_jobs_get` without
//!   usage bounds). Slurm's other query keys are taken but not honoured, each with a
//!   warning; an unknown key is ignored with Slurm's warning.
//! - `job/{job_id}`: one job, its earlier runs too (`JOBCOND_FLAG_DUP`).
//! - `accounts/`, `account/{account_name}`, `users/`, `user/{name}`, `associations/`
//!   (query `account`, `user`, `partition`), `qos/`, `qos/{qos}`, `tres/`, `config`: the
//!   accounting rows (`sacctmgr show`'s, [`Request::AcctMgrShow`]).
//! - `diag/`: the controller's RPC statistics ([`Request::Diag`]).
//!
//! Nothing found is a success with Slurm's warning (`db_query_list`: "slurmdb_jobs_get()
//! found nothing", at the dumping function) in the data_parser versions; v0.0.38 answers
//! as 22.05 (`ESLURM_REST_EMPTY_RESULT` 9003 with status 200 for a job; for the rest an
//! empty list). `meta.plugin` names the slurmdbd plugin.

use super::common::{answer, ctl_error, error, now, only_keys, path_param, query_param, query_pairs, user, user_name, warning};
use crate::app::{both, version_of, Authed, Shared};
use crate::reply::Reply;
use axum::extract::{Path, RawQuery, State};
use axum::http::{StatusCode, Uri};
use axum::routing::get;
use axum::Router;
use flotilla_proto::acct::{AcctJob, AcctJobRef, AcctQuery};
use flotilla_proto::acctmgr::AcctData;
use flotilla_proto::{Request, Response};
use flotilla_rest::dp::db::{self, Ctx, Kind};
use flotilla_rest::dp::{ESLURM_REST_INVALID_QUERY, VERSIONS};
use flotilla_rest::schema::{Method, Operation, Param, Schema};
use flotilla_rest::{ApiVersion, Components, RestError, RestWarning, Spec};
use serde_json::{json, Value};

/// An answer of the slurmdbd plugin: [`answer`] with `meta.plugin` naming
/// `openapi/slurmdbd` (v0.0.38: `openapi/dbv0.0.38`).
fn db_answer(st: &Shared, a: &Authed, v: ApiVersion, body: Value, errs: &[RestError], warns: &[RestWarning]) -> Reply {
    let mut r = answer(st, a, v, body, errs, warns);
    let (t, n) = if v.is_data_parser() {
        ("openapi/slurmdbd", "Slurm OpenAPI slurmdbd")
    } else {
        ("openapi/dbv0.0.38", "Slurm OpenAPI DB v0.0.38")
    };
    if let Some(p) = r.body.get_mut("meta").and_then(|m| m.get_mut("plugin")) {
        p["type"] = json!(t);
        p["name"] = json!(n);
    }
    if !v.is_data_parser() {
        r.body["errors"] = flotilla_rest::v38db::errors(errs);
    }
    r
}

fn group_name(gid: u32) -> String {
    nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
        .ok()
        .flatten()
        .map_or_else(|| gid.to_string(), |g| g.name)
}

/// The context of an answer: names of the jobs' groups and cancellers, the rows.
fn ctx(st: &Shared, jobs: &[AcctJob], data: AcctData) -> Ctx {
    let mut groups: Vec<u32> = jobs.iter().map(|j| j.gid).collect();
    groups.sort_unstable();
    groups.dedup();
    let mut users: Vec<u32> = jobs.iter().filter_map(|j| j.cancelled_by).collect();
    users.sort_unstable();
    users.dedup();
    Ctx {
        cluster: st.cluster.clone(),
        now: now(),
        groups: groups.into_iter().map(|g| (g, group_name(g))).collect(),
        users: users.into_iter().map(|u| (u, user_name(u))).collect(),
        data,
    }
}

/// The keys of `GET jobs/` Slurm's `OPENAPI_SLURMDBD_JOB_PARAM` has that Flotilla honours.
const JOB_KEYS: [&str; 10] =
    ["users", "account", "partition", "job_name", "state", "qos", "node", "start_time", "end_time", "show_duplicates"];

/// Slurm's other keys of the query: taken, not honoured (a warning each).
const JOB_KEYS_IGNORED: [&str; 24] = [
    "association",
    "cluster",
    "constraints",
    "scheduler_unset",
    "scheduled_on_submit",
    "scheduled_by_main",
    "scheduled_by_backfill",
    "job_started",
    "exit_code",
    "skip_steps",
    "disable_truncate_usage_time",
    "whole_hetjob",
    "disable_whole_hetjob",
    "disable_wait_for_result",
    "usage_time_as_submit_time",
    "show_batch_script",
    "show_job_environment",
    "format",
    "groups",
    "reason",
    "reservation",
    "reservation_id",
    "step",
    "wckey",
];

fn csv(s: &str) -> Vec<String> {
    s.split(',').map(str::trim).filter(|w| !w.is_empty()).map(str::to_string).collect()
}

fn bad_query(what: String, source: &str) -> RestError {
    error(ESLURM_REST_INVALID_QUERY, what, source)
}

/// The accounting query of `GET jobs/`'s parameters; `Err` for a value that does not parse
/// (`ESLURM_REST_INVALID_QUERY`, as Slurm's "Rejecting request. Failure parsing query
/// parameters").
fn job_query(q: &[(String, String)], source: &str) -> Result<(AcctQuery, Vec<RestWarning>), RestError> {
    let mut aq = AcctQuery { now: now(), ..AcctQuery::default() };
    let mut warns = Vec::new();
    let time = |k: &str, t: &str| t.trim().parse::<i64>().map_err(|_| bad_query(format!("{k}: {t:?} is not a UNIX timestamp"), source));
    for (k, val) in q {
        match k.as_str() {
            "users" => {
                for u in csv(val) {
                    match user(&u) {
                        Some(w) => aq.uids.push(w.uid),
                        None => return Err(bad_query(format!("users: unknown user {u:?}"), source)),
                    }
                }
            }
            "account" => aq.accounts.extend(csv(val).into_iter().map(|a| a.to_ascii_lowercase())),
            "partition" => aq.partitions.extend(csv(val)),
            "job_name" => aq.names.extend(csv(val)),
            "state" => aq.states.extend(csv(val).into_iter().map(|s| s.to_ascii_uppercase())),
            "qos" => aq.qos.extend(csv(val)),
            "node" => aq.nodes.extend(csv(val)),
            "start_time" => aq.start = Some(time(k, val)?),
            "end_time" => aq.end = Some(time(k, val)?),
            "show_duplicates" => aq.duplicates = !matches!(val.to_ascii_lowercase().as_str(), "false" | "no" | "0"),
            k if JOB_KEYS_IGNORED.contains(&k) => {
                warns.push(warning(format!("Query parameter {k} is not supported by Flotilla and was ignored"), source));
            }
            _ => {}
        }
    }
    let known: Vec<&str> = JOB_KEYS.iter().chain(JOB_KEYS_IGNORED.iter()).copied().collect();
    warns.extend(only_keys(q, &known, source));
    Ok((aq, warns))
}

async fn acct_jobs(st: &Shared, a: &Authed, q: AcctQuery) -> Result<Vec<AcctJob>, RestError> {
    match st.ctl.call(&a.caller, Request::QueryAcct(q)).await {
        Ok(Response::Acct(j)) => Ok(j),
        Ok(_) => Ok(Vec::new()),
        Err(e) => Err(ctl_error(&e, "slurmdb_jobs_get")),
    }
}

async fn acct_data(st: &Shared, a: &Authed, source: &str) -> Result<AcctData, RestError> {
    match st.ctl.call(&a.caller, Request::AcctMgrShow).await {
        Ok(Response::AcctMgrData(d)) => Ok(d),
        Ok(_) => Ok(AcctData::default()),
        Err(e) => Err(ctl_error(&e, source)),
    }
}

fn empty_data() -> AcctData {
    AcctData::default()
}

/// Slurm's warning for an empty result (`db_query_list`).
fn nothing(func: &str, source: &str) -> RestWarning {
    warning(format!("{func}() found nothing"), source)
}

fn jobs_reply(st: &Shared, a: &Authed, v: ApiVersion, r: Result<Vec<AcctJob>, RestError>, mut warns: Vec<RestWarning>) -> Reply {
    match r {
        Ok(j) => {
            if v.is_data_parser() {
                if j.is_empty() {
                    warns.push(nothing("slurmdb_jobs_get", "_dump_jobs"));
                }
                let c = ctx(st, &j, empty_data());
                return db_answer(st, a, v, db::response(v, Kind::Jobs, &j, &c), &[], &warns);
            }
            let c = ctx(st, &j, empty_data());
            let body = flotilla_rest::v38db::jobs_response(&j, &c);
            if j.is_empty() {
                // 22.05: ESLURM_REST_EMPTY_RESULT, yet 200.
                let e = error(flotilla_rest::v38db::ESLURM_REST_EMPTY_RESULT, "Nothing found", "slurmdb_jobs_get");
                let mut r = db_answer(st, a, v, body, &[e], &[]);
                r.status = StatusCode::OK;
                return r;
            }
            db_answer(st, a, v, body, &[], &[])
        }
        Err(e) => {
            let body = if v.is_data_parser() { json!({"jobs": []}) } else { flotilla_rest::v38db::jobs_response(&[], &ctx(st, &[], empty_data())) };
            db_answer(st, a, v, body, &[e], &warns)
        }
    }
}

async fn get_jobs(State(st): State<Shared>, a: Authed, uri: Uri, RawQuery(raw): RawQuery) -> Reply {
    let v = version_of(uri.path());
    let q = query_pairs(raw.as_deref());
    let (aq, warns) = match job_query(&q, "op_handler_jobs") {
        Ok(x) => x,
        Err(e) => return jobs_reply(&st, &a, v, Err(e), Vec::new()),
    };
    let r = acct_jobs(&st, &a, aq).await;
    jobs_reply(&st, &a, v, r, if v.is_data_parser() { warns } else { Vec::new() })
}

/// `123`, `123_4` (an array task), `123.batch` (its job), as Slurm's `SELECTED_STEP`.
fn job_ref(s: &str) -> Option<AcctJobRef> {
    let (head, _step) = s.split_once('.').unwrap_or((s, ""));
    let (id, task) = match head.split_once('_') {
        Some((i, t)) => (i, Some(t.parse::<u32>().ok()?)),
        None => (head, None),
    };
    let job_id = id.parse::<u64>().ok().filter(|n| *n > 0)?;
    Some(AcctJobRef { job_id, task, step: None })
}

async fn get_job(State(st): State<Shared>, a: Authed, uri: Uri, Path(id): Path<String>) -> Reply {
    let v = version_of(uri.path());
    let Some(r) = job_ref(&id) else {
        let e = bad_query(format!("Rejecting request. Failure parsing query parameters: job_id {id:?}"), "op_handler_job");
        return jobs_reply(&st, &a, v, Err(e), Vec::new());
    };
    let q = AcctQuery { jobs: vec![r], duplicates: true, now: now(), ..AcctQuery::default() };
    let r = acct_jobs(&st, &a, q).await;
    jobs_reply(&st, &a, v, r, Vec::new())
}

/// The rows of `kind`, filtered: `name` keeps the one named (accounts, users, QOS: Slurm's
/// `name_list`); `q` the associations' `account`, `user`, `partition`.
fn filter(d: &mut AcctData, kind: Kind, name: Option<&str>, q: &[(String, String)]) {
    if let Some(n) = name {
        let n = n.to_ascii_lowercase();
        match kind {
            Kind::Accounts => d.accounts.retain(|x| x.name.to_ascii_lowercase() == n),
            Kind::Users => d.users.retain(|x| x.name.to_ascii_lowercase() == n),
            Kind::Qos => d.qos.retain(|x| x.name.to_ascii_lowercase() == n),
            _ => {}
        }
    }
    if kind == Kind::Assocs {
        for (k, val) in q {
            let want = csv(&val.to_ascii_lowercase());
            let keep = |x: &str| want.is_empty() || want.iter().any(|w| *w == x.to_ascii_lowercase());
            match k.as_str() {
                "account" => d.assocs.retain(|x| keep(&x.account)),
                "user" => d.assocs.retain(|x| keep(&x.user)),
                "partition" => d.assocs.retain(|x| keep(&x.partition)),
                _ => {}
            }
        }
    }
}

/// (the function Slurm queries with, the function that dumps): for the empty-result warning.
fn funcs(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::Accounts => ("slurmdb_accounts_get", "_dump_accounts"),
        Kind::Users => ("slurmdb_users_get", "_dump_users"),
        Kind::Assocs => ("slurmdb_associations_get", "_dump_assoc_cond"),
        Kind::Qos => ("slurmdb_qos_get", "_op_handler_qos"),
        Kind::Tres => ("slurmdb_tres_get", "op_handler_tres"),
        _ => ("slurmdb_config_get", "op_handler_config"),
    }
}

fn is_empty(d: &AcctData, kind: Kind) -> bool {
    match kind {
        Kind::Accounts => d.accounts.is_empty(),
        Kind::Users => d.users.is_empty(),
        Kind::Assocs => d.assocs.is_empty(),
        Kind::Qos => d.qos.is_empty(),
        _ => false,
    }
}

async fn rows(st: Shared, a: Authed, uri: Uri, kind: Kind, name: Option<String>, raw: Option<String>) -> Reply {
    let v = version_of(uri.path());
    let q = query_pairs(raw.as_deref());
    let (func, source) = funcs(kind);
    let empty = |e: RestError| {
        let body = if v.is_data_parser() {
            db::response(v, kind, &[], &ctx(&st, &[], empty_data()))
        } else {
            flotilla_rest::v38db::response(kind, &ctx(&st, &[], empty_data()))
        };
        db_answer(&st, &a, v, body, &[e], &[])
    };
    let mut d = match acct_data(&st, &a, func).await {
        Ok(d) => d,
        Err(e) => return empty(e),
    };
    filter(&mut d, kind, name.as_deref(), &q);
    let none = is_empty(&d, kind);
    let c = ctx(&st, &[], d);
    if !v.is_data_parser() {
        return db_answer(&st, &a, v, flotilla_rest::v38db::response(kind, &c), &[], &[]);
    }
    let mut warns = Vec::new();
    if kind == Kind::Assocs {
        warns = only_keys(&q, &["account", "user", "partition"], source);
    }
    if none {
        warns.push(nothing(func, source));
    }
    db_answer(&st, &a, v, db::response(v, kind, &[], &c), &[], &warns)
}

async fn get_accounts(State(st): State<Shared>, a: Authed, uri: Uri, RawQuery(raw): RawQuery) -> Reply {
    rows(st, a, uri, Kind::Accounts, None, raw).await
}

async fn get_account(State(st): State<Shared>, a: Authed, uri: Uri, Path(n): Path<String>) -> Reply {
    rows(st, a, uri, Kind::Accounts, Some(n), None).await
}

async fn get_users(State(st): State<Shared>, a: Authed, uri: Uri, RawQuery(raw): RawQuery) -> Reply {
    rows(st, a, uri, Kind::Users, None, raw).await
}

async fn get_user(State(st): State<Shared>, a: Authed, uri: Uri, Path(n): Path<String>) -> Reply {
    rows(st, a, uri, Kind::Users, Some(n), None).await
}

async fn get_assocs(State(st): State<Shared>, a: Authed, uri: Uri, RawQuery(raw): RawQuery) -> Reply {
    rows(st, a, uri, Kind::Assocs, None, raw).await
}

async fn get_qos(State(st): State<Shared>, a: Authed, uri: Uri, RawQuery(raw): RawQuery) -> Reply {
    rows(st, a, uri, Kind::Qos, None, raw).await
}

async fn get_one_qos(State(st): State<Shared>, a: Authed, uri: Uri, Path(n): Path<String>) -> Reply {
    rows(st, a, uri, Kind::Qos, Some(n), None).await
}

async fn get_tres(State(st): State<Shared>, a: Authed, uri: Uri) -> Reply {
    rows(st, a, uri, Kind::Tres, None, None).await
}

/// Whether the caller may read the database's configuration and statistics in v0.0.38
/// (22.05's slurmdbd: `SlurmUser`, root, or an operator or administrator).
fn is_operator(st: &Shared, a: &Authed, d: &AcctData) -> bool {
    match super::common::caller(st, a) {
        Ok(w) => {
            w.uid == 0
                || w.uid == st.my_uid && matches!(a.caller, crate::ctl::Caller::Local)
                || d.users.iter().any(|u| u.name == w.user && u.admin_level != flotilla_proto::acctmgr::AdminLevel::None)
        }
        Err(_) => false,
    }
}

async fn get_config(State(st): State<Shared>, a: Authed, uri: Uri) -> Reply {
    let v = version_of(uri.path());
    let d = match acct_data(&st, &a, "slurmdb_accounts_get").await {
        Ok(d) => d,
        Err(e) => return db_answer(&st, &a, v, json!({}), &[e], &[]),
    };
    let admin = is_operator(&st, &a, &d);
    let c = ctx(&st, &[], d);
    if v.is_data_parser() {
        return db_answer(&st, &a, v, db::response(v, Kind::Config, &[], &c), &[], &[]);
    }
    let body = flotilla_rest::v38db::response(Kind::Config, &c);
    if admin {
        return db_answer(&st, &a, v, body, &[], &[]);
    }
    // 22.05: the lists, then the wckeys refused to a user who is not an operator.
    let e = error(flotilla_proto::errno::ESLURM_ACCESS_DENIED, "", "slurmdb_wckeys_get");
    db_answer(&st, &a, v, body, &[e], &[])
}

async fn get_diag(State(st): State<Shared>, a: Authed, uri: Uri) -> Reply {
    let v = version_of(uri.path());
    if !v.is_data_parser() {
        let d = acct_data(&st, &a, "slurmdb_get_stats").await.unwrap_or_default();
        if !is_operator(&st, &a, &d) {
            let e = error(flotilla_proto::errno::ESLURM_ACCESS_DENIED, "", "slurmdb_get_stats");
            return db_answer(&st, &a, v, json!({}), &[e], &[]);
        }
    }
    match st.ctl.call(&a.caller, Request::Diag).await {
        Ok(Response::Diag(d)) => {
            let names: Vec<(u32, String)> = d.rpc_users.iter().map(|u| (u.uid, user_name(u.uid))).collect();
            let body = if v.is_data_parser() { db::stats_response(&d, &names) } else { flotilla_rest::v38db::stats_response(&d, &names) };
            db_answer(&st, &a, v, body, &[], &[])
        }
        Ok(_) => db_answer(&st, &a, v, json!({"statistics": {}}), &[], &[]),
        Err(e) => {
            let body = if v.is_data_parser() { json!({"statistics": {}}) } else { json!({}) };
            db_answer(&st, &a, v, body, &[ctl_error(&e, "slurmdb_get_stats")], &[])
        }
    }
}

/// Every version's routes.
pub fn routes() -> Router<Shared> {
    let mut r = Router::new();
    for v in VERSIONS.into_iter().chain([ApiVersion::V0038]) {
        let p = |s: &str| format!("/slurmdb/{}/{s}", v.as_str());
        let user_param = if v.is_data_parser() { "user/{name}" } else { "user/{user_name}" };
        let qos_param = if v.is_data_parser() { "qos/{qos}" } else { "qos/{qos_name}" };
        r = both(r, &p("jobs/"), get(get_jobs));
        r = both(r, &p("job/{job_id}"), get(get_job));
        r = both(r, &p("accounts/"), get(get_accounts));
        r = both(r, &p("account/{account_name}"), get(get_account));
        r = both(r, &p("users/"), get(get_users));
        r = both(r, &p(user_param), get(get_user));
        r = both(r, &p("associations/"), get(get_assocs));
        r = both(r, &p("qos/"), get(get_qos));
        r = both(r, &p(qos_param), get(get_one_qos));
        r = both(r, &p("tres/"), get(get_tres));
        r = both(r, &p("config"), get(get_config));
        r = both(r, &p("diag/"), get(get_diag));
    }
    r
}

/// An operation of `v` tagged `slurmdb`: `operationId` `slurmdb_v0042_NAME` (v0.0.38:
/// `dbv0.0.38_NAME`).
fn op(v: ApiVersion, path: &str, id: &str, summary: &'static str, params: Vec<Param>, response: Schema) -> Operation {
    let operation_id = if v.is_data_parser() { format!("slurmdb_{}_{id}", v.short()) } else { format!("dbv0.0.38_{id}") };
    Operation {
        method: Method::Get,
        path: format!("/slurmdb/{}/{path}", v.as_str()),
        operation_id,
        summary,
        tag: "slurmdb",
        params,
        body: None,
        response,
    }
}

fn csv_param(name: &'static str, description: &'static str) -> Param {
    query_param(name, Schema::Str, description)
}

/// The operations of one version, their answers' schemas in `c`.
fn ops(v: ApiVersion, c: &mut Components) -> Vec<Operation> {
    let mut resp = |k: Kind| {
        if v.is_data_parser() {
            db::add_response(v, k, c)
        } else {
            flotilla_rest::v38db::add_response(k, c)
        }
    };
    let (jobs, accounts, users, assocs, qos, tres, config, stats) = (
        resp(Kind::Jobs),
        resp(Kind::Accounts),
        resp(Kind::Users),
        resp(Kind::Assocs),
        resp(Kind::Qos),
        resp(Kind::Tres),
        resp(Kind::Config),
        resp(Kind::Stats),
    );
    let job_params = vec![
        csv_param("users", "CSV user name list"),
        csv_param("account", "CSV account list"),
        csv_param("partition", "CSV partition name list"),
        csv_param("job_name", "CSV job name list"),
        csv_param("state", "CSV state list"),
        csv_param("qos", "CSV QOS name list"),
        csv_param("node", "Ranged node string where jobs ran"),
        csv_param("start_time", "Usage start (UNIX timestamp)"),
        csv_param("end_time", "Usage end (UNIX timestamp)"),
        csv_param("show_duplicates", "Include duplicate job entries"),
    ];
    let (user_p, qos_p) = if v.is_data_parser() { ("name", "qos") } else { ("user_name", "qos_name") };
    let user_path = if v.is_data_parser() { "user/{name}" } else { "user/{user_name}" };
    let qos_path = if v.is_data_parser() { "qos/{qos}" } else { "qos/{qos_name}" };
    let diag_id = if v.is_data_parser() { "get_diag" } else { "diag" };
    vec![
        op(v, "jobs/", "get_jobs", "Get job list", job_params, jobs.clone()),
        op(v, "job/{job_id}", "get_job", "Get job info", vec![path_param("job_id", "Job ID")], jobs),
        op(v, "accounts/", "get_accounts", "Get account list", vec![], accounts.clone()),
        op(v, "account/{account_name}", "get_account", "Get account info", vec![path_param("account_name", "Account name")], accounts),
        op(v, "users/", "get_users", "Get user list", vec![], users.clone()),
        op(v, user_path, "get_user", "Get user info", vec![path_param(user_p, "User name")], users),
        op(
            v,
            "associations/",
            "get_associations",
            "Get association list",
            vec![csv_param("account", "CSV accounts list"), csv_param("user", "CSV users list"), csv_param("partition", "CSV partition list")],
            assocs,
        ),
        op(v, "qos/", "get_qos", "Get QOS list", vec![], qos.clone()),
        op(v, qos_path, "get_single_qos", "Get QOS info", vec![path_param(qos_p, "QOS name")], qos),
        op(v, "tres/", "get_tres", "Get TRES info", vec![], tres),
        op(v, "config", "get_config", "Dump all configuration information", vec![], config),
        op(v, "diag/", diag_id, "Get slurmdb diagnostics", vec![], stats),
    ]
}

/// The spec, every version.
pub fn spec() -> Spec {
    let mut s = Spec::default();
    for v in VERSIONS.into_iter().chain([ApiVersion::V0038]) {
        let mut c = Components::default();
        let operations = ops(v, &mut c);
        s.merge(Spec { operations, components: c });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_and_queries_parse_as_slurms() {
        assert_eq!(job_ref("12"), Some(AcctJobRef { job_id: 12, task: None, step: None }));
        assert_eq!(job_ref("12_3.batch"), Some(AcctJobRef { job_id: 12, task: Some(3), step: None }));
        assert_eq!(job_ref("x"), None);
        assert_eq!(job_ref("0"), None);
        let q = query_pairs(Some("state=completed,failed&start_time=5&wckey=a&nosuch=1"));
        let (aq, w) = job_query(&q, "s").unwrap();
        assert_eq!(aq.states, ["COMPLETED", "FAILED"]);
        assert_eq!(aq.start, Some(5));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(job_query(&query_pairs(Some("end_time=soon")), "s").is_err());
    }
}
