//! `scontrol`: Slurm's administrative tool.
fn main() {
    std::process::exit(0);
}
