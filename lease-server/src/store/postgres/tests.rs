//! The plans PostgreSQL makes of `list` and the purge, against a real cluster (ignored by default: run
//! by tests/e2e/lease_service/lease_service_faults.test.mjs with a throwaway cluster in `WEBLOCKS_TEST_POSTGRES`).

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::NoTls;

use super::list::{list_sql, purge_sql};
use super::pool::SCHEMA;
use super::{NOW_MS, PgTimeouts, PostgresStore, StoreOptions};
use crate::events::Events;

/// The plan PostgreSQL keeps for `sql` once prepared (its generic plan), with these parameters.
async fn plan(client: &tokio_postgres::Client, sql: &str, types: &str, args: &str) -> String {
    client
        .batch_execute(&format!(
            "DEALLOCATE ALL; SET plan_cache_mode = force_generic_plan; PREPARE p ({types}) AS {sql}"
        ))
        .await
        .unwrap();
    let rows = client
        .simple_query(&format!("EXPLAIN EXECUTE p ({args})"))
        .await
        .unwrap();
    rows.iter()
        .filter_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Run by tests/e2e/lease_service/lease_service_faults.test.mjs with a throwaway cluster in `WEBLOCKS_TEST_POSTGRES`.
#[tokio::test]
#[ignore = "needs a PostgreSQL cluster (WEBLOCKS_TEST_POSTGRES)"]
async fn list_and_purge_read_through_an_index() {
    let url = std::env::var("WEBLOCKS_TEST_POSTGRES").expect("WEBLOCKS_TEST_POSTGRES");
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .batch_execute("DROP DATABASE IF EXISTS plans")
        .await
        .unwrap();
    client.batch_execute("CREATE DATABASE plans").await.unwrap();
    let url = url
        .rsplit_once('/')
        .map(|(base, _)| format!("{base}/plans"))
        .unwrap();
    let (client, connection) = tokio_postgres::connect(&url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client.batch_execute(SCHEMA).await.unwrap();
    // 40,000 leases of one type, half of them expired two days ago, and a few of another type.
    client
        .batch_execute(&format!(
            "INSERT INTO locks
             SELECT 'bulk', lpad(i::text, 6, '0'), lpad(to_hex(i), 32, '0'), {NOW_MS} + (CASE WHEN i % 2 = 0 THEN 60000 ELSE -172800000 END),
                    's', 'n', 0, 1, NULL
             FROM generate_series(1, 40000) AS i;
             INSERT INTO locks SELECT 'x', i::text, lpad(to_hex(1000000 + i), 32, '0'), {NOW_MS} + 60000, 's', 'n', 0, 1, NULL
             FROM generate_series(1, 5) AS i;
             ANALYZE locks;"
        ))
        .await
        .unwrap();
    for (sql, args) in [
        (list_sql(true), "'x', 10"),
        (list_sql(true), "'bulk', 10"),
        (list_sql(false), "NULL, 10"),
    ] {
        let plan = plan(&client, &sql, "text, bigint", args).await;
        assert!(
            plan.contains("Index Scan using locks_pkey on locks"),
            "{args}: {plan}"
        );
        assert!(plan.contains("Limit"), "{args}: {plan}");
        assert!(!plan.contains("Seq Scan on locks"), "{args}: {plan}");
    }
    let purge = plan(&client, &purge_sql(), "float8, bigint", "86400000, 1000").await;
    assert!(purge.contains("locks_by_expiry"), "{purge}");
    assert!(!purge.contains("Seq Scan on locks"), "{purge}");

    // The statements' answers: the live leases of the type, up to the limit; a purge of one batch.
    let events = Arc::new(Events::new().0);
    let options = StoreOptions {
        pg_pool: 2,
        sqlite_group: 1,
        pg: PgTimeouts {
            connect: Duration::from_secs(5),
            pool_wait: Duration::from_secs(5),
            statement: Duration::from_secs(5),
            lock: Duration::from_secs(5),
            idle_in_transaction: Duration::from_secs(5),
        },
    };
    let store = PostgresStore::open(url.parse().unwrap(), events, options)
        .await
        .unwrap();
    let (views, _) = store.list(Some("bulk".into()), 3).await.unwrap();
    let ids: Vec<&str> = views.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, ["000002", "000004", "000006"]);
    assert_eq!(store.list(Some("none".into()), 3).await.unwrap().0.len(), 0);
    assert_eq!(store.list(None, 10_000).await.unwrap().0.len(), 10_000);
    assert_eq!(store.purge_expired().await.unwrap(), 1000);
    store.close().await;
}
