//! The statements of both stores, written once for both databases: `$n` parameters (SQLite reads them as `?n`)
//! and `{now}`, the store's clock in milliseconds since the Unix epoch (PostgreSQL's clock, or a literal of this
//! machine's clock for SQLite).

/// The statements of one table in one dialect.
pub(crate) struct Statements {
    pub(crate) table: String,
    now: String,
    sqlite: bool,
}

impl Statements {
    #[cfg(feature = "postgres")]
    /// For PostgreSQL: `{now}` is the transaction's start by the server's clock.
    pub(crate) fn postgres(table: &str) -> Statements {
        Statements {
            table: table.to_owned(),
            now: "CAST(floor(extract(epoch FROM now()) * 1000) AS bigint)".to_owned(),
            sqlite: false,
        }
    }

    #[cfg(feature = "sqlite")]
    /// For SQLite, at `now_ms` of this machine's clock.
    pub(crate) fn sqlite(table: &str, now_ms: i64) -> Statements {
        Statements { table: table.to_owned(), now: now_ms.to_string(), sqlite: true }
    }

    fn sql(&self, template: &str) -> String {
        let text = template.replace("{t}", &self.table).replace("{now}", &self.now);
        if self.sqlite { text.replace('$', "?") } else { text }
    }

    // ---- Pending calls ----

    /// Keeps a record ($1 key, $2 record, $3 expires_at_ms), replacing the key's.
    pub(crate) fn pending_save(&self) -> String {
        self.sql(
            "INSERT INTO {t} (key, record, expires_at_ms, saved_at_ms) VALUES ($1, $2, $3, {now})
             ON CONFLICT (key) DO UPDATE SET record = excluded.record, expires_at_ms = excluded.expires_at_ms,
                 saved_at_ms = excluded.saved_at_ms",
        )
    }

    /// Every record, in key order (bytewise).
    pub(crate) fn pending_list(&self) -> String {
        let collate = if self.sqlite { "" } else { " COLLATE \"C\"" };
        self.sql(&format!("SELECT key, record FROM {{t}} ORDER BY key{collate}"))
    }

    /// Deletes the key's record ($1) and returns it.
    pub(crate) fn pending_take(&self) -> String {
        self.sql("DELETE FROM {t} WHERE key = $1 RETURNING record")
    }

    /// Deletes the records expired longer ago than $1 ms.
    pub(crate) fn pending_purge(&self) -> String {
        self.sql("DELETE FROM {t} WHERE expires_at_ms + $1 < {now}")
    }

    // ---- Effect records ----

    /// Claims a key ($1 key, $2 fingerprint, $3 lease token, $4 lease ms, $5 retention ms): inserts a running
    /// record, or takes over one that is forgotten (finished, or its lease expired, longer ago than the retention)
    /// or whose lease expired for the same fingerprint. Returns the lease's expiry when the claim is this call's,
    /// no row when it is refused. One statement: of concurrent claims, the database lets exactly one through.
    pub(crate) fn effect_claim(&self) -> String {
        self.sql(
            "INSERT INTO {t} (key, fingerprint, state, lease, lease_until_ms, result, updated_ms)
             VALUES ($1, $2, 'running', $3, {now} + $4, NULL, {now})
             ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint, state = 'running',
                 lease = excluded.lease, lease_until_ms = excluded.lease_until_ms, result = NULL,
                 updated_ms = excluded.updated_ms
             WHERE ({t}.state = 'done' AND {t}.updated_ms + $5 < excluded.updated_ms)
                OR ({t}.state = 'running' AND {t}.lease_until_ms + $5 < excluded.updated_ms)
                OR ({t}.state = 'running' AND {t}.lease_until_ms < excluded.updated_ms
                    AND {t}.fingerprint = excluded.fingerprint)
             RETURNING lease_until_ms",
        )
    }

    /// The key's record ($1), and the store's clock.
    pub(crate) fn effect_read(&self) -> String {
        self.sql("SELECT fingerprint, state, lease_until_ms, result, updated_ms, {now} FROM {t} WHERE key = $1")
    }

    /// Records the result ($3) of the run holding lease $2 on key $1. The record keeps the lease's token, so that a
    /// second finish under the same lease is told from a lost lease ([`Statements::effect_finished_under`]).
    pub(crate) fn effect_finish(&self) -> String {
        self.sql(
            "UPDATE {t} SET state = 'done', result = $3, lease_until_ms = NULL, updated_ms = {now}
             WHERE key = $1 AND lease = $2 AND state = 'running'",
        )
    }

    /// Whether key $1 was finished under lease $2 (one row) or not (none).
    pub(crate) fn effect_finished_under(&self) -> String {
        self.sql("SELECT 1 FROM {t} WHERE key = $1 AND lease = $2 AND state = 'done'")
    }

    /// Deletes the running record of key $1 under lease $2.
    pub(crate) fn effect_abandon(&self) -> String {
        self.sql("DELETE FROM {t} WHERE key = $1 AND lease = $2 AND state = 'running'")
    }

    /// Extends lease $2 on key $1 to $3 ms from now; its new expiry.
    pub(crate) fn effect_renew(&self) -> String {
        self.sql(
            "UPDATE {t} SET lease_until_ms = {now} + $3 WHERE key = $1 AND lease = $2 AND state = 'running'
             RETURNING lease_until_ms",
        )
    }

    /// Deletes the records past the retention ($1 ms).
    pub(crate) fn effect_purge(&self) -> String {
        self.sql(
            "DELETE FROM {t} WHERE (state = 'done' AND updated_ms + $1 < {now})
                OR (state = 'running' AND lease_until_ms + $1 < {now})",
        )
    }
}
