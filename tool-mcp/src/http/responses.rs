//! The service's own answers (the SDK writes the rest).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};

use super::{HealthReport, ResponseBody};

pub(super) fn text_response(status: StatusCode, text: String) -> Response<ResponseBody> {
    response(status, "text/plain; charset=utf-8", text)
}

pub(super) fn response(status: StatusCode, content_type: &'static str, body: String) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

pub(super) fn health_response(report: &HealthReport, details: bool) -> Response<ResponseBody> {
    let status = if report.healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let body = if details {
        report.body.to_string()
    } else if report.healthy {
        r#"{"status":"ok"}"#.to_owned()
    } else {
        r#"{"status":"degraded"}"#.to_owned()
    };
    response(status, "application/json", body)
}

pub(super) fn not_found() -> Response<ResponseBody> {
    text_response(StatusCode::NOT_FOUND, "not found\n".to_owned())
}

pub(super) fn too_large(max_body: usize) -> Response<ResponseBody> {
    text_response(StatusCode::PAYLOAD_TOO_LARGE, format!("Payload Too Large: request body exceeds {max_body} bytes\n"))
}

/// The answer to a body that did not arrive within `timeout`; its connection is closed after it.
pub(super) fn body_timed_out(timeout: Option<Duration>) -> Response<ResponseBody> {
    let seconds = timeout.map_or(0.0, |t| t.as_secs_f64());
    let mut response = text_response(
        StatusCode::REQUEST_TIMEOUT,
        format!("Request Timeout: the request body did not arrive within {seconds} s\n"),
    );
    response.headers_mut().insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A request whose session header is not text.
pub(super) fn bad_session_header() -> Response<ResponseBody> {
    text_response(StatusCode::BAD_REQUEST, "Bad Request: the Mcp-Session-Id header is not valid text\n".to_owned())
}
