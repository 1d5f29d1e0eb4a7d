//! The state-of-the-world ADS protocol of one stream, with no I/O: what to answer a
//! request with, what to push when the configuration changes, and what Envoy's
//! replies mean (an ACK or a NACK of a version we sent).
//!
//! Envoy opens one stream and sends a `DiscoveryRequest` per resource type it wants
//! (clusters first, then their endpoints, then listeners and their routes). Every
//! response we send carries a version and a nonce; Envoy answers each with a request
//! naming that nonce: with the version it now runs (an ACK), or with the version it
//! kept and an `error_detail` (a NACK). A request with an unknown or old nonce is
//! stale and is ignored, as the xDS protocol says.

use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::Any;
use std::collections::BTreeMap;

/// The current resources of one type, as the controller last set them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// 0 until the type is first set; then 1, 2, ... one per change.
    pub version: u64,
    pub resources: Vec<Any>,
}

/// What Envoy said of a version it was sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It runs this version.
    Acked { type_url: String, version: u64 },
    /// It refused this version and keeps the previous one.
    Nacked {
        type_url: String,
        version: u64,
        detail: String,
    },
}

/// What was last sent on this stream for one type.
#[derive(Clone, Debug, Default)]
struct Sent {
    version: u64,
    nonce: String,
}

/// One ADS stream's bookkeeping.
#[derive(Debug, Default)]
pub struct Stream {
    /// Types Envoy asked for on this stream, and what it was last sent of each.
    subscribed: BTreeMap<String, Sent>,
    nonces: u64,
}

impl Stream {
    /// A request from Envoy: the responses to send, and the verdict it carries.
    pub fn on_request(
        &mut self,
        req: &DiscoveryRequest,
        current: &BTreeMap<String, Snapshot>,
    ) -> (Vec<DiscoveryResponse>, Option<Verdict>) {
        let type_url = req.type_url.clone();
        let mut verdict = None;
        match self.subscribed.get(&type_url) {
            // A first request for the type (or one after Envoy reconnected).
            None => {
                self.subscribed.insert(type_url.clone(), Sent::default());
            }
            Some(sent) if req.response_nonce.is_empty() => {
                // A repeated first request: answer it again below.
                let _ = sent;
                self.subscribed.insert(type_url.clone(), Sent::default());
            }
            Some(sent) if req.response_nonce == sent.nonce => {
                verdict = Some(match &req.error_detail {
                    Some(status) => Verdict::Nacked {
                        type_url: type_url.clone(),
                        version: sent.version,
                        detail: status.message.clone(),
                    },
                    None => Verdict::Acked {
                        type_url: type_url.clone(),
                        version: sent.version,
                    },
                });
            }
            // A reply to a response that a newer one has replaced: stale.
            Some(_) => return (Vec::new(), None),
        }
        // After an ACK or a NACK, a version set meanwhile goes out now; after a NACK
        // of the current version, nothing is sent again until it changes.
        let out = self.pending(&type_url, current).into_iter().collect();
        (out, verdict)
    }

    /// The configuration changed: the responses that bring this stream up to date.
    pub fn on_change(&mut self, current: &BTreeMap<String, Snapshot>) -> Vec<DiscoveryResponse> {
        let types: Vec<String> = self.subscribed.keys().cloned().collect();
        types
            .iter()
            .filter_map(|t| self.pending(t, current))
            .collect()
    }

    /// The response for `type_url` if it was asked for and a newer version than the
    /// one sent exists.
    fn pending(
        &mut self,
        type_url: &str,
        current: &BTreeMap<String, Snapshot>,
    ) -> Option<DiscoveryResponse> {
        let snap = current.get(type_url).filter(|s| s.version > 0)?;
        let sent = self.subscribed.get_mut(type_url)?;
        if sent.version == snap.version {
            return None;
        }
        self.nonces += 1;
        let nonce = self.nonces.to_string();
        *sent = Sent {
            version: snap.version,
            nonce: nonce.clone(),
        };
        Some(DiscoveryResponse {
            version_info: snap.version.to_string(),
            resources: snap.resources.clone(),
            type_url: type_url.to_string(),
            nonce,
            ..DiscoveryResponse::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::rpc::Status;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

    fn snap(version: u64, n: usize) -> Snapshot {
        Snapshot {
            version,
            resources: (0..n)
                .map(|i| Any {
                    type_url: EDS.into(),
                    value: vec![i as u8],
                })
                .collect(),
        }
    }

    fn req(type_url: &str, version: &str, nonce: &str) -> DiscoveryRequest {
        DiscoveryRequest {
            type_url: type_url.into(),
            version_info: version.into(),
            response_nonce: nonce.into(),
            ..DiscoveryRequest::default()
        }
    }

    fn current(pairs: &[(&str, Snapshot)]) -> BTreeMap<String, Snapshot> {
        pairs
            .iter()
            .map(|(t, s)| (t.to_string(), s.clone()))
            .collect()
    }

    #[test]
    fn a_first_request_gets_the_current_version_and_an_ack_is_recognised() {
        let mut s = Stream::default();
        let cur = current(&[(EDS, snap(3, 2))]);
        let (out, v) = s.on_request(&req(EDS, "", ""), &cur);
        assert_eq!(v, None);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].version_info, "3");
        assert_eq!(out[0].resources.len(), 2);
        let nonce = out[0].nonce.clone();
        let (out, v) = s.on_request(&req(EDS, "3", &nonce), &cur);
        assert!(out.is_empty(), "nothing new to send after an ACK");
        assert_eq!(
            v,
            Some(Verdict::Acked {
                type_url: EDS.into(),
                version: 3
            })
        );
    }

    #[test]
    fn nothing_is_sent_for_a_type_never_set_or_never_asked_for() {
        let mut s = Stream::default();
        let (out, _) = s.on_request(&req(CDS, "", ""), &current(&[]));
        assert!(out.is_empty());
        // EDS is set but Envoy has not asked for it on this stream.
        let out = s.on_change(&current(&[(EDS, snap(1, 1))]));
        assert!(out.is_empty());
        // Once CDS is set, the change goes out.
        let out = s.on_change(&current(&[(CDS, snap(1, 1)), (EDS, snap(1, 1))]));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].type_url, CDS);
    }

    #[test]
    fn a_nack_names_the_refused_version_and_its_reason_and_is_not_resent() {
        let mut s = Stream::default();
        let cur = current(&[(EDS, snap(1, 1))]);
        let (out, _) = s.on_request(&req(EDS, "", ""), &cur);
        let n1 = out[0].nonce.clone();
        s.on_request(&req(EDS, "1", &n1), &cur);
        let cur = current(&[(EDS, snap(2, 1))]);
        let out = s.on_change(&cur);
        assert_eq!(out[0].version_info, "2");
        let mut nack = req(EDS, "1", &out[0].nonce);
        nack.error_detail = Some(Status {
            code: 3,
            message: "bad endpoint".into(),
            details: vec![],
        });
        let (out, v) = s.on_request(&nack, &cur);
        assert!(out.is_empty(), "a refused version is not pushed again");
        assert_eq!(
            v,
            Some(Verdict::Nacked {
                type_url: EDS.into(),
                version: 2,
                detail: "bad endpoint".into()
            })
        );
        // A later change goes out.
        let out = s.on_change(&current(&[(EDS, snap(3, 1))]));
        assert_eq!(out[0].version_info, "3");
    }

    #[test]
    fn a_reply_to_a_replaced_response_is_stale_and_ignored() {
        let mut s = Stream::default();
        let (out, _) = s.on_request(&req(EDS, "", ""), &current(&[(EDS, snap(1, 1))]));
        let old = out[0].nonce.clone();
        let cur = current(&[(EDS, snap(2, 1))]);
        let out = s.on_change(&cur);
        assert_ne!(out[0].nonce, old, "every response has its own nonce");
        let (out, v) = s.on_request(&req(EDS, "1", &old), &cur);
        assert!(out.is_empty());
        assert_eq!(v, None, "an ACK of version 1 must not count for version 2");
    }

    #[test]
    fn a_change_made_while_envoy_was_busy_goes_out_with_the_ack() {
        let mut s = Stream::default();
        let (out, _) = s.on_request(&req(EDS, "", ""), &current(&[(EDS, snap(1, 1))]));
        // Version 2 is set; this stream is only told later (on_change not called yet),
        // and Envoy's ACK of 1 arrives first: 2 goes out in answer to it.
        let cur = current(&[(EDS, snap(2, 3))]);
        let (out2, v) = s.on_request(&req(EDS, "1", &out[0].nonce), &cur);
        assert!(matches!(v, Some(Verdict::Acked { version: 1, .. })));
        assert_eq!(out2.len(), 1);
        assert_eq!(out2[0].version_info, "2");
        // And the late notification sends nothing twice.
        assert!(s.on_change(&cur).is_empty());
    }

    #[test]
    fn a_reconnected_envoy_gets_the_current_version_again() {
        let mut s = Stream::default();
        let cur = current(&[(EDS, snap(4, 1))]);
        let (out, _) = s.on_request(&req(EDS, "", ""), &cur);
        s.on_request(&req(EDS, "4", &out[0].nonce), &cur);
        // Same stream object, a fresh first request (empty nonce): answer again.
        let (out, v) = s.on_request(&req(EDS, "4", ""), &cur);
        assert_eq!(v, None);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].version_info, "4");
    }
}
