-- turnstile store: pointers a turn reads instead of scanning its thread
-- (issue 19). A turn needs the population a narrowing follow-up narrows
-- (the last answer, card or released scope) and the last delivery of an
-- export's capability; each step that appends such a record moves the
-- pointer in the statement that allocates its seq, so a turn reads one
-- row, not the thread.
--
-- Portable SQL, like 0001: runs unchanged on SQLite and PostgreSQL.
--
-- 0: none yet. NULL: a thread from before this migration, whose
-- population is found by a scan until its next answer sets the pointer
-- (deliveries came with this migration, so such a thread has none).

ALTER TABLE threads ADD COLUMN population_seq BIGINT;
ALTER TABLE threads ADD COLUMN delivery_seq BIGINT;
