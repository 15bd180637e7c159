-- turnstile store: one row per tool call a server made a task (issue 22
-- §4, tables/task.ron).
--
-- Portable SQL, like 0001: runs unchanged on SQLite and PostgreSQL.
--
-- Inserted when the call comes back as a task, before the first poll, so a
-- process that dies while following it leaves the task id behind: the next
-- start follows the same task (`restart`), and the call is never sent
-- again. `state` is the task machine's state and `machine` its snapshot;
-- settling is one compare-and-swap on `state`, so of two followers (the
-- turn and a follower after a restart) exactly one tells the user.
-- `task_id` is the server's and is never logged; `outcome` is what the user
-- was told when it settled (JSON), NULL until then.

CREATE TABLE tasks (
    task_key   TEXT   NOT NULL PRIMARY KEY CHECK (length(task_key) > 0),
    thread_id  TEXT   NOT NULL REFERENCES threads (id),
    turn_id    TEXT   NOT NULL,
    call_id    TEXT   NOT NULL,
    server     TEXT   NOT NULL,
    tool       TEXT   NOT NULL,
    task_id    TEXT   NOT NULL,
    state      TEXT   NOT NULL,
    machine    TEXT   NOT NULL,
    outcome    TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX tasks_by_thread ON tasks (thread_id, created_at);
CREATE INDEX tasks_by_state ON tasks (state);
