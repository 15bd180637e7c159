-- turnstile store: who owns a thread and who decided an approval (issue 20,
-- tables/ownership.ron). The licence gate's decisions are records of the
-- thread (kind `licence`), committed with the plan frame they decided.
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
