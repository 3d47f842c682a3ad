//! Nodes and partitions, for the data_parser versions (v0.0.41–v0.0.44), as Slurm 25.11's
//! `openapi/slurmctld` `nodes.c` and `partitions.c`:
//!
//! - `GET /slurm/vX/nodes` (query `update_time`, `flags`), `GET /slurm/vX/node/{node_name}`:
//!   an unknown node is `ESLURM_INVALID_NODE_NAME` ("Failure to query node").
//! - `GET /slurm/vX/partitions`, `GET /slurm/vX/partition/{partition_name}` (names compared
//!   without case, as Slurm's `xstrcasecmp`): an unknown partition is
//!   `ESLURM_REST_INVALID_QUERY` ("Unable to find partition", 422).
//!
//! `update_time`: nothing changed since is 304 Not Modified without a body for the node and
//! partition lists and a named partition (25.11 passes `SLURM_NO_CHANGE_IN_DATA` from
//! `slurm_load_node`/`slurm_load_partitions` up to `_call_handler`); otherwise a full answer
//! (`last_update`: now).

use super::common::{answer, ctl_error, error, now, only_keys, op, path_param, query_param, query_pairs, unchanged, update_time};
use crate::app::{both, version_of, Authed, Shared};
use crate::reply::Reply;
use axum::extract::{Path, RawQuery, State};
use axum::http::Uri;
use axum::routing::get;
use axum::Router;
use flotilla_proto::errno::ESLURM_INVALID_NODE_NAME;
use flotilla_proto::{NodeInfo, NodeQuery, PartitionInfo, Request, Response};
use flotilla_rest::dp::node::{self, Ctx};
use flotilla_rest::dp::{ESLURM_REST_INVALID_QUERY, VERSIONS};
use flotilla_rest::schema::{IntFormat, Method, Schema};
use flotilla_rest::{ApiVersion, Components, RestError, RestWarning, Spec};

fn ctx(st: &Shared) -> Ctx {
    Ctx { cluster: st.cluster.clone(), ..Ctx::default() }
}

/// Partition states by name: the `State=` word of each partition that is not up.
pub(crate) type PartStates = std::collections::BTreeMap<String, String>;

/// The `State=` word of each partition of `parts` that is not up (`DOWN`, `DRAIN`,
/// `INACTIVE`), asked of the controller only when one is not (`PartitionInfo` says only up
/// or not); a controller that cannot answer leaves them `DOWN`.
pub(crate) async fn partition_states(st: &Shared, a: &Authed, parts: &[PartitionInfo]) -> PartStates {
    if parts.iter().all(|p| p.up) {
        return PartStates::new();
    }
    match st.ctl.call(&a.caller, Request::QueryPartitionStates).await {
        Ok(Response::PartitionStates(s)) => s.into_iter().map(|s| (s.name, s.state)).collect(),
        _ => PartStates::new(),
    }
}

fn nodes_answer(st: &Shared, a: &Authed, v: ApiVersion, nodes: &[NodeInfo], errs: &[RestError], warns: &[RestWarning]) -> Reply {
    answer(st, a, v, node::nodes_response(v, nodes, &ctx(st), now()), errs, warns)
}

fn parts_answer(st: &Shared, a: &Authed, v: ApiVersion, parts: &[PartitionInfo], states: PartStates, errs: &[RestError], warns: &[RestWarning]) -> Reply {
    let ctx = Ctx { partition_states: states, ..ctx(st) };
    answer(st, a, v, node::partitions_response(v, parts, &ctx, now()), errs, warns)
}

/// Checks the query's `update_time`; keys other than `update_time` and `flags` are ignored
/// with a warning each.
fn check_query(raw: Option<&str>, source: &str) -> (Vec<RestWarning>, Option<RestError>) {
    let q = query_pairs(raw);
    let warns = only_keys(&q, &["update_time", "flags"], source);
    let err = match q.iter().find(|(k, _)| k == "update_time") {
        Some((_, t)) if t.parse::<i64>().is_err() => Some(error(
            ESLURM_REST_INVALID_QUERY,
            format!("Rejecting request. Failure parsing query: update_time {t:?}"),
            source,
        )),
        _ => None,
    };
    (warns, err)
}

async fn nodes(st: &Shared, a: &Authed, names: Vec<String>) -> Result<Vec<NodeInfo>, RestError> {
    match st.ctl.call(&a.caller, Request::QueryNodes(NodeQuery { names })).await {
        Ok(Response::Nodes(n)) => Ok(n),
        Ok(_) => Ok(Vec::new()),
        Err(e) => Err(ctl_error(&e, "_dump_nodes")),
    }
}

async fn get_nodes(State(st): State<Shared>, a: Authed, uri: Uri, RawQuery(raw): RawQuery) -> Reply {
    let v = version_of(uri.path());
    let (w, err) = check_query(raw.as_deref(), "_dump_nodes");
    if let Some(e) = err {
        return nodes_answer(&st, &a, v, &[], &[e], &w);
    }
    if unchanged(&st, &a, update_time(&query_pairs(raw.as_deref())), |u| u.nodes).await {
        return Reply::not_modified();
    }
    match nodes(&st, &a, Vec::new()).await {
        Ok(n) => nodes_answer(&st, &a, v, &n, &[], &w),
        Err(e) => nodes_answer(&st, &a, v, &[], &[e], &w),
    }
}

async fn get_node(State(st): State<Shared>, a: Authed, uri: Uri, Path(name): Path<String>, RawQuery(raw): RawQuery) -> Reply {
    let v = version_of(uri.path());
    let (w, err) = check_query(raw.as_deref(), "_dump_nodes");
    if let Some(e) = err {
        return nodes_answer(&st, &a, v, &[], &[e], &w);
    }
    match nodes(&st, &a, vec![name.clone()]).await {
        Ok(n) if !n.is_empty() => nodes_answer(&st, &a, v, &n, &[], &w),
        Ok(_) => nodes_answer(&st, &a, v, &[], &[error(ESLURM_INVALID_NODE_NAME, format!("Failure to query node {name}"), "_dump_nodes")], &w),
        Err(e) => nodes_answer(&st, &a, v, &[], &[e], &w),
    }
}

async fn partitions(st: &Shared, a: &Authed) -> Result<(Vec<PartitionInfo>, PartStates), RestError> {
    match st.ctl.call(&a.caller, Request::QueryPartitions).await {
        Ok(Response::Partitions(p)) => {
            let states = partition_states(st, a, &p).await;
            Ok((p, states))
        }
        Ok(_) => Ok(Default::default()),
        Err(e) => Err(ctl_error(&e, "slurm_load_partitions()")),
    }
}

async fn get_partitions(State(st): State<Shared>, a: Authed, uri: Uri, RawQuery(raw): RawQuery) -> Reply {
    let v = version_of(uri.path());
    let (w, err) = check_query(raw.as_deref(), "_dump_part");
    if let Some(e) = err {
        return parts_answer(&st, &a, v, &[], PartStates::new(), &[e], &w);
    }
    if unchanged(&st, &a, update_time(&query_pairs(raw.as_deref())), |u| u.partitions).await {
        return Reply::not_modified();
    }
    match partitions(&st, &a).await {
        Ok((p, states)) => parts_answer(&st, &a, v, &p, states, &[], &w),
        Err(e) => parts_answer(&st, &a, v, &[], PartStates::new(), &[e], &w),
    }
}

async fn get_partition(State(st): State<Shared>, a: Authed, uri: Uri, Path(name): Path<String>, RawQuery(raw): RawQuery) -> Reply {
    let v = version_of(uri.path());
    let (w, err) = check_query(raw.as_deref(), "_dump_part");
    if let Some(e) = err {
        return parts_answer(&st, &a, v, &[], PartStates::new(), &[e], &w);
    }
    if unchanged(&st, &a, update_time(&query_pairs(raw.as_deref())), |u| u.partitions).await {
        return Reply::not_modified();
    }
    match partitions(&st, &a).await {
        Ok((p, states)) => match p.into_iter().find(|p| p.name.eq_ignore_ascii_case(&name)) {
            Some(p) => parts_answer(&st, &a, v, &[p], states, &[], &w),
            None => parts_answer(&st, &a, v, &[], PartStates::new(), &[error(ESLURM_REST_INVALID_QUERY, format!("Unable to find partition {name}"), "_dump_part")], &w),
        },
        Err(e) => parts_answer(&st, &a, v, &[], PartStates::new(), &[e], &w),
    }
}

/// The routes, every data_parser version.
pub fn routes() -> Router<Shared> {
    let mut r = Router::new();
    for v in VERSIONS {
        let p = |s: &str| format!("/slurm/{}/{s}", v.as_str());
        r = both(r, &p("nodes/"), get(get_nodes));
        r = both(r, &p("node/{node_name}"), get(get_node));
        r = both(r, &p("partitions/"), get(get_partitions));
        r = both(r, &p("partition/{partition_name}"), get(get_partition));
    }
    r
}

/// The spec, every data_parser version.
pub fn spec() -> Spec {
    let mut s = Spec::default();
    for v in VERSIONS {
        let mut c = Components::default();
        let nodes = node::add_nodes_response(v, &mut c);
        let parts = node::add_partitions_response(v, &mut c);
        let q = || {
            vec![
                query_param("update_time", Schema::Int(IntFormat::I64), "Query updated more recently than this time (UNIX timestamp)"),
                query_param("flags", Schema::Str, "Query flags"),
            ]
        };
        let with = |p, mut rest: Vec<_>| {
            rest.insert(0, p);
            rest
        };
        let ops = vec![
            op(v, Method::Get, "nodes/", "get_nodes", "get node(s) info", q(), None, nodes.clone()),
            op(v, Method::Get, "node/{node_name}", "get_node", "get node info", with(path_param("node_name", "Node name"), q()), None, nodes),
            op(v, Method::Get, "partitions/", "get_partitions", "get all partition info", q(), None, parts.clone()),
            op(
                v,
                Method::Get,
                "partition/{partition_name}",
                "get_partition",
                "get partition info",
                with(path_param("partition_name", "Partition name"), q()),
                None,
                parts,
            ),
        ];
        s.merge(Spec { operations: ops, components: c });
    }
    s
}
