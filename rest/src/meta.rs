//! The envelope of every answer: `meta` (plugin, client, Slurm's version), `errors[]` and
//! `warnings[]`, in each version's shape.
//!
//! v0.0.38 (`openapi/v0.0.38`): `meta.plugin {type, name}`, `meta.Slurm {version {major,
//! micro, minor}, release}`, errors as `{error, error_number}`. The data_parser versions
//! (v0.0.41+): `meta.plugin {type, name, data_parser, accounting_storage}`, `meta.client
//! {source, user, group}`, `meta.command[]`, `meta.slurm {version, release, cluster}`,
//! errors and warnings as `{description, error_number, error, source}` /
//! `{description, source}`.

use crate::schema::{array, opt, Components, IntFormat, Schema};
use crate::version::{ApiVersion, SLURM_RELEASE};
use serde_json::{json, Value};

/// One error of an answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestError {
    /// Slurm's error number (`errno`), 0 for none.
    pub error_number: i32,
    /// Slurm's text for the number (`slurm_strerror`).
    pub error: String,
    /// What went wrong, in words (data_parser versions only).
    pub description: String,
    /// Where (`_op_handler_jobs`, a JSON path); data_parser versions only.
    pub source: String,
}

/// One warning of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestWarning {
    /// What, in words.
    pub description: String,
    /// Where.
    pub source: String,
}

/// Who asked, as `meta.client` shows it (data_parser versions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientInfo {
    /// The peer (`[127.0.0.1]:40000`, or a Unix socket's path).
    pub source: String,
    /// The user name.
    pub user: String,
    /// The group name.
    pub group: String,
}

/// The `meta` object of `version`. `cluster`: `ClusterName`.
pub fn meta(version: ApiVersion, client: &ClientInfo, cluster: &str) -> Value {
    let (major, minor, micro) = SLURM_RELEASE;
    let release = format!("{major}.{minor:02}.{micro}");
    if !version.is_data_parser() {
        return json!({
            "plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
            "Slurm": {
                "version": {"major": major, "micro": micro, "minor": minor},
                "release": release,
            },
        });
    }
    json!({
        "plugin": {
            "type": "openapi/slurmctld",
            "name": "Slurm OpenAPI slurmctld",
            "data_parser": format!("data_parser/{}", version.as_str()),
            "accounting_storage": "accounting_storage/slurmdbd",
        },
        "client": {"source": client.source, "user": client.user, "group": client.group},
        "command": [],
        "slurm": {
            "version": {"major": major.to_string(), "micro": micro.to_string(), "minor": format!("{minor:02}")},
            "release": release,
            "cluster": cluster,
        },
    })
}

/// `errors[]` in `version`'s shape.
pub fn errors(version: ApiVersion, errs: &[RestError]) -> Value {
    Value::Array(
        errs.iter()
            .map(|e| {
                if version.is_data_parser() {
                    json!({"description": e.description, "error_number": e.error_number, "error": e.error, "source": e.source})
                } else {
                    json!({"error": e.error, "error_number": e.error_number})
                }
            })
            .collect(),
    )
}

/// `warnings[]` in `version`'s shape (v0.0.38 has none: an empty array is not sent).
pub fn warnings(warns: &[RestWarning]) -> Value {
    Value::Array(
        warns
            .iter()
            .map(|w| json!({"description": w.description, "source": w.source}))
            .collect(),
    )
}

/// An answer: `meta`, `errors`, `warnings` (data_parser versions) and `body`'s keys.
/// `body` must be an object.
pub fn envelope(
    version: ApiVersion,
    client: &ClientInfo,
    cluster: &str,
    body: Value,
    errs: &[RestError],
    warns: &[RestWarning],
) -> Value {
    let mut out = json!({"meta": meta(version, client, cluster), "errors": errors(version, errs)});
    if version.is_data_parser() {
        out["warnings"] = warnings(warns);
    }
    if let Value::Object(m) = body {
        for (k, v) in m {
            out[k] = v;
        }
    }
    out
}

/// The schemas of the envelope's parts for `version`, named as Slurm's spec names them
/// (`v0.0.38_meta`, `v0.0.38_error`; `v0.0.42_openapi_meta`, `v0.0.42_openapi_error`,
/// `v0.0.42_openapi_warning`), and the names to `$ref`: (meta, error, warning).
pub fn add_schemas(
    version: ApiVersion,
    c: &mut Components,
) -> (&'static str, &'static str, Option<&'static str>) {
    let str_ = || Schema::Str;
    if !version.is_data_parser() {
        c.add(
            "v0.0.38_meta",
            Schema::Object(vec![
                opt(
                    "plugin",
                    Schema::Object(vec![opt("type", str_()), opt("name", str_())]),
                ),
                opt(
                    "Slurm",
                    Schema::Object(vec![
                        opt(
                            "version",
                            Schema::Object(vec![
                                opt("major", Schema::Int(IntFormat::I32)),
                                opt("micro", Schema::Int(IntFormat::I32)),
                                opt("minor", Schema::Int(IntFormat::I32)),
                            ]),
                        ),
                        opt("release", str_()),
                    ]),
                ),
            ]),
        );
        c.add(
            "v0.0.38_error",
            Schema::Object(vec![
                opt("error", str_()),
                opt("error_number", Schema::Int(IntFormat::I32)),
            ]),
        );
        return ("v0.0.38_meta", "v0.0.38_error", None);
    }
    let (m, e, w) = match version {
        ApiVersion::V0041 => (
            "v0.0.41_openapi_meta",
            "v0.0.41_openapi_error",
            "v0.0.41_openapi_warning",
        ),
        ApiVersion::V0042 => (
            "v0.0.42_openapi_meta",
            "v0.0.42_openapi_error",
            "v0.0.42_openapi_warning",
        ),
        ApiVersion::V0043 => (
            "v0.0.43_openapi_meta",
            "v0.0.43_openapi_error",
            "v0.0.43_openapi_warning",
        ),
        _ => (
            "v0.0.44_openapi_meta",
            "v0.0.44_openapi_error",
            "v0.0.44_openapi_warning",
        ),
    };
    c.add(
        m,
        Schema::Object(vec![
            opt(
                "plugin",
                Schema::Object(vec![
                    opt("type", str_()),
                    opt("name", str_()),
                    opt("data_parser", str_()),
                    opt("accounting_storage", str_()),
                ]),
            ),
            opt(
                "client",
                Schema::Object(vec![
                    opt("source", str_()),
                    opt("user", str_()),
                    opt("group", str_()),
                ]),
            ),
            opt("command", array(str_())),
            opt(
                "slurm",
                Schema::Object(vec![
                    opt(
                        "version",
                        Schema::Object(vec![
                            opt("major", str_()),
                            opt("micro", str_()),
                            opt("minor", str_()),
                        ]),
                    ),
                    opt("release", str_()),
                    opt("cluster", str_()),
                ]),
            ),
        ]),
    );
    c.add(
        e,
        Schema::Object(vec![
            opt("description", str_()),
            opt("error_number", Schema::Int(IntFormat::I32)),
            opt("error", str_()),
            opt("source", str_()),
        ]),
    );
    c.add(
        w,
        Schema::Object(vec![opt("description", str_()), opt("source", str_())]),
    );
    (m, e, Some(w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::req;

    #[test]
    fn every_envelope_validates_against_its_own_schema() {
        for v in ApiVersion::ALL {
            let mut c = Components::default();
            let (m, e, w) = add_schemas(v, &mut c);
            let mut fields = vec![
                req("meta", Schema::Ref(m)),
                req("errors", array(Schema::Ref(e))),
            ];
            if let Some(w) = w {
                fields.push(req("warnings", array(Schema::Ref(w))));
            }
            fields.push(req("x", Schema::Int(IntFormat::I32)));
            let err = RestError {
                error_number: 2017,
                error: "Invalid job id specified".into(),
                ..RestError::default()
            };
            let doc = envelope(v, &ClientInfo::default(), "c", json!({"x": 1}), &[err], &[]);
            c.validate(&doc, &Schema::Object(fields)).unwrap();
        }
    }
}
