-- turnstile store: who owns a thread, who decided an approval, and the
-- licence gate's decisions (issue 20, tables/ownership.ron and
-- tables/licence.ron).
--
-- Portable SQL, like 0001: runs unchanged on SQLite and PostgreSQL.
--
-- `threads.owner` holds a hash, never a raw value: sha256 of the session
-- id for `owner_kind = 'session'`, sha256 of the verified subject for
-- 'principal' (docs/identity.md: this keeps raw identifiers out of the
-- store; forgery is prevented at the HTTP edge, not by the hash).
-- Promotion from a session to a principal is one compare-and-swap on
-- (owner_kind, owner); `promoted_from` keeps the session hash it replaced,
-- so that session's return alone is refused by its own row. A thread from
-- before this migration has no owner_kind and is nobody's (row
-- `unowned-thread`).

ALTER TABLE threads ADD COLUMN owner_kind TEXT;
ALTER TABLE threads ADD COLUMN promoted_from TEXT;
CREATE INDEX threads_by_owner ON threads (owner_kind, owner, created_at);

-- The owner hash of the caller whose decision won the approval's swap.
ALTER TABLE approvals ADD COLUMN approver TEXT;

-- One row per licence decision: each planned call the gate classified.
CREATE TABLE licence_audit (
    thread_id     TEXT   NOT NULL REFERENCES threads (id),
    turn_id       TEXT   NOT NULL,
    seq           BIGINT NOT NULL,
    tool          TEXT   NOT NULL,
    required_tier TEXT,
    held_tiers    TEXT   NOT NULL,
    event         TEXT   NOT NULL,
    row_id        TEXT   NOT NULL,
    allowed       BIGINT NOT NULL CHECK (allowed IN (0, 1)),
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (thread_id, turn_id, seq)
);
