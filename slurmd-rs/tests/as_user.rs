//! Jobs run as the submitting user, never as root: needs root (to create the user and to
//! switch to it). Runs when `FLOTILLA_TEST_ROOT=1` and the test runs as root (CI does both);
//! otherwise says `SKIPPED:` and why.

mod common;

use common::*;
use flotilla_proto::JobStateWire;
use std::os::unix::fs::MetadataExt;

fn ensure_user(name: &str, uid: u32) -> Option<(u32, u32)> {
    if nix::unistd::User::from_name(name).ok().flatten().is_none() {
        let st = std::process::Command::new("useradd")
            .args(["-u", &uid.to_string(), "-m", "-s", "/bin/bash", name])
            .status()
            .ok()?;
        if !st.success() {
            return None;
        }
    }
    let u = nix::unistd::User::from_name(name).ok().flatten()?;
    Some((u.uid.as_raw(), u.gid.as_raw()))
}

#[test]
fn launches_as_the_submitting_user() {
    if std::env::var("FLOTILLA_TEST_ROOT").as_deref() != Ok("1") {
        println!("SKIPPED: set FLOTILLA_TEST_ROOT=1 and run as root to test launching as another user");
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        println!("SKIPPED: FLOTILLA_TEST_ROOT=1 but not running as root");
        return;
    }
    let (uid, gid) = ensure_user("alice", 2001).expect("useradd alice");
    let mut c = Cluster::start(1, &[]);
    c.start_nodes(1);
    let work = c.path("alice");
    std::fs::create_dir_all(&work).unwrap();
    std::os::unix::fs::chown(&work, Some(uid), Some(gid)).unwrap();

    let script = "#!/bin/bash\necho \"uid=$(id -u) gid=$(id -g) euid=$(id -u) user=$USER home=$HOME\"\npwd\ntouch made-by-job\ntouch \"$FLOTILLA_CHECKPOINT_ACK\" && echo ack-writable\ncat /proc/self/status | grep -E '^(Uid|Gid|Groups):'\n";
    let mut s = job(script, &work);
    s.uid = uid;
    s.gid = gid;
    s.user = "alice".into();
    s.environment.push(("SLURM_EXPORT_ENV".into(), "NONE".into()));
    s.environment.push(("SECRET_OF_ROOT".into(), "x".into()));
    let id = c.submit(s);
    let j = c.wait_done(id, 30);
    assert_eq!(j.state, Some(JobStateWire::Completed), "{}", c.logs());
    let out_path = work.join(format!("slurm-{id}.out"));
    let out = std::fs::read_to_string(&out_path).unwrap();
    assert!(out.contains(&format!("uid={uid} gid={gid}")), "{out}");
    assert!(out.contains("user=alice home=/home/alice"), "--export=NONE gives the login variables: {out}");
    assert!(out.contains(&format!("{}\n", work.display())), "{out}");
    assert!(out.contains("ack-writable"), "{out}");
    assert!(out.contains(&format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}")), "{out}");
    assert!(out.contains(&format!("Gid:\t{gid}\t{gid}\t{gid}\t{gid}")), "{out}");
    assert!(!out.contains("Groups:\t0"), "root's groups dropped: {out}");
    assert_eq!(std::fs::metadata(&out_path).unwrap().uid(), uid, "output file created as the user");
    assert_eq!(std::fs::metadata(work.join("made-by-job")).unwrap().uid(), uid);

    // A directory alice may not write: the output cannot be opened, the job fails.
    let closed = c.path("closed");
    std::fs::create_dir_all(&closed).unwrap();
    std::fs::set_permissions(&closed, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut s = job("#!/bin/sh\ntrue\n", &closed);
    s.uid = uid;
    s.gid = gid;
    s.user = "alice".into();
    let id = c.submit(s);
    let j = c.wait_done(id, 30);
    // A launch failure, as Slurm 22.05 shows it (ESLURMD_IO_ERROR read as a wait status).
    assert_eq!(
        (j.state, j.exit_code, j.exit_signal, j.reason.as_str()),
        (Some(JobStateWire::Failed), 0, 53, "JobLaunchFailure"),
        "{}",
        c.logs()
    );
}
