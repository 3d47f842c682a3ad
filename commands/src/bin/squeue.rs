//! `squeue` (see [`flotilla_commands::squeue`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::squeue::run)
}
