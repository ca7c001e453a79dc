use std::collections::VecDeque;

use super::body::read_body;
use super::config::with_default_port;
use super::*;

/// A body that hands out the given pieces one frame each, then `error` if there is one.
struct Pieces {
    pieces: VecDeque<Bytes>,
    error: Option<&'static str>,
}

impl HttpBody for Pieces {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(match self.pieces.pop_front() {
            Some(piece) => Some(Ok(hyper::body::Frame::data(piece))),
            None => self.error.take().map(|e| Err(std::io::Error::other(e))),
        })
    }
}

fn pieces(sizes: &[usize]) -> (Pieces, Vec<u8>) {
    let mut all = Vec::new();
    let pieces = sizes
        .iter()
        .map(|&n| {
            let piece: Vec<u8> = (0..n).map(|i| (all.len() + i) as u8).collect();
            all.extend_from_slice(&piece);
            Bytes::from(piece)
        })
        .collect();
    (Pieces { pieces, error: None }, all)
}

fn read(body: Pieces, declared: Option<u64>, max: usize) -> Result<Bytes, BodyRefused> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    runtime.block_on(read_body(body, declared, max))
}

#[test]
fn a_body_is_read_whole_in_order_however_it_is_split() {
    for sizes in [&[][..], &[0], &[10], &[0, 10, 0], &[1, 1, 1], &[3, 40_000, 5, 70_000], &[16 * 1024, 16 * 1024, 1]] {
        let total: usize = sizes.iter().sum();
        for declared in [None, Some(total as u64)] {
            let (body, all) = pieces(sizes);
            let read = read(body, declared, 1 << 20).unwrap();
            assert_eq!(&read[..], &all[..], "{sizes:?}, declared {declared:?}");
        }
    }
}

#[test]
fn a_body_longer_than_it_declared_is_read_whole_within_the_limit() {
    let (body, all) = pieces(&[10, 10, 10]);
    assert_eq!(&read(body, Some(10), 1000).unwrap()[..], &all[..]);
    let (body, _) = pieces(&[600, 600]);
    assert!(matches!(read(body, Some(600), 1000), Err(BodyRefused::TooLarge)));
}

#[test]
fn a_body_of_one_frame_is_kept_without_a_copy() {
    let (body, _) = pieces(&[0, 1000, 0]);
    let frame = body.pieces[1].clone();
    let read = read(body, None, 1 << 20).unwrap();
    assert_eq!(read.as_ptr(), frame.as_ptr());
}

#[test]
fn a_body_past_the_limit_is_refused_at_the_frame_that_passes_it() {
    // Exactly the limit is read; one byte past it is refused, with or without a declared length.
    let (body, all) = pieces(&[600, 400]);
    assert_eq!(&read(body, None, 1000).unwrap()[..], &all[..]);
    let (body, _) = pieces(&[600, 401]);
    assert!(matches!(read(body, None, 1000), Err(BodyRefused::TooLarge)));
    let (mut body, _) = pieces(&[1001]);
    // Reading stops there: what comes after the frame that passed the limit is not asked for.
    body.error = Some("never read");
    assert!(matches!(read(body, Some(1000), 1000), Err(BodyRefused::TooLarge)));
}

#[test]
fn a_transport_error_while_reading_is_said() {
    let (mut body, _) = pieces(&[10, 10]);
    body.error = Some("connection reset");
    match read(body, None, 1000) {
        Err(BodyRefused::Broken(e)) => assert_eq!(e, "connection reset"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_buffer_never_grows_past_the_limit() {
    // Growing by doubling from 16 KiB would pass 100,000 on its way; the buffer stops at the limit.
    let max = 100_000;
    let (body, _) = pieces(&[20_000, 20_000, 20_000, 20_000, 20_000]);
    let read = read(body, None, max).unwrap();
    assert_eq!(read.len(), max);
    let Ok(buffer) = read.try_into_mut() else { panic!("the buffer is not shared") };
    assert!(buffer.capacity() <= max, "{}", buffer.capacity());
}

#[test]
fn an_allowed_origin_without_a_port_means_the_default_port() {
    for (given, meant) in [
        ("https://app.example.com", "https://app.example.com:443"),
        ("http://app.example.com", "http://app.example.com:80"),
        ("https://app.example.com:8443", "https://app.example.com:8443"),
        ("http://localhost:*", "http://localhost:*"),
        ("http://[::1]", "http://[::1]:80"),
        ("http://[::1]:*", "http://[::1]:*"),
        ("null", "null"),
        ("ftp://files.example", "ftp://files.example"),
    ] {
        assert_eq!(with_default_port(given.to_owned()), meant, "{given}");
    }
}
