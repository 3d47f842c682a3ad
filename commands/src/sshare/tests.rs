//! Formatting against the reference's recorded output (s18-ref's goldens
//! `compat-tests/goldens/accounting/0157_sshare_a`, `0161_sshare_vpenso`, `0163_sshare_a_P`,
//! `0165_sshare_A_unknown`, `0166_sshare_bad_field`, `0158_sshare_l`), fed the values the
//! reference's controller sent.

use super::*;

fn row(account: &str, parent: Option<&str>, user: Option<&str>, shares: Option<u32>, norm: f64, eff: f64, fs: Option<f64>) -> ShareRow {
    ShareRow {
        account: account.into(),
        parent: parent.map(Into::into),
        user: user.map(Into::into),
        raw_shares: shares,
        norm_shares: norm,
        effectv_usage: eff,
        fairshare: fs,
        norm_usage: Some(0.0),
        ..ShareRow::default()
    }
}

fn reference_rows() -> Vec<ShareRow> {
    let a = 1.0 / 56.0;
    let third = 1.0 / 3.0;
    let mut v = vec![
        row("root", None, None, None, 0.0, 1.0, None),
        row("root", Some("root"), Some("root"), Some(1), a, 0.0, Some(1.0)),
        row("chem", Some("root"), None, Some(1), a, 0.0, None),
        row("chem", Some("chem"), Some("bob"), Some(1), 1.0, 0.0, Some(1.0)),
    ];
    for acct in ["gj", "gpuq", "mj", "ms"] {
        v.push(row(acct, Some("root"), None, Some(1), a, 0.0, None));
        v.push(row(acct, Some(acct), Some("alice"), Some(1), 1.0, 0.0, Some(0.0)));
    }
    v.push(row("research", Some("root"), None, Some(50), 50.0 / 56.0, 0.0, None));
    for u in ["alice", "bob", "bob"] {
        v.push(row("research", Some("research"), Some(u), Some(1), third, 0.0, Some(1.0)));
    }
    v[0].norm_usage = None;
    v
}

fn opts() -> Options {
    Options { format: None, long: false, partitions: false, users_only: false, header: true, parsable: Parsable::No, cluster: String::new(), basic: false }
}

const SSHARE_A: &str = "\
Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare 
-------------------- ---------- ---------- ----------- ----------- ------------- ---------- 
root                                          0.000000           0      1.000000            
 root                      root          1    0.017857           0      0.000000   1.000000 
 chem                                    1    0.017857           0      0.000000            
  chem                      bob          1    1.000000           0      0.000000   1.000000 
 gj                                      1    0.017857           0      0.000000            
  gj                      alice          1    1.000000           0      0.000000   0.000000 
 gpuq                                    1    0.017857           0      0.000000            
  gpuq                    alice          1    1.000000           0      0.000000   0.000000 
 mj                                      1    0.017857           0      0.000000            
  mj                      alice          1    1.000000           0      0.000000   0.000000 
 ms                                      1    0.017857           0      0.000000            
  ms                      alice          1    1.000000           0      0.000000   0.000000 
 research                               50    0.892857           0      0.000000            
  research                alice          1    0.333333           0      0.000000   1.000000 
  research                  bob          1    0.333333           0      0.000000   1.000000 
  research                  bob          1    0.333333           0      0.000000   1.000000 
";

#[test]
fn sshare_a_matches_the_reference() {
    assert_eq!(render(&reference_rows(), &opts()).unwrap(), SSHARE_A);
}

#[test]
fn the_exporters_line_and_parsable_forms_match_the_reference() {
    let accounts: Vec<ShareRow> = reference_rows().into_iter().filter(|r| r.user.is_none() || r.user.as_deref() == Some("root")).collect();
    let o = Options { format: Some("account,fairshare,".into()), header: false, parsable: Parsable::NoEnding, ..opts() };
    assert_eq!(render(&accounts, &o).unwrap(), "root|\n root|1.000000\n chem|\n gj|\n gpuq|\n mj|\n ms|\n research|\n");
    let o = Options { parsable: Parsable::NoEnding, ..opts() };
    let out = render(&reference_rows(), &o).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "Account|User|RawShares|NormShares|RawUsage|EffectvUsage|FairShare");
    assert_eq!(lines[1], "root|||0.000000|0|1.000000|");
    assert_eq!(lines[2], " root|root|1|0.017857|0|0.000000|1.000000");
    assert_eq!(lines[3], " chem||1|0.017857|0|0.000000|");
    assert_eq!(lines[4], "  chem|bob|1|1.000000|0|0.000000|1.000000");
    let o = Options { parsable: Parsable::Ending, header: false, ..opts() };
    assert!(render(&reference_rows(), &o).unwrap().starts_with("root|||0.000000|0|1.000000||\n"));
}

#[test]
fn a_lone_account_is_not_indented_and_no_rows_print_the_header() {
    // `sshare -A research` (0159): its parent is not printed, so no indent.
    let rows: Vec<ShareRow> = reference_rows().into_iter().filter(|r| r.account == "research" && r.user.is_none()).collect();
    let out = render(&rows, &opts()).unwrap();
    assert_eq!(out.lines().nth(2).unwrap(), "research                                50    0.892857           0      0.000000            ");
    assert_eq!(render(&[], &opts()).unwrap(), SSHARE_A.lines().take(2).map(|l| format!("{l}\n")).collect::<String>());
}

#[test]
fn long_columns_level_fs_and_errors() {
    let o = Options { long: true, ..opts() };
    let mut rows = reference_rows();
    rows[1].level_fs = Some(f64::INFINITY);
    rows[2].level_fs = Some(0.5);
    let out = render(&rows[..3], &o).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "Account                    User  RawShares  NormShares    RawUsage   NormUsage  EffectvUsage  FairShare    LevelFS                    GrpTRESMins                    TRESRunMins "
    );
    assert!(lines[2].starts_with("root                                          0.000000           0                  1.000000                       "), "{}", lines[2]);
    assert!(lines[3].contains("   1.000000        inf "), "{}", lines[3]);
    assert!(lines[4].contains("   0.500000 "), "{}", lines[4]);
    assert_eq!(render(&rows, &Options { format: Some("NoSuchField".into()), ..opts() }), Err("sshare: error: Invalid field requested: \"nosuchfield\"\n".into()));
    // Fairshare=parent prints `parent` and no level FS; a name%width sets the width.
    let mut p = rows[2].clone();
    p.raw_shares = Some(u32::MAX);
    let out = render(&[p], &Options { format: Some("Account%5,RawShares,LevelFS".into()), header: false, ..opts() }).unwrap();
    assert_eq!(out, " chem     parent            \n");
    assert!(help_format().starts_with("Account           Cluster           EffectvUsage      FairShare        \nGrpTRESMins"));
}

/// Golden 0107 (`sshare` under priority/basic, phase 1 of the recordings): no normalised
/// shares, usage 0, effective usage 0, fair share 0 for users and none for accounts, whatever
/// the controller's Fair Tree holds.
#[test]
fn priority_basic_prints_what_slurm_holds_without_fair_share() {
    let rows = vec![
        row("root", None, None, None, 0.0, 1.0, None),
        row("root", Some("root"), Some("root"), Some(1), 1.0 / 51.0, 0.0, Some(1.0)),
        row("chem", Some("root"), None, Some(1), 1.0 / 51.0, 0.0, None),
        row("research", Some("root"), None, Some(50), 50.0 / 51.0, 0.0, None),
    ];
    let out = render(&rows, &Options { basic: true, ..opts() }).unwrap();
    assert_eq!(
        out,
        "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare \n\
         -------------------- ---------- ---------- ----------- ----------- ------------- ---------- \n\
         root                                                             0      0.000000            \n\
         \x20root                      root          1                       0      0.000000   0.000000 \n\
         \x20chem                                    1                       0      0.000000            \n\
         \x20research                               50                       0      0.000000            \n"
    );
}
