//! `slurmrestd`'s command line as an admin meets it: the version, the plugin list, and the
//! refusals (an unknown auth plugin, no listen address, a bad connection cap, an address it
//! cannot bind) with exit status 1 and a message naming the cause.
//!
//! Being an integration test of this package also makes `cargo test --workspace` (and nextest)
//! build `target/<profile>/slurmrestd` before any test runs, which `flotilla dev up` and the
//! end-to-end tests start beside the other daemons.

use std::process::{Command, Output};

fn slurmrestd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slurmrestd"))
        .args(args)
        .env_remove("SLURMRESTD_MAX_CONNECTIONS")
        .output()
        .expect("run slurmrestd")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn version_and_plugin_list() {
    let o = slurmrestd(&["-V"]);
    assert!(o.status.success());
    assert_eq!(text(&o.stdout), "slurm 22.05.8\n");
    let o = slurmrestd(&["-a", "list"]);
    assert!(o.status.success());
    assert_eq!(text(&o.stdout), "rest_auth/local\nrest_auth/jwt\n");
}

#[test]
fn refusals_exit_1_with_the_cause() {
    for (args, want) in [
        (&["-a", "rest_auth/munge", ":0"][..], "Unable to load rest_auth plugin: rest_auth/munge"),
        (&["-a", "rest_auth/local"][..], "no listen address given"),
        (&["--max-connections", "0", ":0"][..], "Invalid max connections: 0"),
        (&["--bogus", ":0"][..], "unknown option --bogus"),
        (&["-f"][..], "option -f needs a value"),
    ] {
        let o = slurmrestd(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = text(&o.stderr);
        assert!(err.starts_with("slurmrestd: fatal: ") && err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn an_address_in_use_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("slurm.conf");
    std::fs::write(
        &conf,
        "ClusterName=cli\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n",
    )
    .unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let o = slurmrestd(&["-f", conf.to_str().unwrap(), &addr]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("Unable to bind listen address") && err.contains(&addr), "{err}");
}
