//! ingressbench: an open-loop load generator, a lab of real proxies, and reports, for
//! choosing the data plane in front of Kubernetes services. The binary only parses
//! arguments and wires the parts (the workspace's crates) together.

mod cli;

fn main() {
    std::process::exit(cli::main());
}
