//! Every place that names lease error codes by hand, checked against the one table
//! (`weblocks_lease_server::error_code`): `LOCK_ERROR_CODES` in js/leases.js and the codes the JS lease
//! code raises or tests, `LockErrorCode` in types/leases.d.ts, and docs/LEASES.md's two tables (the
//! codes a `LockError` carries, and the service's statuses). The core's own names
//! (`LeaseError::code`) are checked in `error_code.rs`.

use std::collections::BTreeSet;

use weblocks_lease_server::error_code::{ErrorCode, InLockError};

fn read(path: &str) -> String {
    let full = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The codes a page's `LockError` carries as they are, in the table's order.
fn lock_error_codes() -> Vec<&'static str> {
    ErrorCode::ALL
        .into_iter()
        .filter(|code| code.row().in_lock_error == InLockError::AsIs)
        .map(ErrorCode::name)
        .collect()
}

/// The text of `source` between `start` and the first `end` after it.
fn between<'a>(source: &'a str, start: &str, end: &str) -> &'a str {
    let from = source.find(start).unwrap_or_else(|| panic!("no {start:?}")) + start.len();
    let to = source[from..]
        .find(end)
        .unwrap_or_else(|| panic!("no {end:?} after {start:?}"));
    &source[from..from + to]
}

/// Every `'Word'` (single-quoted, no space inside) in `text`, in order.
fn quoted(text: &str) -> Vec<&str> {
    text.split('\'')
        .skip(1)
        .step_by(2)
        .filter(|word| !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric()))
        .collect()
}

#[test]
fn js_lock_error_codes_are_the_table_s() {
    let leases = read("js/leases.js");
    let listed = between(&leases, "LOCK_ERROR_CODES = Object.freeze([", "]);");
    let names: Vec<&str> = listed
        .lines()
        .filter_map(|line| line.split("//").next())
        .flat_map(quoted)
        .collect();
    assert_eq!(names, lock_error_codes(), "js/leases.js LOCK_ERROR_CODES");
}

#[test]
fn the_js_lease_code_raises_and_tests_only_the_table_s_codes() {
    let carried = lock_error_codes();
    let mut seen = BTreeSet::new();
    for file in [
        "js/leases.js",
        "js/lease_server_store.js",
        "js/lease_idb_store.js",
        "js/lease_deadline.js",
    ] {
        let source = read(file);
        for context in [
            "LockError('",
            "lockError('",
            "code: '",
            "code === '",
            "code !== '",
            "code || '",
        ] {
            for (at, _) in source.match_indices(context) {
                let rest = &source[at + context.len()..];
                let code = &rest[..rest.find('\'').unwrap()];
                assert!(
                    carried.contains(&code),
                    "{file} names {code:?}, which is not a code a LockError carries \
                     (lease-server/src/error_code.rs)"
                );
                seen.insert(code.to_owned());
            }
        }
    }
    // The scan sees the codes the JS raises itself.
    assert!(
        ["StorageError", "Expired", "InvalidArgument"]
            .iter()
            .all(|code| seen.contains(*code)),
        "{seen:?}"
    );
}

#[test]
fn typescript_lock_error_code_is_the_table_s() {
    let types = read("types/leases.d.ts");
    let union = between(&types, "export type LockErrorCode =", ";");
    assert_eq!(
        quoted(union),
        lock_error_codes(),
        "types/leases.d.ts LockErrorCode"
    );
    assert!(
        !read("types/index.d.ts").contains("LockErrorCode ="),
        "one declaration of the codes"
    );
}

/// The rows of the markdown table under the header line `header` (up to its first blank line): each
/// row's cells.
fn table_rows(doc: &str, header: &str) -> Vec<Vec<String>> {
    let at = doc
        .find(header)
        .unwrap_or_else(|| panic!("docs/LEASES.md has no table {header:?}"));
    doc[at..]
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The `Code`-shaped words in backticks in `cell` (a capital first: not a flag or a permission).
fn codes_in(cell: &str) -> Vec<&str> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| word.starts_with(|c: char| c.is_ascii_uppercase()))
        .collect()
}

#[test]
fn the_lease_docs_code_table_is_the_table_s() {
    let doc = read("docs/LEASES.md");
    let mut documented: Vec<&str> = Vec::new();
    let rows = table_rows(&doc, "| `code` | meaning |");
    for row in &rows {
        documented.extend(codes_in(&row[0]));
    }
    let mut expected = lock_error_codes();
    expected.sort_unstable();
    documented.sort_unstable();
    assert_eq!(documented, expected, "docs/LEASES.md: the LockError codes");
}

#[test]
fn the_lease_docs_status_table_is_the_table_s() {
    let doc = read("docs/LEASES.md");
    let mut documented: Vec<(String, u16)> = Vec::new();
    for row in table_rows(&doc, "| status | codes |") {
        let statuses: Vec<u16> = row[0]
            .split(", ")
            .map(|s| s.parse().unwrap_or_else(|_| panic!("a status: {s:?}")))
            .collect();
        let codes = codes_in(&row[1]);
        match statuses[..] {
            [status] => documented.extend(codes.iter().map(|code| (code.to_string(), status))),
            _ => {
                assert_eq!(statuses.len(), codes.len(), "one code per status: {row:?}");
                documented.extend(
                    codes
                        .iter()
                        .zip(&statuses)
                        .map(|(code, status)| (code.to_string(), *status)),
                );
            }
        }
    }
    let mut expected: Vec<(String, u16)> = ErrorCode::ALL
        .into_iter()
        .map(|code| (code.name().to_owned(), code.status().as_u16()))
        .collect();
    expected.sort();
    documented.sort();
    assert_eq!(
        documented, expected,
        "docs/LEASES.md: the service's statuses"
    );
}
