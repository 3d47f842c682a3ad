//! The objects of Slurm's `data_parser` versions (v0.0.41–v0.0.44) that `slurmrestd`'s
//! `/slurm/vX/` endpoints answer with: jobs ([`job`]), nodes and partitions ([`node`]), the
//! controller's statistics ([`diag`]), and job submission ([`submit`]). Each object is one
//! [`Model`](crate::model::Model) per version, so the schema served and the JSON sent agree.
//!
//! Names and shapes are the `slurmrestapi` 25.11.4 client's models (generated from Slurm's
//! own `openapi.json`); integer formats are Slurm 25.11's `data_parser/v0.0.4x/parsers.c`
//! (`UINT16`/`UINT32` → `int32`, `UINT64` → `int64`, `*_NO_VAL` → the `{set, infinite,
//! number}` structs). v0.0.41 (Slurm 24.05) names none of its nested objects: everything is
//! inline there; v0.0.42 and later name them (`v0.0.42_uint32_no_val_struct`,
//! `v0.0.42_job_info`, ...).

pub mod db;
pub mod diag;
pub mod job;
pub mod node;
pub mod submit;

use crate::schema::{array, opt, Components, Field, IntFormat, Schema};
use crate::version::ApiVersion;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Mutex;

/// `ESLURM_REST_INVALID_QUERY` (`slurm_errno.h`): a query or parameter that does not parse.
pub const ESLURM_REST_INVALID_QUERY: i32 = 9000;
/// `ESLURM_REST_FAIL_PARSING`: a body that does not parse.
pub const ESLURM_REST_FAIL_PARSING: i32 = 9001;
/// `ESLURM_REST_INVALID_JOBS_DESC`: a submission without a job description.
pub const ESLURM_REST_INVALID_JOBS_DESC: i32 = 9002;

/// Slurm's text for the REST errors above (`slurm_errno.c`), `None` for other numbers.
pub fn rest_strerror(code: i32) -> Option<&'static str> {
    match code {
        ESLURM_REST_INVALID_QUERY => Some("Query empty or not RFC7320 compliant"),
        ESLURM_REST_FAIL_PARSING => Some("Failure during parsing"),
        ESLURM_REST_INVALID_JOBS_DESC => {
            Some("Jobs description entry not found, empty or not dictionary or list")
        }
        _ => None,
    }
}

/// The HTTP status Slurm answers an error number with (`src/common/http.c`
/// `http_status_errors`): 422 for an invalid query, 400 for a body that does not parse, 404
/// for an unknown job id, 502 when the controller cannot be reached (504 on a timeout), 500
/// for the rest.
///
/// Where Slurm 25.11 answers 500 for what the request got wrong, this answers 4xx (a
/// deviation, so that a server error always means the server's fault): an unknown node or
/// partition is 404 like an unknown job, `ESLURM_ACCESS_DENIED` 403, an authentication
/// failure 401, and the other request errors of Slurm's `ESLURM_*` range (2000–2999: an
/// invalid partition, time limit, GRES, ... in a submission or an update) 400.
pub fn http_status(code: i32) -> u16 {
    match code {
        0 => 200,
        ESLURM_REST_INVALID_QUERY => 422,
        ESLURM_REST_FAIL_PARSING | ESLURM_REST_INVALID_JOBS_DESC => 400,
        // ESLURM_INVALID_JOB_ID, ESLURM_INVALID_NODE_NAME, ESLURM_INVALID_PARTITION_NAME
        2017 | 2018 | 2000 => 404,
        // ESLURM_ACCESS_DENIED
        2002 => 403,
        // SLURM_PROTOCOL_AUTHENTICATION_ERROR, ESLURM_AUTH_CRED_INVALID, ESLURM_AUTH_EXPIRED
        1007 | 6000 | 6001 => 401,
        2001..=2999 => 400,
        // SLURM_COMMUNICATIONS_{CONNECTION,SEND,RECEIVE,SHUTDOWN}_ERROR,
        // SLURMCTLD_COMMUNICATIONS_* (to BACKOFF), ESLURM_PROTOCOL_INCOMPLETE_PACKET,
        // SLURM_PROTOCOL_SOCKET_ZERO_BYTES_SENT, ESLURM_DB_CONNECTION
        1001..=1004 | 1800..=1804 | 5003 | 5005 | 7000 => 502,
        // SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT
        5004 => 504,
        _ => 500,
    }
}

/// `v0.0.42_NAME` for a component of `v`, as a `&'static str` (each name made once).
pub fn name(v: ApiVersion, base: &str) -> &'static str {
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let s = format!("{}_{base}", v.as_str());
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(s.as_str()) {
        return n;
    }
    let n: &'static str = Box::leak(s.into_boxed_str());
    names.insert(n);
    n
}

/// The width of a `*_NO_VAL` number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// `UINT16_NO_VAL` (`int32` in the spec).
    U16,
    /// `UINT32_NO_VAL` (`int32`).
    U32,
    /// `UINT64_NO_VAL` (`int64`).
    U64,
}

fn no_val_object(w: Width) -> Schema {
    let f = if w == Width::U64 { IntFormat::I64 } else { IntFormat::I32 };
    Schema::Object(vec![
        opt("set", Schema::Bool).about("True if number has been set; False if number is unset"),
        opt("infinite", Schema::Bool).about("True if number has been set to infinite; \"set\" and \"number\" will be ignored"),
        opt("number", Schema::Int(f)).about("If \"set\" is True the number will be set with value; otherwise ignore number contents"),
    ])
}

/// The schema of a `*_NO_VAL` number of `v`: inline in v0.0.41, a `$ref` from v0.0.42.
pub fn no_val(v: ApiVersion, w: Width) -> Schema {
    if v == ApiVersion::V0041 {
        return no_val_object(w);
    }
    Schema::Ref(name(
        v,
        match w {
            Width::U16 => "uint16_no_val_struct",
            Width::U32 => "uint32_no_val_struct",
            Width::U64 => "uint64_no_val_struct",
        },
    ))
}

/// A set number: `{set: true, infinite: false, number}`.
pub fn set(n: impl Into<i64>) -> Value {
    json!({"set": true, "infinite": false, "number": n.into()})
}

/// `NO_VAL` (Slurm's unset): `{set: false, infinite: false, number: 0}`.
pub fn unset() -> Value {
    json!({"set": false, "infinite": false, "number": 0})
}

/// `INFINITE` (`UNLIMITED`): `{set: false, infinite: true, number: 0}`, as Slurm's
/// `DUMP_FUNC(UINT32_NO_VAL)` writes it.
pub fn infinite() -> Value {
    json!({"set": false, "infinite": true, "number": 0})
}

/// `Some(n)`: set; `None`: unset.
pub fn maybe(n: Option<i64>) -> Value {
    n.map_or_else(unset, set)
}

/// The schema of `PROCESS_EXIT_CODE_VERBOSE` in `v`.
pub fn exit_code(v: ApiVersion) -> Schema {
    if v != ApiVersion::V0041 {
        return Schema::Ref(name(v, "process_exit_code_verbose"));
    }
    exit_code_object(v)
}

fn exit_code_object(v: ApiVersion) -> Schema {
    Schema::Object(vec![
        opt(
            "status",
            array(Schema::Enum(vec!["INVALID", "PENDING", "SUCCESS", "ERROR", "SIGNALED", "CORE_DUMPED"])),
        )
        .about("Status given by return code"),
        opt("return_code", no_val(v, Width::U32)).about("Process return code (numeric)"),
        opt(
            "signal",
            Schema::Object(vec![
                opt("id", no_val(v, Width::U16)).about("Signal sent to process (numeric)"),
                opt("name", Schema::Str).about("Signal sent to process (name)"),
            ]),
        ),
    ])
}

/// An exit as Slurm's `PROCESS_EXIT_CODE` dumps it: `None` (not ended yet: Slurm's
/// `NO_VAL`) is `PENDING`; a signal is `SIGNALED` with its number and name; otherwise the
/// return code, `SUCCESS` when 0 and `ERROR` else.
pub fn exit_code_value(ended: Option<(i32, i32)>) -> Value {
    match ended {
        None => json!({"status": ["PENDING"], "return_code": unset(), "signal": {"id": unset(), "name": ""}}),
        Some((_, sig)) if sig != 0 => json!({
            "status": ["SIGNALED"],
            "return_code": unset(),
            "signal": {"id": set(sig), "name": signal_name(sig)},
        }),
        Some((code, _)) => json!({
            "status": [if code == 0 { "SUCCESS" } else { "ERROR" }],
            "return_code": set(code),
            "signal": {"id": unset(), "name": ""},
        }),
    }
}

/// Slurm's signal names (`proc_args.c` `signals_mapping`), without `SIG`.
const SIGNALS: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ABRT", 6),
    ("KILL", 9),
    ("ALRM", 14),
    ("TERM", 15),
    ("CHLD", 17),
    ("USR1", 10),
    ("USR2", 12),
    ("PIPE", 13),
    ("URG", 23),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("XCPU", 24),
];

/// A signal's name (`sig_num2name`: `KILL`; the number for one without a name).
pub fn signal_name(sig: i32) -> String {
    SIGNALS
        .iter()
        .find(|(_, n)| *n == sig)
        .map_or_else(|| sig.to_string(), |(s, _)| s.to_string())
}

/// A signal given by number or name, with or without `SIG`, any case (`sig_name2num`);
/// `None` for an unknown name or a number outside 1–64.
pub fn signal_number(s: &str) -> Option<i32> {
    let s = s.trim();
    if let Ok(n) = s.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let u = s.to_ascii_uppercase();
    let u = u.strip_prefix("SIG").unwrap_or(&u);
    SIGNALS.iter().find(|(n, _)| *n == u).map(|(_, v)| *v)
}

/// Adds the components every object of `v` refers to (the `*_no_val_struct`s and
/// `process_exit_code_verbose`; none in v0.0.41, where they are inline).
pub fn add_common(v: ApiVersion, c: &mut Components) {
    if v == ApiVersion::V0041 {
        return;
    }
    c.add(name(v, "uint16_no_val_struct"), no_val_object(Width::U16));
    c.add(name(v, "uint32_no_val_struct"), no_val_object(Width::U32));
    c.add(name(v, "uint64_no_val_struct"), no_val_object(Width::U64));
    c.add(name(v, "process_exit_code_verbose"), exit_code_object(v));
}

/// The envelope's properties of an answer of `v` (`meta`, `errors`, `warnings`: all
/// optional), its components added to `c`.
pub fn envelope_fields(v: ApiVersion, c: &mut Components) -> Vec<Field> {
    let (m, e, w) = crate::meta::add_schemas(v, c);
    let mut f = vec![opt("meta", Schema::Ref(m)), opt("errors", array(Schema::Ref(e)))];
    if let Some(w) = w {
        f.push(opt("warnings", array(Schema::Ref(w))));
    }
    f
}

/// The data_parser versions, oldest first.
pub const VERSIONS: [ApiVersion; 4] = [ApiVersion::V0041, ApiVersion::V0042, ApiVersion::V0043, ApiVersion::V0044];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_parse_as_slurms() {
        assert_eq!(signal_number("KILL"), Some(9));
        assert_eq!(signal_number("sigterm"), Some(15));
        assert_eq!(signal_number("10"), Some(10));
        assert_eq!(signal_number("NOPE"), None);
        assert_eq!(signal_number("0"), None);
        assert_eq!(signal_name(9), "KILL");
        assert_eq!(signal_name(40), "40");
    }

    #[test]
    fn exit_codes_validate_in_every_version() {
        for v in VERSIONS {
            let mut c = Components::default();
            add_common(v, &mut c);
            for e in [None, Some((0, 0)), Some((3, 0)), Some((0, 9))] {
                c.validate(&exit_code_value(e), &exit_code(v)).unwrap();
            }
            c.validate(&infinite(), &no_val(v, Width::U32)).unwrap();
        }
        assert_eq!(name(ApiVersion::V0042, "job_info"), "v0.0.42_job_info");
        assert!(std::ptr::eq(name(ApiVersion::V0042, "job_info"), name(ApiVersion::V0042, "job_info")));
    }

    #[test]
    fn statuses_are_slurms_but_client_faults_are_never_5xx() {
        assert_eq!(http_status(2017), 404);
        assert_eq!(http_status(ESLURM_REST_INVALID_QUERY), 422);
        assert_eq!(http_status(1001), 502);
        assert_eq!(http_status(5004), 504);
        // Slurm 25.11: 500 for these; here the request's fault is 4xx.
        assert_eq!(http_status(2018), 404, "unknown node");
        assert_eq!(http_status(2000), 404, "unknown partition");
        assert_eq!(http_status(2002), 403);
        assert_eq!(http_status(2051), 400, "invalid time limit");
        assert_eq!(http_status(1007), 401);
        assert_eq!(http_status(-1), 500);
    }
}
