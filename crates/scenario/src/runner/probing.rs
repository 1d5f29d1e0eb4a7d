//! A deployed system's behaviour probes (`probes:`): each probe of the corpus sent
//! once, on a connection of its own, through the URL the load uses, before the
//! load; what came back compared with the baseline system's answers.

use super::*;
use crate::probes::{self, Observed};

/// How long one probe may take: its slowest waits 2 s for the backend, and a
/// mebibyte goes up through a proxy on a busy machine.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends `plan`'s probes to the system deployed as `d`; compares each answer with
/// `baseline`'s (when this system is not the baseline itself).
pub(crate) fn run(
    d: &Deployed,
    case: &Case,
    plan: &crate::plan::ProbesPlan,
    baseline: Option<&[Observed]>,
) -> Result<results::probes::ProbeRun, String> {
    let target = d.sys.platform.target();
    let spec = case.load.at(&target.url, target.cacert.clone());
    let to = http1::Target::parse(&spec.url)?;
    // The load's virtual host: its first request's, else the URL's.
    let host_of = match spec.targets.first() {
        Some(t) if case.deploy.routes.is_none() => http1::Target::parse(&t.url)?,
        _ => to.clone(),
    };
    use std::net::ToSocketAddrs;
    let addr = (to.host.as_str(), to.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("{}: no address for {}", spec.url, to.host))?;
    let tls = if to.tls {
        let cfg = engine::tls::client_config(&spec.tls).map_err(|e| e.to_string())?;
        let name = engine::tls::server_name(&host_of.host).map_err(|e| e.to_string())?;
        Some((cfg, name))
    } else {
        None
    };
    let host = host_of.host_header();
    let mut observed = Vec::with_capacity(plan.probes.len());
    for id in &plan.probes {
        let Some(p) = probes::find(id) else { continue };
        let t = Instant::now();
        let got = served::fetch(addr, &p.bytes(&host), tls.as_ref(), PROBE_TIMEOUT);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        observed.push(match got {
            Ok(raw) => probes::observe(id, &raw, ms),
            Err(why) => Observed {
                probe: id.to_string(),
                error: Some(why),
                ms,
                ..Observed::default()
            },
        });
    }
    let differences = match baseline {
        Some(base) if case.system != plan.baseline => {
            let pairs: Vec<_> = observed
                .iter()
                .filter_map(|o| base.iter().find(|b| b.probe == o.probe).map(|b| (b, o)))
                .collect();
            let both = pairs
                .iter()
                .filter(|(b, o)| b.received.is_some() && o.received.is_some())
                .count();
            probes::collapse(
                pairs
                    .iter()
                    .flat_map(|(b, o)| probes::compare(b, o))
                    .collect(),
                both,
            )
        }
        _ => Vec::new(),
    };
    Ok(results::probes::ProbeRun {
        baseline: plan.baseline.clone(),
        observed,
        differences,
    })
}
