-- turnstile store: threads, their messages, and machine snapshots per turn.
--
-- Portable SQL: this one file runs unchanged on SQLite and PostgreSQL.
-- TEXT and BIGINT only; no AUTOINCREMENT/SERIAL; timestamps are unix
-- milliseconds written by the application; JSON is stored as TEXT.

CREATE TABLE threads (
    id         TEXT   NOT NULL PRIMARY KEY,
    owner      TEXT,
    created_at BIGINT NOT NULL,
    -- Highest message seq handed out so far (0 = none). A step bumps it with
    -- `UPDATE ... RETURNING` inside its transaction, which row-locks the
    -- thread until commit: that is how seq allocation stays gapless and
    -- unique across processes.
    last_seq   BIGINT NOT NULL DEFAULT 0 CHECK (last_seq >= 0)
);

CREATE TABLE messages (
    thread_id  TEXT   NOT NULL REFERENCES threads (id),
    seq        BIGINT NOT NULL CHECK (seq >= 1),
    turn_id    TEXT   NOT NULL,
    role       TEXT   NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
    body       TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);

CREATE INDEX messages_turn ON messages (thread_id, turn_id);

CREATE TABLE machines (
    thread_id  TEXT   NOT NULL REFERENCES threads (id),
    turn_id    TEXT   NOT NULL,
    name       TEXT   NOT NULL CHECK (length(name) > 0),
    snapshot   TEXT   NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (thread_id, turn_id, name)
);
