-- PostgreSQL dialect of sql/0010_lease.sql (the same tables, columns and meaning; integers are
-- BIGINT).
-- Flotilla controller state, version 10: the leader lease of the controllers (issue #20).
-- One row. A controller leads while it holds it: `holder` names it ('' when free), `epoch`
-- is the fencing token (each new holder increments it; every state-changing transaction
-- checks holder and epoch in the same transaction and renews the expiry), `expires_at` is
-- in milliseconds since the epoch by the database's clock, `session` the holder's database
-- session (PostgreSQL's backend pid: a session gone frees the lease at once; 0: none),
-- `addr` where the holder listens (host:port), for standbys and commands to follow it.
CREATE TABLE ha_lease (
    id         BIGINT PRIMARY KEY CHECK (id = 1),
    holder     TEXT    NOT NULL,
    epoch      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    session    BIGINT NOT NULL,
    addr       TEXT    NOT NULL
);
INSERT INTO ha_lease (id, holder, epoch, expires_at, session, addr) VALUES (1, '', 0, 0, 0, '');
