//! Watch streams: newline-delimited JSON events over a chunked response, replayed from the
//! store's history after the requested resourceVersion; `410 Expired` as an ERROR event when
//! the history no longer reaches back; periodic BOOKMARKs; closing at `timeoutSeconds`.
//! Objects are converted to the watched version as they are sent (an ERROR event ends the
//! stream when a conversion fails).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::Response;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::conversion::{convert_one, storage_kind};
use super::error::ApiError;
use super::http::Body;
use super::object;
use super::selectors::Selectors;
use super::store::{Event, EventType};
use super::{Kind, Shared, Tick};

/// The query parameters of a watch.
#[derive(Debug, Clone)]
pub struct Params {
    /// `None` ("" or "0"): start with ADDED events for every current object.
    from: Option<u64>,
    send_initial_events: bool,
    bookmarks: bool,
    timeout: Duration,
}

impl Params {
    pub fn from_query<'a>(param: &dyn Fn(&str) -> Option<&'a str>) -> Result<Params, ApiError> {
        let from =
            match param("resourceVersion").unwrap_or("") {
                "" | "0" => None,
                rv => Some(rv.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                })?),
            };
        let flag = |k: &str| matches!(param(k), Some("1" | "true"));
        let timeout = param("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(1800);
        Ok(Params {
            from,
            send_initial_events: flag("sendInitialEvents"),
            bookmarks: flag("allowWatchBookmarks"),
            timeout: Duration::from_secs(timeout),
        })
    }
}

/// One queued event: ready to send, or an object still at its stored version.
enum Pending {
    Chunk(Bytes),
    Object(&'static str, Value),
}

struct WatchState {
    shared: Arc<Shared>,
    kind: Kind,
    namespace: Option<String>,
    selectors: Selectors,
    /// Every event up to this resourceVersion has been considered.
    last: u64,
    /// `true` until the initial ADDED events have been queued.
    initial: bool,
    initial_end_bookmark: bool,
    pending: VecDeque<Pending>,
    deadline: Instant,
    bookmarks: bool,
    next_bookmark: Instant,
    ticks: tokio::sync::watch::Receiver<Tick>,
    epoch: u64,
    done: bool,
    /// Objects as `PartialObjectMetadata` (the client asked for metadata only).
    metadata_only: bool,
}

/// Starts a watch stream.
pub fn serve(
    shared: Arc<Shared>,
    kind: Kind,
    namespace: Option<String>,
    selectors: Selectors,
    params: Params,
    metadata_only: bool,
) -> Response<Body> {
    let ticks = shared.subscribe();
    let epoch = ticks.borrow().epoch;
    let now = Instant::now();
    let interval = shared.bookmark_interval();
    let state = WatchState {
        last: params.from.unwrap_or(0),
        initial: params.from.is_none(),
        initial_end_bookmark: params.send_initial_events && params.bookmarks,
        shared,
        kind,
        namespace,
        selectors,
        pending: VecDeque::new(),
        deadline: now + params.timeout,
        bookmarks: params.bookmarks,
        next_bookmark: now + interval,
        ticks,
        epoch,
        done: false,
        metadata_only,
    };
    let stream = futures_util::stream::unfold(state, |mut st| async move {
        let chunk = st.next_chunk().await?;
        Some((Ok::<_, Infallible>(Frame::data(chunk)), st))
    });
    let mut resp = Response::new(StreamBody::new(stream).boxed_unsync());
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

impl WatchState {
    /// The event line of a stored object, converted to the watched version; an ERROR line
    /// (and the end of the stream) when the conversion fails.
    async fn event(&mut self, ty: &str, object: Value) -> Bytes {
        if self.metadata_only {
            return line(ty, object::metadata_only(&object));
        }
        match convert_one(&self.shared, object, &self.kind).await {
            Ok(o) => line(ty, o),
            Err(e) => {
                self.done = true;
                self.pending.clear();
                line("ERROR", e.to_status())
            }
        }
    }
}

fn line(ty: &str, object: Value) -> Bytes {
    let mut text = json!({"type": ty, "object": object}).to_string();
    text.push('\n');
    Bytes::from(text)
}

impl WatchState {
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            match self.pending.pop_front() {
                Some(Pending::Chunk(chunk)) => return Some(chunk),
                Some(Pending::Object(ty, obj)) => return Some(self.event(ty, obj).await),
                None => {}
            }
            if self.done {
                return None;
            }
            let tick = *self.ticks.borrow_and_update();
            if tick.epoch != self.epoch {
                return None;
            }
            self.collect();
            if !self.pending.is_empty() {
                continue;
            }
            let interval = self.shared.bookmark_interval();
            tokio::select! {
                changed = self.ticks.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                _ = tokio::time::sleep_until(self.deadline) => self.done = true,
                _ = tokio::time::sleep_until(self.next_bookmark), if self.bookmarks => {
                    self.next_bookmark = Instant::now() + interval;
                    let mark = line("BOOKMARK", self.bookmark(false));
                    self.pending.push_back(Pending::Chunk(mark));
                }
            }
        }
    }

    /// Queues the events the client has not seen yet.
    fn collect(&mut self) {
        let store = self.shared.store();
        let current = store.current_rv();
        if self.initial {
            self.initial = false;
            let stored = storage_kind(&store, &self.kind);
            let items = store.list(&stored, self.namespace.as_deref());
            for obj in items.into_iter().filter(|o| self.selectors.matches(o)) {
                self.pending.push_back(Pending::Object("ADDED", obj));
            }
            self.last = current;
            drop(store);
            if self.initial_end_bookmark {
                let mark = line("BOOKMARK", self.bookmark(true));
                self.pending.push_back(Pending::Chunk(mark));
            }
            return;
        }
        match store.events_since(&self.kind.resource(), self.last) {
            Ok(events) => {
                for event in &events {
                    if let Some(pending) = self.render(event) {
                        self.pending.push_back(pending);
                    }
                }
                self.last = current;
            }
            Err(_) => {
                let gone = ApiError::new(
                    410,
                    "Expired",
                    format!("too old resource version: {} ({})", self.last, current),
                );
                self.pending
                    .push_back(Pending::Chunk(line("ERROR", gone.to_status())));
                self.done = true;
            }
        }
    }

    /// The event this watch reports for `event`, given its namespace and selectors: an
    /// object that enters the selection is ADDED, one that leaves it DELETED.
    fn render(&self, event: &Event) -> Option<Pending> {
        if self
            .namespace
            .as_ref()
            .is_some_and(|ns| *ns != event.namespace)
        {
            return None;
        }
        let now = self.selectors.matches(&event.object);
        let before = event.old.as_ref().map(|o| self.selectors.matches(o));
        let ty = match (event.ty, before, now) {
            (EventType::Added, _, true) => EventType::Added,
            (EventType::Deleted, Some(true), _) | (EventType::Deleted, None, true) => {
                EventType::Deleted
            }
            (EventType::Modified, Some(true), true) => EventType::Modified,
            (EventType::Modified, Some(false), true) => EventType::Added,
            (EventType::Modified, Some(true), false) => EventType::Deleted,
            _ => return None,
        };
        Some(Pending::Object(ty.as_str(), event.object.clone()))
    }

    fn bookmark(&self, initial_end: bool) -> Value {
        let mut meta = json!({"resourceVersion": self.last.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        json!({
            "kind": self.kind.kind,
            "apiVersion": self.kind.api_version(),
            "metadata": meta,
        })
    }
}
