//! Thread ownership (issue 20, `tables/ownership.ron`): each thread's owner
//! kind and owner hash, the one-time promotion from a session to a
//! principal, the caller's own threads, and the shape of the licence gate's
//! audit rows.
//!
//! The store only keeps and compares hashes; deciding who the caller is and
//! whether a thread is theirs is the ownership table's (at the HTTP edge).

use sqlx::Row;

use super::model::Thread;
use super::sql::now_ms;
use super::{Store, StoreError};

/// What owns a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OwnerKind {
    Session,
    Principal,
}

impl OwnerKind {
    fn as_str(self) -> &'static str {
        match self {
            OwnerKind::Session => "session",
            OwnerKind::Principal => "principal",
        }
    }

    fn parse(s: &str) -> Option<OwnerKind> {
        match s {
            "session" => Some(OwnerKind::Session),
            "principal" => Some(OwnerKind::Principal),
            _ => None,
        }
    }
}

/// An owner: its kind and the hash that stands for it (never a raw session
/// id or subject).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub kind: OwnerKind,
    pub key: String,
}

/// A thread's stored ownership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    /// `None`: stored before ownership existed.
    pub owner: Option<Owner>,
    /// The session hash a promotion replaced.
    pub promoted_from: Option<String>,
}

/// One licence decision, as the gate records it (in the thread's `licence`
/// record, committed with the plan frame).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LicenceAudit {
    pub turn_id: String,
    pub tool: String,
    pub required_tier: Option<String>,
    pub held_tiers: Vec<String>,
    pub event: String,
    pub row_id: String,
    pub allowed: bool,
}

impl Store {
    /// Creates a thread owned by `owner`.
    #[tracing::instrument(name = "store.create_owned_thread", level = "debug", skip_all)]
    pub async fn create_owned_thread(&self, owner: &Owner) -> Result<Thread, StoreError> {
        let thread = Thread {
            id: uuid::Uuid::new_v4().to_string(),
            owner: Some(owner.key.clone()),
            created_at: now_ms(),
        };
        sqlx::query(
            "INSERT INTO threads (id, owner, owner_kind, created_at, last_seq, population_seq, delivery_seq) \
             VALUES ($1, $2, $3, $4, 0, 0, 0)",
        )
        .bind(thread.id.as_str())
        .bind(owner.key.as_str())
        .bind(owner.kind.as_str())
        .bind(thread.created_at)
        .execute(&self.pool)
        .await?;
        self.committed();
        Ok(thread)
    }

    /// The thread's ownership, or `None` when no thread has this id.
    pub async fn ownership(&self, id: &str) -> Result<Option<Ownership>, StoreError> {
        let row = sqlx::query("SELECT owner, owner_kind, promoted_from FROM threads WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let key: Option<String> = row.try_get("owner")?;
        let kind: Option<String> = row.try_get("owner_kind")?;
        let owner = match (kind.as_deref().and_then(OwnerKind::parse), key) {
            (Some(kind), Some(key)) => Some(Owner { kind, key }),
            _ => None,
        };
        Ok(Some(Ownership {
            owner,
            promoted_from: row.try_get("promoted_from")?,
        }))
    }

    /// Moves a session-owned thread to `principal`, if it is still owned by
    /// `session`: one compare-and-swap, so of two requests racing exactly
    /// one promotes, and a promoted thread is never promoted again.
    pub async fn promote(
        &self,
        id: &str,
        session: &str,
        principal: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE threads SET owner_kind = 'principal', owner = $1, promoted_from = $2 \
             WHERE id = $3 AND owner_kind = 'session' AND owner = $2",
        )
        .bind(principal)
        .bind(session)
        .bind(id)
        .execute(&self.pool)
        .await?;
        self.committed();
        Ok(done.rows_affected() == 1)
    }

    /// The threads `owner` owns, newest first, at most `limit`.
    pub async fn threads_of(&self, owner: &Owner, limit: i64) -> Result<Vec<Thread>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, owner, created_at FROM threads WHERE owner_kind = $1 AND owner = $2 \
             ORDER BY created_at DESC, id LIMIT $3",
        )
        .bind(owner.kind.as_str())
        .bind(owner.key.as_str())
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|row| {
                Ok(Thread {
                    id: row.try_get("id")?,
                    owner: row.try_get("owner")?,
                    created_at: row.try_get("created_at")?,
                })
            })
            .collect()
    }

    /// Who decided an approval, if anyone has.
    pub async fn approver(&self, interrupt_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT approver FROM approvals WHERE interrupt_id = $1")
            .bind(interrupt_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => r.try_get("approver")?,
            None => None,
        })
    }
}
