//! Reading a request's body: within the body limit and the body deadline, into one buffer.

use std::fmt;
use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Request;
use hyper::body::Body as HttpBody;

/// [`read_body`] within `timeout`, if there is one.
pub(super) async fn read_body_within<B>(
    body: B,
    declared: Option<u64>,
    max: usize,
    timeout: Option<Duration>,
) -> Result<Bytes, BodyRefused>
where
    B: HttpBody,
    B::Error: fmt::Display,
{
    let mut read = std::pin::pin!(read_body(body, declared, max));
    // Most bodies are whole by the time their headers have been read: those need no timer.
    let first = std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await;
    if let Poll::Ready(done) = first {
        return done;
    }
    match timeout {
        Some(timeout) => tokio::time::timeout(timeout, read).await.unwrap_or(Err(BodyRefused::TimedOut)),
        None => read.await,
    }
}

/// The body's declared length, when it has one that parses.
pub(super) fn content_length<B>(request: &Request<B>) -> Option<u64> {
    request.headers().get(hyper::header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

/// Why a request body was not read to its end.
#[derive(Debug)]
pub(super) enum BodyRefused {
    /// It came past the limit; reading stopped there.
    TooLarge,
    /// It did not arrive within the body deadline.
    TimedOut,
    /// The transport failed while it was read.
    Broken(String),
}

/// Reads a request body of at most `max` bytes into one buffer, and stops reading as soon as it would pass `max`.
///
/// Each frame is copied out as it comes, so that the transport's read buffers are free again at once: what is held
/// is the body read so far, in a buffer that never grows past `max`, and one read buffer. (Holding the frames, as
/// `http_body_util::Collected` does, keeps alive every read buffer they were cut from, however little of it they
/// use, so the bytes held would depend on how the network split the body.) A declared length reserves the buffer
/// once; a body that comes in one frame is kept as it is, without a copy.
pub(super) async fn read_body<B>(body: B, declared: Option<u64>, max: usize) -> Result<Bytes, BodyRefused>
where
    B: HttpBody,
    B::Error: fmt::Display,
{
    use bytes::{Buf, BufMut};

    let mut body = std::pin::pin!(body);
    // The first frame, kept whole while it is the only one.
    let mut first: Option<Bytes> = None;
    let mut buffer: Vec<u8> = Vec::new();
    let mut len = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyRefused::Broken(e.to_string()))?;
        // Trailers carry nothing a JSON-RPC message needs.
        let Ok(mut data) = frame.into_data() else { continue };
        let n = data.remaining();
        if n == 0 {
            continue;
        }
        len = len.checked_add(n).filter(|&len| len <= max).ok_or(BodyRefused::TooLarge)?;
        if len == n {
            first = Some(data.copy_to_bytes(n));
            continue;
        }
        if buffer.capacity() < len {
            // A declared length (within the limit, checked before reading) is reserved once; a body without one,
            // or one that runs past what it declared, grows the buffer by doubling, up to the limit.
            let wanted = match declared.map(|d| d as usize).filter(|&d| d >= len) {
                Some(declared) => declared,
                None => buffer.capacity().saturating_mul(2).max(len).max(16 * 1024).min(max),
            };
            buffer.reserve_exact(wanted - buffer.len());
        }
        if let Some(first) = first.take() {
            buffer.put(first);
        }
        buffer.put(data);
    }
    Ok(first.unwrap_or_else(|| Bytes::from(buffer)))
}
