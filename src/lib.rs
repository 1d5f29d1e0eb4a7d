//! ingressbench: an open-loop load generator, a lab of real proxies, and reports,
//! for choosing the data plane in front of Kubernetes services.
pub mod backend;
pub mod cli;
pub mod clock;
pub mod duration;
pub mod engine;
pub mod fsutil;
pub mod lab;
pub mod report;
pub mod results;
pub mod scenario;
pub mod sysinfo;
