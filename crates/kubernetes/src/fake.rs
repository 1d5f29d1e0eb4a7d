//! A fake Kubernetes API for unit tests of our own logic (what a run does when the
//! API refuses): a `kube::Client` over a function from each request to its answer,
//! which also records the requests, in order, as `METHOD /path`.

use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// The requests a fake client received.
pub(crate) type Seen = Arc<Mutex<Vec<String>>>;

/// A client whose every request (method, path) is answered by `answer` with a status
/// and a JSON body.
pub(crate) fn client(
    rt: &tokio::runtime::Runtime,
    answer: impl Fn(&http::Method, &str) -> (u16, Value) + Send + Sync + 'static,
) -> (kube::Client, Seen) {
    let seen = Seen::default();
    let log = seen.clone();
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let (method, path) = (req.method().clone(), req.uri().path().to_string());
        log.lock().unwrap().push(format!("{method} {path}"));
        let (status, body) = answer(&method, &path);
        let res = http::Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(kube::client::Body::from(body.to_string().into_bytes()));
        async move { res }
    });
    // The client's buffer runs on the runtime it is made in.
    let _in = rt.enter();
    (kube::Client::new(svc, "default"), seen)
}

/// The answer of a refused request: a `Status`, as the API server sends it.
pub(crate) fn refused(code: u16, reason: &str, message: &str) -> (u16, Value) {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    (code, status)
}

/// The answer of a delete the API server accepted.
pub(crate) fn deleted() -> (u16, Value) {
    let status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Success", "code": 200,
    });
    (200, status)
}
