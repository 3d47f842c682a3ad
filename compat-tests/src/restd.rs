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
