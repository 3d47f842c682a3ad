//! Fair-share recomputation benchmarks (criterion). Goal from the accounting issue, reported,
//! never asserted: the per-cycle fair-share work for 10,000 associations under 10 ms: decay
//! every association's usage for the elapsed interval, then rank the whole tree with Fair
//! Tree (`fair_tree`, what the order stage runs when time has moved).
//!
//! `cargo bench -p flotilla-plugins --bench fairshare`.

use criterion::{criterion_group, criterion_main, Criterion};
use flotilla_core::assoc::{AssocId, AssocTree, Association};
use flotilla_core::fairshare::{fair_tree, Usage, UsageConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// root → 100 accounts → 99 users each (10,001 associations), random shares, and usage
/// charged to a random 80 % of the users.
fn tree_and_usage() -> (AssocTree, Usage) {
    let mut rng = ChaCha8Rng::seed_from_u64(18);
    let mk = |id: u32, parent: Option<u32>, account: String, user: Option<String>, shares: u32| Association { shares, ..Association::new(AssocId(id), parent.map(AssocId), &account, user.as_deref()) };
    let mut assocs = vec![mk(1, None, "root".into(), None, 1)];
    let mut id = 2;
    let mut users = Vec::new();
    for a in 0..100u32 {
        let acct = id;
        assocs.push(mk(acct, Some(1), format!("acct{a}"), None, rng.random_range(1..100)));
        id += 1;
        for u in 0..99u32 {
            assocs.push(mk(id, Some(acct), format!("acct{a}"), Some(format!("user{a}_{u}")), rng.random_range(1..10)));
            users.push(id);
            id += 1;
        }
    }
    let tree = AssocTree::new(assocs).unwrap();
    let mut usage = Usage::default();
    for &u in &users {
        if rng.random_range(0..10) < 8 {
            usage.charge(&tree, AssocId(u), rng.random_range(1.0..1e9));
        }
    }
    (tree, usage)
}

fn bench(c: &mut Criterion) {
    let (tree, mut usage) = tree_and_usage();
    assert_eq!(tree.len(), 10_001);
    let config = UsageConfig::default();
    let mut now = 1_000_000u64;
    usage.advance(&config, now);
    c.bench_function("fairshare/10k_assocs/decay+fair_tree", |b| {
        b.iter(|| {
            now += 3;
            usage.advance(&config, now);
            fair_tree(&tree, &usage)
        })
    });
    c.bench_function("fairshare/10k_assocs/fair_tree", |b| b.iter(|| fair_tree(&tree, &usage)));
}

criterion_group!(benches, bench);
criterion_main!(benches);
