"""Reads keel's recorded provider streams (tests/fixtures/streams) with each provider's own SDK.

Usage: streams.py BASE_URL

The stub at BASE_URL serves each API's path with the fixtures, in the order this script asks for them (the Rust
test `provider_streams` scripts it). Each SDK's stream reader reads the stream as it would read the provider's, and
this script prints one JSON object: for each fixture, the text, the tool calls (name and parsed arguments) and the
usage the SDK reported, or the error it raised. The Rust test compares them with what keel read from the same
bytes.
"""

import json
import sys

BASE = sys.argv[1]
PROMPT = [{"role": "user", "content": "Look up the ticket."}]
out = {}


def read(key, reader):
    """What `reader` returns for fixture `key`, or the error the SDK raised reading it."""
    try:
        out[key] = reader()
    except Exception as e:  # noqa: BLE001 - which error the SDK raises is what is checked
        out[key] = {"error": type(e).__name__, "message": str(e)}


def openai_chat():
    from openai import OpenAI

    client = OpenAI(base_url=BASE + "/v1", api_key="k", max_retries=0)

    def one():
        # The SDK's streaming helper accumulates the chunks into a completion and checks them as it goes.
        with client.chat.completions.stream(
            model="m", messages=PROMPT, stream_options={"include_usage": True}
        ) as stream:
            for _ in stream:
                pass
            final = stream.get_final_completion()
        message = final.choices[0].message
        return {
            "text": message.content or "",
            "calls": [
                {"id": c.id, "name": c.function.name, "arguments": json.loads(c.function.arguments)}
                for c in message.tool_calls or []
            ],
            "usage": [final.usage.prompt_tokens, final.usage.completion_tokens] if final.usage else None,
            "finish": final.choices[0].finish_reason,
        }

    for name in ("call", "text", "error"):
        read(f"openai-chat-{name}", one)


def openai_responses():
    from openai import OpenAI

    client = OpenAI(base_url=BASE + "/v1", api_key="k", max_retries=0)

    def one():
        deltas = []
        with client.responses.stream(model="m", input="Look up the ticket.") as stream:
            for event in stream:
                if event.type == "response.function_call_arguments.delta":
                    deltas.append(event.delta)
            final = stream.get_final_response()
        calls = [
            {"id": item.call_id, "name": item.name, "arguments": json.loads(item.arguments)}
            for item in final.output
            if item.type == "function_call"
        ]
        if calls:
            assert json.loads("".join(deltas)) == calls[0]["arguments"], deltas
        return {
            "text": final.output_text,
            "calls": calls,
            "usage": [final.usage.input_tokens, final.usage.output_tokens],
            "finish": final.status,
        }

    for name in ("call", "text", "failed"):
        read(f"openai-responses-{name}", one)


def anthropic_messages():
    import anthropic

    client = anthropic.Anthropic(base_url=BASE, api_key="k", max_retries=0)

    def one():
        with client.messages.stream(model="m", max_tokens=1024, messages=PROMPT) as stream:
            for _ in stream:
                pass
            final = stream.get_final_message()
        return {
            "text": "".join(b.text for b in final.content if b.type == "text"),
            "calls": [{"id": b.id, "name": b.name, "arguments": b.input} for b in final.content if b.type == "tool_use"],
            "usage": [
                final.usage.input_tokens + (final.usage.cache_read_input_tokens or 0),
                final.usage.output_tokens,
            ],
            "finish": final.stop_reason,
        }

    for name in ("call", "text", "overloaded"):
        read(f"anthropic-{name}", one)


def gemini():
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="k", http_options=types.HttpOptions(base_url=BASE, api_version="v1beta"))

    def one():
        text, calls, usage, finish = "", [], None, None
        for chunk in client.models.generate_content_stream(model="m", contents="Look up the ticket."):
            for part in chunk.candidates[0].content.parts or []:
                if part.text:
                    text += part.text
                if part.function_call:
                    calls.append({"id": part.function_call.id, "name": part.function_call.name,
                                  "arguments": part.function_call.args})
            if chunk.usage_metadata and chunk.usage_metadata.prompt_token_count is not None:
                usage = [chunk.usage_metadata.prompt_token_count, chunk.usage_metadata.candidates_token_count]
            if chunk.candidates[0].finish_reason:
                finish = chunk.candidates[0].finish_reason.value
        return {"text": text, "calls": calls, "usage": usage, "finish": finish}

    for name in ("call", "text", "error"):
        read(f"gemini-{name}", one)


def ollama_chat():
    import ollama

    client = ollama.Client(host=BASE)

    def one():
        text, calls, usage, finish = "", [], None, None
        for chunk in client.chat(model="m", messages=PROMPT, stream=True):
            text += chunk.message.content or ""
            for c in chunk.message.tool_calls or []:
                calls.append({"id": None, "name": c.function.name, "arguments": dict(c.function.arguments)})
            if chunk.done:
                usage = [chunk.prompt_eval_count, chunk.eval_count]
                finish = chunk.done_reason
        return {"text": text, "calls": calls, "usage": usage, "finish": finish}

    for name in ("call", "text", "error"):
        read(f"ollama-{name}", one)


for check in (openai_chat, openai_responses, anthropic_messages, gemini, ollama_chat):
    check()
print(json.dumps(out, sort_keys=True))
