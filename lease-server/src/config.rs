//! The service's configuration: every setting is a flag that can also come from the environment (the
//! flag wins). The shared token secret comes from the environment only (`WEBLOCKS_LEASE_SECRET`), so it
//! never shows in a process list.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use clap::Parser;
use weblocks::lease::key::MAX_TTL_MS;

use crate::limits::TtlBounds;
use crate::store::StoreOptions;

/// Where the `locks` table lives.
#[derive(Clone, Debug)]
pub enum Database {
    /// `sqlite:PATH`: a file, created on first start.
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…`: shared by any number of instances.
    Postgres(Box<tokio_postgres::Config>),
}

impl FromStr for Database {
    type Err = String;

    fn from_str(url: &str) -> Result<Database, String> {
        if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err("sqlite: needs a file path, e.g. sqlite:leases.sqlite3".into());
            }
            return Ok(Database::Sqlite(PathBuf::from(path)));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return tokio_postgres::Config::from_str(url)
                .map(|config| Database::Postgres(Box::new(config)))
                .map_err(|e| format!("not a PostgreSQL URL: {e}"));
        }
        Err("expected sqlite:PATH or postgres://USER@HOST:PORT/DATABASE".into())
    }
}

/// `weblocks-lease-server`: leases between users over HTTP/JSON (see docs/LEASES.md).
#[derive(Parser, Debug)]
#[command(name = "weblocks-lease-server", version, about)]
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

    /// How long a shutdown waits for in-flight requests, in ms.
    #[arg(
        long,
        env = "WEBLOCKS_LEASE_SHUTDOWN_GRACE_MS",
        default_value_t = 10_000
    )]
    pub shutdown_grace_ms: u64,
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
        Ok(())
    }

    pub fn store_options(&self) -> StoreOptions {
        StoreOptions {
            pg_pool: self.pg_pool,
            sqlite_group: self.sqlite_group,
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
