use clap::Parser;

fn main() {
    let cli = aecm::cli::Cli::parse();
    if let Err(e) = aecm::cli::run(cli) {
        eprintln!("error: {e:#}");
        std::process::exit(aecm::cli::exit_code(&e));
    }
}
