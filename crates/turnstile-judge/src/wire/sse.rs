//! The one Server-Sent Events parser: the OpenAI adapter reads model
//! streams with it, `turnstile chat` and the tests read turnstile's own.
//!
//! Bytes are buffered until a full line is there, so a chunk boundary inside
//! a line (or inside a UTF-8 sequence) is harmless. Comment lines
//! (`: keep-alive`) are not events.

use std::collections::VecDeque;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; `None` means the default type, "message".
    pub event: Option<String>,
    /// The last `id:` field seen in this event.
    pub id: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    event: Option<String>,
    id: Option<String>,
    data: Option<String>,
    ready: VecDeque<SseEvent>,
}

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes as they arrive.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        while let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            self.line(&line[..line.len() - 1]);
        }
    }

    /// End of input: a last line without its newline and an event without
    /// its blank line are still delivered.
    pub fn finish(&mut self) {
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.line(&line);
        }
        self.line(b"");
    }

    /// The next complete event, if one is ready.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        self.ready.pop_front()
    }

    fn line(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            match self.data.take() {
                Some(data) => self.ready.push_back(SseEvent {
                    event: self.event.take(),
                    id: self.id.take(),
                    data,
                }),
                None => {
                    self.event = None;
                    self.id = None;
                }
            }
            return;
        }
        if line[0] == b':' {
            return;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text.as_ref(), ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "event" => self.event = Some(value.to_string()),
            "id" => self.id = Some(value.to_string()),
            _ => {}
        }
    }
}

/// Decodes a whole body at once.
pub fn parse_all(body: &[u8]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    d.push(body);
    d.finish();
    std::iter::from_fn(|| d.next_event()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = ": keep-alive\n\nid: 1\nevent: start\ndata: {\"a\":1}\n\nid: 2\nevent: delta\ndata: x\ndata: y\n\ndata: [DONE]";

    #[test]
    fn any_split_of_the_bytes_gives_the_same_events() {
        let whole = parse_all(BODY.as_bytes());
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0].event.as_deref(), Some("start"));
        assert_eq!(whole[0].id.as_deref(), Some("1"));
        assert_eq!(whole[1].data, "x\ny");
        assert_eq!(whole[2].event, None);
        assert_eq!(whole[2].data, "[DONE]");
        let bytes = BODY.as_bytes();
        for cut in 0..bytes.len() {
            let mut d = SseDecoder::new();
            d.push(&bytes[..cut]);
            d.push(&bytes[cut..]);
            d.finish();
            let got: Vec<_> = std::iter::from_fn(|| d.next_event()).collect();
            assert_eq!(got, whole, "split at {cut}");
        }
    }

    /// CRLF line ends and a UTF-8 sequence cut between two pushes, for every
    /// chunk size; events are taken as they become ready.
    #[test]
    fn crlf_and_split_utf8_survive_any_chunk_size() {
        let body = "data: {\"t\":\"안녕 하세요\"}\r\n\r\n: keep-alive\n\nevent: message\r\ndata: 2\r\n\r\ndata: [DONE]\n\n";
        let bytes = body.as_bytes();
        for step in 1..=bytes.len() {
            let mut d = SseDecoder::new();
            let mut got = Vec::new();
            for piece in bytes.chunks(step) {
                d.push(piece);
                got.extend(std::iter::from_fn(|| d.next_event()));
            }
            d.finish();
            got.extend(std::iter::from_fn(|| d.next_event()));
            let data: Vec<&str> = got.iter().map(|e| e.data.as_str()).collect();
            assert_eq!(
                data,
                ["{\"t\":\"안녕 하세요\"}", "2", "[DONE]"],
                "chunks of {step}"
            );
            assert_eq!(got[1].event.as_deref(), Some("message"), "chunks of {step}");
        }
    }

    #[test]
    fn a_last_event_without_its_blank_line_is_delivered() {
        let mut d = SseDecoder::new();
        d.push(b"data: [DONE]");
        assert_eq!(d.next_event(), None);
        d.finish();
        assert_eq!(d.next_event().map(|e| e.data).as_deref(), Some("[DONE]"));
    }

    #[test]
    fn comments_alone_make_no_event() {
        let mut d = SseDecoder::new();
        d.push(b": keep-alive\n\n: processing\n\n");
        d.finish();
        assert_eq!(d.next_event(), None);
    }
}
