//! `sacctmgr` (see [`flotilla_commands::sacctmgr`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::sacctmgr::run)
}
