-- turnstile store: one running turn per thread, across processes.
--
-- Portable SQL, like 0001: runs unchanged on SQLite and PostgreSQL.
--
-- A row is a lease: turn `turn_id` has held the thread since `claimed_at`
-- and holds it until `expires_at` (both unix milliseconds, written by the
-- application). The holder pushes `expires_at` forward while its turn runs
-- and deletes the row when the turn ends. A crashed holder's row simply
-- expires; the next claim takes it over in one statement,
-- `INSERT ... ON CONFLICT (thread_id) DO UPDATE ... WHERE
-- turn_leases.expires_at <= now` (see docs/adr/0009-turn-lease.md).

CREATE TABLE turn_leases (
    thread_id  TEXT   NOT NULL PRIMARY KEY REFERENCES threads (id),
    turn_id    TEXT   NOT NULL CHECK (length(turn_id) > 0),
    claimed_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
