//! Body size limits: the check of a declared `Content-Length` before anything is forwarded,
//! and a response body that ends with an error (cutting the stream) once it passes the limit.
//! The request side's streaming count lives in the client body itself (`proxy::body`).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderMap};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;

use crate::proxy::body::{BoxError, ProxyBody, TooLarge};

/// The message's declared `Content-Length`, if readable.
pub(crate) fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A body that fails with [`TooLarge`] at the first frame that takes it past `max` bytes.
struct Limited {
    inner: ProxyBody,
    max: u64,
    seen: u64,
}

impl Body for Limited {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.seen = this.seen.saturating_add(data.len() as u64);
                    if this.seen > this.max {
                        return Poll::Ready(Some(Err(TooLarge(this.max).into())));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// `body` cut with an error once more than `max` bytes passed.
pub(crate) fn limit_response(body: ProxyBody, max: u64) -> ProxyBody {
    Limited {
        inner: body,
        max,
        seen: 0,
    }
    .boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{Full, StreamBody};

    #[tokio::test]
    async fn bodies_within_the_limit_pass_and_larger_ones_fail() {
        let full = |n: usize| {
            Full::new(Bytes::from(vec![b'x'; n]))
                .map_err(|never| match never {})
                .boxed_unsync()
        };
        let ok = limit_response(full(10), 10).collect().await;
        assert_eq!(ok.map(|c| c.to_bytes().len()).ok(), Some(10));
        assert!(limit_response(full(11), 10).collect().await.is_err());
        let chunks = futures_util::stream::iter(
            (0..3).map(|_| Ok::<_, BoxError>(Frame::data(Bytes::from_static(b"abcd")))),
        );
        let streamed = StreamBody::new(chunks).boxed_unsync();
        assert!(limit_response(streamed, 10).collect().await.is_err());
    }
}
