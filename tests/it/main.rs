//! The integration tests, as one test binary (`cargo test --test it`): the built
//! `ingressbench` run as a backend, load generator, lab and report, against real
//! proxies and Chromium, with the helpers they share in [`common`].
//!
//! All tests run in this one process, two at a time under `make test`; those that
//! generate load, start proxies, run Chromium or time something take turns through
//! [`common::exclusive`].

mod common;

mod backend;
mod bad_input;
mod compare;
mod contract;
mod failover;
mod generators;
mod grpc_streams;
mod http2;
mod k8s_all;
mod k8s_contour;
mod k8s_envoy_gateway;
mod k8s_generators;
mod k8s_haproxy_ingress;
mod k8s_ingress_nginx;
mod k8s_migration;
mod k8s_nginx_gateway_fabric;
mod k8s_platform;
mod k8s_pods;
mod k8s_run;
mod k8s_traefik;
mod lab_caddy;
mod lab_envoy;
mod lab_haproxy;
mod lab_nginx;
mod lab_run;
mod lifecycle;
mod load;
mod lua_modules;
mod metrics;
mod mix;
mod network_lab;
mod outputs;
mod plans;
mod probes;
mod repeat;
mod report;
mod report_e2e;
mod search;
mod sizing;
mod websocket;
