-- baton lease schema for PostgreSQL (12 or later).
--
-- "baton_lease" is a placeholder: replace every occurrence with the Table
-- of your postgres.Config (optionally schema-qualified), for example
--
--   sed 's/baton_lease/ops.leader_lease/g' postgres.sql | psql "$DSN"
--
-- Backend.EnsureSchema runs this same file with the same substitution.
-- Every statement is idempotent. The derived names (the _token_seq
-- sequence, the _ticks and _runs tables) must keep their suffixes.

-- Fencing tokens. A sequence, not a column of the lease row: a row deleted
-- by hand and inserted again must never reuse a token. Never reset it.
CREATE SEQUENCE IF NOT EXISTS baton_lease_token_seq;

-- One row per election. All times come from the database clock
-- (clock_timestamp()). A row whose expires_at has passed is free, and so
-- is a missing row. holder is the leader's identity as JSON.
CREATE TABLE IF NOT EXISTS baton_lease (
    election    VARCHAR(255)   NOT NULL PRIMARY KEY,
    holder      TEXT           NOT NULL,
    token       BIGINT         NOT NULL,
    expires_at  TIMESTAMPTZ(6) NOT NULL,
    acquired_at TIMESTAMPTZ(6) NOT NULL,
    renewed_at  TIMESTAMPTZ(6) NOT NULL
);

-- Ledger: the newest claimed tick of each job (unix nanoseconds, UTC).
CREATE TABLE IF NOT EXISTS baton_lease_ticks (
    election   VARCHAR(255)   NOT NULL,
    job        VARCHAR(255)   NOT NULL,
    last_tick  BIGINT         NOT NULL,
    token      BIGINT         NOT NULL,
    claimed_at TIMESTAMPTZ(6) NOT NULL,
    PRIMARY KEY (election, job)
);

-- Ledger: recent runs of each job (tick in unix nanoseconds, UTC).
CREATE TABLE IF NOT EXISTS baton_lease_runs (
    election VARCHAR(255)   NOT NULL,
    job      VARCHAR(255)   NOT NULL,
    tick     BIGINT         NOT NULL,
    instance TEXT           NOT NULL,
    token    BIGINT         NOT NULL,
    catch_up BOOLEAN        NOT NULL,
    started  TIMESTAMPTZ(6) NOT NULL,
    ended    TIMESTAMPTZ(6),
    result   VARCHAR(16)    NOT NULL,
    error    TEXT           NOT NULL,
    attempts INTEGER        NOT NULL DEFAULT 0,
    PRIMARY KEY (election, job, tick)
);

-- Control store: operators' state of each election (pauses, run-now
-- requests, the instance registry). version comes from the sequence, so
-- that a key deleted and made again never gets a version back. k is
-- compared bytewise (COLLATE "C"): prefixes are listed as key ranges.
CREATE SEQUENCE IF NOT EXISTS baton_lease_control_seq;
CREATE TABLE IF NOT EXISTS baton_lease_control (
    election VARCHAR(255) NOT NULL,
    k        VARCHAR(300) COLLATE "C" NOT NULL,
    v        BYTEA        NOT NULL,
    version  BIGINT       NOT NULL,
    PRIMARY KEY (election, k)
);

-- Upgrades of tables created by an earlier version of this file (each
-- idempotent; existing rows keep their values).
-- attempts: calls of the job function for the tick (0 or 1: one).
ALTER TABLE baton_lease_runs ADD COLUMN IF NOT EXISTS attempts INTEGER NOT NULL DEFAULT 0;
