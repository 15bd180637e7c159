-- turnstile store: the tool servers each user connected (issue 40 §3).
--
-- Portable SQL, like 0001: runs unchanged on SQLite and PostgreSQL.
--
-- One row per owner (the thread owner's hash, never a subject) and server
-- (`auth = "user"`). `sealed` is the OAuth credentials (the token response
-- and the client id) as AES-256-GCM ciphertext under the
-- key in `TURNSTILE_CONNECTIONS_KEY`, with the owner and server as its
-- associated data, so a row copied to another owner or server does not
-- open. No column holds a token in plaintext.

CREATE TABLE connections (
    owner      TEXT   NOT NULL CHECK (length(owner) > 0),
    server     TEXT   NOT NULL CHECK (length(server) > 0),
    sealed     TEXT   NOT NULL,
    scopes     TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (owner, server)
);
