//! `scancel` (see [`flotilla_commands::scancel`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::scancel::run)
}
