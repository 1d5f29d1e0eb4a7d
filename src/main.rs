fn main() {
    std::process::exit(ingressbench::cli::main());
}
