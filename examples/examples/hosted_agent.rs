//! An agent against a hosted model: OpenAI's Chat Completions (or any compatible server: vLLM, llama.cpp, Ollama's
//! `/v1`) or Anthropic's Messages API, over one tool. The key comes from the environment.
//!
//! ```text
//! OPENAI_API_KEY=... cargo run -p examples --example hosted_agent -- \
//!     --url https://api.openai.com/v1 --model gpt-4.1-mini 'How many words: "the quick brown fox"?'
//! ANTHROPIC_API_KEY=... cargo run -p examples --example hosted_agent -- --api anthropic \
//!     --url https://api.anthropic.com --model claude-sonnet-4-5 'How many words: "the quick brown fox"?'
//! ```
//!
//! The answer goes to stdout; each call the model asked for, and its result, to stderr. The key's variable is
//! `OPENAI_API_KEY` or `ANTHROPIC_API_KEY`; a server on a loopback address may take none.

use std::error::Error;

use keel_tools::agent::{Agent, AnthropicClient, ChatModel, Message, OpenAiClient};
use keel_tools::events::EventKind;
use keel_tools::runs::Run;
use keel_tools::{Executor, Registry, tool};

/// Counts the words of a text.
#[tool(effect = "read", version = "1.0")]
pub fn count_words_in(text: String) -> usize {
    text.split_whitespace().count()
}

/// Which API the model server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions, at `{url}/chat/completions`.
    OpenAi,
    /// Anthropic Messages, at `{url}/v1/messages`.
    Anthropic,
}

/// The model client for `api` at `url`, with the key from the API's usual variable when it is set.
pub fn model(api: Api, url: &str, name: &str) -> Result<Box<dyn ChatModel>, Box<dyn Error>> {
    let key = |var: &str| std::env::var(var).ok().filter(|k| !k.trim().is_empty());
    Ok(match api {
        Api::OpenAi => {
            let mut builder = OpenAiClient::builder(url, name);
            if let Some(key) = key("OPENAI_API_KEY") {
                builder = builder.api_key(key);
            }
            Box::new(builder.build()?)
        }
        Api::Anthropic => {
            let mut builder = AnthropicClient::builder(url, name);
            if let Some(key) = key("ANTHROPIC_API_KEY") {
                builder = builder.api_key(key);
            }
            Box::new(builder.build()?)
        }
    })
}

/// Asks `model` `question` with the tool at hand, and returns its answer and the names of the tools it called.
pub async fn ask(model: &dyn ChatModel, question: &str) -> Result<(String, Vec<String>), Box<dyn Error>> {
    let view = Registry::from_inventory()?.view().names(["count_words_in"]).build()?;
    let mut run = Run::builder(Executor::new(view)?).build();
    let mut messages = vec![Message::user(question)];
    let outcome = Agent::new(model).max_turns(4).run(&mut run, &mut messages).await?;
    let mut called = Vec::new();
    for event in run.log().events() {
        if let EventKind::ToolObservation { tool_name, .. } = &event.kind {
            eprintln!("{}", event.display_line());
            called.push(tool_name.to_string());
        }
    }
    let answer = outcome.answer.ok_or_else(|| format!("the run ended without an answer: {}", outcome.reason))?;
    Ok((answer, called))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let (mut api, mut url, mut name, mut question) = (Api::OpenAi, None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--api" => {
                api = match args.next().as_deref() {
                    Some("openai") => Api::OpenAi,
                    Some("anthropic") => Api::Anthropic,
                    other => return Err(format!("--api openai|anthropic, not {other:?}").into()),
                }
            }
            "--url" => url = args.next(),
            "--model" => name = args.next(),
            _ => question = Some(arg),
        }
    }
    let usage = "usage: hosted_agent [--api openai|anthropic] --url URL --model NAME QUESTION";
    let (Some(url), Some(name), Some(question)) = (url, name, question) else {
        return Err(usage.into());
    };
    let model = model(api, &url, &name)?;
    let (answer, _) = ask(model.as_ref(), &question).await?;
    println!("{answer}");
    Ok(())
}
