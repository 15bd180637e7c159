//! Errors of the store.

/// Everything that can go wrong talking to the store.
///
/// Messages never contain connection URLs (they may hold passwords) or
/// message bodies.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The connection string names neither SQLite nor PostgreSQL.
    #[error("unsupported database URL scheme `{scheme}` (expected sqlite:, postgres:// or postgresql://, or a file path)")]
    UnsupportedUrl {
        /// The scheme as written, e.g. `mysql`.
        scheme: String,
    },

    /// A connection-string option this store reads has a value it does
    /// not know (`synchronous=sometimes`).
    #[error("database URL option `{option}`: {reason}")]
    BadOption {
        /// The option's name.
        option: String,
        /// What is wrong with its value.
        reason: String,
    },

    /// A step named a thread that does not exist. Nothing was written.
    #[error("unknown thread `{0}`")]
    UnknownThread(String),

    /// Another turn's lease on this thread is live: a turn is running on
    /// it (in this process or another). Nothing was written.
    #[error("a turn is already running on thread `{0}`")]
    LeaseHeld(String),

    /// The turn does not hold the thread's lease (any more): it was
    /// released, or it expired and another turn claimed it. Nothing was
    /// written.
    #[error("turn `{turn_id}` does not hold the lease of thread `{thread_id}`")]
    LeaseLost {
        /// The thread.
        thread_id: String,
        /// The turn that thought it held it.
        turn_id: String,
    },

    /// The database (connection, query, constraint, transaction) failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),

    /// Applying the embedded migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),

    /// A JSON body or snapshot could not be encoded or decoded.
    #[error("JSON error: {0}")]
    Json(#[from] serde_json::Error),

    /// The store's writer could not commit the group a step was in (or has
    /// stopped): nothing of the step was written.
    #[error("the step was not committed: {0}")]
    Writer(String),

    /// A stored row does not have the shape this code writes.
    #[error("corrupt row in `{table}`: {detail}")]
    Corrupt {
        /// Table the row came from.
        table: &'static str,
        /// What is wrong with it.
        detail: String,
    },
}
