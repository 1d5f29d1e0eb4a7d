//! Envoy's configuration as protobuf messages, built once for both Envoy profiles:
//! the `envoy-xds` profile pushes them over ADS as a controller would, the
//! `envoy-hot-restart` profile writes them into a static bootstrap for a new process.
//!
//! The system is the lab's usual one: two listeners on 127.0.0.1 (HTTPS terminating
//! TLS 1.2/1.3 with the run's certificate, and plain HTTP) sharing one route
//! configuration, which sends everything to one cluster of the backends over
//! HTTP/1.1 keep-alive. S3's route changes are response headers added by the route
//! (`cors`, `header`) or a prefix rewrite (`rewrite`). A route set
//! ([`sut::routes`]) adds a virtual host per host of the set to that route
//! configuration, beside the catch-all one, as Envoy Gateway and Contour render
//! HTTPRoutes.

use crate::driver::{DriverContext, Endpoint, Route};
use crate::RouteSet;
use envoy_types::pb::envoy::config::bootstrap::v3::{bootstrap, Admin, Bootstrap};
use envoy_types::pb::envoy::config::cluster::v3::{
    circuit_breakers::Thresholds, cluster, CircuitBreakers, Cluster, OutlierDetection,
};
use envoy_types::pb::envoy::config::core::v3::{
    address, config_source, data_source, grpc_service, header_value_option, socket_address,
    transport_socket, AggregatedConfigSource, ApiConfigSource, ApiVersion, ConfigSource,
    DataSource, GrpcService, HeaderValue, HeaderValueOption, Http1ProtocolOptions,
    Http2ProtocolOptions, HttpProtocolOptions as CommonHttpOptions, Node, Pipe, SocketAddress,
    TransportSocket,
};
use envoy_types::pb::envoy::config::core::v3::{api_config_source, Address};
use envoy_types::pb::envoy::config::endpoint::v3::{
    lb_endpoint, ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints,
};
use envoy_types::pb::envoy::config::listener::v3::{filter, Filter, FilterChain, Listener};
use envoy_types::pb::envoy::config::route::v3::{
    retry_policy::RetryHostPredicate, route, route_action, route_match, RetryPolicy,
    Route as EnvoyRoute, RouteAction, RouteConfiguration, RouteMatch, VirtualHost,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_connection_manager, http_filter, HttpConnectionManager, HttpFilter, Rds,
};
use envoy_types::pb::envoy::extensions::retry::host::previous_hosts::v3::PreviousHostsPredicate;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    secret, tls_parameters::TlsProtocol, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig,
    Secret, TlsCertificate, TlsParameters,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    http_protocol_options::{explicit_http_config, ExplicitHttpConfig, UpstreamProtocolOptions},
    HttpProtocolOptions,
};
use envoy_types::pb::google::protobuf::{Any, BoolValue, Duration as PbDuration, UInt32Value};
use prost::{Message, Name};
use std::net::SocketAddr;
use std::path::Path;

/// The route configuration both listeners use.
pub const ROUTES: &str = "ingress";
/// The cluster of the backends.
pub const CLUSTER: &str = "backends";
/// The behaviour probes' fixture cluster ([`fixture_cluster`]).
pub const FIXTURE_CLUSTER: &str = "ib-empty";
/// The serving certificate's name over SDS.
pub const SECRET: &str = "ingress-cert";
/// The cluster of the control plane (the ADS server) in an xDS bootstrap.
const XDS_CLUSTER: &str = "xds";

/// Packs a message as `google.protobuf.Any`, the way xDS carries resources.
pub fn any<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

fn seconds(s: i64) -> Option<PbDuration> {
    Some(PbDuration {
        seconds: s,
        nanos: 0,
    })
}

fn u32v(v: u32) -> Option<UInt32Value> {
    Some(UInt32Value { value: v })
}

fn file(path: &Path) -> Option<DataSource> {
    Some(DataSource {
        specifier: Some(data_source::Specifier::Filename(
            path.to_string_lossy().into_owned(),
        )),
        ..DataSource::default()
    })
}

fn tcp(ip: &str, port: u16) -> Option<Address> {
    Some(Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: ip.to_string(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(u32::from(port))),
            ..SocketAddress::default()
        })),
    })
}

fn ads() -> Option<ConfigSource> {
    Some(ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        ..ConfigSource::default()
    })
}

fn header(key: &str, value: &str) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: key.to_string(),
            value: value.to_string(),
            ..HeaderValue::default()
        }),
        append_action: header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        ..HeaderValueOption::default()
    }
}

/// Where the listeners get their routes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// From the control plane over ADS (`envoy-xds`).
    Ads,
    /// Written into the listeners themselves (`envoy-hot-restart`).
    Static,
}

/// The route configuration for S3's `route`: every path to the backends, with the
/// route's headers or rewrite. A refused connection or a reset before any byte of the
/// request was sent is retried on another backend, as the other lab proxies do
/// (nginx's `proxy_next_upstream error`, HAProxy's `redispatch`).
pub fn route_configuration(route: Route) -> RouteConfiguration {
    route_configuration_with(route, None)
}

/// Every route goes to the backends cluster, with the same retries.
fn backend_action() -> RouteAction {
    RouteAction {
        cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(CLUSTER.into())),
        retry_policy: Some(RetryPolicy {
            retry_on: "connect-failure,refused-stream,reset-before-request".into(),
            num_retries: u32v(2),
            retry_host_predicate: vec![RetryHostPredicate {
                name: "envoy.retry_host_predicates.previous_hosts".into(),
                config_type: Some(
                    envoy_types::pb::envoy::config::route::v3::retry_policy::retry_host_predicate::ConfigType::TypedConfig(
                        any(&PreviousHostsPredicate {}),
                    ),
                ),
            }],
            host_selection_retry_max_attempts: 3,
            ..RetryPolicy::default()
        }),
        ..RouteAction::default()
    }
}

/// [`route_configuration`] with a route set beside the catch-all virtual host, as
/// Envoy Gateway and Contour render HTTPRoutes: a virtual host per host of the set
/// (`domains` the host's name alone), an exact-path route per route that adds
/// [`sut::routes::ROUTE_HEADER`] with the route's name and goes to the backends.
/// Another path on those hosts matches no route, which Envoy answers with 404; any
/// other host still takes the catch-all (`*`), unchanged. A set of 0 routes adds
/// nothing.
pub fn route_configuration_with(route: Route, set: Option<&RouteSet>) -> RouteConfiguration {
    let mut action = backend_action();
    let mut headers = Vec::new();
    match route {
        Route::Base => {}
        Route::Cors => {
            headers.push(header("access-control-allow-origin", "*"));
            headers.push(header("access-control-allow-methods", "GET, POST, OPTIONS"));
            headers.push(header(
                "access-control-allow-headers",
                "Content-Type, Authorization",
            ));
        }
        Route::Header => headers.push(header("x-custom", "1")),
        Route::Rewrite => action.prefix_rewrite = "/rewritten/".into(),
    }
    let mut virtual_hosts = vec![VirtualHost {
        name: "all".into(),
        domains: vec!["*".into()],
        routes: vec![EnvoyRoute {
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                ..RouteMatch::default()
            }),
            action: Some(route::Action::Route(action)),
            response_headers_to_add: headers,
            ..EnvoyRoute::default()
        }],
        ..VirtualHost::default()
    }];
    if let Some(set) = set.filter(|s| s.count > 0) {
        virtual_hosts.extend(route_set_hosts(set));
    }
    RouteConfiguration {
        name: ROUTES.into(),
        virtual_hosts,
        ..RouteConfiguration::default()
    }
}

/// [`route_configuration_with`], and with `fixture` the behaviour probes' fixture
/// host ([`sut::routes::FIXTURE_HOST`]) as Envoy Gateway and Contour render an
/// HTTPRoute of its own: a virtual host whose one route, the prefix
/// [`sut::routes::FIXTURE_EMPTY_PATH`], goes to a cluster with no endpoint
/// ([`FIXTURE_CLUSTER`]; Envoy answers 503, "no healthy upstream"); any other path
/// matches no route (404).
pub fn routes(route: Route, set: Option<&RouteSet>, fixture: bool) -> RouteConfiguration {
    let mut rc = route_configuration_with(route, set);
    if fixture {
        rc.virtual_hosts.push(VirtualHost {
            name: "fixture".into(),
            domains: vec![sut::routes::FIXTURE_HOST.into()],
            routes: vec![EnvoyRoute {
                r#match: Some(RouteMatch {
                    path_specifier: Some(route_match::PathSpecifier::PathSeparatedPrefix(
                        sut::routes::FIXTURE_EMPTY_PATH.into(),
                    )),
                    ..RouteMatch::default()
                }),
                action: Some(route::Action::Route(RouteAction {
                    cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(
                        FIXTURE_CLUSTER.into(),
                    )),
                    ..RouteAction::default()
                })),
                ..EnvoyRoute::default()
            }],
            ..VirtualHost::default()
        });
    }
    rc
}

/// The probes' fixture cluster: static, no endpoint (a Service with no ready pod).
pub fn fixture_cluster() -> Cluster {
    Cluster {
        name: FIXTURE_CLUSTER.into(),
        connect_timeout: seconds(2),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Static as i32,
        )),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: FIXTURE_CLUSTER.into(),
            ..ClusterLoadAssignment::default()
        }),
        ..Cluster::default()
    }
}

/// The clusters of a run: the backends, and the fixture's when it has one.
pub fn clusters(ctx: &DriverContext, source: Source, endpoints: &[Endpoint]) -> Vec<Cluster> {
    let mut c = vec![cluster(ctx, source, endpoints)];
    if ctx.probe_fixture {
        c.push(fixture_cluster());
    }
    c
}

/// The virtual hosts of a route set, one per host, its routes in order.
fn route_set_hosts(set: &RouteSet) -> impl Iterator<Item = VirtualHost> + '_ {
    set.host_names()
        .enumerate()
        .map(move |(h, name)| VirtualHost {
            routes: set
                .routes_of(h as u32)
                .map(|i| EnvoyRoute {
                    name: set.name(i),
                    r#match: Some(RouteMatch {
                        path_specifier: Some(route_match::PathSpecifier::Path(set.path(i))),
                        ..RouteMatch::default()
                    }),
                    action: Some(route::Action::Route(backend_action())),
                    response_headers_to_add: vec![header(
                        sut::routes::ROUTE_HEADER,
                        &set.marker(i),
                    )],
                    ..EnvoyRoute::default()
                })
                .collect(),
            domains: vec![name.clone()],
            name,
            ..VirtualHost::default()
        })
}

/// The HTTP connection manager of a listener: HTTP/1.1 only, routes from `source`.
fn http_manager(
    prefix: &str,
    source: Source,
    route: Route,
    set: Option<&RouteSet>,
    http2: bool,
    fixture: bool,
) -> HttpConnectionManager {
    let route_specifier = match source {
        Source::Ads => http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: ads(),
            route_config_name: ROUTES.into(),
        }),
        Source::Static => {
            http_connection_manager::RouteSpecifier::RouteConfig(routes(route, set, fixture))
        }
    };
    HttpConnectionManager {
        stat_prefix: prefix.into(),
        // With HTTP/2 offered (HTTPS only), the codec follows what ALPN agreed.
        codec_type: if http2 {
            http_connection_manager::CodecType::Auto as i32
        } else {
            http_connection_manager::CodecType::Http1 as i32
        },
        route_specifier: Some(route_specifier),
        http_filters: vec![HttpFilter {
            name: "envoy.filters.http.router".into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(
                any(&Router::default()),
            )),
            ..HttpFilter::default()
        }],
        // Contour's defaults where a behaviour probe sees them (its
        // internal/envoy/v3/listener.go): the client's address appended to
        // X-Forwarded-For and X-Forwarded-Proto set by Envoy, paths normalised and
        // `//` merged, a client's X-Request-Id kept, HTTP/1.0 accepted. Envoy
        // Gateway differs: it rejects headers with underscores (400) and answers
        // HTTP/1.0 with 426 (docs/probes.md).
        use_remote_address: Some(BoolValue { value: true }),
        normalize_path: Some(BoolValue { value: true }),
        merge_slashes: true,
        preserve_external_request_id: true,
        http_protocol_options: Some(Http1ProtocolOptions {
            accept_http_10: true,
            ..Http1ProtocolOptions::default()
        }),
        // WebSocket upgrades carried on every route, as Envoy Gateway renders its
        // listeners (Contour asks for it per route: `enableWebsockets`).
        upgrade_configs: vec![http_connection_manager::UpgradeConfig {
            upgrade_type: "websocket".into(),
            ..http_connection_manager::UpgradeConfig::default()
        }],
        ..HttpConnectionManager::default()
    }
}

/// The serving certificate as an SDS secret ([`SECRET`]), its PEM inline, as an
/// xDS controller sends the contents of a TLS Secret.
///
/// # Errors
/// The files' read error.
pub fn certificate_secret(cert: &Path, key: &Path) -> std::io::Result<Secret> {
    let inline = |p: &Path| -> std::io::Result<Option<DataSource>> {
        Ok(Some(DataSource {
            specifier: Some(data_source::Specifier::InlineBytes(std::fs::read(p)?)),
            ..DataSource::default()
        }))
    };
    Ok(Secret {
        name: SECRET.into(),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: inline(cert)?,
            private_key: inline(key)?,
            ..TlsCertificate::default()
        })),
    })
}

/// The two listeners: HTTPS on `https_port` and plain HTTP on `http_port`, 127.0.0.1.
pub fn listeners(ctx: &DriverContext, source: Source, route: Route) -> Vec<Listener> {
    listeners_with(ctx, source, route, None)
}

/// [`listeners`] whose routes, when written into them ([`Source::Static`]), have a
/// route set beside the catch-all ([`route_configuration_with`]); over ADS the route
/// configuration carries it instead.
pub fn listeners_with(
    ctx: &DriverContext,
    source: Source,
    route: Route,
    set: Option<&RouteSet>,
) -> Vec<Listener> {
    let tls = DownstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_params: Some(TlsParameters {
                tls_minimum_protocol_version: TlsProtocol::TlSv12 as i32,
                tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
                ..TlsParameters::default()
            }),
            // Over ADS the certificate is a secret of its own (SDS), as Contour and
            // Envoy Gateway send it, so a new one changes no listener.
            tls_certificates: match source {
                Source::Ads => Vec::new(),
                Source::Static => vec![TlsCertificate {
                    certificate_chain: file(&ctx.cert),
                    private_key: file(&ctx.key),
                    ..TlsCertificate::default()
                }],
            },
            tls_certificate_sds_secret_configs: match source {
                Source::Ads => vec![SdsSecretConfig {
                    name: SECRET.into(),
                    sds_config: ads(),
                }],
                Source::Static => Vec::new(),
            },
            alpn_protocols: if ctx.http2 {
                vec!["h2".into(), "http/1.1".into()]
            } else {
                vec!["http/1.1".into()]
            },
            ..CommonTlsContext::default()
        }),
        ..DownstreamTlsContext::default()
    };
    let listener = |name: &str, port: u16, tls: Option<&DownstreamTlsContext>| Listener {
        name: name.into(),
        address: tcp("127.0.0.1", port),
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: "envoy.filters.network.http_connection_manager".into(),
                config_type: Some(filter::ConfigType::TypedConfig(any(&http_manager(
                    name,
                    source,
                    route,
                    set,
                    ctx.http2 && tls.is_some(),
                    ctx.probe_fixture,
                )))),
            }],
            transport_socket: tls.map(|t| TransportSocket {
                name: "envoy.transport_sockets.tls".into(),
                config_type: Some(transport_socket::ConfigType::TypedConfig(any(t))),
            }),
            ..FilterChain::default()
        }],
        ..Listener::default()
    };
    vec![
        listener("https", ctx.https_port, Some(&tls)),
        listener("http", ctx.http_port, None),
    ]
}

/// The endpoints of the backends cluster.
pub fn load_assignment(endpoints: &[Endpoint]) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: CLUSTER.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: endpoints.iter().map(lb_endpoint).collect(),
            ..LocalityLbEndpoints::default()
        }],
        ..ClusterLoadAssignment::default()
    }
}

fn lb_endpoint(e: &Endpoint) -> LbEndpoint {
    let addr: SocketAddr = e.addr;
    LbEndpoint {
        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(EnvoyEndpoint {
            address: tcp(&addr.ip().to_string(), addr.port()),
            hostname: e.id.clone(),
            ..EnvoyEndpoint::default()
        })),
        ..LbEndpoint::default()
    }
}

/// HTTP/1.1 to the backends over keep-alive: S1's requests per upstream connection.
/// Envoy keeps idle upstream connections until its idle timeout (1 h) and has no
/// count of idle connections to keep, so `upstream_keepalive` has no equivalent.
fn upstream_http1(ctx: &DriverContext) -> HttpProtocolOptions {
    HttpProtocolOptions {
        common_http_protocol_options: Some(CommonHttpOptions {
            max_requests_per_connection: u32v(
                u32::try_from(ctx.upstream_keepalive_requests).unwrap_or(u32::MAX),
            ),
            ..CommonHttpOptions::default()
        }),
        upstream_protocol_options: Some(UpstreamProtocolOptions::ExplicitHttpConfig(
            ExplicitHttpConfig {
                // gRPC goes to the backends over h2c.
                protocol_config: Some(if ctx.upstream_h2c {
                    explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                        Http2ProtocolOptions::default(),
                    )
                } else {
                    explicit_http_config::ProtocolConfig::HttpProtocolOptions(
                        Http1ProtocolOptions::default(),
                    )
                }),
            },
        )),
        ..HttpProtocolOptions::default()
    }
}

/// The tuned variant's passive health check: Envoy's outlier detection ejects a host
/// after `max_fails` consecutive failures (5xx, and resets and refused connections,
/// which Envoy counts with them unless told to split them) for `fail_timeout`. The
/// ejection time is held at `fail_timeout` (Envoy otherwise multiplies it by the
/// times the host was ejected), the sweep that returns hosts runs every 100 ms, and
/// any share of the hosts may be out (Envoy's default is 10 %).
fn outlier_detection(p: &crate::health::PassiveHealth) -> OutlierDetection {
    let d = |t: std::time::Duration| {
        Some(PbDuration {
            seconds: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(t.subsec_nanos()).unwrap_or(0),
        })
    };
    OutlierDetection {
        consecutive_5xx: u32v(p.max_fails.max(1)),
        interval: d(std::time::Duration::from_millis(100)),
        base_ejection_time: d(p.fail_timeout),
        max_ejection_time: d(p.fail_timeout),
        max_ejection_percent: u32v(100),
        ..OutlierDetection::default()
    }
}

/// The backends cluster: endpoints from ADS (`Source::Ads`) or listed in it.
pub fn cluster(ctx: &DriverContext, source: Source, endpoints: &[Endpoint]) -> Cluster {
    // Envoy's circuit breakers default to 1024 connections and requests per cluster;
    // no other lab proxy has such a limit, so they are set out of the way.
    let open = Thresholds {
        max_connections: u32v(1_000_000),
        max_pending_requests: u32v(1_000_000),
        max_requests: u32v(1_000_000),
        max_retries: u32v(1_000_000),
        ..Thresholds::default()
    };
    let mut c = Cluster {
        name: CLUSTER.into(),
        connect_timeout: seconds(2),
        circuit_breakers: Some(CircuitBreakers {
            thresholds: vec![open],
            ..CircuitBreakers::default()
        }),
        typed_extension_protocol_options: [(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".to_string(),
            any(&upstream_http1(ctx)),
        )]
        .into(),
        outlier_detection: ctx.passive_health.as_ref().map(outlier_detection),
        ..Cluster::default()
    };
    match source {
        Source::Ads => {
            c.cluster_discovery_type = Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::Eds as i32,
            ));
            c.eds_cluster_config = Some(cluster::EdsClusterConfig {
                eds_config: ads(),
                ..cluster::EdsClusterConfig::default()
            });
        }
        Source::Static => {
            c.cluster_discovery_type = Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::Static as i32,
            ));
            c.load_assignment = Some(load_assignment(endpoints));
        }
    }
    c
}

/// The bootstrap of an `envoy-xds` Envoy: an admin listener, and everything else from
/// the ADS server on the Unix socket `xds_socket` (gRPC over HTTP/2).
pub fn xds_bootstrap(admin_port: u16, xds_socket: &Path) -> Bootstrap {
    let control_plane = Cluster {
        name: XDS_CLUSTER.into(),
        connect_timeout: seconds(1),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Static as i32,
        )),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: XDS_CLUSTER.into(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(EnvoyEndpoint {
                        address: Some(Address {
                            address: Some(address::Address::Pipe(Pipe {
                                path: xds_socket.to_string_lossy().into_owned(),
                                mode: 0,
                            })),
                        }),
                        ..EnvoyEndpoint::default()
                    })),
                    ..LbEndpoint::default()
                }],
                ..LocalityLbEndpoints::default()
            }],
            ..ClusterLoadAssignment::default()
        }),
        typed_extension_protocol_options: [(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions".to_string(),
            any(&HttpProtocolOptions {
                upstream_protocol_options: Some(UpstreamProtocolOptions::ExplicitHttpConfig(
                    ExplicitHttpConfig {
                        protocol_config: Some(
                            explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                                Http2ProtocolOptions::default(),
                            ),
                        ),
                    },
                )),
                ..HttpProtocolOptions::default()
            }),
        )]
        .into(),
        ..Cluster::default()
    };
    Bootstrap {
        node: node(),
        admin: admin(admin_port),
        static_resources: Some(bootstrap::StaticResources {
            clusters: vec![control_plane],
            ..bootstrap::StaticResources::default()
        }),
        dynamic_resources: Some(bootstrap::DynamicResources {
            ads_config: Some(ApiConfigSource {
                api_type: api_config_source::ApiType::Grpc as i32,
                transport_api_version: ApiVersion::V3 as i32,
                grpc_services: vec![GrpcService {
                    target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                        grpc_service::EnvoyGrpc {
                            cluster_name: XDS_CLUSTER.into(),
                            ..grpc_service::EnvoyGrpc::default()
                        },
                    )),
                    ..GrpcService::default()
                }],
                set_node_on_first_message_only: true,
                ..ApiConfigSource::default()
            }),
            lds_config: ads(),
            cds_config: ads(),
            ..bootstrap::DynamicResources::default()
        }),
        ..Bootstrap::default()
    }
}

/// The bootstrap of an `envoy-hot-restart` Envoy: everything static, the route set
/// (if any) in both listeners' routes.
pub fn static_bootstrap(
    ctx: &DriverContext,
    admin_port: u16,
    endpoints: &[Endpoint],
    route: Route,
    set: Option<&RouteSet>,
) -> Bootstrap {
    Bootstrap {
        node: node(),
        admin: admin(admin_port),
        static_resources: Some(bootstrap::StaticResources {
            listeners: listeners_with(ctx, Source::Static, route, set),
            clusters: clusters(ctx, Source::Static, endpoints),
            ..bootstrap::StaticResources::default()
        }),
        ..Bootstrap::default()
    }
}

fn node() -> Option<Node> {
    Some(Node {
        id: "ingressbench".into(),
        cluster: "ingressbench".into(),
        ..Node::default()
    })
}

fn admin(port: u16) -> Option<Admin> {
    Some(Admin {
        address: tcp("127.0.0.1", port),
        ..Admin::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn ctx() -> DriverContext {
        DriverContext::with_s1_tuning(
            PathBuf::from("/w"),
            PathBuf::from("/o"),
            (PathBuf::from("/o/cert.pem"), PathBuf::from("/o/key.pem")),
            (8443, 8080),
        )
    }

    fn ep(id: &str, port: u16) -> Endpoint {
        Endpoint {
            id: id.into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    fn headers(route: Route) -> Vec<(String, String)> {
        let rc = route_configuration(route);
        rc.virtual_hosts[0].routes[0]
            .response_headers_to_add
            .iter()
            .map(|h| {
                let h = h.header.as_ref().unwrap();
                (h.key.clone(), h.value.clone())
            })
            .collect()
    }

    fn rewrite(route: Route) -> String {
        let rc = route_configuration(route);
        match &rc.virtual_hosts[0].routes[0].action {
            Some(route::Action::Route(a)) => a.prefix_rewrite.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_route_adds_its_headers_or_rewrite_and_base_adds_none() {
        assert!(headers(Route::Base).is_empty());
        assert_eq!(rewrite(Route::Base), "");
        assert_eq!(
            headers(Route::Header),
            vec![("x-custom".into(), "1".into())]
        );
        let cors = headers(Route::Cors);
        assert_eq!(cors.len(), 3);
        assert!(cors.contains(&("access-control-allow-origin".into(), "*".into())));
        assert_eq!(rewrite(Route::Rewrite), "/rewritten/");
        assert!(headers(Route::Rewrite).is_empty());
    }

    #[test]
    fn endpoints_keep_their_ids_and_addresses() {
        let cla = load_assignment(&[ep("b1", 4001), ep("b2", 4002)]);
        let eps = &cla.endpoints[0].lb_endpoints;
        assert_eq!(eps.len(), 2);
        let Some(lb_endpoint::HostIdentifier::Endpoint(e)) = &eps[1].host_identifier else {
            panic!()
        };
        assert_eq!(e.hostname, "b2");
        let Some(address::Address::SocketAddress(sa)) = &e.address.as_ref().unwrap().address else {
            panic!()
        };
        assert_eq!(sa.address, "127.0.0.1");
        assert_eq!(
            sa.port_specifier,
            Some(socket_address::PortSpecifier::PortValue(4002))
        );
        assert!(load_assignment(&[]).endpoints[0].lb_endpoints.is_empty());
    }

    #[test]
    fn the_cluster_is_eds_over_ads_or_static_with_its_endpoints() {
        let c = cluster(&ctx(), Source::Ads, &[ep("b1", 1)]);
        assert!(c.load_assignment.is_none());
        assert!(c.eds_cluster_config.is_some());
        let c = cluster(&ctx(), Source::Static, &[ep("b1", 1)]);
        assert_eq!(
            c.load_assignment.unwrap().endpoints[0].lb_endpoints.len(),
            1
        );
        let opts = &c.typed_extension_protocol_options
            ["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
        let opts = HttpProtocolOptions::decode(opts.value.as_slice()).unwrap();
        assert_eq!(
            opts.common_http_protocol_options
                .unwrap()
                .max_requests_per_connection,
            u32v(100_000_000)
        );
    }

    /// The TLS context of a listener's first filter chain, decoded.
    fn tls_of(l: &Listener) -> DownstreamTlsContext {
        let Some(transport_socket::ConfigType::TypedConfig(t)) = &l.filter_chains[0]
            .transport_socket
            .as_ref()
            .expect("a TLS listener")
            .config_type
        else {
            panic!("no typed config")
        };
        assert_eq!(
            t.type_url,
            "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"
        );
        DownstreamTlsContext::decode(t.value.as_slice()).unwrap()
    }

    #[test]
    fn listeners_are_https_with_the_certificate_and_plain_http() {
        // Over ADS the certificate is an SDS secret the listener names.
        let over_ads = listeners(&ctx(), Source::Ads, Route::Base);
        let common = tls_of(&over_ads[0]).common_tls_context.unwrap();
        assert!(common.tls_certificates.is_empty());
        assert_eq!(common.tls_certificate_sds_secret_configs[0].name, SECRET);
        assert_eq!(
            common.tls_certificate_sds_secret_configs[0].sds_config,
            ads()
        );
        let ls = listeners(&ctx(), Source::Static, Route::Base);
        assert_eq!(ls.len(), 2);
        assert!(ls[1].filter_chains[0].transport_socket.is_none());
        let tls = tls_of(&ls[0]);
        let cert = &tls.common_tls_context.unwrap().tls_certificates[0];
        assert_eq!(
            cert.certificate_chain.as_ref().unwrap().specifier,
            Some(data_source::Specifier::Filename("/o/cert.pem".into()))
        );
    }

    /// The route configuration a static listener carries, decoded.
    fn static_routes(l: &Listener) -> RouteConfiguration {
        let Some(filter::ConfigType::TypedConfig(t)) = &l.filter_chains[0].filters[0].config_type
        else {
            panic!()
        };
        let hcm = HttpConnectionManager::decode(t.value.as_slice()).unwrap();
        match hcm.route_specifier {
            Some(http_connection_manager::RouteSpecifier::RouteConfig(rc)) => rc,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_probes_fixture_is_a_virtual_host_to_a_cluster_with_no_endpoint() {
        assert_eq!(
            routes(Route::Header, None, false),
            route_configuration(Route::Header)
        );
        let rc = routes(Route::Header, None, true);
        assert_eq!(rc.virtual_hosts.len(), 2);
        assert_eq!(
            rc.virtual_hosts[0],
            route_configuration(Route::Header).virtual_hosts[0]
        );
        let vh = &rc.virtual_hosts[1];
        assert_eq!(vh.domains, vec!["fixture.probes.test".to_string()]);
        assert_eq!(vh.routes.len(), 1, "any other path matches none: 404");
        let Some(route::Action::Route(a)) = &vh.routes[0].action else {
            panic!("{vh:?}");
        };
        assert_eq!(
            a.cluster_specifier,
            Some(route_action::ClusterSpecifier::Cluster(
                FIXTURE_CLUSTER.into()
            ))
        );
        let mut c = ctx();
        assert_eq!(clusters(&c, Source::Ads, &[ep("b1", 1)]).len(), 1);
        c.probe_fixture = true;
        let both = clusters(&c, Source::Ads, &[ep("b1", 1)]);
        assert_eq!(both.len(), 2);
        let empty = both[1].load_assignment.as_ref().unwrap();
        assert!(empty.endpoints.is_empty(), "{empty:?}");
        assert_eq!(empty.cluster_name, FIXTURE_CLUSTER);
        // Written into the listeners of a static bootstrap too.
        let b = static_bootstrap(&c, 9901, &[ep("b1", 1)], Route::Base, None);
        assert_eq!(b.static_resources.unwrap().clusters.len(), 2);
    }

    #[test]
    fn a_route_set_is_a_virtual_host_per_host_and_an_exact_route_per_route() {
        let set = RouteSet::new(25, 10);
        let rc = route_configuration_with(Route::Header, Some(&set));
        assert_eq!(rc.name, ROUTES);
        assert_eq!(rc.virtual_hosts.len(), 11, "the catch-all and 10 hosts");
        // The catch-all is untouched: every path on any other host, with S3's route.
        assert_eq!(
            rc.virtual_hosts[0],
            route_configuration(Route::Header).virtual_hosts[0]
        );
        assert_eq!(rc.virtual_hosts[0].domains, vec!["*".to_string()]);
        let mut names = std::collections::BTreeSet::new();
        let mut routes = 0;
        for (h, vh) in rc.virtual_hosts[1..].iter().enumerate() {
            let host = format!("h{h}.routes.test");
            assert_eq!(vh.domains, vec![host.clone()]);
            assert!(
                names.insert(vh.name.clone()),
                "virtual host names are unique"
            );
            assert_eq!(vh.routes.len(), if h < 5 { 3 } else { 2 }, "{host}");
            for r in &vh.routes {
                let Some(route_match::PathSpecifier::Path(path)) =
                    &r.r#match.as_ref().unwrap().path_specifier
                else {
                    panic!("an exact path: {r:?}")
                };
                let i: u32 = path.strip_prefix("/r").unwrap().parse().unwrap();
                assert_eq!(set.host(i), host, "route {i} is on its own host");
                let hs: Vec<_> = r
                    .response_headers_to_add
                    .iter()
                    .map(|h| h.header.clone().unwrap())
                    .map(|h| (h.key, h.value))
                    .collect();
                assert_eq!(hs, vec![("x-route".to_string(), format!("r{i}"))]);
                let Some(route::Action::Route(a)) = &r.action else {
                    panic!()
                };
                assert_eq!(
                    a.cluster_specifier,
                    Some(route_action::ClusterSpecifier::Cluster(CLUSTER.into()))
                );
                assert_eq!(
                    a.prefix_rewrite, "",
                    "S3's rewrite is the catch-all's alone"
                );
                routes += 1;
            }
        }
        assert_eq!(routes, 25);
        // Route 13 is on host 3, after route 3.
        let Some(route_match::PathSpecifier::Path(p)) = &rc.virtual_hosts[4].routes[1]
            .r#match
            .as_ref()
            .unwrap()
            .path_specifier
        else {
            panic!()
        };
        assert_eq!(p, "/r13");
        // No set, or an empty one: the catch-all alone.
        assert_eq!(
            route_configuration_with(Route::Base, None),
            route_configuration(Route::Base)
        );
        let empty = RouteSet::new(0, 10);
        assert_eq!(
            route_configuration_with(Route::Base, Some(&empty))
                .virtual_hosts
                .len(),
            1
        );
    }

    #[test]
    fn a_static_bootstrap_has_the_route_set_in_both_listeners() {
        let set = RouteSet::new(1000, 10);
        let b = static_bootstrap(&ctx(), 9901, &[ep("b1", 1)], Route::Base, Some(&set));
        let ls = &b.static_resources.as_ref().unwrap().listeners;
        assert_eq!(ls.len(), 2);
        for l in ls {
            let rc = static_routes(l);
            assert_eq!(
                rc,
                route_configuration_with(Route::Base, Some(&set)),
                "{}",
                l.name
            );
            assert_eq!(
                rc.virtual_hosts
                    .iter()
                    .map(|v| v.routes.len())
                    .sum::<usize>(),
                1001
            );
        }
        let none = static_bootstrap(&ctx(), 9901, &[ep("b1", 1)], Route::Base, None);
        for l in &none.static_resources.as_ref().unwrap().listeners {
            assert_eq!(static_routes(l).virtual_hosts.len(), 1);
        }
        assert!(
            b.encoded_len() > 20 * none.encoded_len(),
            "{} {}",
            b.encoded_len(),
            none.encoded_len()
        );
        // Over ADS the listeners name the route configuration, which carries the set.
        let ads = listeners_with(&ctx(), Source::Ads, Route::Base, Some(&set));
        assert_eq!(ads, listeners(&ctx(), Source::Ads, Route::Base));
    }
}
