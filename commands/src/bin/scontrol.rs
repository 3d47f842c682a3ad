//! `scontrol`: Slurm's administrative tool (see [`flotilla_commands::scontrol`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::scontrol::run)
}
