//! `docs/slurm-conf-keys.md` is generated from the key table (`config::keys::KEYS`) and must
//! stay up to date; regenerate with `UPDATE_GOLDENS=1 cargo test -p flotilla-core --test
//! keys_doc` and review the diff. (An integration test: `core/src` itself never touches files.)

use flotilla_core::config::keys::keys_markdown;
use std::path::PathBuf;

#[test]
fn keys_doc_is_up_to_date() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/slurm-conf-keys.md");
    let want = keys_markdown();
    if std::env::var_os("UPDATE_GOLDENS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "{} is out of date; regenerate with UPDATE_GOLDENS=1 cargo test -p flotilla-core --test keys_doc",
        path.display()
    );
}
