//! `sdeploy` (see [`flotilla_commands::sdeploy`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::sdeploy::run)
}
