//! The platform's two watches (the run's Pods and its backends' EndpointSlices):
//! each event updates the [`Book`], and what it means for the run (a backend ready,
//! stopping, gone) reaches the runner as a [`PlatformEvent`].

use crate::book::{Book, PodSeen, SliceEndpoint, SliceSeen};
use crate::{objects, Kubernetes, BACKEND, RUN_LABEL, SCALE_WAIT};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::watcher;
use std::collections::BTreeSet;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sut::driver::SutError;
use sut::platform::{PlatformEvent, StopMode};

impl Kubernetes {
    /// Starts the two watches; their events reach the book and the channel.
    pub(crate) fn watch(&mut self, ns: &str) -> Result<(), SutError> {
        let client = self.client()?;
        let (tx, rx) = mpsc::channel();
        self.events = Some(rx);
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let slices: Api<EndpointSlice> = Api::namespaced(client, ns);
        let pod_cfg = watcher::Config::default().labels(&format!("{RUN_LABEL}={}", self.spec.run));
        let slice_cfg =
            watcher::Config::default().labels(&format!("kubernetes.io/service-name={BACKEND}"));
        let t1 = self.rt.spawn(feed(
            pods,
            pod_cfg,
            self.book.clone(),
            tx.clone(),
            Kind {
                seen: |b, p| b.pod(pod_seen(p)),
                gone: Book::pod_gone,
                relisted: Book::pods_relisted,
            },
        ));
        let t2 = self.rt.spawn(feed(
            slices,
            slice_cfg,
            self.book.clone(),
            tx,
            Kind {
                seen: |b, es| b.slice(slice_seen(es)),
                gone: Book::slice_gone,
                relisted: Book::slices_relisted,
            },
        ));
        self.watches = vec![t1, t2];
        Ok(())
    }

    /// Waits for events until `done` says the cluster reached the state asked for.
    pub(crate) fn follow(
        &mut self,
        since: Instant,
        stop: StopMode,
        on: &mut dyn FnMut(PlatformEvent),
        done: &dyn Fn(&Book) -> bool,
    ) -> Result<(), SutError> {
        let deadline = since + SCALE_WAIT;
        loop {
            if done(&self.book()) {
                // What led there is in the channel (sent under the book's lock): a
                // pod's stopping must reach `on` even when the EndpointSlice's change
                // was read first.
                while let Some(ev) = self.events.as_ref().and_then(|rx| rx.try_recv().ok()) {
                    self.deliver(ev, since, stop, on);
                }
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(SutError::NotReady(format!(
                    "the backends in namespace {} ({} ready of the pods asked for)",
                    self.namespace.as_deref().unwrap_or("?"),
                    self.book().endpoints().len()
                )));
            }
            let Some(rx) = self.events.as_ref() else {
                return Err(SutError::NotRunning("the Kubernetes watches".into()));
            };
            match rx.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(ev) => self.deliver(ev, since, stop, on),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(SutError::NotRunning("the Kubernetes watches".into()))
                }
            }
        }
    }

    /// Hands one watch event to the runner: readiness timed from `since`, a stopping
    /// pod deleted at once when the stop is abrupt.
    pub(crate) fn deliver(
        &mut self,
        ev: PlatformEvent,
        since: Instant,
        stop: StopMode,
        on: &mut dyn FnMut(PlatformEvent),
    ) {
        match ev {
            PlatformEvent::Ready { endpoint, .. } => on(PlatformEvent::Ready {
                endpoint,
                took: since.elapsed(),
            }),
            PlatformEvent::Stopping { id, .. } => {
                let killed = match stop {
                    StopMode::Abrupt => self.kill_now(&id),
                    StopMode::Graceful => Ok(()),
                };
                on(PlatformEvent::Stopping {
                    id: id.clone(),
                    mode: stop,
                });
                if let Err(e) = killed {
                    // The pod stops, but with its grace period: not the abrupt stop
                    // the step asked for.
                    on(PlatformEvent::Failed {
                        detail: format!("stop {id} abruptly: {}", results::Causes(&e)),
                    });
                }
            }
            other => on(other),
        }
    }
}

/// How one watched kind updates the book.
pub(crate) struct Kind<K> {
    seen: fn(&mut Book, &K) -> Vec<PlatformEvent>,
    gone: fn(&mut Book, &str) -> Vec<PlatformEvent>,
    relisted: fn(&mut Book, &BTreeSet<String>) -> Vec<PlatformEvent>,
}

/// Follows one watch until it ends: each object seen or gone, and after a (re-)list
/// what it no longer shows, into the book; what the book makes of it into `tx`.
pub(crate) async fn feed<K>(
    api: Api<K>,
    cfg: watcher::Config,
    book: Arc<Mutex<Book>>,
    tx: mpsc::Sender<PlatformEvent>,
    kind: Kind<K>,
) where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let mut s = watcher(api, cfg).boxed();
    let mut listed = Relist::default();
    while let Some(ev) = s.next().await {
        // The events go out while the book is still locked: whoever sees the book in
        // a state finds every event that led there already in the channel
        // ([`Kubernetes::follow`] drains it once done).
        let mut b = lock(&book);
        let out = match ev {
            Ok(watcher::Event::Apply(o)) => (kind.seen)(&mut b, &o),
            Ok(watcher::Event::InitApply(o)) => {
                listed.saw(&o.meta().name);
                (kind.seen)(&mut b, &o)
            }
            Ok(watcher::Event::Delete(o)) => {
                (kind.gone)(&mut b, o.meta().name.as_deref().unwrap_or(""))
            }
            Ok(watcher::Event::Init) => listed.start(),
            Ok(watcher::Event::InitDone) => (kind.relisted)(&mut b, &listed.done()),
            Err(_) => Vec::new(),
        };
        for e in out {
            let _ = tx.send(e);
        }
        drop(b);
    }
}

/// The names a watcher's (re-)list shows between its `Init` and `InitDone`: a watch
/// that reconnects lists everything again instead of replaying the deletions it
/// missed, so what the list lacks is gone ([`Book::pods_relisted`]).
#[derive(Default)]
pub(crate) struct Relist(BTreeSet<String>);

impl Relist {
    pub(crate) fn start(&mut self) -> Vec<PlatformEvent> {
        self.0.clear();
        Vec::new()
    }

    pub(crate) fn saw(&mut self, name: &Option<String>) {
        if let Some(n) = name {
            self.0.insert(n.clone());
        }
    }

    pub(crate) fn done(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.0)
    }
}

pub(crate) fn lock(b: &Arc<Mutex<Book>>) -> std::sync::MutexGuard<'_, Book> {
    b.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn pod_seen(p: &Pod) -> PodSeen {
    let status = p.status.as_ref();
    PodSeen {
        name: p.metadata.name.clone().unwrap_or_default(),
        created: p
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        ip: status
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse().ok()),
        node: p.spec.as_ref().and_then(|s| s.node_name.clone()),
        terminating: p.metadata.deletion_timestamp.is_some(),
    }
}

pub(crate) fn slice_seen(es: &EndpointSlice) -> SliceSeen {
    let port = es
        .ports
        .as_ref()
        .and_then(|ps| ps.first())
        .and_then(|p| p.port)
        .unwrap_or(objects::BACKEND_PORT);
    let endpoints = es
        .endpoints
        .iter()
        .filter_map(|e| {
            let pod = e.target_ref.as_ref()?.name.clone()?;
            let ip: std::net::IpAddr = e.addresses.first()?.parse().ok()?;
            let port = u16::try_from(port).ok()?;
            Some(SliceEndpoint {
                pod,
                addr: std::net::SocketAddr::new(ip, port),
                ready: e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true),
            })
        })
        .collect();
    SliceSeen {
        name: es.metadata.name.clone().unwrap_or_default(),
        endpoints,
    }
}
