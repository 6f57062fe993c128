//! `strata-bench-child SPEC_JSON`: runs one benchmark spec in this process and writes its JSON
//! lines to stdout. `compare` and `matrix` start one per run so that each engine's peak memory and
//! disk writes are its own; `strata bench child` does the same from the `strata` binary.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = strata_bench::runner::child_main(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
