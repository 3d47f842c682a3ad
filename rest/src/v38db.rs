//! v0.0.38 accounting (Slurm 22.05's `openapi/dbv0.0.38` plugin, `src/plugins/openapi/
//! dbv0.0.38/*.c` and its `openapi.json`): jobs as accounted, accounts, users, associations,
//! QOS, TRES, the configuration and the statistics, in that plugin's shapes: plain integers,
//! `state.current` and a step's `state` as strings, `exit_code` as `{status, return_code}`
//! (`signal {signal_id, name}` for a signal), `is_default` as 0/1, `administrator_level` a
//! string. 22.05 writes `null` for an unset string or number; Flotilla leaves the key out.
//! Errors are the plugin's `dbv0.0.38_error` (`error`, `error_number`, `description`,
//! `source`). The `sacct --json` of 22.05 prints the same job objects ([`jobs_response`]).

use crate::dp::db::{Ctx, Kind, StepOf, Tres, TRES};
use crate::model::Model;
use crate::schema::{array, opt, Components, Field, IntFormat, Schema};
use flotilla_proto::acct::AcctJob;
use flotilla_proto::acctmgr::{AccountRow, AssocRow, QosRow, UserRow};
use flotilla_proto::diag::Diag;
use serde_json::{json, Value};

/// `ESLURM_REST_EMPTY_RESULT` (`slurm_errno.h`): 22.05's "Nothing found with query".
pub const ESLURM_REST_EMPTY_RESULT: i32 = 9003;

fn int() -> Schema {
    Schema::Int(IntFormat::I64)
}

fn s(x: &str) -> Option<Value> {
    Some(Value::String(x.to_string()))
}

/// A string, left out when empty (22.05's `null`).
fn nonempty(x: &str) -> Option<Value> {
    (!x.is_empty()).then(|| json!(x))
}

fn name_of(ids: &[(u32, String)], id: u32) -> String {
    ids.iter().find(|(i, _)| *i == id).map_or_else(|| id.to_string(), |(_, n)| n.clone())
}

fn tres_model() -> Model<Tres> {
    Model::new()
        .opt("type", Schema::Str, |t: &Tres, _| s(t.kind))
        .opt("name", Schema::Str, |t, _| nonempty(t.name))
        .opt("id", int(), |t, _| Some(json!(t.id)))
        .opt("count", int(), |t, _| Some(json!(t.count)))
}

fn tres_values(cpus: u32, mem_mib: u64, nodes: u32, gpus: u32) -> Value {
    let m = tres_model();
    let mut out = Vec::new();
    for (i, n) in [(0usize, i64::from(cpus)), (1, mem_mib as i64), (3, i64::from(nodes)), (8, i64::from(gpus))] {
        if n > 0 {
            out.push(m.emit(&Tres { count: n, ..TRES[i].clone() }, &()));
        }
    }
    Value::Array(out)
}

/// 22.05's `dbv0.0.38_job_exit_code`: `SUCCESS`/`ERROR` with the return code, `SIGNALED`
/// with the signal.
fn exit(code: i32, sig: i32) -> Value {
    if sig != 0 {
        return json!({"status": "SIGNALED", "signal": {"signal_id": sig, "name": crate::dp::signal_name(sig)}});
    }
    json!({"status": if code == 0 { "SUCCESS" } else { "ERROR" }, "return_code": code})
}

fn exit_schema() -> Schema {
    Schema::Object(vec![
        opt("status", Schema::Str),
        opt("return_code", int()),
        opt("signal", Schema::Object(vec![opt("signal_id", int()), opt("name", Schema::Str)])),
    ])
}

fn tres_list_schema() -> Schema {
    array(Schema::Ref("dbv0.0.38_tres_list_entry"))
}

fn short(account: &str, cluster: &str, partition: &str, user: &str) -> Value {
    let mut m = serde_json::Map::new();
    m.insert("account".into(), json!(account));
    m.insert("cluster".into(), json!(cluster));
    if !partition.is_empty() {
        m.insert("partition".into(), json!(partition));
    }
    if !user.is_empty() {
        m.insert("user".into(), json!(user));
    }
    Value::Object(m)
}

fn short_schema() -> Schema {
    Schema::Ref("dbv0.0.38_association_short_info")
}

fn elapsed(start: Option<i64>, end: Option<i64>, now: i64) -> i64 {
    start.map_or(0, |st| (end.unwrap_or(now) - st).max(0))
}

fn step_model() -> Model<StepOf, Ctx> {
    Model::new()
        .opt("exit_code", exit_schema(), |t: &StepOf, _: &Ctx| Some(exit(t.step.exit_code, t.step.signal)))
        .opt("nodes", Schema::Object(vec![opt("count", int()), opt("range", Schema::Str)]), |t, _| {
            Some(json!({"count": t.step.nnodes, "range": t.step.nodes}))
        })
        .opt("state", Schema::Str, |t, _| s(&t.step.state))
        .opt(
            "step",
            Schema::Object(vec![opt("id", Schema::Str), opt("job_id", int()), opt("name", Schema::Str)]),
            |t, _| Some(json!({"id": t.step.step, "job_id": t.job_id, "name": t.step.step})),
        )
        .opt(
            "time",
            Schema::Object(vec![opt("elapsed", int()), opt("end", int()), opt("start", int()), opt("suspended", int())]),
            |t, c| {
                let st = &t.step;
                let mut m = json!({"elapsed": elapsed(st.start_time, st.end_time, c.now), "suspended": 0});
                if let Some(e) = st.end_time {
                    m["end"] = json!(e);
                }
                if let Some(b) = st.start_time {
                    m["start"] = json!(b);
                }
                Some(m)
            },
        )
        .opt("tres", Schema::Object(vec![opt("allocated", tres_list_schema())]), |t, _| {
            let st = &t.step;
            Some(json!({"allocated": tres_values(st.cpus, st.mem_mib, st.nnodes, st.gpus)}))
        })
}

/// One accounted job (`dbv0.0.38_job`).
pub fn job_model() -> Model<AcctJob, Ctx> {
    let steps = step_model();
    Model::new()
        .opt("account", Schema::Str, |j: &AcctJob, _: &Ctx| s(&j.account))
        .opt("allocation_nodes", int(), |j, _| Some(json!(j.alloc_nodes)))
        .opt(
            "array",
            Schema::Object(vec![opt("job_id", int()), opt("task", Schema::Str), opt("task_id", int())]),
            |j, _| {
                let mut m = json!({"job_id": j.array_job_id.unwrap_or(0)});
                if let Some(t) = &j.array_task_str {
                    m["task"] = json!(t);
                }
                if let Some(t) = j.array_task_id {
                    m["task_id"] = json!(t);
                }
                Some(m)
            },
        )
        .opt("association", short_schema(), |j, c| Some(short(&j.account, &c.cluster, "", &j.user)))
        .opt("cluster", Schema::Str, |_, c| s(&c.cluster))
        .opt("comment", Schema::Object(vec![opt("job", Schema::Str)]), |j, _| {
            Some(if j.comment.is_empty() { json!({}) } else { json!({"job": j.comment}) })
        })
        .opt("derived_exit_code", exit_schema(), |j, _| Some(exit(j.derived_exit.0, j.derived_exit.1)))
        .opt("exit_code", exit_schema(), |j, _| Some(exit(j.exit_code, j.signal)))
        .opt("group", Schema::Str, |j, c| s(&name_of(&c.groups, j.gid)))
        .opt("job_id", int(), |j, _| Some(json!(j.job_id)))
        .opt("kill_request_user", Schema::Str, |j, c| j.cancelled_by.and_then(|u| s(&name_of(&c.users, u))))
        .opt("name", Schema::Str, |j, _| s(&j.name))
        .opt("nodes", Schema::Str, |j, _| s(if j.nodes.is_empty() { "None assigned" } else { &j.nodes }))
        .opt("partition", Schema::Str, |j, _| s(&j.partition))
        .opt("qos", Schema::Str, |j, _| s(&j.qos))
        .opt("required", Schema::Object(vec![opt("CPUs", int())]), |j, _| Some(json!({"CPUs": j.req_cpus})))
        // `state.reason`: the record's `state_reason_prev` (22.05 `dbv0.0.38/parse.c`
        // `state/reason`, through `job_reason_string`: `None` for none), as `sacct -o Reason`.
        .opt("state", Schema::Object(vec![opt("current", Schema::Str), opt("reason", Schema::Str)]), |j, _| {
            Some(json!({"current": j.state, "reason": j.reason_prev.as_deref().unwrap_or("None")}))
        })
        .opt("steps", array(Schema::Ref("dbv0.0.38_job_step")), move |j, c| {
            let all = j.steps.iter().map(|st| steps.emit(&StepOf { job_id: j.job_id, step: st.clone() }, c));
            Some(Value::Array(all.collect()))
        })
        .opt(
            "time",
            Schema::Object(vec![
                opt("elapsed", int()),
                opt("eligible", int()),
                opt("end", int()),
                opt("limit", int()),
                opt("start", int()),
                opt("submission", int()),
                opt("suspended", int()),
            ]),
            |j, c| {
                let mut m = json!({
                    "elapsed": elapsed(j.start_time, j.end_time, c.now),
                    "eligible": j.eligible_time.unwrap_or(0),
                    "submission": j.submit_time,
                    "suspended": 0,
                });
                if let Some(e) = j.end_time {
                    m["end"] = json!(e);
                }
                if let Some(l) = j.time_limit_min {
                    m["limit"] = json!(l);
                }
                if let Some(b) = j.start_time {
                    m["start"] = json!(b);
                }
                Some(m)
            },
        )
        .opt("tres", Schema::Object(vec![opt("allocated", tres_list_schema()), opt("requested", tres_list_schema())]), |j, _| {
            Some(json!({
                "allocated": tres_values(j.alloc_cpus, j.alloc_mem_mib, j.alloc_nodes, j.alloc_gpus),
                "requested": tres_values(j.req_cpus, j.req_mem_mib, j.req_nodes, j.req_gpus),
            }))
        })
        .opt("user", Schema::Str, |j, _| s(&j.user))
        .opt("working_directory", Schema::Str, |j, _| s(&j.work_dir))
}

fn account_model() -> Model<AccountRow, Ctx> {
    Model::new()
        .opt("associations", array(short_schema()), |a: &AccountRow, c: &Ctx| {
            let mine = c.data.assocs.iter().filter(|x| x.account == a.name && x.user.is_empty());
            Some(Value::Array(mine.map(|x| short(&x.account, &c.cluster, &x.partition, &x.user)).collect()))
        })
        .opt("coordinators", array(Schema::Any), |_, _| Some(json!([])))
        .opt("description", Schema::Str, |a, _| s(&a.description))
        .opt("flags", array(Schema::Str), |_, _| Some(json!([])))
        .opt("name", Schema::Str, |a, _| s(&a.name))
        .opt("organization", Schema::Str, |a, _| s(&a.organization))
}

fn user_model() -> Model<UserRow, Ctx> {
    Model::new()
        .opt("administrator_level", Schema::Str, |u: &UserRow, _: &Ctx| s(u.admin_level.as_str()))
        .opt("associations", array(short_schema()), |u, c| {
            let mine = c.data.assocs.iter().filter(|x| x.user == u.name);
            Some(Value::Array(mine.map(|x| short(&x.account, &c.cluster, &x.partition, &x.user)).collect()))
        })
        .opt("coordinators", array(Schema::Any), |_, _| Some(json!([])))
        .opt("default", Schema::Object(vec![opt("account", Schema::Str), opt("wckey", Schema::Str)]), |u, _| {
            Some(json!({"account": u.default_account, "wckey": ""}))
        })
        .opt("flags", array(Schema::Str), |_, _| Some(json!([])))
        .opt("name", Schema::Str, |u, _| s(&u.name))
}

fn assoc_model() -> Model<AssocRow, Ctx> {
    Model::new()
        .opt("account", Schema::Str, |a: &AssocRow, _: &Ctx| s(&a.account))
        .opt("cluster", Schema::Str, |_, c| s(&c.cluster))
        .opt("default", Schema::Object(vec![opt("qos", Schema::Str)]), |a, _| {
            Some(if a.default_qos.is_empty() { json!({}) } else { json!({"qos": a.default_qos}) })
        })
        .opt("flags", array(Schema::Str), |_, _| Some(json!([])))
        .opt("is_default", int(), |a, c| {
            let u = c.data.users.iter().find(|u| !a.user.is_empty() && u.name == a.user);
            Some(json!(i32::from(u.is_some_and(|u| u.default_account == a.account))))
        })
        .opt("parent_account", Schema::Str, |a, c| {
            a.parent.and_then(|p| c.data.assocs.iter().find(|x| x.id == p)).and_then(|p| s(&p.account))
        })
        .opt("partition", Schema::Str, |a, _| nonempty(&a.partition))
        .opt("priority", int(), |a, _| a.priority.map(|p| json!(p)))
        .opt("qos", array(Schema::Str), |a, _| Some(json!(a.qos)))
        .opt("shares_raw", int(), |a, _| Some(json!(a.shares)))
        .opt("user", Schema::Str, |a, _| nonempty(&a.user))
}

fn qos_model() -> Model<QosRow, Ctx> {
    Model::new()
        .opt("description", Schema::Str, |q: &QosRow, _: &Ctx| s(&q.description))
        .opt("flags", array(Schema::Str), |q, _| Some(json!(q.flags)))
        .opt("id", int(), |q, c| c.data.qos.iter().position(|x| x.name == q.name).map(|i| json!(i + 1)))
        .opt("name", Schema::Str, |q, _| s(&q.name))
        .opt("preempt", Schema::Object(vec![opt("list", array(Schema::Str)), opt("mode", array(Schema::Str)), opt("exempt_time", int())]), |q, _| {
            let mode: Vec<String> = q
                .preempt_mode
                .split(',')
                .map(|w| w.trim().to_ascii_uppercase())
                // 22.05 lists no mode for `PREEMPT_MODE_OFF` (sacctmgr's `cluster`).
                .filter(|w| !w.is_empty() && w != "OFF" && w != "CLUSTER")
                .collect();
            let mut m = json!({"list": q.preempt, "mode": mode});
            if let Some(e) = q.preempt_exempt_s {
                m["exempt_time"] = json!(e);
            }
            Some(m)
        })
        .opt("priority", int(), |q, _| Some(json!(q.priority)))
        .opt("usage_factor", Schema::Num, |q, _| Some(json!(q.usage_factor)))
}

/// The name of answer `k`'s component (22.05's: `dbv0.0.38_job_info`, ...).
pub fn response_name(k: Kind) -> &'static str {
    match k {
        Kind::Jobs => "dbv0.0.38_job_info",
        Kind::Accounts => "dbv0.0.38_account_info",
        Kind::Users => "dbv0.0.38_user_info",
        Kind::Assocs => "dbv0.0.38_associations_info",
        Kind::Qos => "dbv0.0.38_qos_info",
        Kind::Tres => "dbv0.0.38_tres_info",
        Kind::Config => "dbv0.0.38_config_info",
        Kind::Stats => "dbv0.0.38_diag",
    }
}

fn envelope(c: &mut Components) -> Vec<Field> {
    let (m, _, _) = crate::meta::add_schemas(crate::ApiVersion::V0038, c);
    c.add(
        "dbv0.0.38_error",
        Schema::Object(vec![
            opt("error", Schema::Str),
            opt("error_number", Schema::Int(IntFormat::I32)),
            opt("description", Schema::Str),
            opt("source", Schema::Str),
        ]),
    );
    vec![opt("meta", Schema::Ref(m)), opt("errors", array(Schema::Ref("dbv0.0.38_error")))]
}

fn stats_schema() -> Schema {
    let t = || Schema::Object(vec![opt("average", int()), opt("total", int())]);
    Schema::Object(vec![
        opt("time_start", int()),
        opt("RPCs", array(Schema::Object(vec![opt("rpc", Schema::Str), opt("count", int()), opt("time", t())]))),
        opt("users", array(Schema::Object(vec![opt("user", Schema::Str), opt("count", int()), opt("time", t())]))),
    ])
}

/// Adds answer `k`'s schema (and the components it uses) to `c`; answers its `$ref`.
pub fn add_response(k: Kind, c: &mut Components) -> Schema {
    c.add("dbv0.0.38_tres_list_entry", tres_model().schema());
    c.add(
        "dbv0.0.38_association_short_info",
        Schema::Object(vec![opt("account", Schema::Str), opt("cluster", Schema::Str), opt("partition", Schema::Str), opt("user", Schema::Str)]),
    );
    c.add("dbv0.0.38_job_step", step_model().schema());
    c.add("dbv0.0.38_job", job_model().schema());
    c.add("dbv0.0.38_account", account_model().schema());
    c.add("dbv0.0.38_user", user_model().schema());
    c.add("dbv0.0.38_association", assoc_model().schema());
    c.add("dbv0.0.38_qos", qos_model().schema());
    let r = Schema::Ref;
    let mut f = match k {
        Kind::Jobs => vec![opt("jobs", array(r("dbv0.0.38_job")))],
        Kind::Accounts => vec![opt("accounts", array(r("dbv0.0.38_account")))],
        Kind::Users => vec![opt("users", array(r("dbv0.0.38_user")))],
        Kind::Assocs => vec![opt("associations", array(r("dbv0.0.38_association")))],
        Kind::Qos => vec![opt("QOS", array(r("dbv0.0.38_qos")))],
        Kind::Tres => vec![opt("TRES", tres_list_schema())],
        Kind::Config => vec![
            opt("QOS", array(r("dbv0.0.38_qos"))),
            opt("TRES", tres_list_schema()),
            opt("accounts", array(r("dbv0.0.38_account"))),
            opt("users", array(r("dbv0.0.38_user"))),
            opt("wckeys", array(Schema::Any)),
        ],
        Kind::Stats => vec![opt("statistics", stats_schema())],
    };
    f.extend(envelope(c));
    let n = response_name(k);
    c.add(n, Schema::Object(f));
    Schema::Ref(n)
}

/// `jobs` of an answer (also `sacct --json`'s, without its `meta` and `errors`).
pub fn jobs_response(jobs: &[AcctJob], ctx: &Ctx) -> Value {
    let m = job_model();
    json!({"jobs": jobs.iter().map(|j| m.emit(j, ctx)).collect::<Vec<_>>()})
}

/// The answer's own keys for `k` (not jobs, see [`jobs_response`]), from `ctx.data`.
pub fn response(k: Kind, ctx: &Ctx) -> Value {
    let d = &ctx.data;
    let qos = || Value::Array(d.qos.iter().map(|q| qos_model().emit(q, ctx)).collect());
    let tres = || Value::Array(TRES.iter().map(|t| tres_model().emit(t, &())).collect());
    let accounts = || Value::Array(d.accounts.iter().map(|a| account_model().emit(a, ctx)).collect());
    let users = || Value::Array(d.users.iter().map(|u| user_model().emit(u, ctx)).collect());
    match k {
        Kind::Jobs => jobs_response(&[], ctx),
        Kind::Accounts => json!({"accounts": accounts()}),
        Kind::Users => json!({"users": users()}),
        Kind::Assocs => json!({"associations": d.assocs.iter().map(|a| assoc_model().emit(a, ctx)).collect::<Vec<_>>()}),
        Kind::Qos => json!({"QOS": qos()}),
        Kind::Tres => json!({"TRES": tres()}),
        Kind::Config => json!({"QOS": qos(), "TRES": tres(), "accounts": accounts(), "users": users(), "wckeys": []}),
        Kind::Stats => json!({}),
    }
}

/// `GET /diag`'s `statistics` (as [`crate::dp::db::stats_response`]).
pub fn stats_response(d: &Diag, names: &[(u32, String)]) -> Value {
    crate::dp::db::stats_response(d, names)
}

/// `errors[]` of the plugin: `error`, `error_number`, and `description`, `source` when said.
pub fn errors(errs: &[crate::RestError]) -> Value {
    Value::Array(
        errs.iter()
            .map(|e| {
                let mut m = json!({"error": e.error, "error_number": e.error_number});
                if !e.description.is_empty() {
                    m["description"] = json!(e.description);
                }
                if !e.source.is_empty() {
                    m["source"] = json!(e.source);
                }
                m
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_validate() {
        let ctx = Ctx { cluster: "c".into(), ..Ctx::default() };
        for k in [Kind::Jobs, Kind::Accounts, Kind::Users, Kind::Assocs, Kind::Qos, Kind::Tres, Kind::Config, Kind::Stats] {
            let mut c = Components::default();
            let r = add_response(k, &mut c);
            let doc = crate::meta::envelope(crate::ApiVersion::V0038, &crate::ClientInfo::default(), "c", response(k, &ctx), &[], &[]);
            c.validate(&doc, &r).unwrap_or_else(|e| panic!("{k:?}: {e}"));
        }
        assert_eq!(exit(0, 9)["signal"]["name"], "KILL");
        assert_eq!(exit(2, 0), json!({"status": "ERROR", "return_code": 2}));
    }
}
