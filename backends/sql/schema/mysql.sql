-- baton lease schema for MySQL (8 or later) and MariaDB (10.5 or later).
--
-- "baton_lease" is a placeholder: replace every occurrence with the Table
-- of your mysql.Config (optionally database-qualified), for example
--
--   sed 's/baton_lease/ops.leader_lease/g' mysql.sql | mysql ops
--
-- Backend.EnsureSchema runs this same file with the same substitution.
-- Every statement is idempotent. The derived names (the _seq, _ticks and
-- _runs tables) must keep their suffixes.
--
-- Times are DATETIME(6) in UTC, written and compared with UTC_TIMESTAMP(6)
-- of the database, so that the session time_zone of a client cannot move
-- an expiry. utf8mb4_bin makes names compare exactly (case-sensitive).

-- One row per election. A row whose expires_at has passed is free, and so
-- is a missing row. holder is the leader's identity as JSON.
CREATE TABLE IF NOT EXISTS baton_lease (
    election    VARCHAR(255) NOT NULL PRIMARY KEY,
    holder      TEXT         NOT NULL,
    token       BIGINT       NOT NULL,
    expires_at  DATETIME(6)  NOT NULL,
    acquired_at DATETIME(6)  NOT NULL,
    renewed_at  DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Fencing tokens: a one-row counter, kept apart from the lease rows so that
-- a row deleted by hand and inserted again never reuses a token. If the
-- counter row itself is lost it restarts above the largest token left in
-- the lease table.
CREATE TABLE IF NOT EXISTS baton_lease_seq (
    id    TINYINT NOT NULL PRIMARY KEY,
    token BIGINT  NOT NULL
) ENGINE=InnoDB;

-- Control store: operators' state of each election (pauses, run-now
-- requests, the instance registry). Versions come from the row with id 2
-- of the _seq table (id 1 is the tokens'), so that a key deleted and made
-- again never gets a version back; never delete that row.
CREATE TABLE IF NOT EXISTS baton_lease_control (
    election VARCHAR(255) NOT NULL,
    k        VARCHAR(300) NOT NULL,
    v        BLOB         NOT NULL,
    version  BIGINT       NOT NULL,
    PRIMARY KEY (election, k)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Ledger: the newest claimed tick of each job (unix nanoseconds, UTC).
CREATE TABLE IF NOT EXISTS baton_lease_ticks (
    election   VARCHAR(255) NOT NULL,
    job        VARCHAR(255) NOT NULL,
    last_tick  BIGINT       NOT NULL,
    token      BIGINT       NOT NULL,
    claimed_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (election, job)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Ledger: recent runs of each job (tick in unix nanoseconds, UTC).
CREATE TABLE IF NOT EXISTS baton_lease_runs (
    election VARCHAR(255) NOT NULL,
    job      VARCHAR(255) NOT NULL,
    tick     BIGINT       NOT NULL,
    instance TEXT         NOT NULL,
    token    BIGINT       NOT NULL,
    catch_up BOOLEAN      NOT NULL,
    started  DATETIME(6)  NOT NULL,
    ended    DATETIME(6)  NULL,
    result   VARCHAR(16)  NOT NULL,
    error    TEXT         NOT NULL,
    attempts INT          NOT NULL DEFAULT 0,
    PRIMARY KEY (election, job, tick)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Upgrades of tables created by an earlier version of this file. MySQL
-- has no ADD COLUMN IF NOT EXISTS, so they are not statements of this
-- file: Backend.EnsureSchema adds each missing column (existing rows keep
-- their values). By hand, once, if the column is missing:
--
--   ALTER TABLE baton_lease_runs ADD COLUMN attempts INT NOT NULL DEFAULT 0;
