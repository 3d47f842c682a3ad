//! `sinfo` (see [`flotilla_commands::sinfo`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::sinfo::run)
}
