//! slurmrestd across a takeover (issue #20, deliverable 4): a `flotilla dev up --ha` cluster
//! (two controllers on PostgreSQL) and a slurmrestd that knows both `SlurmctldHost=` lines.
//! Before and after `scontrol takeover`, `/slurm/v0.0.38/ping` pings every controller in
//! slurm.conf's order (Slurm's `ping_all_controllers`), a job submitted over REST is
//! accepted by whichever controller leads, and `/readyz` says ready; the jobs acknowledged
//! before the takeover are still listed after it. The stepped-down primary is restarted by
//! `dev up --ha`'s supervisor and pings UP again (as a standby: the backup still leads).

use flotilla_compat_tests::cluster::LocalCluster;
use flotilla_compat_tests::restd::Restd;
use flotilla_compat_tests::wait::wait_until;
use serde_json::json;
use std::time::Duration;

fn submit(r: &Restd, dir: &std::path::Path, name: &str) -> u64 {
    let body = json!({
        "script": "#!/bin/sh\nsleep 300\n",
        "job": {
            "name": name,
            "current_working_directory": dir.display().to_string(),
            "environment": {"PATH": "/usr/bin:/bin"},
            "time_limit": 10,
            "standard_output": "/dev/null",
        }
    })
    .to_string();
    let a = r.call(flotilla_compat_tests::restd::Via::Unix, "POST", "/slurm/v0.0.38/job/submit", &[], Some(&body));
    assert_eq!(a.status, 200, "submit {name}: {}", a.body);
    let j = a.json();
    assert_eq!(j["errors"], json!([]), "{j}");
    j["job_id"].as_u64().unwrap_or_else(|| panic!("no job_id: {j}"))
}

fn pings(r: &Restd) -> serde_json::Value {
    let a = r.get("/slurm/v0.0.38/ping/");
    assert_eq!(a.status, 200, "{}", a.body);
    a.json()["pings"].clone()
}

#[test]
fn slurmrestd_follows_the_leader_across_a_takeover() {
    if !flotilla_admin::pg::available() {
        println!("SKIPPED: PostgreSQL is not installed ({})", flotilla_admin::pg::PG_BIN);
        return;
    }
    flotilla_compat_tests::build_binaries();
    let c = LocalCluster::start_with(None, |o| o.ha = true);
    let auth = c.dir().join("state/sackd.sock");
    let r = Restd::start(&c, &[], &[("FLOTILLA_AUTH_SOCKET", auth.to_str().unwrap())]);
    let conf = std::fs::read_to_string(c.slurm_conf()).unwrap();
    let hosts: Vec<String> = conf
        .lines()
        .filter_map(|l| l.strip_prefix("SlurmctldHost=")?.split_once('(').map(|(h, _)| h.to_string()))
        .collect();
    assert_eq!(hosts.len(), 2, "{conf}");
    let ping = |primary: &str| {
        json!([
            {"hostname": hosts[0], "ping": primary, "status": if primary == "UP" { 0 } else { -1 }, "mode": "primary"},
            {"hostname": hosts[1], "ping": "UP", "status": 0, "mode": "backup"},
        ])
    };
    assert_eq!(pings(&r), ping("UP"), "both controllers answer (the backup as a standby)");
    let before = submit(&r, c.dir(), "before");
    assert_eq!(r.get("/readyz").status, 204);

    // The backup takes over; the old leader steps down and its process ends. `dev up --ha`'s
    // supervisor would start it again after 2 s: it is paused (SIGSTOP) until the primary has
    // been seen DOWN, so that the check does not race the restart.
    let (_, recorded) = flotilla_admin::dev::read_record(c.dir()).unwrap();
    let supervisor = nix::unistd::Pid::from_raw(recorded.iter().find(|d| d.kind == "supervisor").expect("a supervisor").pid);
    nix::sys::signal::kill(supervisor, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let primary_pid = c.pids()[1];
    let out = c.run("scontrol", &["takeover"], c.dir());
    assert!(out.status.success(), "scontrol takeover: {}", String::from_utf8_lossy(&out.stderr));
    let gone = || !std::path::Path::new(&format!("/proc/{primary_pid}")).exists() || std::fs::read_to_string(format!("/proc/{primary_pid}/stat")).is_ok_and(|s| s.contains(") Z "));
    wait_until("the old leader steps down", Duration::from_secs(30), gone, || format!("pids {:?}", c.pids()));

    assert_eq!(pings(&r), ping("DOWN"), "the primary is gone, the backup leads");
    nix::sys::signal::kill(supervisor, nix::sys::signal::Signal::SIGCONT).unwrap();
    wait_until("the old leader is back as a standby", Duration::from_secs(60), || pings(&r) == ping("UP"), || {
        format!("ping {}\nsupervisor.log:\n{}", pings(&r), flotilla_admin::dev::log_tail(c.dir(), "supervisor.log", 60))
    });
    let after = submit(&r, c.dir(), "after");
    assert!(after > before, "ids go on: {before} then {after}");
    assert_eq!(r.get("/readyz").status, 204, "a leader answers");
    let a = r.get("/slurm/v0.0.38/jobs");
    assert_eq!(a.status, 200, "{}", a.body);
    let ids: Vec<u64> = a.json()["jobs"].as_array().unwrap().iter().filter_map(|j| j["job_id"].as_u64()).collect();
    assert!(ids.contains(&before) && ids.contains(&after), "both jobs listed by the new leader: {ids:?}");
}
