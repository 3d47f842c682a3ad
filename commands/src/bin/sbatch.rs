//! `sbatch`: submits a batch script (see [`flotilla_commands::sbatch`]).

fn main() {
    flotilla_commands::common::main_with(flotilla_commands::sbatch::run)
}
