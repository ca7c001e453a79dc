//! The statements of both stores, written once for both databases: `$n` parameters (SQLite reads them as `?n`)
//! and `{now}`, the store's clock in milliseconds since the Unix epoch (PostgreSQL's clock, or a literal of this
//! machine's clock for SQLite).

/// The statuses of a task that has not ended.
const ACTIVE: &str = "('working', 'input_required')";

/// The statuses of a task that has ended.
const ENDED: &str = "('completed', 'failed', 'cancelled', 'lost')";

/// The statements of one table in one dialect.
#[derive(Clone)]
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

    /// Keeps a record ($1 key, $2 record, $3 expires_at_ms, $4 record id), replacing the key's, unless the record
    /// was taken before: no row then.
    pub(crate) fn pending_save(&self) -> String {
        self.sql(
            "INSERT INTO {t} (key, record, expires_at_ms, saved_at_ms)
             SELECT CAST($1 AS text), CAST($2 AS text), CAST($3 AS bigint), {now}
             WHERE NOT EXISTS (SELECT 1 FROM {t}_consumed WHERE id = CAST($4 AS text))
             ON CONFLICT (key) DO UPDATE SET record = excluded.record, expires_at_ms = excluded.expires_at_ms,
                 saved_at_ms = excluded.saved_at_ms",
        )
    }

    /// Records that the record $1 (id), of key $2, expiring at $3, was taken: one row, or none when it was taken
    /// before.
    pub(crate) fn pending_consume(&self) -> String {
        self.sql("INSERT INTO {t}_consumed (id, key, expires_at_ms) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING")
    }

    /// Deletes the records of taken calls expired longer ago than $1 ms.
    pub(crate) fn pending_purge_consumed(&self) -> String {
        self.sql("DELETE FROM {t}_consumed WHERE expires_at_ms + $1 < {now}")
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

    // ---- Tasks ----

    /// The columns a task is read with, then the store's clock.
    fn task_columns(&self) -> &'static str {
        "id, tool, tenant, principal, status, message, version, lease_until_ms, keep_ms, poll_ms, request, outcome, \
         created_ms, updated_ms, {now}"
    }

    /// Creates a task ($1 id, $2 tool, $3 tenant, $4 principal, $5 lease token, $6 lease ms, $7 keep ms, $8 poll
    /// ms), working under the lease, or takes the id of an ended task past its keep time (its version goes on).
    /// Returns the task when it is created, no row when the id is taken.
    pub(crate) fn task_create(&self) -> String {
        self.sql(&format!(
            "INSERT INTO {{t}} (id, tool, tenant, principal, status, message, version, lease, lease_ms, lease_until_ms,
                 keep_ms, poll_ms, request, answers, outcome, created_ms, updated_ms)
             VALUES ($1, $2, $3, $4, 'working', NULL, 1, $5, $6, {{now}} + $6, $7, $8, NULL, NULL, NULL, {{now}}, {{now}})
             ON CONFLICT (id) DO UPDATE SET tool = excluded.tool, tenant = excluded.tenant,
                 principal = excluded.principal, status = 'working', message = NULL, version = {{t}}.version + 1,
                 lease = excluded.lease, lease_ms = excluded.lease_ms, lease_until_ms = excluded.lease_until_ms,
                 keep_ms = excluded.keep_ms, poll_ms = excluded.poll_ms, request = NULL, answers = NULL,
                 outcome = NULL, created_ms = excluded.created_ms, updated_ms = excluded.updated_ms
             WHERE {{t}}.status IN {ENDED} AND {{t}}.updated_ms + {{t}}.keep_ms < excluded.updated_ms
             RETURNING {}",
            self.task_columns()
        ))
    }

    /// The task $1.
    pub(crate) fn task_read(&self) -> String {
        self.sql(&format!("SELECT {} FROM {{t}} WHERE id = $1", self.task_columns()))
    }

    /// Reports the task $1 lost ($2 the message) if its lease expired before it ended; the task when it did.
    pub(crate) fn task_lose(&self) -> String {
        self.sql(&format!(
            "UPDATE {{t}} SET status = 'lost', message = $2, version = version + 1, lease = NULL,
                 lease_until_ms = NULL, request = NULL, answers = NULL, updated_ms = {{now}}
             WHERE id = $1 AND status IN {ACTIVE} AND lease_until_ms < {{now}}
             RETURNING {}",
            self.task_columns()
        ))
    }

    /// Reports every task whose lease expired before it ended lost ($1 the message); their ids, statuses,
    /// versions and update times.
    pub(crate) fn task_lose_all(&self) -> String {
        self.sql(&format!(
            "UPDATE {{t}} SET status = 'lost', message = $1, version = version + 1, lease = NULL,
                 lease_until_ms = NULL, request = NULL, answers = NULL, updated_ms = {{now}}
             WHERE status IN {ACTIVE} AND lease_until_ms < {{now}}
             RETURNING id, status, version, updated_ms"
        ))
    }

    /// The owner's change of the task $1 under lease $2 (`set`, with parameters from $3 on), version bumped; the
    /// task when the lease is the task's and has not expired, no row otherwise.
    fn task_owned(&self, set: &str) -> String {
        self.sql(&format!(
            "UPDATE {{t}} SET {set}, version = version + 1, updated_ms = {{now}}
             WHERE id = $1 AND lease = $2 AND status IN {ACTIVE} AND lease_until_ms >= {{now}}
             RETURNING {}",
            self.task_columns()
        ))
    }

    /// The task works again ($3 the status message), its input request withdrawn.
    pub(crate) fn task_working(&self) -> String {
        self.task_owned("status = 'working', message = $3, request = NULL")
    }

    /// The task waits for input: $3 the request's JSON.
    pub(crate) fn task_input_required(&self) -> String {
        self.task_owned("status = 'input_required', message = NULL, request = $3")
    }

    /// The task ends: $3 `completed` or `failed`, $4 the result's or the error's JSON; its lease, request and
    /// answers dropped.
    pub(crate) fn task_finish(&self) -> String {
        self.task_owned(
            "status = $3, outcome = $4, message = NULL, lease = NULL, lease_until_ms = NULL, request = NULL, \
             answers = NULL",
        )
    }

    /// Extends the lease $2 of the task $1 by the task's lease time from now, if it has not expired; its new
    /// expiry.
    pub(crate) fn task_heartbeat(&self) -> String {
        self.sql(&format!(
            "UPDATE {{t}} SET lease_until_ms = {{now}} + lease_ms
             WHERE id = $1 AND lease = $2 AND status IN {ACTIVE} AND lease_until_ms >= {{now}}
             RETURNING lease_until_ms"
        ))
    }

    /// Adds the answer $2 (JSON) to the task $1, waiting for input, whose lease has not expired; the task works
    /// again. The answers are kept as the text of a JSON array, appended to verbatim.
    pub(crate) fn task_answer(&self) -> String {
        self.sql(&format!(
            "UPDATE {{t}} SET answers = CASE WHEN answers IS NULL THEN '[' || CAST($2 AS text) || ']'
                     ELSE substr(answers, 1, length(answers) - 1) || ',' || CAST($2 AS text) || ']' END,
                 status = 'working', message = NULL, request = NULL, version = version + 1, updated_ms = {{now}}
             WHERE id = $1 AND status = 'input_required' AND lease_until_ms >= {{now}}
             RETURNING {}",
            self.task_columns()
        ))
    }

    /// The answers of the task $1 under lease $2 (a row when the lease holds), locked until the transaction ends.
    pub(crate) fn task_answers(&self) -> String {
        let lock = if self.sqlite { "" } else { " FOR UPDATE" };
        self.sql(&format!(
            "SELECT answers FROM {{t}}
             WHERE id = $1 AND lease = $2 AND status IN {ACTIVE} AND lease_until_ms >= {{now}}{lock}"
        ))
    }

    /// Drops the answers of the task $1 (taken).
    pub(crate) fn task_answers_taken(&self) -> String {
        self.sql("UPDATE {t} SET answers = NULL WHERE id = $1")
    }

    /// Cancels the task $1 ($2 the message) if it has not ended (nor its lease expired); the task when it did.
    pub(crate) fn task_cancel(&self) -> String {
        self.sql(&format!(
            "UPDATE {{t}} SET status = 'cancelled', message = $2, lease = NULL, lease_until_ms = NULL, request = NULL,
                 answers = NULL, version = version + 1, updated_ms = {{now}}
             WHERE id = $1 AND status IN {ACTIVE} AND lease_until_ms >= {{now}}
             RETURNING {}",
            self.task_columns()
        ))
    }

    /// Deletes the ended tasks past their keep time.
    pub(crate) fn task_purge(&self) -> String {
        self.sql(&format!("DELETE FROM {{t}} WHERE status IN {ENDED} AND updated_ms + keep_ms < {{now}}"))
    }

    /// The store's clock (PostgreSQL's; SQLite's is this machine's).
    #[cfg(feature = "postgres")]
    pub(crate) fn task_now(&self) -> String {
        self.sql("SELECT {now}")
    }

    /// The id, status, version and update time of the tasks changed at $1 or later.
    pub(crate) fn task_changed_since(&self) -> String {
        self.sql("SELECT id, status, version, updated_ms FROM {t} WHERE updated_ms >= $1")
    }

    /// The id, status, version and update time of the tasks of ids $1 (an array; PostgreSQL).
    #[cfg(feature = "postgres")]
    pub(crate) fn task_versions(&self) -> String {
        self.sql("SELECT id, status, version, updated_ms FROM {t} WHERE id = ANY($1)")
    }
}
