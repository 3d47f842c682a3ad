use super::*;
use crate::assoc::Association;
use proptest::prelude::*;

fn assoc(id: u32, parent: Option<u32>, account: &str, user: Option<&str>, shares: u32) -> Association {
    Association { shares, ..Association::new(AssocId(id), parent.map(AssocId), account, user) }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn billing_weights_parse_and_bill() {
    let w = BillingWeights::parse("CPU=1.0,Mem=0.25G,GRES/gpu=2.0").unwrap();
    assert_eq!(w.cpu, 1.0);
    assert_eq!(w.gpu, 2.0);
    assert!(close(w.mem_per_mib * 1024.0, 0.25));
    let alloc = TresAlloc { cpus: 8.0, mem_mib: 16_384.0, nodes: 1.0, gpus: 2.0 };
    // 8 CPUs + 16 GiB × 0.25 + 2 GPUs × 2.
    assert!(close(billing(Some(&w), &alloc), 8.0 + 4.0 + 4.0));
    // Without weights Slurm bills the CPUs.
    assert_eq!(billing(None, &alloc), 8.0);
    // Names any case, unknown TRES accepted and billing nothing, Node weight, K suffix.
    let w = BillingWeights::parse("cpu=0.5, node=3, license/matlab=9, mem=1K").unwrap();
    assert!(close(billing(Some(&w), &alloc), 4.0 + 3.0 + 16_384.0 * 1024.0));
    for bad in ["CPU", "CPU=x", "=1", "CPU=-1", "Mem=2Q", "CPU=inf"] {
        assert_eq!(BillingWeights::parse(bad), Err(FairShareError::BillingWeights(bad.into())), "{bad}");
    }
}

/// 2026-12-02T04:19:32Z, a Wednesday.
const WED: Time = 1_796_185_172;

#[test]
fn reset_boundaries_are_calendar_times_in_utc() {
    use crate::time::calendar::fmt_time;
    let at = |p: ResetPeriod| p.boundary_at_or_before(WED).map(|t| fmt_time(t as i64));
    assert_eq!(fmt_time(WED as i64), "2026-12-02T04:19:32");
    assert_eq!(at(ResetPeriod::None), None);
    assert_eq!(at(ResetPeriod::Now), None);
    assert_eq!(at(ResetPeriod::Daily).as_deref(), Some("2026-12-02T00:00:00"));
    assert_eq!(at(ResetPeriod::Weekly).as_deref(), Some("2026-11-29T00:00:00"));
    assert_eq!(at(ResetPeriod::Monthly).as_deref(), Some("2026-12-01T00:00:00"));
    assert_eq!(at(ResetPeriod::Quarterly).as_deref(), Some("2026-10-01T00:00:00"));
    assert_eq!(at(ResetPeriod::Yearly).as_deref(), Some("2026-01-01T00:00:00"));
    // A boundary is its own latest boundary.
    let sunday = ResetPeriod::Weekly.boundary_at_or_before(WED).unwrap();
    assert_eq!(ResetPeriod::Weekly.boundary_at_or_before(sunday), Some(sunday));
    assert_eq!(ResetPeriod::Weekly.boundary_at_or_before(sunday - 1), Some(sunday - 7 * 86_400));
    for w in RESET_PERIODS {
        assert!(ResetPeriod::parse(&w.to_lowercase()).is_some());
    }
    assert_eq!(ResetPeriod::parse("HOURLY"), None);
}

fn two_users() -> AssocTree {
    AssocTree::new(vec![
        assoc(1, None, "root", None, 1),
        assoc(2, Some(1), "a", None, 1),
        assoc(3, Some(2), "a", Some("alice"), 1),
        assoc(4, Some(1), "b", None, 1),
        assoc(5, Some(4), "b", Some("bob"), 1),
    ])
    .unwrap()
}

#[test]
fn usage_resets_at_a_boundary_and_now_at_start() {
    let tree = two_users();
    let config = UsageConfig { reset: ResetPeriod::Daily, half_life_s: 0, ..UsageConfig::default() };
    let mut u = Usage::default();
    assert_eq!(u.advance(&config, WED), 0);
    u.charge(&tree, AssocId(3), 100.0);
    assert_eq!((u.get(AssocId(3)), u.get(AssocId(2)), u.get(AssocId(1)), u.get(AssocId(5))), (100.0, 100.0, 100.0, 0.0));
    // No decay (half-life 0), no boundary before midnight.
    assert_eq!(u.advance(&config, WED + 3600), 3600);
    assert_eq!(u.get(AssocId(3)), 100.0);
    // Past midnight: cleared.
    let midnight = ResetPeriod::Daily.boundary_at_or_before(WED).unwrap() + 86_400;
    assert_eq!(u.advance(&config, midnight + 5), midnight + 5 - (WED + 3600));
    assert_eq!(u.get(AssocId(3)), 0.0);
    assert_eq!(u.last_reset, Some(midnight));
    // NOW clears at start only.
    u.charge(&tree, AssocId(3), 7.0);
    let now_cfg = UsageConfig { reset: ResetPeriod::Now, ..UsageConfig::default() };
    u.advance(&now_cfg, midnight + 10);
    assert!(u.get(AssocId(3)) > 0.0);
    u.on_start(&now_cfg, midnight + 11);
    assert_eq!(u.get(AssocId(3)), 0.0);
}

#[test]
fn the_lighter_user_ranks_first_and_usage_values_follow_slurm() {
    let tree = two_users();
    let mut u = Usage::default();
    u.charge(&tree, AssocId(3), 300.0);
    u.charge(&tree, AssocId(5), 100.0);
    let ft = fair_tree(&tree, &u);
    // Two users: ranks 2 and 1 over 2.
    assert_eq!(ft.factor(AssocId(5)), 1.0);
    assert_eq!(ft.factor(AssocId(3)), 0.5);
    let a = ft.row(AssocId(2)).unwrap();
    assert_eq!((a.norm_shares, a.raw_usage, a.norm_usage, a.effectv_usage), (0.5, 300.0, 0.75, 0.75));
    assert!(close(a.level_fs.unwrap(), 0.5 / 0.75));
    assert_eq!(a.fairshare, None);
    let alice = ft.row(AssocId(3)).unwrap();
    // Alone in her account: S = 1, U = 1.
    assert_eq!((alice.norm_shares, alice.effectv_usage, alice.level_fs), (1.0, 1.0, Some(1.0)));
    let root = ft.row(AssocId(1)).unwrap();
    assert_eq!((root.level_fs, root.norm_shares, root.effectv_usage, root.norm_usage), (None, 0.0, 1.0, 1.0));
    // No usage anywhere: every level FS infinite, all tied at the top rank.
    let ft = fair_tree(&tree, &Usage::default());
    assert_eq!((ft.factor(AssocId(3)), ft.factor(AssocId(5))), (1.0, 1.0));
}

#[test]
fn zero_shares_rank_last_and_fairshare_parent_joins_the_grandparent() {
    // root ─ a (parent) ─ alice, carol ; root ─ b (0 shares) ─ bob ; root ─ dave (parent)
    let tree = AssocTree::new(vec![
        assoc(1, None, "root", None, 1),
        assoc(2, Some(1), "a", None, SHARES_PARENT),
        assoc(3, Some(2), "a", Some("alice"), 1),
        assoc(4, Some(2), "a", Some("carol"), 3),
        assoc(5, Some(1), "b", None, 0),
        assoc(6, Some(5), "b", Some("bob"), 1),
        assoc(7, Some(1), "root", Some("dave"), SHARES_PARENT),
    ])
    .unwrap();
    let mut u = Usage::default();
    u.charge(&tree, AssocId(3), 10.0);
    u.charge(&tree, AssocId(4), 10.0);
    let ft = fair_tree(&tree, &u);
    // alice and carol are siblings of b under root: level shares 1 + 3 + 0 = 4.
    assert_eq!(ft.row(AssocId(3)).unwrap().norm_shares, 0.25);
    assert_eq!(ft.row(AssocId(4)).unwrap().norm_shares, 0.75);
    // U is over root's usage (the fair-share parent), not a's.
    assert_eq!(ft.row(AssocId(3)).unwrap().effectv_usage, 0.5);
    assert_eq!(ft.row(AssocId(2)).unwrap().level_fs, Some(LEVEL_FS_NO_VAL));
    assert_eq!(ft.row(AssocId(7)).unwrap().level_fs, Some(f64::INFINITY));
    assert_eq!(ft.row(AssocId(5)).unwrap().level_fs, Some(0.0));
    // dave (infinite) > carol (1.5) > alice (0.5) > bob (under 0 shares): 4, 3, 2, 1 of 4.
    let f: Vec<f64> = [7, 4, 3, 6].iter().map(|&i| ft.factor(AssocId(i))).collect();
    assert_eq!(f, vec![1.0, 0.75, 0.5, 0.25]);
}

#[test]
fn tied_accounts_pass_the_tie_to_their_first_user() {
    // a and b tie (no usage: infinite); their users tie with each other across accounts.
    let tree = AssocTree::new(vec![
        assoc(1, None, "root", None, 1),
        assoc(2, Some(1), "a", None, 1),
        assoc(3, Some(1), "b", None, 1),
        assoc(4, Some(2), "a", Some("u1"), 1),
        assoc(5, Some(2), "a", Some("u2"), 1),
        assoc(6, Some(3), "b", Some("u3"), 1),
    ])
    .unwrap();
    let mut u = Usage::default();
    u.charge(&tree, AssocId(5), 1.0);
    // Root has usage now, so a's U > 0; give b none: b ranks first.
    let ft = fair_tree(&tree, &u);
    assert_eq!(ft.factor(AssocId(6)), 1.0);
    assert_eq!(ft.factor(AssocId(4)), 2.0 / 3.0);
    assert_eq!(ft.factor(AssocId(5)), 1.0 / 3.0);
    // Equal usage in a and b: accounts tie; u3 (first of b) keeps the rank of a's last user.
    u.charge(&tree, AssocId(6), 1.0);
    let ft = fair_tree(&tree, &u);
    // In a: u1 (no usage, infinite) rank 3, u2 rank 2; b tied with a: u3 keeps rank 2.
    assert_eq!(ft.factor(AssocId(4)), 1.0);
    assert_eq!(ft.factor(AssocId(5)), 2.0 / 3.0);
    assert_eq!(ft.factor(AssocId(6)), 2.0 / 3.0);
}

proptest! {
    /// Usage decays by exactly half per half-life, however the elapsed time is split into
    /// intervals. Tolerance: relative 1e-12. Each interval's factor `exp2(−Δt/h)` is within
    /// about one ulp (2.2e-16) of the true value and each multiplication adds half an ulp, so
    /// after at most 40 intervals the relative error is below 40 × 3.3e-16 ≈ 1.3e-14.
    #[test]
    fn usage_halves_per_half_life(
        usage in 1.0f64..1e12,
        half_life in 1u64..10_000_000,
        halves in 1u32..4,
        cuts in proptest::collection::vec(0.0f64..1.0, 0..40),
    ) {
        let tree = two_users();
        let config = UsageConfig { half_life_s: half_life, ..UsageConfig::default() };
        let mut u = Usage::default();
        u.advance(&config, 1_000);
        u.charge(&tree, AssocId(3), usage);
        let total = half_life * u64::from(halves);
        let mut points: Vec<u64> = cuts.iter().map(|c| 1_000 + (c * total as f64) as u64).collect();
        points.push(1_000 + total);
        points.sort_unstable();
        for t in points {
            u.advance(&config, t);
        }
        let want = usage / f64::from(1u32 << halves);
        for id in [1, 2, 3] {
            let got = u.get(AssocId(id));
            prop_assert!((got - want).abs() <= 1e-12 * want, "{} vs {}", got, want);
        }
    }

    /// The ranking matches the Fair Tree definition, checked two ways on random trees: against
    /// a straightforward recursive reference, and pairwise: where two users' paths from the
    /// root part, the one under the sibling of higher Level FS ranks higher (strictly, when
    /// the two Level FS differ).
    #[test]
    fn ranking_matches_the_fair_tree_definition(
        shape in proptest::collection::vec((0usize..100, any::<bool>(), 0u32..4, 0u32..4), 1..40),
    ) {
        let mut assocs = vec![assoc(1, None, "root", None, 1)];
        let mut accounts = vec![1u32];
        let mut charges = Vec::new();
        for (k, &(pick, is_user, shares, use_units)) in shape.iter().enumerate() {
            let id = k as u32 + 2;
            let parent = accounts[pick % accounts.len()];
            if is_user {
                assocs.push(assoc(id, Some(parent), &format!("acct{parent}"), Some(&format!("u{id}")), shares));
                charges.push((id, f64::from(use_units) * 100.0));
            } else {
                assocs.push(assoc(id, Some(parent), &format!("acct{id}"), None, shares));
                accounts.push(id);
            }
        }
        let tree = AssocTree::new(assocs).unwrap();
        let mut usage = Usage::default();
        for (id, amount) in charges {
            usage.charge(&tree, AssocId(id), amount);
        }
        let ft = fair_tree(&tree, &usage);
        let reference = reference::rank(&tree, &usage);
        for a in tree.assocs().iter().filter(|a| a.user.is_some()) {
            prop_assert_eq!(ft.factor(a.id), reference[&a.id], "user {:?}", a.user);
        }
        let strict = reference::no_ties_below(&tree, &usage, AssocId(1));
        // Pairwise: find where the paths part.
        let users: Vec<AssocId> = tree.assocs().iter().filter(|a| a.user.is_some()).map(|a| a.id).collect();
        let path = |id: AssocId| { let mut p: Vec<AssocId> = tree.ancestry(id).map(|a| a.id).collect(); p.reverse(); p };
        for &x in &users {
            for &y in &users {
                let (px, py) = (path(x), path(y));
                let k = px.iter().zip(&py).take_while(|(a, b)| a == b).count();
                if k >= px.len() || k >= py.len() { continue; }
                let (lx, ly) = (reference::level_fs(&tree, &usage, px[k]), reference::level_fs(&tree, &usage, py[k]));
                if lx > ly {
                    prop_assert!(ft.factor(x) >= ft.factor(y));
                    // Strict unless some tie carries the rank over.
                    if strict {
                        prop_assert!(ft.factor(x) > ft.factor(y));
                    }
                }
            }
        }
    }
}

/// An independent, straightforward Fair Tree over trees without `Fairshare=parent`: recursion
/// over `AssocTree::children`, level FS recomputed from the definition at each visit.
mod reference {
    use super::*;

    pub fn level_fs(tree: &AssocTree, usage: &Usage, id: AssocId) -> f64 {
        let a = tree.get(id).unwrap();
        let parent = tree.parent(id).unwrap();
        let total: u32 = tree.children(parent.id).map(|c| c.shares).sum();
        let s = if total == 0 { 0.0 } else { f64::from(a.shares) / f64::from(total) };
        let pu = usage.get(parent.id);
        let u = if pu == 0.0 { 0.0 } else { usage.get(id) / pu };
        if s == 0.0 {
            0.0
        } else {
            s / u
        }
    }

    fn sorted(tree: &AssocTree, usage: &Usage, id: AssocId) -> Vec<(f64, bool, AssocId)> {
        let mut kids: Vec<(f64, bool, AssocId)> =
            tree.children(id).map(|c| (level_fs(tree, usage, c.id), c.user.is_some(), c.id)).collect();
        kids.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(b.1.cmp(&a.1)));
        kids
    }

    pub fn no_ties_below(tree: &AssocTree, usage: &Usage, id: AssocId) -> bool {
        let kids = sorted(tree, usage, id);
        kids.windows(2).all(|w| w[0].0 != w[1].0) && kids.iter().all(|k| no_ties_below(tree, usage, k.2))
    }

    pub fn rank(tree: &AssocTree, usage: &Usage) -> BTreeMap<AssocId, f64> {
        let users = tree.assocs().iter().filter(|a| a.user.is_some()).count() as u32;
        let mut out = BTreeMap::new();
        let mut next = users;
        let mut current = users;
        visit(tree, usage, tree.root().unwrap().id, false, &mut next, &mut current, users, &mut out);
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn visit(
        tree: &AssocTree,
        usage: &Usage,
        id: AssocId,
        tied_in: bool,
        next: &mut u32,
        current: &mut u32,
        users: u32,
        out: &mut BTreeMap<AssocId, f64>,
    ) {
        let mut prev = LEVEL_FS_NO_VAL;
        for (k, (lf, is_user, child)) in sorted(tree, usage, id).into_iter().enumerate() {
            let tied = (k == 0 && tied_in) || lf == prev;
            if is_user {
                if !tied {
                    *current = *next;
                }
                out.insert(child, f64::from(*current) / f64::from(users));
                *next -= 1;
            } else {
                visit(tree, usage, child, tied, next, current, users, out);
            }
            prev = lf;
        }
    }
}
