//! JSON Web Tokens end to end on a local cluster in production mode (daemons as root,
//! `flotilla dev up`'s own `auth/jwt` key and slurmrestd): `scontrol token` issues tokens by
//! Slurm's rules (`SLURM_JWT=...`; another user's token for admins only, with Slurm's texts),
//! slurmrestd on TCP accepts a valid token and an admin's token acting for a user, and
//! refuses with 401 and Slurm's `Protocol authentication error` an expired token, a forged
//! one, one signed with another key, `alg=none`, and a user's token naming another user. At
//! the controller, a token's user has exactly that user's rights: alice's token may not reset
//! `sdiag`, root's may; a token gets no credential and no new token. Runs `scontrol` as alice
//! (2001) through `runuser`, so it needs root (`FLOTILLA_TEST_ROOT=1`).

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::restd::http;
use flotilla_proto::errno::{ESLURM_ACCESS_DENIED, SLURM_PROTOCOL_AUTHENTICATION_ERROR};
use flotilla_proto::frame::TokenAuth;
use flotilla_proto::jwt::JwtKey;
use flotilla_proto::client::Client;
use flotilla_proto::{Request, Response, Role};
use std::path::Path;
use std::process::Command;

/// `scontrol args` as `user` (`None`: root): (exit status, stdout, stderr).
fn scontrol(c: &LocalCluster, user: Option<&str>, args: &[&str], cwd: &Path) -> (i32, String, String) {
    let bin = flotilla_compat_tests::bin_dir().join("scontrol");
    let mut cmd = match user {
        Some(u) => {
            let mut c = Command::new("runuser");
            c.args(["-u", u, "--"]).arg(&bin);
            c
        }
        None => Command::new(&bin),
    };
    let o = cmd
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        .envs(c.env())
        .output()
        .expect("scontrol runs");
    (o.status.code().unwrap_or(-1), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The token of `scontrol token ARGS`'s answer, which must be one `SLURM_JWT=` line of three
/// base64url parts.
fn token(c: &LocalCluster, user: Option<&str>, args: &[&str], cwd: &Path) -> String {
    let mut all = vec!["token"];
    all.extend_from_slice(args);
    let (rc, out, err) = scontrol(c, user, &all, cwd);
    assert_eq!((rc, err.as_str()), (0, ""), "scontrol {all:?} as {user:?}: {out}");
    let t = out.strip_prefix("SLURM_JWT=").and_then(|t| t.strip_suffix('\n')).unwrap_or_else(|| panic!("{out:?}"));
    let parts: Vec<&str> = t.split('.').collect();
    assert!(
        parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')),
        "{t}"
    );
    t.to_string()
}

#[test]
fn tokens_from_scontrol_authenticate_exactly_their_user_and_bad_tokens_are_refused() {
    if !flotilla_compat_tests::root_tests("runs scontrol token as root and as alice (2001) on a local cluster") {
        return;
    }
    flotilla_compat_tests::ensure_user("alice", 2001);
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start(None);
    flotilla_compat_tests::sh(&format!("chmod 755 {}", c.dir().display()));
    let w = c.dir().join("work");
    std::fs::create_dir_all(&w).unwrap();
    flotilla_compat_tests::sh(&format!("chmod 1777 {}", w.display()));
    let url = c.restd_url().expect("flotilla dev up starts slurmrestd").to_string();

    // scontrol token, by Slurm's rules and with its texts.
    let root_tok = token(&c, None, &[], &w);
    let alice_tok = token(&c, Some("alice"), &["lifespan=600"], &w);
    let for_alice = token(&c, None, &["username=alice"], &w);
    // Refusals as real 22.05.8 printed them (goldens-rest/scontrol_token.json, recorded on
    // the reference): another user's token for a user, an unknown option.
    let goldens: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(flotilla_compat_tests::workspace_root().join("compat-tests/goldens-rest/scontrol_token.json")).unwrap()).unwrap();
    for cmd in ["scontrol token username=root", "scontrol token bogus"] {
        let g = goldens["cases"].as_array().unwrap().iter().find(|g| g["cmd"] == cmd).unwrap_or_else(|| panic!("no golden {cmd}"));
        let args: Vec<&str> = cmd.split(' ').skip(1).collect();
        let user = g["user"].as_str().filter(|u| *u != "root");
        let want = (g["exit_code"].as_i64().unwrap() as i32, g["stdout"].as_str().unwrap().to_string(), g["stderr"].as_str().unwrap().to_string());
        assert_eq!(scontrol(&c, user, &args, &w), want, "{cmd} as {user:?}");
    }
    // An admin may ask for any lifespan, a negative one too: that token is born expired.
    let expired = token(&c, None, &["username=alice", "lifespan=-5"], &w);

    // slurmrestd over TCP.
    let ping = |name: &str, tok: &str| {
        let mut h = vec![("X-SLURM-USER-TOKEN", tok)];
        if !name.is_empty() {
            h.push(("X-SLURM-USER-NAME", name));
        }
        http(&url, "GET", "/slurm/v0.0.42/ping", &h, None)
    };
    for (name, tok, why) in [("alice", alice_tok.as_str(), "alice's own"), ("alice", for_alice.as_str(), "root's for alice"), ("alice", root_tok.as_str(), "root acting for alice"), ("", root_tok.as_str(), "root's, no name")] {
        let r = ping(name, tok);
        assert_eq!(r.status, 200, "{why}: {}", r.body);
        assert_eq!(r.json()["pings"][0]["pinged"], "UP", "{why}");
    }
    let part = |t: &str, i: usize| t.split('.').nth(i).unwrap().to_string();
    let other_key = JwtKey::from_bytes(&[7u8; 32]).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let root_claims = part(&other_key.issue("root", now, 600), 1);
    let forged = format!("{}.{root_claims}.{}", part(&alice_tok, 0), part(&alice_tok, 2));
    // base64url of {"alg":"none","typ":"JWT"}.
    let alg_none = format!("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.{root_claims}.");
    let wrong_key = other_key.issue("alice", now, 600);
    for (name, tok, why) in [
        ("alice", expired.as_str(), "expired"),
        ("root", forged.as_str(), "forged claims"),
        ("alice", wrong_key.as_str(), "another key"),
        ("root", alg_none.as_str(), "alg=none"),
        ("root", alice_tok.as_str(), "alice's token naming root"),
    ] {
        let r = ping(name, tok);
        assert_eq!(r.status, 401, "{why}: {}", r.body);
        let e = &r.json()["errors"][0];
        assert_eq!((e["error_number"].as_i64(), e["error"].as_str()), (Some(i64::from(SLURM_PROTOCOL_AUTHENTICATION_ERROR)), Some("Protocol authentication error")), "{why}: {e}");
    }

    // At the controller a token carries exactly its user's rights.
    let call = |tok: &str, req: Request| {
        let mut cl = Client::connect_tcp(c.ctld_addr(), Role::Command).expect("connect");
        cl.call_token(TokenAuth { user_name: String::new(), token: tok.to_string() }, req).expect("answer")
    };
    let code = |r: Response| match r {
        Response::Error(e) => e.code,
        r => panic!("not refused: {r:?}"),
    };
    assert_eq!(code(call(&alice_tok, Request::DiagReset)), ESLURM_ACCESS_DENIED, "sdiag -r is for admins");
    assert!(matches!(call(&root_tok, Request::DiagReset), Response::Diag(_)));
    assert_eq!(code(call(&root_tok, Request::IssueCredential)), ESLURM_ACCESS_DENIED, "a token gets no credential");
    assert_eq!(code(call(&alice_tok, Request::IssueToken { username: None, lifespan: 0 })), ESLURM_ACCESS_DENIED, "nor a new token");
    assert_eq!(code(call(&wrong_key, Request::Ping)), SLURM_PROTOCOL_AUTHENTICATION_ERROR);
}
