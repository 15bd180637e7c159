//! The set of tables a process runs with: compiled in by default, optionally
//! overridden file by file from a directory at start-up.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::fsm::{self, BindingNames, Findings, Table};

use super::{
    connection::Connection, frame::Frame, harness::Harness, narration::Narration,
    narrowing::Narrowing, paging::Paging, turn::Turn, Protocol,
};

/// Every table compiled into the binary: (name, file name, source).
pub const BUILTIN: &[(&str, &str, &str)] = &[
    ("frame", "frame.ron", include_str!("../../tables/frame.ron")),
    (
        "harness",
        "harness.ron",
        include_str!("../../tables/harness.ron"),
    ),
    (
        "narrowing",
        "narrowing.ron",
        include_str!("../../tables/narrowing.ron"),
    ),
    (
        "paging",
        "paging.ron",
        include_str!("../../tables/paging.ron"),
    ),
    ("turn", "turn.ron", include_str!("../../tables/turn.ron")),
    (
        "connection",
        "connection.ron",
        include_str!("../../tables/connection.ron"),
    ),
    (
        "narration",
        "narration.ron",
        include_str!("../../tables/narration.ron"),
    ),
];

/// The binding for a table name, if the code has one.
pub fn binding_for(name: &str) -> Option<BindingNames<'static>> {
    match name {
        Frame::NAME => Some(Frame::binding()),
        Harness::NAME => Some(Harness::binding()),
        Narrowing::NAME => Some(Narrowing::binding()),
        Paging::NAME => Some(Paging::binding()),
        Turn::NAME => Some(Turn::binding()),
        Connection::NAME => Some(Connection::binding()),
        Narration::NAME => Some(Narration::binding()),
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
    #[error("table \"{0}\" does not match its binding")]
    Binding(String),
    #[error("{file}: no protocol named \"{name}\" exists in this build; known: {known}")]
    UnknownTable {
        file: String,
        name: String,
        known: String,
    },
}

/// Validates one file's text, using the binding named by its file stem (or,
/// failing that, by the `name` it declares).
pub fn check_source(src: &str, file: &str) -> Result<Table, Findings> {
    let stem = Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("");
    let binding = binding_for(stem).or_else(|| declared_name(src).and_then(|n| binding_for(&n)));
    fsm::load(src, file, binding)
}

fn declared_name(src: &str) -> Option<String> {
    let i = src.find("name:")?;
    let rest = &src[i + 5..];
    let a = rest.find('"')?;
    let b = rest[a + 1..].find('"')?;
    Some(rest[a + 1..a + 1 + b].to_string())
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
    /// Every finding of every file is reported together.
    pub fn load(dir: Option<&Path>) -> Result<TableSet, LoadError> {
        let mut tables = BTreeMap::new();
        let mut findings = Vec::new();
        for (name, file, src) in BUILTIN {
            let (text, origin) = match dir.map(|d| d.join(file)) {
                Some(p) if p.exists() => (
                    std::fs::read_to_string(&p).map_err(|source| LoadError::Io {
                        path: p.display().to_string(),
                        source,
                    })?,
                    p.display().to_string(),
                ),
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
