//! `sprio` (see [`flotilla_commands::sprio`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::sprio::run)
}
