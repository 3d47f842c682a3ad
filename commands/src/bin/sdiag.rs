//! `sdiag` (see [`flotilla_commands::sdiag`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::sdiag::run)
}
