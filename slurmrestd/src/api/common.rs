//! What the `/slurm/vX/` modules share: error answers with Slurm's HTTP status, query strings,
//! the caller as a user, and operations of the spec.

use crate::app::{AppState, Authed};
use crate::reply::{rest_error, Reply};
use axum::http::StatusCode;
use flotilla_proto::SlurmError;
use flotilla_rest::dp::submit::Who;
use flotilla_rest::schema::{Method, Operation, Param, Schema};
use flotilla_rest::{ApiVersion, RestError, RestWarning};
use serde_json::Value;

/// The HTTP status of error number `code` in `v` (`flotilla_rest::dp::http_status`, 22.05's
/// `flotilla_rest::v38::http_status` for v0.0.38), 401 for a refused credential as
/// [`crate::reply::status_of`] says.
pub fn status_for(v: ApiVersion, code: i32) -> StatusCode {
    let e = SlurmError::new(code);
    if crate::reply::status_of(&e) == StatusCode::UNAUTHORIZED {
        return StatusCode::UNAUTHORIZED;
    }
    let n = if v.is_data_parser() { flotilla_rest::dp::http_status(code) } else { flotilla_rest::v38::http_status(code) };
    StatusCode::from_u16(n).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// An answer of `v` with `body`'s keys (the answer's required keys, empty on failure),
/// `errs` and `warns`; its status is the first error's, 200 without one.
pub fn answer(st: &AppState, a: &Authed, v: ApiVersion, body: Value, errs: &[RestError], warns: &[RestWarning]) -> Reply {
    let status = errs.first().map_or(StatusCode::OK, |e| status_for(v, e.error_number));
    Reply::enveloped(status, v, &a.client, &st.cluster, body, errs, warns)
}

/// The query's `update_time` (s), when it has one that is a number.
pub fn update_time(q: &[(String, String)]) -> Option<i64> {
    q.iter().find(|(k, _)| k == "update_time").and_then(|(_, t)| t.parse().ok())
}

/// Whether what `pick` names of the controller's [`flotilla_proto::UpdateTimes`] is
/// unchanged for a query with `update_time` (Slurm's `slurm_load_*` answering
/// `SLURM_NO_CHANGE_IN_DATA`). No `update_time`, or a controller that does not answer: false
/// (the full answer follows, with its own error if any).
pub async fn unchanged(st: &AppState, a: &Authed, update_time: Option<i64>, pick: fn(&flotilla_proto::UpdateTimes) -> i64) -> bool {
    let Some(t) = update_time else { return false };
    match st.ctl.call(&a.caller, flotilla_proto::Request::QueryUpdateTimes).await {
        Ok(flotilla_proto::Response::UpdateTimes(u)) => flotilla_proto::UpdateTimes::unchanged(pick(&u), t),
        _ => false,
    }
}

/// The `errors[]` entry of a controller error `e` at `source`.
pub fn ctl_error(e: &SlurmError, source: &str) -> RestError {
    rest_error(e, source)
}

/// A REST error of Slurm's `number` (its text from Flotilla's table or the REST ones),
/// `description`, at `source`.
pub fn error(number: i32, description: impl Into<String>, source: &str) -> RestError {
    let text = flotilla_rest::dp::rest_strerror(number)
        .map_or_else(|| flotilla_proto::errno::strerror(number).to_string(), str::to_string);
    RestError { error_number: number, error: text, description: description.into(), source: source.to_string() }
}

/// A warning at `source`.
pub fn warning(description: impl Into<String>, source: &str) -> RestWarning {
    RestWarning { description: description.into(), source: source.to_string() }
}

fn unhex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// `%XX` and `+` decoded (a malformed escape is kept as written).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (unhex(b[i + 1]), unhex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h * 16 + l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The pairs of a query string, decoded, in order.
pub fn query_pairs(raw: Option<&str>) -> Vec<(String, String)> {
    raw.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Warnings for the keys of a query other than `known`: ignored, as Slurm's parser ignores
/// an unknown field ("Ignoring unknown field").
pub fn only_keys(q: &[(String, String)], known: &[&str], source: &str) -> Vec<RestWarning> {
    q.iter()
        .filter(|(k, _)| !known.contains(&k.as_str()))
        .map(|(k, _)| warning(format!("Ignoring unknown field \"{k}\" of the query"), source))
        .collect()
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn who_of(u: nix::unistd::User) -> Who {
    Who { uid: u.uid.as_raw(), gid: u.gid.as_raw(), user: u.name, home: u.dir.display().to_string() }
}

/// A user by name or number, from the password database.
pub fn user(name_or_id: &str) -> Option<Who> {
    let u = match name_or_id.parse::<u32>() {
        Ok(n) => nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(n)).ok().flatten(),
        Err(_) => nix::unistd::User::from_name(name_or_id).ok().flatten(),
    };
    u.map(who_of)
}

/// A group's gid by name.
pub fn group(name: &str) -> Option<u32> {
    nix::unistd::Group::from_name(name).ok().flatten().map(|g| g.gid.as_raw())
}

/// A user's name by uid (the number when it has none).
pub fn user_name(uid: u32) -> String {
    user(&uid.to_string()).map_or_else(|| uid.to_string(), |w| w.user)
}

/// base64url without padding (a JWT's parts), `None` for another character.
fn base64url(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.trim_end_matches('=').bytes() {
        acc = (acc << 6) | u32::from(val(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// The user a token names (its `sun` claim, else `username`), read without checking the signature: only to
/// fill a submission's uid when no `X-SLURM-USER-NAME` came; the controller verifies the
/// token and refuses a submission for another uid.
fn token_user(token: &str) -> Option<String> {
    let claims = base64url(token.split('.').nth(1)?)?;
    let v: Value = serde_json::from_slice(&claims).ok()?;
    v.get("sun").or_else(|| v.get("username")).and_then(Value::as_str).map(str::to_string)
}

/// Who a request is from as a submitter: slurmrestd's own user for `rest_auth/local`, the
/// token's `X-SLURM-USER-NAME` (else the user the token names) for a token; the controller
/// checks that the token may act as them.
pub fn caller(st: &AppState, a: &Authed) -> Result<Who, RestError> {
    let found = match &a.caller {
        crate::ctl::Caller::Local => user(&st.my_uid.to_string()),
        crate::ctl::Caller::Token(t) if !t.user_name.is_empty() => user(&t.user_name),
        crate::ctl::Caller::Token(t) => token_user(&t.token).and_then(|n| user(&n)),
    };
    found.ok_or_else(|| {
        error(flotilla_proto::errno::ESLURM_USER_ID_MISSING, "the caller is not a user of this host", "caller")
    })
}

/// A path parameter.
pub fn path_param(name: &'static str, description: &'static str) -> Param {
    Param { name, in_path: true, schema: Schema::Str, description }
}

/// A query parameter.
pub fn query_param(name: &'static str, schema: Schema, description: &'static str) -> Param {
    Param { name, in_path: false, schema, description }
}

/// An operation of `v` tagged `slurm`: `operationId` `slurm_v0042_NAME`.
#[allow(clippy::too_many_arguments)] // one per part of an operation, named at each call
pub fn op(v: ApiVersion, method: Method, path: &str, id: &str, summary: &'static str, params: Vec<Param>, body: Option<Schema>, response: Schema) -> Operation {
    Operation {
        method,
        path: format!("/slurm/{}/{path}", v.as_str()),
        operation_id: format!("slurm_{}_{id}", v.short()),
        summary,
        tag: "slurm",
        params,
        body,
        response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tokens_user_is_read() {
        // {"alg":"HS256","typ":"JWT"} . {"exp":1,"iat":0,"sun":"alice"} . signature
        let t = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjEsImlhdCI6MCwic3VuIjoiYWxpY2UifQ.x";
        assert_eq!(token_user(t).as_deref(), Some("alice"));
        assert_eq!(token_user("a.!!.c"), None);
    }

    #[test]
    fn queries_decode() {
        assert_eq!(
            query_pairs(Some("signal=SIGTERM&flags=BATCH_JOB%2CFULL_JOB&x")),
            [("signal".into(), "SIGTERM".into()), ("flags".into(), "BATCH_JOB,FULL_JOB".into()), ("x".into(), String::new())]
        );
        assert_eq!(query_pairs(Some("a=%zz")), [("a".to_string(), "%zz".to_string())]);
        assert_eq!(query_pairs(None), []);
    }
}
