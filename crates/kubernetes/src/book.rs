//! What the cluster says of the run's backend pods, kept from two watches (Pods and
//! EndpointSlices) and turned into the lab's [`PlatformEvent`]s. Pure: the watches
//! feed it [`PodSeen`] and [`SliceSeen`] values, so every rule is unit-tested without
//! an API server.
//!
//! A backend is *ready* when an EndpointSlice of the Service lists it as ready — not
//! when its pod's Ready condition turns true: the EndpointSlice is what every ingress
//! controller watches, so endpoint propagation is timed from there, as S1 and S5 did.
//! A backend is *stopping* from the moment its pod has a deletion timestamp (the
//! kubelet sends SIGTERM then, and the endpoint turns not-ready), and *gone* when the
//! pod object is deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use sut::platform::StopMode;
use sut::{Endpoint, PlatformEvent};

/// A pod as one watch event shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSeen {
    pub name: String,
    /// `metadata.creationTimestamp` in RFC 3339, which orders pods oldest first.
    pub created: String,
    pub ip: Option<IpAddr>,
    pub node: Option<String>,
    /// `metadata.deletionTimestamp` is set: the pod is terminating.
    pub terminating: bool,
}

/// One endpoint of an EndpointSlice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceEndpoint {
    /// `targetRef.name`: the pod.
    pub pod: String,
    pub addr: SocketAddr,
    /// `conditions.ready` (absent means ready, as the API defines it).
    pub ready: bool,
}

/// An EndpointSlice as one watch event shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceSeen {
    pub name: String,
    pub endpoints: Vec<SliceEndpoint>,
}

/// The run's pods and endpoint slices.
#[derive(Debug, Default)]
pub struct Book {
    pods: BTreeMap<String, PodSeen>,
    slices: BTreeMap<String, Vec<SliceEndpoint>>,
    /// Pods already reported ready, and stopping.
    reported_ready: BTreeSet<String>,
    reported_stopping: BTreeSet<String>,
    /// Every pod ever seen, as last seen (kept after it is gone), for the result.
    history: BTreeMap<String, PodSeen>,
}

impl Book {
    /// A pod was added or changed.
    pub fn pod(&mut self, pod: PodSeen) -> Vec<PlatformEvent> {
        // A pod's last event may lack what an earlier one had (none does today, but
        // a deleted pod's IP must not be lost to a partial update).
        let mut kept = pod.clone();
        if let Some(old) = self.history.get(&pod.name) {
            kept.ip = kept.ip.or(old.ip);
            kept.node = kept.node.or_else(|| old.node.clone());
        }
        self.history.insert(pod.name.clone(), kept);
        self.pods.insert(pod.name.clone(), pod);
        self.events()
    }

    /// A pod object was deleted.
    pub fn pod_gone(&mut self, name: &str) -> Vec<PlatformEvent> {
        self.pods.remove(name);
        self.events()
    }

    /// An EndpointSlice was added or changed.
    pub fn slice(&mut self, slice: SliceSeen) -> Vec<PlatformEvent> {
        self.slices.insert(slice.name, slice.endpoints);
        self.events()
    }

    /// An EndpointSlice was deleted.
    pub fn slice_gone(&mut self, name: &str) -> Vec<PlatformEvent> {
        self.slices.remove(name);
        self.events()
    }

    /// A re-list of the pods ended (the watcher's `InitDone`): `present` are the pods
    /// it listed. A pod deleted while the watch was down gets no `Delete` event, so
    /// every pod the book holds and the list lacks is gone now.
    pub fn pods_relisted(&mut self, present: &BTreeSet<String>) -> Vec<PlatformEvent> {
        self.pods.retain(|name, _| present.contains(name));
        self.events()
    }

    /// A re-list of the EndpointSlices ended: as [`Book::pods_relisted`], for slices
    /// (a slice deleted meanwhile would otherwise keep its endpoints ready forever).
    pub fn slices_relisted(&mut self, present: &BTreeSet<String>) -> Vec<PlatformEvent> {
        self.slices.retain(|name, _| present.contains(name));
        self.events()
    }

    /// Ready endpoints by pod name (a pod listed in two slices counts once).
    fn ready(&self) -> BTreeMap<&str, SocketAddr> {
        self.slices
            .values()
            .flatten()
            .filter(|e| e.ready)
            .map(|e| (e.pod.as_str(), e.addr))
            .collect()
    }

    /// What changed since the last call, as the lab's events: each pod ready once,
    /// stopping once. A pod that turns not-ready without terminating (a failed
    /// readiness probe) is not stopping; it only leaves [`Book::endpoints`].
    fn events(&mut self) -> Vec<PlatformEvent> {
        let mut out = Vec::new();
        let ready: Vec<(String, SocketAddr)> = self
            .ready()
            .into_iter()
            .map(|(p, a)| (p.to_string(), a))
            .collect();
        for (pod, addr) in ready {
            if self.reported_ready.insert(pod.clone()) {
                out.push(PlatformEvent::Ready {
                    endpoint: Endpoint { id: pod, addr },
                    took: std::time::Duration::ZERO,
                });
            }
        }
        let stopping: Vec<String> = self
            .pods
            .values()
            .filter(|p| p.terminating)
            .map(|p| p.name.clone())
            .collect();
        for pod in stopping {
            if self.reported_stopping.insert(pod.clone()) {
                out.push(PlatformEvent::Stopping {
                    id: pod,
                    mode: StopMode::Graceful,
                });
            }
        }
        out
    }

    /// Every pod the book has seen, gone ones included, oldest first.
    pub fn history(&self) -> Vec<PodSeen> {
        let mut v: Vec<PodSeen> = self.history.values().cloned().collect();
        v.sort_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
        v
    }

    /// Ready endpoints, oldest pod first (pods the book has not seen yet last).
    pub fn endpoints(&self) -> Vec<Endpoint> {
        let mut eps: Vec<(String, Endpoint)> = self
            .ready()
            .into_iter()
            .filter(|(pod, _)| !self.pods.get(*pod).is_some_and(|p| p.terminating))
            .map(|(pod, addr)| {
                let created = self
                    .pods
                    .get(pod)
                    .map_or_else(|| "~".to_string(), |p| p.created.clone());
                (
                    created,
                    Endpoint {
                        id: pod.to_string(),
                        addr,
                    },
                )
            })
            .collect();
        eps.sort_by(|a, b| (&a.0, &a.1.id).cmp(&(&b.0, &b.1.id)));
        eps.into_iter().map(|(_, e)| e).collect()
    }

    /// Pods that exist and are not terminating.
    pub fn running(&self) -> u32 {
        self.pods.values().filter(|p| !p.terminating).count() as u32
    }

    /// Every pod seen and not yet deleted, for the result's cluster view.
    pub fn pods(&self) -> impl Iterator<Item = &PodSeen> {
        self.pods.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, created: &str, terminating: bool) -> PodSeen {
        PodSeen {
            name: name.into(),
            created: created.into(),
            ip: None,
            node: Some("kwok-node-0".into()),
            terminating,
        }
    }

    fn ep(pod: &str, last: u8, ready: bool) -> SliceEndpoint {
        SliceEndpoint {
            pod: pod.into(),
            addr: SocketAddr::from(([198, 18, 64, last], 8080)),
            ready,
        }
    }

    fn slice(name: &str, eps: Vec<SliceEndpoint>) -> SliceSeen {
        SliceSeen {
            name: name.into(),
            endpoints: eps,
        }
    }

    fn ids(ev: &[PlatformEvent]) -> Vec<String> {
        ev.iter()
            .map(|e| match e {
                PlatformEvent::Ready { endpoint, .. } => format!("ready {}", endpoint.id),
                PlatformEvent::Stopping { id, .. } => format!("stopping {id}"),
                PlatformEvent::Failed { detail } => format!("failed {detail}"),
            })
            .collect()
    }

    #[test]
    fn a_pod_is_ready_when_its_endpoint_slice_says_so_once() {
        let mut b = Book::default();
        assert!(b.pod(pod("a", "2026-01-01T00:00:01Z", false)).is_empty());
        // Listed but not ready yet: nothing.
        assert!(b.slice(slice("s1", vec![ep("a", 1, false)])).is_empty());
        assert_eq!(
            ids(&b.slice(slice("s1", vec![ep("a", 1, true)]))),
            ["ready a"]
        );
        // The same state again, or the pod changing, reports nothing new.
        assert!(b.slice(slice("s1", vec![ep("a", 1, true)])).is_empty());
        assert!(b.pod(pod("a", "2026-01-01T00:00:01Z", false)).is_empty());
        assert_eq!(
            b.endpoints()[0].addr,
            SocketAddr::from(([198, 18, 64, 1], 8080))
        );
    }

    #[test]
    fn terminating_is_stopping_at_once_and_leaves_the_endpoints() {
        let mut b = Book::default();
        b.pod(pod("a", "2026-01-01T00:00:01Z", false));
        b.pod(pod("b", "2026-01-01T00:00:02Z", false));
        b.slice(slice("s1", vec![ep("a", 1, true), ep("b", 2, true)]));
        assert_eq!(b.running(), 2);
        // The deletion timestamp arrives before the slice update: stopping now, and
        // no longer an endpoint to push even though the slice still says ready.
        assert_eq!(
            ids(&b.pod(pod("b", "2026-01-01T00:00:02Z", true))),
            ["stopping b"]
        );
        assert_eq!(b.endpoints().len(), 1);
        assert_eq!(b.running(), 1);
        assert!(b
            .slice(slice("s1", vec![ep("a", 1, true), ep("b", 2, false)]))
            .is_empty());
        assert!(b.pod_gone("b").is_empty());
        assert_eq!(b.pods().count(), 1);
    }

    #[test]
    fn endpoints_are_oldest_first_across_slices_and_counted_once() {
        let mut b = Book::default();
        b.pod(pod("new", "2026-01-01T00:00:09Z", false));
        b.pod(pod("old", "2026-01-01T00:00:01Z", false));
        let ev = b.slice(slice("s1", vec![ep("new", 9, true)]));
        assert_eq!(ids(&ev), ["ready new"]);
        let ev = b.slice(slice("s2", vec![ep("old", 1, true), ep("new", 9, true)]));
        assert_eq!(ids(&ev), ["ready old"]);
        let order: Vec<String> = b.endpoints().into_iter().map(|e| e.id).collect();
        assert_eq!(order, ["old", "new"]);
        b.slice_gone("s2");
        assert_eq!(b.endpoints().len(), 1);
    }

    #[test]
    fn a_failed_readiness_probe_is_not_a_stop() {
        let mut b = Book::default();
        b.pod(pod("a", "2026-01-01T00:00:01Z", false));
        b.slice(slice("s1", vec![ep("a", 1, true)]));
        assert!(b.slice(slice("s1", vec![ep("a", 1, false)])).is_empty());
        assert!(b.endpoints().is_empty());
        assert_eq!(b.running(), 1);
    }

    #[test]
    fn a_relist_drops_what_was_deleted_while_the_watch_was_down() {
        let mut b = Book::default();
        b.pod(pod("a", "2026-01-01T00:00:01Z", false));
        b.pod(pod("b", "2026-01-01T00:00:02Z", false));
        b.slice(slice("s1", vec![ep("a", 1, true)]));
        b.slice(slice("s2", vec![ep("b", 2, true)]));
        assert_eq!((b.running(), b.endpoints().len()), (2, 2));
        // The watch reconnects; b and its slice were deleted meanwhile, a new pod c
        // appeared. The re-list shows a and c only, and never deletes b by event.
        b.pod(pod("a", "2026-01-01T00:00:01Z", false));
        let ev = b.pod(pod("c", "2026-01-01T00:00:03Z", false));
        assert!(ev.is_empty());
        let present: BTreeSet<String> = ["a", "c"].map(String::from).into();
        assert!(b.pods_relisted(&present).is_empty());
        assert_eq!(b.running(), 2, "b is gone, c counts");
        // b's slice is still in the book until the slices' re-list ends.
        assert_eq!(b.endpoints().len(), 2);
        b.slice(slice("s1", vec![ep("a", 1, true)]));
        let ev = b.slice(slice("s3", vec![ep("c", 3, true)]));
        assert_eq!(ids(&ev), ["ready c"]);
        let present: BTreeSet<String> = ["s1", "s3"].map(String::from).into();
        assert!(b.slices_relisted(&present).is_empty());
        let eps: Vec<String> = b.endpoints().into_iter().map(|e| e.id).collect();
        assert_eq!(eps, ["a", "c"]);
        // The history still knows b.
        assert!(b.history().iter().any(|p| p.name == "b"));
    }

    #[test]
    fn the_history_keeps_gone_pods_with_their_ip_and_node() {
        let mut b = Book::default();
        let mut a = pod("a", "2026-01-01T00:00:02Z", false);
        a.ip = Some(IpAddr::from([198, 18, 64, 1]));
        b.pod(a);
        b.pod(pod("z", "2026-01-01T00:00:01Z", false));
        // The last update before deletion lacks the IP; the history keeps it.
        b.pod(pod("a", "2026-01-01T00:00:02Z", true));
        b.pod_gone("a");
        let h = b.history();
        let names: Vec<&str> = h.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["z", "a"], "oldest first, gone ones kept");
        assert_eq!(h[1].ip, Some(IpAddr::from([198, 18, 64, 1])));
        assert_eq!(h[1].node.as_deref(), Some("kwok-node-0"));
        assert!(h[1].terminating);
    }
}
