//! `sstat` (see [`flotilla_commands::sstat`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::sstat::run)
}
