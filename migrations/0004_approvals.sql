-- turnstile store: one row per action that waits for, or got, a human
-- decision (issue 17, tables/approval.ron).
--
-- Portable SQL, like 0001: runs unchanged on SQLite and PostgreSQL.
--
-- `state` is the approval machine's state and `machine` its snapshot
-- (table hash included). Deciding is one compare-and-swap on `state`:
-- `UPDATE approvals SET state = 'Confirming', ... WHERE interrupt_id = $1
-- AND state = 'Awaiting'`. The winner's row is its confirm intent,
-- committed before the confirm is sent; the loser changes nothing and is
-- told the row that forbids it. A pending interrupt is inserted in the same
-- transaction as the step that shows it. `action` holds what code needs
-- to settle it (the tools and their exact arguments, the preview shown);
-- `expires_at` is unix milliseconds.

CREATE TABLE approvals (
    interrupt_id TEXT   NOT NULL PRIMARY KEY CHECK (length(interrupt_id) > 0),
    thread_id    TEXT   NOT NULL REFERENCES threads (id),
    turn_id      TEXT   NOT NULL,
    state        TEXT   NOT NULL,
    machine      TEXT   NOT NULL,
    action       TEXT   NOT NULL,
    expires_at   BIGINT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);

CREATE INDEX approvals_by_thread ON approvals (thread_id, created_at);
CREATE INDEX approvals_by_state ON approvals (state);
