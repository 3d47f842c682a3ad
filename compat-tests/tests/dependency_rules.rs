//! The workspace's dependency rule (ARCHITECTURE.md, "Dependency rule"), checked on the
//! dependency graph Cargo resolves (`cargo metadata --format-version 1 --offline --locked`):
//!
//! 1. The daemons (`flotilla-slurmctld`, with `sackd`, and `flotilla-slurmd`) never depend on
//!    the user commands, the admin command, the simulator or their tooling
//!    ([`DAEMON_FORBIDDEN`]).
//! 2. `flotilla-core` and `flotilla-plugins` depend on nothing outside [`PURE_ALLOWED`] (no I/O,
//!    no async runtime, no clock, no libc): a new dependency there is a decision to write
//!    down, not an accident.
//! 3. Only `flotilla-slurmctld` uses an SQL driver ([`SQL_DRIVERS`]).
//! 4. Only `flotilla-slurmd` uses NVML ([`NVML`]).
//! 5. No cycle between workspace crates, dev-dependencies included (Cargo allows one through a
//!    dev-dependency; the end-to-end test crate once depended on the commands while the
//!    commands dev-depended on it).
//!
//! Edges are normal dependencies (`[dependencies]`, any target platform); dev-dependencies
//! count only for rule 5, and build-dependencies only for rules 2 and 5 (what is compiled for
//! the pure crates). Rules 3 and 4 look through every workspace member but do not walk into the one
//! crate allowed the driver, so a test crate depending on the controller does not break them.
//! A failure names the path from the crate to the offending package (`A -> B -> C`).
//!
//! It lives here because compat-tests is the crate whose tests are about the workspace as a
//! whole (and it already has `serde_json`); it needs `cargo` (Cargo sets `CARGO` for tests) and
//! the locked, already downloaded dependencies, never the network.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Packages the daemons must not reach: the user commands' and admin command's crates, the
/// simulator, and what only they need (plots, progress bars, argument parsing with clap, man
/// page writers).
const DAEMON_FORBIDDEN: &[&str] = &[
    "flotilla-commands",
    "flotilla-admin",
    "flotilla-sim",
    "plotters",
    "indicatif",
    "clap",
    "clap_mangen",
    "roff",
];

/// Everything `flotilla-core` and `flotilla-plugins` may reach: themselves, `thiserror` and
/// `serde` with their proc-macros and the proc-macros' own dependencies. All of it is pure
/// computation at run time.
const PURE_ALLOWED: &[&str] = &[
    "flotilla-core",
    "flotilla-plugins",
    "thiserror",
    "thiserror-impl",
    "serde",
    "serde_core",
    "serde_derive",
    "proc-macro2",
    "quote",
    "syn",
    "unicode-ident",
];

/// SQL drivers (and their native libraries) only the controller may use.
const SQL_DRIVERS: &[&str] = &[
    "rusqlite",
    "libsqlite3-sys",
    "sqlite",
    "sqlite3-sys",
    "postgres",
    "tokio-postgres",
    "postgres-protocol",
    "sqlx",
    "sqlx-core",
    "sqlx-sqlite",
    "sqlx-postgres",
    "sqlx-mysql",
    "diesel",
    "mysql",
    "mysql_async",
    "sea-orm",
    "duckdb",
    "libduckdb-sys",
];

/// The NVIDIA management library bindings only the node daemon may use.
const NVML: &[&str] = &["nvml-wrapper", "nvml-wrapper-sys"];

/// One dependency edge: the package id depended on and the kinds it is depended on as
/// (`None` normal, `Some("dev")`, `Some("build")`; one per target platform it is declared for).
type Edge = (String, Vec<Option<String>>);

/// The resolved graph: package names by id, each package's dependency edges, and the ids of
/// the workspace members.
struct Graph {
    name: BTreeMap<String, String>,
    deps: BTreeMap<String, Vec<Edge>>,
    members: Vec<String>,
}

impl Graph {
    /// Runs `cargo metadata` on this workspace for this Linux target and reads its
    /// `packages`, `resolve` and `workspace_members`. Panics with cargo's stderr when it
    /// fails. The platform filter keeps it offline on a fresh machine: a build downloads only
    /// this target's crates, and unfiltered metadata would want every platform's manifests.
    fn load() -> Graph {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let target = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
        let out = Command::new(&cargo)
            .args(["metadata", "--format-version", "1", "--offline", "--locked", "--filter-platform", &target, "--manifest-path"])
            .arg(&manifest)
            .output()
            .unwrap_or_else(|e| panic!("running {cargo} metadata: {e}"));
        assert!(
            out.status.success(),
            "{cargo} metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let m: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
        let str_of = |v: &Value| v.as_str().expect("a string").to_string();
        let name = m["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .map(|p| (str_of(&p["id"]), str_of(&p["name"])))
            .collect();
        let deps = m["resolve"]["nodes"]
            .as_array()
            .expect("resolve.nodes (cargo metadata without --no-deps)")
            .iter()
            .map(|n| {
                let ds = n["deps"]
                    .as_array()
                    .expect("deps")
                    .iter()
                    .map(|d| {
                        let kinds = d["dep_kinds"]
                            .as_array()
                            .expect("dep_kinds")
                            .iter()
                            .map(|k| k["kind"].as_str().map(str::to_string))
                            .collect();
                        (str_of(&d["pkg"]), kinds)
                    })
                    .collect();
                (str_of(&n["id"]), ds)
            })
            .collect();
        let members = m["workspace_members"].as_array().expect("workspace_members").iter().map(str_of).collect();
        Graph { name, deps, members }
    }

    /// The id of workspace member `name`; panics when there is none (a renamed crate must
    /// rename its rule, not silently pass it).
    fn member(&self, name: &str) -> &str {
        self.members
            .iter()
            .find(|id| self.name[*id] == name)
            .unwrap_or_else(|| panic!("no workspace member {name}: update the dependency rule"))
    }

    /// Every package reachable from `root` over edges of `kinds` (`None`: normal), not
    /// walking into packages named in `stop`, with the shortest path to each (names, `root`
    /// first).
    fn reachable(&self, root: &str, kinds: &[Option<&str>], stop: &[&str]) -> BTreeMap<String, Vec<String>> {
        let mut path: BTreeMap<String, Vec<String>> = BTreeMap::new();
        path.insert(root.to_string(), vec![self.name[root].clone()]);
        let mut queue = VecDeque::from([root.to_string()]);
        while let Some(id) = queue.pop_front() {
            for (dep, dep_kinds) in self.deps.get(&id).into_iter().flatten() {
                let counts = dep_kinds.iter().any(|k| kinds.contains(&k.as_deref()));
                if !counts || path.contains_key(dep) || stop.contains(&self.name[dep].as_str()) {
                    continue;
                }
                let mut p = path[&id].clone();
                p.push(self.name[dep].clone());
                path.insert(dep.clone(), p);
                queue.push_back(dep.clone());
            }
        }
        path.into_values().map(|p| (p.last().expect("non-empty").clone(), p)).collect()
    }
}

const NORMAL: &[Option<&str>] = &[None];

/// `A -> B -> C` for each path, one per line.
fn report(paths: &[Vec<String>]) -> String {
    paths.iter().map(|p| format!("  {}", p.join(" -> "))).collect::<Vec<_>>().join("\n")
}

#[test]
fn daemons_do_not_depend_on_the_commands_admin_or_simulator() {
    let g = Graph::load();
    let mut bad = Vec::new();
    for daemon in ["flotilla-slurmctld", "flotilla-slurmd", "flotilla-slurmrestd"] {
        let reach = g.reachable(g.member(daemon), NORMAL, &[]);
        bad.extend(DAEMON_FORBIDDEN.iter().filter_map(|f| reach.get(*f).cloned()));
    }
    assert!(
        bad.is_empty(),
        "the daemons depend on the commands, the admin command or the simulator \
         (ARCHITECTURE.md, Dependency rule):\n{}",
        report(&bad)
    );
}

/// What `flotilla-rest` (Slurm's REST data, shared by slurmrestd and the commands' `--json`)
/// must not reach: an async runtime or an HTTP stack, so that the commands stay lean.
const REST_FORBIDDEN: &[&str] = &["tokio", "axum", "hyper", "flotilla-slurmctld", "flotilla-slurmd", "rusqlite"];

#[test]
fn the_rest_data_crate_has_no_runtime_or_http_stack() {
    let g = Graph::load();
    let reach = g.reachable(g.member("flotilla-rest"), NORMAL, &[]);
    let bad: Vec<Vec<String>> = REST_FORBIDDEN.iter().filter_map(|f| reach.get(*f).cloned()).collect();
    assert!(bad.is_empty(), "flotilla-rest reaches a runtime or HTTP stack (ARCHITECTURE.md, Dependency rule):\n{}", report(&bad));
}

#[test]
fn core_and_plugins_depend_only_on_pure_crates() {
    let g = Graph::load();
    let mut bad = Vec::new();
    for pure in ["flotilla-core", "flotilla-plugins"] {
        let reach = g.reachable(g.member(pure), &[None, Some("build")], &[]);
        bad.extend(reach.into_iter().filter(|(n, _)| !PURE_ALLOWED.contains(&n.as_str())).map(|(_, p)| p));
    }
    assert!(
        bad.is_empty(),
        "flotilla-core and flotilla-plugins may depend only on {PURE_ALLOWED:?} (no I/O, no async, \
         no libc; ARCHITECTURE.md, Dependency rule); a new dependency there is a design decision:\n{}",
        report(&bad)
    );
}

/// Packages of `drivers` that workspace members other than `owner` reach without going
/// through `owner`.
fn reached_besides(g: &Graph, owner: &str, drivers: &[&str]) -> Vec<Vec<String>> {
    let owner_id = g.member(owner);
    let mut bad = BTreeSet::new();
    for m in g.members.iter().filter(|m| *m != owner_id) {
        let reach = g.reachable(m, NORMAL, &[owner]);
        bad.extend(drivers.iter().filter_map(|d| reach.get(*d).cloned()));
    }
    bad.into_iter().collect()
}

#[test]
fn only_the_controller_uses_an_sql_driver() {
    let g = Graph::load();
    let owner_uses = g.reachable(g.member("flotilla-slurmctld"), NORMAL, &[]);
    assert!(owner_uses.contains_key("rusqlite"), "the controller's store is SQLite: is the rule still right?");
    let bad = reached_besides(&g, "flotilla-slurmctld", SQL_DRIVERS);
    assert!(
        bad.is_empty(),
        "only flotilla-slurmctld may use an SQL driver (ARCHITECTURE.md, Dependency rule):\n{}",
        report(&bad)
    );
}

#[test]
fn only_the_node_daemon_uses_nvml() {
    let g = Graph::load();
    let owner_uses = g.reachable(g.member("flotilla-slurmd"), NORMAL, &[]);
    assert!(owner_uses.contains_key("nvml-wrapper"), "the node daemon reads GPU health with NVML: is the rule still right?");
    let bad = reached_besides(&g, "flotilla-slurmd", NVML);
    assert!(
        bad.is_empty(),
        "only flotilla-slurmd may use NVML (ARCHITECTURE.md, Dependency rule):\n{}",
        report(&bad)
    );
}

#[test]
fn no_cycle_between_workspace_crates() {
    let g = Graph::load();
    let every_kind: &[Option<&str>] = &[None, Some("dev"), Some("build")];
    // Walk only workspace members: a cycle among them is what this rule is about.
    let outside: Vec<&str> = g.name.iter().filter(|(id, _)| !g.members.contains(id)).map(|(_, n)| n.as_str()).collect();
    let id_of = |name: &str| g.members.iter().find(|id| g.name[*id] == name).expect("a member");
    let mut bad = Vec::new();
    for m in &g.members {
        for (name, path) in g.reachable(m, every_kind, &outside) {
            if g.deps[id_of(&name)].iter().any(|(d, _)| d == m) {
                let mut p = path;
                p.push(g.name[m].clone());
                bad.push(p);
            }
        }
    }
    assert!(
        bad.is_empty(),
        "a cycle between workspace crates (dev-dependencies included; ARCHITECTURE.md, Dependency rule):\n{}",
        report(&bad)
    );
}

#[test]
fn paths_are_shortest_and_stop_where_told() {
    // A hand-made graph: a -> b -> c, a -> c (dev), a -> d -> c.
    let id = |s: &str| s.to_string();
    let g = Graph {
        name: ["a", "b", "c", "d"].iter().map(|s| (id(s), id(s))).collect(),
        deps: [
            ("a", vec![("b", vec![None]), ("c", vec![Some("dev".into())]), ("d", vec![None])]),
            ("b", vec![("c", vec![None])]),
            ("d", vec![("c", vec![None])]),
        ]
        .into_iter()
        .map(|(k, v)| (id(k), v.into_iter().map(|(d, ks)| (id(d), ks)).collect()))
        .collect(),
        members: vec![id("a")],
    };
    let r = g.reachable("a", NORMAL, &[]);
    assert_eq!(r["c"], ["a", "b", "c"], "dev edges do not count; the first shortest path wins");
    let r = g.reachable("a", NORMAL, &["b"]);
    assert_eq!(r["c"], ["a", "d", "c"]);
    assert!(!r.contains_key("b"));
    let r = g.reachable("a", &[None, Some("dev")], &[]);
    assert_eq!(r["c"], ["a", "c"]);
}
