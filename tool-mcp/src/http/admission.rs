//! Admission: the caps that decide whether a connection or a request is taken at all, and the guards that hold a
//! slot for as long as what was admitted runs.
//!
//! Every cap is checked once, when something arrives, and never again: a connection, session or call already
//! admitted keeps its slot until it ends, whatever arrives after it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper::{Response, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ResponseBody;

/// The client a connection or request from `ip` counts for: an IPv4 address as it is (an IPv4 client seen through
/// an IPv6 socket as its IPv4 address), an IPv6 address by its /64 network, which is what one site is given and may
/// draw ever new addresses from.
pub(super) fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !((1u128 << 64) - 1))),
        v4 => v4,
    }
}

/// The connection caps of [`McpHttpService::serve`](super::McpHttpService::serve): a total, and one per client
/// address.
pub(super) struct Connections {
    total: Arc<Semaphore>,
    per_client: Mutex<HashMap<IpAddr, usize>>,
    max_per_client: usize,
}

/// Why a connection was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The server holds its most connections: `503`.
    Full,
    /// This client address holds its most connections: `429`.
    ClientFull,
}

impl Refusal {
    pub(super) fn status(self) -> StatusCode {
        match self {
            Refusal::Full => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::ClientFull => StatusCode::TOO_MANY_REQUESTS,
        }
    }
}

/// One admitted connection's slots, given back when it is dropped.
pub(super) struct ConnectionSlot {
    connections: Arc<Connections>,
    client: IpAddr,
    _total: OwnedSemaphorePermit,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut per_client = self.connections.per_client();
        if let Some(n) = per_client.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                per_client.remove(&self.client);
            }
        }
    }
}

impl Connections {
    pub(super) fn new(max_total: usize, max_per_client: usize) -> Arc<Connections> {
        Arc::new(Connections {
            total: Arc::new(Semaphore::new(max_total.min(Semaphore::MAX_PERMITS))),
            per_client: Mutex::new(HashMap::new()),
            max_per_client,
        })
    }

    fn per_client(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.per_client.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Connections open now.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.per_client().values().sum()
    }

    /// Takes a slot for a connection from `client` (counted as [`client_key`] says: an IPv4 client seen through
    /// an IPv6 socket as its IPv4 address, an IPv6 one by its /64), or says which cap refuses it.
    pub(super) fn admit(self: &Arc<Self>, client: IpAddr) -> Result<ConnectionSlot, Refusal> {
        let client = client_key(client);
        let mut per_client = self.per_client();
        let held = per_client.entry(client).or_insert(0);
        if *held >= self.max_per_client {
            if *held == 0 {
                per_client.remove(&client);
            }
            return Err(Refusal::ClientFull);
        }
        let Ok(total) = self.total.clone().try_acquire_owned() else {
            if *held == 0 {
                per_client.remove(&client);
            }
            return Err(Refusal::Full);
        };
        *held += 1;
        Ok(ConnectionSlot { connections: self.clone(), client, _total: total })
    }
}

/// How long a refused connection is given to take its answer before it is closed.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// The most refused connections given [`REFUSAL_LINGER`] at once; past it, one is answered with what its socket
/// takes at once and closed.
pub(super) const MAX_LINGERING: usize = 256;

/// The refused connections lingering over their answer, at most [`MAX_LINGERING`].
pub(super) struct Lingering(Arc<Semaphore>);

impl Lingering {
    pub(super) fn new() -> Lingering {
        Lingering(Arc::new(Semaphore::new(MAX_LINGERING)))
    }

    /// Answers a connection that no cap admits ([`refuse_connection`]) on a task of its own while fewer than
    /// [`MAX_LINGERING`] do; else at once, without lingering: the answer is written as far as the socket takes it
    /// without waiting (all of it, on a fresh connection) and the connection is closed.
    pub(super) fn refuse(&self, stream: TcpStream, refusal: Refusal, retry_after_s: u64) {
        match self.0.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(async move {
                    refuse_connection(stream, refusal, retry_after_s).await;
                    drop(permit);
                });
            }
            Err(_) => {
                let _ = stream.try_write(refusal_answer(refusal, retry_after_s).as_bytes());
            }
        }
    }

    #[cfg(test)]
    fn lingering(&self) -> usize {
        MAX_LINGERING - self.0.available_permits()
    }
}

/// The whole answer to a refused connection.
fn refusal_answer(refusal: Refusal, retry_after_s: u64) -> String {
    let status = refusal.status();
    let text = match refusal {
        Refusal::Full => "the server has reached its limit of open connections; retry later\n",
        Refusal::ClientFull => "this client has reached its limit of open connections; retry later\n",
    };
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: text/plain; charset=utf-8\r\nretry-after: {retry_after_s}\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{text}",
        status.as_str(),
        status.canonical_reason().unwrap_or(""),
        text.len(),
    )
}

/// Answers a connection that no cap admits, without reading its request: the status, `Retry-After` and
/// `Connection: close`, then the connection closes. What the client already sent is read and dropped for a moment
/// first, so that closing does not reset the connection before the client has read the answer.
async fn refuse_connection(mut stream: TcpStream, refusal: Refusal, retry_after_s: u64) {
    let head = refusal_answer(refusal, retry_after_s);
    let answer = async {
        stream.write_all(head.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut drained = 0usize;
        // At most 64 KiB, until the client closes its side.
        while drained < 64 * 1024 {
            match stream.read(&mut sink).await? {
                0 => break,
                n => drained += n,
            }
        }
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, answer).await;
}

/// The calls in flight on one session, counted from the request's arrival until its answer's last byte is written
/// or the answer is dropped.
#[derive(Default)]
pub(super) struct InFlight(AtomicUsize);

impl InFlight {
    /// Takes a slot, or `None` when `max` are in flight.
    pub(super) fn enter(self: &Arc<Self>, max: usize) -> Option<InFlightSlot> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
            .ok()
            .map(|_| InFlightSlot(self.clone()))
    }

    #[cfg(test)]
    fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// A slot of [`InFlight`], given back when dropped.
pub(super) struct InFlightSlot(Arc<InFlight>);

impl Drop for InFlightSlot {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A slot that a request holds until its answer is done: a session's in-flight slot or a stateless permit.
pub(super) enum RequestSlot {
    Session(#[allow(dead_code)] InFlightSlot),
    Stateless(#[allow(dead_code)] OwnedSemaphorePermit),
}

/// An answer whose body holds the request's slot until it ends: the slot of a call answered on an SSE stream is
/// held until the result has been written, not only until the stream's headers.
struct Holding {
    body: ResponseBody,
    slot: Option<RequestSlot>,
}

impl HttpBody for Holding {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.slot = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// `response`, holding `slot` until its body ends or is dropped.
pub(super) fn holding(response: Response<ResponseBody>, slot: RequestSlot) -> Response<ResponseBody> {
    response.map(|body| Holding { body, slot: Some(slot) }.boxed())
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn connections_are_capped_in_total_and_per_client() {
        let connections = Connections::new(3, 2);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let a1 = connections.admit(a).unwrap();
        let a2 = connections.admit(a).unwrap();
        assert_eq!(connections.admit(a).err(), Some(Refusal::ClientFull));
        // The same client seen through an IPv6 socket is the same client.
        let mapped = IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped());
        assert_eq!(connections.admit(mapped).err(), Some(Refusal::ClientFull));
        let b1 = connections.admit(b).unwrap();
        assert_eq!(connections.admit(b).err(), Some(Refusal::Full));
        assert_eq!(connections.open(), 3);
        drop(a1);
        assert_eq!(connections.open(), 2);
        let _b2 = connections.admit(b).unwrap();
        assert_eq!(connections.admit(a).err(), Some(Refusal::Full), "the total cap holds");
        drop((a2, b1));
        let _a3 = connections.admit(a).unwrap();
        assert!(connections.per_client().values().all(|n| *n > 0), "no empty entries are kept");
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_64() {
        let connections = Connections::new(16, 2);
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let a_other: IpAddr = "2001:db8:1:2:ffff:ffff:ffff:ffff".parse().unwrap();
        let b: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_key(a), client_key(a_other));
        assert_eq!(client_key(a), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
        assert_ne!(client_key(a), client_key(b));
        assert_eq!(client_key("10.1.2.3".parse().unwrap()), "10.1.2.3".parse::<IpAddr>().unwrap());
        let _held = [connections.admit(a).unwrap(), connections.admit(a_other).unwrap()];
        let fresh: IpAddr = "2001:db8:1:2::9999".parse().unwrap();
        assert_eq!(connections.admit(fresh).err(), Some(Refusal::ClientFull), "a new address of the same /64");
        assert!(connections.admit(b).is_ok(), "another /64 is another client");
    }

    #[tokio::test]
    async fn refused_connections_linger_at_most_max_lingering_at_once() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let lingering = Lingering::new();
        // Clients that neither read nor close: each refusal that lingers waits for them.
        let mut clients = Vec::new();
        for _ in 0..MAX_LINGERING + 20 {
            clients.push(TcpStream::connect(addr).await.unwrap());
            let (stream, _) = listener.accept().await.unwrap();
            lingering.refuse(stream, Refusal::ClientFull, 5);
        }
        assert_eq!(lingering.lingering(), MAX_LINGERING);
        // The ones past the bound were answered and closed at once.
        let mut last = clients.pop().unwrap();
        let mut seen = Vec::new();
        tokio::time::timeout(Duration::from_millis(500), last.read_to_end(&mut seen)).await.unwrap().unwrap();
        assert!(seen.starts_with(b"HTTP/1.1 429 Too Many Requests\r\n"), "{}", String::from_utf8_lossy(&seen));
        drop(clients);
        tokio::time::timeout(Duration::from_secs(5), async {
            while lingering.lingering() > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .unwrap();
    }

    #[test]
    fn in_flight_slots_are_given_back_when_dropped() {
        let in_flight = Arc::new(InFlight::default());
        let one = in_flight.enter(2).unwrap();
        let two = in_flight.enter(2).unwrap();
        assert!(in_flight.enter(2).is_none());
        assert_eq!(in_flight.count(), 2);
        drop(one);
        let _three = in_flight.enter(2).unwrap();
        drop(two);
        assert_eq!(in_flight.count(), 1);
    }

    #[tokio::test]
    async fn a_held_slot_is_given_back_when_the_body_ends() {
        let in_flight = Arc::new(InFlight::default());
        let slot = in_flight.enter(1).unwrap();
        let response = Response::new(http_body_util::Full::new(Bytes::from_static(b"done")).boxed());
        let response = holding(response, RequestSlot::Session(slot));
        assert!(in_flight.enter(1).is_none(), "held while the body is unread");
        let mut body = response.into_body();
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), Bytes::from_static(b"done"));
        assert!(body.frame().await.is_none());
        assert_eq!(in_flight.count(), 0, "given back at the body's end, before the body is dropped");
        drop(body);
    }
}
