//! `sacct` (see [`flotilla_commands::sacct`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::sacct::run)
}
