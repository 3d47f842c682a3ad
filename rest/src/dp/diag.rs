//! The controller's statistics: `v0.0.4x_stats_msg` (inline in v0.0.41) and the answer of
//! `GET /slurm/vX/diag` (`v0.0.4x_openapi_diag_resp`: `statistics`), from [`Diag`].
//!
//! Fields are Slurm 25.11's `PARSER_ARRAY(STATS_MSG)`; the means are its `STATS_MSG_*_MEAN`
//! parsers' (a sum over the cycle counter, 0 with no cycle) and `schedule_cycle_per_minute`
//! the cycles over the minutes since `req_time_start`. Flotilla queues no RPC, so each RPC
//! type's `queued`, `dropped`, `cycle_last` and `cycle_max` are 0 and `pending_rpcs` is
//! left out. The exit reasons of the cycles (`schedule_exit`, `bf_exit`) are not tracked and
//! left out.

use super::{add_common, name, no_val, set, Width};
use crate::model::Model;
use crate::schema::{array, req, Components, IntFormat, Schema};
use crate::version::ApiVersion;
use flotilla_proto::diag::{Diag, RpcTypeStat, RpcUserStat};
use serde_json::{json, Value};

/// What the answer needs besides the statistics: the names of the users of `rpcs_by_user`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ctx {
    /// (uid, name) for each uid of `rpcs_by_user` (a uid without one shows as its number).
    pub user_names: Vec<(u32, String)>,
}

fn mean(sum: u64, n: u64) -> u64 {
    sum.checked_div(n).unwrap_or(0)
}

fn rpc_type_model(v: ApiVersion) -> Model<RpcTypeStat> {
    let i32_ = || Schema::Int(IntFormat::I32);
    let i64_ = || Schema::Int(IntFormat::I64);
    Model::new()
        .req("type_id", i32_(), |r: &RpcTypeStat, _| json!(r.id))
        .req("message_type", Schema::Str, |r, _| json!(r.name))
        .req("count", i32_(), |r, _| json!(r.count.min(i32::MAX as u64)))
        .req("queued", i32_(), |_, _| json!(0))
        .req("dropped", i64_(), |_, _| json!(0))
        .req("cycle_last", i32_(), |_, _| json!(0))
        .req("cycle_max", i32_(), |_, _| json!(0))
        .req("total_time", i64_(), |r, _| json!(r.total_time))
        .req("average_time", no_val(v, Width::U64), |r, _| set(mean(r.total_time, r.count) as i64))
}

fn rpc_user_model(v: ApiVersion) -> Model<RpcUserStat, Ctx> {
    let i32_ = || Schema::Int(IntFormat::I32);
    let i64_ = || Schema::Int(IntFormat::I64);
    Model::new()
        .req("user_id", i32_(), |r: &RpcUserStat, _: &Ctx| json!(r.uid))
        .req("user", Schema::Str, |r, c| {
            let n = c.user_names.iter().find(|(u, _)| *u == r.uid);
            json!(n.map_or_else(|| r.uid.to_string(), |(_, n)| n.clone()))
        })
        .req("count", i32_(), |r, _| json!(r.count.min(i32::MAX as u64)))
        .req("total_time", i64_(), |r, _| json!(r.total_time))
        .req("average_time", no_val(v, Width::U64), |r, _| set(mean(r.total_time, r.count) as i64))
}

fn stats_model(v: ApiVersion, rpc_type: Schema, rpc_user: Schema) -> Model<Diag, Ctx> {
    let i32_ = || Schema::Int(IntFormat::I32);
    let i64_ = || Schema::Int(IntFormat::I64);
    let nv64 = || no_val(v, Width::U64);
    let mut m: Model<Diag, Ctx> = Model::new()
        .opt("req_time", nv64(), |d: &Diag, _: &Ctx| Some(set(d.req_time)))
        .opt("req_time_start", nv64(), |d, _| Some(set(d.req_time_start)));
    macro_rules! int {
        ($key:literal, $fmt:expr, $f:ident) => {
            m = m.opt($key, $fmt, |d: &Diag, _| Some(json!(d.$f)));
        };
    }
    int!("server_thread_count", i32_(), server_thread_count);
    int!("agent_queue_size", i32_(), agent_queue_size);
    int!("agent_count", i32_(), agent_count);
    int!("agent_thread_count", i32_(), agent_thread_count);
    int!("dbd_agent_queue_size", i32_(), dbd_agent_queue_size);
    int!("gettimeofday_latency", i32_(), gettimeofday_latency);
    int!("schedule_cycle_max", i32_(), schedule_cycle_max);
    int!("schedule_cycle_last", i32_(), schedule_cycle_last);
    int!("schedule_cycle_sum", i64_(), schedule_cycle_sum);
    int!("schedule_cycle_total", i32_(), schedule_cycle_counter);
    m = m
        .opt("schedule_cycle_mean", i64_(), |d, _| Some(json!(mean(d.schedule_cycle_sum, d.schedule_cycle_counter))))
        .opt("schedule_cycle_mean_depth", i64_(), |d, _| {
            Some(json!(mean(d.schedule_cycle_depth, d.schedule_cycle_counter)))
        })
        .opt("schedule_cycle_per_minute", i64_(), |d, _| {
            let minutes = ((d.req_time - d.req_time_start) / 60).max(0) as u64;
            Some(json!(mean(d.schedule_cycle_counter, minutes)))
        });
    int!("schedule_cycle_depth", i32_(), schedule_cycle_depth);
    int!("schedule_queue_length", i32_(), schedule_queue_len);
    int!("jobs_submitted", i32_(), jobs_submitted);
    int!("jobs_started", i32_(), jobs_started);
    int!("jobs_completed", i32_(), jobs_completed);
    int!("jobs_canceled", i32_(), jobs_canceled);
    int!("jobs_failed", i32_(), jobs_failed);
    int!("jobs_pending", i32_(), jobs_pending);
    int!("jobs_running", i32_(), jobs_running);
    m = m.opt("job_states_ts", nv64(), |d, _| Some(set(d.job_states_ts)));
    int!("bf_backfilled_jobs", i32_(), bf_backfilled_jobs);
    int!("bf_last_backfilled_jobs", i32_(), bf_last_backfilled_jobs);
    int!("bf_backfilled_het_jobs", i32_(), bf_backfilled_het_jobs);
    int!("bf_cycle_counter", i32_(), bf_cycle_counter);
    m = m
        .opt("bf_cycle_mean", i64_(), |d, _| Some(json!(mean(d.bf_cycle_sum, d.bf_cycle_counter))))
        .opt("bf_depth_mean", i64_(), |d, _| Some(json!(mean(d.bf_depth_sum, d.bf_cycle_counter))))
        .opt("bf_depth_mean_try", i64_(), |d, _| Some(json!(mean(d.bf_depth_try_sum, d.bf_cycle_counter))));
    int!("bf_cycle_sum", i64_(), bf_cycle_sum);
    int!("bf_cycle_last", i32_(), bf_cycle_last);
    int!("bf_cycle_max", i32_(), bf_cycle_max);
    int!("bf_last_depth", i32_(), bf_last_depth);
    int!("bf_last_depth_try", i32_(), bf_last_depth_try);
    int!("bf_depth_sum", i32_(), bf_depth_sum);
    int!("bf_depth_try_sum", i32_(), bf_depth_try_sum);
    int!("bf_queue_len", i32_(), bf_queue_len);
    m = m.opt("bf_queue_len_mean", i64_(), |d, _| Some(json!(mean(d.bf_queue_len_sum, d.bf_cycle_counter))));
    int!("bf_queue_len_sum", i32_(), bf_queue_len_sum);
    int!("bf_table_size", i32_(), bf_table_size);
    int!("bf_table_size_sum", i32_(), bf_table_size_sum);
    m = m
        .opt("bf_table_size_mean", i64_(), |d, _| Some(json!(mean(d.bf_table_size_sum, d.bf_cycle_counter))))
        .opt("bf_when_last_cycle", nv64(), |d, _| Some(set(d.bf_when_last_cycle)))
        .opt("bf_active", Schema::Bool, |d, _| Some(json!(d.bf_active)));
    let types = rpc_type_model(v);
    let users = rpc_user_model(v);
    m.opt("rpcs_by_message_type", array(rpc_type), move |d, _| {
        Some(Value::Array(d.rpc_types.iter().map(|r| types.emit(r, &())).collect()))
    })
    .opt("rpcs_by_user", array(rpc_user), move |d, c| {
        Some(Value::Array(d.rpc_users.iter().map(|r| users.emit(r, c)).collect()))
    })
}

/// The answer's component name (`v0.0.42_openapi_diag_resp`).
pub fn response_name(v: ApiVersion) -> &'static str {
    name(v, "openapi_diag_resp")
}

fn schemas(v: ApiVersion, c: &mut Components) -> (Schema, Schema) {
    let (t, u) = (rpc_type_model(v).schema(), rpc_user_model(v).schema());
    if v == ApiVersion::V0041 {
        return (t, u);
    }
    c.add(name(v, "stats_msg_rpc_type"), t);
    c.add(name(v, "stats_msg_rpc_user"), u);
    (Schema::Ref(name(v, "stats_msg_rpc_type")), Schema::Ref(name(v, "stats_msg_rpc_user")))
}

/// Adds the answer's schema to `c`; answers its `$ref`.
pub fn add_response(v: ApiVersion, c: &mut Components) -> Schema {
    add_common(v, c);
    let (t, u) = schemas(v, c);
    let mut stats = stats_model(v, t, u).schema();
    if v != ApiVersion::V0041 {
        c.add(name(v, "stats_msg"), stats);
        stats = Schema::Ref(name(v, "stats_msg"));
    }
    let mut f = vec![req("statistics", stats)];
    f.extend(super::envelope_fields(v, c));
    c.add(response_name(v), Schema::Object(f));
    Schema::Ref(response_name(v))
}

/// The answer's own key: `statistics`.
pub fn response(v: ApiVersion, d: &Diag, ctx: &Ctx) -> Value {
    let mut scratch = Components::default();
    let (t, u) = schemas(v, &mut scratch);
    json!({"statistics": stats_model(v, t, u).emit(d, ctx)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_validate_in_every_version() {
        let d = Diag {
            req_time: 1000,
            req_time_start: 400,
            schedule_cycle_counter: 20,
            schedule_cycle_sum: 200,
            rpc_types: vec![RpcTypeStat { name: "REQUEST_PING".into(), id: 1008, count: 2, total_time: 10 }],
            rpc_users: vec![RpcUserStat { uid: 0, count: 2, total_time: 10 }],
            ..Diag::default()
        };
        let ctx = Ctx { user_names: vec![(0, "root".into())] };
        for v in super::super::VERSIONS {
            let mut c = Components::default();
            let r = add_response(v, &mut c);
            let doc = crate::meta::envelope(v, &crate::ClientInfo::default(), "c", response(v, &d, &ctx), &[], &[]);
            c.validate(&doc, &r).unwrap();
            let s = &doc["statistics"];
            assert_eq!(s["schedule_cycle_mean"], 10);
            assert_eq!(s["schedule_cycle_per_minute"], 2);
            assert_eq!(s["rpcs_by_user"][0]["user"], "root");
            assert_eq!(s["rpcs_by_message_type"][0]["average_time"]["number"], 5);
        }
    }
}
