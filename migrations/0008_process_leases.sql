-- turnstile store: which server processes are alive (issue 34 item 10).
--
-- Portable SQL, like 0001: runs unchanged on SQLite and PostgreSQL.
--
-- Each process inserts its own row at start-up (a random id) and renews
-- `expires_at` while it runs, as a turn renews its thread's lease. What a
-- process holds in memory (a 2025-11-25 question's open call) is stored
-- with its id, and start-up recovery settles such a thing only when its
-- holder's row has expired: a second process, on the same SQLite file or
-- the same PostgreSQL database, leaves a live process's questions alone.

CREATE TABLE process_leases (
    process_id TEXT   NOT NULL PRIMARY KEY CHECK (length(process_id) > 0),
    started_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
