//! `sprio`'s and `sshare`'s queries against the real controller: the priorities it answers
//! are the ones its scheduler ranks with (nice lowers them), the filters select, and with no
//! accounting database there are no associations to list.

mod common;

use common::*;
use flotilla_proto::share::{PrioQuery, ShareQuery};
use flotilla_proto::*;

fn submitted(r: Result<Response, String>) -> u64 {
    match r {
        Ok(Response::Submitted(s)) => s.job_id,
        other => panic!("submit failed: {other:?}"),
    }
}

#[test]
fn sprio_answers_the_schedulers_priorities_and_sshare_shows_the_default_associations() {
    let env = Env::new(2);
    let ctl = Ctl::start(&env, 0, &[]);
    // No node daemon registers: the jobs stay pending.
    let a = submitted(call(&env, ctl.addr, 2001, Request::SubmitJob(Box::new(job(2001, 10, 0)))));
    let mut nice = job(2002, 10, 0);
    nice.nice = Some(100);
    let b = submitted(call(&env, ctl.addr, 2002, Request::SubmitJob(Box::new(nice))));
    wait_cycles(&env, ctl.addr, 1);
    let reply = match call(&env, ctl.addr, 2001, Request::QueryPriorities(PrioQuery::default())) {
        Ok(Response::Priorities(r)) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(reply.priority_type, "priority/multifactor");
    assert_eq!(reply.jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(), vec![a, b]);
    let (pa, pb) = (&reply.jobs[0], &reply.jobs[1]);
    assert_eq!((pa.user.as_str(), pb.user.as_str()), ("alice", "bob"));
    assert_eq!(pb.factors.nice, 100);
    // Same submission minute and tier: nice is the whole difference.
    assert!(pa.priority >= pb.priority + 100 && pa.priority <= pb.priority + 160, "{} {}", pa.priority, pb.priority);
    assert_eq!(pa.priority as f64, pa.factors.site);
    // Filters: -j, -u, -p.
    let only = |q: PrioQuery| match call(&env, ctl.addr, 2001, Request::QueryPriorities(q)) {
        Ok(Response::Priorities(r)) => r.jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    assert_eq!(only(PrioQuery { jobs: vec![b], ..PrioQuery::default() }), vec![b]);
    assert_eq!(only(PrioQuery { users: vec!["alice".into()], ..PrioQuery::default() }), vec![a]);
    assert_eq!(only(PrioQuery { partitions: vec!["debug".into()], ..PrioQuery::default() }), Vec::<u64>::new());
    match call(&env, ctl.addr, 2001, Request::QueryShares(ShareQuery::default())) {
        // The accounting database's default objects only: account root and user root in it.
        Ok(Response::Shares(rows)) => assert_eq!(
            rows.iter().map(|r| (r.account.as_str(), r.user.as_deref())).collect::<Vec<_>>(),
            vec![("root", None), ("root", Some("root"))],
            "{rows:?}"
        ),
        other => panic!("{other:?}"),
    }
}
