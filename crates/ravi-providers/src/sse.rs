//! An incremental Server-Sent Events parser (the WHATWG `text/event-stream` format).
//!
//! Bytes arrive in arbitrary chunks from the network; the parser buffers only the current
//! unfinished line, so a chunk boundary may fall anywhere — inside a UTF-8 sequence, between the
//! `\r` and `\n` of a CRLF, in the middle of a field name — and the events that come out are the
//! same as if the whole body had arrived at once (a property test checks exactly that).

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; `None` means the default type, `message`.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` field seen in this event.
    pub id: Option<String>,
}

impl SseEvent {
    /// The event type, `message` when the stream did not name one.
    pub fn kind(&self) -> &str {
        self.event.as_deref().unwrap_or("message")
    }
}

/// Feeds bytes in, gets whole events out.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, unterminated line.
    line: Vec<u8>,
    /// The previous chunk ended in `\r`; a `\n` at the start of the next one belongs to it.
    after_cr: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `chunk`, appending every event it completes to `out`.
    pub fn push_into(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) {
        let mut rest = chunk;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if let Some((b'\n', tail)) = rest.split_first() {
                rest = tail;
            }
        }
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', rest) {
            let (head, tail) = rest.split_at(pos);
            let Some((&terminator, after)) = tail.split_first() else {
                break;
            };
            if self.line.is_empty() {
                self.process_line(head, out);
            } else {
                self.line.extend_from_slice(head);
                let line = std::mem::take(&mut self.line);
                self.process_line(&line, out);
            }
            rest = after;
            if terminator == b'\r' {
                match rest.split_first() {
                    Some((b'\n', tail)) => rest = tail,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.line.extend_from_slice(rest);
    }

    /// Parses `chunk` and returns the events it completes.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        self.push_into(chunk, &mut out);
        out
    }

    /// Ends the stream. Per the standard an event not followed by a blank line is discarded;
    /// many servers close right after the last `data:` line, though, so a pending event with
    /// data is dispatched rather than lost.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            let mut out = Vec::new();
            self.process_line(&line, &mut out);
            if let Some(ev) = out.pop() {
                return Some(ev);
            }
        }
        self.dispatch()
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if let Some(ev) = self.dispatch() {
                out.push(ev);
            }
            return;
        }
        if line.first() == Some(&b':') {
            return; // a comment (keep-alive)
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let (name, rest) = line.split_at(colon);
                let value = rest.get(1..).unwrap_or_default();
                let value = value.strip_prefix(b" ").unwrap_or(value);
                (name, value)
            }
            None => (line, &[][..]),
        };
        let value = String::from_utf8_lossy(value);
        match name {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"event" => self.event = Some(value.into_owned()),
            b"id" if !value.contains('\0') => self.id = Some(value.into_owned()),
            _ => {} // `retry:` and unknown fields are ignored
        }
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        // Hand the text over and start the next event with room for one of the same size, so
        // a long stream does not regrow its buffer from zero on every event.
        let room = self.data.len();
        let data = std::mem::replace(&mut self.data, String::with_capacity(room));
        Some(SseEvent {
            event,
            data,
            id: self.id.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_all(body: &[u8]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = p.push(body);
        out.extend(p.finish());
        out
    }

    #[test]
    fn parses_fields_comments_and_multiline_data() {
        let body = b": keep-alive\nevent: message_start\ndata: {\"a\":1}\n\ndata: line1\ndata:line2\nid: 7\n\n";
        let events = parse_all(body);
        assert_eq!(
            events,
            vec![
                SseEvent {
                    event: Some("message_start".into()),
                    data: "{\"a\":1}".into(),
                    id: None
                },
                SseEvent {
                    event: None,
                    data: "line1\nline2".into(),
                    id: Some("7".into())
                },
            ]
        );
        assert_eq!(events[1].kind(), "message");
    }

    #[test]
    fn crlf_and_cr_line_endings() {
        let a = parse_all(b"data: x\r\n\r\ndata: y\r\rdata: z\n\n");
        let datas: Vec<_> = a.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(datas, ["x", "y", "z"]);
    }

    #[test]
    fn event_without_data_is_not_dispatched_and_type_resets() {
        let a = parse_all(b"event: ping\n\ndata: d\n\n");
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].event, None);
    }

    #[test]
    fn unterminated_last_event_is_kept() {
        let a = parse_all(b"data: [DONE]");
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].data, "[DONE]");
    }

    #[test]
    fn cr_split_across_chunks_is_one_terminator() {
        let mut p = SseParser::new();
        let mut out = p.push(b"data: a\r");
        out.extend(p.push(b"\n\r"));
        out.extend(p.push(b"\ndata: b\n\n"));
        let datas: Vec<_> = out.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(datas, ["a", "b"]);
    }

    fn body_strategy() -> impl Strategy<Value = Vec<u8>> {
        let line = prop_oneof![
            "[a-zé😀 {}\":,]{0,12}".prop_map(|s| format!("data: {s}")),
            "[a-z_]{1,8}".prop_map(|s| format!("event: {s}")),
            "[0-9]{1,3}".prop_map(|s| format!("id:{s}")),
            Just(": comment".to_string()),
            Just(String::new()),
        ];
        let eol = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
        proptest::collection::vec((line, eol), 0..24).prop_map(|lines| {
            lines
                .into_iter()
                .flat_map(|(l, e)| format!("{l}{e}").into_bytes())
                .collect()
        })
    }

    proptest! {
        #[test]
        fn arbitrary_chunking_gives_the_same_events(
            body in body_strategy(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let whole = parse_all(&body);
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(body.len() + 1)).collect();
            points.sort_unstable();
            let mut p = SseParser::new();
            let mut chunked = Vec::new();
            let mut start = 0;
            for end in points {
                p.push_into(&body[start..end], &mut chunked);
                start = end;
            }
            p.push_into(&body[start..], &mut chunked);
            chunked.extend(p.finish());
            prop_assert_eq!(whole, chunked);
        }
    }
}
