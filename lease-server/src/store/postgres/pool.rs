//! The connection pool: its session settings (the server-side timeouts), the schema created on its
//! first connection, and the rule that a connection goes back to the pool only outside any transaction.

use std::time::Duration;

use deadpool_postgres::{
    Client, Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use tokio_postgres::NoTls;

use super::Shared;
use crate::store::{PgTimeouts, StoreError, StoreOptions, storage};

/// Serialises schema creation between instances starting together (`CREATE TABLE IF NOT EXISTS` alone
/// can fail on a concurrent creation).
pub(super) const SCHEMA: &str = "
BEGIN;
SELECT pg_advisory_xact_lock(7301730173017301);
CREATE TABLE IF NOT EXISTS locks (
    type text NOT NULL,
    id text NOT NULL,
    lockid text NOT NULL UNIQUE,
    expiration_time double precision NOT NULL,
    holder_sub text NOT NULL,
    holder_name text NOT NULL,
    acquired_time double precision NOT NULL,
    fence bigint NOT NULL,
    revoked_lockid text,
    PRIMARY KEY (type, id)
);
CREATE INDEX IF NOT EXISTS locks_by_expiry ON locks (expiration_time);
CREATE TABLE IF NOT EXISTS lock_fences (
    type text NOT NULL,
    id text NOT NULL,
    fence bigint NOT NULL,
    PRIMARY KEY (type, id)
);
COMMIT;";

/// The pool for `config` (with the service's session settings), once its first connection has created
/// the tables; and that `config`, for the listening connection.
pub(super) async fn open(
    config: tokio_postgres::Config,
    options: &StoreOptions,
) -> Result<(Pool, tokio_postgres::Config), String> {
    let timeouts = options.pg;
    let config = with_session_settings(config, &timeouts);
    let manager = Manager::from_config(
        config.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(options.pg_pool)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(timeouts.pool_wait))
        .create_timeout(Some(timeouts.connect))
        .recycle_timeout(Some(timeouts.connect))
        .build()
        .map_err(|e| e.to_string())?;
    let cannot_connect = |why: String| {
        format!(
            "cannot connect to PostgreSQL at {}: {why}",
            describe(&config)
        )
    };
    let client = pool
        .get()
        .await
        .map_err(|e| cannot_connect(pool_error(e, &timeouts)))?;
    tokio::time::timeout(
        timeouts.statement + Duration::from_secs(1),
        client.batch_execute(SCHEMA),
    )
    .await
    .map_err(|_| cannot_connect("no answer while creating the tables".into()))?
    .map_err(|e| format!("cannot create the tables: {}", with_causes(&e)))?;
    drop(client);
    Ok((pool, config))
}

/// `host:port` (or socket directory), user and database of `config`, for an error message: never the
/// password.
fn describe(config: &tokio_postgres::Config) -> String {
    use tokio_postgres::config::Host;
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let port = config
                .get_ports()
                .get(i)
                .or(config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match host {
                Host::Tcp(name) => format!("{name}:{port}"),
                #[cfg(unix)]
                Host::Unix(dir) => format!("{}/.s.PGSQL.{port}", dir.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost:5432".to_owned()
    } else {
        hosts.join(", ")
    };
    format!(
        "{hosts} (user {}, database {})",
        config.get_user().unwrap_or("?"),
        config.get_dbname().or(config.get_user()).unwrap_or("?")
    )
}

/// An error and its causes, outermost first (`tokio_postgres` keeps the reason, e.g. "Connection
/// refused", in the source).
pub(super) fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text = format!("{text}: {inner_text}");
        }
        cause = inner.source();
    }
    text
}

/// Why a pooled connection could not be had.
fn pool_error(error: PoolError, timeouts: &PgTimeouts) -> String {
    use deadpool_postgres::TimeoutType;
    match error {
        PoolError::Timeout(TimeoutType::Wait) => format!(
            "no free connection within {} ms (all pooled connections busy)",
            timeouts.pool_wait.as_millis()
        ),
        PoolError::Timeout(TimeoutType::Create) => format!(
            "no answer within {} ms while connecting",
            timeouts.connect.as_millis()
        ),
        PoolError::Timeout(TimeoutType::Recycle) => format!(
            "no answer within {} ms while checking a pooled connection",
            timeouts.connect.as_millis()
        ),
        other => with_causes(&other),
    }
}

/// `config` with the service's session settings: its name (unless the URL gives one) and the server-side
/// timeouts.
fn with_session_settings(
    mut config: tokio_postgres::Config,
    timeouts: &PgTimeouts,
) -> tokio_postgres::Config {
    if config.get_application_name().is_none() {
        config.application_name("weblocks-lease-server");
    }
    let settings = format!(
        "-c statement_timeout={} -c lock_timeout={} -c idle_in_transaction_session_timeout={}",
        timeouts.statement.as_millis(),
        timeouts.lock.as_millis(),
        timeouts.idle_in_transaction.as_millis(),
    );
    let options = match config.get_options() {
        Some(given) if !given.is_empty() => format!("{given} {settings}"),
        _ => settings,
    };
    config.options(&options);
    config.connect_timeout(timeouts.connect);
    config
}

impl Shared {
    async fn client(&self) -> Result<Client, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|error| storage(format!("PostgreSQL: {}", pool_error(error, &self.timeouts))))
    }

    /// `work` on a pooled connection, within the deadline. The connection goes back to the pool only if
    /// it is known to be outside any transaction: after a store failure or a timeout it is dropped
    /// (closed, which makes the server roll back) instead.
    pub(super) async fn with_client<T>(
        &self,
        work: impl AsyncFnOnce(&Client) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let client = self.client().await?;
        let outcome = tokio::time::timeout(self.deadline, work(&client)).await;
        self.settle(client, outcome)
    }

    fn settle<T>(
        &self,
        client: Client,
        outcome: Result<Result<T, StoreError>, tokio::time::error::Elapsed>,
    ) -> Result<T, StoreError> {
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                if is_storage_failure(&error) {
                    drop(Object::take(client));
                }
                Err(error)
            }
            Err(_) => {
                drop(Object::take(client));
                Err(storage(format!(
                    "PostgreSQL did not answer within {} ms: connection dropped",
                    self.deadline.as_millis()
                )))
            }
        }
    }
}

/// Whether `error` is the store's own failure (rather than the core refusing the operation).
fn is_storage_failure(error: &StoreError) -> bool {
    !matches!(error, StoreError::Refused(_))
}
