//! `srun`: runs a job step (see [`flotilla_commands::srun`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::srun::run)
}
