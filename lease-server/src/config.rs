//! The service's configuration: every setting is a flag that can also come from the environment (the
//! flag wins). The shared token secret comes from the environment only (`WEBLOCKS_LEASE_SECRET`), so it
//! never shows in a process list.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use weblocks::lease::key::MAX_TTL_MS;

use crate::connections::ConnectionLimits;
use crate::limits::TtlBounds;
use crate::store::{Database, PgTimeouts, StoreOptions};

fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// `weblocks-lease-server`: leases between users over HTTP/JSON (see docs/LEASES.md).
#[derive(Parser, Debug)]
#[command(
    name = "weblocks-lease-server",
    version,
    about,
    after_help = "Environment: WEBLOCKS_LEASE_SECRET (required, never a flag so that it stays out of \
                  process lists): the HS256 secret shared with the backend that mints the users' tokens, \
                  at least 32 bytes from a random generator, e.g. `openssl rand -hex 32`."
)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "WEBLOCKS_LEASE_LISTEN", default_value = "127.0.0.1:8787")]
    pub listen: SocketAddr,

    /// `sqlite:PATH` (one instance; the file is created on first start) or `postgres://…` (any number of
    /// instances on one database).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "sqlite:weblocks-leases.sqlite3"
    )]
    pub database: Database,

    /// Origins whose pages may call the service (CORS), comma-separated, e.g.
    /// `https://app.example.com`. None: no cross-origin page may.
    #[arg(long, env = "WEBLOCKS_LEASE_ORIGINS", value_delimiter = ',')]
    pub origins: Vec<String>,

    /// Shortest ttl a lease may be taken for, in ms.
    #[arg(long, env = "WEBLOCKS_LEASE_MIN_TTL_MS", default_value_t = 1000.0)]
    pub min_ttl_ms: f64,

    /// Longest ttl a lease may be taken for, and the most it may have left after an extension, in ms
    /// (at most 24 hours).
    #[arg(long, env = "WEBLOCKS_LEASE_MAX_TTL_MS", default_value_t = 3_600_000.0)]
    pub max_ttl_ms: f64,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "WEBLOCKS_LEASE_MAX_BODY_BYTES", default_value_t = 16 * 1024)]
    pub max_body_bytes: usize,

    /// Connections to PostgreSQL per instance (plus one that listens for changes).
    #[arg(long, env = "WEBLOCKS_LEASE_PG_POOL", default_value_t = 16)]
    pub pg_pool: usize,

    /// SQLite: the most operations committed together, in one transaction and one disk flush (1: each
    /// operation commits alone).
    #[arg(long, env = "WEBLOCKS_LEASE_SQLITE_GROUP", default_value_t = 256)]
    pub sqlite_group: usize,

    /// Log format: `text` or `json` (one object per line). The level comes from `RUST_LOG` (default info).
    #[arg(long, env = "WEBLOCKS_LEASE_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,

    /// How long a shutdown waits for in-flight requests and open connections, in ms.
    #[arg(
        long,
        env = "WEBLOCKS_LEASE_SHUTDOWN_GRACE_MS",
        default_value_t = 10_000
    )]
    pub shutdown_grace_ms: u64,

    /// Most HTTP connections open at once; one beyond is closed as soon as it is accepted.
    #[arg(long, env = "WEBLOCKS_LEASE_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,

    /// Most change streams open at once; one more is answered 503 `ServiceBusy`.
    #[arg(long, env = "WEBLOCKS_LEASE_MAX_STREAMS", default_value_t = 512)]
    pub max_streams: usize,

    /// A request's head must arrive within this, in ms, from the connection's opening or the end of
    /// the previous answer (so a kept-alive connection left unused this long is closed too).
    #[arg(
        long,
        env = "WEBLOCKS_LEASE_HEADER_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub header_timeout_ms: u64,

    /// A connection that moves no byte either way for this long, in ms, is closed (a change stream
    /// writes a keep-alive at least three times per period).
    #[arg(long, env = "WEBLOCKS_LEASE_IDLE_TIMEOUT_MS", default_value_t = 60_000)]
    pub idle_timeout_ms: u64,

    /// `/health` answers 503 if the database has not answered within this, in ms.
    #[arg(
        long,
        env = "WEBLOCKS_LEASE_HEALTH_TIMEOUT_MS",
        default_value_t = 2_000
    )]
    pub health_timeout_ms: u64,

    /// PostgreSQL: the most a new connection (TCP, TLS-less start-up and authentication) may take, in ms.
    #[arg(
        long,
        env = "WEBLOCKS_LEASE_PG_CONNECT_TIMEOUT_MS",
        default_value_t = 5_000
    )]
    pub pg_connect_timeout_ms: u64,

    /// PostgreSQL: the most an operation waits for a free pooled connection, in ms (then 503).
    #[arg(long, env = "WEBLOCKS_LEASE_PG_POOL_WAIT_MS", default_value_t = 5_000)]
    pub pg_pool_wait_ms: u64,

    /// PostgreSQL: `statement_timeout`, in ms. An operation that has not finished 1 s after it (a server
    /// that stopped answering) has its connection dropped.
    #[arg(
        long,
        env = "WEBLOCKS_LEASE_PG_STATEMENT_TIMEOUT_MS",
        default_value_t = 5_000
    )]
    pub pg_statement_timeout_ms: u64,

    /// PostgreSQL: `lock_timeout`, in ms: the most an operation waits for its key's row lock.
    #[arg(
        long,
        env = "WEBLOCKS_LEASE_PG_LOCK_TIMEOUT_MS",
        default_value_t = 3_000
    )]
    pub pg_lock_timeout_ms: u64,

    /// PostgreSQL: `idle_in_transaction_session_timeout`, in ms: the server ends a session left inside a
    /// transaction this long.
    #[arg(
        long,
        env = "WEBLOCKS_LEASE_PG_IDLE_IN_TRANSACTION_MS",
        default_value_t = 10_000
    )]
    pub pg_idle_in_transaction_ms: u64,
}

impl Config {
    /// The settings that flags alone cannot check.
    pub fn check(&self) -> Result<(), String> {
        let ttls = self.ttl_bounds();
        if !(ttls.min_ms > 0.0 && ttls.min_ms <= ttls.max_ms && ttls.max_ms <= MAX_TTL_MS) {
            return Err(format!(
                "need 0 < --min-ttl-ms <= --max-ttl-ms <= {MAX_TTL_MS} (24 hours), got {} and {}",
                ttls.min_ms, ttls.max_ms
            ));
        }
        for origin in &self.origins {
            let scheme_ok = origin.starts_with("http://") || origin.starts_with("https://");
            if !scheme_ok || origin.ends_with('/') || origin.contains(char::is_whitespace) {
                return Err(format!(
                    "--origins: {origin:?} is not an origin like https://app.example.com"
                ));
            }
        }
        if self.max_body_bytes < 256 || self.pg_pool == 0 || self.sqlite_group == 0 {
            return Err(
                "--max-body-bytes must be at least 256, --pg-pool and --sqlite-group at least 1"
                    .into(),
            );
        }
        if self.max_connections == 0 || self.max_streams == 0 {
            return Err("--max-connections and --max-streams must be at least 1".into());
        }
        let timeouts = [
            ("--header-timeout-ms", self.header_timeout_ms),
            ("--idle-timeout-ms", self.idle_timeout_ms),
            ("--health-timeout-ms", self.health_timeout_ms),
            ("--pg-connect-timeout-ms", self.pg_connect_timeout_ms),
            ("--pg-pool-wait-ms", self.pg_pool_wait_ms),
            ("--pg-statement-timeout-ms", self.pg_statement_timeout_ms),
            ("--pg-lock-timeout-ms", self.pg_lock_timeout_ms),
            (
                "--pg-idle-in-transaction-ms",
                self.pg_idle_in_transaction_ms,
            ),
        ];
        if let Some((flag, _)) = timeouts.iter().find(|(_, ms)| *ms == 0) {
            return Err(format!("{flag} must be at least 1 ms"));
        }
        Ok(())
    }

    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            pg_pool: self.pg_pool,
            sqlite_group: self.sqlite_group,
            pg: PgTimeouts {
                connect: ms(self.pg_connect_timeout_ms),
                pool_wait: ms(self.pg_pool_wait_ms),
                statement: ms(self.pg_statement_timeout_ms),
                lock: ms(self.pg_lock_timeout_ms),
                idle_in_transaction: ms(self.pg_idle_in_transaction_ms),
            },
        }
    }

    pub fn connection_limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: self.max_connections,
            header_timeout: ms(self.header_timeout_ms),
            idle_timeout: ms(self.idle_timeout_ms),
            grace: ms(self.shutdown_grace_ms),
        }
    }

    pub fn ttl_bounds(&self) -> TtlBounds {
        TtlBounds {
            min_ms: self.min_ttl_ms,
            max_ms: self.max_ttl_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        let config = Config::try_parse_from(["weblocks-lease-server"].iter().chain(args))
            .map_err(|e| e.to_string())?;
        config.check()?;
        Ok(config)
    }

    #[test]
    fn databases_are_sqlite_files_or_postgres_urls() {
        let config = parse(&["--database", "sqlite:/tmp/x.db"]).unwrap();
        assert!(
            matches!(config.database, Database::Sqlite(p) if p == std::path::Path::new("/tmp/x.db"))
        );
        let config = parse(&["--database", "postgres://u@127.0.0.1:5433/leases"]).unwrap();
        assert!(matches!(config.database, Database::Postgres(_)));
        let socket = parse(&[
            "--database",
            "postgres:///leases?host=/var/run/postgresql&user=leases",
        ])
        .unwrap();
        match socket.database {
            Database::Postgres(config) => assert_eq!(config.get_hosts().len(), 1),
            other => panic!("{other:?}"),
        }
        assert!(parse(&["--database", "mysql://x"]).is_err());
        assert!(parse(&["--database", "sqlite:"]).is_err());
    }

    #[test]
    fn help_names_the_secret_s_variable_and_every_limit_s() {
        use clap::CommandFactory;
        let help = Config::command().render_long_help().to_string();
        for variable in [
            "WEBLOCKS_LEASE_SECRET",
            "WEBLOCKS_LEASE_HEADER_TIMEOUT_MS",
            "WEBLOCKS_LEASE_MAX_CONNECTIONS",
            "WEBLOCKS_LEASE_PG_STATEMENT_TIMEOUT_MS",
        ] {
            assert!(help.contains(variable), "{variable} in {help}");
        }
        assert!(parse(&["--header-timeout-ms", "0"]).is_err());
        assert!(parse(&["--max-streams", "0"]).is_err());
    }

    #[test]
    fn bounds_and_origins_are_checked() {
        let config =
            parse(&["--origins", "http://127.0.0.1:8080,https://app.example.com"]).unwrap();
        assert_eq!(config.origins.len(), 2);
        assert!(parse(&["--origins", "app.example.com"]).is_err());
        assert!(parse(&["--origins", "https://app.example.com/"]).is_err());
        assert!(parse(&["--min-ttl-ms", "5000", "--max-ttl-ms", "1000"]).is_err());
        assert!(parse(&["--max-ttl-ms", "86400001"]).is_err());
        assert!(parse(&["--min-ttl-ms", "0"]).is_err());
        let defaults = parse(&[]).unwrap();
        assert_eq!(defaults.listen.to_string(), "127.0.0.1:8787");
        assert!(matches!(defaults.database, Database::Sqlite(_)));
    }
}
