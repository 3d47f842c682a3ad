//! Schemas of the JSON we emit, as data: one [`Schema`] per object, from which the OpenAPI
//! document (`GET /openapi/v3`) is written ([`Spec::to_openapi`]) and against which every
//! response can be checked ([`Components::validate`]). Emitting from one description keeps
//! the spec we serve and the bytes we send from drifting apart; the tests validate every
//! response they see, strictly (a key the schema does not name is an error).
//!
//! Shapes follow OpenAPI 3.0.3 as Slurm's `openapi.json` uses it: objects with named
//! properties and a `required` list, arrays with `items`, `$ref` to
//! `#/components/schemas/NAME`, `enum` on strings, maps as `additionalProperties`.

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// One JSON shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Schema {
    /// A string.
    Str,
    /// A string that is one of these words.
    Enum(Vec<&'static str>),
    /// An integer (`format` `int32` or `int64`, as Slurm's spec says; 64 when unsaid).
    Int(IntFormat),
    /// A number (`double`).
    Num,
    /// `true`/`false`.
    Bool,
    /// An array of one shape.
    Array(Box<Schema>),
    /// An object with these properties (closed: no other keys).
    Object(Vec<Field>),
    /// An object whose keys are free and whose values have one shape.
    Map(Box<Schema>),
    /// A named schema in `components`.
    Ref(&'static str),
    /// Anything (`{}` in the spec); used sparingly, for Slurm's free-form fields.
    Any,
}

/// An integer's OpenAPI `format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntFormat {
    /// `int32`. Slurm's data_parser declares its unsigned 32-bit fields (`UINT32`,
    /// `UINT32_NO_VAL`'s `number`) as `int32` and writes their whole range (priority/basic's
    /// 4294901759), so a check accepts -2^31 ..= 2^32-1.
    I32,
    /// `int64`.
    I64,
}

/// A property of an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The key.
    pub name: &'static str,
    /// Its shape.
    pub schema: Schema,
    /// Whether every instance has it.
    pub required: bool,
    /// The spec's description; empty: none.
    pub description: &'static str,
}

/// An optional property.
pub fn opt(name: &'static str, schema: Schema) -> Field {
    Field {
        name,
        schema,
        required: false,
        description: "",
    }
}

/// A required property.
pub fn req(name: &'static str, schema: Schema) -> Field {
    Field {
        name,
        schema,
        required: true,
        description: "",
    }
}

impl Field {
    /// The same with a description.
    pub fn about(mut self, description: &'static str) -> Field {
        self.description = description;
        self
    }
}

/// `Schema::Array(Box::new(s))`.
pub fn array(s: Schema) -> Schema {
    Schema::Array(Box::new(s))
}

/// `Schema::Map(Box::new(s))`.
pub fn map(s: Schema) -> Schema {
    Schema::Map(Box::new(s))
}

/// The named schemas of one document (`components.schemas`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Components {
    schemas: BTreeMap<&'static str, Schema>,
}

impl Components {
    /// Adds (or replaces) `name`.
    pub fn add(&mut self, name: &'static str, schema: Schema) {
        self.schemas.insert(name, schema);
    }

    /// The schema called `name`.
    pub fn get(&self, name: &str) -> Option<&Schema> {
        self.schemas.get(name)
    }

    /// Every name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.schemas.keys().copied()
    }

    /// Checks `v` against `schema`, strictly: a missing required key, a key the object does
    /// not name, a wrong type or an unknown word is an error naming its JSON path
    /// (`$.jobs[3].job_state`). A `Ref` to a name not in `self` is an error too.
    pub fn validate(&self, v: &Value, schema: &Schema) -> Result<(), String> {
        self.check(v, schema, "$")
    }

    fn check(&self, v: &Value, schema: &Schema, path: &str) -> Result<(), String> {
        let bad = |want: &str| Err(format!("{path}: expected {want}, found {}", short(v)));
        match schema {
            Schema::Any => Ok(()),
            Schema::Str => {
                if v.is_string() {
                    Ok(())
                } else {
                    bad("a string")
                }
            }
            Schema::Enum(words) => match v.as_str() {
                Some(s) if words.contains(&s) => Ok(()),
                Some(s) => Err(format!("{path}: {s:?} is not one of {words:?}")),
                None => bad("a string"),
            },
            Schema::Int(IntFormat::I32) => match v.as_i64() {
                Some(i) if i32::try_from(i).is_ok() || u32::try_from(i).is_ok() => Ok(()),
                _ => bad("an int32"),
            },
            Schema::Int(IntFormat::I64) => {
                if v.is_i64() || v.is_u64() {
                    Ok(())
                } else {
                    bad("an integer")
                }
            }
            Schema::Num => {
                if v.is_number() {
                    Ok(())
                } else {
                    bad("a number")
                }
            }
            Schema::Bool => {
                if v.is_boolean() {
                    Ok(())
                } else {
                    bad("a boolean")
                }
            }
            Schema::Array(item) => {
                let Some(items) = v.as_array() else {
                    return bad("an array");
                };
                items
                    .iter()
                    .enumerate()
                    .try_for_each(|(i, x)| self.check(x, item, &format!("{path}[{i}]")))
            }
            Schema::Map(value) => {
                let Some(m) = v.as_object() else {
                    return bad("an object");
                };
                m.iter()
                    .try_for_each(|(k, x)| self.check(x, value, &format!("{path}.{k}")))
            }
            Schema::Object(fields) => {
                let Some(m) = v.as_object() else {
                    return bad("an object");
                };
                for f in fields {
                    match m.get(f.name) {
                        Some(x) => self.check(x, &f.schema, &format!("{path}.{}", f.name))?,
                        None if f.required => {
                            return Err(format!("{path}: required key {:?} missing", f.name))
                        }
                        None => {}
                    }
                }
                match m
                    .keys()
                    .find(|k| !fields.iter().any(|f| f.name == k.as_str()))
                {
                    Some(k) => Err(format!("{path}: key {k:?} is not in the schema")),
                    None => Ok(()),
                }
            }
            Schema::Ref(name) => match self.schemas.get(name) {
                Some(s) => self.check(v, s, path),
                None => Err(format!("{path}: schema {name:?} is not defined")),
            },
        }
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 60 {
        format!(
            "{}...",
            &s[..s
                .char_indices()
                .take(57)
                .last()
                .map_or(0, |(i, c)| i + c.len_utf8())]
        )
    } else {
        s
    }
}

/// The OpenAPI form of one schema.
pub fn to_openapi(schema: &Schema) -> Value {
    match schema {
        Schema::Str => json!({"type": "string"}),
        Schema::Enum(words) => json!({"type": "string", "enum": words}),
        Schema::Int(IntFormat::I32) => json!({"type": "integer", "format": "int32"}),
        Schema::Int(IntFormat::I64) => json!({"type": "integer", "format": "int64"}),
        Schema::Num => json!({"type": "number", "format": "double"}),
        Schema::Bool => json!({"type": "boolean"}),
        Schema::Array(item) => json!({"type": "array", "items": to_openapi(item)}),
        Schema::Map(value) => json!({"type": "object", "additionalProperties": to_openapi(value)}),
        Schema::Ref(name) => json!({"$ref": format!("#/components/schemas/{name}")}),
        Schema::Any => json!({}),
        Schema::Object(fields) => {
            let mut props = Map::new();
            for f in fields {
                let mut p = to_openapi(&f.schema);
                if !f.description.is_empty() {
                    // A sibling of `$ref` is ignored by OpenAPI 3.0; wrap it.
                    if p.get("$ref").is_some() {
                        p = json!({"allOf": [p]});
                    }
                    p["description"] = json!(f.description);
                }
                props.insert(f.name.to_string(), p);
            }
            let required: Vec<&str> = fields
                .iter()
                .filter(|f| f.required)
                .map(|f| f.name)
                .collect();
            let mut o =
                json!({"type": "object", "properties": props, "additionalProperties": false});
            if !required.is_empty() {
                o["required"] = json!(required);
            }
            o
        }
    }
}

/// An HTTP method of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    /// GET.
    Get,
    /// POST.
    Post,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

impl Method {
    fn key(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::Post => "post",
            Method::Patch => "patch",
            Method::Delete => "delete",
        }
    }
}

/// A parameter of an operation (in the path or the query string).
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Its name.
    pub name: &'static str,
    /// `true`: in the path (`{name}`); `false`: in the query.
    pub in_path: bool,
    /// Its shape (a string or an integer).
    pub schema: Schema,
    /// Its description.
    pub description: &'static str,
}

/// One operation of the API.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// The method.
    pub method: Method,
    /// The path, with `{param}` placeholders (`/slurm/v0.0.42/job/{job_id}`).
    pub path: String,
    /// Its `operationId` (Slurm's: `slurm_v0042_get_jobs`).
    pub operation_id: String,
    /// A one-line summary.
    pub summary: &'static str,
    /// Its tag (`slurm`, `slurmdb`, `openapi`, `flotilla`).
    pub tag: &'static str,
    /// Its parameters.
    pub params: Vec<Param>,
    /// The request body's schema, if it takes one.
    pub body: Option<Schema>,
    /// The schema of its answers (success and error alike, as Slurm's).
    pub response: Schema,
}

/// A whole OpenAPI document: operations and named schemas. Versions add theirs
/// ([`Spec::merge`]) and `GET /openapi/v3` serves the union.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spec {
    /// The operations.
    pub operations: Vec<Operation>,
    /// The named schemas.
    pub components: Components,
}

impl Spec {
    /// Adds `other`'s operations and schemas.
    pub fn merge(&mut self, other: Spec) {
        self.operations.extend(other.operations);
        self.components.schemas.extend(other.components.schemas);
    }

    /// The OpenAPI 3.0.3 document. `security`: the API-key schemes of Slurm's spec
    /// (`X-SLURM-USER-NAME`, `X-SLURM-USER-TOKEN`) are declared and required by every
    /// operation.
    pub fn to_openapi(&self, title: &str, version: &str) -> Value {
        let mut paths: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
        for op in &self.operations {
            let params: Vec<Value> = op
                .params
                .iter()
                .map(|p| {
                    json!({
                        "name": p.name,
                        "in": if p.in_path { "path" } else { "query" },
                        "required": p.in_path,
                        "description": p.description,
                        "schema": to_openapi(&p.schema),
                        "style": if p.in_path { "simple" } else { "form" },
                        "explode": false,
                    })
                })
                .collect();
            let content = json!({"application/json": {"schema": to_openapi(&op.response)}});
            let failure = json!({"application/json": {"schema": self.failure_schema(&op.response)}});
            let mut o = json!({
                "tags": [op.tag],
                "summary": op.summary,
                "operationId": op.operation_id,
                "parameters": params,
                "responses": {
                    "200": {"description": "success", "content": content},
                    "default": {"description": "an error", "content": failure},
                },
            });
            // An operation taking `update_time` may answer 304 Not Modified, without a body
            // (slurmrestd's `_call_handler` on `SLURM_NO_CHANGE_IN_DATA`).
            if op.params.iter().any(|p| p.name == "update_time" && !p.in_path) {
                o["responses"]["304"] = json!({"description": "not modified since update_time"});
            }
            if let Some(b) = &op.body {
                o["requestBody"] = json!({
                    "required": true,
                    "content": {"application/json": {"schema": to_openapi(b)}},
                });
            }
            paths
                .entry(op.path.as_str())
                .or_default()
                .insert(op.method.key().to_string(), o);
        }
        let schemas: Map<String, Value> = self
            .components
            .schemas
            .iter()
            .map(|(k, s)| (k.to_string(), to_openapi(s)))
            .collect();
        json!({
            "openapi": "3.0.3",
            "info": {"title": title, "version": version, "license": {"name": "Apache 2.0", "url": "https://www.apache.org/licenses/LICENSE-2.0.html"}},
            "tags": [{"name": "slurm"}, {"name": "slurmdb"}, {"name": "openapi"}, {"name": "flotilla"}],
            "paths": paths,
            "components": {
                "schemas": schemas,
                "securitySchemes": {
                    "user": {"type": "apiKey", "in": "header", "name": "X-SLURM-USER-NAME"},
                    "token": {"type": "apiKey", "in": "header", "name": "X-SLURM-USER-TOKEN"},
                },
            },
            // A token names its user; the user name header is optional (slurmrestd's JWT
            // auth reads the token's `sun` without it).
            "security": [{"user": [], "token": []}, {"token": []}],
        })
    }

    /// The schema of an operation's failures (`default`): the success answer's keys, none
    /// required — an error answer carries the envelope (`meta`, `errors`, `warnings`) and
    /// whichever of the answer's keys there are data for — plus `errors` where the answer has
    /// none (the fleet API's). Slurm's spec reuses the success schema, which its own error
    /// answers (without the required keys) do not meet.
    fn failure_schema(&self, response: &Schema) -> Value {
        let fields = match response {
            Schema::Ref(name) => match self.components.get(name) {
                Some(Schema::Object(f)) => f.clone(),
                _ => return to_openapi(response),
            },
            Schema::Object(f) => f.clone(),
            _ => return to_openapi(response),
        };
        let mut relaxed: Vec<Field> = fields.into_iter().map(|f| Field { required: false, ..f }).collect();
        if !relaxed.iter().any(|f| f.name == "errors") {
            relaxed.push(opt("errors", array(Schema::Any)));
        }
        to_openapi(&Schema::Object(relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comps() -> Components {
        let mut c = Components::default();
        c.add(
            "job",
            Schema::Object(vec![
                req("job_id", Schema::Int(IntFormat::I32)),
                opt("name", Schema::Str),
            ]),
        );
        c
    }

    #[test]
    fn validation_is_strict_and_names_the_path() {
        let c = comps();
        let s = Schema::Object(vec![req("jobs", array(Schema::Ref("job")))]);
        assert_eq!(c.validate(&json!({"jobs": [{"job_id": 1}]}), &s), Ok(()));
        assert_eq!(
            c.validate(&json!({"jobs": [{"job_id": 1}, {"name": "x"}]}), &s),
            Err("$.jobs[1]: required key \"job_id\" missing".into())
        );
        assert_eq!(
            c.validate(&json!({"jobs": [{"job_id": 1, "extra": 2}]}), &s),
            Err("$.jobs[0]: key \"extra\" is not in the schema".into())
        );
        assert_eq!(
            c.validate(&json!({"jobs": [{"job_id": 5_000_000_000i64}]}), &s),
            Err("$.jobs[0].job_id: expected an int32, found 5000000000".into())
        );
        assert!(c
            .validate(&json!({"jobs": [{"job_id": 1}]}), &Schema::Ref("nope"))
            .is_err());
        assert!(c
            .validate(&json!("RUNNING"), &Schema::Enum(vec!["PENDING"]))
            .is_err());
    }

    #[test]
    fn the_document_names_every_operation_and_schema() {
        let mut spec = Spec {
            components: comps(),
            ..Spec::default()
        };
        spec.operations.push(Operation {
            method: Method::Get,
            path: "/slurm/v0.0.42/job/{job_id}".into(),
            operation_id: "slurm_v0042_get_job".into(),
            summary: "get job info",
            tag: "slurm",
            params: vec![Param {
                name: "job_id",
                in_path: true,
                schema: Schema::Str,
                description: "",
            }],
            body: None,
            response: Schema::Ref("job"),
        });
        let doc = spec.to_openapi("Slurm Rest API", "Slurm-22.05.8");
        assert_eq!(
            doc["paths"]["/slurm/v0.0.42/job/{job_id}"]["get"]["operationId"],
            "slurm_v0042_get_job"
        );
        assert_eq!(
            doc["components"]["schemas"]["job"]["required"],
            json!(["job_id"])
        );
    }
}
