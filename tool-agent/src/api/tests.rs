//! Each API's side: the shape a recorded body is known by, the body a replay records, and the accumulators (a
//! stream folded into the whole body, the events it shows, its errors).

use keel_tools_core::{Provider, ToolView};
use serde_json::{Value, json};

use super::{detect, of};
use crate::model::{Mode, ModelError, WireFormat};
use crate::stream::{Emit, stream_error};
use crate::stream_event::StreamEvent;

#[test]
fn a_body_is_the_first_api_in_order_that_knows_its_shape() {
    for (body, format) in [
        (json!({"choices": [], "output": []}), Some(WireFormat::OpenAiChat)),
        (json!({"output": [], "candidates": []}), Some(WireFormat::OpenAiResponses)),
        (json!({"output": [], "object": "chat.completion"}), None),
        (json!({"promptFeedback": {}, "type": "message"}), Some(WireFormat::Gemini)),
        (json!({"type": "message", "message": {}}), Some(WireFormat::Anthropic)),
        (json!({"error": {"message": "bad key"}}), Some(WireFormat::Ollama)),
        (json!({"answer": 42}), None),
    ] {
        assert_eq!(detect(&body), format, "{body}");
    }
}

#[test]
fn a_recorded_body_reads_back_into_the_same_message() {
    let view = ToolView::new(Vec::new());
    for body in [
        json!({"message": {"role": "assistant", "content": "hi"}, "done": true}),
        json!({"choices": [{"message": {"role": "assistant", "content": "hi"}}]}),
        json!({"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}]}),
        json!({"type": "message", "role": "assistant", "content": [{"type": "text", "text": "hi"}]}),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}}]}),
    ] {
        let format = detect(&body).unwrap();
        let a = crate::wire::parse(format, &body, &view, 0, Mode::Replay).unwrap();
        let recorded = of(format).recorded_body(&a);
        assert_eq!(detect(&recorded), Some(format), "{recorded}");
        let b = crate::wire::parse(format, &recorded, &view, 0, Mode::Replay).unwrap();
        assert_eq!((b.content.as_str(), b.calls, b.format), ("hi", a.calls, format), "{recorded}");
    }
}

fn run(format: WireFormat, events: &[(Option<&str>, &str)]) -> (Result<Value, ModelError>, Vec<StreamEvent>) {
    let seen = std::sync::Mutex::new(Vec::new());
    let sink = |e: &StreamEvent| seen.lock().unwrap().push(e.clone());
    let codec = ToolView::new(Vec::new()).codec(Provider::OpenAiChat);
    let emit = Emit { sink: Some(&sink), codec: &codec };
    let mut acc = of(format).accumulator();
    let mut result = Ok(());
    for (e, d) in events {
        result = acc.feed(*e, d, &emit);
        if result.is_err() {
            break;
        }
    }
    let body =
        result.and_then(|()| if acc.complete() { Ok(acc.body()) } else { Err(stream_error("cut".into(), true)) });
    (body, seen.into_inner().unwrap())
}

#[test]
fn chat_chunks_fold_into_one_message() {
    let (body, events) = run(
        WireFormat::OpenAiChat,
        &[
            (
                None,
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"t","arguments":""}}]},"finish_reason":null}]}"#,
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]},"finish_reason":null}]}"#,
            ),
            (
                None,
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":null}]}"#,
            ),
            (None, r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#),
            (None, r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#),
            (None, "[DONE]"),
        ],
    );
    let body = body.unwrap();
    assert_eq!(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
    assert_eq!(body["choices"][0]["message"]["tool_calls"][0]["id"], "call_1");
    assert_eq!(body["usage"]["prompt_tokens"], 5);
    assert_eq!(
        events,
        [
            StreamEvent::CallStarted { index: 0, id: Some("call_1".into()), name: "t".into() },
            StreamEvent::CallArgumentsDelta { index: 0, delta: "{\"a\":".into() },
            StreamEvent::CallArgumentsDelta { index: 0, delta: "1}".into() },
            StreamEvent::CallComplete { index: 0 },
        ]
    );
}

#[test]
fn a_stream_cut_short_is_not_complete() {
    let (body, _) = run(WireFormat::OpenAiChat, &[(None, r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#)]);
    assert!(matches!(body, Err(ModelError::Stream { retryable: true, .. })));
    let (body, _) = run(
        WireFormat::Anthropic,
        &[(Some("message_start"), r#"{"type":"message_start","message":{"id":"m","role":"assistant","content":[]}}"#)],
    );
    assert!(body.is_err());
}

#[test]
fn anthropic_overloaded_mid_stream_is_worth_a_retry() {
    let (body, _) = run(
        WireFormat::Anthropic,
        &[(Some("error"), r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)],
    );
    let e = body.unwrap_err();
    assert_eq!(e, ModelError::Stream { message: "overloaded_error: Overloaded".into(), retryable: true });
    let (body, _) = run(
        WireFormat::Anthropic,
        &[(Some("error"), r#"{"type":"error","error":{"type":"invalid_request_error","message":"no"}}"#)],
    );
    assert!(matches!(body, Err(ModelError::Stream { retryable: false, .. })));
}

#[test]
fn anthropic_input_that_is_not_json_stays_text() {
    let (body, _) = run(
        WireFormat::Anthropic,
        &[
            (
                None,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"t","input":{}}}"#,
            ),
            (
                None,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\": "}}"#,
            ),
            (None, r#"{"type":"content_block_stop","index":0}"#),
            (None, r#"{"type":"message_stop"}"#),
        ],
    );
    assert_eq!(body.unwrap()["content"][0]["input"], "{\"a\": ");
}
