//! `slurmrestd` beside a [`LocalCluster`] for the end-to-end tests: started on a Unix socket
//! in the cluster's state directory and on a free loopback port, with the cluster's
//! `slurm.conf`; stopped on drop. [`Restd::call`] is a small HTTP/1.1 client (one request per
//! connection) over either; the Python clients reach [`Restd::url`].

use crate::cluster::LocalCluster;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running slurmrestd (killed on drop).
#[derive(Debug)]
pub struct Restd {
    child: Child,
    /// Its Unix socket.
    pub unix: PathBuf,
    /// Its TCP address.
    pub tcp: SocketAddr,
    log: PathBuf,
}

/// An HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    /// The status code.
    pub status: u16,
    /// The headers, names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl HttpReply {
    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Which socket a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// The Unix socket (`rest_auth/local` for the test's own uid).
    Unix,
    /// TCP (a token is needed).
    Tcp,
}

impl Restd {
    /// Starts slurmrestd for `cluster` with extra `args` (before the listen addresses) and
    /// `env`, and waits until both sockets accept (30 s, else panics with its log).
    pub fn start(cluster: &LocalCluster, args: &[&str], env: &[(&str, &str)]) -> Restd {
        let bin = crate::bin_dir().join("slurmrestd");
        assert!(
            bin.is_file(),
            "{} missing: cargo build -p flotilla-slurmrestd",
            bin.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let unix = cluster.dir().join(format!("slurmrestd-{port}.sock"));
        let log = cluster.dir().join(format!("slurmrestd-{port}.log"));
        let tcp: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
        let mut child = Command::new(&bin)
            .args(args)
            .arg(format!("127.0.0.1:{port}"))
            .arg(format!("unix:{}", unix.display()))
            .env("SLURM_CONF", cluster.slurm_conf())
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(Stdio::piped())
            .spawn()
            .expect("slurmrestd starts");
        // Its log goes to the file through this thread, which also says when slurmrestd has
        // bound every socket ("slurmrestd ready"; connections queue from then on).
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().expect("piped stderr");
        let mut file = std::fs::File::options().append(true).open(&log).expect("log");
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
                let _ = writeln!(file, "{line}");
                if line.contains("slurmrestd ready") {
                    let _ = ready_tx.send(());
                }
            }
        });
        let r = Restd { child, unix, tcp, log };
        if ready_rx.recv_timeout(Duration::from_secs(30)).is_err() {
            panic!("slurmrestd did not say it was ready within 30 s:\n{}", r.log_text());
        }
        r
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.tcp)
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One request: `method path`, extra `headers`, an optional JSON `body`.
    pub fn call(
        &self,
        via: Via,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> HttpReply {
        let req = request_text(method, path, headers, body);
        let raw = match via {
            Via::Unix => exchange(UnixStream::connect(&self.unix).expect("unix connect"), &req),
            Via::Tcp => exchange(TcpStream::connect(self.tcp).expect("tcp connect"), &req),
        };
        parse_reply(&raw).unwrap_or_else(|| panic!("bad HTTP answer: {raw:?}"))
    }

    /// `GET path` over the Unix socket.
    pub fn get(&self, path: &str) -> HttpReply {
        self.call(Via::Unix, "GET", path, &[], None)
    }
}

/// One request to any HTTP server at `url` (`http://HOST:PORT`), as [`Restd::call`] makes it.
pub fn http(url: &str, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> HttpReply {
    let addr = url.strip_prefix("http://").unwrap_or(url).trim_end_matches('/');
    let req = request_text(method, path, headers, body);
    let raw = exchange(TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}")), &req);
    parse_reply(&raw).unwrap_or_else(|| panic!("bad HTTP answer: {raw:?}"))
}

fn request_text(method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> String {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    match body {
        Some(b) => req.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}", b.len())),
        None => req.push_str("\r\n"),
    }
    req
}

fn exchange<S: Read + Write>(mut s: S, req: &str) -> String {
    s.write_all(req.as_bytes()).expect("write request");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read answer");
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_reply(raw: &str) -> Option<HttpReply> {
    let (head, rest) = raw.split_once("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        })
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_string()
    };
    Some(HttpReply {
        status,
        headers,
        body,
    })
}

fn dechunk(mut s: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n")?;
        let n = usize::from_str_radix(size.trim(), 16).ok()?;
        if n == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..n)?);
        s = rest.get(n + 2..)?;
    }
}

impl Drop for Restd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.unix);
    }
}

/// Where the test's Python virtual environment for the REST clients is (`FLOTILLA_REST_VENV`,
/// else `target/rest-venv`), if it has `python`.
pub fn python_venv() -> Option<PathBuf> {
    let d = std::env::var_os("FLOTILLA_REST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("target")
                .join("rest-venv")
        });
    d.join("bin").join("python").is_file().then_some(d)
}

/// The `python` of the REST clients' venv ([`python_venv`]); panics saying how to make it
/// when it is missing (a test that needs the real clients fails, it does not skip).
pub fn python() -> PathBuf {
    match python_venv() {
        Some(d) => d.join("bin").join("python"),
        None => panic!(
            "the REST clients' Python venv is missing: run compat-tests/rest-venv.sh (or set \
             FLOTILLA_REST_VENV to a venv with slurmrestapi==25.11.4.0)"
        ),
    }
}

/// Checks answers against the `slurmrestapi` client's pydantic models, strictly: each item is
/// (model class, e.g. `V0042OpenapiJobInfoResp`; the JSON; a label for messages). A key the
/// model does not declare, a required key missing, or a value the model refuses
/// (`from_dict`: types, enums) is an error; the models are walked recursively, since pydantic
/// itself ignores unknown keys. `Err` lists every problem.
pub fn check_models(items: &[(String, serde_json::Value, String)]) -> Result<(), String> {
    check_models_in(&python(), "slurmrestapi.models", items)
}

/// [`check_models`] for v0.0.38, against the `openapi-slurm-0-0-38-client` models
/// (`openapi_client.models.V0038JobsResponse`, ...) of the `-38` venv ([`python38`]).
pub fn check_models_38(items: &[(String, serde_json::Value, String)]) -> Result<(), String> {
    check_models_in(&python38(), "openapi_client.models", items)
}

/// The `python` of the v0.0.38 client's venv: [`python_venv`]'s directory with `-38`
/// appended (`compat-tests/rest-venv.sh` makes both); panics when it is missing.
pub fn python38() -> PathBuf {
    let base = python_venv().unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("target").join("rest-venv")
    });
    let d = PathBuf::from(format!("{}-38", base.display()));
    let py = d.join("bin").join("python");
    assert!(
        py.is_file(),
        "the v0.0.38 client's Python venv {} is missing: run compat-tests/rest-venv.sh",
        d.display()
    );
    py
}

fn check_models_in(python: &Path, module: &str, items: &[(String, serde_json::Value, String)]) -> Result<(), String> {
    let input: Vec<serde_json::Value> = items
        .iter()
        .map(|(m, d, l)| serde_json::json!({"model": m, "doc": d, "label": l}))
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("check_models.py");
    std::fs::write(&script, CHECK_MODELS_PY.replace("slurmrestapi.models", module)).expect("write the checker");
    let data = dir.path().join("answers.json");
    std::fs::write(&data, serde_json::to_vec(&input).expect("json")).expect("write the answers");
    let out = Command::new(python)
        .arg(&script)
        .arg(&data)
        .output()
        .expect("python runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(())
    } else {
        Err(text)
    }
}

/// The model checker (see [`check_models`]).
const CHECK_MODELS_PY: &str = r#"
import json, sys, typing
import slurmrestapi.models as M
from pydantic import BaseModel

def models_in(ann):
    out = []
    for a in typing.get_args(ann) or ():
        out += models_in(a)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        out.append(ann)
    return out

def walk(cls, doc, path, errs):
    if not isinstance(doc, dict):
        errs.append(f"{path}: expected an object for {cls.__name__}, found {type(doc).__name__}")
        return
    fields = {(f.alias or n): f for n, f in cls.model_fields.items()}
    for k in doc:
        if k not in fields:
            errs.append(f"{path}: key {k!r} is not in {cls.__name__}")
    for k, f in fields.items():
        if f.is_required() and k not in doc:
            errs.append(f"{path}: required key {k!r} of {cls.__name__} missing")
    for k, v in doc.items():
        f = fields.get(k)
        if f is None:
            continue
        subs = models_in(f.annotation)
        if not subs:
            continue
        sub = subs[0]
        if isinstance(v, list):
            for i, x in enumerate(v):
                walk(sub, x, f"{path}.{k}[{i}]", errs)
        elif isinstance(v, dict) and typing.get_origin(f.annotation) is not dict:
            walk(sub, v, f"{path}.{k}", errs)

items = json.load(open(sys.argv[1]))
bad = 0
for it in items:
    errs = []
    cls = getattr(M, it["model"], None)
    if cls is None:
        errs.append(f"no model {it['model']}")
    else:
        walk(cls, it["doc"], "$", errs)
        try:
            cls.from_dict(it["doc"])
        except Exception as e:
            errs.append(f"from_dict: {e}")
    if errs:
        bad += 1
        print(f"FAIL {it['label']} ({it['model']}):")
        for e in errs:
            print(f"  {e}")
    else:
        print(f"ok {it['label']} ({it['model']})")
sys.exit(1 if bad else 0)
"#;

/// The served OpenAPI document's schemas (`components.schemas`) read back into
/// [`flotilla_rest::Components`], to validate answers against what slurmrestd says it sends.
/// Names are leaked (`&'static str`): a test reads one document.
pub fn served_components(doc: &serde_json::Value) -> flotilla_rest::Components {
    let mut c = flotilla_rest::Components::default();
    let schemas = doc["components"]["schemas"].as_object().expect("components.schemas");
    for (k, v) in schemas {
        c.add(leak(k), schema_of(v));
    }
    c
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

/// One OpenAPI schema as a [`flotilla_rest::Schema`] (the subset `Spec::to_openapi` writes).
pub fn schema_of(v: &serde_json::Value) -> flotilla_rest::Schema {
    use flotilla_rest::schema::{Field, IntFormat};
    use flotilla_rest::Schema;
    if let Some(r) = v.get("$ref").and_then(|r| r.as_str()) {
        return Schema::Ref(leak(r.trim_start_matches("#/components/schemas/")));
    }
    if let Some(all) = v.get("allOf").and_then(|a| a.as_array()) {
        return schema_of(&all[0]);
    }
    match v.get("type").and_then(|t| t.as_str()) {
        Some("string") => match v.get("enum").and_then(|e| e.as_array()) {
            Some(e) => Schema::Enum(e.iter().map(|w| leak(w.as_str().expect("word"))).collect()),
            None => Schema::Str,
        },
        Some("integer") => Schema::Int(if v["format"] == "int32" { IntFormat::I32 } else { IntFormat::I64 }),
        Some("number") => Schema::Num,
        Some("boolean") => Schema::Bool,
        Some("array") => Schema::Array(Box::new(schema_of(&v["items"]))),
        Some("object") => match v.get("properties").and_then(|p| p.as_object()) {
            Some(props) => {
                let required: Vec<&str> = v["required"]
                    .as_array()
                    .map(|r| r.iter().filter_map(|x| x.as_str()).collect())
                    .unwrap_or_default();
                Schema::Object(
                    props
                        .iter()
                        .map(|(k, p)| Field {
                            name: leak(k),
                            schema: schema_of(p),
                            required: required.contains(&k.as_str()),
                            description: "",
                        })
                        .collect(),
                )
            }
            None => Schema::Map(Box::new(schema_of(&v["additionalProperties"]))),
        },
        _ => Schema::Any,
    }
}

/// The schema of the answers of `method path` in the served document (`$ref` of its 200).
pub fn answer_schema(doc: &serde_json::Value, method: &str, path: &str) -> flotilla_rest::Schema {
    let s = &doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"];
    assert!(s.is_object(), "the served spec has no {method} {path}");
    schema_of(s)
}

/// A recording of real slurmrestd 22.05.8 (`compat-tests/goldens-rest/v0.0.38/NAME.json`:
/// `method`, `path`, `user`, `status`, `response`).
pub fn golden38(name: &str) -> serde_json::Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("goldens-rest/v0.0.38").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// Where `ours` is not shaped as `theirs` (a recording of real Slurm), recursively: a key of
/// ours that Slurm's object does not have, or a value of another JSON type than Slurm's
/// (Slurm's `null` takes any type: it is Slurm's unset). Arrays compare their first items when
/// both have one. Values themselves are not compared. Empty: the same shape.
pub fn shape_differences(path: &str, ours: &serde_json::Value, theirs: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    let mut out = Vec::new();
    match (ours, theirs) {
        (_, Value::Null) => {}
        (Value::Object(o), Value::Object(t)) => {
            for (k, v) in o {
                match t.get(k) {
                    None => out.push(format!("{path}.{k}: Slurm has no such key")),
                    Some(tv) => out.extend(shape_differences(&format!("{path}.{k}"), v, tv)),
                }
            }
        }
        (Value::Array(o), Value::Array(t)) => {
            if let (Some(a), Some(b)) = (o.first(), t.first()) {
                out.extend(shape_differences(&format!("{path}[0]"), a, b));
            }
        }
        (o, t) if json_kind(o) != json_kind(t) => out.push(format!("{path}: ours {o}, Slurm's {t}")),
        _ => {}
    }
    out
}

/// The answers a test has seen: each validated against the schema slurmrestd serves for its
/// operation (`/openapi/v3`, read back by [`served_components`] and applied strictly), and
/// kept with the client model class that must read it ([`check_models`], [`check_models_38`]).
#[derive(Debug)]
pub struct Checker {
    /// The served document.
    pub spec: serde_json::Value,
    /// Its schemas.
    pub comps: flotilla_rest::Components,
    /// (model class, answer, label) of every recorded answer.
    pub seen: Vec<(String, serde_json::Value, String)>,
}

impl Checker {
    /// Reads the spec `r` serves.
    pub fn new(r: &Restd) -> Checker {
        let spec = r.get("/openapi/v3").json();
        let comps = served_components(&spec);
        Checker { spec, comps, seen: Vec::new() }
    }

    /// Validates `a` (an answer of `method` on the spec's `path`) against the served schema
    /// (panics with the reason) and records it for the model `class` (empty: not recorded,
    /// for an answer without a model of its own). Answers the JSON.
    pub fn check(&mut self, a: &HttpReply, method: &str, path: &str, class: &str) -> serde_json::Value {
        let j = a.json();
        let schema = answer_schema(&self.spec, method, path);
        if let Err(e) = self.comps.validate(&j, &schema) {
            panic!("{method} {path}: not as the served spec says: {e}\n{j:#}");
        }
        if !class.is_empty() {
            self.seen.push((class.to_string(), j.clone(), format!("{method} {path} ({})", a.status)));
        }
        j
    }

    /// [`Checker::check`] with the model named for version `v`: `{}` in `model` becomes
    /// `V0042` for `v0.0.42` (`{}OpenapiJobInfoResp`).
    pub fn check_v(&mut self, a: &HttpReply, method: &str, path: &str, v: &str, model: &str) -> serde_json::Value {
        let class = if model.is_empty() { String::new() } else { model.replace("{}", &format!("V00{}", &v[5..])) };
        self.check(a, method, path, &class)
    }
}
