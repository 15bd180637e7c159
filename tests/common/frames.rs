//! Reading turnstile's response streams the way a client does: the one SSE
//! parser (`turnstile::wire::sse`), typed frames (`turnstile::wire::Frame`),
//! consecutive ids, and every frame fired through the `frame` table.
//!
//! Tests assert on typed fields (`Frame::Citation(c) => c.displayed`), never
//! on a field looked up by a string key: a renamed field breaks the build.

use std::sync::Arc;

use serde_json::{json, Value};
use turnstile::fsm::{Machine, Table};
use turnstile::protocols::TableSet;
use turnstile::wire::sse::SseDecoder;
use turnstile::wire::{Citation, Error, Frame, Plan, ToolCall, ToolResult};

/// An incremental reader of one response stream.
pub struct FrameReader {
    sse: SseDecoder,
    table: Arc<Table>,
    machine: Machine,
    last_id: u64,
    frames: Vec<Frame>,
}

impl Default for FrameReader {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameReader {
    pub fn new() -> FrameReader {
        let table = TableSet::builtin().unwrap().get("frame").unwrap().clone();
        FrameReader {
            sse: SseDecoder::new(),
            machine: Machine::new(table.clone()),
            table,
            last_id: 0,
            frames: Vec::new(),
        }
    }

    /// Feeds bytes as they arrive; every completed frame is checked (id,
    /// body, table order) and kept.
    pub fn push(&mut self, bytes: &[u8]) {
        self.sse.push(bytes);
        self.drain();
    }

    /// The stream ended: the last event is delivered and the end is fired
    /// as `close`. Returns every frame of the stream.
    pub fn finish(mut self) -> Vec<Frame> {
        self.sse.finish();
        self.drain();
        self.machine
            .fire(self.table.event_index("close").unwrap())
            .unwrap_or_else(|v| panic!("stream ended out of order: {v}"));
        self.frames
    }

    /// The frames read so far.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    fn drain(&mut self) {
        while let Some(event) = self.sse.next_event() {
            let kind = event.event.as_deref().expect("every frame names its kind");
            let id: u64 = event
                .id
                .as_deref()
                .expect("every frame has an id")
                .parse()
                .expect("frame ids are numbers");
            assert_eq!(id, self.last_id + 1, "frame ids are consecutive");
            self.last_id = id;
            self.machine
                .fire(
                    self.table
                        .event_index(kind)
                        .unwrap_or_else(|| panic!("`{kind}` is not an event of the frame table")),
                )
                .unwrap_or_else(|v| panic!("frame order violation: {v}"));
            let frame = Frame::parse(kind, &event.data)
                .unwrap_or_else(|e| panic!("frame {id}: {e}: {}", event.data));
            self.frames.push(frame);
        }
    }
}

/// A whole response body, read and checked.
pub fn read_frames(body: &[u8]) -> Vec<Frame> {
    let mut r = FrameReader::new();
    r.push(body);
    r.finish()
}

pub fn kinds(frames: &[Frame]) -> Vec<&'static str> {
    frames.iter().map(Frame::kind).collect()
}

/// The answer's text: every delta, joined.
pub fn answer(frames: &[Frame]) -> String {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Delta(d) => Some(d.text.as_str()),
            _ => None,
        })
        .collect()
}

pub fn plans(frames: &[Frame]) -> Vec<&Plan> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Plan(p) => Some(p),
            _ => None,
        })
        .collect()
}

pub fn tool_calls(frames: &[Frame]) -> Vec<&ToolCall> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::ToolCall(c) => Some(c),
            _ => None,
        })
        .collect()
}

pub fn tool_results(frames: &[Frame]) -> Vec<&ToolResult> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::ToolResult(r) => Some(r),
            _ => None,
        })
        .collect()
}

pub fn citations(frames: &[Frame]) -> Vec<&Citation> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Citation(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// The `figure` frames of the turn (a single-value aggregate carried as
/// data), as their JSON bodies: `{"source", "label", "value", "grade",
/// "accounted", "query"}`. Read by kind from the raw body, so a test reads
/// the frame whatever its typed form.
pub fn figures(frames: &[Frame]) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f.kind() == "figure")
        .map(Frame::data)
        .collect()
}

/// The first plan of the turn.
pub fn plan(frames: &[Frame]) -> Option<&Plan> {
    plans(frames).into_iter().next()
}

/// The first citation of the turn.
pub fn citation(frames: &[Frame]) -> Option<&Citation> {
    citations(frames).into_iter().next()
}

/// The `error` frame that ended the turn, if it ended with one.
pub fn error(frames: &[Frame]) -> Option<&Error> {
    match frames.last() {
        Some(Frame::Error(e)) => Some(e),
        _ => None,
    }
}

/// The frame with its per-run ids replaced by `[id]`.
pub fn without_ids(frame: &Frame) -> Frame {
    let id = || "[id]".to_string();
    let mut f = frame.clone();
    match &mut f {
        Frame::Start(s) => {
            s.turn_id = id();
            s.thread_id = id();
        }
        Frame::ToolCall(c) => c.call_id = id(),
        Frame::ToolResult(r) => r.call_id = id(),
        Frame::Done(d) => d.turn_id = id(),
        // Every other kind carries no per-run id.
        _ => {}
    }
    f
}

/// Kinds and stable fields of a turn's frames, for snapshots: ids that
/// change per run are replaced, a run of deltas is one line (the text
/// matters, not its chunking), and a card's items are only counted (they
/// are the demo data's; the count fields are the point).
pub fn stable(frames: &[Frame]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < frames.len() {
        if let Frame::Delta(_) = frames[i] {
            let mut text = String::new();
            let mut n = 0;
            while let Some(Frame::Delta(d)) = frames.get(i) {
                text += &d.text;
                n += 1;
                i += 1;
            }
            out += &format!("delta ×{n}: {text}\n");
            continue;
        }
        let f = without_ids(&frames[i]);
        i += 1;
        let mut d = f.data();
        if let (Frame::Citation(c), Value::Object(body)) = (&f, &mut d) {
            // Written over the typed field's own serialisation: a renamed
            // `items` shows in the snapshot as a new key.
            body.insert("items".into(), json!(format!("[{} items]", c.items.len())));
        }
        out += &format!("{}: {d}\n", f.kind());
    }
    out
}
