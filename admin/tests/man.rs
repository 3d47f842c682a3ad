//! Man pages: every command binary has one, and the roff a page renders to is exactly the
//! golden `tests/goldens/man/example.1` up to SEE ALSO (a fixed table, so that options other
//! engineers add to the real commands do not churn the golden). Regenerate with
//! `UPDATE_GOLDENS=1 cargo test -p flotilla-admin --test man`.

use flotilla_commands::getopt::{lo, HasArg, LongOpt};
use flotilla_admin::man::{render, OptionTable, Page, PAGES};
use std::path::Path;

/// The binaries Cargo builds from `commands/src/bin` and this crate's `src/bin` (`NAME.rs` and
/// `NAME/main.rs`): what the client package holds.
fn command_binaries() -> Vec<String> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in [here.join("../commands/src/bin"), here.join("src/bin")] {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".rs") {
                out.push(stem.to_string());
            } else if e.path().join("main.rs").exists() {
                out.push(name);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_command_binary_has_a_man_page() {
    let bins = command_binaries();
    assert!(bins.iter().any(|b| b == "sbatch"), "{bins:?}");
    for b in &bins {
        if b == "flotilla" || b == "sdeploy" {
            continue; // clap: `flotilla man` renders them with clap_mangen
        }
        assert!(
            PAGES.iter().any(|p| p.name == b),
            "commands/src/bin/{b}: add its page to flotilla_admin::man::PAGES"
        );
    }
    for p in PAGES {
        assert!(bins.iter().any(|b| b == p.name), "man page for {} but no binary", p.name);
    }
}

const EXAMPLE_LONGS: &[LongOpt] = &[
    lo("account", HasArg::Required, 'A' as u32),
    lo("help", HasArg::No, 'h' as u32),
    lo("jobs", HasArg::Optional, 'j' as u32),
    lo("user", HasArg::Required, 'u' as u32),
    lo("users", HasArg::Required, 'u' as u32),
    lo("wrap", HasArg::Required, 1000),
    lo("exclusive", HasArg::Optional, 1001),
    lo("me", HasArg::No, 1002),
];

const EXAMPLE: Page = Page {
    name: "sexample",
    summary: "an example command",
    synopsis: "[OPTIONS...] script",
    description: &["First paragraph.", "Second paragraph, with a - and a 'quote'."],
    options: OptionTable::Getopt {
        shorts: "+A:hj::u:vV",
        longs: EXAMPLE_LONGS,
    },
    notes: &[("wrap", "Run the command line as the script."), ("v", "More output.")],
};

#[test]
fn page_rendering_matches_golden() {
    let full = render(&EXAMPLE, "9.9.9");
    // SEE ALSO names every real page: checked here, kept out of the golden (it grows with
    // each new command).
    let (text, see_also) = full.split_once(".SH \"SEE ALSO\"\n").expect("SEE ALSO section");
    for p in PAGES {
        assert!(see_also.contains(&format!("{}(1)", p.name)), "{see_also}");
    }
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/goldens/man/example.1");
    if std::env::var_os("UPDATE_GOLDENS").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, text).unwrap();
    }
    let want = std::fs::read_to_string(&golden).expect("golden missing: run with UPDATE_GOLDENS=1");
    assert_eq!(text, want, "regenerate with UPDATE_GOLDENS=1 and review the diff");
}

/// `man` itself formats each real page without a warning (when man-db is installed).
#[test]
fn real_pages_format_cleanly_with_man() {
    let Ok(st) = std::process::Command::new("groff").arg("--version").output() else {
        println!("SKIPPED: groff not installed");
        return;
    };
    assert!(st.status.success());
    let dir = tempfile::tempdir().unwrap();
    for p in PAGES {
        let f = dir.path().join(format!("{}.1", p.name));
        std::fs::write(&f, render(p, "0.1.0")).unwrap();
        let out = std::process::Command::new("groff")
            .args(["-man", "-Tutf8", "-ww", "-z"])
            .arg(&f)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", p.name);
        assert!(out.stderr.is_empty(), "{}: {}", p.name, String::from_utf8_lossy(&out.stderr));
    }
}
