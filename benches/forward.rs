//! `cargo bench --bench forward -- --model DIR [options]`: the prefill and decode benchmark of `lockstep bench forward`, with its options.
use clap::Parser;
use lockstep::cli::bench_forward::{run, ForwardArgs};

/// `lockstep bench forward`'s options.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    forward: ForwardArgs,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    run(&args.forward, &mut std::io::stdout())
}
