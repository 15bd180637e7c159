//! What the store's statements share: multi-row placeholders, the split of
//! a machine snapshot into its head and trace rows.

use std::time::{SystemTime, UNIX_EPOCH};

use super::error::StoreError;

/// A machine snapshot as a step hands it over, split into what is stored
/// in `machines` (its trace left empty, its length as `trace_len`) and its
/// trace rows: all of them, or, with `"trace_from": n`, the rows from the
/// n-th on (the rest are stored already). A value without a trace of row
/// ids is stored as it is.
///
/// The length is what lets a step upsert its rows without deleting: a
/// rewound machine's rows past its length may linger and are not read.
pub(super) fn split_trace(
    snapshot: &serde_json::Value,
) -> Result<(serde_json::Value, i64, Vec<String>), StoreError> {
    let rows: Option<Vec<String>> = snapshot
        .get("trace")
        .and_then(serde_json::Value::as_array)
        .and_then(|a| a.iter().map(|v| v.as_str().map(str::to_string)).collect());
    let Some(rows) = rows else {
        return Ok((snapshot.clone(), 0, vec![]));
    };
    let mut head = snapshot.clone();
    let mut from = 0;
    if let Some(obj) = head.as_object_mut() {
        if let Some(v) = obj.remove("trace_from") {
            from = v
                .as_i64()
                .filter(|n| *n >= 0)
                .ok_or_else(|| StoreError::Corrupt {
                    table: "machines",
                    detail: "trace_from is not a row count".into(),
                })?;
        }
        obj.insert("trace".into(), serde_json::json!([]));
        obj.insert("trace_len".into(), (from + rows.len() as i64).into());
    }
    Ok((head, from, rows))
}

/// Machine rows per `INSERT` (5 parameters each).
pub(super) const ROWS_PER_INSERT: usize = 1000;

/// `($1, …, $k), ($k+1, …), …`: `rows` groups of `width` numbered
/// placeholders, for one multi-row `VALUES`.
pub(super) fn placeholders(rows: usize, width: usize) -> String {
    placeholders_from(rows, width, 0)
}

/// [`placeholders`], numbered from `$offset + 1` (after the statement's
/// own parameters).
pub(super) fn placeholders_from(rows: usize, width: usize, offset: usize) -> String {
    (0..rows)
        .map(|r| {
            let group = (1..=width)
                .map(|c| format!("${}", offset + r * width + c))
                .collect::<Vec<_>>()
                .join(", ");
            format!("({group})")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Now, in unix milliseconds.
pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Every row of `table` whose `state` is one of `states`, oldest first,
/// read by `from_row` (the approvals and tasks a start-up picks up).
pub(super) async fn rows_in_states<T>(
    pool: &sqlx::AnyPool,
    table: &str,
    columns: &str,
    states: &[&str],
    from_row: fn(&sqlx::any::AnyRow) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::new();
    for state in states {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {columns} FROM {table} WHERE state = $1 ORDER BY created_at"
        )))
        .bind(*state)
        .fetch_all(pool)
        .await?;
        for r in &rows {
            out.push(from_row(r)?);
        }
    }
    Ok(out)
}
