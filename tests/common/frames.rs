//! Reading turnstile's response streams the way a client does: the one SSE
//! parser (`turnstile::wire::sse`), typed frames (`turnstile::wire::Frame`),
//! consecutive ids, and every frame fired through the `frame` table.
//!
//! Tests assert on typed fields (`Frame::Citation(c) => c.displayed`), never
//! on a field looked up by a string key: a renamed field breaks the build.
//! A frame's kind is a [`FrameKind`], matched from the `Frame` variant: a
//! new kind breaks the build here, not a string comparison somewhere.

use std::sync::Arc;

use serde_json::{json, Value};
use turnstile::fsm::{Machine, Table};
use turnstile::protocols::TableSet;
use turnstile::wire::sse::SseDecoder;
use turnstile::wire::{Citation, Error, Figure, Frame, Plan, ToolCall, ToolResult};

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
    /// A reader that checks frames against the built-in `frame` table.
    pub fn new() -> FrameReader {
        Self::with_table(TableSet::builtin().unwrap().get("frame").unwrap().clone())
    }

    /// A reader that checks frames against `table` (the test's own `frame`
    /// table, which the harness proved the server serves).
    pub fn with_table(table: Arc<Table>) -> FrameReader {
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

    /// The id of the last frame read (0 before any).
    pub fn last_id(&self) -> u64 {
        self.last_id
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
            assert_eq!(FrameKind::of(&frame).event(), kind, "frame {id}");
            self.frames.push(frame);
        }
    }
}

/// A whole response body, read and checked against the built-in `frame`
/// table.
pub fn read_frames(body: &[u8]) -> Vec<Frame> {
    let mut r = FrameReader::new();
    r.push(body);
    r.finish()
}

/// The kind of a frame, one per [`Frame`] variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    Start,
    Plan,
    ToolCall,
    ToolResult,
    Citation,
    Figure,
    Delta,
    Interrupt,
    Done,
    Error,
    Progress,
}

impl FrameKind {
    /// The kind of `frame` (an exhaustive match: a new variant is a build
    /// error here).
    pub fn of(frame: &Frame) -> FrameKind {
        match frame {
            Frame::Start(_) => FrameKind::Start,
            Frame::Plan(_) => FrameKind::Plan,
            Frame::ToolCall(_) => FrameKind::ToolCall,
            Frame::ToolResult(_) => FrameKind::ToolResult,
            Frame::Citation(_) => FrameKind::Citation,
            Frame::Figure(_) => FrameKind::Figure,
            Frame::Delta(_) => FrameKind::Delta,
            Frame::Interrupt(_) => FrameKind::Interrupt,
            Frame::Done(_) => FrameKind::Done,
            Frame::Error(_) => FrameKind::Error,
            Frame::Progress(_) => FrameKind::Progress,
        }
    }

    /// The SSE `event:` name, which is also the `frame` table's event
    /// (checked against `Frame::kind` for every frame a reader reads).
    pub fn event(self) -> &'static str {
        match self {
            FrameKind::Start => "start",
            FrameKind::Plan => "plan",
            FrameKind::ToolCall => "tool_call",
            FrameKind::ToolResult => "tool_result",
            FrameKind::Citation => "citation",
            FrameKind::Figure => "figure",
            FrameKind::Delta => "delta",
            FrameKind::Interrupt => "interrupt",
            FrameKind::Done => "done",
            FrameKind::Error => "error",
            FrameKind::Progress => "progress",
        }
    }

    /// Whether the kind ends a turn (`done` or `error`).
    pub fn is_terminal(self) -> bool {
        matches!(self, FrameKind::Done | FrameKind::Error)
    }
}

/// The kind of every frame, in order.
pub fn kinds(frames: &[Frame]) -> Vec<FrameKind> {
    frames.iter().map(FrameKind::of).collect()
}

/// The kind of every frame but the deltas (a run of deltas is the model's
/// chunking), in order.
pub fn kinds_without_deltas(frames: &[Frame]) -> Vec<FrameKind> {
    kinds(frames)
        .into_iter()
        .filter(|k| *k != FrameKind::Delta)
        .collect()
}

/// The kind of the turn's last frame.
pub fn last_kind(frames: &[Frame]) -> Option<FrameKind> {
    frames.last().map(FrameKind::of)
}

/// Whether the turn ended with `done`.
pub fn is_done(frames: &[Frame]) -> bool {
    last_kind(frames) == Some(FrameKind::Done)
}

/// Whether any frame of the turn is of `kind`.
pub fn has(frames: &[Frame], kind: FrameKind) -> bool {
    frames.iter().any(|f| FrameKind::of(f) == kind)
}

/// How many frames of the turn are of `kind`.
pub fn count(frames: &[Frame], kind: FrameKind) -> usize {
    frames.iter().filter(|f| FrameKind::of(f) == kind).count()
}

/// Fails the test unless the turn ended with `done`; says how it ended.
#[track_caller]
pub fn assert_done(frames: &[Frame], what: &str) {
    assert!(
        is_done(frames),
        "{what}: the turn ends with done, not {:?}: {:?}",
        last_kind(frames),
        kinds(frames)
    );
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
/// data).
pub fn figures(frames: &[Frame]) -> Vec<&Figure> {
    frames
        .iter()
        .filter_map(|f| match f {
            Frame::Figure(x) => Some(x),
            _ => None,
        })
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
        // A listing is named by the turn that first showed it: the turn's
        // id goes, the card's number stays.
        Frame::Citation(c) => {
            if let Some(l) = c.listing.as_mut() {
                let n = l.rsplit_once('#').map(|(_, n)| n.to_string());
                *l = format!("[turn]#{}", n.unwrap_or_default());
            }
        }
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
            if !c.links.is_empty() {
                let n = |f: &dyn Fn(&turnstile::wire::DeepLink) -> bool| {
                    c.links.iter().flatten().filter(|l| f(l)).count()
                };
                body.insert(
                    "links".into(),
                    json!(format!(
                        "[{} links: {} scoped, {} with axes, {} with a camera]",
                        c.links.len(),
                        n(&|l| !l.scope.is_empty()),
                        n(&|l| l.axes.is_some()),
                        n(&|l| l.camera.is_some())
                    )),
                );
            }
        }
        out += &format!("{}: {d}\n", f.kind());
    }
    out
}
