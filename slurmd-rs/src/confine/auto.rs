//! Picks the cgroup implementation the host offers: v2 when the unified hierarchy at the root
//! lists the `memory` controller in `cgroup.controllers`, else v1 when `memory` and `devices`
//! are mounted as v1 hierarchies under the root, else none.

use super::v1::CgroupV1;
use super::v2::CgroupV2;
use super::{ConfineError, Confinement};
use std::path::Path;

/// What the host offers under a cgroup root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupMode {
    /// Unified hierarchy with the memory controller.
    V2,
    /// v1 `memory` and `devices` hierarchies.
    V1,
    /// Neither: jobs cannot be confined.
    None,
}

/// Detects the mode under `root` (normally `/sys/fs/cgroup`).
pub fn detect(root: &Path) -> CgroupMode {
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|c| c == "memory") {
        return CgroupMode::V2;
    }
    let v1 = root.join("memory").join("memory.limit_in_bytes").is_file()
        && root.join("devices").join("devices.deny").exists();
    if v1 {
        CgroupMode::V1
    } else {
        CgroupMode::None
    }
}

/// The confinement the host offers under `root` for node daemon `node`; an error saying what
/// is missing when it offers none (the daemon decides whether to run unconfined).
pub fn auto(root: &Path, node: &str) -> Result<Box<dyn Confinement>, ConfineError> {
    match detect(root) {
        CgroupMode::V2 => Ok(Box::new(CgroupV2::new(root, node))),
        CgroupMode::V1 => Ok(Box::new(CgroupV1::new(root, node))),
        CgroupMode::None => Err(ConfineError::Unsupported("memory".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_when_the_unified_root_lists_memory() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("cgroup.controllers"),
            "cpu io memory pids\n",
        )
        .unwrap();
        assert_eq!(detect(tmp.path()), CgroupMode::V2);
        assert_eq!(auto(tmp.path(), "n1").unwrap().kind(), "v2");
    }

    #[test]
    fn v1_when_memory_and_devices_are_mounted() {
        let tmp = tempfile::tempdir().unwrap();
        // A v2 root without controllers (hybrid mode) does not count.
        std::fs::write(tmp.path().join("cgroup.controllers"), "\n").unwrap();
        std::fs::create_dir_all(tmp.path().join("memory")).unwrap();
        std::fs::write(tmp.path().join("memory/memory.limit_in_bytes"), "").unwrap();
        assert_eq!(detect(tmp.path()), CgroupMode::None, "devices missing");
        std::fs::create_dir_all(tmp.path().join("devices")).unwrap();
        std::fs::write(tmp.path().join("devices/devices.deny"), "").unwrap();
        assert_eq!(detect(tmp.path()), CgroupMode::V1);
        assert_eq!(auto(tmp.path(), "n1").unwrap().kind(), "v1");
    }

    #[test]
    fn none_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(detect(tmp.path()), CgroupMode::None);
        assert_eq!(
            auto(tmp.path(), "n1").unwrap_err().to_string(),
            "no usable cgroup memory controller"
        );
    }

    /// On the machine running the tests, `auto` gives the confinement `detect` names (or the
    /// error when it names none): the two read the real root the same way.
    #[test]
    fn this_host() {
        let root = Path::new("/sys/fs/cgroup");
        let mode = detect(root);
        match (mode, auto(root, "n1")) {
            (CgroupMode::V2, Ok(c)) => assert_eq!(c.kind(), "v2"),
            (CgroupMode::V1, Ok(c)) => assert_eq!(c.kind(), "v1"),
            (CgroupMode::None, Err(e)) => assert_eq!(e.to_string(), "no usable cgroup memory controller"),
            (mode, other) => panic!("detect says {mode:?}, auto gives {:?}", other.map(|c| c.kind())),
        }
    }
}
