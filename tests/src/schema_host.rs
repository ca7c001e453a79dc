//! A fetch counter for schema references: a loopback HTTP server that answers every request with one JSON Schema and
//! counts the connections it accepted. A `$ref` pointing at it resolves if anything fetches it (the served schema
//! is valid), and every attempt to fetch it, whether or not it completes, is one connection counted.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The schema every request gets.
pub const SERVED_SCHEMA: &str = r#"{"type": "string"}"#;

/// See the module docs. Stops (and joins its thread) on [`SchemaHost::connections`] or when dropped.
pub struct SchemaHost {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SchemaHost {
    /// Listens on a free port of 127.0.0.1.
    pub fn start() -> SchemaHost {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let addr = listener.local_addr().expect("the listener's address");
        let (connections, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let thread = {
            let (connections, stop) = (connections.clone(), stop.clone());
            std::thread::spawn(move || {
                loop {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            connections.fetch_add(1, Ordering::SeqCst);
                            answer(stream);
                        }
                        // Stop only once nothing is queued: a connection made before the stop counts too.
                        Err(_) if stop.load(Ordering::SeqCst) => return,
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        SchemaHost { addr, connections, stop, thread: Some(thread) }
    }

    /// `http://127.0.0.1:port/{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }

    /// Stops listening and says how many connections were accepted in all.
    pub fn connections(mut self) -> usize {
        self.shut();
        self.connections.load(Ordering::SeqCst)
    }

    fn shut(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the schema host's thread");
        }
    }
}

impl Drop for SchemaHost {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Reads the request head (briefly) and answers `200` with [`SERVED_SCHEMA`].
fn answer(mut stream: std::net::TcpStream) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/schema+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
        SERVED_SCHEMA.len(),
        SERVED_SCHEMA
    );
    let _ = stream.write_all(response.as_bytes());
}
