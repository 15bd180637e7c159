//! `turnstile tables …` and `turnstile replay`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use turnstile::fsm::{self, render::Format, Machine, Table};
use turnstile::protocols::{
    check_dir, read_table_file, registry_check_source, LoadError, TableSet,
};

/// Validates every `*.ron` file in `dir`. Prints a summary line per good
/// table to stdout and every finding to stderr; returns the number of files
/// with findings. A file that cannot be read (not UTF-8, unreadable) counts
/// as one with findings, and the run goes on; a `*.ron` that is not a
/// regular file (a named pipe would block the run) is skipped with a notice.
pub fn check(dir: &Path) -> Result<usize> {
    check_to(dir, &mut super::stdout())
}

/// [`check`], with its summary lines written to `out`.
pub fn check_to(dir: &Path, out: &mut impl Write) -> Result<usize> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read table directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ron"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("{}: no *.ron tables found", dir.display());
    }
    let mut bad = 0;
    for path in files {
        let shown = path.display().to_string();
        let src = match read_table_file(&path) {
            Ok(src) => src,
            Err(LoadError::NotAFile { .. }) => {
                eprintln!("skipped {shown}: not a regular file");
                continue;
            }
            Err(e) => {
                bad += 1;
                eprintln!("error: {e}");
                continue;
            }
        };
        match registry_check_source(&src, &shown) {
            Ok(t) => writeln!(out, "ok  {shown}  {}", summary(&t))?,
            Err(findings) => {
                bad += 1;
                eprintln!("{findings}");
            }
        }
    }
    Ok(bad)
}

pub fn summary(t: &Table) -> String {
    let legal = t.legal_count();
    format!(
        "{}: {} states × {} events = {} rows ({} legal, {} forbidden)",
        t.name,
        t.states.len(),
        t.events.len(),
        t.rows.len(),
        legal,
        t.rows.len() - legal
    )
}

/// A table by name (compiled in, or from `dir` when given) or by path. A
/// `dir` that is not a directory is an error, even for a path.
pub fn resolve(name_or_path: &str, dir: Option<&Path>) -> Result<Arc<Table>> {
    if let Some(d) = dir {
        check_dir(d).map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    let path = Path::new(name_or_path);
    if name_or_path.ends_with(".ron") || path.is_file() {
        let src = read_table_file(path).map_err(|e| anyhow::anyhow!("{e}"))?;
        return registry_check_source(&src, name_or_path)
            .map(Arc::new)
            .map_err(|f| anyhow::anyhow!("{f}"));
    }
    let set = TableSet::load(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    match set.get(name_or_path) {
        Some(t) => Ok(t.clone()),
        None => bail!(
            "no table named \"{name_or_path}\"; known: {}",
            set.names().collect::<Vec<_>>().join(", ")
        ),
    }
}

/// A table rendered as `markdown`, `mermaid`, `dot`, `json` or `ron` (the
/// table file with every row group expanded into its rows; it loads again
/// with the same hash).
pub fn render(name: &str, format: &str, dir: Option<&Path>) -> Result<String> {
    let format: Format = format.parse().map_err(|e: String| anyhow::anyhow!(e))?;
    Ok(fsm::render::render(resolve(name, dir)?.as_ref(), format))
}

pub fn diff(old: &str, new: &str) -> Result<String> {
    let (a, b) = (resolve(old, None)?, resolve(new, None)?);
    let changes = fsm::diff::diff(&a, &b);
    let mut out = String::new();
    if changes.is_empty() {
        out += "no behavioural change\n";
    }
    for c in changes {
        out += &format!("{c}\n");
    }
    Ok(out)
}

/// Runs events through a table. Returns the printed steps, and the violation
/// (already printed into the text) if one occurred.
pub fn replay(name: &str, events: &[String], dir: Option<&Path>) -> Result<(String, bool)> {
    let table = resolve(name, dir)?;
    let mut m = Machine::new(table.clone());
    let mut out = format!("{}: start in {}\n", table.name, m.state_name());
    for ev in events {
        let Some(e) = table.event_index(ev) else {
            bail!(
                "unknown event \"{ev}\" for table {}; events: {}",
                table.name,
                table.events.join(", ")
            );
        };
        let from = m.state_name().to_string();
        match m.fire(e) {
            Ok(step) => {
                let fx = step
                    .effect
                    .map(|x| format!(" effect={}", table.effects[x as usize]))
                    .unwrap_or_default();
                out += &format!(
                    "  {from} --{ev}--> {} [{}]{fx}\n",
                    table.states[step.to as usize], table.rows[step.row as usize].id
                );
            }
            Err(v) => {
                out += &format!("  {from} --{ev}--> FORBIDDEN [{}]: {}\n", v.row_id, v.why);
                return Ok((out, true));
            }
        }
    }
    out += &format!(
        "end in {}{}\n",
        m.state_name(),
        if m.is_terminal() { " (terminal)" } else { "" }
    );
    Ok((out, false))
}
