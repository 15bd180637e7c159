-- turnstile store: a machine's trace one row at a time.
--
-- Portable SQL, like 0001: runs unchanged on SQLite and PostgreSQL.
--
-- A step used to rewrite each machine's whole snapshot, trace included, so
-- a turn that streams one delta per commit wrote O(n²) bytes of trace. Now
-- `machines.snapshot` holds the table, its hash and the state, and each row
-- the machine took is one row here, `n` counting from 0: a step inserts
-- only the rows added since the last commit. Snapshots written before this
-- migration keep their trace inline and have no rows here; readers take the
-- rows when there are any, else the inline trace.

CREATE TABLE machine_rows (
    thread_id TEXT    NOT NULL REFERENCES threads (id),
    turn_id   TEXT    NOT NULL,
    name      TEXT    NOT NULL,
    n         BIGINT  NOT NULL CHECK (n >= 0),
    row_id    TEXT    NOT NULL CHECK (length(row_id) > 0),
    PRIMARY KEY (thread_id, turn_id, name, n)
);
