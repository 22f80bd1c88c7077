//! A chat model that plays a script: each turn's answer is decided by the test, and every
//! request the model got is kept for the test to read.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ravi_kernel::{
    ChatModel, ChatRequest, ChatResponse, ContentBlock, Message, MessagePart, ModelError, Role,
    StopReason, Usage,
};
use serde_json::Value;

/// One turn of a script: the answer to the request of that turn.
pub type Step = Box<dyn Fn(&ChatRequest) -> Result<ChatResponse, ModelError> + Send + Sync>;

/// Answers each turn with the next [`Step`] and records every request. Once the script is
/// exhausted each turn fails with a `BadRequest` ("script exhausted").
pub struct ScriptedModel {
    steps: Mutex<VecDeque<Step>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl ScriptedModel {
    /// A model playing `steps` in order.
    pub fn new(steps: Vec<Step>) -> Arc<Self> {
        Arc::new(Self {
            steps: Mutex::new(steps.into()),
            requests: Mutex::default(),
        })
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn name(&self) -> String {
        "scripted".into()
    }
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        self.requests.lock().unwrap().push(request.clone());
        let step = self.steps.lock().unwrap().pop_front();
        match step {
            Some(step) => step(request),
            None => Err(ModelError::BadRequest {
                status: 0,
                message: "script exhausted".into(),
            }),
        }
    }
}

/// An assistant turn of `content` ending for `stop`, costing 10 input and 3 output tokens.
pub fn response(content: Vec<MessagePart>, stop: StopReason) -> ChatResponse {
    ChatResponse {
        id: "r".into(),
        model: "scripted".into(),
        message: Message {
            role: Role::Assistant,
            content,
        },
        stop_reason: stop,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 3,
            ..Usage::default()
        },
    }
}

/// A tool turn answering the call `tool_use_id` with `text` (an error result when `is_error`).
pub fn tool_result(tool_use_id: impl Into<String>, text: &str, is_error: bool) -> Message {
    Message {
        role: Role::Tool,
        content: vec![MessagePart::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: vec![ContentBlock::text(text)],
            is_error,
        }],
    }
}

/// A turn asking for the tool calls `(id, tool, arguments)`, in order.
pub fn calls(list: &[(&str, &str, Value)]) -> Step {
    let parts: Vec<MessagePart> = list
        .iter()
        .map(|(id, name, args)| MessagePart::ToolUse {
            id: (*id).into(),
            name: (*name).into(),
            arguments: args.clone(),
        })
        .collect();
    Box::new(move |_| Ok(response(parts.clone(), StopReason::ToolUse)))
}

/// A turn answering `text` and ending the run.
pub fn answer(text: &str) -> Step {
    let text = text.to_owned();
    Box::new(move |_| {
        Ok(response(
            vec![MessagePart::text(text.clone())],
            StopReason::EndTurn,
        ))
    })
}
