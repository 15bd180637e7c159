//! The set of tables a process runs with: compiled in by default, optionally
//! overridden file by file from a directory at start-up.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::fsm::{self, BindingNames, Expect, Findings, Table};

use super::{
    admission::Admission, agui::Agui, approval::Approval, connect::Connect, connection::Connection,
    export::Export, frame::Frame, guardrail::Guardrail, hold::Hold, licence::Licence,
    narration::Narration, narrowing::Narrowing, ownership::Ownership, paging::Paging, panel::Panel,
    task::Task, turn::Turn, ui_stream::UiStream, Protocol,
};

/// Every table compiled into the binary: (name, file name, source).
pub const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "admission",
        "admission.ron",
        include_str!("../../../../tables/admission.ron"),
    ),
    (
        "approval",
        "approval.ron",
        include_str!("../../../../tables/approval.ron"),
    ),
    (
        "export",
        "export.ron",
        include_str!("../../../../tables/export.ron"),
    ),
    (
        "frame",
        "frame.ron",
        include_str!("../../../../tables/frame.ron"),
    ),
    (
        "hold",
        "hold.ron",
        include_str!("../../../../tables/hold.ron"),
    ),
    (
        "narrowing",
        "narrowing.ron",
        include_str!("../../../../tables/narrowing.ron"),
    ),
    (
        "paging",
        "paging.ron",
        include_str!("../../../../tables/paging.ron"),
    ),
    (
        "turn",
        "turn.ron",
        include_str!("../../../../tables/turn.ron"),
    ),
    (
        "connection",
        "connection.ron",
        include_str!("../../../../tables/connection.ron"),
    ),
    (
        "licence",
        "licence.ron",
        include_str!("../../../../tables/licence.ron"),
    ),
    (
        "ownership",
        "ownership.ron",
        include_str!("../../../../tables/ownership.ron"),
    ),
    (
        "task",
        "task.ron",
        include_str!("../../../../tables/task.ron"),
    ),
    (
        "narration",
        "narration.ron",
        include_str!("../../../../tables/narration.ron"),
    ),
    (
        "ui_stream",
        "ui_stream.ron",
        include_str!("../../../../tables/ui_stream.ron"),
    ),
    (
        "agui",
        "agui.ron",
        include_str!("../../../../tables/agui.ron"),
    ),
    (
        "panel",
        "panel.ron",
        include_str!("../../../../tables/panel.ron"),
    ),
    (
        "guardrail",
        "guardrail.ron",
        include_str!("../../../../tables/guardrail.ron"),
    ),
    (
        "connect",
        "connect.ron",
        include_str!("../../../../tables/connect.ron"),
    ),
];

/// The binding for a table name, if the code has one.
pub fn binding_for(name: &str) -> Option<BindingNames<'static>> {
    match name {
        Admission::NAME => Some(Admission::binding()),
        Approval::NAME => Some(Approval::binding()),
        Export::NAME => Some(Export::binding()),
        Frame::NAME => Some(Frame::binding()),
        Hold::NAME => Some(Hold::binding()),
        Narrowing::NAME => Some(Narrowing::binding()),
        Paging::NAME => Some(Paging::binding()),
        Turn::NAME => Some(Turn::binding()),
        Connection::NAME => Some(Connection::binding()),
        Narration::NAME => Some(Narration::binding()),
        Licence::NAME => Some(Licence::binding()),
        Ownership::NAME => Some(Ownership::binding()),
        Task::NAME => Some(Task::binding()),
        UiStream::NAME => Some(UiStream::binding()),
        Agui::NAME => Some(Agui::binding()),
        Panel::NAME => Some(Panel::binding()),
        Guardrail::NAME => Some(Guardrail::binding()),
        Connect::NAME => Some(Connect::binding()),
        _ => None,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Findings(Findings),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not UTF-8 at byte {offset}")]
    NotUtf8 { path: String, offset: usize },
    #[error("{path}: not a regular file")]
    NotAFile { path: String },
    #[error("{path}: larger than {max} bytes")]
    TooLarge { path: String, max: u64 },
    #[error("table directory {path}: {cause}")]
    NoDir { path: String, cause: std::io::Error },
    #[error("table \"{0}\" does not match its binding")]
    Binding(String),
    #[error("{file}: no protocol named \"{name}\" exists in this build; known: {known}")]
    UnknownTable {
        file: String,
        name: String,
        known: String,
    },
}

/// Validates one file's text. Its name and its table's `name` must agree
/// (`frame.ron` declares `name: "frame"`), and it is checked against the
/// binding of the protocol its file names; a file named after no protocol
/// (`x.ron`) is checked against the binding of the name it declares.
pub fn check_source(src: &str, file: &str) -> Result<Table, Findings> {
    let stem = file_stem(file);
    let (protocol, binding) = match binding_for(stem) {
        Some(b) => (Some(stem.to_string()), Some(b)),
        None => match declared_name(src) {
            Some(n) => (Some(n.clone()), binding_for(&n)),
            None => (None, None),
        },
    };
    fsm::load_with(
        src,
        file,
        Expect {
            name: (!stem.is_empty()).then_some(stem),
            binding,
            protocol: protocol.as_deref(),
        },
    )
}

/// The part of a file name or URL that names its table: `dir/frame.ron` →
/// `frame`.
fn file_stem(file: &str) -> &str {
    let base = file.rsplit(['/', '\\']).next().unwrap_or(file);
    base.strip_suffix(".ron").unwrap_or(base)
}

fn declared_name(src: &str) -> Option<String> {
    let i = src.find("name:")?;
    let rest = &src[i + 5..];
    let a = rest.find('"')?;
    let b = rest[a + 1..].find('"')?;
    Some(rest[a + 1..a + 1 + b].to_string())
}

/// The largest table file [`read_table_file`] reads (1 MiB; the largest
/// compiled-in table is under 20 KB).
pub const MAX_TABLE_BYTES: u64 = 1024 * 1024;

/// Reads a table file: a regular file (a named pipe or a device would block
/// or never end) of at most [`MAX_TABLE_BYTES`], in UTF-8 (an error names
/// the first bad byte's offset).
pub fn read_table_file(path: &Path) -> Result<String, LoadError> {
    let shown = path.display().to_string();
    let io = |source| LoadError::Io {
        path: shown.clone(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(LoadError::NotAFile { path: shown });
    }
    let file = std::fs::File::open(path).map_err(io)?;
    // Checked again on what was opened, in case the path changed between.
    if !file.metadata().map_err(io)?.is_file() {
        return Err(LoadError::NotAFile { path: shown });
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_TABLE_BYTES + 1),
        &mut bytes,
    )
    .map_err(io)?;
    if bytes.len() as u64 > MAX_TABLE_BYTES {
        return Err(LoadError::TooLarge {
            path: shown,
            max: MAX_TABLE_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|e| LoadError::NotUtf8 {
        path: shown,
        offset: e.utf8_error().valid_up_to(),
    })
}

#[derive(Debug, Clone)]
pub struct TableSet {
    tables: BTreeMap<String, Arc<Table>>,
}

impl TableSet {
    /// The compiled-in tables. They are checked by the test suite, so a
    /// failure here means the binary was built from a broken tree.
    pub fn builtin() -> Result<TableSet, LoadError> {
        Self::load(None)
    }

    /// Compiled-in tables, each replaced by `DIR/<name>.ron` where it exists.
    /// Every finding of every file is reported together. A `DIR` that is not
    /// a directory is an error, never a silent fall-back to the compiled-in
    /// tables.
    pub fn load(dir: Option<&Path>) -> Result<TableSet, LoadError> {
        if let Some(d) = dir {
            check_dir(d)?;
        }
        let mut tables = BTreeMap::new();
        let mut findings = Vec::new();
        for (name, file, src) in BUILTIN {
            let (text, origin) = match dir.map(|d| d.join(file)) {
                Some(p) if std::fs::symlink_metadata(&p).is_ok() => {
                    (read_table_file(&p)?, p.display().to_string())
                }
                _ => (src.to_string(), format!("tables/{file}")),
            };
            match check_source(&text, &origin) {
                Ok(t) => {
                    tables.insert(name.to_string(), Arc::new(t));
                }
                Err(f) => findings.extend(f.0),
            }
        }
        if !findings.is_empty() {
            return Err(LoadError::Findings(Findings(findings)));
        }
        Ok(TableSet { tables })
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Table>> {
        self.tables.get(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tables.keys().map(String::as_str)
    }

    pub fn bound<P: Protocol>(&self) -> Result<super::Bound<P>, LoadError> {
        let t = self
            .get(P::NAME)
            .ok_or_else(|| LoadError::Binding(P::NAME.to_string()))?;
        super::Bound::new(t)
    }
}

/// An override directory must exist and be a directory.
pub fn check_dir(dir: &Path) -> Result<(), LoadError> {
    let no_dir = |cause| LoadError::NoDir {
        path: dir.display().to_string(),
        cause,
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(no_dir(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        ))),
        Err(e) => Err(no_dir(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 20 §6.2: a table file is a regular file of bounded size.
    #[test]
    fn a_table_file_must_be_a_regular_file_of_at_most_a_mib() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("frame.ron");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(matches!(
            read_table_file(&fifo),
            Err(LoadError::NotAFile { .. })
        ));
        let big = tmp.path().join("big.ron");
        std::fs::write(&big, "/".repeat(MAX_TABLE_BYTES as usize + 1)).unwrap();
        let e = read_table_file(&big).unwrap_err();
        assert!(matches!(e, LoadError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("big.ron"), "{e}");
        std::fs::write(&big, "/".repeat(MAX_TABLE_BYTES as usize)).unwrap();
        assert!(read_table_file(&big).is_ok());
    }
}
