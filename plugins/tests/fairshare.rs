//! Fair share through the scheduler: usage accrued by running jobs lowers the next job's
//! multifactor priority below a light user's, with the numbers `sprio` and `sshare` read.

use flotilla_core::assoc::{Accounting, AssocId, AssocTree, Association};
use flotilla_core::cluster::Cluster;
use flotilla_core::config::TopologyKind;
use flotilla_core::fairshare::{BillingWeights, UsageConfig};
use flotilla_core::job::{JobSpec, Request};
use flotilla_core::sched::{Event, SchedConfig, Scheduler};
use flotilla_plugins::priority::{Multifactor, MultifactorWeights};

fn assoc(id: u32, parent: Option<u32>, account: &str, user: Option<&str>) -> Association {
    Association::new(AssocId(id), parent.map(AssocId), account, user)
}

fn job(id: u64, user: &str, gpus: u32, submit: u64) -> JobSpec {
    let mut j = JobSpec::simple(id, submit, Request::gpus(gpus, TopologyKind::Any), Some(86_400));
    j.user = user.into();
    j.account = "research".into();
    j
}

/// A scheduler on 2 × 8 GPUs with `research` holding alice (3) and bob (4), billing one
/// unit per GPU, fair-share weight `weight`; alice's 8-GPU job runs from t = 0 to t = 3600,
/// then both users submit a 16-GPU job (which cannot start while hers runs).
fn heavy_alice(weight: u64) -> Scheduler {
    let mut s = Scheduler::new(
        Cluster::uniform(2, 8, 2, 64, 512_000),
        flotilla_plugins::placement("topo-bestfit").unwrap(),
        Box::new(Multifactor { weights: MultifactorWeights { weight_fairshare: weight, ..MultifactorWeights::default() } }),
        SchedConfig::default(),
    );
    let tree = AssocTree::new(vec![
        assoc(1, None, "root", None),
        assoc(2, Some(1), "research", None),
        assoc(3, Some(2), "research", Some("alice")),
        assoc(4, Some(2), "research", Some("bob")),
    ])
    .unwrap();
    s.set_accounting(Accounting { tree, ..Accounting::default() });
    s.set_usage_config(UsageConfig {
        billing: vec![Some(BillingWeights::parse("GRES/gpu=1.0").unwrap())],
        partition_job_factor: vec![1],
        ..UsageConfig::default()
    });
    let _ = s.handle(Event::Submit(job(1, "alice", 8, 0)), 0);
    let _ = s.cycle(0);
    assert!(s.running().contains_key(&flotilla_core::job::JobId(1)));
    for t in (60..=3600).step_by(60) {
        let _ = s.cycle(t);
    }
    let _ = s.handle(Event::Submit(job(2, "alice", 16, 3600)), 3600);
    let _ = s.handle(Event::Submit(job(3, "bob", 16, 3600)), 3600);
    let _ = s.cycle(3601);
    s
}

#[test]
fn a_heavy_users_next_job_ranks_below_a_light_users() {
    let s = heavy_alice(10_000);
    // 8 GPUs × 3601 s, decayed over one hour of a 7-day half-life (each minute's charge
    // decays for the time after it): between 3600 × 8 × 2^(−1/168) and 3601 × 8.
    let u = s.usage().get(AssocId(3));
    assert!(u > 3600.0 * 8.0 * (-1.0f64 / 168.0).exp2() && u <= 3601.0 * 8.0, "{u}");
    assert_eq!(s.usage().get(AssocId(4)), 0.0);
    assert_eq!(s.usage().get(AssocId(2)), u);
    assert_eq!(s.usage().get(AssocId(1)), u);
    // Bob (no usage) ranks 2 of 2, alice 1 of 2.
    assert_eq!(s.fair_tree().factor(AssocId(4)), 1.0);
    assert_eq!(s.fair_tree().factor(AssocId(3)), 0.5);
    let (alice, fa) = s.priority_of(flotilla_core::job::JobId(2), 3601).unwrap();
    let (bob, fb) = s.priority_of(flotilla_core::job::JobId(3), 3601).unwrap();
    assert!(alice < bob, "{alice} {bob}");
    assert_eq!(bob - alice, 5_000);
    assert_eq!((fa.unwrap().fairshare, fb.unwrap().fairshare), (5_000.0, 10_000.0));
    // The order stage ranked the same way: bob's job is the one holding the reservation.
    assert_eq!(s.reservations().first().map(|r| r.job), Some(flotilla_core::job::JobId(3)));
    // Without the fair-share weight the two jobs tie.
    let s = heavy_alice(0);
    assert_eq!(
        s.priority_of(flotilla_core::job::JobId(2), 3601).unwrap().0,
        s.priority_of(flotilla_core::job::JobId(3), 3601).unwrap().0
    );
}

/// A job that ends between two cycles is charged up to its end, decayed from then on: the
/// usage is exactly each interval's charge decayed for the time after it.
#[test]
fn a_job_ending_between_cycles_is_charged_to_its_end() {
    let mut s = Scheduler::new(
        Cluster::uniform(2, 8, 2, 64, 512_000),
        flotilla_plugins::placement("topo-bestfit").unwrap(),
        Box::new(Multifactor::default()),
        SchedConfig::default(),
    );
    let tree = AssocTree::new(vec![
        assoc(1, None, "root", None),
        assoc(2, Some(1), "research", None),
        assoc(3, Some(2), "research", Some("alice")),
    ])
    .unwrap();
    s.set_accounting(Accounting { tree, ..Accounting::default() });
    s.set_usage_config(UsageConfig {
        half_life_s: 3600,
        billing: vec![Some(BillingWeights::parse("GRES/gpu=1.0").unwrap())],
        ..UsageConfig::default()
    });
    let _ = s.handle(Event::Submit(job(1, "alice", 8, 0)), 0);
    let _ = s.cycle(0);
    let _ = s.cycle(60);
    assert_eq!(s.usage().get(AssocId(3)), 480.0);
    let _ = s.handle(Event::JobEnded(flotilla_core::job::JobId(1)), 90);
    let _ = s.cycle(120);
    let want = 480.0 * (-60.0f64 / 3600.0).exp2() + 240.0 * (-30.0f64 / 3600.0).exp2();
    let got = s.usage().get(AssocId(3));
    assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
    // Nothing more accrues once it has ended.
    let _ = s.cycle(180);
    assert!((s.usage().get(AssocId(3)) - want * (-60.0f64 / 3600.0).exp2()).abs() <= 1e-9 * want);
}
