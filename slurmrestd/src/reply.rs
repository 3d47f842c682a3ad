//! HTTP answers in Slurm's envelope ([`flotilla_rest::meta::envelope`]): a JSON body with
//! `meta`, `errors[]`, `warnings[]` and the version's keys, and the status code.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use flotilla_proto::SlurmError;
use flotilla_rest::{ApiVersion, ClientInfo, RestError, RestWarning};
use serde_json::Value;

/// One answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The HTTP status.
    pub status: StatusCode,
    /// The JSON body.
    pub body: Value,
}

impl Reply {
    /// 200 with `body` (already enveloped, or a plain document such as the OpenAPI spec).
    pub fn ok(body: Value) -> Reply {
        Reply {
            status: StatusCode::OK,
            body,
        }
    }

    /// 304 Not Modified, without a body: nothing changed since the query's `update_time`
    /// (slurmrestd's answer to `SLURM_NO_CHANGE_IN_DATA`, RFC 7232 §4.1; `_call_handler`).
    pub fn not_modified() -> Reply {
        Reply {
            status: StatusCode::NOT_MODIFIED,
            body: Value::Null,
        }
    }

    /// `status` with the envelope of `version` around `body`'s keys and `errs`.
    pub fn enveloped(
        status: StatusCode,
        version: ApiVersion,
        client: &ClientInfo,
        cluster: &str,
        body: Value,
        errs: &[RestError],
        warns: &[RestWarning],
    ) -> Reply {
        Reply {
            status,
            body: flotilla_rest::meta::envelope(version, client, cluster, body, errs, warns),
        }
    }

    /// An error answer: `status` and one error from the controller's `e` (its number and
    /// Slurm's text; `source` names where, for the data_parser versions).
    pub fn slurm_error(
        status: StatusCode,
        version: ApiVersion,
        client: &ClientInfo,
        cluster: &str,
        e: &SlurmError,
        source: &str,
    ) -> Reply {
        let err = rest_error(e, source);
        Reply::enveloped(
            status,
            version,
            client,
            cluster,
            Value::Object(Default::default()),
            &[err],
            &[],
        )
    }
}

/// The HTTP status of a controller error: 401 for an authentication failure (a token
/// refused: missing, forged, expired, another key), 500 for the rest.
pub fn status_of(e: &SlurmError) -> StatusCode {
    use flotilla_proto::errno::{ESLURM_AUTH_CRED_INVALID, ESLURM_AUTH_EXPIRED, SLURM_PROTOCOL_AUTHENTICATION_ERROR};
    match e.code {
        SLURM_PROTOCOL_AUTHENTICATION_ERROR | ESLURM_AUTH_CRED_INVALID | ESLURM_AUTH_EXPIRED => StatusCode::UNAUTHORIZED,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The `errors[]` entry of a controller error: its number, Slurm's text, and the messages
/// the controller sent with it as the description.
pub fn rest_error(e: &SlurmError, source: &str) -> RestError {
    RestError {
        error_number: e.code,
        error: e.text.clone(),
        description: if e.messages.is_empty() {
            e.text.clone()
        } else {
            e.messages.join("; ")
        },
        source: source.to_string(),
    }
}

/// Bodies are compact JSON (Slurm's slurmrestd pretty-prints: the same document, 40 % more
/// bytes and time for a large job list).
impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        if self.status == StatusCode::NOT_MODIFIED {
            return self.status.into_response();
        }
        let mut bytes = serde_json::to_vec(&self.body).unwrap_or_default();
        bytes.push(b'\n');
        let mut r = (self.status, bytes).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    }
}
