//! The tool servers each user connected (migration 0009, issue 40 §3): one
//! row per owner and server, its OAuth credentials sealed with AES-256-GCM
//! under the deployment's key. The owner and server are the ciphertext's
//! associated data: a row moved to another owner or server does not open.

use std::fmt;

use aws_lc_rs::aead::{Aad, RandomizedNonceKey, AES_256_GCM, NONCE_LEN};
use base64::Engine as _;
use sqlx::Row;

use super::{now_ms, Store, StoreError};

/// The environment variable that holds the key (32 bytes, base64 or hex).
pub const KEY_ENV: &str = "TURNSTILE_CONNECTIONS_KEY";

/// The key the credentials are sealed with. Its `Debug` shows nothing.
pub struct SealingKey(RandomizedNonceKey);

impl fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealingKey([redacted])")
    }
}

/// Why a key or a sealed row could not be used. Never carries key material
/// or plaintext.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("{KEY_ENV} must be 32 bytes, written as 64 hex digits or in base64 ({0})")]
    BadKey(&'static str),
    #[error("the stored credentials do not open with this key (another key, or another row's)")]
    Open,
    #[error("sealing failed")]
    Seal,
}

impl SealingKey {
    /// The key written as 64 hex digits or as base64 of 32 bytes.
    pub fn parse(text: &str) -> Result<SealingKey, SealError> {
        let text = text.trim();
        let bytes = if text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit()) {
            (0..32)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| SealError::BadKey("not hex"))?
        } else {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|_| SealError::BadKey("neither hex nor base64"))?
        };
        if bytes.len() != 32 {
            return Err(SealError::BadKey("wrong length"));
        }
        RandomizedNonceKey::new(&AES_256_GCM, &bytes)
            .map(SealingKey)
            .map_err(|_| SealError::BadKey("rejected"))
    }

    /// `plain` sealed for `owner` and `server`: base64 of nonce ‖ ciphertext.
    pub fn seal(&self, owner: &str, server: &str, plain: &[u8]) -> Result<String, SealError> {
        let mut data = plain.to_vec();
        let nonce = self
            .0
            .seal_in_place_append_tag(Aad::from(aad(owner, server)), &mut data)
            .map_err(|_| SealError::Seal)?;
        let mut out = nonce.as_ref().to_vec();
        out.extend_from_slice(&data);
        Ok(base64::engine::general_purpose::STANDARD.encode(out))
    }

    /// What [`seal`](Self::seal) sealed for the same owner and server.
    pub fn open(&self, owner: &str, server: &str, sealed: &str) -> Result<Vec<u8>, SealError> {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .map_err(|_| SealError::Open)?;
        if raw.len() < NONCE_LEN {
            return Err(SealError::Open);
        }
        let (nonce, data) = raw.split_at(NONCE_LEN);
        let nonce = aws_lc_rs::aead::Nonce::try_assume_unique_for_key(nonce)
            .map_err(|_| SealError::Open)?;
        let mut data = data.to_vec();
        let plain = self
            .0
            .open_in_place(nonce, Aad::from(aad(owner, server)), &mut data)
            .map_err(|_| SealError::Open)?;
        Ok(plain.to_vec())
    }
}

/// The associated data: both names, length-prefixed so that no two pairs
/// write the same bytes.
fn aad(owner: &str, server: &str) -> Vec<u8> {
    let mut a = (owner.len() as u64).to_be_bytes().to_vec();
    a.extend_from_slice(owner.as_bytes());
    a.extend_from_slice(server.as_bytes());
    a
}

/// One stored connection, as listed: never its credentials.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConnectionRow {
    pub server: String,
    pub scopes: String,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Store {
    /// Stores (or replaces) `owner`'s sealed credentials for `server`.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn put_connection(
        &self,
        owner: &str,
        server: &str,
        sealed: &str,
        scopes: &str,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        // One statement, whatever else writes the same row (SQLite 3.24+
        // and PostgreSQL both read it); the first connection's time stays.
        sqlx::query(
            "INSERT INTO connections (owner, server, sealed, scopes, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (owner, server) DO UPDATE SET sealed = excluded.sealed, \
             scopes = excluded.scopes, updated_at = excluded.updated_at",
        )
        .bind(owner)
        .bind(server)
        .bind(sealed)
        .bind(scopes)
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await?;
        self.committed();
        Ok(())
    }

    /// `owner`'s sealed credentials for `server`, if connected.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn connection(
        &self,
        owner: &str,
        server: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT sealed FROM connections WHERE owner = $1 AND server = $2")
            .bind(owner)
            .bind(server)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => Some(r.try_get::<String, _>("sealed")?),
            None => None,
        })
    }

    /// `owner`'s connected servers, by name.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn connections(&self, owner: &str) -> Result<Vec<ConnectionRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT server, scopes, created_at, updated_at FROM connections \
             WHERE owner = $1 ORDER BY server",
        )
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ConnectionRow {
                    server: r.try_get("server")?,
                    scopes: r.try_get("scopes")?,
                    created_at: r.try_get("created_at")?,
                    updated_at: r.try_get("updated_at")?,
                })
            })
            .collect()
    }

    /// Forgets `owner`'s credentials for `server`; `false`: there were none.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn delete_connection(&self, owner: &str, server: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM connections WHERE owner = $1 AND server = $2")
            .bind(owner)
            .bind(server)
            .execute(&self.pool)
            .await?;
        self.committed();
        Ok(done.rows_affected() > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn a_sealed_row_opens_only_for_its_owner_and_server() {
        let k = SealingKey::parse(KEY).unwrap();
        let sealed = k.seal("owner-a", "docs", b"the-token").unwrap();
        assert!(!sealed.contains("the-token"));
        assert_eq!(k.open("owner-a", "docs", &sealed).unwrap(), b"the-token");
        assert!(k.open("owner-b", "docs", &sealed).is_err());
        assert!(k.open("owner-a", "other", &sealed).is_err());
        let other = SealingKey::parse(&"11".repeat(32)).unwrap();
        assert!(other.open("owner-a", "docs", &sealed).is_err());
        assert!(format!("{k:?}").contains("redacted"));
    }

    #[test]
    fn a_key_of_the_wrong_length_is_refused() {
        assert!(SealingKey::parse("abcd").is_err());
        assert!(SealingKey::parse(&"00".repeat(16)).is_err());
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert!(SealingKey::parse(&b64).is_ok());
    }
}
