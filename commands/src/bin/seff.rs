//! `seff` (see [`flotilla_commands::seff`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::seff::run)
}
