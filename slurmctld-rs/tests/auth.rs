//! Authentication and permissions: forged, expired, replayed or missing credentials are
//! refused (and logged); the Unix socket and `sackd` vouch for the kernel's uid; users may act
//! only on their own jobs, with Slurm's error texts and codes.

mod common;

use common::*;
use flotilla_proto::client::{fetch_credential, Client};
use flotilla_proto::errno::*;
use flotilla_proto::*;

fn err_code(r: Response) -> (i32, String) {
    match r {
        Response::Error(e) => (e.code, e.text),
        Response::JobResults(v) => v[0].error.clone().map(|e| (e.code, e.text)).unwrap_or((0, String::new())),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn credentials_and_permissions() {
    let env = Env::new(1);
    let ctl = Ctl::start(&env, 0, &[]);
    let mut c = Client::connect_tcp(ctl.addr, Role::Command).unwrap();

    // Missing, forged, expired, replayed.
    assert_eq!(err_code(c.call(None, Request::Ping).unwrap()).0, SLURM_PROTOCOL_AUTHENTICATION_ERROR);
    let other = ClusterKey::from_bytes(&[9u8; 32]).unwrap();
    let forged = other.sign(0, 0, "evil", now(), 300);
    assert_eq!(err_code(c.call(Some(forged), Request::Ping).unwrap()), (SLURM_PROTOCOL_AUTHENTICATION_ERROR, "Protocol authentication error".into()));
    let mut tampered = env.cred(2001);
    tampered.uid = 0;
    assert_eq!(err_code(c.call(Some(tampered), Request::Ping).unwrap()).0, SLURM_PROTOCOL_AUTHENTICATION_ERROR);
    let expired = env.key.sign(2001, 2001, "h", now() - 1000, 300);
    assert_eq!(err_code(c.call(Some(expired), Request::Ping).unwrap()).0, SLURM_PROTOCOL_AUTHENTICATION_ERROR);
    let cred = env.cred(2001);
    assert_eq!(c.call(Some(cred.clone()), Request::Ping).unwrap(), Response::Pong);
    assert_eq!(err_code(c.call(Some(cred), Request::Ping).unwrap()).0, SLURM_PROTOCOL_AUTHENTICATION_ERROR, "replay");
    // The connection keeps serving after refusals.
    assert_eq!(c.call(Some(env.cred(2001)), Request::Ping).unwrap(), Response::Pong);

    // A uid the credential does not vouch for: Invalid user id.
    let mut j = job(0, 10, 0);
    j.uid = 0;
    assert_eq!(err_code(call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(j))).unwrap()), (ESLURM_USER_ID_MISSING, "Invalid user id".into()));

    // A gid the credential does not vouch for (an `LD_PRELOAD` shim made `getgid()` return
    // 0): Invalid group id, over the real socket and credential path (Slurm's `_valid_id`).
    let mut j = job(2001, 10, 0);
    j.gid = 0;
    assert_eq!(err_code(call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(j))).unwrap()), (ESLURM_GROUP_ID_MISSING, "Invalid group id".into()));

    // The name a job shows is the password database's for its uid, not the one the command
    // sent (a claimed name would also pick another user's default account).
    let mut claim = job(2001, 10, 0);
    claim.user = "bob".into();
    let Ok(Response::Submitted(s)) = call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(claim))) else { panic!() };
    let shown = all_jobs(&env, ctl.addr).into_iter().find(|j| j.job_id == s.job_id).unwrap().user;
    assert_eq!(shown, flotilla_slurmctld::users::lookup(2001));
    assert_ne!(shown, "bob");

    // Alice's job; Bob may not touch it (goldens 0250, 0222).
    let Ok(Response::Submitted(s)) = call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(job(2001, 10, 0)))) else { panic!() };
    let id = s.job_id;
    let cancel = Request::CancelJob(CancelJob { jobs: vec![JobRef::id(id)], ..CancelJob::default() });
    assert_eq!(err_code(call(&env, ctl.addr, 2002, cancel.clone()).unwrap()), (ESLURM_ACCESS_DENIED, "Access/permission denied".into()));
    let hold = |op| Request::HoldRelease(HoldRelease { jobs: vec![JobRef::id(id)], op });
    assert_eq!(err_code(call(&env, ctl.addr, 2002, hold(HoldOp::Hold)).unwrap()), (ESLURM_USER_ID_MISSING, "Invalid user id".into()));
    let upd = Request::UpdateJob(UpdateJob { job: JobRef::id(id), changes: vec![JobChange::Name("x".into())] });
    assert_eq!(err_code(call(&env, ctl.addr, 2002, upd).unwrap()).0, ESLURM_USER_ID_MISSING);
    // Root holds (admin hold); Alice may not release it (golden 0219); root may.
    assert_eq!(err_code(call(&env, ctl.addr, 0, hold(HoldOp::Hold)).unwrap()).0, 0);
    assert_eq!(err_code(call(&env, ctl.addr, 2001, hold(HoldOp::Release)).unwrap()), (ESLURM_ACCESS_DENIED, "Access/permission denied".into()));
    assert_eq!(err_code(call(&env, ctl.addr, 0, hold(HoldOp::Release)).unwrap()).0, 0);
    // Alice: priority is admin-only; her own cancel works; unknown job is Slurm's text.
    let prio = Request::UpdateJob(UpdateJob { job: JobRef::id(id), changes: vec![JobChange::Priority(5)] });
    assert_eq!(err_code(call(&env, ctl.addr, 2001, prio).unwrap()).0, ESLURM_ACCESS_DENIED);
    assert_eq!(err_code(call(&env, ctl.addr, 2001, cancel).unwrap()).0, 0);
    let unknown = Request::HoldRelease(HoldRelease { jobs: vec![JobRef::id(999_999)], op: HoldOp::Hold });
    assert_eq!(err_code(call(&env, ctl.addr, 2001, unknown).unwrap()), (ESLURM_INVALID_JOB_ID, "Invalid job id specified".into()));

    // The controller's Unix socket: identity from SO_PEERCRED; it issues credentials that the
    // TCP side accepts; a node registration from a non-admin over TCP is refused.
    let me = nix::unistd::getuid().as_raw();
    let cred = fetch_credential(&ctl.socket).unwrap();
    assert_eq!(cred.uid, me);
    let mut c = Client::connect_tcp(ctl.addr, Role::Command).unwrap();
    assert_eq!(c.call(Some(cred), Request::Ping).unwrap(), Response::Pong);
    let reg = Register { node: "gpu01".into(), boot_epoch: 1, gpus: 8, cpus: 64, mem_mib: 1, running: vec![], finished: vec![] };
    assert_eq!(err_code(c.call(Some(env.cred(2001)), Request::Register(reg)).unwrap()).0, ESLURM_ACCESS_DENIED);
    let Ok(Response::Stats(st)) = call(&env, ctl.addr, 0, Request::Stats) else { panic!() };
    assert!(st.auth_failures >= 5, "{st:?}");
}

#[test]
fn sackd_vouches_for_the_kernel_uid() {
    let env = Env::new(1);
    let ctl = Ctl::start(&env, 0, &[]);
    let sock = env.path("sackd.sock");
    let mut sackd = std::process::Command::new(env!("CARGO_BIN_EXE_sackd"))
        .arg("--socket")
        .arg(&sock)
        .arg("--key")
        .arg(env.path("slurm.key"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The socket file appears at bind(), before sackd listens: wait until it answers.
    let mut cred = None;
    wait_until("sackd to issue a credential", 10, || {
        cred = fetch_credential(&sock).ok();
        cred.is_some()
    });
    let cred = cred.unwrap();
    assert_eq!(cred.uid, nix::unistd::getuid().as_raw());
    let mut c = Client::connect_tcp(ctl.addr, Role::Command).unwrap();
    assert_eq!(c.call(Some(cred), Request::Ping).unwrap(), Response::Pong);
    // sackd does nothing else.
    let mut s = Client::connect_unix(&sock, Role::Command).unwrap();
    assert_eq!(err_code(s.call(None, Request::Stats).unwrap()).0, ESLURM_NOT_SUPPORTED);
    let _ = sackd.kill();
    let _ = sackd.wait();
}
